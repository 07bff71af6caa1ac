"""The one environment model: every variable parsed in one place, errors name it, the
README and the template name only variables that exist."""

from __future__ import annotations

import dataclasses
import re

import pytest

from acmi_core import AcmiValidationError, Settings
from acmi_core.base.settings import ENVIRONMENT
from tests.kit import ROOT, load_template

VARIABLES = {var.name for var in ENVIRONMENT}


def test_every_variable_sets_a_real_field() -> None:
    fields = {f.name for f in dataclasses.fields(Settings)}
    assert {var.field for var in ENVIRONMENT} <= fields
    assert len(VARIABLES) == len(ENVIRONMENT)


def test_values_are_parsed() -> None:
    settings = Settings.from_env(
        {
            "ACMI_STORE_TIMEOUT_S": "2.5",
            "ACMI_STORE_MAX_ATTEMPTS": "3",
            "ACMI_DEFAULT_TENANT": "acme",
            "ACMI_UPSTASH_TOKEN_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:t",
            "ACMI_REDIS_URL": "",  # empty: unset
        }
    )
    assert (settings.store_timeout_s, settings.store_max_attempts) == (2.5, 3)
    assert settings.default_tenant == "acme"
    assert settings.redis_url is None
    assert settings.needs_token_secret


@pytest.mark.parametrize(
    ("name", "raw", "rule"),
    [
        ("ACMI_STORE_TIMEOUT_S", "soon", "number"),
        ("ACMI_STORE_TIMEOUT_S", "nan", "number"),
        ("ACMI_STORE_TIMEOUT_S", "0", "range"),
        ("ACMI_STORE_MAX_ATTEMPTS", "2.5", "integer"),
        ("ACMI_STORE_MAX_ATTEMPTS", "0", "range"),
        ("ACMI_IDEMPOTENCY_TTL_S", "0", "range"),
        ("ACMI_DERIVED_IDEMPOTENCY_TTL_S", "-1", "range"),
        ("ACMI_MAX_BODY_BYTES", "1e6", "integer"),
        ("ACMI_AUTH_CACHE_S", "-5", "range"),
        ("ACMI_DEFAULT_TENANT", "Acme Corp", "tenant_format"),
        ("ACMI_REDIS_URL", "http://localhost:6379", "url"),
        ("UPSTASH_REDIS_REST_URL", "eu1-otter.upstash.io", "url"),
        ("ACMI_UPSTASH_TOKEN_SECRET_ARN", "acmi/upstash-token", "arn"),
        ("ACMI_API_KEY", "short", "min_length"),
    ],
)
def test_a_bad_value_names_the_variable_and_the_rule(name: str, raw: str, rule: str) -> None:
    with pytest.raises(AcmiValidationError) as err:
        Settings.from_env({name: raw})
    assert (err.value.field, err.value.rule) == (name, rule)
    if name in ("ACMI_API_KEY", "ACMI_REDIS_URL"):  # may carry a secret: never echoed
        assert raw not in str(err.value)


def test_settings_built_in_code_are_checked_too() -> None:
    with pytest.raises(AcmiValidationError) as err:
        Settings(idempotency_ttl_s=0)
    assert err.value.field == "ACMI_IDEMPOTENCY_TTL_S"


def test_the_readme_documents_every_variable() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = sorted(name for name in VARIABLES if f"`{name}`" not in readme)
    assert not missing, f"README.md does not document {missing}"


def test_the_template_sets_only_known_variables() -> None:
    env = load_template()["Globals"]["Function"]["Environment"]["Variables"]
    ours = {name for name in env if re.match(r"(ACMI|UPSTASH)_", name)}
    assert ours <= VARIABLES, sorted(ours - VARIABLES)

"""The one environment model: every variable parsed in one place, errors name it, the
README and the template name only variables that exist, no secret is ever echoed."""

from __future__ import annotations

import os
import re
import traceback
from typing import Any

import pydantic
import pytest

from acmi_core import AcmiValidationError, Settings
from acmi_core.base.settings import ENVIRONMENT
from tests.kit import ROOT, load_template

VARIABLES = {var.name for var in ENVIRONMENT}
# The fields that may hold a secret (a token, a key, a URL with a password): repr=False.
SECRETS = {
    "UPSTASH_REDIS_REST_TOKEN": "upstash_token",
    "ACMI_REDIS_URL": "redis_url",
    "ACMI_API_KEY": "api_key",
    "ANTHROPIC_API_KEY": "anthropic_api_key",
    "OPENAI_API_KEY": "openai_api_key",
}


def test_every_variable_sets_a_real_field() -> None:
    assert {var.field for var in ENVIRONMENT} <= set(Settings.model_fields)
    assert len(VARIABLES) == len(ENVIRONMENT)
    assert all(var.doc for var in ENVIRONMENT)
    # the variables of code-only fields (retry delays, the batch cap) do not exist
    assert {"retry_base_delay_s", "retry_max_delay_s", "max_batch_events"}.isdisjoint(
        var.field for var in ENVIRONMENT
    )


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


def readme_table() -> dict[str, str]:
    """The README's table of variables: {variable: its default column}."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("| setting (env) | default | meaning |", 1)[1].split("\n\n", 1)[0]
    rows = [row.split(" | ") for row in table.splitlines()[2:]]
    return {name: row[1] for row in rows for name in re.findall(r"`([A-Z_]+)`", row[0])}


def test_the_readme_table_is_the_environment_with_its_defaults() -> None:
    table = readme_table()
    assert set(table) == VARIABLES
    for var in ENVIRONMENT:
        default = Settings.model_fields[var.field].default
        shown = table[var.name]
        if default is None:  # unset, or what the code falls back to
            assert not re.fullmatch(r"`[^`$]+`( \(.*\))?", shown), (var.name, shown)
        else:
            literal = f"{default:g}" if isinstance(default, float) else str(default)
            assert shown.startswith(f"`{literal}`"), (var.name, shown, literal)


def test_the_template_sets_only_known_variables() -> None:
    env = load_template()["Globals"]["Function"]["Environment"]["Variables"]
    ours = {name for name in env if re.match(r"(ACMI|UPSTASH)_", name)}
    assert ours <= VARIABLES, sorted(ours - VARIABLES)


def test_settings_in_code_never_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACMI_STORE_TIMEOUT_S", "2.5")
    monkeypatch.setenv("ACMI_DEFAULT_TENANT", "acme")
    monkeypatch.setenv("ACMI_REDIS_URL", "")  # empty: unset
    assert Settings() == Settings.from_env({})
    assert (Settings().store_timeout_s, Settings().default_tenant) == (5.0, "default")
    from_env = Settings.from_env()
    assert (from_env.store_timeout_s, from_env.default_tenant, from_env.redis_url) == (
        2.5,
        "acme",
        None,
    )
    assert from_env == Settings.from_env(dict(os.environ))


def test_names_are_exact_and_unknown_ones_ignored() -> None:
    settings = Settings.from_env({"acmi_store_timeout_s": "soon", "ACMI_NOPE": "x", "HOME": "/h"})
    assert settings == Settings()


def test_defaults_are_the_documented_ones() -> None:
    settings = Settings()
    assert (settings.store_timeout_s, settings.store_max_attempts) == (5.0, 4)
    assert (settings.idempotency_ttl_s, settings.derived_idempotency_ttl_s) == (604800, 21600)
    assert (settings.operator, settings.summarizer, settings.secret_policy) == (
        "user:operator",
        "extractive",
        "reject",
    )
    assert settings.upstash_url is settings.redis_url is settings.archive_url is None
    assert not settings.needs_token_secret


def test_per_tenant_secret_policies() -> None:
    settings = Settings.from_env({"ACMI_SECRET_POLICY": "redact, acme=reject"})
    assert [settings.secret_policy_for(t) for t in ("acme", "beta")] == ["reject", "redact"]
    assert Settings(secret_policy="beta=redact").secret_policy_for("acme") == "reject"


def test_a_copy_is_checked_and_settings_are_frozen() -> None:
    settings = Settings.from_env({"ACMI_STORE_TIMEOUT_S": "2.5"})
    copy = settings.replace(upstash_token="t" * 30)
    assert (copy.upstash_token, copy.store_timeout_s, settings.upstash_token) == (
        "t" * 30,
        2.5,
        None,
    )
    with pytest.raises(AcmiValidationError) as err:
        settings.replace(idempotency_ttl_s=0)
    assert (err.value.field, err.value.rule) == ("ACMI_IDEMPOTENCY_TTL_S", "range")
    with pytest.raises(pydantic.ValidationError):
        settings.store_timeout_s = 1.0
    assert settings.store_timeout_s == 2.5


@pytest.mark.parametrize(
    ("kwargs", "field", "rule"),
    [
        ({"retry_base_delay_s": -0.1}, "retry_delay_s", "non_negative"),
        ({"retry_max_delay_s": -1.0}, "retry_delay_s", "non_negative"),
        ({"store_timeout_s": 0.0}, "ACMI_STORE_TIMEOUT_S", "range"),
        ({"store_max_attempts": 2.5}, "ACMI_STORE_MAX_ATTEMPTS", "int_from_float"),
        ({"operator": "nobody"}, "ACMI_OPERATOR", "format"),
    ],
)
def test_code_errors_name_the_variable_and_the_rule(
    kwargs: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(AcmiValidationError) as err:
        Settings(**kwargs)
    assert (err.value.field, err.value.rule) == (field, rule)


def test_the_error_messages_are_exact() -> None:
    cases = {
        "ACMI_STORE_TIMEOUT_S=soon": "ACMI_STORE_TIMEOUT_S: must be a number, got 'soon'",
        "ACMI_STORE_TIMEOUT_S=inf": "ACMI_STORE_TIMEOUT_S: must be a finite number, got 'inf'",
        "ACMI_STORE_TIMEOUT_S=0": "ACMI_STORE_TIMEOUT_S: must be > 0, got 0.0",
        "ACMI_STORE_MAX_ATTEMPTS=0": "ACMI_STORE_MAX_ATTEMPTS: must be >= 1, got 0",
        "ACMI_STORE_MAX_ATTEMPTS=3.0": "ACMI_STORE_MAX_ATTEMPTS: must be an integer, got '3.0'",
        "ACMI_ARCHIVE_URL=s3:/b": "ACMI_ARCHIVE_URL: must be <scheme>://<bucket>[/<prefix>],"
        " e.g. s3://my-bucket/acmi-archive",
        "ACMI_REDIS_URL=http://h": "ACMI_REDIS_URL: must start with redis:// or rediss:// or unix://",
    }
    for assignment, message in cases.items():
        name, raw = assignment.split("=", 1)
        with pytest.raises(AcmiValidationError) as err:
            Settings.from_env({name: raw})
        assert str(err.value) == message


SECRET = "s3cr3t-Value-That-Must-Never-Show-0123456789"


@pytest.mark.parametrize(
    "env",
    [
        {"ACMI_API_KEY": "shortpw"},  # the secret's own rule fails
        {"ACMI_REDIS_URL": f"http://:{SECRET}@host:6379"},
        {**{name: SECRET for name in SECRETS}, "ACMI_STORE_TIMEOUT_S": "soon"},  # another fails
        {**{name: SECRET for name in SECRETS}, "ACMI_OPERATOR": "nobody"},
    ],
)
def test_no_secret_in_an_error(env: dict[str, str]) -> None:
    with pytest.raises(AcmiValidationError) as err:
        Settings.from_env(env)
    told = "".join(traceback.format_exception(err.value))  # what a log of it would show
    told += str(err.value.__context__)  # suppressed, but a tracer may still walk to it
    secrets = [env[name] for name in SECRETS if name in env]
    assert secrets and not [s for s in secrets if s in told or s in repr(err.value)], told


def test_no_secret_in_a_wrong_type_error() -> None:
    with pytest.raises(AcmiValidationError) as err:
        Settings(api_key=[SECRET])  # type: ignore[arg-type]
    assert (err.value.field, err.value.rule) == ("ACMI_API_KEY", "string_type")
    assert SECRET not in "".join(traceback.format_exception(err.value))
    assert SECRET not in str(err.value.__context__)


def test_no_secret_in_a_repr() -> None:
    settings = Settings.from_env({name: SECRET for name in SECRETS if name != "ACMI_REDIS_URL"})
    settings = settings.replace(redis_url=f"redis://:{SECRET}@host:6379")
    assert all(
        getattr(settings, field) and SECRET in getattr(settings, field)
        for field in SECRETS.values()
    )
    for shown in (repr(settings), str(settings), repr([settings]), f"{settings!r}"):
        assert SECRET not in shown and "home=None" in shown

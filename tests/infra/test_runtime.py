"""functions._runtime: the Upstash token from Secrets Manager (moto), and the cold-start
import budget of the ingest path (fresh interpreters, as a Lambda cold start would be)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

if TYPE_CHECKING:
    from acmi_core import Settings

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "AXg0-test-token-for-moto-only"
SECRET_ARN_ENV = "ACMI_UPSTASH_TOKEN_SECRET_ARN"
UPSTASH_ENV = {
    "UPSTASH_REDIS_REST_URL": "https://eu1-happy-otter-12345.upstash.io",
    "UPSTASH_REDIS_REST_TOKEN": "not-a-real-token",
}
# Never on the ingest path's import: boto3 and botocore's machinery (only when the token's
# ARN is set), X-Ray (what makes Tracer cost ~0.8 s), PyJWT (only for Gmail OIDC pushes).
# Not listed, because Powertools' own package __init__ imports them whenever Logger or
# Metrics is used: the module aws_lambda_powertools.tracing (~2 ms; X-Ray loads lazily on
# Tracer()) and the bare botocore package (a user-agent hook, ~1 ms; no session, no client).
FORBIDDEN_AT_IMPORT = (
    "boto3",
    "botocore.session",
    "botocore.client",
    "aws_xray_sdk",
    "jwt",
)
# ... and on the Lambda path (Upstash store) also cryptography, which only the redis-py
# client of the embedded/redis stores imports.
FORBIDDEN_ON_THE_LAMBDA_PATH = (*FORBIDDEN_AT_IMPORT, "cryptography", "fakeredis", "lupa", "redis")
# Not shipped in the Lambda artifact (requirements-lambda.txt).
NOT_SHIPPED = ("fakeredis", "lupa", "redis", "boto3", "botocore")


# --- the token from Secrets Manager ---------------------------------------------------------


def load_settings(env: dict[str, str]) -> Settings:
    """functions._runtime.load_settings, imported when a test runs, not at collection: the
    runtime creates Powertools' "acmi" logger at import, bound to the stdout of that moment."""
    from functions import _runtime

    assert _runtime.SECRET_ARN_ENV == SECRET_ARN_ENV
    return _runtime.load_settings(env)


@pytest.fixture
def secretsmanager(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")


def _secret(client: Any, value: str, name: str = "acmi/upstash-token") -> str:
    arn: str = client.create_secret(Name=name, SecretString=value)["ARN"]
    return arn


def test_token_from_a_plain_string_secret(secretsmanager: Any) -> None:
    arn = _secret(secretsmanager, TOKEN)
    settings = load_settings(
        {"UPSTASH_REDIS_REST_URL": UPSTASH_ENV["UPSTASH_REDIS_REST_URL"], SECRET_ARN_ENV: arn}
    )
    assert settings.upstash_token == TOKEN
    assert settings.upstash_url == UPSTASH_ENV["UPSTASH_REDIS_REST_URL"]
    assert TOKEN not in repr(settings)


@pytest.mark.parametrize("field", ["UPSTASH_REDIS_REST_TOKEN", "token"])
def test_token_from_a_json_secret(secretsmanager: Any, field: str) -> None:
    arn = _secret(secretsmanager, json.dumps({field: TOKEN, "note": "rotated 2026-11"}))
    assert load_settings({SECRET_ARN_ENV: arn}).upstash_token == TOKEN


def test_a_secret_without_a_token_fails_without_echoing_it(secretsmanager: Any) -> None:
    arn = _secret(secretsmanager, json.dumps({"password": "hunter2-not-a-token"}))
    with pytest.raises(RuntimeError) as err:
        load_settings({SECRET_ARN_ENV: arn})
    assert arn in str(err.value)
    assert "hunter2" not in str(err.value)


def test_a_token_in_the_environment_is_not_fetched_again(secretsmanager: Any) -> None:
    missing = "arn:aws:secretsmanager:us-east-1:123456789012:secret:does-not-exist-AbCdEf"
    env = {SECRET_ARN_ENV: missing, "UPSTASH_REDIS_REST_TOKEN": "from-env"}
    assert load_settings(env).upstash_token == "from-env"  # no call: the secret is missing


def test_no_arn_no_token() -> None:
    assert load_settings({}).upstash_token is None


# --- the deployed configuration, end to end ------------------------------------------------

ADMIN_KEY = "acmi_local_example_admin_key_0001"


def _template_environment(parameters: dict[str, str]) -> dict[str, str]:
    """Globals.Function.Environment of template.yaml with its !Refs resolved."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def intrinsic(loader: Loader, suffix: str, node: yaml.Node) -> Any:
        if suffix == "Ref" and isinstance(node, yaml.ScalarNode):
            return parameters.get(str(loader.construct_scalar(node)))
        return None  # !Sub, !GetAtt, ...: not used by the environment

    Loader.add_multi_constructor("!", intrinsic)
    template = yaml.load((ROOT / "template.yaml").read_text(), Loader=Loader)
    env: dict[str, Any] = template["Globals"]["Function"]["Environment"]["Variables"]
    assert None not in env.values(), f"unresolved parameters in {env}"
    return {key: str(value) for key, value in env.items()}


def test_the_template_environment_end_to_end(
    secretsmanager: Any, upstash_double: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As deployed: the template's environment, the token in Secrets Manager (moto), the
    Upstash REST protocol (the double over a real Redis); an API key minted beforehand."""
    import importlib

    from acmi_core.auth.apikeys import register
    from acmi_core.store.upstash import UpstashStore
    from tests.kit import FakeLambdaContext, load_event

    arn = _secret(secretsmanager, json.dumps({"UPSTASH_REDIS_REST_TOKEN": upstash_double.token}))
    env = _template_environment(
        {
            "UpstashRedisRestUrl": upstash_double.url,
            "UpstashTokenSecretArn": arn,
            "DefaultTenant": "default",
        }
    )
    for name in ("ACMI_REDIS_URL", "ACMI_API_KEY", "UPSTASH_REDIS_REST_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with UpstashStore(upstash_double.url, upstash_double.token) as store:
        register(store, ADMIN_KEY, tenant="default", scope="write", name="ci", now_ms=0)

    def drop() -> None:
        for module in [m for m in sys.modules if m.startswith("functions.")]:
            del sys.modules[module]

    drop()
    try:
        ingest = importlib.import_module("functions.ingest")
        entities = importlib.import_module("functions.entities")
        context = FakeLambdaContext("acmi-ingest")
        first = ingest.handler(load_event("ingest.make"), context)
        assert first["statusCode"] == 201, first["body"]
        retry = ingest.handler(load_event("ingest.make"), context)
        assert retry["body"] == first["body"]
        assert retry["headers"]["idempotent-replayed"] == "true"
        assert ingest.handler(load_event("ingest.no-auth"), context)["statusCode"] == 401
        got = entities.handler(load_event("entities.get"), FakeLambdaContext("acmi-entities"))
        assert got["statusCode"] == 200, got["body"]
        denied = entities.handler(load_event("entities.wrong-key"), context)
        assert denied["statusCode"] == 401
        assert ingest.app.state.acmi.acmi.settings.upstash_token == upstash_double.token
    finally:
        drop()


# --- cold-start import budget (fresh interpreters) -----------------------------------------

PROBE = """
import json, sys, time
start = time.perf_counter()
import functions.ingest
elapsed = time.perf_counter() - start
print(json.dumps({"elapsed": elapsed, "modules": sorted(sys.modules)}))
"""

BARE = """
import json, sys, time
start = time.perf_counter()
from fastapi import FastAPI
from mangum import Mangum
handler = Mangum(FastAPI(), lifespan="off")
elapsed = time.perf_counter() - start
print(json.dumps({"elapsed": elapsed, "modules": sorted(sys.modules)}))
"""

# Imports every handler with the modules that are not shipped to Lambda made unimportable,
# then serves the docs event: the artifact's requirements are enough.
WITHOUT_UNSHIPPED = """
import importlib.abc, json, pathlib, sys
BLOCKED = set(sys.argv[1].split(","))

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{name} is not shipped to Lambda", name=name)
        return None

sys.meta_path.insert(0, Block())
import functions.ingest, functions.entities, functions.docs

class Context:
    function_name = "acmi-docs"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:acmi-docs"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"

event = json.loads(pathlib.Path("events/docs.openapi.json").read_text())
response = functions.docs.handler(event, Context())
print(json.dumps({"status": response["statusCode"], "modules": sorted(sys.modules)}))
"""


def run_fresh(code: str, extra_env: dict[str, str], *args: str) -> dict[str, Any]:
    """``code`` in a new interpreter with a clean environment (no ACMI_API_KEY, no AWS)."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **extra_env}
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


@pytest.mark.parametrize("store_env", ["embedded", "upstash"])
def test_ingest_import_budget(store_env: str) -> None:
    """``import functions.ingest`` in a fresh interpreter, clean environment (no
    ACMI_API_KEY, no secret ARN): embedded store, and the Upstash store Lambda uses."""
    extra, forbidden = (
        (UPSTASH_ENV, FORBIDDEN_ON_THE_LAMBDA_PATH)
        if store_env == "upstash"
        else ({}, FORBIDDEN_AT_IMPORT)
    )
    modules = set(run_fresh(PROBE, extra)["modules"])
    loaded = [m for m in forbidden if m in modules]
    assert not loaded, f"imported by `import functions.ingest`: {loaded}"


def test_handlers_need_nothing_that_is_not_shipped() -> None:
    out = run_fresh(WITHOUT_UNSHIPPED, UPSTASH_ENV, ",".join(NOT_SHIPPED))
    assert out["status"] == 200
    assert not [m for m in NOT_SHIPPED if m in out["modules"]]


def test_cold_import_time_against_a_bare_fastapi_app(capsys: pytest.CaptureFixture[str]) -> None:
    """Measured, printed, not asserted: a cold start's import cost of the ingest function
    against the floor of any FastAPI+mangum function (median of 5 fresh processes each)."""
    runs = 5
    bare = statistics.median(run_fresh(BARE, {})["elapsed"] for _ in range(runs))
    ingest = statistics.median(run_fresh(PROBE, UPSTASH_ENV)["elapsed"] for _ in range(runs))
    with capsys.disabled():
        print(
            f"\n[cold import] functions.ingest (upstash store) {ingest * 1000:.0f} ms vs bare "
            f"FastAPI+mangum {bare * 1000:.0f} ms: ratio {ingest / bare:.2f} "
            f"(median of {runs} fresh processes)"
        )
    assert ingest > 0 and bare > 0

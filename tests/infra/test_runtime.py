"""functions.runtime, the Lambda kit: the Upstash token from Secrets Manager (moto), the
deployed configuration end to end, scheduled jobs, no worker thread per invocation, no I/O
at import, and the import budget of the ingest path (fresh interpreters, as a Lambda cold
start would be)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
import redis
from moto import mock_aws

from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, EXAMPLE_KEY, ROOT, FakeLambdaContext, load_event, run_fresh

if TYPE_CHECKING:
    from acmi_core import Settings

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

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
    """functions.runtime.load_settings, imported when a test runs, not at collection: the
    runtime creates Powertools' "acmi" logger at import, bound to the stdout of that moment."""
    from functions import runtime

    return runtime.load_settings(env)


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


def _template_environment(parameters: dict[str, str]) -> dict[str, str]:
    """Globals.Function.Environment of template.yaml with its !Refs resolved: the given
    parameters, else their defaults (as CloudFormation does)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    given: dict[str, Any] = {}

    def intrinsic(loader: Loader, suffix: str, node: yaml.Node) -> Any:
        if suffix == "Ref" and isinstance(node, yaml.ScalarNode):
            name = str(loader.construct_scalar(node))
            return given.get(name, {"Ref": name})
        return None  # !Sub, !GetAtt, ...: not used by the environment

    Loader.add_multi_constructor("!", intrinsic)
    text = (ROOT / "template.yaml").read_text()
    defaults = {
        name: spec["Default"]
        for name, spec in yaml.load(text, Loader=Loader)["Parameters"].items()
        if "Default" in spec
    }
    given.update({**defaults, **parameters})
    template = yaml.load(text, Loader=Loader)
    env: dict[str, Any] = template["Globals"]["Function"]["Environment"]["Variables"]
    unresolved = [k for k, v in env.items() if v is None or isinstance(v, dict)]
    assert not unresolved, f"unresolved parameters: {unresolved}"
    return {key: str(value) for key, value in env.items()}


def test_the_template_environment_end_to_end(secretsmanager: Any, upstash_double: Any) -> None:
    """As deployed: the template's environment, the token in Secrets Manager (moto), the
    Upstash REST protocol (the double over a real Redis); an API key minted beforehand."""
    from acmi_core.auth.apikeys import register
    from acmi_core.store.upstash import UpstashStore

    arn = _secret(secretsmanager, json.dumps({"UPSTASH_REDIS_REST_TOKEN": upstash_double.token}))
    env = _template_environment(
        {
            "UpstashRedisRestUrl": upstash_double.url,
            "UpstashTokenSecretArn": arn,
            "DefaultTenant": "default",
        }
    )
    with UpstashStore(upstash_double.url, upstash_double.token) as store:
        register(store, EXAMPLE_KEY, tenant="default", scope="write", name="ci", now_ms=0)

    from functions.entities import handler as entities
    from functions.ingest import handler as ingest

    try:
        for handler in (ingest, entities):
            handler.configure(env=env)  # exactly the template's environment, nothing else
        context = FakeLambdaContext("acmi-ingest")
        first = ingest(load_event("ingest.make"), context)
        assert first["statusCode"] == 201, first["body"]
        retry = ingest(load_event("ingest.make"), context)
        assert retry["headers"]["idempotent-replayed"] == "true"
        (stored,) = json.loads(first["body"])["events"]
        (replayed,) = json.loads(retry["body"])["events"]  # ids of what was stored, no data
        assert replayed == {k: stored[k] for k in ("entity", "ts", "correlationId")}
        assert ingest(load_event("ingest.no-auth"), context)["statusCode"] == 401
        got = entities(load_event("entities.get"), FakeLambdaContext("acmi-entities"))
        assert got["statusCode"] == 200, got["body"]
        denied = entities(load_event("entities.wrong-key"), context)
        assert denied["statusCode"] == 401
    finally:
        for handler in (ingest, entities):
            handler.configure()


# --- cold-start import budget (fresh interpreters) -----------------------------------------

# Imports the ingest handler, then serves an unauthenticated request (a 401 before any
# store call): the modules of a whole cold start, the store's client included.
PROBE = """
import json, pathlib, sys
import functions.ingest
at_import = sorted(sys.modules)

class Context:
    function_name = "acmi-ingest"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:acmi-ingest"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"

event = json.loads(pathlib.Path("events/ingest.no-auth.json").read_text())
status = functions.ingest.handler(event, Context())["statusCode"]
print(json.dumps({"status": status, "at_import": at_import, "modules": sorted(sys.modules)}))
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


@pytest.mark.slow  # a fresh interpreter
@pytest.mark.parametrize("store_env", ["embedded", "upstash"])
def test_ingest_import_budget(store_env: str) -> None:
    """A fresh interpreter, clean environment (no ACMI_API_KEY, no secret ARN), embedded
    store and the Upstash store Lambda uses: what the cold start of ``functions.ingest``
    imports, through its first request."""
    extra, forbidden = (
        (UPSTASH_ENV, FORBIDDEN_ON_THE_LAMBDA_PATH)
        if store_env == "upstash"
        else ({}, FORBIDDEN_AT_IMPORT)
    )
    out = run_fresh(PROBE, extra)
    assert out["status"] == 401
    loaded = [m for m in forbidden if m in out["modules"]]
    assert not loaded, f"imported on the cold start of functions.ingest: {loaded}"


@pytest.mark.slow  # a fresh interpreter
def test_importing_a_handler_does_no_io_and_writes_nothing(redis_server: RedisServer) -> None:
    """With a store and an admin key configured, importing every handler connects to
    nothing and writes nothing: the first invocation builds (and registers the key)."""
    url = redis_server.url_for(DB["runtime"])
    redis_server.flush(DB["runtime"])
    code = "import json, functions.ingest, functions.entities, functions.docs; print('{}')"
    with redis.Redis.from_url(url) as client:
        before = client.info("stats")["total_connections_received"]
        run_fresh(code, {"ACMI_REDIS_URL": url, "ACMI_API_KEY": EXAMPLE_KEY})
        assert client.info("stats")["total_connections_received"] == before
        assert client.dbsize() == 0


@pytest.mark.slow  # a fresh interpreter
def test_handlers_need_nothing_that_is_not_shipped() -> None:
    out = run_fresh(WITHOUT_UNSHIPPED, UPSTASH_ENV, ",".join(NOT_SHIPPED))
    assert out["status"] == 200
    assert not [m for m in NOT_SHIPPED if m in out["modules"]]


# --- the wake secret from Secrets Manager (the wake function) ------------------------------

WAKE_SECRET = "the-deployment-wake-secret-for-moto"


@pytest.mark.parametrize("stored", [WAKE_SECRET, json.dumps({"ACMI_WAKE_SECRET": WAKE_SECRET})])
def test_the_wake_secret_from_secrets_manager(secretsmanager: Any, stored: str) -> None:
    arn = _secret(secretsmanager, stored, name="acmi/wake-secret")
    settings = load_settings({"ACMI_WAKE_SECRET_ARN": arn})
    assert settings.wake_secret == WAKE_SECRET
    assert WAKE_SECRET not in repr(settings)


def test_an_empty_wake_secret_fails_naming_the_arn_only(secretsmanager: Any) -> None:
    arn = _secret(secretsmanager, json.dumps({"other": "hunter2-not-it"}), name="acmi/wake")
    with pytest.raises(RuntimeError) as err:
        load_settings({"ACMI_WAKE_SECRET_ARN": arn})
    assert arn in str(err.value) and "hunter2" not in str(err.value)

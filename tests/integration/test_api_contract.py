"""The API says what it does: every error body has ``error``, ``message``, ``field`` and
``rule``; the OpenAPI document lists the statuses each route really answers (no 422 but a
reused Idempotency-Key); ``/docs`` loads nothing from outside the app; a 503 never shows
the store's address."""

from __future__ import annotations

import inspect
import re
import socket
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings
from acmi_core.api.app import ROUTER_MODULES, create_app
from acmi_core.api.context import ApiContext
from acmi_core.api.errors import acmi_error_response
from acmi_core.api.status import STATUS_BY_ERROR
from acmi_core.auth import apikeys
from acmi_core.auth.authenticator import Authenticator
from acmi_core.auth.google_oidc import GoogleTokenError, GoogleTokenVerifier
from acmi_core.base.errors import StoreAuthError, StoreCommandError, StoreUnavailable, Throttled
from acmi_core.base.model import EntityId
from acmi_core.ingest import config as sources
from acmi_core.store.base import Arg, Command, Reply, Script
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore

BODY_KEYS = {"error", "message", "field", "rule"}
EVENT = {"source": "agent:a", "kind": "note", "correlationId": "c-1", "summary": "hello"}


def assert_error(response: Any, status: int, field: str, rule: str) -> dict[str, Any]:
    """The status, and a body with all four keys, each a non-empty string."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == BODY_KEYS, body
    assert all(isinstance(body[k], str) and body[k] for k in BODY_KEYS), body
    assert (body["field"], body["rule"]) == (field, rule), body
    return body


class Api:
    def __init__(self, acmi: Acmi, *, mint: bool = True) -> None:
        self.acmi = acmi
        self.ctx = ApiContext(acmi)
        self.app = create_app(self.ctx)
        self.client = TestClient(self.app, raise_server_exceptions=False)
        self.keys: dict[str, str] = {}
        if mint:
            for scope in ("read", "write"):
                self.keys[scope], _ = apikeys.mint(
                    acmi.store, tenant="default", scope=scope, name=scope, now_ms=acmi.clock()
                )

    def auth(self, scope: str = "write") -> dict[str, str]:
        return {"authorization": f"Bearer {self.keys[scope]}"}


@pytest.fixture
def api() -> Api:
    return Api(Acmi(MemoryStore(), Settings(auth_cache_s=0, max_body_bytes=1000)))


# --- error bodies, one status at a time --------------------------------------------------------


def test_400_names_field_and_rule(api: Api) -> None:
    response = api.client.get("/v1/entities/no-colon/profile", headers=api.auth())
    body = assert_error(response, 400, "entity", body_rule(response))
    assert body["error"] == "validation_error"


def body_rule(response: Any) -> str:
    rule = response.json().get("rule")
    assert isinstance(rule, str) and rule
    return rule


@pytest.mark.parametrize(
    ("headers", "rule"),
    [
        ({}, "required"),
        ({"authorization": "Basic abc"}, "bearer"),
        ({"authorization": "Bearer acmi_not_a_key_of_ours_0000000000"}, "known_key"),
    ],
)
def test_401_names_field_and_rule(api: Api, headers: dict[str, str], rule: str) -> None:
    response = api.client.get("/v1/entities/user:x/profile", headers=headers)
    assert_error(response, 401, "authorization", rule)
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_401_of_a_bad_google_token_names_field_and_rule(api: Api) -> None:
    google = GoogleTokenVerifier(fetch_jwks=lambda: ({"keys": []}, 3600))
    api.ctx.auth = Authenticator(api.acmi.store, api.acmi.settings, google=google)
    sources.put_config(
        api.acmi.store,
        api.acmi.keys,
        "gmail",
        oidc_audience="https://acmi.example/v1/ingest/gmail",
        oidc_email="push@acme.iam.gserviceaccount.com",
    )
    headers = {"authorization": "Bearer not-base64!.x.y"}
    response = api.client.post("/v1/ingest/gmail", content=b"{}", headers=headers)
    body = assert_error(response, 401, "authorization", "jwt_format")
    assert body["error"] == "invalid_token"


@pytest.mark.parametrize(
    ("token", "rule"),
    [("", "required"), ("x" * 20_000, "max_length"), ("a.b.c", "jwt_format")],
)
def test_every_google_token_error_carries_field_and_rule(token: str, rule: str) -> None:
    verifier = GoogleTokenVerifier(fetch_jwks=lambda: ({"keys": []}, 3600))
    with pytest.raises(GoogleTokenError) as caught:
        verifier.verify(token, audience="aud", email="a@b.c")
    assert (caught.value.field, caught.value.rule) == ("authorization", rule)
    response = acmi_error_response(caught.value)
    assert response.status_code == 401


def test_403_names_field_and_rule(api: Api) -> None:
    response = api.client.put("/v1/entities/user:x/profile", json={}, headers=api.auth("read"))
    assert_error(response, 403, "authorization", "scope")
    other_tenant = {**api.auth("read"), "X-Acmi-Tenant": "acme"}
    response = api.client.get("/v1/entities/user:x/profile", headers=other_tenant)
    assert_error(response, 403, "X-Acmi-Tenant", "tenant_match")


def test_404_and_405_name_field_and_rule(api: Api) -> None:
    assert_error(
        api.client.get("/v1/entities/user:x/profile", headers=api.auth()), 404, "profile", "exists"
    )
    assert_error(
        api.client.get("/v1/entities/user:x/signals/mood", headers=api.auth()), 404, "key", "exists"
    )
    assert_error(api.client.get("/v1/nowhere", headers=api.auth()), 404, "path", "route_exists")
    assert_error(
        api.client.post("/v1/entities/user:x/profile", headers=api.auth()),
        405,
        "method",
        "method_allowed",
    )


def test_409_names_field_and_rule(api: Api) -> None:
    key = api.acmi.keys.profile(EntityId.parse("user:x", "entity"))
    api.acmi.store.execute(("SET", key, b"not json"))
    response = api.client.get("/v1/entities/user:x/profile", headers=api.auth())
    body = assert_error(response, 409, key, "readable")
    assert body["error"] == "corrupt_data"


def test_413_and_422_name_field_and_rule(api: Api) -> None:
    big = {"summary": "x" * 2000}
    response = api.client.put("/v1/entities/user:x/profile", json=big, headers=api.auth())
    assert_error(response, 413, "body", "max_bytes")
    headers = {**api.auth(), "Idempotency-Key": "k-1"}
    first = api.client.post("/v1/entities/user:x/events", json=EVENT, headers=headers)
    assert first.status_code == 201, first.text
    other = {**EVENT, "summary": "another"}
    response = api.client.post("/v1/entities/user:x/events", json=other, headers=headers)
    assert_error(response, 422, "Idempotency-Key", "reused")


class FailingStore(MemoryStore):
    """Every command fails with ``error``."""

    def __init__(self, error: Callable[[], Exception]) -> None:
        super().__init__()
        self.error = error

    def execute(self, command: Command) -> Reply:
        raise self.error()

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        raise self.error()

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        raise self.error()


@pytest.mark.parametrize(
    ("error", "status", "code", "rule"),
    [
        (lambda: StoreAuthError("Upstash rejected the credentials"), 500, "store_auth_error", None),
        (lambda: Throttled("Upstash throttled", retry_after=2.0), 503, "throttled", "throttled"),
        (lambda: StoreUnavailable("down"), 503, "store_unavailable", "available"),
    ],
)
def test_500_and_503_bodies_have_all_four_keys(
    error: Callable[[], Exception], status: int, code: str, rule: str | None
) -> None:
    api = Api(Acmi(FailingStore(error), Settings(auth_cache_s=0)), mint=False)
    headers = {"authorization": "Bearer acmi_some_key_000000000000000000"}
    response = api.client.get("/v1/entities/user:x/profile", headers=headers)
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == BODY_KEYS and all(isinstance(body[k], str) for k in BODY_KEYS), body
    assert body["error"] == code
    if rule is not None:
        assert (body["field"], body["rule"]) == ("store", rule)
        assert response.headers["Retry-After"]


def test_a_503_never_shows_the_store_address() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = RedisStore.from_url(f"redis://127.0.0.1:{port}/0", Settings(store_timeout_s=0.5))
    api = Api(Acmi(store, Settings(auth_cache_s=0)), mint=False)
    headers = {"authorization": "Bearer acmi_some_key_000000000000000000"}
    response = api.client.get("/v1/entities/user:x/profile", headers=headers)
    assert_error(response, 503, "store", "available")
    assert "127.0.0.1" not in response.text
    assert str(port) not in response.text
    assert response.headers["Retry-After"] == "1"


# --- the OpenAPI document ---------------------------------------------------------------------


def expected_error_statuses(operation: dict[str, Any], endpoint: Callable[..., Any]) -> set[int]:
    """What the route can answer, worked out here independently of the app's own rule:
    every route authenticates (401, 403), validates parameters (400), reads or writes
    stored data (409) and calls the store (500, 503); a body brings the size cap (413); an
    Idempotency-Key its reuse (422); a route raising NotFound, 404; a route serving the
    wake bundle, a bound key's spent hourly tokens (429)."""
    statuses = {400, 401, 403, 409, 500, 503}
    if operation.get("operationId", "").startswith(("read_bundle", "spawn_and_read")):
        statuses.add(429)
    if "requestBody" in operation:
        statuses.add(413)
    names = {p["name"] for p in operation.get("parameters", [])}
    if "Idempotency-Key" in names:
        statuses.add(422)
    if re.search(r"raise NotFound\(", inspect.getsource(endpoint)):
        statuses.add(404)
    return statuses


def test_every_route_documents_the_errors_it_answers(api: Api) -> None:
    schema = api.app.openapi()
    endpoints = {
        # OpenAPI writes {thread:path} as {thread}
        (method.lower(), route.path.replace(":path}", "}")): route.endpoint
        for route in api.app.router.routes
        for method in getattr(route, "methods", ()) or ()
        if hasattr(route, "endpoint")
    }
    for router in ROUTER_MODULES:
        module = __import__(f"acmi_core.api.routes.{router}", fromlist=["router"])
        for route in module.router.routes:
            for method in route.methods:
                endpoints[(method.lower(), route.path.replace(":path}", "}"))] = route.endpoint
    producible = {status for _, status in STATUS_BY_ERROR}
    operations = 0
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            operations += 1
            documented = {int(s) for s in operation["responses"] if int(s) >= 400}
            expected = expected_error_statuses(operation, endpoints[(method, path)])
            assert documented == expected, (method, path, sorted(documented), sorted(expected))
            assert documented <= producible, (method, path)
            for status in documented:
                content = operation["responses"][str(status)]["content"]["application/json"]
                assert content["schema"] == {"$ref": "#/components/schemas/Error"}
    assert operations >= 17
    post_events = schema["paths"]["/v1/entities/{entity}/events"]["post"]["responses"]
    assert "Idempotency-Key" in post_events["422"]["description"]
    schemas = schema["components"]["schemas"]
    assert set(schemas["Error"]["required"]) == BODY_KEYS
    assert "HTTPValidationError" not in schemas
    assert "ValidationError" not in schemas


def test_no_route_answers_422_for_bad_parameters(api: Api) -> None:
    """What the document claims: validation errors are 400 (FastAPI's default is 422)."""
    response = api.client.get("/v1/entities/user:x?events=-1", headers=api.auth())
    assert_error(response, 400, "events", body_rule(response))


# --- /docs offline ---------------------------------------------------------------------------


def test_docs_page_loads_only_from_the_app(api: Api) -> None:
    page = api.client.get("/docs")
    assert page.status_code == 200
    html = page.text
    urls = re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r"url: '([^']+)'", html)
    assert len(urls) >= 4, urls  # css, favicon, js, the OpenAPI document
    assert "SwaggerUIBundle" in html
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
    assert "http://" not in html and "https://" not in html
    kinds = {}
    for url in urls:
        response = api.client.get(url)
        assert response.status_code == 200, url
        assert len(response.content) > 1000, url
        kinds[url.rsplit(".", 1)[-1]] = response.headers["content-type"]
    assert kinds["js"].startswith("text/javascript")
    assert kinds["css"].startswith("text/css")
    assert kinds["png"] == "image/png"
    assert kinds["json"].startswith("application/json")


def test_an_unknown_docs_asset_is_a_404_naming_it(api: Api) -> None:
    response = api.client.get("/docs?asset=../../etc/passwd")
    assert_error(response, 404, "asset", "exists")


def test_the_webhook_declares_the_query_it_reads(api: Api) -> None:
    """`/v1/ingest/{source}`'s document names `entity`, `token`, `tenant` and one
    `map.<field>` per mapping field: exactly what ingest reads from the query, each
    taken as declared."""
    from acmi_core.ingest.mapping import MAPPING_FIELDS
    from acmi_core.ingest.service import DELIVERY_PARAMS, MAPPING_PARAM_PREFIX

    operation = api.app.openapi()["paths"]["/v1/ingest/{source}"]["post"]
    query = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
    mapped = {MAPPING_PARAM_PREFIX + name for name in MAPPING_FIELDS}
    assert set(query) == {*DELIVERY_PARAMS, "token", *mapped}
    assert all(not p["required"] and p["schema"]["type"] == "string" for p in query.values())
    assert query["entity"]["schema"]["maxLength"] == 256
    assert query["tenant"]["schema"]["pattern"] == "^[a-z0-9][a-z0-9_-]{0,63}$"
    # what the document says, a delivery does: the entity and a mapped summary
    response = api.client.post(
        "/v1/ingest/n8n?entity=deal:acme-42&map.summary=deal.name&map.kind==deal-updated",
        headers=api.auth("write"),
        json={"event": "deal.updated", "deal": {"name": "Acme renewal"}},
    )
    assert response.status_code == 201, response.text
    (stored,) = api.acmi.timeline.read("deal:acme-42")
    assert (stored.summary, stored.kind) == ("Acme renewal", "deal-updated")

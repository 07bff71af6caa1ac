"""The HTTP API end to end (in-process ASGI): auth, tenants, idempotency, sources, bad input.

Handlers wrapped for Lambda are fed the events/ files in test_handlers.py; here the same
app is driven directly, so each rule gets its own small test."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from acmi_core import Acmi, Settings
from acmi_core.auth import apikeys
from acmi_core.auth.authenticator import Authenticator
from acmi_core.auth.google_oidc import GoogleTokenVerifier
from acmi_core.ingest import config as sources
from acmi_core.store.memory import MemoryStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import Api, assert_error

EVENT = {"source": "agent:a", "kind": "note", "correlationId": "c-1", "summary": "hello"}


@pytest.fixture
def api() -> Api:
    return Api(Acmi(MemoryStore(), Settings(auth_cache_s=0)))


# --- auth -----------------------------------------------------------------------------------


def test_a_key_we_do_not_know_is_401(api: Api) -> None:
    """Every route's refusal of a missing key, and of too low a scope, is generated from
    the operation table (tests/integration/test_operations.py); here, what is not a key."""
    for header in ("Bearer acmi_unknown_key_000000000000000", "Basic abc", "Bearer "):
        assert_error(api.client.get("/v1/entities/user:x", headers={"authorization": header}), 401)


def test_scope_and_tenant_are_403(api: Api) -> None:
    read_only = api.auth("default:read")
    assert_error(api.client.post("/v1/entities/user:x/events", json=EVENT, headers=read_only), 403)
    assert api.client.get("/v1/entities/user:x", headers=read_only).status_code == 200
    other = {**api.auth("default:write"), "X-Acmi-Tenant": "acme"}
    assert_error(api.client.get("/v1/entities/user:x", headers=other), 403, "X-Acmi-Tenant")


def test_a_tenant_cannot_read_or_write_another(api: Api) -> None:
    acme = api.auth("acme:write")
    assert (
        api.client.put("/v1/entities/user:x/profile", json={"a": 1}, headers=acme).status_code
        == 200
    )
    assert (
        api.client.post("/v1/entities/user:x/events", json=EVENT, headers=acme).status_code == 201
    )
    mine = api.auth("default:admin")
    assert_error(api.client.get("/v1/entities/user:x/profile", headers=mine), 404)
    assert api.client.get("/v1/entities/user:x", headers=mine).json()["timeline"] == []
    assert api.client.get("/v1/namespaces/user/entities", headers=mine).json()["entities"] == []
    # and acme's data is where acme's key puts it, under the v1.3 tenant prefix
    assert api.acmi.store.execute(("EXISTS", "acmi:tenant:acme:user:x:profile")) == 1
    acme_profile = api.client.get("/v1/entities/user:x/profile", headers=acme).json()
    assert acme_profile == {"a": 1, "actor_type": "human", "tenant_id": "acme"}


def test_revoked_key_stops_working(api: Api) -> None:
    key_id = apikeys.lookup(api.acmi.store, api.keys["default:read"])
    assert key_id is not None
    assert (
        api.client.get("/v1/entities/user:x", headers=api.auth("default:read")).status_code == 200
    )
    apikeys.revoke(api.acmi.store, key_id.id)
    assert_error(api.client.get("/v1/entities/user:x", headers=api.auth("default:read")), 401)


def test_key_lookups_are_cached_in_a_warm_process() -> None:
    api = Api(Acmi(MemoryStore(), Settings(auth_cache_s=60)))
    calls = 0
    execute, pipeline = api.acmi.store.execute, api.acmi.store.pipeline

    def lookup(command: Any) -> bool:
        return command[0] == "GET" and str(command[1]).startswith("acmi:_apikey:")

    def counting(command: Any) -> Any:
        nonlocal calls
        calls += lookup(command)
        return execute(command)

    def counting_pipeline(commands: Any) -> Any:  # a lookup: the record and the revoked set
        nonlocal calls
        calls += sum(lookup(command) for command in commands)
        return pipeline(commands)

    api.acmi.store.execute = counting  # type: ignore[method-assign]
    api.acmi.store.pipeline = counting_pipeline  # type: ignore[method-assign]
    for _ in range(5):
        api.client.get("/v1/entities/user:x/signals", headers=api.auth("default:read"))
    assert calls == 1


def test_stored_keys_are_hashes_only(api: Api) -> None:
    index = api.acmi.store.execute(("HGETALL", apikeys.INDEX_KEY))
    names = api.acmi.store.execute(("KEYS", "*"))
    dump = json.dumps([str(index), str(names)])
    for key in api.keys.values():
        assert key not in dump


# --- entity routes --------------------------------------------------------------------------


def test_entity_routes_round_trip(api: Api) -> None:
    h = api.auth()
    c = api.client
    assert c.put("/v1/entities/user:m/profile", json={"name": "M"}, headers=h).json() == {
        "name": "M",
        "actor_type": "human",
        "tenant_id": "madez",
    }
    assert (
        c.patch("/v1/entities/user:m/profile", json={"tz": "UTC"}, headers=h).json()["tz"] == "UTC"
    )
    assert c.put("/v1/entities/user:m/signals/mood", json=[], headers=h).json() == {
        "key": "mood",
        "value": [],
    }
    assert c.patch(
        "/v1/entities/user:m/signals", json={"n": 12345678901234567}, headers=h
    ).json() == {
        "mood": [],
        "n": 12345678901234567,
    }
    assert c.get("/v1/entities/user:m/signals/n", headers=h).json()["value"] == 12345678901234567
    assert_error(c.get("/v1/entities/user:m/signals/none", headers=h), 404, "key")
    c.post("/v1/entities/user:m/events", json=[{**EVENT, "ts": t} for t in (3, 1, 2)], headers=h)
    timeline = c.get("/v1/entities/user:m/timeline?since_ms=2&reverse=true", headers=h).json()
    assert [e["ts"] for e in timeline["events"]] == [3, 2]
    full = c.get("/v1/entities/user:m?events=2", headers=h).json()
    assert [e["ts"] for e in full["timeline"]] == [2, 3]
    assert full["signals"] == {"mood": [], "n": 12345678901234567}
    assert c.get("/v1/namespaces/user/entities", headers=h).json()["entities"] == ["user:m"]
    assert c.put("/v1/entities/user:m/signals", json={"only": 1}, headers=h).status_code == 200
    assert c.get("/v1/entities/user:m/signals", headers=h).json() == {"only": 1}
    assert c.delete("/v1/entities/user:m/signals/only", headers=h).status_code == 200
    assert c.delete("/v1/entities/user:m", headers=h).json() == {"deleted": "user:m"}
    assert_error(c.get("/v1/entities/user:m/profile", headers=h), 404)
    assert c.get("/v1/namespaces/user/entities", headers=h).json()["entities"] == []


# --- idempotency ----------------------------------------------------------------------------


def gmail_push(message_id: str = "2070443601311540", history_id: int = 9876543) -> bytes:
    data = base64.b64encode(
        json.dumps({"emailAddress": "ops@example.com", "historyId": history_id}).encode()
    ).decode()
    envelope = {
        "message": {
            "data": data,
            "messageId": message_id,
            "message_id": message_id,
            "publishTime": "2026-11-29T10:15:30.123Z",
            "publish_time": "2026-11-29T10:15:30.123Z",
        },
        "subscription": "projects/acme/subscriptions/gmail-push",
    }
    return json.dumps(envelope).encode()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/ingest/n8n?entity=deal:acme-42", b'{"message":"Invoice paid","amount":1200}'),
        ("/v1/ingest/make?entity=deal:acme-42", b'{"text":"Call booked\nfor Friday"}'),
        ("/v1/ingest/gmail", gmail_push()),
    ],
)
def test_a_webhook_retried_three_times_stores_one_event(api: Api, path: str, body: bytes) -> None:
    responses = [api.client.post(path, content=body, headers=api.auth()) for _ in range(3)]
    assert [r.status_code for r in responses] == [201, 201, 201]
    # a replay answers the count and each event's ids, not its data (test_ingest_hardening)
    (first,) = responses[0].json()["events"]
    ids = [{k: first[k] for k in ("entity", "ts", "correlationId")}]
    assert responses[1].json() == responses[2].json() == {"stored": 1, "events": ids}
    assert "idempotent-replayed" not in responses[0].headers
    assert responses[1].headers["idempotent-replayed"] == "true"
    entity = responses[0].json()["events"][0]["entity"]
    assert api.acmi.timeline.size(entity) == 1


def test_two_items_of_one_n8n_run_both_land(api: Api) -> None:
    # n8n shares the execution id across items; only the bodies differ
    for item in ("a", "b"):
        body = json.dumps({"executionId": "run-7", "item": item, "message": "row"}).encode()
        path = "/v1/ingest/n8n?entity=sheet:leads"
        assert api.client.post(path, content=body, headers=api.auth()).status_code == 201
    assert api.acmi.timeline.size("sheet:leads") == 2


def test_idempotency_key_header(api: Api) -> None:
    h = {**api.auth(), "Idempotency-Key": "delivery-1"}
    first = api.client.post("/v1/entities/user:i/events", json=EVENT, headers=h)
    again = api.client.post("/v1/entities/user:i/events", json=EVENT, headers=h)
    assert again.json()["events"][0]["correlationId"] == first.json()["events"][0]["correlationId"]
    assert again.headers["idempotent-replayed"] == "true"
    # the same key with another body is a 422, not a replay (test_ingest_hardening)
    other = api.client.post("/v1/entities/user:i/events", json={**EVENT, "summary": "x"}, headers=h)
    assert_error(other, 422, "Idempotency-Key")
    assert api.acmi.timeline.size("user:i") == 1
    # without a key, direct appends are not deduplicated by body (heartbeats repeat)
    api.client.post("/v1/entities/user:i/events", json=EVENT, headers=api.auth())
    api.client.post("/v1/entities/user:i/events", json=EVENT, headers=api.auth())
    assert api.acmi.timeline.size("user:i") == 3


def test_gmail_redelivery_with_new_message_id_is_a_new_delivery(api: Api) -> None:
    api.client.post("/v1/ingest/gmail", content=gmail_push("1"), headers=api.auth())
    api.client.post("/v1/ingest/gmail", content=gmail_push("2", 9876544), headers=api.auth())
    assert api.acmi.timeline.size("mailbox:ops_example.com") == 2


# --- source authentication ------------------------------------------------------------------


def test_hmac_signature(api: Api) -> None:
    sources.put_config(api.acmi.store, api.acmi.keys, "n8n-signed", hmac_secret="s" * 32)
    body = b'{"message":"signed","entity":"deal:1"}'
    good = "sha256=" + hmac.new(b"s" * 32, body, hashlib.sha256).hexdigest()
    path = "/v1/ingest/n8n-signed"
    assert_error(api.client.post(path, content=body, headers=api.auth()), 401, "X-Acmi-Signature")
    bad = {**api.auth(), "X-Acmi-Signature": "sha256=" + "0" * 64}
    assert_error(api.client.post(path, content=body, headers=bad), 401, "X-Acmi-Signature")
    assert_error(
        api.client.post(path, content=body, headers={**api.auth(), "X-Acmi-Signature": "md5=x"}),
        400,
        "X-Acmi-Signature",
    )
    signed = {**api.auth(), "X-Acmi-Signature": good}
    assert api.client.post(path, content=body, headers=signed).status_code == 201
    assert api.acmi.timeline.size("deal:1") == 1


def test_push_token_in_the_url(api: Api) -> None:
    acme = api.acmi.for_tenant("acme")
    _, token = sources.put_config(acme.store, acme.keys, "make", new_push_token=True)
    assert token
    body = b'{"message":"from make","entity":"deal:9"}'
    assert api.client.post(f"/v1/ingest/make?token={token}", content=body).status_code == 201
    assert acme.timeline.size("deal:9") == 1  # the token's tenant, not the default one
    assert api.acmi.timeline.size("deal:9") == 0
    assert_error(api.client.post("/v1/ingest/make?token=nope", content=body), 401, "token")
    assert_error(api.client.post(f"/v1/ingest/n8n?token={token}", content=body), 403, "token")
    stored = api.acmi.store.execute(("GET", "acmi:_source:acme:make"))
    assert isinstance(stored, bytes)
    assert token.encode() not in stored


@pytest.fixture
def google_keys() -> Iterator[tuple[rsa.RSAPrivateKey, dict[str, Any]]]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    yield key, {"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}


def google_token(key: rsa.RSAPrivateKey, **claims: Any) -> str:
    now = int(time.time())
    payload = {
        "iss": "https://accounts.google.com",
        "aud": "https://acmi.example/v1/ingest/gmail",
        "email": "gmail-push@acme.iam.gserviceaccount.com",
        "email_verified": True,
        "sub": "1234",
        "iat": now,
        "exp": now + 3600,
        **claims,
    }
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": "k1"})


def test_gmail_push_authenticated_by_google_oidc(
    api: Api, google_keys: tuple[rsa.RSAPrivateKey, dict[str, Any]]
) -> None:
    key, jwks = google_keys
    google = GoogleTokenVerifier(fetch_jwks=lambda: (jwks, 3600))
    api.ctx.auth = Authenticator(api.acmi.store, api.acmi.settings, google=google)
    acme = api.acmi.for_tenant("acme")
    sources.put_config(
        acme.store,
        acme.keys,
        "gmail",
        oidc_audience="https://acmi.example/v1/ingest/gmail",
        oidc_email="gmail-push@acme.iam.gserviceaccount.com",
    )
    headers = {"authorization": f"Bearer {google_token(key)}"}
    response = api.client.post(
        "/v1/ingest/gmail?tenant=acme", content=gmail_push(), headers=headers
    )
    assert response.status_code == 201, response.text
    assert acme.timeline.size("mailbox:ops_example.com") == 1
    wrong_aud = {"authorization": f"Bearer {google_token(key, aud='https://evil.example')}"}
    body = assert_error(
        api.client.post("/v1/ingest/gmail?tenant=acme", content=gmail_push("x"), headers=wrong_aud),
        401,
    )
    assert "audience" in body["message"]
    # the default tenant has no OIDC config for gmail: a Google token is not enough there
    assert_error(api.client.post("/v1/ingest/gmail", content=gmail_push("y"), headers=headers), 401)


# --- bad input: a 4xx naming the field and rule, and nothing stored -------------------------

BAD_INPUT: list[tuple[str, str, Any, int, str]] = [
    # (method, path, body bytes or JSON, status, field)
    ("POST", "/v1/entities/user:b/events", b"{not json", 400, "body"),
    ("POST", "/v1/entities/user:b/events", b"", 400, "body"),
    ("POST", "/v1/entities/user:b/events", b"\xff\xfe{}", 400, "body"),
    (
        "POST",
        "/v1/entities/user:b/events",
        b'{"ts": NaN, "source":"s","kind":"k","correlationId":"c","summary":"s"}',
        400,
        "body",
    ),
    ("POST", "/v1/entities/user:b/events", {**EVENT, "ts": 1e20}, 400, "events[0].ts"),
    ("POST", "/v1/entities/user:b/events", {**EVENT, "ts": "yesterday"}, 400, "events[0].ts"),
    ("POST", "/v1/entities/user:b/events", {**EVENT, "summary": 5}, 400, "events[0].summary"),
    (
        "POST",
        "/v1/entities/user:b/events",
        {**EVENT, "summary": "x" * 501},
        400,
        "events[0].summary",
    ),
    (
        "POST",
        "/v1/entities/user:b/events",
        {k: v for k, v in EVENT.items() if k != "kind"},
        400,
        "events[0].kind",
    ),
    (
        "POST",
        "/v1/entities/user:b/events",
        [EVENT, {**EVENT, "source": ""}],
        400,
        "events[1].source",
    ),
    ("POST", "/v1/entities/user:b/events", [EVENT] * 101, 400, "body"),
    ("POST", "/v1/entities/user:b/events", [], 400, "body"),
    ("POST", "/v1/entities/user:b/events", [1], 400, "events[0]"),
    ("POST", "/v1/entities/Cat:Bad/events", EVENT, 400, "entity"),
    ("POST", "/v1/entities/no-colon/events", EVENT, 400, "entity"),
    ("POST", "/v1/entities/user:b/events", b'{"a":"' + b"x" * 300_000 + b'"}', 413, "body"),
    ("POST", "/v1/ingest/zapier", {"message": "m"}, 400, "source"),
    ("POST", "/v1/ingest/n8n", {"message": "no entity"}, 400, "body.entity"),
    ("POST", "/v1/ingest/n8n?entity=Bad:x", {"message": "m"}, 400, "events[0].entity"),
    ("POST", "/v1/ingest/n8n?entity=deal:1", {"message": "m", "ts": -5}, 400, "events[0].ts"),
    ("POST", "/v1/ingest/make?entity=deal:1", b'{"message":"say "hi""}', 400, "body"),
    ("POST", "/v1/ingest/generic?entity=deal:1", {"a": 1}, 400, "mapping"),
    (
        "POST",
        "/v1/ingest/generic?map.entity=id&map.kind=type&map.summary=t",
        {"id": "x"},
        400,
        "body.type",
    ),
    (
        "POST",
        "/v1/ingest/gmail",
        {"message": {"messageId": "1", "data": "%%%"}},
        400,
        "body.message.data",
    ),
    ("POST", "/v1/ingest/gmail", {"subscription": "s"}, 400, "body.message"),
    ("PUT", "/v1/entities/user:b/profile", [1, 2], 400, "profile"),
    ("PUT", "/v1/entities/user:b/profile", b"null", 400, "profile"),
    ("PUT", "/v1/entities/user:b/profile", {"actor_type": "robot"}, 400, "profile.actor_type"),
    ("PATCH", "/v1/entities/user:b/profile", "text", 400, "profile"),
    ("PUT", "/v1/entities/user:b/signals/" + "k" * 129, 1, 400, "key"),
    ("PATCH", "/v1/entities/user:b/signals", {"k" * 129: 1}, 400, "signals." + "k" * 129),
    ("PATCH", "/v1/entities/user:b/signals", {}, 400, "signals"),
    ("GET", "/v1/entities/user:b/timeline?limit=0", None, 400, "limit"),
    ("GET", "/v1/entities/user:b/timeline?since_ms=nan", None, 400, "since_ms"),
    ("GET", "/v1/entities/user:b/timeline?since_ms=5&until_ms=1", None, 400, "since_ms"),
    ("GET", "/v1/entities/user:b?events=-1", None, 400, "events"),
    ("GET", "/v1/namespaces/Bad/entities", None, 400, "category"),
    # a lone surrogate escape is valid JSON syntax but not Unicode text: never a 500
    ("PUT", "/v1/entities/user:b/signals/k", b'"\\udc00"', 400, "signals"),
    ("PATCH", "/v1/entities/user:b/profile", b'{"a": "x\\ud800"}', 400, "profile"),
    (
        "POST",
        "/v1/entities/user:b/events",
        b'{"source":"s","kind":"k","correlationId":"c","summary":"s","payload":"\\udfff"}',
        400,
        "events[0]",
    ),
    ("POST", "/v1/ingest/n8n?entity=deal:1", b'{"message":"m","note":"\\ud800"}', 400, "events[0]"),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    BAD_INPUT,
    ids=[f"{m} {p[:40]} -> {f}" for m, p, _, _, f in BAD_INPUT],
)
def test_bad_input_is_a_4xx_naming_the_field_and_stores_nothing(
    api: Api, method: str, path: str, body: Any, status: int, field: str
) -> None:
    before = api.dbsize()
    content = (
        body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    )
    response = api.client.request(method, path, content=content, headers=api.auth("default:admin"))
    result = assert_error(response, status, field)
    head = field.split(".", maxsplit=1)[0]
    assert result["message"].startswith(head) or field in result["message"]
    assert api.dbsize() == before


def test_long_idempotency_key_is_rejected(api: Api) -> None:
    h = {**api.auth(), "Idempotency-Key": "k" * 256}
    assert_error(
        api.client.post("/v1/entities/user:b/events", json=EVENT, headers=h), 400, "Idempotency-Key"
    )


def test_unknown_route_and_method_are_json(api: Api) -> None:
    assert_error(api.client.get("/v1/nope", headers=api.auth()), 404)
    assert_error(api.client.post("/v1/entities/user:x", headers=api.auth()), 405)


# --- the store failing: 503 with Retry-After, never a lost or doubled event ------------------


@pytest.fixture
def upstash_api(upstash_double: UpstashDouble) -> Iterator[tuple[Api, UpstashDouble]]:
    settings = Settings(
        store_timeout_s=1.0, retry_base_delay_s=0.001, retry_max_delay_s=0.005, auth_cache_s=60
    )
    with UpstashStore(upstash_double.url, upstash_double.token, settings=settings) as store:
        yield Api(Acmi(store, settings)), upstash_double


@pytest.mark.parametrize("status", [429, 503])
def test_store_outage_is_a_503_with_retry_after(
    upstash_api: tuple[Api, UpstashDouble], status: int
) -> None:
    api, double = upstash_api
    body = b'{"message":"during outage","entity":"deal:o"}'
    api.client.get("/v1/entities/deal:o", headers=api.auth())  # warm the key cache
    double.fail_next(20, status=status)
    response = api.client.post("/v1/ingest/n8n", content=body, headers=api.auth())
    error = assert_error(response, 503)
    assert error["error"] == ("throttled" if status == 429 else "store_unavailable")
    assert int(response.headers["retry-after"]) >= 1
    double.clear_faults()
    # the sender retries the same delivery once the store is back: stored exactly once
    for _ in range(2):
        assert (
            api.client.post("/v1/ingest/n8n", content=body, headers=api.auth()).status_code == 201
        )
    assert api.acmi.timeline.size("deal:o") == 1


def test_dropped_connection_after_the_write_still_stores_once(
    upstash_api: tuple[Api, UpstashDouble],
) -> None:
    """The store retries after a dropped connection; the delivery's ONCE record turns a
    write that already ran into a replay instead of a second event."""
    api, double = upstash_api
    body = b'{"message":"flaky network","entity":"deal:f"}'
    api.client.get("/v1/entities/deal:f", headers=api.auth())
    double.lose_reply_next(1)
    response = api.client.post("/v1/ingest/n8n", content=body, headers=api.auth())
    assert response.status_code == 201
    assert api.acmi.timeline.size("deal:f") == 1


def test_openapi_lists_every_route(api: Api) -> None:
    spec = api.client.get("/openapi.json").json()
    assert set(spec["paths"]) >= {
        "/v1/entities/{entity}/events",
        "/v1/ingest/{source}",
        "/v1/entities/{entity}",
        "/v1/entities/{entity}/profile",
        "/v1/entities/{entity}/signals",
        "/v1/entities/{entity}/signals/{key}",
        "/v1/entities/{entity}/timeline",
        "/v1/namespaces/{category}/entities",
    }
    assert api.client.get("/docs").status_code == 200

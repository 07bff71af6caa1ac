"""Ingest hardening through the HTTP app: delivery ids that cover the URL, Idempotency-Key
reuse (422), minimal idempotency records, a lost reply counted as stored, webhook ``ts``
bounded to now + skew, lenient JSON only where a sender needs it, bodies that can never
500 (depth, huge integers, control characters) and generic mapping paths."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings
from acmi_core.api.app import create_app
from acmi_core.api.body import MAX_JSON_DEPTH
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.model import MAX_TS_MS
from acmi_core.ingest import config as source_configs
from acmi_core.ingest.service import MAX_WEBHOOK_TS_SKEW_MS
from acmi_core.ingest.sources import SOURCES
from acmi_core.store.base import Store
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import TEST_DBS

REDIS_DB = TEST_DBS["ingest_hardening"]  # this module's own database (tests/kit.py TEST_DBS)
NOW = 1_796_000_000_000  # 2026-12-01, the app's clock in these tests
FUTURE = 253_402_214_400_000  # 9999-12-31: a sender's bid for the newest-events window
EVENT = {"source": "agent:a", "kind": "note", "correlationId": "c-1", "summary": "hello"}


class Recorder:
    """An Observer that keeps the metrics the routes report."""

    def __init__(self) -> None:
        self.metrics: list[tuple[str, float]] = []

    def metric(self, name: str, value: float = 1) -> None:
        self.metrics.append((name, value))

    def correlate(self, correlation_id: str) -> None:
        pass


class Api:
    """An app on one store with a fixed clock, a write and an admin key, and a recorder."""

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.acmi = Acmi(store, settings or Settings(auth_cache_s=0), clock=lambda: NOW)
        self.observer = Recorder()
        self.ctx = ApiContext(self.acmi, observer=self.observer)
        self.client = TestClient(create_app(self.ctx), raise_server_exceptions=False)
        self.keys = {
            scope: apikeys.mint(store, tenant="default", scope=scope, name=scope, now_ms=NOW)[0]
            for scope in ("write", "admin")
        }

    def auth(self, scope: str = "write", **headers: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.keys[scope]}", **headers}

    def post(self, path: str, body: Any, **headers: str) -> Any:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.client.post(path, content=content, headers=self.auth(**headers))

    def dbsize(self) -> int:
        size = self.acmi.store.execute(("DBSIZE",))
        assert isinstance(size, int)
        return size

    def idempotency_records(self) -> list[bytes]:
        names = self.acmi.store.execute(("KEYS", "acmi:_idem:*"))
        assert isinstance(names, list)
        values = [self.acmi.store.execute(("GET", name)) for name in names]
        assert all(isinstance(v, bytes) for v in values)
        return values  # type: ignore[return-value]


@pytest.fixture(params=["memory", "redis"])
def api(request: pytest.FixtureRequest) -> Iterator[Api]:
    """The app on the embedded store and on a real redis-server (the real Lua script)."""
    if request.param == "memory":
        yield Api(MemoryStore())
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    url = server.url_for(REDIS_DB)
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    store = RedisStore.from_url(url)
    try:
        yield Api(store)
    finally:
        store.close()


def assert_error(response: Any, status: int, field: str, rule: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert (body.get("field"), body.get("rule")) == (field, rule), body
    assert body["message"].startswith(field), body
    return body


def gmail_push(
    message_id: str = "2070443601311540",
    publish: str = "2026-11-29T10:15:30.123Z",
    data: bytes | None = None,
) -> bytes:
    inner = data or json.dumps({"emailAddress": "ops@example.com", "historyId": 9876543}).encode()
    envelope = {
        "message": {
            "data": base64.b64encode(inner).decode(),
            "messageId": message_id,
            "publishTime": publish,
        },
        "subscription": "projects/acme/subscriptions/gmail-push",
    }
    return json.dumps(envelope).encode()


# --- 1. delivery ids cover the URL; Idempotency-Key reuse; minimal records -------------------


def test_the_same_body_for_another_entity_is_a_new_delivery(api: Api) -> None:
    body = b'{"message":"Invoice paid","amount":1200}'
    first = api.post("/v1/ingest/n8n?entity=deal:a", body)
    second = api.post("/v1/ingest/n8n?entity=deal:b", body)
    assert (first.status_code, second.status_code) == (201, 201)
    assert "idempotent-replayed" not in second.headers
    assert second.json()["events"][0]["entity"] == "deal:b"
    assert api.acmi.timeline.size("deal:a") == api.acmi.timeline.size("deal:b") == 1


def test_the_same_body_with_another_mapping_is_a_new_delivery(api: Api) -> None:
    body = b'{"id":"evt_1","type":"invoice.paid","customer":"c1","note":"paid"}'
    base = "/v1/ingest/generic?map.entity=customer&map.category=%3Dcustomer&map.summary=note"
    first = api.post(base + "&map.kind=type", body)
    second = api.post(base + "&map.kind=%3Dpayment", body)
    assert (first.status_code, second.status_code) == (201, 201)
    assert "idempotent-replayed" not in second.headers
    kinds = [e.kind for e in api.acmi.timeline.read("customer:c1")]
    assert sorted(kinds) == ["invoice.paid", "payment"]


def test_the_push_token_and_unrelated_parameters_do_not_split_a_delivery(api: Api) -> None:
    _, token = source_configs.put_config(api.acmi.store, api.acmi.keys, "make", new_push_token=True)
    body = b'{"message":"from make","entity":"deal:t"}'
    first = api.client.post(f"/v1/ingest/make?token={token}", content=body)
    _, rotated = source_configs.put_config(
        api.acmi.store, api.acmi.keys, "make", new_push_token=True
    )
    again = api.client.post(f"/v1/ingest/make?token={rotated}&utm_source=x", content=body)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.headers["idempotent-replayed"] == "true"
    assert api.acmi.timeline.size("deal:t") == 1


def test_an_idempotency_key_reused_with_another_request_is_a_422(api: Api) -> None:
    key = {"Idempotency-Key": "delivery-1"}
    assert api.post("/v1/entities/user:i/events", EVENT, **key).status_code == 201
    before = api.dbsize()
    other_body = api.post("/v1/entities/user:i/events", {**EVENT, "summary": "x"}, **key)
    body = assert_error(other_body, 422, "Idempotency-Key", "reused")
    assert body["error"] == "idempotency_key_reused"
    other_entity = api.post("/v1/entities/user:j/events", EVENT, **key)
    assert_error(other_entity, 422, "Idempotency-Key", "reused")
    other_route = api.post("/v1/ingest/n8n?entity=user:i", EVENT, **key)
    assert_error(other_route, 422, "Idempotency-Key", "reused")
    assert api.dbsize() == before
    assert api.acmi.timeline.size("user:i") == 1
    assert api.acmi.timeline.size("user:j") == 0
    same = api.post("/v1/entities/user:i/events", EVENT, **key)
    assert same.status_code == 201 and same.headers["idempotent-replayed"] == "true"


def test_an_idempotency_key_reused_on_a_webhook_for_another_entity_is_a_422(api: Api) -> None:
    key = {"Idempotency-Key": "make-run-7"}
    body = b'{"message":"row 1"}'
    assert api.post("/v1/ingest/make?entity=deal:a", body, **key).status_code == 201
    assert_error(
        api.post("/v1/ingest/make?entity=deal:b", body, **key), 422, "Idempotency-Key", "reused"
    )
    assert api.acmi.timeline.size("deal:b") == 0


def test_a_replay_after_delete_serves_no_deleted_content(api: Api) -> None:
    body = b'{"message":"salary review: 180k","entity":"user:p"}'
    first = api.post("/v1/ingest/n8n", body)
    assert first.status_code == 201 and "180k" in first.text
    (stored,) = first.json()["events"]
    assert api.client.delete("/v1/entities/user:p", headers=api.auth()).status_code == 200
    replay = api.post("/v1/ingest/n8n", body)
    assert replay.status_code == 201 and replay.headers["idempotent-replayed"] == "true"
    assert replay.json() == {
        "stored": 1,
        "events": [{k: stored[k] for k in ("entity", "ts", "correlationId")}],
    }
    assert "180k" not in replay.text
    assert api.acmi.timeline.size("user:p") == 0


def test_idempotency_records_hold_a_request_digest_and_ids_only(api: Api) -> None:
    api.post("/v1/ingest/make?entity=deal:r", b'{"message":"secret plan","amount":5}')
    api.post(
        "/v1/entities/user:r/events", {**EVENT, "summary": "private"}, **{"Idempotency-Key": "k"}
    )
    api.client.post("/v1/ingest/gmail", content=gmail_push(), headers=api.auth())
    records = api.idempotency_records()
    assert len(records) == 3
    for raw in records:
        record = json.loads(raw)
        assert set(record) == {"request", "nonce", "stored", "events"}, record
        assert len(record["request"]) == 64 and record["stored"] == 1
        assert all(set(e) == {"entity", "ts", "correlationId"} for e in record["events"])
        assert b"secret" not in raw and b"private" not in raw and b"ops@" not in raw


def test_a_pubsub_redelivery_with_a_delivery_attempt_is_still_a_replay(api: Api) -> None:
    """Pub/Sub adds deliveryAttempt on redelivery: the messageId, not the body, decides."""
    first = json.loads(gmail_push())
    again = {**first, "deliveryAttempt": 2}
    assert api.post("/v1/ingest/gmail", first).status_code == 201
    replay = api.post("/v1/ingest/gmail", again)
    assert replay.status_code == 201 and replay.headers["idempotent-replayed"] == "true"
    assert api.acmi.timeline.size("mailbox:ops_example.com") == 1


@pytest.fixture
def upstash_api(upstash_double: UpstashDouble) -> Iterator[tuple[Api, UpstashDouble]]:
    settings = Settings(
        store_timeout_s=1.0, retry_base_delay_s=0.001, retry_max_delay_s=0.005, auth_cache_s=60
    )
    with UpstashStore(upstash_double.url, upstash_double.token, settings=settings) as store:
        yield Api(store, settings), upstash_double


@pytest.mark.parametrize(
    ("path", "headers", "metric"),
    [
        ("/v1/ingest/n8n?entity=deal:f", {}, "WebhookEventsStored"),
        ("/v1/entities/deal:f/events", {"Idempotency-Key": "lost-1"}, "EventsStored"),
    ],
)
def test_a_reply_lost_after_the_write_counts_as_stored_not_replayed(
    upstash_api: tuple[Api, UpstashDouble], path: str, headers: dict[str, str], metric: str
) -> None:
    """The store retries the script after a dropped reply and meets our own ONCE record:
    that is this delivery's first write, not a replay."""
    api, double = upstash_api
    # warm the key and source config caches: the lost reply must be the delivery's own
    warm = {"Idempotency-Key": "warm"} if headers else {}
    api.post(path.replace("deal:f", "deal:warm"), {**EVENT, "summary": "warm"}, **warm)
    api.observer.metrics.clear()
    double.lose_reply_next(1)
    response = api.post(path, {**EVENT, "summary": "flaky network"}, **headers)
    assert response.status_code == 201, response.text
    assert "idempotent-replayed" not in response.headers
    assert response.json()["events"][0]["summary"] == "flaky network"  # the full response
    assert api.observer.metrics == [(metric, 1)]
    assert api.acmi.timeline.size("deal:f") == 1
    # a real retry of the sender afterwards is a replay
    again = api.post(path, {**EVENT, "summary": "flaky network"}, **headers)
    assert again.headers["idempotent-replayed"] == "true"
    assert api.observer.metrics[-1] == ("DeliveriesReplayed", 1)


# --- 2. webhook ts bounded to now + skew ---------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/ingest/make?entity=deal:w", {"message": "future", "ts": FUTURE}),
        ("/v1/ingest/n8n?entity=deal:w", [{"message": "future", "ts": FUTURE}]),
        ("/v1/ingest/generic?entity=deal:w&map.summary=m&map.ts=at", {"m": "x", "at": FUTURE}),
        ("/v1/ingest/gmail?entity=deal:w", gmail_push(publish="9999-12-31T00:00:00Z")),
    ],
)
def test_a_webhook_ts_from_the_future_is_stored_at_now(api: Api, path: str, body: Any) -> None:
    response = api.post(path, body)
    assert response.status_code == 201, response.text
    (event,) = api.acmi.timeline.read("deal:w")
    assert event.ts == NOW
    assert event.to_dict()["sender_ts"] == FUTURE  # the sender's value, kept beside ts
    assert response.json()["events"][0]["sender_ts"] == FUTURE
    # a later, honest event is the newest one agents read
    api.post("/v1/ingest/make?entity=deal:w", {"message": "honest", "ts": NOW + 1})
    newest = api.client.get("/v1/entities/deal:w?events=1", headers=api.auth()).json()
    assert [e["summary"] for e in newest["timeline"]] == ["honest"]


def test_a_webhook_ts_within_the_skew_is_kept(api: Api) -> None:
    ts = NOW + MAX_WEBHOOK_TS_SKEW_MS
    assert api.post("/v1/ingest/make?entity=deal:s", {"message": "m", "ts": ts}).status_code == 201
    (event,) = api.acmi.timeline.read("deal:s")
    assert event.ts == ts and "sender_ts" not in event.to_dict()


def test_a_webhook_ts_past_year_9999_is_still_a_400(api: Api) -> None:
    before = api.dbsize()
    response = api.post("/v1/ingest/make?entity=deal:s", {"message": "m", "ts": MAX_TS_MS + 1})
    assert_error(response, 400, "events[0].ts", "range")
    assert api.dbsize() == before


def test_posted_events_keep_their_ts(api: Api) -> None:
    """An API-key writer may already rewrite or delete the entity: its ts is stored as sent."""
    assert api.post("/v1/entities/user:f/events", {**EVENT, "ts": FUTURE}).status_code == 201
    (event,) = api.acmi.timeline.read("user:f")
    assert event.ts == FUTURE and "sender_ts" not in event.to_dict()


# --- 3. lenient JSON only where a sender needs it ------------------------------------------


def test_only_make_and_generic_accept_raw_newlines() -> None:
    assert {spec.name for spec in SOURCES if spec.lenient_json} == {"make", "generic"}


@pytest.mark.parametrize(
    ("source", "status"),
    [("make", 201), ("generic", 201), ("n8n", 400), ("gmail", 400)],
)
def test_raw_newlines_tabs_and_returns_only_from_lenient_sources(
    api: Api, source: str, status: int
) -> None:
    body = b'{"message":"line 1\nline 2\r\n\tindented","kind":"k"}'
    response = api.post(f"/v1/ingest/{source}?entity=deal:n&map.summary=message", body)
    if status == 400:
        assert_error(response, 400, "body", "json")
        assert api.acmi.timeline.size("deal:n") == 0
        return
    assert response.status_code == 201, response.text
    (event,) = api.acmi.timeline.read("deal:n")
    assert event.summary == "line 1\nline 2\r\n\tindented"


# --- 4. bad bodies: a 4xx naming body and the rule, on every route that takes a body -------


def nested(depth: int) -> bytes:
    """An object holding arrays nested ``depth`` levels in all."""
    return b'{"message":"m","x":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


def padded_deep_webhook() -> bytes:
    """527 bytes nested 253 deep: small enough for any cap, deep enough to break reads."""
    head = b'{"message":"' + b"m" * 4 + b'","x":'
    body = head + b"[" * 252 + b"]" * 252 + b"}"
    assert len(body) == 527
    return body


BODY_ROUTES: list[tuple[str, str]] = [
    ("POST", "/v1/entities/user:b/events"),
    ("POST", "/v1/ingest/make?entity=deal:b"),
    ("POST", "/v1/ingest/n8n?entity=deal:b"),
    ("POST", "/v1/ingest/generic?entity=deal:b&map.summary=message"),
    ("POST", "/v1/ingest/gmail?entity=deal:b"),
    ("PUT", "/v1/entities/user:b/profile"),
    ("PATCH", "/v1/entities/user:b/profile"),
    ("PUT", "/v1/entities/user:b/signals"),
    ("PATCH", "/v1/entities/user:b/signals"),
    ("PUT", "/v1/entities/user:b/signals/k"),
]
BAD_BODIES: list[tuple[str, bytes, str]] = [
    # (name, body, rule): each is a 400 naming "body" on every route of BODY_ROUTES
    ("100k open brackets", b"[" * 100_000, "max_depth"),
    ("100k balanced brackets", b"[" * 100_000 + b"]" * 100_000, "max_depth"),
    ("65 levels", nested(MAX_JSON_DEPTH + 1), "max_depth"),
    ("253 levels in 527 bytes", padded_deep_webhook(), "max_depth"),
    ("objects 65 deep", b'{"a":' * 65 + b"1" + b"}" * 65, "max_depth"),
    ("5000-digit integer", b'{"message":"m","n":' + b"1" * 5000 + b"}", "number"),
    ("4301-digit negative", b"-" + b"9" * 4301, "number"),
    ("NUL in a string", b'{"message":"a\x00b"}', "json"),
    ("escape char in a string", b'{"message":"a\x1b[31mred"}', "json"),
    ("form feed in a string", b'{"message":"a\x0cb"}', "json"),
    ("unit separator in a string", b'{"message":"a\x1fb"}', "json"),
]
CORPUS = [
    (method, path, name, body, rule)
    for method, path in BODY_ROUTES
    for name, body, rule in BAD_BODIES
]


@pytest.mark.parametrize(
    ("method", "path", "name", "body", "rule"),
    CORPUS,
    ids=[f"{m} {p.split('?')[0]} {n}" for m, p, n, _, _ in CORPUS],
)
def test_bad_bodies_are_a_400_naming_body_and_the_rule_and_store_nothing(
    api: Api, method: str, path: str, name: str, body: bytes, rule: str
) -> None:
    before = api.dbsize()
    response = api.client.request(method, path, content=body, headers=api.auth("admin"))
    assert_error(response, 400, "body", rule)
    assert api.dbsize() == before


def deep(depth: int) -> bytes:
    """A JSON value nested ``depth`` levels (arrays)."""
    return b"[" * depth + b"]" * depth


def body_of_depth(path: str, depth: int) -> bytes:
    """A valid body for the route at ``path``, nested ``depth`` levels in all."""
    if "gmail" in path:  # the envelope's message (2 levels) carries attributes (1 more)
        envelope = json.loads(gmail_push())
        text = json.dumps(envelope).encode()
        return text.replace(
            b'"messageId"', b'"attributes":{"x":' + deep(depth - 3) + b'},"messageId"'
        )
    if path.endswith("/events"):
        return json.dumps(EVENT).encode()[:-1] + b',"payload":' + deep(depth - 1) + b"}"
    if path.endswith("/signals/k"):
        return deep(depth)
    return b'{"message":"m","x":' + deep(depth - 1) + b"}"


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_the_depth_bound_is_exact_and_what_passes_reads_back(
    api: Api, method: str, path: str
) -> None:
    def send(depth: int) -> Any:
        body = body_of_depth(path, depth)
        return api.client.request(method, path, content=body, headers=api.auth("admin"))

    assert_error(send(MAX_JSON_DEPTH + 1), 400, "body", "max_depth")
    # 64 levels pass the body parser; the stored value may nest one level more (a webhook
    # item becomes an event's payload), which the model's own bound may refuse, by name
    at_limit = send(MAX_JSON_DEPTH)
    assert at_limit.status_code < 500, at_limit.text
    assert at_limit.status_code < 300 or at_limit.json()["field"] != "body", at_limit.text
    response = send(MAX_JSON_DEPTH - 1)
    assert response.status_code < 300, response.text
    entity = path.split("/")[3] if path.startswith("/v1/entities/") else "deal:b"
    read = api.client.get(f"/v1/entities/{entity}", headers=api.auth())
    assert read.status_code == 200, read.text
    assert read.json()["timeline"] or read.json()["profile"] or read.json()["signals"]


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (b"[" * 100_000, "base64_json"),
        (b'{"emailAddress":"a@b.c","historyId":' + b"7" * 5000 + b"}", "base64_json"),
    ],
)
def test_a_pubsub_message_data_that_cannot_be_decoded_is_a_400(
    api: Api, data: bytes, rule: str
) -> None:
    before = api.dbsize()
    response = api.post("/v1/ingest/gmail", gmail_push(data=data))
    assert_error(response, 400, "body.message.data", rule)
    assert api.dbsize() == before


# --- 5. generic mapping paths -------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "body", "status", "field", "rule"),
    [
        # '²' is a digit to str.isdigit() but no index: the path is simply absent
        (
            "map.kind=items.²&map.summary=s",
            {"items": ["a"], "s": "x"},
            400,
            "body.items.²",
            "required",
        ),
        # an index longer than 9 digits is absent too
        (
            "map.kind=items.1234567890&map.summary=s",
            {"items": ["a"], "s": "x"},
            400,
            "body.items.1234567890",
            "required",
        ),
        (
            "map.kind=items." + "9" * 5000 + "&map.summary=s",
            {"items": ["a"]},
            400,
            "mapping.kind",
            "max_length",
        ),
        (
            "map.kind=" + ".".join(["a"] * 65) + "&map.summary=s",
            {"a": "x"},
            400,
            "mapping.kind",
            "max_segments",
        ),
        ("map.summary=%3D" + "x" * 600, {"a": "x"}, 400, "mapping.summary", "max_length"),
    ],
    ids=["superscript digit", "10-digit index", "5000-digit index", "65 segments", "long literal"],
)
def test_bad_mapping_paths_are_a_400_naming_the_field(
    api: Api, query: str, body: Any, status: int, field: str, rule: str
) -> None:
    before = api.dbsize()
    response = api.post(f"/v1/ingest/generic?entity=deal:m&{query}", body)
    assert_error(response, status, field, rule)
    assert api.dbsize() == before


def test_ascii_indexes_and_digit_keys_still_map(api: Api) -> None:
    body = {"items": [{"t": "first"}, {"t": "second"}], "by_id": {"12345678901234": "big"}}
    query = "map.kind=items.1.t&map.summary=by_id.12345678901234"
    assert api.post(f"/v1/ingest/generic?entity=deal:m&{query}", body).status_code == 201
    (event,) = api.acmi.timeline.read("deal:m")
    assert (event.kind, event.summary) == ("second", "big")

"""Reliability drills: concurrent writers on every slot, fault storms on the Upstash double
while a sender retries webhook deliveries, hypothesis properties of validation and JSON
round trips, and a bad-input corpus for the entity routes test_api.py does not cover.

Every drill runs on each backend where it makes sense (embedded, real redis-server, the
Upstash REST double), because fakeredis, redis-py and the REST path differ in exactly the
places these drills probe (threads, cjson, dropped connections)."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from acmi_core import Acmi, AcmiValidationError, Event, Settings
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.model import EVENT_FIELD_ORDER, MAX_TS_MS, parse_event, seconds_like
from acmi_core.guard.secrets import scan
from acmi_core.store.memory import MemoryStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import run_together, same_json

EVENT = {"source": "agent:drill", "kind": "note", "correlationId": "c-1", "summary": "drill"}


# --- 1. concurrent writers lose nothing, on every slot and backend ---------------------------

WRITERS = 24


def test_concurrent_signal_sets_keep_every_key(acmi: Acmi) -> None:
    entity = "user:race-signals"
    acmi.delete(entity)  # the redis backend's database outlives a test
    acmi.signals.set(entity, "before", [])
    run_together(WRITERS, lambda i: acmi.signals.set(entity, f"k{i}", {"writer": i, "v": [i]}))
    stored = acmi.signals.all(entity)
    assert stored == {"before": [], **{f"k{i}": {"writer": i, "v": [i]} for i in range(WRITERS)}}


def test_concurrent_signal_deletes_and_sets_interleave_exactly(acmi: Acmi) -> None:
    entity = "user:race-signal-deletes"
    acmi.delete(entity)  # the redis backend's database outlives a test
    acmi.signals.update(entity, {f"old{i}": i for i in range(WRITERS)})

    def work(i: int) -> None:
        if i % 2:
            acmi.signals.delete(entity, f"old{i}")
        else:
            acmi.signals.set(entity, f"new{i}", i)

    run_together(WRITERS, work)
    expected = {f"old{i}": i for i in range(0, WRITERS, 2)}
    expected |= {f"new{i}": i for i in range(0, WRITERS, 2)}
    assert acmi.signals.all(entity) == expected


def test_concurrent_profile_merges_keep_every_field(acmi: Acmi) -> None:
    entity = "user:race-profile"
    acmi.delete(entity)  # the redis backend's database outlives a test
    acmi.profile.set(entity, {"name": "race", "actor_type": "system"})
    run_together(WRITERS, lambda i: acmi.profile.merge(entity, {f"f{i}": 12345678901234567 + i}))
    profile = acmi.profile.get(entity)
    assert profile == {
        "name": "race",
        "actor_type": "system",  # an explicit stored value is never clobbered by auto-fill
        "tenant_id": "madez",
        **{f"f{i}": 12345678901234567 + i for i in range(WRITERS)},
    }


def test_concurrent_appends_store_every_event_once(acmi: Acmi) -> None:
    entity = "user:race-timeline"
    acmi.delete(entity)  # the redis backend's database outlives a test
    run_together(
        WRITERS,
        lambda i: acmi.timeline.append(
            entity, {**EVENT, "ts": 1000 + i % 3, "correlationId": f"c{i}"}
        ),
    )
    events = acmi.timeline.read(entity)
    assert sorted(e.correlationId for e in events) == sorted(f"c{i}" for i in range(WRITERS))
    assert not events.skipped
    assert entity in acmi.list("user")


def test_concurrent_mixed_batches_apply_whole(acmi: Acmi) -> None:
    """Batches mixing every slot, on one entity, all at once: each batch lands whole."""
    entity = "agent:race-batch"
    acmi.delete(entity)  # the redis backend's database outlives a test
    acmi.signals.update(entity, {f"drop{i}": i for i in range(WRITERS)})

    def work(i: int) -> None:
        with acmi.batch() as b:
            b.profile.merge(entity, {f"p{i}": i})
            b.signals.set(entity, f"s{i}", [i])
            b.signals.delete(entity, f"drop{i}")
            b.timeline.append(entity, {**EVENT, "correlationId": f"b{i}", "ts": 5000 + i})
            if i % 4 == 0:
                b.signals.set(entity, "shared", i)  # contended key: one writer wins

    run_together(WRITERS, work)
    ctx = acmi.get(entity, events=100)
    assert ctx.profile is not None
    assert {k: v for k, v in ctx.profile.items() if k.startswith("p")} == {
        f"p{i}": i for i in range(WRITERS)
    }
    assert ctx.profile["actor_type"] == "agent"
    signals = dict(ctx.signals)
    assert signals.pop("shared") in range(0, WRITERS, 4)
    assert signals == {f"s{i}": [i] for i in range(WRITERS)}
    assert sorted(e.correlationId for e in ctx.timeline) == sorted(f"b{i}" for i in range(WRITERS))


# --- 2. fault storms while a sender retries: every acknowledged event exactly once ------------

DELIVERIES = 40
SENDER_ATTEMPTS = 6
HANG_S = 0.6  # longer than the store's deadline: the client gives up, the write runs later


def drill_settings(auth_cache_s: float) -> Settings:
    return Settings(
        store_timeout_s=0.35,
        store_max_attempts=3,
        retry_base_delay_s=0.001,
        retry_max_delay_s=0.005,
        auth_cache_s=auth_cache_s,
    )


@dataclass
class Delivery:
    index: int
    route: str  # "events" (Idempotency-Key header) | "n8n" (body-derived key)
    correlation_id: str
    statuses: list[int] = field(default_factory=list)
    acked: dict[str, Any] | None = None  # the body of the first 201

    def request(self) -> tuple[str, bytes, dict[str, str]]:
        body: dict[str, Any]
        if self.route == "events":
            # no ts: a duplicate would differ in ts and survive ZADD NX
            body = {**EVENT, "correlationId": self.correlation_id, "seq": self.index}
            return (
                "/v1/entities/user:drill/events",
                json.dumps(body).encode(),
                {"Idempotency-Key": f"delivery-{self.index}"},
            )
        body = {"id": self.correlation_id, "message": f"item {self.index}", "row": self.index}
        return "/v1/ingest/n8n?entity=deal:drill", json.dumps(body).encode(), {}


def inject_random_fault(double: UpstashDouble, rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.35:
        return "none"
    if roll < 0.50:
        # a storm outlasts the store's retries; Upstash may say when to come back
        double.fail_next(rng.randint(1, 8), status=429, retry_after=rng.choice([None, 0, 1]))
        return "429 storm"
    if roll < 0.65:
        double.fail_next(rng.randint(1, 4), status=rng.choice([500, 502, 503]))
        return "5xx"
    if roll < 0.78:
        double.drop_next(rng.randint(1, 3))
        return "dropped connection"
    if roll < 0.93:
        double.lose_reply_next(rng.randint(1, 2))
        return "lost reply"
    double.hang_next(1, HANG_S)
    return "hang"


@contextmanager
def drill_api(double: UpstashDouble, auth_cache_s: float) -> Iterator[tuple[TestClient, Acmi, str]]:
    cfg = drill_settings(auth_cache_s)
    with UpstashStore(double.url, double.token, settings=cfg) as store:
        acmi = Acmi(store, cfg)
        key, _ = apikeys.mint(store, tenant="default", scope="write", name="drill", now_ms=1)
        with TestClient(create_app(ApiContext(acmi)), raise_server_exceptions=False) as client:
            yield client, acmi, key


@pytest.mark.slow  # 40 deliveries through injected faults and hangs
@pytest.mark.parametrize(
    ("seed", "auth_cache_s"),
    [(7, 0.0), (2026, 600.0), (31337, 600.0)],
    ids=["cold keys (faults hit auth too)", "warm keys", "warm keys, another seed"],
)
def test_fault_storm_every_acknowledged_event_exactly_once(
    upstash_double: UpstashDouble, seed: int, auth_cache_s: float
) -> None:
    with drill_api(upstash_double, auth_cache_s) as (client, acmi, key):
        fault_storm(client, acmi, key, upstash_double, seed)


def fault_storm(
    client: TestClient, acmi: Acmi, key: str, upstash_double: UpstashDouble, seed: int
) -> None:
    """N deliveries, each retried like a sender would (on 5xx; a hung store becomes a 503
    once the store's deadline passes, the sender's timeout) while random faults are
    injected; then every acknowledged delivery's event is stored exactly once."""
    rng = random.Random(seed)
    auth = {"authorization": f"Bearer {key}"}
    deliveries = [
        Delivery(i, rng.choice(["events", "n8n"]), f"drill-{seed}-{i}") for i in range(DELIVERIES)
    ]
    faults: Counter[str] = Counter()
    unexpected: list[str] = []
    for d in deliveries:
        path, body, headers = d.request()
        for _ in range(SENDER_ATTEMPTS):
            faults[inject_random_fault(upstash_double, rng)] += 1
            response = client.post(path, content=body, headers={**auth, **headers})
            d.statuses.append(response.status_code)
            if response.status_code == 201:
                d.acked = response.json()
                break
            # a sender retries on 5xx and timeouts; the only acceptable failure is a 503
            # with Retry-After (throttled / unavailable), never a 500 or a 4xx
            if response.status_code != 503 or "retry-after" not in response.headers:
                unexpected.append(f"delivery {d.index}: {response.status_code} {response.text}")
                break
    upstash_double.clear_faults()
    time.sleep(HANG_S + 0.3)  # hung requests finish (and run their writes) first
    assert not unexpected, unexpected[:5]
    assert len(set(faults) - {"none"}) >= 4, f"too few kinds of fault injected: {faults}"

    def stored_counts() -> Counter[str]:
        events = [*acmi.timeline.read("user:drill"), *acmi.timeline.read("deal:drill")]
        return Counter(e.correlationId for e in events)

    counts = stored_counts()
    acked = [d for d in deliveries if d.acked is not None]
    assert len(acked) >= DELIVERIES // 2, "too few deliveries got through to mean anything"
    for d in deliveries:
        n = counts[d.correlation_id]
        if d.acked is not None:
            assert n == 1, f"acknowledged delivery {d.index} stored {n} times ({d.statuses})"
        else:
            assert n <= 1, f"unacknowledged delivery {d.index} stored {n} times ({d.statuses})"
    assert set(counts) <= {d.correlation_id for d in deliveries}
    # The sender's last word: every delivery once more, the store healthy. Acknowledged
    # ones are replays naming what the first response stored (ids, not data); the rest
    # land now, once.
    for d in deliveries:
        path, body, headers = d.request()
        response = client.post(path, content=body, headers={**auth, **headers})
        assert response.status_code == 201, response.text
        if d.acked is not None:
            assert response.headers.get("idempotent-replayed") == "true"
            assert response.json() == _ids_only(d.acked)
    assert stored_counts() == Counter({d.correlation_id: 1 for d in deliveries})


def _ids_only(response: dict[str, Any]) -> dict[str, Any]:
    """What a replay answers: the count and each stored event's entity, ts, correlationId."""
    fields = ("entity", "ts", "correlationId")
    return {
        "stored": response["stored"],
        "events": [{k: e[k] for k in fields} for e in response["events"]],
    }


@pytest.fixture
def warm_api(upstash_double: UpstashDouble) -> Iterator[tuple[TestClient, Acmi, dict[str, str]]]:
    """Key lookups cached: a POST /events is exactly one store request (the write)."""
    cached = Settings(
        store_timeout_s=1.0, retry_base_delay_s=0.001, retry_max_delay_s=0.005, auth_cache_s=600
    )
    with UpstashStore(upstash_double.url, upstash_double.token, settings=cached) as store:
        acmi = Acmi(store, cached)
        key, _ = apikeys.mint(store, tenant="default", scope="write", name="drill", now_ms=1)
        auth = {"authorization": f"Bearer {key}"}
        with TestClient(create_app(ApiContext(acmi)), raise_server_exceptions=False) as client:
            assert client.get("/v1/entities/user:warm", headers=auth).status_code == 200
            # the write script loaded (minting a key runs none: auth/apikeys.py)
            warm = client.post("/v1/entities/user:warm/events", json=[EVENT], headers=auth)
            assert warm.status_code == 201, warm.text
            yield client, acmi, auth


@pytest.mark.parametrize("with_key", [True, False], ids=["Idempotency-Key", "no key"])
def test_a_lost_reply_on_every_write_still_stores_once(
    warm_api: tuple[TestClient, Acmi, dict[str, str]],
    upstash_double: UpstashDouble,
    with_key: bool,
) -> None:
    """Each write runs, its reply is lost, the store retries it: with a key the retry is a
    replay; without one, the retry sends the identical member (ts fixed before the first
    try) and ZADD NX keeps one. Batches of events too."""
    client, acmi, auth = warm_api
    for i in range(8):
        events = [{**EVENT, "correlationId": f"lost-{i}-{j}"} for j in range(1 + i % 3)]
        headers = {**auth, "Idempotency-Key": f"lost-{i}"} if with_key else auth
        upstash_double.reset_counts()
        upstash_double.lose_reply_next(1)
        response = client.post("/v1/entities/user:lost/events", json=events, headers=headers)
        assert response.status_code == 201, response.text
        assert upstash_double.requests == 2  # the write, and its retry
        assert [e["correlationId"] for e in response.json()["events"]] == [
            e["correlationId"] for e in events
        ]
    counts = Counter(e.correlationId for e in acmi.timeline.read("user:lost"))
    assert counts == Counter({f"lost-{i}-{j}": 1 for i in range(8) for j in range(1 + i % 3)})


# --- 3. properties: validation and JSON round trips --------------------------------------------

KNOWN_FIELDS = [*EVENT_FIELD_ORDER, "correlation_id"]
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# anything a Python caller could pass: JSON, NaN/inf, and values JSON cannot carry
any_values = (
    json_values
    | st.floats()
    | st.sampled_from(["agent", "human", "system", "robot", "", "x" * 501, "\ud800"])
    | st.binary(max_size=4)
    | st.sets(st.integers(), max_size=2)
    | st.just(object())
)
field_names = st.sampled_from(KNOWN_FIELDS) | st.text(max_size=12) | st.integers(-3, 3)
random_dicts = st.dictionaries(field_names, any_values, max_size=8)
near_valid = st.fixed_dictionaries(
    {
        "source": st.sampled_from(["agent:a", "user:u", "system:s", "n8n", "x"]),
        "kind": st.text(min_size=1, max_size=10),
        "correlationId": st.text(min_size=1, max_size=10),
        "summary": st.text(min_size=1, max_size=30),
    },
    optional={
        "ts": st.integers(-5, 2**53) | st.floats(0, 1e15) | any_values,
        "payload": json_values,
        "parentCorrelationId": st.text(min_size=1, max_size=5) | any_values,
        "speaker_type": st.sampled_from(["agent", "human", "system", "external", "bot"]),
        "tenant_id": st.text(max_size=5) | any_values,
        "extra_field": json_values,
        "nested": st.dictionaries(st.text(max_size=5), json_values, max_size=3),
    },
)


@settings(max_examples=400, deadline=None)
@given(raw=random_dicts | near_valid)
def test_any_dict_validates_and_round_trips_or_names_a_field(raw: dict[Any, Any]) -> None:
    try:
        event = parse_event(raw, now_ms=1_700_000_000_000, tenant="default")
    except AcmiValidationError as exc:
        assert isinstance(exc.field, str) and exc.field, exc
        assert exc.rule, exc
        return
    stored = event.to_dict()
    # what is stored is what is read back (numbers as JSON.stringify writes them: 3.0 is 3)
    assert same_json(json.loads(event.to_json()), stored)
    assert same_json(Event.model_validate(json.loads(event.to_json())).to_dict(), stored)
    for name, value in raw.items():  # nothing given is dropped or changed
        if name == "ts" and value is None:
            assert stored["ts"] == 1_700_000_000_000  # null ts means "now", like a missing one
            continue
        assert name in stored, name
        assert same_json(stored[name], value), name
    again = parse_event(stored, now_ms=0, tenant="other")
    assert again.to_dict() == stored  # re-parsing the stored form changes nothing


def _unique(prefix: str) -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"{prefix}{n}"


_ids = _unique("rt")
ROUND_TRIP = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@ROUND_TRIP
@given(
    payload=json_values,
    extra=st.dictionaries(
        st.text(min_size=1, max_size=8).filter(lambda k: k not in KNOWN_FIELDS),
        json_values,
        max_size=3,
    ),
    # a ts only seconds can be is refused (model.seconds_like): any other ms time round-trips
    ts=(st.integers(0, MAX_TS_MS) | st.floats(0, MAX_TS_MS)).filter(lambda t: not seconds_like(t)),
)
def test_json_round_trips_through_the_timeline(
    acmi: Acmi, payload: Any, extra: dict[str, Any], ts: float
) -> None:
    assume(not scan(payload) and not scan(extra))  # a generated card number: see below
    entity = f"user:{next(_ids)}"
    sent = {**EVENT, **extra, "ts": ts, "payload": payload}
    stored = acmi.timeline.append(entity, sent)
    (read,) = acmi.timeline.read(entity)
    assert same_json(read.to_dict(), stored.to_dict())
    assert same_json(read.to_dict()["payload"], payload)  # [] stays [], big ints stay exact
    for name, value in extra.items():
        assert same_json(read.to_dict()[name], value)


profile_keys = st.text(min_size=1, max_size=16).filter(
    lambda k: k not in ("actor_type", "tenant_id")
)


@ROUND_TRIP
@given(
    values=st.dictionaries(profile_keys, json_values, min_size=1, max_size=5),
    more=st.dictionaries(profile_keys, json_values, max_size=3),
)
def test_json_round_trips_through_signals_and_profile(
    acmi: Acmi, values: dict[str, Any], more: dict[str, Any]
) -> None:
    """Signals and merges splice raw JSON inside Lua: keys with quotes, backslashes and
    unicode, big ints and empty arrays must come back exactly."""
    # A generated 13-19 digit integer can be a Luhn-valid card number, which the guard
    # refuses (a test of its own): this drill is about the JSON, so those are skipped.
    assume(not scan(values) and not scan(more))
    entity = f"project:{next(_ids)}"
    acmi.signals.update(entity, values)
    if more:
        acmi.signals.update(entity, more)
    assert same_json(acmi.signals.all(entity), {**values, **more})
    acmi.profile.merge(entity, values)
    merged = acmi.profile.merge(entity, more) if more else acmi.profile.get(entity)
    expected = {**values, **more, "tenant_id": "madez"}
    assert same_json(merged, expected)
    assert same_json(acmi.profile.get(entity), expected)


# --- 4. bad input on the entity routes: a 4xx naming the field, nothing stored ---------------

BIG = b'{"a":"' + b"x" * 300_000 + b'"}'
ENTITY_BAD_INPUT: list[tuple[str, str, Any, int, str]] = [
    # signals: PUT (whole map)
    ("PUT", "/v1/entities/user:b/signals", [1, 2], 400, "signals"),
    ("PUT", "/v1/entities/user:b/signals", b"null", 400, "signals"),
    ("PUT", "/v1/entities/user:b/signals", "text", 400, "signals"),
    ("PUT", "/v1/entities/user:b/signals", {"k" * 129: 1}, 400, "signals." + "k" * 129),
    ("PUT", "/v1/entities/user:b/signals", {"": 1}, 400, "signals."),
    ("PUT", "/v1/entities/user:b/signals", b"{not json", 400, "body"),
    ("PUT", "/v1/entities/user:b/signals", b"", 400, "body"),
    ("PUT", "/v1/entities/user:b/signals", b"\xff\xfe{}", 400, "body"),
    ("PUT", "/v1/entities/user:b/signals", b'{"a": NaN}', 400, "body"),
    ("PUT", "/v1/entities/user:b/signals", b'{"a": Infinity}', 400, "body"),
    ("PUT", "/v1/entities/user:b/signals", BIG, 413, "body"),
    ("PUT", "/v1/entities/Cat:Bad/signals", {"a": 1}, 400, "entity"),
    # signals: PATCH (set some)
    ("PATCH", "/v1/entities/user:b/signals", [1], 400, "signals"),
    ("PATCH", "/v1/entities/user:b/signals", b"null", 400, "signals"),
    ("PATCH", "/v1/entities/user:b/signals", 5, 400, "signals"),
    ("PATCH", "/v1/entities/user:b/signals", {"": 1}, 400, "signals."),
    ("PATCH", "/v1/entities/user:b/signals", b"", 400, "body"),
    ("PATCH", "/v1/entities/user:b/signals", b'{"a":1,}', 400, "body"),
    ("PATCH", "/v1/entities/user:b/signals", BIG, 413, "body"),
    ("PATCH", "/v1/entities/no-colon/signals", {"a": 1}, 400, "entity"),
    # signals: one key
    ("PUT", "/v1/entities/user:b/signals/k", b"", 400, "body"),
    ("PUT", "/v1/entities/user:b/signals/k", b"{x", 400, "body"),
    ("PUT", "/v1/entities/user:b/signals/k", b"NaN", 400, "body"),
    ("PUT", "/v1/entities/user:b/signals/k", b"\xc3\x28", 400, "body"),
    ("PUT", "/v1/entities/user:/signals/k", 1, 400, "entity"),
    # signals: DELETE
    ("DELETE", "/v1/entities/Cat:Bad/signals", None, 400, "entity"),
    ("DELETE", "/v1/entities/user:b/signals/" + "k" * 129, None, 400, "key"),
    ("DELETE", "/v1/entities/no-colon/signals/k", None, 400, "entity"),
    ("DELETE", "/v1/entities/tenant:x/signals/k", None, 400, "entity"),
    # profile: PATCH
    ("PATCH", "/v1/entities/user:b/profile", [1], 400, "profile"),
    ("PATCH", "/v1/entities/user:b/profile", b"null", 400, "profile"),
    ("PATCH", "/v1/entities/user:b/profile", {"actor_type": "robot"}, 400, "profile.actor_type"),
    ("PATCH", "/v1/entities/user:b/profile", {"tenant_id": 5}, 400, "profile.tenant_id"),
    ("PATCH", "/v1/entities/user:b/profile", b"\xff", 400, "body"),
    ("PATCH", "/v1/entities/user:b/profile", b'{"a": -Infinity}', 400, "body"),
    ("PATCH", "/v1/entities/user:b/profile", BIG, 413, "body"),
    ("PATCH", "/v1/entities/:missing-cat/profile", {"a": 1}, 400, "entity"),
    ("PUT", "/v1/entities/user:b/profile", {"tenant_id": ["x"]}, 400, "profile.tenant_id"),
    ("DELETE", "/v1/entities/Cat:Bad/profile", None, 400, "entity"),
    # timeline query parameters
    ("GET", "/v1/entities/user:b/timeline?limit=abc", None, 400, "limit"),
    ("GET", "/v1/entities/user:b/timeline?limit=-1", None, 400, "limit"),
    ("GET", "/v1/entities/user:b/timeline?limit=10001", None, 400, "limit"),
    ("GET", "/v1/entities/user:b/timeline?limit=1.5", None, 400, "limit"),
    ("GET", "/v1/entities/user:b/timeline?since_ms=abc", None, 400, "since_ms"),
    ("GET", "/v1/entities/user:b/timeline?until_ms=inf", None, 400, "until_ms"),
    ("GET", "/v1/entities/user:b/timeline?until_ms=-nan", None, 400, "until_ms"),
    ("GET", "/v1/entities/user:b/timeline?reverse=maybe", None, 400, "reverse"),
    ("GET", "/v1/entities/Cat:Bad/timeline", None, 400, "entity"),
    ("GET", "/v1/entities/user:b?events=abc", None, 400, "events"),
    ("GET", "/v1/entities/user:b?events=1001", None, 400, "events"),
    # list
    ("GET", "/v1/namespaces/tenant/entities", None, 400, "category"),
    ("GET", "/v1/namespaces/1abc/entities", None, 400, "category"),
    ("GET", "/v1/namespaces/" + "a" * 129 + "/entities", None, 400, "category"),
    ("GET", "/v1/namespaces/a.b/entities", None, 400, "category"),
    # delete
    ("DELETE", "/v1/entities/Cat:Bad", None, 400, "entity"),
    ("DELETE", "/v1/entities/no-colon", None, 400, "entity"),
    ("DELETE", "/v1/entities/user:", None, 400, "entity"),
    ("DELETE", "/v1/entities/user:a:b", None, 400, "entity"),
    ("DELETE", "/v1/entities/user:" + "a" * 300, None, 400, "entity"),
]


@pytest.fixture(scope="module")
def entity_api() -> tuple[TestClient, Acmi, str]:
    acmi = Acmi(MemoryStore(), Settings(auth_cache_s=60))
    key, _ = apikeys.mint(acmi.store, tenant="default", scope="admin", name="bad", now_ms=1)
    acmi.profile.set("user:b", {"name": "b"})  # something to (not) overwrite
    acmi.signals.set("user:b", "k", 1)
    return TestClient(create_app(ApiContext(acmi)), raise_server_exceptions=False), acmi, key


def _snapshot(acmi: Acmi) -> dict[bytes, Any]:
    keys = acmi.store.execute(("KEYS", "*"))
    assert isinstance(keys, list)
    return {k: acmi.store.execute(("DUMP", k)) for k in keys if isinstance(k, bytes)}


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    ENTITY_BAD_INPUT,
    ids=[f"{m} {p[:48]} -> {f[:24]}" for m, p, _, _, f in ENTITY_BAD_INPUT],
)
def test_entity_routes_bad_input_is_a_4xx_naming_the_field(
    entity_api: tuple[TestClient, Acmi, str],
    method: str,
    path: str,
    body: Any,
    status: int,
    field: str,
) -> None:
    client, acmi, key = entity_api
    before = _snapshot(acmi)
    content = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    response = client.request(
        method, path, content=content, headers={"authorization": f"Bearer {key}"}
    )
    assert response.status_code == status, response.text
    error = response.json()
    assert set(error) >= {"error", "message", "field"}, error
    assert error["field"] == field, error
    assert error["message"], error
    assert _snapshot(acmi) == before  # nothing stored, nothing changed

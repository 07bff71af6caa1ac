"""Reads never 500 on what is stored: values nested deeper than pydantic/FastAPI serialise
(written by another client or before input nesting was bounded), lone-surrogate escapes
(JavaScript's JSON.stringify writes them), integers beyond 2^64 and numbers beyond the
double range. Each is either served exactly or skipped and reported, on every backend.

Values are planted through the raw side door (the ``raw`` fixture), as another tool would
leave them; the GET routes run on an app over the same store."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from acmi_core import Acmi, EntityId
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.stored import MAX_READ_DEPTH

EVENT = {"source": "agent:a", "kind": "note", "correlationId": "c-1", "summary": "hello"}


class Api:
    """An app on the fixture's store with one read key (copied from test_api.py's helper)."""

    def __init__(self, acmi: Acmi) -> None:
        self.acmi = acmi
        self.client = TestClient(create_app(ApiContext(acmi)), raise_server_exceptions=False)
        key, _ = apikeys.mint(acmi.store, tenant="default", scope="read", name="r", now_ms=1)
        self.headers = {"authorization": f"Bearer {key}"}

    def get(self, path: str) -> Any:
        return self.client.get(path, headers=self.headers)


@pytest.fixture
def api(acmi: Acmi) -> Api:
    return Api(acmi)


def entity_for(acmi: Acmi, label: str) -> str:
    # The redis backend's database outlives a test: every test gets its own entity.
    return f"user:{label}-{acmi.store.name}-{uuid.uuid4().hex[:10]}"


def nested(depth: int) -> str:
    """JSON text of objects nested ``depth`` deep: {"a":{"a":...1...}}."""
    return '{"a":' * depth + "1" + "}" * depth


def member(ts: int, summary: str, payload_text: str = "null") -> str:
    """A stored event; ``payload_text`` is spliced in as JSON text. json.dumps writes a
    lone surrogate in ``summary`` as its \\u escape, as JSON.stringify does."""
    head = json.dumps({"ts": ts, **EVENT, "summary": summary})[:-1]
    return f'{head}, "payload": {payload_text}}}'


def plant(acmi: Acmi, raw: redis.Redis, entity: str, *, profile: str, signals: str) -> None:
    eid = EntityId.parse(entity)
    raw.set(acmi.keys.profile(eid), profile)
    raw.set(acmi.keys.signals(eid), signals)
    raw.sadd(acmi.keys.index(eid.category), eid.local_id)


# --- deep values ----------------------------------------------------------------------------


def test_a_value_nested_300_deep_is_served_by_every_get_route(
    acmi: Acmi, raw: redis.Redis, api: Api
) -> None:
    """300 > pydantic's 255: every GET of such an entity used to be a 500."""
    entity = entity_for(acmi, "deep300")
    deep = nested(300)
    plant(acmi, raw, entity, profile=deep, signals=f'{{"s":{deep},"ok":1}}')
    key = acmi.keys.timeline(EntityId.parse(entity))
    raw.zadd(key, {member(1, "before"): 1, member(2, "deep", deep): 2, member(3, "after"): 3})
    value = json.loads(deep)

    bundle = api.get(f"/v1/entities/{entity}")
    assert bundle.status_code == 200, bundle.text
    body = bundle.json()
    assert body["profile"] == value
    assert body["signals"] == {"s": value, "ok": 1}
    assert [e["summary"] for e in body["timeline"]] == ["before", "deep", "after"]
    assert body["timeline"][1]["payload"] == value
    assert body["problems"] == [] and body["skipped"] == []

    profile = api.get(f"/v1/entities/{entity}/profile")
    assert (profile.status_code, profile.json()) == (200, value)
    signals = api.get(f"/v1/entities/{entity}/signals")
    assert (signals.status_code, signals.json()) == (200, {"s": value, "ok": 1})
    signal = api.get(f"/v1/entities/{entity}/signals/s")
    assert (signal.status_code, signal.json()) == (200, {"key": "s", "value": value})
    timeline = api.get(f"/v1/entities/{entity}/timeline")
    assert timeline.status_code == 200, timeline.text
    assert [e["payload"] for e in timeline.json()["events"]] == [None, value, None]
    assert timeline.json()["skipped"] == []


def test_the_python_api_reads_and_renders_a_300_deep_event(acmi: Acmi, raw: redis.Redis) -> None:
    entity = entity_for(acmi, "deep-py")
    deep = nested(300)
    raw.zadd(acmi.keys.timeline(EntityId.parse(entity)), {member(1, "deep", deep): 1})
    (event,) = acmi.timeline.read(entity)
    assert event.summary == "deep"
    bundle = acmi.get(entity).to_dict()  # Event.to_dict (pydantic) stops at depth 255
    assert json.loads(json.dumps(bundle))["timeline"][0]["payload"] == json.loads(deep)


def test_a_value_nested_5000_deep_is_reported_never_a_500(
    acmi: Acmi, raw: redis.Redis, api: Api
) -> None:
    entity = entity_for(acmi, "deep5000")
    deep = nested(5000)
    plant(acmi, raw, entity, profile=deep, signals=f'{{"s":{deep}}}')
    key = acmi.keys.timeline(EntityId.parse(entity))
    raw.zadd(key, {member(1, "before"): 1, member(2, "deep", deep): 2, member(3, "after"): 3})
    limit = str(MAX_READ_DEPTH)

    bundle = api.get(f"/v1/entities/{entity}")
    assert bundle.status_code == 200, bundle.text
    body = bundle.json()
    assert body["profile"] is None and body["signals"] == {}
    assert len(body["problems"]) == 2
    assert all(limit in p and "deep" in p for p in body["problems"]), body["problems"]
    assert [e["summary"] for e in body["timeline"]] == ["before", "after"]
    (skipped,) = body["skipped"]
    assert skipped["key"] == key and limit in skipped["reason"]

    for path in ("profile", "signals", "signals/s"):
        response = api.get(f"/v1/entities/{entity}/{path}")
        assert response.status_code == 409, (path, response.text)
        error = response.json()
        assert error["error"] == "corrupt_data"
        assert limit in error["message"] and "deep" in error["message"]

    timeline = api.get(f"/v1/entities/{entity}/timeline").json()
    assert [e["summary"] for e in timeline["events"]] == ["before", "after"]
    assert [s["position"] for s in timeline["skipped"]] == [1]
    assert limit in timeline["skipped"][0]["reason"]


def test_depth_just_inside_and_just_over_the_read_limit(acmi: Acmi, raw: redis.Redis) -> None:
    """The limit is exact, whatever the stack depth of the caller."""
    entity = entity_for(acmi, "deep-edge")
    eid = EntityId.parse(entity)
    raw.set(acmi.keys.profile(eid), nested(MAX_READ_DEPTH))
    assert acmi.profile.get(entity) == json.loads(nested(MAX_READ_DEPTH))
    raw.set(acmi.keys.profile(eid), nested(MAX_READ_DEPTH + 1))
    ctx = acmi.get(entity)
    assert ctx.profile is None
    assert str(MAX_READ_DEPTH) in ctx.problems[0]


# --- foreign JSON ---------------------------------------------------------------------------

FOREIGN = (
    '{"lone":"\\ud800","tail":"x\\udfffy","pair":"\\ud83d\\ude00","\\udc00key":1,'
    '"big":18446744073709551617123,"neg":-340282366920938463463374607431768211457,'
    '"exp":1e300,"max":1.7976931348623157e308,"tiny":5e-324,"huge":1e400,"neghuge":-2.5E+999}'
)


def test_foreign_json_reads_back_exactly(acmi: Acmi, raw: redis.Redis, api: Api) -> None:
    """Lone surrogates come back as \\u escapes (as ensure_ascii writes them); integers beyond
    2^64 and numbers beyond the double range come back digit for digit."""
    entity = entity_for(acmi, "foreign")
    plant(acmi, raw, entity, profile=FOREIGN, signals=f'{{"s":{FOREIGN}}}')
    # JavaScript's summary.slice(0, n) can cut an emoji in half: a lone high surrogate.
    cut = member(5, "cut \ud83d", FOREIGN)
    raw.zadd(acmi.keys.timeline(EntityId.parse(entity)), {cut: 5})

    for path in ("profile", "signals", "signals/s", "timeline", ""):
        response = api.get(f"/v1/entities/{entity}/{path}".rstrip("/"))
        assert response.status_code == 200, (path, response.text)
        text = response.text
        for exact in (
            '"lone":"\\ud800"',
            '"tail":"x\\udfffy"',
            '"\\udc00key":1',
            '"big":18446744073709551617123',
            '"neg":-340282366920938463463374607431768211457',
            '"huge":1e400',
            '"neghuge":-2.5E+999',
        ):
            assert exact in text, (path, exact)
        body = response.json()  # valid JSON
        doc = {
            "profile": lambda b: b,
            "signals": lambda b: b["s"],
            "signals/s": lambda b: b["value"],
            "timeline": lambda b: b["events"][0]["payload"],
            "": lambda b: b["profile"],
        }[path](body)
        assert doc["pair"] == "\U0001f600"
        assert doc["lone"] == "\ud800"
        assert doc["exp"] == 1e300 and doc["max"] == 1.7976931348623157e308
        assert doc["tiny"] == 5e-324
    events = api.get(f"/v1/entities/{entity}/timeline").json()
    assert events["skipped"] == []
    assert events["events"][0]["summary"] == "cut \ud83d"


def test_the_python_api_reads_foreign_json(acmi: Acmi, raw: redis.Redis) -> None:
    entity = entity_for(acmi, "foreign-py")
    plant(acmi, raw, entity, profile=FOREIGN, signals='{"s":"\\ud800"}')
    raw.zadd(acmi.keys.timeline(EntityId.parse(entity)), {member(5, "cut \ud83d"): 5})
    profile = acmi.profile.get(entity)
    assert profile is not None
    assert profile["big"] == 18446744073709551617123 and profile["lone"] == "\ud800"
    assert acmi.signals.get(entity, "s") == "\ud800"
    (event,) = acmi.timeline.read(entity)
    assert event.summary == "cut \ufffd"  # an Event carries well-formed text
    assert acmi.timeline.read(entity).to_dicts()[0]["summary"] == "cut \ud83d"  # stored text


@pytest.mark.parametrize(
    ("stored", "words"),
    [
        ('{"a":NaN}', "NaN"),
        ('{"a":[Infinity]}', "Infinity"),
        ('{"a":-Infinity}', "Infinity"),
    ],
)
def test_constants_json_cannot_carry_are_reported(
    acmi: Acmi, raw: redis.Redis, api: Api, stored: str, words: str
) -> None:
    """Python's json.dumps writes NaN/Infinity by default; they are not JSON, so the
    value is reported, where it used to come back silently as null."""
    entity = entity_for(acmi, "nan")
    plant(acmi, raw, entity, profile=stored, signals=stored)
    raw.zadd(acmi.keys.timeline(EntityId.parse(entity)), {member(1, "nan", stored): 1})
    profile = api.get(f"/v1/entities/{entity}/profile")
    assert profile.status_code == 409 and words in profile.json()["message"]
    bundle = api.get(f"/v1/entities/{entity}").json()
    assert bundle["profile"] is None and len(bundle["problems"]) == 2
    timeline = api.get(f"/v1/entities/{entity}/timeline").json()
    assert timeline["events"] == [] and words in timeline["skipped"][0]["reason"]


def test_an_integer_beyond_python_digit_limit_is_reported(
    acmi: Acmi, raw: redis.Redis, api: Api
) -> None:
    entity = entity_for(acmi, "longint")
    plant(acmi, raw, entity, profile='{"n":' + "9" * 5000 + "}", signals="{}")
    response = api.get(f"/v1/entities/{entity}/profile")
    assert response.status_code == 409
    assert f"longer than {sys.get_int_max_str_digits()} digits" in response.json()["message"]


def test_keys_of_the_wrong_type_are_reported_never_a_500(
    acmi: Acmi, raw: redis.Redis, api: Api
) -> None:
    entity = entity_for(acmi, "wrongtype")
    eid = EntityId.parse(entity)
    raw.hset(acmi.keys.profile(eid), "f", "v")
    raw.rpush(acmi.keys.signals(eid), "v")
    raw.set(acmi.keys.timeline(eid), "not a zset")
    category = f"wt{uuid.uuid4().hex[:8]}"
    raw.set(acmi.keys.index(category), "not a set")
    for path in ("profile", "signals", "signals/s", "timeline"):
        response = api.get(f"/v1/entities/{entity}/{path}")
        assert response.status_code == 409, (path, response.text)
        assert response.json()["error"] == "corrupt_data"
    bundle = api.get(f"/v1/entities/{entity}")
    assert bundle.status_code == 200 and len(bundle.json()["problems"]) == 3
    listing = api.get(f"/v1/namespaces/{category}/entities")
    assert listing.status_code == 409 and listing.json()["field"] == acmi.keys.index(category)

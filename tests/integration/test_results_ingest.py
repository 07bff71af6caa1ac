"""What an append and a webhook answer (``IngestResult.body``, the HTTP body as it is) held
to its declared type on a real redis-server: the events stored (each with its entity),
a replay answering only the first delivery's ids, a batch, a webhook mapped to events, and
Slack's url_verification answered with its challenge. (The ``event`` tool answers the one
stored event instead: an Event, as the reference's tool did.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import TypeAdapter

from acmi_core import Acmi, create_acmi
from acmi_core.auth.signatures import sign_slack
from acmi_core.base.settings import Settings
from acmi_core.ingest.results import Challenge, IngestBody, StoredEvents
from acmi_core.ingest.service import append_events
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.integration.test_senders import NOW_S, SLACK_SECRET, Senders
from tests.kit import DB
from tests.results import assert_closed, portable


@pytest.fixture
def store_acmi(redis_server: RedisServer) -> Iterator[Acmi]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    yield create_acmi(store, Settings())
    store.close()


@pytest.fixture
def senders(store_acmi: Acmi) -> Senders:
    return Senders(store_acmi)


def held(kind: Any, value: Any, where: str) -> None:
    TypeAdapter(portable(kind)).validate_python(value)
    assert_closed(kind, value, where)


def event(entity: str, n: int = 0) -> dict[str, Any]:
    return {"source": entity, "kind": "note", "correlationId": f"c-{n}", "summary": f"e{n}"}


def unique(category: str) -> str:
    # the redis database is shared by the session: ids must not repeat
    return f"{category}:{uuid.uuid4().hex[:12]}"


def test_an_append_and_its_replay(senders: Senders) -> None:
    who = unique("user")
    raw = json.dumps([event(who, 1), event(who, 2)]).encode()
    core = append_events(
        senders.acmi, who, raw, json.loads(raw), idempotency_key=None, max_events=100
    )
    assert core.body["stored"] == 2 and core.count == 2
    held(StoredEvents, core.body, "append (core)")

    path = f"/v1/entities/{who}/events"
    once = {"Idempotency-Key": uuid.uuid4().hex, "content-type": "application/json"}
    body = json.dumps(event(who, 3)).encode()
    first = senders.post(path, body, once)
    assert first.status_code == 201, first.text
    assert first.json()["events"][0]["entity"] == who
    held(IngestBody, first.json(), "POST events")
    replay = senders.post(path, body, once)
    assert replay.headers.get("Idempotent-Replayed") == "true"
    assert set(replay.json()["events"][0]) == {"entity", "ts", "correlationId"}
    held(IngestBody, replay.json(), "POST events, replayed")


def test_a_webhook_and_a_handshake(senders: Senders) -> None:
    who = unique("lead")
    body = json.dumps({"lead": who, "note": "asked for a demo", "id": "d-4"}).encode()
    mapping = "map.entity=lead&map.summary=note&map.correlationId=id"
    stored = senders.post(f"/v1/ingest/generic?{mapping}", body, {})
    assert stored.status_code == 201, stored.text
    assert stored.json()["stored"] == 1
    held(IngestBody, stored.json(), "webhook")

    challenge = uuid.uuid4().hex
    verify = json.dumps({"token": "t", "challenge": challenge, "type": "url_verification"})
    signed = sign_slack(SLACK_SECRET, verify.encode(), NOW_S)
    answered = senders.post("/v1/ingest/slack", verify.encode(), signed)
    assert answered.status_code == 200 and answered.json() == {"challenge": challenge}
    held(Challenge, answered.json(), "slack url_verification")
    held(IngestBody, answered.json(), "slack url_verification")

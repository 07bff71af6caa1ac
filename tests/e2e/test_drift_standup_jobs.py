"""The drift-diff and standup-brief functions through their real handlers
(functions.drift_diff, functions.standup_brief) fed their events/ samples: exactly the
Scheduler's Input, once per execution id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime

import pytest

from acmi_core import Acmi
from acmi_core.base.keys import LAST_BRIEF
from acmi_core.base.model import EntityId
from acmi_core.jobs.drift import POLICY_REGISTRY, REPORT_THREAD
from acmi_core.store.memory import MemoryStore
from functions.drift_diff import handler as drift_handler
from functions.runtime import LambdaFunction
from functions.standup_brief import handler as standup_handler
from tests.kit import FakeLambdaContext, configured, load_event

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

HOUR = 3600 * 1000
ENV = {"ACMI_DEFAULT_TENANT": "default"}
COORD = "thread:agent-coordination"


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def drift(store: MemoryStore) -> Iterator[LambdaFunction]:
    yield from configured(drift_handler, store, ENV)


@pytest.fixture
def standup(store: MemoryStore) -> Iterator[LambdaFunction]:
    yield from configured(standup_handler, store, ENV)


def scheduled_ms(name: str) -> int:
    moment = datetime.fromisoformat(load_event(name)["scheduled_time"].replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000)


def writer(store: MemoryStore, at: int) -> Acmi:
    """A client whose clock is ``at``: what the fleet wrote before the schedule fired."""
    return Acmi(store, clock=lambda: at)


def test_the_drift_diff_sample_through_the_handler(
    drift: LambdaFunction, store: MemoryStore
) -> None:
    now = scheduled_ms("drift-diff.scheduled")
    fleet = writer(store, now - 30 * HOUR)
    store.execute(
        (
            "SET",
            fleet.keys.prefix + POLICY_REGISTRY,
            json.dumps({"agents": {"codex": "openai/gpt-5"}}),
        )
    )
    fleet.signals.set("agent:codex", "model_id", "openai/gpt-4o")
    fleet.timeline.append(
        COORD,
        {
            "source": "agent:claude",
            "kind": "handoff-request",
            "correlationId": "h-1",
            "summary": "[handoff] @codex review PR 42",
        },
    )
    event = load_event("drift-diff.scheduled")
    first = drift(dict(event), FakeLambdaContext("acmi-drift-diff"))
    assert first["job"] == "drift-diff" and first["execution_id"] == event["execution_id"]
    assert first["counts"]["model_major"] == 1 and first["counts"]["stale_events"] == 1
    assert first["watermark"] == now and first["backlog"] == 0
    raw = store.execute(("GET", fleet.keys.drift_report()))
    assert isinstance(raw, bytes) and json.loads(raw)["execution_id"] == event["execution_id"]
    (summary,) = fleet.timeline.read(REPORT_THREAD)
    assert summary.correlationId == f"drift-{event['execution_id']}" and summary.ts == now

    again = drift(dict(event), FakeLambdaContext("acmi-drift-diff"))
    assert again["replayed"] is True and again["counts"] == first["counts"]
    assert fleet.timeline.size(REPORT_THREAD) == 1


def test_the_standup_brief_sample_through_the_handler(
    standup: LambdaFunction, store: MemoryStore
) -> None:
    now = scheduled_ms("standup-brief.scheduled")
    fleet = writer(store, now - 2 * HOUR)
    fleet.timeline.extend(
        COORD,
        [
            {
                "ts": now - 2 * HOUR,
                "source": "agent:claude",
                "kind": "deployment-shipped",
                "correlationId": "d-1",
                "summary": "[shipped] v1.4.0",
            },
            {
                "ts": now - 2 * HOUR + 1,
                "source": "agent:gemini-cli",
                "kind": "heartbeat",
                "correlationId": "hb",
                "summary": "alive",
            },
        ],
    )
    event = load_event("standup-brief.scheduled")
    first = standup(dict(event), FakeLambdaContext("acmi-standup-brief"))
    assert first["job"] == "standup-brief" and first["execution_id"] == event["execution_id"]
    assert (first["events"], first["wins"], first["operator"]) == (1, 1, "user:operator")
    raw = store.execute(("GET", fleet.keys.slot(EntityId.parse("user:operator"), LAST_BRIEF)))
    assert isinstance(raw, bytes)
    doc = json.loads(raw)
    assert doc["ts"] == now and [w["summary"] for w in doc["wins"]] == ["[shipped] v1.4.0"]
    assert fleet.signals.get("user:operator", "last_brief_ts") == now

    again = standup(dict(event), FakeLambdaContext("acmi-standup-brief"))
    assert again["replayed"] is True and again["wins"] == 1

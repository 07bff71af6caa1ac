"""standup-brief (acmi_core.jobs.standup) on every backend, on a fake clock: wins, blockers
and actions from the last 24 h of the coordination threads (noise filtered, legacy events
included), the operator's signals and last_brief slot, the summarizer seam, a retried
execution, round trips, and the O(changed) proof."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from acmi_core import Acmi, AcmiValidationError, Settings, Store, create_acmi
from acmi_core.base.keys import LAST_BRIEF
from acmi_core.base.model import EntityId
from acmi_core.entities.api import PAGE
from acmi_core.jobs import standup as standup_job
from acmi_core.jobs.foreign import JOB_READ_BYTES
from acmi_core.jobs.runner import JobRun, run_job
from acmi_core.jobs.standup import BriefInput
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import DB, FakeClock, fresh_tenant

HOUR = 3600 * 1000
DAY = 24 * HOUR
COORD = "thread:agent-coordination"
PM = "thread:bentley-pm"
OPERATOR = "user:operator"


@pytest.fixture
def fleet(acmi: Acmi, clock: FakeClock) -> Acmi:
    return fresh_tenant(acmi, clock)


def event(kind: str, cid: str, summary: str, source: str = "agent:claude-engineer") -> Any:
    return {"source": source, "kind": kind, "correlationId": cid, "summary": summary}


def legacy(acmi: Acmi, clock: FakeClock, entity: str, member: dict[str, Any]) -> None:
    """An event as the reference's tools leave it (a raw ZADD), and the change-index
    entry an ACMI writer of that entity makes."""
    acmi.store.pipeline(
        [
            ("ZADD", acmi.keys.timeline(EntityId.parse(entity)), member["ts"], json.dumps(member)),
            ("ZADD", acmi.keys.changed(), clock.now, entity),
        ]
    )


def brief(acmi: Acmi, clock: FakeClock, execution_id: str = "day-1", job: Any = None) -> Any:
    run = JobRun("standup-brief", execution_id, clock.now, {})
    return run_job(acmi, run, job or standup_job.run, clock=time.perf_counter)


def last_brief(acmi: Acmi, operator: str = OPERATOR) -> dict[str, Any]:
    raw = acmi.store.execute(("GET", acmi.keys.slot(EntityId.parse(operator), LAST_BRIEF)))
    assert isinstance(raw, bytes)
    data: dict[str, Any] = json.loads(raw)
    return data


def a_day(acmi: Acmi, clock: FakeClock) -> int:
    """A realistic day on the fleet's threads; returns the brief's scheduled time."""
    t0 = clock.now
    clock.now = t0 - 2 * DAY
    acmi.timeline.append(COORD, event("deployment-shipped", "old-1", "[shipped] last week's"))
    acmi.timeline.append("thread:dormant", event("task-end", "old-2", "[done] long ago"))
    clock.now = t0
    acmi.timeline.extend(
        COORD,
        [
            event("tick-start", "tick-1", "tick-start :15", "agent:gemini-cli"),
            event("heartbeat", "hb-1", "alive", "agent:gemini-cli"),
            event("wake-status", "w-1", "woke gemini-cli", "system:wake"),
            event("handoff-request", "h-1", "[handoff] @gemini-cli review PR 42"),
            event("handoff-request", "h-2", "[handoff] @codex add tests"),
        ],
    )
    legacy(acmi, clock, COORD, {"ts": t0 + 1, "source": "bentley", "summary": "heartbeat ok"})
    clock.now = t0 + HOUR
    acmi.timeline.append(PM, event("handoff-ack", "h-2", "[ack] on it", "agent:codex"))
    acmi.timeline.append(PM, event("blocked", "b-1", "waiting on DNS for acmi.dev", "agent:codex"))
    legacy(
        acmi,
        clock,
        PM,
        {"ts": t0 + HOUR, "source": "bentley", "summary": "PR 40 merged, release notes out"},
    )
    clock.now = t0 + 2 * HOUR
    acmi.timeline.append(COORD, event("deployment-shipped", "d-1", "[shipped] v1.4.0 to prod"))
    clock.now += 60_000
    acmi.timeline.append(COORD, event("task-end", "t-1", "[done] bootstrap cache"))
    acmi.timeline.append("agent:codex", event("task-end", "t-2", "[done] not a thread"))
    acmi.hitl.create(
        "prod deploy",
        "approve the migration in PR 42",
        asked_by="agent:claude-engineer",
        urgency="P0",
        addressee=OPERATOR,
        deadline=t0 + 5 * HOUR,
        correlation_id="hitl-deploy-42",
    )
    acmi.hitl.create(
        "budget", "raise the API budget", asked_by="agent:codex", correlation_id="hitl-budget"
    )
    return t0 + 3 * HOUR


def test_the_brief_extracts_wins_blockers_and_actions(fleet: Acmi, clock: FakeClock) -> None:
    clock.now = a_day(fleet, clock)
    result = brief(fleet, clock)
    doc = last_brief(fleet)
    assert doc["ts"] == clock.now
    assert doc["window"]["since_ms"] == clock.now - DAY
    assert doc["threads"] == [COORD, PM]  # the dormant thread and agent:codex: not read
    assert [w["summary"] for w in doc["wins"]] == [
        "[done] bootstrap cache",
        "[shipped] v1.4.0 to prod",
    ]
    assert [(b["kind"], b.get("correlationId")) for b in doc["blockers"]] == [
        ("handoff-request", "h-1"),  # h-2 was acked on another thread
        ("blocked", "b-1"),
    ]
    assert [(a["kind"], a.get("correlationId"), a["action"]) for a in doc["actions"]] == [
        ("hitl-required", "hitl-deploy-42", "resolve the HITL item"),
        ("hitl-required", "hitl-budget", "resolve the HITL item"),
        ("handoff-request", "h-1", "answer the handoff-request"),
    ]
    assert doc["actions"][0]["due"] == "2026-09-21T19:13:20Z"
    # heartbeats, ticks, wake statuses (and a legacy "heartbeat" line) are left out; the
    # legacy merge note stays
    assert doc["events"] == result["events"] == 7
    text = doc["text"]
    assert text.startswith("Standup brief 2026-09-21 (last 24 h: 7 events on 2 threads)")
    assert "Wins:\n- agent:claude-engineer: [done] bootstrap cache" in text
    assert "waiting on DNS" in text and "heartbeat" not in text and "tick-start" not in text
    signals = fleet.signals.all(OPERATOR)
    assert signals["last_brief_ts"] == clock.now and signals["standup_brief"] == text
    assert (result["wins"], result["blockers"], result["actions"]) == (2, 2, 3)
    assert doc["summarizer"] == "extractive" and result["backlog"] == 0


def test_the_operator_comes_from_the_settings(acmi: Acmi, clock: FakeClock) -> None:
    settings = acmi.settings.replace(operator="user:mikey")
    fleet = Acmi(acmi.store, settings, tenant=fresh_tenant(acmi, clock).tenant, clock=clock)
    fleet.timeline.append(COORD, event("task-end", "t-1", "[done] x"))
    brief(fleet, clock)
    assert [w["summary"] for w in last_brief(fleet, "user:mikey")["wins"]] == ["[done] x"]
    assert fleet.signals.get("user:mikey", "last_brief_ts") == clock.now
    assert fleet.signals.all(OPERATOR) == {}


def test_a_quiet_day_still_gets_a_brief(fleet: Acmi, clock: FakeClock) -> None:
    brief(fleet, clock)
    doc = last_brief(fleet)
    assert (doc["wins"], doc["blockers"], doc["actions"], doc["events"]) == ([], [], [], 0)
    assert "Wins:\n- none\nBlockers:\n- none\nActions:\n- none" in doc["text"]


def test_a_summarizer_writes_the_text_and_its_failure_costs_nothing(
    fleet: Acmi, clock: FakeClock
) -> None:
    clock.now = a_day(fleet, clock)
    seen: list[BriefInput] = []

    def llm(source: BriefInput) -> str:
        seen.append(source)
        return f"{len(source.wins)} wins, {len(source.blockers)} blockers"

    result = brief(fleet, clock, "with-llm", standup_job.run_with(llm))
    (source,) = seen
    assert len(source.events) == 7 and source.threads == [COORD, PM]
    assert all(e.get("kind") not in {"heartbeat", "tick-start"} for e in source.events)
    doc = last_brief(fleet)
    assert doc["text"] == "2 wins, 2 blockers" and doc["summarizer"] == "custom"
    assert len(doc["wins"]) == 2 and result["summarizer"] == "custom"

    def down(source: BriefInput) -> str:
        raise TimeoutError("provider timed out")

    brief(fleet, clock, "llm-down", standup_job.run_with(down))
    doc = last_brief(fleet)
    assert doc["summarizer"] == "extractive" and doc["text"].startswith("Standup brief")
    assert doc["summarizer_error"] == "TimeoutError: provider timed out"


def test_a_duplicate_execution_id_does_nothing(fleet: Acmi, clock: FakeClock) -> None:
    fleet.timeline.append(COORD, event("task-end", "t-1", "[done] one"))
    first = brief(fleet, clock, "same")
    before = last_brief(fleet)
    clock.now += HOUR
    fleet.timeline.append(COORD, event("task-end", "t-2", "[done] two"))
    again = brief(fleet, clock, "same")
    assert again["replayed"] is True and again["wins"] == first["wins"] == 1
    assert last_brief(fleet) == before


def test_a_bad_max_is_refused_and_nothing_is_written(fleet: Acmi, clock: FakeClock) -> None:
    run = JobRun("standup-brief", "bad", clock.now, {"max": "all"})
    with pytest.raises(AcmiValidationError) as err:
        run_job(fleet, run, standup_job.run, clock=time.perf_counter)
    assert (err.value.field, err.value.rule) == ("max", "range")
    assert fleet.signals.all(OPERATOR) == {}


def test_round_trips_per_run(upstash_store: UpstashStore, upstash_double: UpstashDouble) -> None:
    clock = FakeClock()
    fleet = fresh_tenant(create_acmi(upstash_store, Settings()), clock)
    clock.now = a_day(fleet, clock)
    brief(fleet, clock, "warm")  # loads the write script (EVALSHA cache)
    upstash_double.reset_counts()
    result = brief(fleet, clock, "counted")
    # 2 reads + 1 write of the job; the run record: 1 read + 1 write
    assert upstash_double.requests == 5 and result["requests"] == 4


def test_a_day_of_the_largest_events_is_read_to_a_cap_per_thread(
    fleet: Acmi, clock: FakeClock
) -> None:
    """Each thread's events are read inside Redis up to JOB_READ_BYTES (the newest
    first, the first one whatever its size): 3 threads of 40 events of 200 KB in the
    window made a 24 MB read (and a brief input of it) before; now well under 1 MB each."""
    start = clock.now
    pad = "x" * 200_000
    for thread in (COORD, PM, "thread:ops"):
        for n in range(40):
            clock.now += 1
            fleet.timeline.append(
                thread, {**event("task-end", f"{thread}-{n}", "[done] big"), "payload": pad}
            )
    clock.now = start + HOUR
    seen: list[BriefInput] = []

    def summarizer(source: BriefInput) -> str:
        seen.append(source)
        return "short"

    result = brief(fleet, clock, job=standup_job.run_with(summarizer))
    (source,) = seen
    read = sum(len(json.dumps(e)) for e in source.events)
    per_thread = JOB_READ_BYTES + 210_000  # the cap, and the one over it
    assert 3 <= len(source.events) <= 3 * 2 and read <= 3 * per_thread, (len(source.events), read)
    assert result["truncated"] is True
    # the newest of each thread are the ones read
    assert {e["correlationId"] for e in source.events} >= {
        f"{t}-39" for t in (COORD, PM, "thread:ops")
    }


@pytest.fixture(params=["memory", "redis"])
def bulk(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[Acmi]:
    """The backends 10,000 entities are written to quickly."""
    store: Store = (
        MemoryStore()
        if request.param == "memory"
        else RedisStore.from_url(redis_server.url_for(DB["backends"]))
    )
    yield create_acmi(store, Settings())
    store.close()


def commands_for_a_day(acmi: Acmi, clock: FakeClock, idle: int) -> int:
    t0 = clock.now
    for start in range(0, idle, 2000):
        commands: list[tuple[Any, ...]] = []
        for i in range(start, min(idle, start + 2000)):
            entity = EntityId.parse(f"thread:idle-{i}")
            member = json.dumps({**event("task-end", f"n-{i}", "[done] idle"), "ts": t0})
            commands += [
                ("ZADD", acmi.keys.timeline(entity), t0, member),
                ("ZADD", acmi.keys.changed(), t0, str(entity)),
            ]
        acmi.store.pipeline(commands)
    clock.now = t0 + 2 * DAY
    for i in range(10):
        acmi.timeline.append(f"thread:active-{i}", event("task-end", f"a-{i}", "[done] now"))
    acmi.store.execute(("SCRIPT", "LOAD", PAGE.source))  # cached, as after any first read
    result = brief(acmi, clock)
    assert result["threads"] == 11 and result["wins"] == 10
    commands: int = result["commands"]
    return commands


@pytest.mark.slow
def test_cost_grows_with_what_changed_not_with_all_entities(bulk: Acmi) -> None:
    big = commands_for_a_day(fresh_tenant(bulk, clock := FakeClock()), clock, 10_000)
    small = commands_for_a_day(fresh_tenant(bulk, clock := FakeClock()), clock, 100)
    assert big == small

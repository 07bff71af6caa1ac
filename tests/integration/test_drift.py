"""drift-diff (acmi_core.jobs.drift) on every backend, on a fake clock: each check on
reference-shaped events (legacy ones written straight into Redis, as the reference's
tools do), resolution across threads and across runs, the report key and the one summary
event, a retried execution, the backlog, round trips, and the O(changed) proof."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from acmi_core import Acmi, AcmiValidationError, Settings, Store, create_acmi
from acmi_core.base.model import EntityId
from acmi_core.entities.api import PAGE
from acmi_core.jobs import drift as drift_job
from acmi_core.jobs.drift import POLICY_REGISTRY, REPORT_THREAD
from acmi_core.jobs.runner import JobRun, run_job
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
POLICY = {
    "version": "2026-04-28",
    "agents": {
        "claude-engineer": "anthropic/claude-opus-4",
        "gemini-cli": "google/gemini-2.5-flash",
        "antigravity": "google/gemini-2.5-pro",
        "codex": "openai/gpt-5",
    },
}


@pytest.fixture
def fleet(acmi: Acmi, clock: FakeClock) -> Acmi:
    return fresh_tenant(acmi, clock)


def drift(acmi: Acmi, clock: FakeClock, execution_id: str | None = None, **params: Any) -> Any:
    run = JobRun("drift-diff", execution_id or f"exec-{clock.now}", clock.now, params)
    return run_job(acmi, run, drift_job.run, clock=time.perf_counter)


def report(acmi: Acmi) -> dict[str, Any]:
    raw = acmi.store.execute(("GET", acmi.keys.drift_report()))
    assert isinstance(raw, bytes)
    data: dict[str, Any] = json.loads(raw)
    return data


def event(
    kind: str, cid: str, summary: str, source: str = "agent:claude-engineer", **extra: Any
) -> dict[str, Any]:
    return {"source": source, "kind": kind, "correlationId": cid, "summary": summary, **extra}


def legacy(acmi: Acmi, clock: FakeClock, entity: str, member: dict[str, Any]) -> None:
    """An event as the reference's CLI leaves it (a raw ZADD, no validation), with the
    change-index entry another ACMI writer of that entity would have made."""
    key = acmi.keys.timeline(EntityId.parse(entity))
    acmi.store.pipeline(
        [
            ("ZADD", key, member["ts"], json.dumps(member)),
            ("ZADD", acmi.keys.changed(), clock.now, entity),
        ]
    )


def cids(items: list[dict[str, Any]]) -> list[str]:
    return sorted(i["correlationId"] for i in items)


# --- (a) model drift ----------------------------------------------------------------------------


def test_model_drift_major_and_minor_against_the_policy_registry(
    fleet: Acmi, clock: FakeClock
) -> None:
    fleet.store.execute(("SET", fleet.keys.prefix + POLICY_REGISTRY, json.dumps(POLICY)))
    fleet.signals.set("agent:claude-engineer", "model_id", "anthropic/claude-opus-4")  # exact
    fleet.signals.set("agent:gemini-cli", "model_id", "gemini-2.5-flash")  # no provider: minor
    fleet.profile.set("agent:antigravity", {"model": "openai/gpt-4o"})  # another model: major
    fleet.profile.set("agent:codex", {"name": "codex"})  # claims nothing: not judged
    fleet.signals.set("agent:rogue", "model_id", "x/y")  # not in the policy: not judged

    result = drift(fleet, clock)
    found = report(fleet)
    assert found["policy_version"] == "2026-04-28"
    assert found["findings"]["model_drift"] == {
        "major": [
            {
                "agent": "agent:antigravity",
                "claimed": "openai/gpt-4o",
                "expected": "google/gemini-2.5-pro",
                "severity": "major",
            }
        ],
        "minor": [
            {
                "agent": "agent:gemini-cli",
                "claimed": "gemini-2.5-flash",
                "expected": "google/gemini-2.5-flash",
                "severity": "minor",
            }
        ],
    }
    assert result["counts"]["model_major"] == 1 and result["counts"]["model_minor"] == 1

    # a fix is seen on the next run (flagged agents are judged again every run)
    clock.now += HOUR
    fleet.profile.merge("agent:antigravity", {"model": "google/gemini-2.5-pro"})
    again = drift(fleet, clock)
    assert report(fleet)["findings"]["model_drift"]["major"] == []
    assert again["closed"] == 1

    # an agent that heartbeats is judged again (its model may have changed)
    clock.now += HOUR
    fleet.signals.set("agent:claude-engineer", "model_id", "anthropic/claude-sonnet-4")
    fleet.agents.heartbeat("claude-engineer")
    drift(fleet, clock)
    assert [m["agent"] for m in report(fleet)["findings"]["model_drift"]["major"]] == [
        "agent:claude-engineer"
    ]


def test_a_changed_policy_rejudges_every_agent_it_names(fleet: Acmi, clock: FakeClock) -> None:
    # the policy as a profile of registry:agent-model-policy (how our API would store it)
    fleet.profile.set(POLICY_REGISTRY, POLICY)
    fleet.signals.set("agent:codex", "model_id", "openai/gpt-5")
    drift(fleet, clock)
    assert report(fleet)["counts"]["model_major"] == 0
    clock.now += HOUR
    fleet.profile.set(POLICY_REGISTRY, {**POLICY, "agents": {"codex": "openai/gpt-5.1"}})
    drift(fleet, clock)
    (major,) = report(fleet)["findings"]["model_drift"]["major"]
    assert major["agent"] == "agent:codex" and major["expected"] == "openai/gpt-5.1"


def test_no_policy_judges_no_model(fleet: Acmi, clock: FakeClock) -> None:
    fleet.signals.set("agent:codex", "model_id", "openai/gpt-5")
    drift(fleet, clock)
    found = report(fleet)
    assert found["policy_version"] == "missing" and found["counts"]["model_major"] == 0


# --- (b) stale requests -----------------------------------------------------------------------


def test_stale_requests_are_resolved_by_correlation_id_across_threads_and_runs(
    fleet: Acmi, clock: FakeClock
) -> None:
    t0 = clock.now
    fleet.timeline.append(COORD, event("handoff-request", "h-1", "[handoff] @gemini-cli review"))
    fleet.timeline.append(
        "tracker:cloud-handoffs", event("hitl-required", "hitl-deploy-1", "[HITL] approve deploy")
    )
    # the reference CLI's legacy shape: snake_case correlation_id
    legacy(
        fleet,
        clock,
        PM,
        {
            "ts": t0,
            "source": "bentley",
            "kind": "merge-needed",
            "correlation_id": "m-1",
            "summary": "merge PR 7",
        },
    )
    fleet.timeline.append(COORD, event("handoff-request", "h-2", "[handoff] @codex tests"))
    clock.now += HOUR
    # resolved on another entity's timeline
    fleet.timeline.append(
        "agent:codex", event("handoff-ack", "h-2", "[ack] taking it", "agent:codex")
    )

    clock.now = t0 + 2 * HOUR
    first = drift(fleet, clock)
    found = report(fleet)
    assert found["findings"]["stale_events"] == []  # nothing is 24 h old yet
    assert cids(found["pending"]["requests"]) == ["h-1", "hitl-deploy-1", "m-1"]
    assert first["opened"] >= 4 and first["closed"] == 1  # h-2 opened and closed in-run

    clock.now = t0 + 25 * HOUR
    fleet.timeline.append(
        "thread:claude-daily-driver", event("handoff-complete", "h-1", "[done] merged abc123")
    )
    drift(fleet, clock)
    found = report(fleet)
    stale = found["findings"]["stale_events"]
    assert cids(stale) == ["hitl-deploy-1", "m-1"]
    assert {s["age_hours"] for s in stale} == {25}
    assert {s["entity"] for s in stale} == {"tracker:cloud-handoffs", PM}
    assert found["counts"]["stale_events"] == 2

    clock.now += HOUR
    fleet.timeline.append(COORD, event("hitl-resolved", "hitl-deploy-1", "approved", "user:mikey"))
    # a comms-correction recovering the legacy event's correlationId resolves it too
    fleet.timeline.append(
        PM,
        event(
            "comms-correction",
            "task-7",
            "[corrected] merge-needed cid is 'm-1'",
            payload={"original_event": {"ts": t0}, "inferred_correlationId": "m-1"},
        ),
    )
    third = drift(fleet, clock)
    found = report(fleet)
    assert found["findings"]["stale_events"] == [] and found["pending"]["requests"] == []
    assert third["closed"] >= 2
    assert {"h-1", "h-2", "hitl-deploy-1", "m-1"} <= set(found["pending"]["resolved"])


def test_a_resolution_read_before_its_request_keeps_it_closed(
    fleet: Acmi, clock: FakeClock
) -> None:
    t0 = clock.now
    fleet.timeline.append("agent:codex", event("handoff-ack", "h-9", "[ack]", "agent:codex"))
    drift(fleet, clock)
    clock.now += HOUR
    # the request reaches ACMI late, back-dated a little (within the read skew)
    fleet.timeline.append(COORD, event("handoff-request", "h-9", "[handoff] x", ts=t0 - 1))
    clock.now = t0 + 30 * HOUR
    drift(fleet, clock)
    assert report(fleet)["findings"]["stale_events"] == []


def test_a_correction_pointing_at_a_request_handles_it(fleet: Acmi, clock: FakeClock) -> None:
    t0 = clock.now
    fleet.timeline.append(PM, event("handoff-request", "h-5", "[handoff] x", ts=t0))
    drift(fleet, clock)
    clock.now += HOUR
    fleet.timeline.append(
        PM,
        event(
            "comms-correction",
            "task-5",
            "[corrected] Original event at " + str(t0) + " in thread:bentley-pm",
        ),
    )
    clock.now = t0 + 2 * DAY
    drift(fleet, clock)
    found = report(fleet)
    assert found["findings"]["stale_events"] == [] and "h-5" in found["pending"]["resolved"]


# --- (c) past-due dates -------------------------------------------------------------------------


def test_past_due_dates_are_flagged_until_their_work_closes(fleet: Acmi, clock: FakeClock) -> None:
    t0 = clock.now  # 2026-09-21T14:13:20Z
    fleet.timeline.append(
        COORD,
        event("task-start", "ship-1", "ship the pricing page", payload={"deadline": t0 + 2 * HOUR}),
    )
    fleet.timeline.append(
        COORD,
        event("task-start", "ship-2", "fix login", payload={"due_date": "2026-09-21T15:00:00Z"}),
    )
    fleet.timeline.append(
        COORD,
        event("task-start", "old-1", "recap", payload={"due": "2026-09-01"}),  # before the event
    )
    # the reference's text form, in a legacy event (no kind, no correlationId)
    legacy(
        fleet,
        clock,
        PM,
        {"ts": t0, "source": "bentley", "summary": "Landing copy due 2026-09-23 for launch"},
    )
    clock.now += 10 * 60 * 1000
    fleet.timeline.append(COORD, event("task-end", "ship-2", "[done] login fixed"))

    clock.now = t0 + HOUR
    drift(fleet, clock)
    found = report(fleet)
    assert found["findings"]["date_drift"] == []
    assert sorted(d["field"] for d in found["pending"]["deadlines"]) == [
        "payload.deadline",
        "summary:2026-09-23",
    ]

    clock.now = t0 + 3 * HOUR
    drift(fleet, clock)
    (due,) = report(fleet)["findings"]["date_drift"]
    assert (due["correlationId"], due["field"], due["due_ms"]) == (
        "ship-1",
        "payload.deadline",
        t0 + 2 * HOUR,
    )

    clock.now = t0 + 3 * DAY  # after 2026-09-23 ended
    fleet.timeline.append(COORD, event("deployment-shipped", "ship-1", "[shipped] pricing"))
    drift(fleet, clock)
    (due,) = report(fleet)["findings"]["date_drift"]
    assert (due["entity"], due["field"], due["correlationId"]) == (PM, "summary:2026-09-23", None)

    clock.now = t0 + 8 * DAY  # the event is over 7 days old: no longer checked
    drift(fleet, clock)
    assert report(fleet)["findings"]["date_drift"] == []


# --- (d) Comms v1.1 -----------------------------------------------------------------------------


def test_comms_violations_in_the_last_day_until_corrected(fleet: Acmi, clock: FakeClock) -> None:
    t0 = clock.now
    shapes = [
        {"ts": t0, "source": "bentley", "kind": "handoff-request", "correlation_id": "x-1",
         "summary": "snake case"},
        {"ts": t0 + 1, "source": "gemini-cli", "summary": "plain note, reference CLI event"},
        {"ts": t0 + 2, "source": "codex", "correlationId": "c-3", "summary": "no kind"},
    ]  # fmt: skip
    for member in shapes:
        legacy(fleet, clock, PM, member)
    fleet.timeline.append(PM, event("note", "ok-1", "a valid event"))
    drift(fleet, clock)
    found = report(fleet)
    assert sorted((c["rule"], c["ts"]) for c in found["findings"]["comms"]) == [
        ("missing_cid", t0 + 1),
        ("missing_kind", t0 + 2),
        ("snake_only", t0),
    ]
    snake = next(c for c in found["findings"]["comms"] if c["rule"] == "snake_only")
    assert snake["correlation_id"] == "x-1" and snake["source"] == "bentley"

    clock.now += HOUR
    fleet.timeline.append(
        PM,
        event(
            "comms-correction",
            "task-1",
            "[corrected] @gemini-cli note",
            payload={"original_event": {"ts": t0 + 1, "source": "gemini-cli"}},
        ),
    )
    drift(fleet, clock)
    assert sorted(c["rule"] for c in report(fleet)["findings"]["comms"]) == [
        "missing_kind",
        "snake_only",
    ]
    clock.now = t0 + DAY + HOUR  # older than a day: no longer reported
    drift(fleet, clock)
    assert report(fleet)["findings"]["comms"] == []


# --- (e) heartbeats -------------------------------------------------------------------------------


def test_stale_heartbeats_from_the_activity_index(fleet: Acmi, clock: FakeClock) -> None:
    t0 = clock.now
    fleet.agents.heartbeat("old-timer", now=t0 - 5 * DAY)  # silent before the first run
    fleet.agents.heartbeat("a")
    fleet.agents.heartbeat("b")
    clock.now = t0 + HOUR
    drift(fleet, clock)
    assert [h["agent"] for h in report(fleet)["findings"]["stale_heartbeats"]] == [
        "agent:old-timer"
    ]
    clock.now = t0 + 25 * HOUR
    drift(fleet, clock)
    assert [h["agent"] for h in report(fleet)["findings"]["stale_heartbeats"]] == [
        "agent:old-timer",
        "agent:a",
        "agent:b",
    ]
    clock.now += HOUR
    fleet.agents.heartbeat("b")
    fleet.agents.heartbeat("old-timer")
    result = drift(fleet, clock)
    assert [h["agent"] for h in report(fleet)["findings"]["stale_heartbeats"]] == ["agent:a"]
    assert result["closed"] == 2


# --- the report, the one event, retries, backlog ----------------------------------------------


def test_one_summary_event_per_run_on_a_thread_it_does_not_scan(
    fleet: Acmi, clock: FakeClock
) -> None:
    fleet.timeline.append(COORD, event("handoff-request", "h-1", "[handoff] x"))
    first = drift(fleet, clock, "exec-1")
    clock.now += HOUR
    second = drift(fleet, clock, "exec-2")
    assert first["entities"] == 1 and second["entities"] == 0  # its own thread: not read
    events = fleet.timeline.read(REPORT_THREAD)
    assert [(e.kind, e.correlationId, e.source) for e in events] == [
        ("drift-delta", "drift-exec-1", "system:drift-diff"),
        ("drift-delta", "drift-exec-2", "system:drift-diff"),
    ]
    assert events[0].summary.startswith("[drift] 0 major-model / 0 stale-events")
    assert events[1].payload == {
        "counts": report(fleet)["counts"],
        "report_key": fleet.keys.drift_report(),
    }
    found = report(fleet)
    assert found["execution_id"] == "exec-2" and found["run"]["report_thread"] == REPORT_THREAD
    assert set(found["findings"]) == {
        "model_drift",
        "stale_events",
        "date_drift",
        "comms",
        "stale_heartbeats",
    }
    assert fleet.timeline.size(COORD) == 1  # nothing written into a scanned thread


def test_a_duplicate_execution_id_does_nothing(fleet: Acmi, clock: FakeClock) -> None:
    fleet.timeline.append(COORD, event("handoff-request", "h-1", "[handoff] x"))
    first = drift(fleet, clock, "same")
    before = report(fleet)
    clock.now += HOUR
    fleet.timeline.append(COORD, event("handoff-request", "h-2", "[handoff] y"))
    again = drift(fleet, clock, "same")
    assert again["replayed"] is True and again["counts"] == first["counts"]
    assert report(fleet) == before
    assert fleet.timeline.size(REPORT_THREAD) == 1


def test_a_retry_after_the_writes_landed_writes_nothing_more(fleet: Acmi, clock: FakeClock) -> None:
    # the job's writes landed but the run record did not (a crash in between)
    run = JobRun("drift-diff", "half-done", clock.now, {})
    drift_job.run(fleet, run)
    before = report(fleet)
    result = run_job(fleet, run, drift_job.run, clock=time.perf_counter)
    assert result["report_replayed"] is True and result.get("replayed") is None
    assert report(fleet) == before and fleet.timeline.size(REPORT_THREAD) == 1


def test_the_backlog_is_the_next_runs_work(fleet: Acmi, clock: FakeClock) -> None:
    for i in range(5):
        clock.now += 1
        fleet.timeline.append(f"thread:t{i}", event("handoff-request", f"h-{i}", "[handoff]"))
    clock.now += HOUR
    first = drift(fleet, clock, max=2)
    assert (first["entities"], first["backlog"]) == (2, 3)
    second = drift(fleet, clock, "exec-b", max=2)
    third = drift(fleet, clock, "exec-c", max=2)
    # the backlog counts index entries: the report thread's own (never read) included
    assert (second["entities"], second["backlog"]) == (2, 2)
    assert (third["entities"], third["backlog"]) == (1, 0)
    assert cids(report(fleet)["pending"]["requests"]) == [f"h-{i}" for i in range(5)]


@pytest.mark.parametrize("bad", [0, -1, "10", 1.5, True, 10_001])
def test_a_bad_max_is_refused_and_nothing_is_written(
    fleet: Acmi, clock: FakeClock, bad: object
) -> None:
    fleet.timeline.append(COORD, event("handoff-request", "h-1", "[handoff] x"))
    with pytest.raises(AcmiValidationError) as err:
        drift(fleet, clock, max=bad)
    assert (err.value.field, err.value.rule) == ("max", "range")
    assert fleet.store.execute(("GET", fleet.keys.drift_report())) is None
    assert fleet.timeline.size(REPORT_THREAD) == 0


def test_a_report_edited_by_hand_never_breaks_a_run(fleet: Acmi, clock: FakeClock) -> None:
    broken = {
        "findings": {"stale_events": [{"correlationId": "x"}, 7], "comms": "no", "model_drift": []},
        "pending": {"deadlines": [{"ts": "yesterday", "due_ms": 1}], "resolved": {"a": "b"}},
    }
    fleet.store.execute(("SET", fleet.keys.drift_report(), json.dumps(broken)))
    result = drift(fleet, clock)
    assert result["counts"]["total"] == 0 and report(fleet)["pending"]["resolved"] == {}


def test_the_carried_lists_are_bounded(
    fleet: Acmi, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drift_job, "MAX_CARRIED", 3)
    for i in range(5):
        clock.now += 1
        fleet.timeline.append(COORD, event("handoff-request", f"h-{i}", "[handoff]"))
    result = drift(fleet, clock)
    found = report(fleet)
    assert cids(found["pending"]["requests"]) == ["h-0", "h-1", "h-2"]  # the oldest kept
    assert found["run"]["dropped"]["requests"] == 2 and result["opened"] == 5


# --- cost ------------------------------------------------------------------------------------


def test_round_trips_per_run(upstash_store: UpstashStore, upstash_double: UpstashDouble) -> None:
    clock = FakeClock()
    fleet = fresh_tenant(create_acmi(upstash_store, Settings()), clock)
    fleet.store.execute(("SET", fleet.keys.prefix + POLICY_REGISTRY, json.dumps(POLICY)))
    fleet.agents.heartbeat("gemini-cli")
    fleet.timeline.append(COORD, event("handoff-request", "h-1", "[handoff] x"))
    drift(fleet, clock, "warm")  # loads the write script (EVALSHA cache)
    clock.now += HOUR
    fleet.timeline.append(COORD, event("handoff-ack", "h-1", "[ack]"))
    upstash_double.reset_counts()
    result = drift(fleet, clock, "counted")
    # 3 reads + 1 write of the job; the run record: 1 read + 1 write
    assert upstash_double.requests == 6
    assert result["requests"] == 5  # what run_job counts (all but its record read)


def seed_idle(acmi: Acmi, count: int, ts: int) -> None:
    """``count`` entities with a timeline, written the fast way (raw pipelines), all
    changed at ``ts``."""
    for start in range(0, count, 2000):
        commands: list[tuple[Any, ...]] = []
        for i in range(start, min(count, start + 2000)):
            entity = EntityId.parse(f"thread:idle-{i}")
            member = json.dumps(event("note", f"n-{i}", "idle chatter") | {"ts": ts})
            commands += [
                ("ZADD", acmi.keys.timeline(entity), ts, member),
                ("ZADD", acmi.keys.changed(), ts, str(entity)),
                ("SADD", acmi.keys.index("thread"), entity.local_id),
            ]
        acmi.store.pipeline(commands)


def commands_for_active_run(acmi: Acmi, clock: FakeClock, idle: int) -> int:
    t0 = clock.now
    seed_idle(acmi, idle, t0)
    acmi.store.execute(("SET", acmi.keys.prefix + POLICY_REGISTRY, json.dumps(POLICY)))
    clock.now = t0 + 8 * DAY
    drift(acmi, clock, "first")  # the first run: what changed in the last 7 days only
    clock.now += HOUR
    for i in range(10):
        acmi.timeline.append(f"thread:active-{i}", event("handoff-request", f"a-{i}", "[handoff]"))
    acmi.agents.heartbeat("gemini-cli")
    clock.now += HOUR
    acmi.store.execute(("SCRIPT", "LOAD", PAGE.source))  # cached, as after any first read
    result = drift(acmi, clock, "measured")
    assert result["entities"] == 10
    commands: int = result["commands"]
    return commands


@pytest.fixture(params=["memory", "redis"])
def bulk(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[Acmi]:
    """The backends 10,000 entities are written to quickly (the REST double would only
    add HTTP time to the same commands)."""
    store: Store = (
        MemoryStore()
        if request.param == "memory"
        else RedisStore.from_url(redis_server.url_for(DB["backends"]))
    )
    yield create_acmi(store, Settings())
    store.close()


@pytest.mark.slow
def test_cost_grows_with_what_changed_not_with_all_entities(bulk: Acmi) -> None:
    acmi = bulk
    big = commands_for_active_run(fresh_tenant(acmi, clock := FakeClock()), clock, 10_000)
    small = commands_for_active_run(fresh_tenant(acmi, clock := FakeClock()), clock, 100)
    assert big == small

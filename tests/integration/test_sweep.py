"""The liveness sweep (acmi_core.jobs.sweep) on every backend, on a fake clock: STALLED after
48 h with the other signals kept, one operator escalation per stall episode, a heartbeat
clearing it, a heartbeat racing the mark winning, pages with ties, foreign members and
unreadable signals, the round trips of a run, and the O(changed) proof."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from acmi_core import Acmi
from acmi_core.jobs.runner import JobRun, run_job
from acmi_core.jobs.sweep import STALL_AFTER_MS, _mark, run, stall_cid
from tests.kit import START, FakeClock, fresh_tenant

HOUR = 3600 * 1000


@pytest.fixture
def fleet(acmi: Acmi, clock: FakeClock) -> Acmi:
    """A tenant of its own: the activity index and the HITL queues are per tenant."""
    return fresh_tenant(acmi, clock)


def sweep(acmi: Acmi, execution_id: str, **params: Any) -> dict[str, Any]:
    now = acmi.clock()
    return run_job(acmi, JobRun("sweep", execution_id, now, params), run, clock=time.perf_counter)


def operator_items(acmi: Acmi) -> list[dict[str, Any]]:
    return acmi.hitl.list(acmi.settings.operator).items


def test_an_agent_silent_48_h_is_stalled_and_escalated_once(fleet: Acmi, clock: FakeClock) -> None:
    fleet.signals.update("agent:claude", {"current_task": "PR 42"})
    fleet.agents.heartbeat("claude", "ACTIVE", "reviewing")
    fleet.agents.heartbeat("gpt")
    clock.now += 47 * HOUR
    fleet.agents.heartbeat("gpt")  # alive
    assert sweep(fleet, "e1")["stalled"] == 0  # 47 h is not 48 h
    clock.now += 1 * HOUR + 1
    first = sweep(fleet, "e2")
    assert (first["stalled"], first["escalated"], first["backlog"]) == (1, 1, 0)
    assert first["watermark"] == clock.now - STALL_AFTER_MS
    signals = fleet.signals.all("agent:claude")
    assert signals["status"] == "STALLED"
    assert signals["current_task"] == "PR 42" and signals["last_heartbeat_ts"] == START
    assert "no heartbeat since" in signals["status_note"]
    (item,) = operator_items(fleet)
    assert (
        item["correlationId"] == stall_cid("agent:claude", START) == f"stalled-agent:claude-{START}"
    )
    assert item["payload"]["addressee"] == fleet.settings.operator
    assert fleet.signals.all("agent:gpt")["status"] == "ACTIVE"

    # the next runs: nothing new crossed the line, nothing is read again or re-escalated
    clock.now += HOUR
    again = sweep(fleet, "e3")
    assert (again["stalled"], again["escalated"]) == (0, 0)
    assert len(operator_items(fleet)) == 1


def test_a_duplicate_execution_id_does_nothing(fleet: Acmi, clock: FakeClock) -> None:
    fleet.agents.heartbeat("claude")
    clock.now += 49 * HOUR
    first = sweep(fleet, "same")
    fleet.agents.heartbeat("claude")
    clock.now += 49 * HOUR
    replay = sweep(fleet, "same")
    assert replay["replayed"] is True and replay["stalled"] == first["stalled"] == 1
    assert fleet.signals.all("agent:claude")["status"] == "ACTIVE"  # the replay wrote nothing
    assert len(operator_items(fleet)) == 1


def test_a_heartbeat_clears_it_and_a_new_silence_is_a_new_episode(
    fleet: Acmi, clock: FakeClock
) -> None:
    fleet.agents.heartbeat("claude")
    clock.now += 49 * HOUR
    assert sweep(fleet, "e1")["stalled"] == 1
    beat = fleet.agents.heartbeat("claude", "ACTIVE")
    assert fleet.signals.all("agent:claude")["status"] == "ACTIVE"
    assert "status_note" not in fleet.signals.all("agent:claude")
    clock.now += 15 * 60 * 1000
    assert sweep(fleet, "e2")["stalled"] == 0  # not re-marked
    assert fleet.signals.all("agent:claude")["status"] == "ACTIVE"
    clock.now += 48 * HOUR
    third = sweep(fleet, "e3")
    assert (third["stalled"], third["escalated"]) == (1, 1)
    cids = sorted(item["correlationId"] for item in operator_items(fleet))
    assert cids == sorted([stall_cid("agent:claude", START), stall_cid("agent:claude", beat["ts"])])


def test_a_rerun_of_a_page_after_a_failure_escalates_once(fleet: Acmi, clock: FakeClock) -> None:
    fleet.agents.heartbeat("claude")
    clock.now += 49 * HOUR
    # a run that failed after its writes recorded nothing: the next one redoes the page
    run(fleet, JobRun("sweep", "crashed", clock.now))
    redo = sweep(fleet, "next")
    assert (redo["stalled"], redo["escalated"], redo["already_escalated"]) == (1, 0, 1)
    assert len(operator_items(fleet)) == 1


def test_a_heartbeat_between_the_read_and_the_mark_wins(fleet: Acmi, clock: FakeClock) -> None:
    fleet.signals.update("agent:claude", {"keep": 1})
    fleet.agents.heartbeat("claude")
    fleet.agents.heartbeat("gpt")
    clock.now += 49 * HOUR
    fleet.agents.heartbeat("claude", "ACTIVE")  # after the sweep read START
    kept = _mark(fleet, [("agent:claude", START), ("agent:gpt", START)])
    assert kept == [False, True]
    assert fleet.signals.all("agent:claude") == {
        "keep": 1,
        "last_heartbeat_ts": clock.now,
        "status": "ACTIVE",
    }
    assert fleet.signals.all("agent:gpt")["status"] == "STALLED"


def test_pages_of_equal_heartbeats_are_handled_once_each(fleet: Acmi, clock: FakeClock) -> None:
    names = [f"a{i}" for i in range(5)]
    for name in names:
        fleet.agents.heartbeat(name)  # all at START: ties
    clock.now += 49 * HOUR
    runs = [sweep(fleet, f"e{i}", max=2) for i in range(4)]
    assert [r["stalled"] for r in runs] == [2, 2, 1, 0]
    assert [r["backlog"] for r in runs] == [3, 1, 0, 0]
    assert [(r["watermark"], r["skip"]) for r in runs[:2]] == [(START, 2), (START, 4)]
    assert runs[2]["watermark"] == clock.now - STALL_AFTER_MS
    assert len(operator_items(fleet)) == 5
    assert all(fleet.signals.all(f"agent:{n}")["status"] == "STALLED" for n in names)


def test_foreign_members_and_unreadable_signals_do_not_block_the_sweep(
    fleet: Acmi, clock: FakeClock, raw: redis.Redis
) -> None:
    fleet.agents.heartbeat("claude")
    fleet.agents.heartbeat("broken")
    raw.zadd(fleet.keys.activity(), {"user:ada": START})  # another tool's member
    raw.set(_signals_key(fleet, "broken"), b"not json")
    clock.now += 49 * HOUR
    result = sweep(fleet, "e1")
    assert (result["stalled"], result["skipped"]) == (1, 1)
    assert any("agent:broken: signals not marked" in p for p in result["problems"])
    assert any("not an agent id" in p for p in result["problems"])
    assert fleet.signals.all("agent:claude")["status"] == "STALLED"
    assert raw.get(_signals_key(fleet, "broken")) == b"not json"  # nothing written there
    assert [i["correlationId"] for i in operator_items(fleet)] == [stall_cid("agent:claude", START)]


def _signals_key(acmi: Acmi, name: str) -> str:
    from acmi_core.coordination.agents import agent_id

    return acmi.keys.signals(agent_id(name))


def test_round_trips_of_a_run(fleet: Acmi, clock: FakeClock) -> None:
    for name in ("a", "b", "c"):
        fleet.agents.heartbeat(name)
    clock.now += 49 * HOUR
    result = sweep(fleet, "e1")
    # job state + the change index's two pages (work items active since the last run,
    # silent past the cutoff) + page + one mark script for the 3 + 3 HITL creates +
    # run_job's record
    assert (result["stalled"], result["requests"]) == (3, 1 + 2 + 1 + 1 + 3 + 1)
    clock.now += 15 * 60 * 1000
    assert sweep(fleet, "e2")["requests"] == 5  # nothing new: state, 3 pages, record


def test_max_is_checked(fleet: Acmi) -> None:
    from acmi_core.base.errors import AcmiValidationError

    with pytest.raises(AcmiValidationError) as err:
        sweep(fleet, "e1", max=0)
    assert err.value.field == "max"


def _seed(acmi: Acmi, idle: int, now: int) -> None:
    """``idle`` agents that cost a run nothing: half stalled long ago (below the
    watermark), half alive (above the cutoff); written straight into the index."""
    commands: list[tuple[Any, ...]] = []
    for start in range(0, idle, 1000):
        members: list[Any] = []
        for i in range(start, min(idle, start + 1000)):
            members += [now - 100 * HOUR if i % 2 else now, f"agent:idle{i}"]
        commands.append(("ZADD", acmi.keys.activity(), *members))
    acmi.store.pipeline(commands)


def test_a_run_costs_what_changed_not_how_many_agents_there_are(
    acmi: Acmi, clock: FakeClock
) -> None:
    costs = {}
    for idle in (100, 10_000):
        fleet = fresh_tenant(acmi, clock)
        clock.now = START
        sweep(fleet, "first")  # sets the watermark: START - 48 h
        _seed(fleet, idle, START)
        for i in range(10):  # the active ones: their last heartbeat crosses the line next
            fleet.agents.heartbeat(f"busy{i}", now=START - 48 * HOUR + 10 * 60 * 1000)
        clock.now = START + 15 * 60 * 1000
        result = sweep(fleet, "second")
        assert (result["stalled"], result["escalated"]) == (10, 10)
        costs[idle] = (result["requests"], result["commands"])
    assert costs[100] == costs[10_000], costs


def test_a_long_agent_id_is_escalated_under_a_digest(fleet: Acmi, clock: FakeClock) -> None:
    name = "x" * 250  # agent:<250 characters>: too long for a correlationId or a topic
    fleet.agents.heartbeat(name)
    clock.now += 49 * HOUR
    result = sweep(fleet, "e1")
    assert (result["stalled"], result["escalated"]) == (1, 1)
    (item,) = operator_items(fleet)
    assert item["correlationId"] == stall_cid(f"agent:{name}", START)
    assert len(item["correlationId"]) <= 128 and item["correlationId"].endswith(f"-{START}")


# --- work items and projects ----------------------------------------------------------------


def _note(acmi: Acmi, entity: str, summary: str = "progress") -> None:
    acmi.timeline.append(
        entity,
        {"source": "agent:bentley", "kind": "note", "correlationId": "c", "summary": summary},
    )


def test_a_work_item_or_project_silent_48_h_is_stalled_and_escalated_once(
    fleet: Acmi, clock: FakeClock
) -> None:
    sweep(fleet, "e0")  # the first run: where the activity read starts
    fleet.work.create("launch", {"title": "Launch"}, owner="bentley", status="in-progress")
    fleet.work.event("launch", {"source": "agent:bentley", "kind": "progress",
                                "correlationId": "c", "summary": "drafted"})  # fmt: skip
    _note(fleet, "project:acmi")
    fleet.work.create("shipped", {"title": "Done"}, status="done")
    fleet.work.event("shipped", {"source": "agent:a", "kind": "note",
                                 "correlationId": "c", "summary": "shipped"})  # fmt: skip
    _note(fleet, "user:mikey")  # not a project: never stalled
    changed_at = clock.now
    clock.now += 47 * HOUR
    assert sweep(fleet, "e1")["work_stalled"] == 0
    clock.now += HOUR + 1
    first = sweep(fleet, "e2")
    assert (first["work_stalled"], first["work_escalated"], first["backlog"]) == (2, 2, 0)
    signals = fleet.signals.all("work:launch")
    assert signals["status"] == "in-progress"  # the item's own status, kept
    assert signals["liveness"] == "STALLED" and "no activity since" in signals["liveness_note"]
    assert fleet.signals.all("project:acmi")["liveness"] == "STALLED"
    assert "liveness" not in fleet.signals.all("work:shipped")  # closed: not stalled
    assert fleet.signals.all("user:mikey") == {}
    items = sorted(i["correlationId"] for i in operator_items(fleet))
    assert items == sorted(
        [stall_cid("work:launch", changed_at), stall_cid("project:acmi", changed_at)]
    )
    # later runs: no second item for the same stall
    for n in range(3):
        clock.now += 15 * 60 * 1000
        again = sweep(fleet, f"e3-{n}")
        assert (again["work_stalled"], again["work_escalated"]) == (0, 0)
    assert len(operator_items(fleet)) == 2


def test_activity_after_a_stall_clears_it_and_a_new_silence_is_a_new_episode(
    fleet: Acmi, clock: FakeClock
) -> None:
    sweep(fleet, "e0")
    fleet.work.create("w1", {"title": "t"})
    _note(fleet, "work:w1", "started")  # silence counts from the timeline's last change
    clock.now += 49 * HOUR
    assert sweep(fleet, "e1")["work_stalled"] == 1
    clock.now += 60_000
    fleet.work.event("w1", {"source": "agent:a", "kind": "progress",
                            "correlationId": "c", "summary": "back"})  # fmt: skip
    revived_at = clock.now
    clock.now += 15 * 60 * 1000
    cleared = sweep(fleet, "e2")
    assert (cleared["work_cleared"], cleared["work_stalled"]) == (1, 0)
    signals = fleet.signals.all("work:w1")
    assert "liveness" not in signals and "liveness_note" not in signals
    assert signals["status"] == "open"
    assert fleet.store.execute(("ZCARD", fleet.keys.stalled())) == 0
    clock.now += 48 * HOUR
    again = sweep(fleet, "e3")
    assert (again["work_stalled"], again["work_escalated"]) == (1, 1)
    cids = {i["correlationId"] for i in operator_items(fleet)}
    assert stall_cid("work:w1", revived_at) in cids and len(cids) == 2


def test_a_tenants_silent_items_are_its_own(acmi: Acmi, clock: FakeClock) -> None:
    one, two = fresh_tenant(acmi, clock), fresh_tenant(acmi, clock)
    for tenant in (one, two):
        sweep(tenant, "e0")
    _note(one, "work:w1")
    clock.now += 24 * HOUR
    _note(two, "work:w1")
    clock.now += 25 * HOUR
    assert sweep(one, "e1")["work_stalled"] == 1
    assert sweep(two, "e1")["work_stalled"] == 0  # 25 h silent in this tenant
    assert one.signals.all("work:w1")["liveness"] == "STALLED"
    assert "liveness" not in two.signals.all("work:w1")
    assert len(operator_items(one)) == 1 and operator_items(two) == []


def _seed_items(acmi: Acmi, idle: int, now: int) -> None:
    """``idle`` work items in the change index that cost a run nothing: half silent long
    ago (below the watermark), half changed now (after the cutoff, before the activity
    read's start); written straight into the index."""
    commands: list[tuple[Any, ...]] = []
    for start in range(0, idle, 1000):
        members: list[Any] = []
        for i in range(start, min(idle, start + 1000)):
            members += [now - 100 * HOUR if i % 2 else now - HOUR, f"work:idle{i}"]
        commands.append(("ZADD", acmi.keys.changed(), *members))
    acmi.store.pipeline(commands)


def test_a_run_costs_what_changed_not_how_many_work_items_there_are(
    acmi: Acmi, clock: FakeClock
) -> None:
    costs = {}
    for idle in (100, 10_000):
        fleet = fresh_tenant(acmi, clock)
        clock.now = START
        sweep(fleet, "first")  # the watermarks: START - 48 h, and START
        _seed_items(fleet, idle, START)
        for i in range(10):  # the active ones: their last change crosses the line next
            clock.now = START - 48 * HOUR + 10 * 60 * 1000
            _note(fleet, f"work:busy{i}")
        clock.now = START + 15 * 60 * 1000
        result = sweep(fleet, "second")
        assert (result["work_stalled"], result["work_escalated"]) == (10, 10)
        costs[idle] = (result["requests"], result["commands"])
    assert costs[100] == costs[10_000], costs

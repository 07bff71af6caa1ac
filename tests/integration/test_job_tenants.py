"""Scheduled jobs across tenants (acmi_core.jobs.tenants): the indexes of tenants with work
kept by the writes, a failure kept to its tenant, caps per tenant, no change lost to a
write landing while a job drains, and a cost that grows with the tenants that have
work, never with all of them."""

from __future__ import annotations

import time
from typing import Any

import pytest

from acmi_core import Acmi
from acmi_core.base.errors import CorruptData
from acmi_core.base.keys import ACTIVITY, CHANGED, ROLLUP_LATEST, WAKE, Keys
from acmi_core.base.model import EntityId
from acmi_core.entities.api import PAGE
from acmi_core.jobs import rollup, wake
from acmi_core.jobs.runner import JobRun, job_state
from acmi_core.jobs.tenants import run_tenants, tenant_status
from acmi_core.store.counting import CountingStore
from acmi_core.store.memory import MemoryStore
from acmi_core.store.writes import WritePlan
from tests.kit import FakeClock

MINUTE = 60_000


def _scores(acmi: Acmi, key: str) -> dict[str, int]:
    reply = acmi.store.execute(("ZRANGE", key, 0, -1, "WITHSCORES"))
    assert isinstance(reply, list)
    return {m.decode(): int(float(s)) for m, s in zip(reply[::2], reply[1::2], strict=True)}


def _event(text: str) -> dict[str, Any]:
    return {"source": "user:mikey", "kind": "note", "correlationId": text, "summary": text}


def _run(acmi: Acmi, job: Any, name: str = "rollup-cron", **params: Any) -> dict[str, Any]:
    run = JobRun(name, f"exec-{time.monotonic_ns()}", acmi.clock(), params)
    return run_tenants(acmi, run, job, clock=time.perf_counter)


def _rolled(acmi: Acmi, tenant: str, entity: str) -> bool:
    keys = Keys(tenant, acmi.settings.default_tenant)
    return acmi.store.execute(("EXISTS", keys.slot(EntityId.parse(entity), ROLLUP_LATEST))) == 1


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


def at(store: MemoryStore, clock: FakeClock, tenant: str | None = None) -> Acmi:
    return Acmi(store, tenant=tenant, clock=clock)


# --- the indexes, kept by the writes (every backend) -----------------------------------------


def test_writes_keep_the_indexes_of_tenants_with_work(acmi: Acmi) -> None:
    tenant = f"t{time.monotonic_ns()}"
    other = Acmi(acmi.store, acmi.settings, tenant=tenant)
    other.timeline.append("deal:a", _event("one"))
    other.agents.heartbeat("claude", now=1_000)
    other.agents.heartbeat("gpt", now=500)  # a late writer with an older clock: no step back
    other.wake.set("claude", minute=15)
    changed = _scores(acmi, acmi.keys.tenants_with(CHANGED))[tenant]
    assert changed == _scores(other, other.keys.changed())["deal:a"]
    assert _scores(acmi, acmi.keys.tenants_with(ACTIVITY))[tenant] == 1_000
    assert _scores(acmi, acmi.keys.tenants_with(WAKE))[tenant] == min(
        _scores(other, other.keys.wake_due()).values()
    )


def test_zhead_follows_the_earliest_due_and_leaves_when_it_empties(acmi: Acmi) -> None:
    index, own = f"acmi:_test:{time.monotonic_ns()}:tenants", f"acmi:_test:{time.monotonic_ns()}:d"
    for score in (30, 10):
        plan = WritePlan()
        plan.zmin(index, score, "acme")
        plan.zset(own, score, f"agent:{score}")
        plan.apply(acmi.store)
    plan = WritePlan()
    plan.zrem(own, "agent:10")
    plan.zhead(index, "acme", own)  # in the same run: sees the ZREM before it
    plan.apply(acmi.store)
    assert _scores(acmi, index) == {"acme": 30}
    plan = WritePlan()
    plan.zrem(own, "agent:30")
    plan.zhead(index, "acme", own)
    plan.apply(acmi.store)
    assert _scores(acmi, index) == {}
    acmi.store.execute(("SET", own, "not a zset"))
    plan = WritePlan()
    plan.zhead(index, "acme", own)
    with pytest.raises(CorruptData):
        plan.apply(acmi.store)


# --- the driver ---------------------------------------------------------------------------


def test_one_tenants_failure_does_not_stop_the_others(store: MemoryStore, clock: FakeClock) -> None:
    for tenant in ("default", "bad", "acme"):
        at(store, clock, tenant).timeline.append("deal:a", _event(tenant))
    clock.now += 10 * MINUTE
    broken = {"bad"}

    def job(acmi: Acmi, run: JobRun) -> dict[str, Any]:
        if acmi.tenant in broken:
            raise RuntimeError("summarizer down")
        return rollup.run(acmi, run)

    acmi = at(store, clock)
    first = _run(acmi, job)
    assert first["tenants"]["bad"] == {"error": "RuntimeError: summarizer down"}
    assert first["waiting"] == {"bad": "failed: RuntimeError: summarizer down"}
    assert [_rolled(acmi, t, "deal:a") for t in ("default", "bad", "acme")] == [True, False, True]
    # the next run serves the failed tenant again without a new change there
    broken.clear()
    clock.now += 15 * MINUTE
    second = _run(acmi, job)
    assert _rolled(acmi, "bad", "deal:a") and "waiting" not in second
    assert second["tenants"]["bad"]["written"] == 1


def test_the_default_tenants_failure_is_raised_after_the_others_ran(
    store: MemoryStore, clock: FakeClock
) -> None:
    for tenant in ("default", "acme"):
        at(store, clock, tenant).timeline.append("deal:a", _event(tenant))
    clock.now += 10 * MINUTE

    def job(acmi: Acmi, run: JobRun) -> dict[str, Any]:
        if acmi.tenant == "default":
            raise RuntimeError("down")
        return rollup.run(acmi, run)

    with pytest.raises(RuntimeError, match="down"):
        _run(at(store, clock), job)
    assert _rolled(at(store, clock), "acme", "deal:a")


def test_caps_are_per_tenant_and_every_tenant_gets_its_turn(
    store: MemoryStore, clock: FakeClock
) -> None:
    for tenant in ("default", "acme", "beta"):
        for n in range(2):
            clock.now += 1
            at(store, clock, tenant).timeline.append(f"deal:{n}", _event(f"{tenant}{n}"))
    clock.now += 10 * MINUTE
    acmi = at(store, clock)
    first = _run(acmi, rollup.run, max=1)
    assert first["written"] == 1 and first["backlog"] == 1
    assert {t: r["written"] for t, r in first["tenants"].items()} == {"acme": 1, "beta": 1}
    assert set(first["waiting"]) == {"default", "acme", "beta"}
    clock.now += 15 * MINUTE
    second = _run(acmi, rollup.run, max=1)
    assert "waiting" not in second
    assert all(_rolled(acmi, t, f"deal:{n}") for t in ("default", "acme", "beta") for n in (0, 1))
    # one tenant a run: the one left waiting goes first next time, none starves
    for tenant in ("acme", "beta"):
        clock.now += 1
        at(store, clock, tenant).timeline.append("deal:new", _event(f"{tenant}-new"))
    clock.now += 10 * MINUTE
    served = []
    for _ in range(3):
        clock.now += 15 * MINUTE
        result = _run(acmi, rollup.run, max_tenants=1)
        served.append(sorted(result.get("tenants", {})) or ["default"])
    assert _rolled(acmi, "acme", "deal:new") and _rolled(acmi, "beta", "deal:new")
    assert {t for names in served for t in names} >= {"acme", "beta"}


def test_a_change_landing_while_the_job_drains_keeps_its_tenant(
    store: MemoryStore, clock: FakeClock
) -> None:
    at(store, clock, "acme").timeline.append("deal:a", _event("a"))
    clock.now += 10 * MINUTE

    def job(acmi: Acmi, run: JobRun) -> dict[str, Any]:
        result = rollup.run(acmi, run)
        if acmi.tenant == "acme":  # a write lands after acme's page was read
            acmi.timeline.append("deal:late", _event("late"))
        return result

    acmi = at(store, clock)
    _run(acmi, job)
    assert _rolled(acmi, "acme", "deal:a") and not _rolled(acmi, "acme", "deal:late")
    clock.now += 15 * MINUTE
    later = _run(acmi, rollup.run)
    assert _rolled(acmi, "acme", "deal:late"), later


def test_a_wake_scheduled_while_the_tick_drains_keeps_its_tenant(
    store: MemoryStore, clock: FakeClock
) -> None:
    acme = at(store, clock, "acme")
    acme.wake.set("claude", minute=15)
    clock.now = min(_scores(acme, acme.keys.wake_due()).values()) + 1

    def job(acmi: Acmi, run: JobRun) -> dict[str, Any]:
        result = wake.run(acmi, run)
        if acmi.tenant == "acme":  # a schedule lands while the tick serves acme
            acmi.wake.set("gpt", minute=45)
        return result

    acmi = at(store, clock)
    first = _run(acmi, job, "wake")
    assert first["tenants"]["acme"]["woken"] == 1
    # acme's score is its own earliest due, gpt's included: not lost, not early
    assert _scores(acmi, acmi.keys.tenants_with(WAKE))["acme"] == min(
        _scores(acme, acme.keys.wake_due()).values()
    )
    # an emptied due index takes the tenant out
    acme.wake.clear("claude")
    acme.wake.clear("gpt")
    clock.now = _scores(acmi, acmi.keys.tenants_with(WAKE))["acme"] + 1  # its stale score
    _run(acmi, wake.run, "wake")
    assert "acme" not in _scores(acmi, acmi.keys.tenants_with(WAKE))


def _second_run_cost(idle: int) -> tuple[int, int]:
    clock = FakeClock()
    store = MemoryStore()
    store.execute(("SCRIPT", "LOAD", PAGE.source))  # cached, as after any first read
    for n in range(idle):
        at(store, clock, f"idle{n}").timeline.append("deal:a", _event(f"idle{n}"))
    clock.now += 10 * MINUTE
    _run(at(store, clock), rollup.run, max_tenants=1000)
    for tenant in ("acme", "beta"):
        at(store, clock, tenant).timeline.append("deal:a", _event(tenant))
    clock.now += 15 * MINUTE
    counting = CountingStore(store)
    result = _run(Acmi(counting, clock=clock), rollup.run, max_tenants=1000)
    assert sorted(result["tenants"]) == ["acme", "beta"]
    return counting.requests, counting.commands


def test_the_cost_grows_with_tenants_with_work_not_with_all_tenants() -> None:
    assert _second_run_cost(100) == _second_run_cost(0)


def test_status_shows_each_tenants_backlog(store: MemoryStore, clock: FakeClock) -> None:
    for n in range(3):
        clock.now += 1
        at(store, clock, "acme").timeline.append(f"deal:{n}", _event(f"a{n}"))
    clock.now += 10 * MINUTE
    acmi = at(store, clock)
    _run(acmi, rollup.run, max=1)
    status = tenant_status(acmi, "rollup-cron")
    assert status["acme"]["backlog"] == 2 and status["acme"]["waiting"] == "backlog: 2"
    assert status["acme"]["pending"] == {"changed_since_watermark": 2}
    assert job_state(at(store, clock, "acme"), "rollup-cron")["backlog"] == 2

"""The indexes of tenants with work are pruned (``acmi_core.jobs.tenants``): a tenant
leaves ``acmi:_tenants:changed`` once every job reading it (rollup-cron, drift-diff,
hygiene, standup-brief's day) has passed its latest change, comes back with its next
change and is served then; ``acmi doctor`` sees no gap in what was pruned; and the index,
``acmi jobs status`` and a run no longer grow with tenants that had no changes since.
Before: the index kept every tenant that ever changed, and status read each of them."""

from __future__ import annotations

import time
from typing import Any

from acmi_core import Acmi
from acmi_core.base.keys import ACTIVITY, CHANGED, ROLLUP_LATEST, Keys
from acmi_core.base.model import EntityId
from acmi_core.jobs import drift, hygiene, rollup, standup, sweep
from acmi_core.jobs.runner import Job, JobRun
from acmi_core.jobs.tenants import readers, run_tenants, tenant_status
from acmi_core.ops.doctor import Doctor
from acmi_core.ops.findings import Kind
from acmi_core.store.counting import CountingStore
from acmi_core.store.memory import MemoryStore
from tests.kit import FakeClock

MINUTE = 60_000
DAY = 24 * 60 * MINUTE
# every job reading an index of tenants from a floor, by its schedule's name
JOBS: dict[str, Job] = {
    "rollup-cron": rollup.run,
    "drift-diff": drift.run,
    "hygiene": hygiene.run,
    "standup-brief": standup.run,
    "sweep": sweep.run,
}


def _event(text: str) -> dict[str, Any]:
    return {"source": "user:mikey", "kind": "note", "correlationId": text, "summary": text}


def _run(acmi: Acmi, name: str) -> dict[str, Any]:
    run = JobRun(name, f"exec-{time.monotonic_ns()}", acmi.clock(), {"max_tenants": 1000})
    return run_tenants(acmi, run, JOBS[name], clock=time.perf_counter)


def _every_job(acmi: Acmi, clock: FakeClock) -> dict[str, dict[str, Any]]:
    """One run of each job, a minute apart (as their schedules interleave)."""
    results = {}
    for name in JOBS:
        clock.now += MINUTE
        results[name] = _run(acmi, name)
    return results


def _indexed(acmi: Acmi, kind: str = CHANGED) -> set[str]:
    """The tenants in the index but the default one (always served, and drift-diff's
    report is a change of its own every run)."""
    reply = acmi.store.execute(("ZRANGE", acmi.keys.tenants_with(kind), 0, -1))
    assert isinstance(reply, list)
    return {member.decode() for member in reply} - {acmi.tenant}


def _rolled(acmi: Acmi, tenant: str, entity: str) -> bool:
    keys = Keys(tenant, acmi.settings.default_tenant)
    return acmi.store.execute(("EXISTS", keys.slot(EntityId.parse(entity), ROLLUP_LATEST))) == 1


def test_the_jobs_reading_the_change_index_are_the_five_that_share_it() -> None:
    # the sweep's floor is 48 h back (a work item stalls 48 h after its last change), so a
    # tenant stays in the change index that long for the others too
    assert set(readers(CHANGED)) == {
        "rollup-cron",
        "drift-diff",
        "hygiene",
        "standup-brief",
        "sweep",
    }
    assert set(readers(ACTIVITY)) == {"drift-diff", "sweep"}


def test_a_tenant_leaves_once_every_job_passed_it_and_is_served_when_it_changes_again() -> None:
    clock, store = FakeClock(), MemoryStore()
    acmi = Acmi(store, clock=clock)
    acme, beta = (Acmi(store, tenant=t, clock=clock) for t in ("acme", "beta"))
    acme.timeline.append("deal:a", _event("acme a"))
    beta.timeline.append("deal:a", _event("beta a"))
    clock.now += 10 * MINUTE

    # one job past them is not enough: the others have not read the changes yet
    first = _run(acmi, "rollup-cron")
    assert set(first["tenants"]) == {"acme", "beta"}
    assert _indexed(acmi) == {"acme", "beta"}
    _every_job(acmi, clock)
    # standup-brief still reads the day before its next run: the tenants stay
    assert _indexed(acmi) == {"acme", "beta"}

    clock.now += 3 * DAY  # past the sweep's 48 h floor too (a work item's silence)
    _every_job(acmi, clock)
    assert _indexed(acmi) == set()  # every job is past both tenants' changes
    assert [f for f in Doctor(acmi).findings() if f.kind is Kind.TENANT_UNINDEXED] == []

    # acme changes again: indexed by the write, served by the next run; beta is not
    acme.timeline.append("deal:b", _event("acme b"))
    assert _indexed(acmi) == {"acme"}
    clock.now += 10 * MINUTE
    again = _run(acmi, "rollup-cron")
    assert set(again.get("tenants", {})) == {"acme"}, again
    assert _rolled(acmi, "acme", "deal:b")
    assert _indexed(acmi) == {"acme"}  # the other jobs have not read it yet


def _cost_with_idle_tenants(idle: int) -> tuple[set[str], tuple[int, int], tuple[int, int]]:
    """(index size, ``acmi jobs status`` and a rollup run: (requests, commands)) with
    ``idle`` tenants that changed long ago and two (acme, beta) that changed now."""
    clock, store = FakeClock(), MemoryStore()
    acmi = Acmi(store, clock=clock)
    for n in range(idle):
        Acmi(store, tenant=f"idle{n}", clock=clock).timeline.append("deal:a", _event(f"i{n}"))
    clock.now += 10 * MINUTE
    _every_job(acmi, clock)
    clock.now += 3 * DAY  # past every job's floor, the sweep's 48 h included
    _every_job(acmi, clock)
    for tenant in ("acme", "beta"):
        Acmi(store, tenant=tenant, clock=clock).timeline.append("deal:a", _event(tenant))
    clock.now += 10 * MINUTE
    counting = CountingStore(store)
    status = tenant_status(Acmi(counting, clock=clock), "rollup-cron")
    assert set(status) == {"acme", "beta"}, sorted(status)
    status_cost = (counting.requests, counting.commands)
    counting.reset()
    result = _run(Acmi(counting, clock=clock), "rollup-cron")
    assert sorted(result["tenants"]) == ["acme", "beta"]
    run_cost = (counting.requests, counting.commands)
    return _indexed(acmi), status_cost, run_cost


def test_the_index_status_and_a_run_do_not_grow_with_tenants_without_changes_since() -> None:
    """Before: the index held the 100 idle tenants, and status read each of them."""
    with_idle = _cost_with_idle_tenants(100)
    assert with_idle == _cost_with_idle_tenants(0)
    assert with_idle[0] == {"acme", "beta"}

"""standup-brief serves every tenant with open HITL items in the queues it reads (the
operator's and the shared one), changes or not: the HITL create marks the tenant in the
index of tenants with open items (``HITL_OPERATOR``, ``HITL_SHARED``, in hitl.lua's same
run), and each brief re-syncs it from the queues, so a tenant leaves once its items are
resolved. Before: a tenant whose only work was an open item got no brief once its last
change was more than a day old."""

from __future__ import annotations

import json
import time
from typing import Any

from acmi_core import Acmi
from acmi_core.base.keys import HITL_OPERATOR, HITL_SHARED, LAST_BRIEF
from acmi_core.base.model import EntityId
from acmi_core.jobs import standup
from acmi_core.jobs.runner import JobRun
from acmi_core.jobs.tenants import run_tenants
from acmi_core.store.memory import MemoryStore
from tests.kit import FakeClock

DAY = 24 * 3600 * 1000


def _brief(acmi: Acmi) -> dict[str, Any]:
    raw = acmi.store.execute(
        ("GET", acmi.keys.slot(EntityId.parse(acmi.settings.operator), LAST_BRIEF))
    )
    assert isinstance(raw, bytes), f"no brief for {acmi.tenant}"
    doc: dict[str, Any] = json.loads(raw)
    return doc


def _run(acmi: Acmi) -> dict[str, Any]:
    run = JobRun("standup-brief", f"exec-{time.monotonic_ns()}", acmi.clock(), {})
    return run_tenants(acmi, run, standup.run, clock=time.perf_counter)


def _indexed(acmi: Acmi, kind: str) -> set[str]:
    reply = acmi.store.execute(("ZRANGE", acmi.keys.tenants_with(kind), 0, -1))
    assert isinstance(reply, list)
    return {member.decode() for member in reply}


def test_a_tenant_whose_only_work_is_an_open_hitl_item_is_briefed_until_it_is_resolved() -> None:
    clock, store = FakeClock(), MemoryStore()
    acmi = Acmi(store, clock=clock)
    operator = acmi.settings.operator
    acme, beta, gamma = (Acmi(store, tenant=t, clock=clock) for t in ("acme", "beta", "gamma"))
    acme.hitl.create(
        "prod deploy",
        "approve PR 42",
        asked_by="agent:claude",
        addressee=operator,
        correlation_id="deploy-42",
    )
    beta.hitl.create("budget", "sign off Q3", asked_by="agent:gpt", correlation_id="budget-1")
    # an item for someone else is not in the operator's brief: not marked for it
    gamma.hitl.create("keys", "rotate", asked_by="agent:a", addressee="user:someone")
    assert _indexed(acmi, HITL_OPERATOR) == {"acme"} and _indexed(acmi, HITL_SHARED) == {"beta"}

    clock.now += 3 * DAY  # no change of either tenant in the brief's day
    first = _run(acmi)
    assert set(first["tenants"]) == {"acme", "beta"}, first
    assert first["tenants"]["acme"]["actions"] == 1 and first["tenants"]["beta"]["actions"] == 1
    assert "prod deploy" in _brief(acme)["text"] and "budget" in _brief(beta)["text"]

    # the next day, still open, still no change: briefed again
    clock.now += DAY
    second = _run(acmi)
    assert set(second["tenants"]) == {"acme", "beta"}, second
    assert _brief(acme)["ts"] == second["tenants"]["acme"]["watermark"]

    # resolved: the resolve is a change (briefed once more), then acme leaves the index
    acme.hitl.resolve("deploy-42", "approved", by=operator)
    clock.now += DAY
    _run(acmi)
    assert _indexed(acmi, HITL_OPERATOR) == set() and _indexed(acmi, HITL_SHARED) == {"beta"}
    clock.now += 2 * DAY
    last = _run(acmi)
    assert set(last["tenants"]) == {"beta"}, last

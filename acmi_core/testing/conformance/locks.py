"""``locks``: the Lock-Protocol. A lease is exclusive until it expires or is released; the
fencing token strictly increases over every claim; renew and release need the owner
token; every claim, deferral and release posts its coordination event in the same step;
racing claimants get one winner. Each check runs in a tenant of its own, on a clock it
moves, so expiry is tested without waiting."""

from __future__ import annotations

import threading
from collections.abc import Callable

from acmi_core.base.errors import Conflict
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.client import Acmi
from acmi_core.testing.conformance.harness import (
    Context,
    check,
    expect,
    expect_equal,
    expect_raises,
)
from acmi_core.testing.conformance.helpers import run_together

START_MS = 1_790_000_000_000


class _Clock:
    def __init__(self) -> None:
        self.now = START_MS
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return self.now


def _clocked(ctx: Context) -> tuple[Acmi, _Clock, Callable[[str], str]]:
    """A client of the context's own tenant on a movable clock, and ``resource(name)``
    for fresh resource names whose keys cleanup deletes."""
    tenant = ctx.tenant()
    clock = _Clock()
    acmi = Acmi(tenant.store, tenant.settings, tenant=tenant.tenant, clock=clock)
    ctx.track_key(acmi.keys.leases())
    ctx.track_key(acmi.keys.coordination_timeline())
    ctx.track_key(acmi.keys.index("thread"))

    def resource(name: str) -> str:
        res = f"conf-{ctx.token}-{name}"
        ctx.track_key(acmi.keys.lock(res))
        return res

    return acmi, clock, resource


def _coord(acmi: Acmi, resource: str) -> list[tuple[str, str]]:
    """(kind, correlationId) of the coordination events about ``resource``, oldest first."""
    return [
        (e.kind, e.correlationId)
        for e in acmi.timeline.read(COORDINATION_THREAD)
        if isinstance(e.payload, dict) and e.payload.get("resource") == resource
    ]


@check("locks", "a lease is exclusive until it expires, and fences strictly increase")
def locks_exclusive(ctx: Context) -> None:
    acmi, clock, resource = _clocked(ctx)
    res = resource("exclusive")
    first = acmi.locks.claim(res, "agent:a", 5_000)
    refused = expect_raises(Conflict, lambda: acmi.locks.claim(res, "agent:b", 5_000), "2nd claim")
    expect("agent:a" in refused.message, f"the hedge names the holder: {refused.message}")
    expect(str(first.expires_at) in refused.message, "the hedge names the expiry")
    clock.now += 5_000  # expiry is exclusive: at expires_at the lease is free
    second = acmi.locks.claim(res, "agent:b", 5_000)
    expect(second.fence > first.fence, f"fence {second.fence} after {first.fence}")
    acmi.locks.release(res, second.owner_token or "")
    third = acmi.locks.claim(res, "agent:a", 5_000)
    expect(third.fence > second.fence, "the fence also increases after a release")
    state = acmi.locks.get(res)
    expect_equal((state.held, state.owner, state.fence), (True, "agent:a", third.fence), "get")


@check("locks", "renew and release need the owner token; an expired lease cannot be renewed")
def locks_token(ctx: Context) -> None:
    acmi, clock, resource = _clocked(ctx)
    res = resource("token")
    lease = acmi.locks.claim(res, "agent:a", 5_000)
    token = lease.owner_token or ""
    expect_raises(Conflict, lambda: acmi.locks.renew(res, "not-the-token", 5_000), "renew")
    expect_raises(Conflict, lambda: acmi.locks.release(res, "not-the-token"), "release")
    clock.now += 4_000
    renewed = acmi.locks.renew(res, token, 5_000)
    expect_equal(renewed.expires_at, clock.now + 5_000, "renewed expiry")
    clock.now += 5_001
    expect_raises(Conflict, lambda: acmi.locks.renew(res, token, 5_000), "renew after expiry")
    expect_equal(acmi.locks.get(res).held, False, "held after expiry")


@check("locks", "claim, deferral and release post coord events sharing the lease's correlationId")
def locks_coordination(ctx: Context) -> None:
    acmi, clock, resource = _clocked(ctx)
    res = resource("coord")
    lease = acmi.locks.claim(res, "agent:a", 5_000)
    clock.now += 1
    expect_raises(Conflict, lambda: acmi.locks.claim(res, "agent:b", 5_000), "2nd claim")
    clock.now += 1
    acmi.locks.release(res, lease.owner_token or "")
    cid = lease.correlationId
    expect_equal(
        _coord(acmi, res),
        [("coord-claim", cid), ("coord-defer", cid), ("coord-release", cid)],
        "coordination events",
    )


@check("locks", "20 racing claimants: one winner, one coord-claim, 19 deferrals")
def locks_race(ctx: Context) -> None:
    acmi, _, resource = _clocked(ctx)
    res = resource("race")

    winners: list[int] = []

    def attempt(i: int) -> None:
        try:
            acmi.locks.claim(res, f"agent:racer-{i}", 60_000)
        except Conflict:
            return
        winners.append(i)  # list.append is atomic

    run_together(20, attempt)
    expect_equal(len(winners), 1, "winners")
    kinds = [kind for kind, _ in _coord(acmi, res)]
    expect_equal((kinds.count("coord-claim"), kinds.count("coord-defer")), (1, 19), "events")


@check("locks", "held_by lists exactly the unexpired leases of an owner")
def locks_held_by(ctx: Context) -> None:
    acmi, clock, resource = _clocked(ctx)
    a, b = resource("held-a"), resource("held-b")
    la = acmi.locks.claim(a, "agent:owner", 5_000)
    acmi.locks.claim(b, "agent:owner", 9_000)
    acmi.locks.claim(resource("held-c"), "agent:owner-2", 9_000)
    expect_equal([x.resource for x in acmi.locks.held_by("agent:owner")], [a, b], "held")
    acmi.locks.release(a, la.owner_token or "")
    expect_equal([x.resource for x in acmi.locks.held_by("agent:owner")], [b], "after release")
    clock.now += 9_000
    expect_equal(acmi.locks.held_by("agent:owner"), [], "after expiry")

"""``tenant`` and ``isolation``: no data leaks between tenants or between entities."""

from __future__ import annotations

from acmi_core.base.model import EntityId, tenant_id_fill
from acmi_core.testing.conformance.harness import Context, check, expect_equal
from acmi_core.testing.conformance.helpers import BASE_TS, cids, expect_empty, make_event

# --- tenant: one store, several tenants ------------------------------------------------------


@check("tenant", "tenants never see each other's profile, signals or timeline")
def tenant_isolation(ctx: Context) -> None:
    home, other, entity = ctx.acmi, ctx.tenant(), ctx.entity()
    home.profile.set(entity, {"who": "home"})
    home.signals.set(entity, "who", "home")
    home.timeline.append(entity, make_event(1, summary="home"))
    expect_empty(other, entity, "the other tenant before it writes")
    other.profile.set(entity, {"who": "other"})
    other.signals.set(entity, "who", "other")
    other.timeline.append(entity, make_event(2, summary="other"))
    other.timeline.append(entity, make_event(3, summary="other"))
    for acmi, who, size in ((home, "home", 1), (other, "other", 2)):
        bundle = acmi.get(entity)
        expect_equal((bundle.profile or {}).get("who"), who, f"{who} tenant's profile")
        expect_equal(bundle.signals, {"who": who}, f"{who} tenant's signals")
        expect_equal([e.summary for e in bundle.timeline], [who] * size, f"{who}'s timeline")
    other.delete(entity)
    expect_equal(home.signals.all(entity), {"who": "home"}, "home signals after other's delete")


@check("tenant", "a tenant's auto-fill uses its own tenant id")
def tenant_autofill(ctx: Context) -> None:
    other, entity = ctx.tenant(), ctx.entity("agent")
    expect_equal(other.tenant, f"t-{ctx.token}", "tenant name")
    other.profile.set(entity, {"a": 1})
    expect_equal(
        other.profile.get(entity),
        {"a": 1, "actor_type": "agent", "tenant_id": tenant_id_fill(other.tenant)},
        "profile",
    )
    other.profile.merge(ctx.entity("user"), {"b": 2})
    stored = other.timeline.append(entity, make_event())
    expect_equal(stored.to_dict().get("tenant_id"), tenant_id_fill(other.tenant), "event tenant_id")
    (event,) = other.timeline.read(entity)
    expect_equal(
        event.to_dict().get("tenant_id"), tenant_id_fill(other.tenant), "event tenant_id read back"
    )


@check("tenant", "list() is per tenant")
def tenant_list(ctx: Context) -> None:
    home, other = ctx.acmi, ctx.tenant()
    mine, theirs = ctx.entity(ctx.category), ctx.entity(ctx.category)
    home.signals.set(mine, "a", 1)
    other.signals.set(theirs, "a", 1)
    expect_equal(home.list(ctx.category), [mine], "home tenant's list")
    expect_equal(other.list(ctx.category), [theirs], "other tenant's list")


# --- isolation: entities of one tenant -------------------------------------------------------


def _siblings(ctx: Context) -> tuple[str, str, str]:
    """Two entities, plus one with the first's local id in another category."""
    first, second = ctx.entity("user", "iso"), ctx.entity("user", "iso")
    cousin = ctx.track("agent:" + EntityId.parse(first).local_id)
    return first, second, cousin


@check("isolation", "two entities never share a profile")
def isolation_profile(ctx: Context) -> None:
    acmi = ctx.acmi
    first, second, cousin = _siblings(ctx)
    acmi.profile.set(first, {"who": "first"})
    expect_equal(acmi.profile.get(second), None, "second's profile")
    expect_equal(acmi.profile.get(cousin), None, "same id, other category")
    acmi.profile.merge(second, {"who": "second"})
    acmi.profile.delete(cousin)
    expect_equal((acmi.profile.get(first) or {}).get("who"), "first", "first's profile")
    expect_equal((acmi.profile.get(second) or {}).get("who"), "second", "second's profile")


@check("isolation", "two entities never share signals")
def isolation_signals(ctx: Context) -> None:
    acmi = ctx.acmi
    first, second, cousin = _siblings(ctx)
    acmi.signals.set(first, "k", "first")
    expect_equal(acmi.signals.all(second), {}, "second's signals")
    expect_equal(acmi.signals.all(cousin), {}, "same id, other category")
    acmi.signals.set(second, "k", "second")
    acmi.signals.set(cousin, "k", "cousin")
    acmi.signals.delete(second, "k")
    expect_equal(acmi.signals.all(first), {"k": "first"}, "first's signals")
    expect_equal(acmi.signals.all(cousin), {"k": "cousin"}, "cousin's signals")


@check("isolation", "two entities never share a timeline")
def isolation_timeline(ctx: Context) -> None:
    acmi = ctx.acmi
    first, second, cousin = _siblings(ctx)
    acmi.timeline.append(first, make_event(1, ts=BASE_TS))
    expect_equal(acmi.timeline.size(second), 0, "second's timeline")
    expect_equal(acmi.timeline.size(cousin), 0, "same id, other category")
    acmi.timeline.append(second, make_event(2, ts=BASE_TS))
    acmi.timeline.append(cousin, make_event(3, ts=BASE_TS))
    expect_equal(cids(acmi.timeline.read(first)), ["conf-c-1"], "first's timeline")
    expect_equal(cids(acmi.timeline.read(second)), ["conf-c-2"], "second's timeline")
    expect_equal(cids(acmi.timeline.read(cousin)), ["conf-c-3"], "cousin's timeline")

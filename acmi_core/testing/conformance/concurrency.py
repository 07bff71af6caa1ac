"""``concurrency``: concurrent writers on one entity lose nothing (the reference keeps 1 of 50)."""

from __future__ import annotations

from acmi_core.testing.conformance.harness import Context, check, expect_equal
from acmi_core.testing.conformance.helpers import (
    BASE_TS,
    cids,
    filled_profile,
    make_event,
    run_together,
)


@check("concurrency", "50 concurrent signals.set on one entity lose nothing")
def concurrency_signals(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    run_together(50, lambda i: acmi.signals.set(entity, f"key-{i}", i))
    expect_equal(acmi.signals.all(entity), {f"key-{i}": i for i in range(50)}, "signals")


@check("concurrency", "20 concurrent profile.merge on one entity lose nothing")
def concurrency_merge(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    run_together(20, lambda i: acmi.profile.merge(entity, {f"field-{i}": i}))
    expected = filled_profile(acmi, entity, {f"field-{i}": i for i in range(20)})
    expect_equal(acmi.profile.get(entity), expected, "profile")


@check("concurrency", "20 concurrent appends on one entity lose nothing")
def concurrency_appends(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    run_together(20, lambda i: acmi.timeline.append(entity, make_event(i, ts=BASE_TS + i % 3)))
    expect_equal(acmi.timeline.size(entity), 20, "timeline size")
    got = sorted(cids(acmi.timeline.read(entity)))
    expect_equal(got, sorted(f"conf-c-{i}" for i in range(20)), "correlationIds read")


@check("concurrency", "concurrent signal deletes and sets lose nothing")
def concurrency_mixed(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.signals.update(entity, {f"old-{i}": i for i in range(10)})

    def work(i: int) -> None:
        if i < 10:
            acmi.signals.delete(entity, f"old-{i}")
        else:
            acmi.signals.set(entity, f"new-{i}", i)

    run_together(30, work)
    expect_equal(acmi.signals.all(entity), {f"new-{i}": i for i in range(10, 30)}, "signals")

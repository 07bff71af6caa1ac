"""``entity``: list, delete and get of whole entities."""

from __future__ import annotations

import json

from acmi_core.base.model import EntityId
from acmi_core.testing.conformance.harness import Context, check, expect, expect_equal
from acmi_core.testing.conformance.helpers import (
    BASE_TS,
    append_at,
    entity_keys,
    exists,
    expect_empty,
    filled_profile,
    make_event,
    stamps,
)


@check("entity", "list includes every entity written through any slot")
def entity_list(ctx: Context) -> None:
    acmi, cat = ctx.acmi, ctx.category
    written = [
        ctx.entity(cat, "p"),
        ctx.entity(cat, "m"),
        ctx.entity(cat, "s"),
        ctx.entity(cat, "t"),
        ctx.entity(cat, "b"),
    ]
    acmi.profile.set(written[0], {"a": 1})
    acmi.profile.merge(written[1], {"a": 1})
    acmi.signals.set(written[2], "a", 1)
    acmi.timeline.append(written[3], make_event())
    with acmi.batch() as batch:
        batch.signals.set(written[4], "a", 1)
    expect_equal(acmi.list(cat), sorted(written), f"list({cat!r})")
    expect_equal(acmi.list(f"{cat}-none"), [], "list of an unused category")


@check("entity", "delete removes the entity from list")
def entity_delete_list(ctx: Context) -> None:
    acmi, cat = ctx.acmi, ctx.category
    keep, gone = ctx.entity(cat), ctx.entity(cat)
    acmi.profile.set(keep, {"a": 1})
    acmi.profile.set(gone, {"a": 1})
    acmi.delete(gone)
    expect_equal(acmi.list(cat), [keep], "list after delete")


@check("entity", "delete removes profile, signals, timeline and extension keys")
def entity_delete_all(ctx: Context) -> None:
    acmi, entity, keep = ctx.acmi, ctx.entity("agent"), ctx.entity("agent")
    eid = EntityId.parse(entity)
    for target in (entity, keep):
        acmi.profile.set(target, {"a": 1})
        acmi.signals.set(target, "s", 1)
        acmi.timeline.append(target, make_event())
    spawn = json.dumps({"ts": BASE_TS, "session_id": "s-1", "model_id": "m"})
    acmi.store.execute(("ZADD", acmi.keys.slot(eid, "spawns"), BASE_TS, spawn))
    acmi.store.execute(
        (
            "HSET",
            acmi.keys.slot(eid, "active_context"),
            "thread:x",
            json.dumps({"role": "r", "joined_at": BASE_TS}),
        )
    )
    acmi.store.execute(
        ("SET", acmi.keys.slot(eid, "rollup:latest"), json.dumps({"ts": BASE_TS, "summary": "s"}))
    )
    keys = [
        *entity_keys(acmi, entity),
        *(acmi.keys.slot(eid, s) for s in ("spawns", "active_context", "rollup:latest")),
    ]
    expect(all(exists(acmi, k) for k in keys), "setup: every key exists before delete")
    acmi.delete(entity)
    left = [k for k in keys if exists(acmi, k)]
    expect_equal(left, [], "keys left after delete")
    expect_empty(acmi, entity, "after delete")
    expect_equal(acmi.signals.all(keep), {"s": 1}, "another entity after delete")
    expect_equal(acmi.timeline.size(keep), 1, "another entity's timeline after delete")


@check("entity", "delete of a missing entity is a no-op")
def entity_delete_missing(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.delete(entity)
    ctx.acmi.delete(entity)
    expect_empty(ctx.acmi, entity, "after deleting a missing entity")


@check("entity", "get returns profile, signals and the newest N events oldest first")
def entity_get(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.profile.set(entity, {"a": 1})
    acmi.signals.set(entity, "s", [1])
    append_at(acmi, entity, [BASE_TS + i for i in (4, 1, 5, 3, 2)])
    bundle = acmi.get(entity, events=3)
    expect_equal(bundle.entity, entity, "entity")
    expect_equal(bundle.profile, filled_profile(acmi, entity, {"a": 1}), "profile")
    expect_equal(bundle.signals, {"s": [1]}, "signals")
    expect_equal(stamps(bundle.timeline), [BASE_TS + 3, BASE_TS + 4, BASE_TS + 5], "events=3")
    expect_equal(
        stamps(acmi.get(entity, events=10).timeline),
        [BASE_TS + i for i in range(1, 6)],
        "events above size",
    )
    expect_equal(stamps(acmi.get(entity, events=0).timeline), [], "events=0")
    expect_equal(bundle.problems, [], "problems")


@check("entity", "get on a missing entity is empty")
def entity_get_missing(ctx: Context) -> None:
    bundle = ctx.acmi.get(ctx.entity())
    expect_equal(bundle.profile, None, "profile")
    expect_equal(bundle.signals, {}, "signals")
    expect_equal(list(bundle.timeline), [], "timeline")
    expect_equal(bundle.timeline.skipped, [], "skipped")

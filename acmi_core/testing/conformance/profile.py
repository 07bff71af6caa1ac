"""``profile`` (who): get, set, merge, delete; auto-fill; copies."""

from __future__ import annotations

from typing import Any

from acmi_core.base.model import tenant_id_fill
from acmi_core.testing.conformance.harness import Context, check, expect_equal
from acmi_core.testing.conformance.helpers import filled_profile, make_event


@check("profile", "missing profile is None")
def profile_missing(ctx: Context) -> None:
    expect_equal(ctx.acmi.profile.get(ctx.entity()), None, "profile.get of an unwritten entity")


@check("profile", "set/get round-trip with actor_type and tenant_id auto-filled")
def profile_round_trip(ctx: Context) -> None:
    acmi = ctx.acmi
    for category, actor_type in (("user", "human"), ("agent", "agent")):
        entity = ctx.entity(category)
        doc = {"name": "Mikey", "age": 3, "tags": ["a", "b"]}
        expected = {**doc, "actor_type": actor_type, "tenant_id": tenant_id_fill(acmi.tenant)}
        returned = acmi.profile.set(entity, doc)
        expect_equal(returned, expected, f"profile.set({category}:...) return value")
        expect_equal(acmi.profile.get(entity), expected, f"profile.get({category}:...)")
    other = ctx.entity("deal")
    acmi.profile.set(other, {"stage": "won"})
    stored = acmi.profile.get(other) or {}
    expect_equal(
        stored.get("tenant_id"), tenant_id_fill(acmi.tenant), "tenant_id auto-fill on a deal:"
    )
    expect_equal(stored.get("stage"), "won", "deal profile field")


@check("profile", "set overwrites the whole profile")
def profile_set_overwrites(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.profile.set(entity, {"a": 1, "b": 2})
    ctx.acmi.profile.set(entity, {"c": 3})
    expect_equal(
        ctx.acmi.profile.get(entity), filled_profile(ctx.acmi, entity, {"c": 3}), "profile"
    )


@check("profile", "merge combines shallowly, returns and persists the result")
def profile_merge(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.profile.set(entity, {"a": 1, "b": {"x": 1}})
    merged = ctx.acmi.profile.merge(entity, {"b": {"y": 2}, "c": 3})
    expected = filled_profile(ctx.acmi, entity, {"a": 1, "b": {"y": 2}, "c": 3})
    expect_equal(merged, expected, "profile.merge return value")
    expect_equal(ctx.acmi.profile.get(entity), expected, "profile after merge")


@check("profile", "merge on a missing profile creates it")
def profile_merge_creates(ctx: Context) -> None:
    entity = ctx.entity("agent")
    ctx.acmi.profile.merge(entity, {"a": 1})
    expected = filled_profile(ctx.acmi, entity, {"a": 1})
    expect_equal(ctx.acmi.profile.get(entity), expected, "profile created by merge")


@check("profile", "delete removes the profile and only the profile")
def profile_delete(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.profile.set(entity, {"a": 1})
    acmi.signals.set(entity, "s", 1)
    acmi.timeline.append(entity, make_event())
    acmi.profile.delete(entity)
    expect_equal(acmi.profile.get(entity), None, "profile after delete")
    expect_equal(acmi.signals.all(entity), {"s": 1}, "signals after profile.delete")
    expect_equal(acmi.timeline.size(entity), 1, "timeline size after profile.delete")
    acmi.profile.delete(entity)  # deleting a missing profile is a no-op


@check("profile", "reads and writes are copies")
def profile_copies(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    doc: dict[str, Any] = {"name": "n", "list": [1], "obj": {"k": "v"}}
    returned = acmi.profile.set(entity, doc) or {}
    expected = filled_profile(acmi, entity, {"name": "n", "list": [1], "obj": {"k": "v"}})
    doc["name"] = "changed input"
    doc["list"].append(2)
    returned["name"] = "changed return"
    read = acmi.profile.get(entity) or {"list": [], "obj": {}}
    read["name"] = "changed read"
    listed, nested = read["list"], read["obj"]
    assert isinstance(listed, list) and isinstance(nested, dict)
    listed.append(3)
    nested["k"] = "changed nested"
    read["new"] = True
    expect_equal(acmi.profile.get(entity), expected, "profile after mutating dicts")

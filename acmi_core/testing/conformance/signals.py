"""``signals`` (now): get, set, update, all, delete; key lengths; copies."""

from __future__ import annotations

from functools import partial
from typing import Any

from acmi_core.testing.conformance.harness import (
    Context,
    check,
    expect,
    expect_equal,
    expect_rejected,
)


@check("signals", "missing signal is None")
def signals_missing(ctx: Context) -> None:
    entity = ctx.entity()
    expect_equal(ctx.acmi.signals.get(entity, "nope"), None, "signal of an unwritten entity")
    ctx.acmi.signals.set(entity, "other", 1)
    expect_equal(ctx.acmi.signals.get(entity, "nope"), None, "missing signal beside another")


@check("signals", "missing signal returns the given default")
def signals_default(ctx: Context) -> None:
    entity, sentinel = ctx.entity(), object()
    expect(ctx.acmi.signals.get(entity, "nope", sentinel) is sentinel, "default not returned")
    expect_equal(ctx.acmi.signals.get(entity, "nope", default="d"), "d", "default")
    ctx.acmi.signals.set(entity, "null", None)
    expect_equal(
        ctx.acmi.signals.get(entity, "null", default="d"), None, "a stored null is not missing"
    )


@check("signals", "primitives round-trip: str, int, float, bool, null")
def signals_primitives(ctx: Context) -> None:
    entity = ctx.entity()
    values: dict[str, Any] = {
        "str": "text",
        "empty_str": "",
        "int": 42,
        "negative": -7,
        "zero": 0,
        "float": 3.25,
        "true": True,
        "false": False,
        "null": None,
    }
    for key, value in values.items():
        ctx.acmi.signals.set(entity, key, value)
    for key, value in values.items():
        expect_equal(ctx.acmi.signals.get(entity, key, "MISSING"), value, f"signal {key}")
    expect_equal(ctx.acmi.signals.all(entity), values, "signals.all()")


@check("signals", "nested objects and arrays round-trip")
def signals_nested(ctx: Context) -> None:
    entity = ctx.entity()
    value = {"list": [1, "two", {"three": [3.0, None]}], "obj": {"a": {"b": {"c": []}}}}
    ctx.acmi.signals.set(entity, "nested", value)
    ctx.acmi.signals.set(entity, "array", [[1, 2], [], [{}]])
    expect_equal(ctx.acmi.signals.get(entity, "nested"), value, "nested object signal")
    expect_equal(ctx.acmi.signals.get(entity, "array"), [[1, 2], [], [{}]], "array signal")


@check("signals", "set overwrites one key")
def signals_overwrite(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.signals.set(entity, "k", {"old": True})
    ctx.acmi.signals.set(entity, "k", "new")
    expect_equal(ctx.acmi.signals.all(entity), {"k": "new"}, "signals after overwrite")


@check("signals", "all() is the flat key -> value map")
def signals_all(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.signals.set(entity, "a", 1)
    ctx.acmi.signals.set(entity, "b", {"c": 2})
    ctx.acmi.signals.update(entity, {"d": [3], "e": "four"})
    expected = {"a": 1, "b": {"c": 2}, "d": [3], "e": "four"}
    expect_equal(ctx.acmi.signals.all(entity), expected, "signals.all()")


@check("signals", "all() with no signals is {}")
def signals_all_empty(ctx: Context) -> None:
    entity = ctx.entity()
    expect_equal(ctx.acmi.signals.all(entity), {}, "signals.all() of an unwritten entity")
    ctx.acmi.profile.set(entity, {"a": 1})
    expect_equal(ctx.acmi.signals.all(entity), {}, "signals.all() beside a profile")


@check("signals", "delete removes one key and keeps the others")
def signals_delete(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.signals.update(entity, {"a": 1, "b": 2, "c": 3})
    ctx.acmi.signals.delete(entity, "b")
    expect_equal(ctx.acmi.signals.all(entity), {"a": 1, "c": 3}, "signals after delete")
    ctx.acmi.signals.delete(entity, "never-set")  # a no-op
    expect_equal(ctx.acmi.signals.all(entity), {"a": 1, "c": 3}, "after deleting a missing key")


@check("signals", "update sets several keys at once and keeps the others")
def signals_update(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.signals.set(entity, "keep", 0)
    ctx.acmi.signals.update(entity, {"a": 1, "b": [2]})
    ctx.acmi.signals.update(entity, {"a": "one"})
    expected = {"keep": 0, "a": "one", "b": [2]}
    expect_equal(ctx.acmi.signals.all(entity), expected, "signals after update")


@check("signals", "reads and writes are copies")
def signals_copies(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    value: dict[str, Any] = {"list": [1], "obj": {"k": "v"}}
    acmi.signals.set(entity, "v", value)
    value["list"].append("changed input")
    got = acmi.signals.get(entity, "v")
    assert isinstance(got, dict) and isinstance(got["obj"], dict)
    got["obj"]["k"] = "changed get"
    everything = acmi.signals.all(entity)
    stored = everything["v"]
    assert isinstance(stored, dict) and isinstance(stored["list"], list)
    stored["list"].append("changed all")
    everything["new"] = 1
    expected = {"v": {"list": [1], "obj": {"k": "v"}}}
    expect_equal(acmi.signals.all(entity), expected, "signals after mutating dicts")


@check("signals", "keys of 1 and 128 characters are accepted")
def signals_key_length_ok(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.signals.set(entity, "k", 1)
    ctx.acmi.signals.set(entity, "k" * 128, 2)
    expect_equal(ctx.acmi.signals.all(entity), {"k": 1, "k" * 128: 2}, "signals")


@check("signals", "keys of 0 and 129 characters are rejected, nothing stored")
def signals_key_length_rejected(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for key in ("", "k" * 129):
        label = f"signal key of {len(key)} characters"
        expect_rejected(partial(acmi.signals.set, entity, key, 1), f"signals.set: {label}")
        expect_rejected(partial(acmi.signals.update, entity, {key: 1}), f"update: {label}")
        expect_rejected(partial(acmi.signals.get, entity, key), f"signals.get: {label}")
        expect_rejected(partial(acmi.signals.delete, entity, key), f"delete: {label}")
    expect_rejected(lambda: acmi.signals.update(entity, {"ok": 1, "": 2}), "update, one bad key")
    expect_equal(acmi.signals.all(entity), {}, "signals after rejected writes")

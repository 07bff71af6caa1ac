"""``json``: JSON values survive exactly, in the stored bytes too (Redis cjson would not)."""

from __future__ import annotations

from typing import Any, Final

from acmi_core.base.model import EntityId
from acmi_core.testing.conformance.harness import Context, check, expect_equal
from acmi_core.testing.conformance.helpers import (
    BASE_TS,
    filled_profile,
    make_event,
    raw_json,
    raw_members,
)

# JSON that lossy encoders break: Redis cjson turns [] into {} and 12345678901234567 into
# 1.2345678901235e+16; naive scanners trip on braces, quotes or escapes inside strings.
TRICKY_JSON: Final[dict[str, Any]] = {
    "empty_array": [],
    "empty_object": {},
    "big_int": 12345678901234567,
    "big_negative": -9007199254740993,
    "floats": [0.1, 1e-07, -2.5, 1.5e300, 0.0],
    "unicode": "héllo wörld, 日本語, emoji 🎉👩‍💻, line sep \u2028 para sep \u2029",
    "escapes": 'quote " backslash \\ slash / newline \n tab \t cr \r nul \u0000 bell \u0007',
    "braces_in_strings": '{not: [an, "object"]} "}" ] , :',
    "nested": {"a": [[], {}, [{}], {"b": []}], "n": None, "t": True, "f": False},
}

TRICKY_NAMES: Final = ('quo"te', "back\\slash", "emoji 🎉", "brace}{]", "line\nbreak", "\u2028")


def _expect_exact(got: dict[str, Any], what: str) -> None:
    for name, value in TRICKY_JSON.items():
        expect_equal(got.get(name, "<missing>"), value, f"{what}: {name}")


@check("json", "profile values survive set exactly, in the stored bytes too")
def json_profile_set(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.profile.set(entity, TRICKY_JSON)
    got = acmi.profile.get(entity) or {}
    _expect_exact(got, "profile.get")
    raw = raw_json(acmi, acmi.keys.profile(EntityId.parse(entity)))
    expect_equal(raw, got, "stored profile bytes, decoded")


@check("json", "profile values survive merge exactly, in the stored bytes too")
def json_profile_merge(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.profile.set(entity, {"before": [{"x": []}], "big_int": 1})
    merged = acmi.profile.merge(entity, TRICKY_JSON) or {}
    _expect_exact(merged, "merge return value")
    acmi.profile.merge(entity, {"after": {}})
    got = acmi.profile.get(entity) or {}
    _expect_exact(got, "profile.get after two merges")
    expect_equal(got.get("before"), [{"x": []}], "untouched field")
    raw = raw_json(acmi, acmi.keys.profile(EntityId.parse(entity)))
    expect_equal(raw, got, "stored profile bytes, decoded")


@check("json", "signal values survive exactly, in the stored bytes too")
def json_signals(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.signals.set(entity, "first", {"keep": []})
    acmi.signals.update(entity, TRICKY_JSON)
    acmi.signals.set(entity, "last", 12345678901234567)
    expected = {"first": {"keep": []}, **TRICKY_JSON, "last": 12345678901234567}
    expect_equal(acmi.signals.all(entity), expected, "signals.all()")
    for name, value in TRICKY_JSON.items():
        expect_equal(acmi.signals.get(entity, name), value, f"signals.get({name!r})")
    raw = raw_json(acmi, acmi.keys.signals(EntityId.parse(entity)))
    expect_equal(raw, expected, "stored signals bytes, decoded")


@check("json", "event payload and fields survive exactly, in the stored bytes too")
def json_event(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    summary = TRICKY_JSON["unicode"] + TRICKY_JSON["escapes"]
    acmi.timeline.append(entity, make_event(ts=BASE_TS, summary=summary, payload=TRICKY_JSON))
    (event,) = acmi.timeline.read(entity)
    expect_equal(event.payload, TRICKY_JSON, "payload read back")
    expect_equal(event.summary, summary, "summary read back")
    (raw,) = raw_members(acmi, acmi.keys.timeline(EntityId.parse(entity)))
    expect_equal(raw.get("payload"), TRICKY_JSON, "stored member's payload, decoded")
    expect_equal(raw.get("summary"), summary, "stored member's summary, decoded")


@check("json", "keys with quotes, backslashes, newlines and emoji survive")
def json_tricky_names(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for n, name in enumerate(TRICKY_NAMES):
        acmi.signals.set(entity, name, n)
        acmi.profile.merge(entity, {name: n})
    for n, name in enumerate(TRICKY_NAMES):  # a second write overwrites, never duplicates
        acmi.signals.set(entity, name, [n])
        acmi.profile.merge(entity, {name: [n]})
    acmi.signals.delete(entity, TRICKY_NAMES[0])
    expected = {name: [n] for n, name in enumerate(TRICKY_NAMES)}
    expected_signals = {k: v for k, v in expected.items() if k != TRICKY_NAMES[0]}
    expect_equal(acmi.signals.all(entity), expected_signals, "signals")
    expect_equal(acmi.profile.get(entity), filled_profile(acmi, entity, expected), "profile")
    eid = EntityId.parse(entity)
    expect_equal(raw_json(acmi, acmi.keys.signals(eid)), expected_signals, "stored signals")
    expect_equal(
        raw_json(acmi, acmi.keys.profile(eid)),
        filled_profile(acmi, entity, expected),
        "stored profile",
    )

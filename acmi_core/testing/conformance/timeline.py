"""``timeline`` (then): append and read (order, since/until/limit/reverse), size,
duplicates, extend, fractional and equal timestamps, unknown fields, copies."""

from __future__ import annotations

from typing import Any

from acmi_core.base.model import EntityId
from acmi_core.entities.api import Events
from acmi_core.testing.conformance.harness import (
    Context,
    check,
    expect,
    expect_equal,
    expect_rejected,
)
from acmi_core.testing.conformance.helpers import (
    BASE_TS,
    append_at,
    cids,
    make_event,
    raw_members,
    stamps,
)


@check("timeline", "append/read round-trip")
def timeline_round_trip(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    event = make_event(1, ts=BASE_TS)
    stored = acmi.timeline.append(entity, event)
    for name, value in event.items():
        expect_equal(stored.to_dict().get(name), value, f"appended event's {name}")
    events = acmi.timeline.read(entity)
    expect_equal(len(events), 1, "number of events read")
    expect_equal(events[0].to_dict(), stored.to_dict(), "event read back")
    expect(isinstance(events, Events), "timeline.read must return Events")
    expect_equal(events.skipped, [], "skipped members")


@check("timeline", "ts is auto-filled with now in ms")
def timeline_ts_autofill(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    before = acmi.clock()
    stored = acmi.timeline.append(entity, make_event())
    after = acmi.clock()
    expect(before <= stored.ts <= after, f"auto ts {stored.ts} not within [{before}, {after}]")
    events = acmi.timeline.read(entity)
    expect_equal(stamps(events), [stored.ts], "stored ts")


@check("timeline", "read is chronological regardless of insert order")
def timeline_chronological(ctx: Context) -> None:
    entity = ctx.entity()
    append_at(ctx.acmi, entity, [BASE_TS + 3, BASE_TS + 1, BASE_TS + 5, BASE_TS + 2])
    expected = [BASE_TS + 1, BASE_TS + 2, BASE_TS + 3, BASE_TS + 5]
    expect_equal(stamps(ctx.acmi.timeline.read(entity)), expected, "read order")


@check("timeline", "reverse reads newest first")
def timeline_reverse(ctx: Context) -> None:
    entity = ctx.entity()
    append_at(ctx.acmi, entity, [BASE_TS + 2, BASE_TS + 1, BASE_TS + 3])
    expected = [BASE_TS + 3, BASE_TS + 2, BASE_TS + 1]
    expect_equal(stamps(ctx.acmi.timeline.read(entity, reverse=True)), expected, "reverse order")


@check("timeline", "limit returns the oldest N, oldest first")
def timeline_limit(ctx: Context) -> None:
    entity = ctx.entity()
    append_at(ctx.acmi, entity, [BASE_TS + i for i in (5, 1, 4, 2, 3)])
    got = stamps(ctx.acmi.timeline.read(entity, limit=2))
    expect_equal(got, [BASE_TS + 1, BASE_TS + 2], "read(limit=2)")
    got = stamps(ctx.acmi.timeline.read(entity, limit=10))
    expect_equal(got, [BASE_TS + i for i in range(1, 6)], "read(limit above size)")


@check("timeline", "since_ms is inclusive")
def timeline_since(ctx: Context) -> None:
    entity = ctx.entity()
    append_at(ctx.acmi, entity, [BASE_TS + 1000, BASE_TS + 2000, BASE_TS + 3000])
    got = stamps(ctx.acmi.timeline.read(entity, since_ms=BASE_TS + 2000))
    expect_equal(got, [BASE_TS + 2000, BASE_TS + 3000], "read(since_ms=2nd ts)")


@check("timeline", "until_ms is inclusive")
def timeline_until(ctx: Context) -> None:
    entity = ctx.entity()
    append_at(ctx.acmi, entity, [BASE_TS + 1000, BASE_TS + 2000, BASE_TS + 3000])
    got = stamps(ctx.acmi.timeline.read(entity, until_ms=BASE_TS + 2000))
    expect_equal(got, [BASE_TS + 1000, BASE_TS + 2000], "read(until_ms=2nd ts)")


@check("timeline", "since, until, reverse and limit combine")
def timeline_combined(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    append_at(acmi, entity, [BASE_TS + i for i in (9, 0, 8, 1, 7, 2, 6, 3, 5, 4)])
    low, high = BASE_TS + 2, BASE_TS + 7

    def read(**kw: Any) -> list[Any]:
        return [ts - BASE_TS for ts in stamps(acmi.timeline.read(entity, **kw))]

    expect_equal(read(since_ms=low, until_ms=high), [2, 3, 4, 5, 6, 7], "since+until")
    expect_equal(read(since_ms=low, until_ms=high, limit=3), [2, 3, 4], "since+until+limit")
    expect_equal(
        read(since_ms=low, until_ms=high, reverse=True), [7, 6, 5, 4, 3, 2], "since+until+reverse"
    )
    expect_equal(
        read(since_ms=low, until_ms=high, reverse=True, limit=3), [7, 6, 5], "all four combined"
    )
    expect_equal(read(reverse=True, limit=2), [9, 8], "reverse+limit")
    expect_equal(read(since_ms=BASE_TS + 4, limit=2), [4, 5], "since+limit")
    expect_equal(read(until_ms=BASE_TS + 4, reverse=True, limit=2), [4, 3], "until+reverse+limit")
    expect_equal(read(since_ms=high, until_ms=high), [7], "since == until")
    expect_equal(read(since_ms=BASE_TS + 100), [], "since after the newest event")


@check("timeline", "size counts stored events")
def timeline_size(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    expect_equal(acmi.timeline.size(entity), 0, "size of an unwritten timeline")
    append_at(acmi, entity, [BASE_TS + 1, BASE_TS + 2, BASE_TS + 3])
    expect_equal(acmi.timeline.size(entity), 3, "size after 3 appends")


@check("timeline", "payload is preserved")
def timeline_payload(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    payload = {"text": "hello", "n": 1, "items": [{"id": 1}, {"id": 2}], "flag": False}
    acmi.timeline.append(entity, make_event(payload=payload))
    acmi.timeline.append(entity, make_event(2, payload=[1, "two"]))
    acmi.timeline.append(entity, make_event(3, payload="just a string"))
    by_cid = {e.correlationId: e.payload for e in acmi.timeline.read(entity)}
    expect_equal(by_cid.get("conf-c-1"), payload, "object payload")
    expect_equal(by_cid.get("conf-c-2"), [1, "two"], "array payload")
    expect_equal(by_cid.get("conf-c-3"), "just a string", "string payload")


@check("timeline", "parentCorrelationId is preserved")
def timeline_parent(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.timeline.append(entity, make_event(1, ts=BASE_TS))
    acmi.timeline.append(entity, make_event(2, ts=BASE_TS + 1, parentCorrelationId="conf-c-1"))
    events = acmi.timeline.read(entity)
    expect_equal(
        [e.to_dict().get("parentCorrelationId") for e in events],
        [None, "conf-c-1"],
        "parentCorrelationId",
    )


@check("timeline", "an exact duplicate event is stored once")
def timeline_duplicate(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    event = make_event(1, ts=BASE_TS, payload={"a": [1, 2]})
    acmi.timeline.append(entity, event)
    acmi.timeline.append(entity, dict(event))
    expect_equal(acmi.timeline.size(entity), 1, "size after appending the same event twice")
    acmi.timeline.append(entity, {**event, "summary": "different"})
    expect_equal(acmi.timeline.size(entity), 2, "size after a same-ts, different event")


@check("timeline", "extend appends several events in one call")
def timeline_extend(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    stored = acmi.timeline.extend(entity, [make_event(i, ts=BASE_TS + i) for i in range(3)])
    expect_equal(len(stored), 3, "events returned by extend")
    expect_equal(cids(acmi.timeline.read(entity)), ["conf-c-0", "conf-c-1", "conf-c-2"], "read")
    expect_rejected(
        lambda: acmi.timeline.extend(entity, [make_event(9, ts=BASE_TS + 9), {"kind": "x"}]),
        "extend with one invalid event",
    )
    expect_equal(acmi.timeline.size(entity), 3, "size after a rejected extend (all or nothing)")


@check("timeline", "fractional ts is preserved")
def timeline_fractional_ts(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.timeline.append(entity, make_event(1, ts=BASE_TS + 0.5))
    acmi.timeline.append(entity, make_event(2, ts=BASE_TS))
    expect_equal(stamps(acmi.timeline.read(entity)), [BASE_TS, BASE_TS + 0.5], "ts values")


@check("timeline", "equal timestamps read in one deterministic order")
def timeline_equal_ts(ctx: Context) -> None:
    acmi = ctx.acmi
    first, second = ctx.entity(), ctx.entity()
    events = [make_event(n, ts=BASE_TS) for n in (3, 1, 4, 0, 2)]
    for event in events:
        acmi.timeline.append(first, event)
    for event in reversed(events):
        acmi.timeline.append(second, event)
    order = cids(acmi.timeline.read(first))
    expect_equal(sorted(order), sorted(e["correlationId"] for e in events), "events read")
    expect_equal(cids(acmi.timeline.read(first)), order, "second read of the same timeline")
    expect_equal(cids(acmi.timeline.read(second)), order, "same events inserted in reverse")
    expect_equal(cids(acmi.timeline.read(first, reverse=True)), order[::-1], "reverse read")
    expect_equal(cids(acmi.timeline.read(first, limit=2)), order[:2], "limit")
    expect_equal(
        cids(acmi.timeline.read(first, reverse=True, limit=2)), order[::-1][:2], "reverse + limit"
    )


@check("timeline", "unknown event fields round-trip, nested too")
def timeline_unknown_fields(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    extra = {
        "channel": "slack",
        "x_flag": True,
        "meta": {"nested": [1, {"deep": {"deeper": [None, 2.5]}}], "empty": {}},
        "tags": [],
    }
    stored = acmi.timeline.append(entity, make_event(ts=BASE_TS, **extra))
    (event,) = acmi.timeline.read(entity)
    for name, value in extra.items():
        expect_equal(stored.to_dict().get(name), value, f"unknown field {name} (append result)")
        expect_equal(event.to_dict().get(name), value, f"unknown field {name} (read)")
    (raw,) = raw_members(acmi, acmi.keys.timeline(EntityId.parse(entity)))
    for name, value in extra.items():
        expect_equal(raw.get(name), value, f"unknown field {name} in the stored member")


@check("timeline", "reads and writes are copies")
def timeline_copies(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    event = make_event(ts=BASE_TS, payload={"list": [1], "obj": {"k": "v"}})
    acmi.timeline.append(entity, event)
    event["payload"]["list"].append("changed input")
    event["summary"] = "changed input"
    (read,) = acmi.timeline.read(entity)
    read.payload["obj"]["k"] = "changed read"
    as_dict = read.to_dict()
    as_dict["summary"] = "changed dict"
    as_dict["payload"]["list"].append("changed dict")
    (again,) = acmi.timeline.read(entity)
    expect_equal(again.payload, {"list": [1], "obj": {"k": "v"}}, "payload after mutations")
    expect_equal(again.summary, "event 1", "summary after mutations")

"""``tolerance``: reads show what the reference's readers show. A stored timeline member
another tool wrote without following every rule (no kind/correlationId, as the reference
CLI's ``event`` writes; snake_case correlation_id; a speaker_type outside the enum; a
numeric tenant_id; ts out of range or in seconds; a summary over 500 UTF-16 units; no
source or summary, as the reference MCP server's spawn records and a ``message`` record) is
returned verbatim,
flagged in ``Event.legacy``. Only a member that is not JSON, not an object, or has no
usable ts (a finite number) is skipped and reported; nothing is ever raised, and the
events around it are still read."""

from __future__ import annotations

import json
from typing import Any, Final

from acmi_core.base.errors import StoreCommandError
from acmi_core.base.model import MAX_SUMMARY_LEN, EntityId
from acmi_core.client import Acmi
from acmi_core.testing.conformance.harness import CheckFn, Context, check, expect, expect_equal
from acmi_core.testing.conformance.helpers import BASE_TS, append_at, stamps


def _expect_one_skipped(acmi: Acmi, entity: str, reason_words: tuple[str, ...]) -> None:
    """Valid events at BASE_TS + 1 and + 3 read around one bad member at + 2."""
    expect_equal(acmi.timeline.size(entity), 3, "stored members")
    reads: list[dict[str, Any]] = [
        {},
        {"reverse": True},
        {"limit": 3},
        {"since_ms": BASE_TS + 2},
    ]
    for kw in reads:
        events = acmi.timeline.read(entity, **kw)
        valid = [ts for ts in (BASE_TS + 1, BASE_TS + 3) if ts >= kw.get("since_ms", 0)]
        if kw.get("reverse"):
            valid.reverse()
        expect_equal(stamps(events), valid, f"valid events read with {kw}")
        expect_equal(len(events.skipped), 1, f"skipped members with {kw}")
        reason = events.skipped[0].reason
        expect(isinstance(reason, str) and reason, "a skipped member needs a reason")
        expect(
            any(w.lower() in reason.lower() for w in reason_words),
            f"reason {reason!r} should mention one of {reason_words}",
        )
    bundle = acmi.get(entity)
    expect_equal(stamps(bundle.timeline), [BASE_TS + 1, BASE_TS + 3], "get(): valid events")
    expect_equal(len(bundle.timeline.skipped), 1, "get(): skipped members")


def _corrupt_member_check(member: bytes, reason_words: tuple[str, ...]) -> CheckFn:
    def run(ctx: Context) -> None:
        acmi, entity = ctx.acmi, ctx.entity()
        append_at(acmi, entity, [BASE_TS + 1, BASE_TS + 3])
        key = acmi.keys.timeline(EntityId.parse(entity))
        acmi.store.execute(("ZADD", key, BASE_TS + 2, member))
        _expect_one_skipped(acmi, entity, reason_words)

    return run


NOT_UTF8: Final = b'{"summary": "\xff\xfe"}'
CORRUPT_MEMBERS: Final = (
    ("a member that is not JSON", b"not json", ("json",)),
    ("a member that is a JSON array", b'["an","array"]', ("object",)),
    (
        "a member without a ts",
        json.dumps({"source": "s", "summary": "no ts"}).encode(),
        ("ts",),
    ),
    (
        "a member whose ts is not a number",
        json.dumps({"ts": "yesterday", "source": "s", "summary": "text ts"}).encode(),
        ("ts",),
    ),
)

for _label, _member, _words in CORRUPT_MEMBERS:
    check("tolerance", f"{_label} is skipped and reported")(_corrupt_member_check(_member, _words))


def _legacy_member_check(stored: dict[str, Any], reasons: list[str]) -> CheckFn:
    """Valid events at BASE_TS + 1 and + 3 read around a legacy member at + 2, which is
    returned verbatim and flagged, by every read."""

    def run(ctx: Context) -> None:
        acmi, entity = ctx.acmi, ctx.entity()
        append_at(acmi, entity, [BASE_TS + 1, BASE_TS + 3])
        key = acmi.keys.timeline(EntityId.parse(entity))
        acmi.store.execute(("ZADD", key, BASE_TS + 2, json.dumps(stored)))
        events = acmi.timeline.read(entity)
        expect_equal(len(events), 3, "events read (the legacy one included)")
        expect_equal(events.skipped, [], "skipped members")
        expect_equal(events.to_dicts()[1], stored, "the legacy member, as stored")
        expect_equal(events[1].to_dict(), stored, "the legacy event's to_dict()")
        expect_equal(list(events[1].legacy), reasons, "what the legacy event breaks")
        expect_equal([e.legacy for e in (events[0], events[2])], [(), ()], "valid events")
        flags = [{"index": 1, "reasons": reasons}]
        expect_equal(events.legacy_report(), flags, "timeline.read legacy_report()")
        newest = acmi.timeline.read(entity, reverse=True, limit=2)
        expect_equal([list(e.legacy) for e in newest], [[], reasons], "reverse, limit 2")
        page = acmi.timeline.page(entity, limit=10).to_dict()
        expect_equal(page["events"][1], stored, "timeline.page: the legacy member")
        expect_equal(page["legacy"], flags, "timeline.page: legacy")
        bundle = acmi.get(entity).to_dict()
        expect_equal(bundle["timeline"][1], stored, "get(): the legacy member")
        expect_equal(bundle["legacy"], flags, "get(): legacy")
        expect_equal(bundle["skipped"], [], "get(): skipped")

    return run


def _legacy(**fields: Any) -> dict[str, Any]:
    return {"ts": BASE_TS + 2, "source": "agent:old", "summary": "legacy", **fields}


VALID_FIELDS: Final = {"kind": "note", "correlationId": "c-legacy"}
LEGACY_MEMBERS: Final = (
    (
        "an event the reference CLI wrote (no kind, no correlationId)",
        _legacy(),
        ["kind: required", "correlationId: required"],
    ),
    (
        "an event the reference MCP server wrote (with session_id)",
        _legacy(session_id="s-1"),
        ["kind: required", "correlationId: required"],
    ),
    (
        "a member with snake_case correlation_id",
        _legacy(kind="note", correlation_id="c-legacy"),
        ["correlationId: camel_case"],
    ),
    (
        "a speaker_type outside agent|human|system|external",
        _legacy(**VALID_FIELDS, speaker_type="bot"),
        ["speaker_type: enum"],
    ),
    ("a numeric tenant_id", _legacy(**VALID_FIELDS, tenant_id=7), ["tenant_id: type"]),
    (
        "a ts in microseconds",  # past MAX_TS_MS: a unit mistake, shown as stored
        _legacy(**VALID_FIELDS, ts=(BASE_TS + 2) * 1000),
        ["ts: range"],
    ),
    ("a negative ts", _legacy(**VALID_FIELDS, ts=-1), ["ts: range"]),
    (
        "a ts in seconds",  # 2025-04-29 as seconds, 1970 as ms: refused on write, read as stored
        _legacy(**VALID_FIELDS, ts=1_745_947_200),
        ["ts: seconds"],
    ),
    (
        f"a summary over {MAX_SUMMARY_LEN} UTF-16 units",
        _legacy(**VALID_FIELDS, summary="\U0001f600" * (MAX_SUMMARY_LEN // 2 + 1)),
        ["summary: max_length"],
    ),
    (
        "a stored field named legacy (an ordinary unknown field, never the flag)",
        _legacy(legacy="stored"),
        ["kind: required", "correlationId: required"],
    ),
    (
        "a record with a message instead of a summary",
        {"ts": BASE_TS + 2, "source": "acmi-mcp", "message": "deploy finished"},
        ["kind: required", "correlationId: required", "summary: required"],
    ),
    (
        "a spawn record the reference MCP server wrote into the timeline",
        {"ts": BASE_TS + 2, "sessionId": "s-1", "modelId": "m-1"},
        ["source: required", "kind: required", "correlationId: required", "summary: required"],
    ),
)

for _label, _stored, _reasons in LEGACY_MEMBERS:
    check("tolerance", f"{_label} is read, flagged as legacy")(
        _legacy_member_check(_stored, _reasons)
    )


@check("tolerance", "a member that is not UTF-8 is skipped and reported")
def tolerance_not_utf8(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    append_at(acmi, entity, [BASE_TS + 1, BASE_TS + 3])
    command = ("ZADD", acmi.keys.timeline(EntityId.parse(entity)), BASE_TS + 2, NOT_UTF8)
    if ctx.raw is not None:
        ctx.raw(command)
    else:
        try:
            acmi.store.execute(command)
        except StoreCommandError:
            # This transport cannot carry such bytes (Upstash REST is text only): it must
            # refuse cleanly, writing nothing. Reading a member another client wrote needs
            # a side door (Context.raw) to write it.
            expect_equal(acmi.timeline.size(entity), 2, "members after a refused write")
            ctx.skip(
                "this store refused a non-UTF-8 member (cleanly, writing nothing); reading "
                "one another client wrote needs a raw side door (run_conformance(..., raw=...))"
            )
    _expect_one_skipped(acmi, entity, ("utf-8", "utf8"))


@check("tolerance", "several corrupt members are each reported, the others still read")
def tolerance_many(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    key = acmi.keys.timeline(EntityId.parse(entity))
    for n, (_, member, _) in enumerate(CORRUPT_MEMBERS):
        acmi.store.execute(("ZADD", key, BASE_TS + 10 * n, member))
    legacy = _legacy(ts=BASE_TS + 7)
    acmi.store.execute(("ZADD", key, BASE_TS + 7, json.dumps(legacy)))
    append_at(acmi, entity, [BASE_TS + 5, BASE_TS + 15])
    events = acmi.timeline.read(entity)
    expect_equal(stamps(events), [BASE_TS + 5, BASE_TS + 7, BASE_TS + 15], "events read")
    expect_equal(events.legacy_report()[0]["index"], 1, "the legacy event's index")
    expect_equal(len(events.skipped), len(CORRUPT_MEMBERS), "skipped members")
    expect(all(s.reason for s in events.skipped), "every skipped member has a reason")

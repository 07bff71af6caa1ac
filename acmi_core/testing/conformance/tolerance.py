"""``tolerance``: corrupt or legacy stored timeline members are skipped and reported,
never raised; the valid events around them are still read."""

from __future__ import annotations

import json
from typing import Any, Final

from acmi_core.client import Acmi
from acmi_core.errors import StoreCommandError
from acmi_core.model import EntityId
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
        "a legacy member with snake_case correlation_id",
        json.dumps(
            {
                "ts": BASE_TS + 2,
                "source": "agent:old",
                "kind": "note",
                "correlation_id": "c-legacy",
                "summary": "legacy",
            }
        ).encode(),
        ("correlation_id",),
    ),
    (
        "a member missing kind",
        json.dumps(
            {"ts": BASE_TS + 2, "source": "agent:x", "correlationId": "c-x", "summary": "no kind"}
        ).encode(),
        ("kind",),
    ),
)

for _label, _member, _words in CORRUPT_MEMBERS:
    check("tolerance", f"{_label} is skipped and reported")(_corrupt_member_check(_member, _words))


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


@check("tolerance", "several corrupt members are each reported, valid events still read")
def tolerance_many(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    key = acmi.keys.timeline(EntityId.parse(entity))
    for n, (_, member, _) in enumerate(CORRUPT_MEMBERS):
        acmi.store.execute(("ZADD", key, BASE_TS + 10 * n, member))
    append_at(acmi, entity, [BASE_TS + 5, BASE_TS + 15])
    events = acmi.timeline.read(entity)
    expect_equal(stamps(events), [BASE_TS + 5, BASE_TS + 15], "valid events")
    expect_equal(len(events.skipped), len(CORRUPT_MEMBERS), "skipped members")
    expect(all(s.reason for s in events.skipped), "every skipped member has a reason")

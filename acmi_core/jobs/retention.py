"""Retention: the tenant's keys that grow without bound, trimmed by policy (the hygiene
job's last step, once per tenant and run: ``run_tenants`` serves every tenant with work).

- **The coordination thread** (``thread:agent-coordination``: every lock claim and release,
  HITL resolve, heartbeat and wake status lands there) keeps its newest
  ``retention_coordination_events`` events (default 10,000) and, of those, only the ones
  of the last ``retention_coordination_days`` (default 30): an event beyond either goes.
  With an archive sink the thread is archived first, exactly as any timeline is
  (:func:`acmi_core.jobs.quarterly.archive_entity`: the quarter's JSONL object written and
  read back, then only the verified members trimmed). Without one the policy trims
  anyway (``retention_without_sink``: ``trim``, the default, or ``keep``).
- **Closed HITL records** (``keys.hitl_items``, a HASH correlationId -> record, and the
  closed queues' members) go ``retention_hitl_closed_days`` (default 30) after their
  resolution; within that window a create with the same correlationId is still a
  replay. An open item's record and queue member are never touched, nor is any request
  record (``keys.request``: they expire by themselves) or lock.

Bounded: each trim is one run of ``store/lua/hygiene.lua`` of at most ``TRIM_MEMBERS``
members and ``TRIM_BYTES`` (it removes only members still at the score read, so a write
landing meanwhile is never lost); a run makes at most ``COORDINATION_PASSES`` passes of
``PASS_EVENTS`` events over the thread and ``HITL_STEPS`` HSCAN steps of ``HITL_COUNT``
records (a closed record never changes again, so deleting one read is safe), resuming at
the cursor the job's state keeps. The rest is backlog for the next run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import COORDINATION_THREAD, MEMORY_ARCHIVE
from acmi_core.base.model import EntityId
from acmi_core.jobs.quarterly import TRIM_BYTES, TRIM_MEMBERS, archive_entity, run_script
from acmi_core.jobs.sink import Destination
from acmi_core.store.base import Arg
from acmi_core.store.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.client import Acmi

DAY_MS: Final = 86_400_000
COORDINATION: Final = EntityId.parse(COORDINATION_THREAD)
PASS_EVENTS: Final = 1_000  # events read per pass over the thread (archived and trimmed)
COORDINATION_PASSES: Final = 10  # passes a run: 10,000 events a tenant and run at most
HITL_COUNT: Final = 200  # the HSCAN COUNT of one step over the HITL records
HITL_STEPS: Final = 10  # steps a run; the cursor is kept in the job's state
# a record's header (store/lua/hitl.lua describes it): state, addressee, score, item
_RECORD: Final = re.compile(
    rb'^\{"state":"(open|closed)","addressee":(null|"[^"]*"),"score":(\d+),"at":\d+,'
    rb'"by":(?:null|"[^"]*"),"item":(.*)\}$',
    re.S,
)


@dataclass(frozen=True)
class Policy:
    """What is kept (module docstring); from the settings (``ACMI_RETENTION_*``)."""

    coordination_events: int = 10_000
    coordination_days: int = 30
    hitl_closed_days: int = 30
    without_sink: str = "trim"

    @classmethod
    def of(cls, settings: Any) -> Policy:
        return cls(
            settings.retention_coordination_events,
            settings.retention_coordination_days,
            settings.retention_hitl_closed_days,
            settings.retention_without_sink,
        )


@dataclass
class Retained:
    """What one tenant's retention did."""

    coordination_cutoff_ms: int | None = None  # events below it go
    coordination_archived: int = 0
    coordination_trimmed: int = 0
    coordination_backlog: bool = False
    hitl_scanned: int = 0
    hitl_deleted: int = 0
    hitl_cursor: str = "0"  # where the next run's HSCAN resumes ("0": a new pass)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _score(reply: object) -> int | None:
    if isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], bytes):
        return int(float(reply[1]))
    return None


def retain(
    acmi: Acmi,
    policy: Policy,
    now_ms: int,
    *,
    dest: Destination | None,
    hitl_cursor: object = "0",
    take_lease: Callable[[], bool] = lambda: True,
) -> Retained:
    """One tenant's retention (module docstring): one pipeline when there is nothing to
    trim. ``take_lease``: the run's archive lease, taken only when the thread has events
    to archive (without it the thread waits for the next run)."""
    out = Retained()
    thread, items = acmi.keys.coordination_timeline(), acmi.keys.hitl_items()
    at = hitl_cursor if isinstance(hitl_cursor, str) and hitl_cursor.isdigit() else "0"
    n = policy.coordination_events
    nth, oldest, scan = acmi.store.pipeline(
        [
            ("ZRANGE", thread, "+inf", "-inf", "BYSCORE", "REV", "LIMIT", n - 1, 1, "WITHSCORES"),
            ("ZRANGE", thread, 0, 0, "WITHSCORES"),
            ("HSCAN", items, at, "COUNT", HITL_COUNT),
        ]
    )
    # events older than the policy's days, or than its newest N (ties at that score kept)
    cutoff = now_ms - policy.coordination_days * DAY_MS
    newest_kept, first = _score(nth), _score(oldest)
    if newest_kept is not None:
        cutoff = max(cutoff, newest_kept)
    out.coordination_cutoff_ms = cutoff
    if first is not None and first < cutoff:
        if dest is None and policy.without_sink != "trim":
            pass  # the policy keeps everything without a sink
        elif dest is not None and not take_lease():
            out.coordination_backlog = True
        else:
            _coordination(acmi, cutoff, dest, out)
    _hitl(acmi, policy, now_ms, scan, out)
    return out


def _coordination(acmi: Acmi, cutoff: int, dest: Destination | None, out: Retained) -> None:
    for _ in range(COORDINATION_PASSES):
        if dest is not None:
            done = archive_entity(
                acmi, COORDINATION, cutoff_ms=cutoff, limit=PASS_EVENTS, dest=dest
            )
            out.coordination_archived += done.archived
            out.coordination_trimmed += done.trimmed
            out.problems += done.problems
            more, moved = done.backlog, done.trimmed
        else:
            moved, more = _trim_below(acmi, cutoff)
            out.coordination_trimmed += moved
        if not more or not moved:
            out.coordination_backlog = more
            return
    out.coordination_backlog = True


def _trim_below(acmi: Acmi, cutoff: int) -> tuple[int, bool]:
    """No sink: the oldest ``PASS_EVENTS`` events below ``cutoff`` removed, each trim of
    exactly the members read, still at their scores. (removed, more left)."""
    timeline = acmi.keys.coordination_timeline()
    reply = acmi.store.execute(
        ("ZRANGE", timeline, "-inf", f"({cutoff}", "BYSCORE", "LIMIT", 0, PASS_EVENTS, "WITHSCORES")
    )
    items = reply if isinstance(reply, list) else []
    pairs = [
        (m, s)
        for m, s in zip(items[::2], items[1::2], strict=False)
        if isinstance(m, bytes) and isinstance(s, bytes)
    ]
    chunks: list[list[Arg]] = [[]]
    size = 0
    for member, score in pairs:
        if chunks[-1] and (size + len(member) > TRIM_BYTES or len(chunks[-1]) == 2 * TRIM_MEMBERS):
            chunks.append([])
            size = 0
        chunks[-1] += [member, score]
        size += len(member)
    removed, differ = 0, 0
    for chunk in chunks:
        if not chunk:
            continue
        result = run_script(
            acmi,
            # quarter '': no document is written, the archive key is only declared
            {"timeline": timeline, "archive": acmi.keys.slot(COORDINATION, MEMORY_ARCHIVE)},
            {
                "mode": "trim",
                "quarter": "",
                "doc": "",
                "member_count": len(chunk) // 2,
                "members": chunk,
            },
        )
        count = result["count"]
        if result["trimmed"] == 1 and isinstance(count, int):
            removed += count
        else:
            differ += 1  # changed since read: the next pass (or run) reads again
    return removed, len(pairs) >= PASS_EVENTS or differ > 0


def _hitl(acmi: Acmi, policy: Policy, now_ms: int, scan: object, out: Retained) -> None:
    """Closed records resolved before the policy's days: deleted with their closed-queue
    member, a page of the HSCAN at a time (one WritePlan each, within the request limits).
    ``scan``: the first step's reply."""
    cutoff = now_ms - policy.hitl_closed_days * DAY_MS
    items = acmi.keys.hitl_items()
    reply = scan
    for step in range(HITL_STEPS):
        if step:
            reply = acmi.store.execute(("HSCAN", items, out.hitl_cursor, "COUNT", HITL_COUNT))
        if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[0], bytes)):
            out.problems.append(f"{items}: HSCAN gave no page ({str(reply)[:80]})")
            return
        out.hitl_cursor = reply[0].decode()
        page = reply[1] if isinstance(reply[1], list) else []
        plan, size = WritePlan(), 0
        for cid, record in zip(page[::2], page[1::2], strict=False):
            out.hitl_scanned += 1
            if not isinstance(cid, bytes) or not isinstance(record, bytes):
                continue
            found = _RECORD.match(record)
            if found is None or found[1] != b"closed" or int(found[3]) >= cutoff:
                continue  # open (never touched), unreadable (kept), or resolved recently
            queue = _closed_queue(acmi, found[2])
            try:
                name, member = cid.decode(), found[4].decode()
            except UnicodeDecodeError:  # not ACMI's (its ids and members are UTF-8): kept
                continue
            if queue is None:
                continue
            if size + len(record) > TRIM_BYTES and len(plan):
                plan.apply(acmi.store)
                plan, size = WritePlan(), 0
            plan.hdel(items, name)
            plan.zrem(queue, member)
            size += 2 * len(record)
            out.hitl_deleted += 1
        if len(plan):
            plan.apply(acmi.store)
        if out.hitl_cursor == "0":
            return


def _closed_queue(acmi: Acmi, addressee: bytes) -> str | None:
    if addressee == b"null":
        return acmi.keys.hitl_queue(None, "closed")
    try:
        return acmi.keys.hitl_queue(EntityId.parse(json.loads(addressee)), "closed")
    except (AcmiValidationError, ValueError):
        return None


__all__ = ["Policy", "Retained", "retain"]

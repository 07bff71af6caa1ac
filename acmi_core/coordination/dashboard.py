"""The fleet dashboard's read (``acmi.dashboard``): what the page shows, in two round trips.

    view = acmi.dashboard.read()   # agents, locks, HITL, work, workflows, lessons, events

One call reads the tenant's indexes, never a scan of the keyspace:

1. one pipeline: the activity index (the agents by last heartbeat, newest first), the
   lease index (every held lease), the shared and the operator's open HITL queues (most
   urgent first), the ``work`` and ``workflow`` category indexes (one SSCAN step each),
   the lessons feed and the coordination thread's newest events;
2. one pipeline: each agent's and work item's signals (status, note), each work item's
   owner, and each workflow's newest events (assessments and lessons among them).

Every part is capped by a count and the timelines and queues by bytes too (page.lua
stops at its byte cap inside Redis; a signals document is read with GETRANGE to
``SIGNALS_BYTES``), so the answer stays far under Lambda's 6 MB response and no command
reads more than its cap: ``LIMITS`` is the table, echoed in the answer. What a cap cut
is said in ``truncated``; a stored value another tool wrote that cannot be read is named
in ``problems``, never raised. Liveness is computed from the heartbeat's age with the
sweep's threshold (48 h, ``STALLED``), as well as the status the sweep or the agent
stored, so an agent shows as stalled before the next sweep run.

Read-only: a read key may call it. Per tenant: every key is the caller's tenant's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError, CorruptData, StoreCommandError
from acmi_core.base.model import EntityId
from acmi_core.base.stored import Unreadable, load_stored, scored
from acmi_core.coordination.locks import parse_lease_entry
from acmi_core.coordination.results import (
    DashboardAgent,
    DashboardBody,
    DashboardHitl,
    DashboardLock,
    DashboardWork,
    DashboardWorkflow,
)
from acmi_core.coordination.work import is_open
from acmi_core.entities.api import newest_command, newest_members
from acmi_core.store import scripts
from acmi_core.store.base import Command, Reply, Store, is_noscript

if TYPE_CHECKING:
    from acmi_core.entities.context import Context

# The sweep's threshold (acmi_core.jobs.sweep STALL_AFTER_MS; jobs sit above this layer,
# so the number is repeated and a test holds the two equal).
STALL_AFTER_MS: Final = 48 * 3600 * 1000
STALLED: Final = "STALLED"

MAX_AGENTS: Final = 50
MAX_LOCKS: Final = 100
MAX_HITL: Final = 50  # per queue: the shared one and the operator's
MAX_WORK: Final = 50
MAX_WORKFLOWS: Final = 10
WORKFLOW_EVENTS: Final = 100  # each workflow's newest events, scored per step
MAX_LESSONS: Final = 10
DEFAULT_EVENTS: Final = 25
MAX_EVENTS: Final = 100
SIGNALS_BYTES: Final = 16 * 1024  # a heartbeat's signals are far smaller
HITL_BYTES: Final = 256 * 1024  # per queue
WORKFLOW_BYTES: Final = 128 * 1024  # per workflow
LESSONS_BYTES: Final = 64 * 1024
EVENTS_BYTES: Final = 256 * 1024
# An SSCAN step's COUNT is a hint: a small set (a listpack of <= 128 members, an intset of
# <= 512 integer ids) answers whole, a large one about COUNT members; the ids past the cap
# are left out and said so.
SCAN_COUNT: Final = 64

LIMITS: Final[dict[str, int]] = {
    "agents": MAX_AGENTS,
    "locks": MAX_LOCKS,
    "hitl_per_queue": MAX_HITL,
    "work": MAX_WORK,
    "workflows": MAX_WORKFLOWS,
    "workflow_events": WORKFLOW_EVENTS,
    "lessons": MAX_LESSONS,
    "events": MAX_EVENTS,
    "signals_bytes": SIGNALS_BYTES,
    "hitl_bytes": HITL_BYTES,
    "workflow_bytes": WORKFLOW_BYTES,
    "lessons_bytes": LESSONS_BYTES,
    "events_bytes": EVENTS_BYTES,
    "stall_after_ms": STALL_AFTER_MS,
}


def _soonest_command(key: str, count: int, max_bytes: int) -> Command:
    """page.lua reading a ZSET oldest score first (a queue: soonest deadline first)."""
    packed_keys, packed_args = scripts.PAGE.pack(
        {"timeline": key},
        {
            "score": "-inf",
            "offset": 0,
            "count": count,
            "bound": "",
            "reverse": "0",
            "max_bytes": max_bytes,
            "lead": 0,
        },
    )
    return ("EVALSHA", scripts.PAGE.script.sha, len(packed_keys), *packed_keys, *packed_args)


def _loaded(store: Store, reply: Reply | StoreCommandError, command: Command) -> Reply:
    """A page.lua reply; a server that has not loaded the script answers NOSCRIPT, and the
    command goes once more whole (EVAL loads it)."""
    if isinstance(reply, StoreCommandError) and is_noscript(reply):
        reply = store.execute(("EVAL", scripts.PAGE.script.source, *command[2:]))
    if isinstance(reply, StoreCommandError):
        raise reply
    return reply


def _text(value: Reply | StoreCommandError) -> str | None:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else None


def _json(member: Reply) -> dict[str, Any] | None:
    if not isinstance(member, bytes):
        return None
    try:
        value = load_stored(member)
    except Unreadable:
        return None
    return value if isinstance(value, dict) else None


def _scan_ids(reply: Reply | StoreCommandError) -> list[str]:
    if isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], list):
        return sorted({m.decode("utf-8", "replace") for m in reply[1] if isinstance(m, bytes)})
    return []


@dataclass
class _Notes:
    """What a read could not show: the parts a cap cut, the values it could not read."""

    truncated: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def cut(self, part: str, cut: bool) -> None:
        if cut and part not in self.truncated:
            self.truncated.append(part)


class DashboardAPI:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._keys = ctx.keys

    def _signals(self, reply: Reply | StoreCommandError, key: str, notes: _Notes) -> dict[str, Any]:
        problems = notes.problems
        if reply is None or reply == b"":
            return {}
        if isinstance(reply, StoreCommandError):
            problems.append(f"{key}: {reply}")
            return {}
        if not isinstance(reply, bytes):
            problems.append(f"{key} does not hold a string")
            return {}
        if len(reply) >= SIGNALS_BYTES:
            problems.append(f"{key}: over {SIGNALS_BYTES} bytes, not shown")
            return {}
        try:
            value = load_stored(reply)
        except Unreadable as exc:
            problems.append(f"{key}: {exc.reason}")
            return {}
        if not isinstance(value, dict):
            problems.append(f"{key} holds JSON that is not an object")
            return {}
        return value

    def _members(
        self,
        reply: Reply | StoreCommandError,
        command: Command,
        key: str,
        part: str,
        notes: _Notes,
    ) -> list[Reply]:
        """The members of a page.lua read in the order it read them."""
        try:
            page = scripts.PAGE.decode(_loaded(self._ctx.store, reply, command))
        except StoreCommandError as exc:
            notes.problems.append(f"{key}: {exc}")
            return []
        notes.cut(part, page["more"] == 1)
        window = page["window"]
        return window[::2] if isinstance(window, list) else []

    def read(self, events: int = DEFAULT_EVENTS) -> DashboardBody:
        """Everything the fleet dashboard shows (module docstring), with the newest
        ``events`` (1-100) coordination events: two round trips."""
        if isinstance(events, bool) or not isinstance(events, int) or not 1 <= events <= MAX_EVENTS:
            raise AcmiValidationError(
                "events", "range", f"must be an integer from 1 to {MAX_EVENTS}"
            )
        keys, now = self._keys, self._ctx.clock()
        operator = EntityId.parse(self._ctx.settings.operator, "operator")
        queues = ((keys.hitl_queue(None, "open"), "shared"),
                  (keys.hitl_queue(operator, "open"), str(operator)))  # fmt: skip
        thread, lessons_key = keys.coordination_timeline(), keys.lessons()
        first: list[Command] = [
            ("ZRANGE", keys.activity(), 0, MAX_AGENTS, "REV", "WITHSCORES"),
            ("ZRANGEBYLEX", keys.leases(), "-", "+", "LIMIT", 0, MAX_LOCKS + 1),
            *(_soonest_command(key, MAX_HITL + 1, HITL_BYTES) for key, _ in queues),
            ("SSCAN", keys.index("work"), 0, "COUNT", SCAN_COUNT),
            ("SSCAN", keys.index("workflow"), 0, "COUNT", SCAN_COUNT),
            newest_command(lessons_key, MAX_LESSONS, max_bytes=LESSONS_BYTES),
            newest_command(thread, events, max_bytes=EVENTS_BYTES),
        ]
        replies = self._ctx.store.pipeline(first)
        notes = _Notes()
        beats = scored(replies[0])
        notes.cut("agents", len(beats) > MAX_AGENTS)
        # ids another tool wrote into an index that name no entity are named, not read
        beats = [(a, b) for a, b in beats[:MAX_AGENTS] if self._entity(a, "agent", notes)]
        locks = self._locks(replies[1], now, notes)
        hitl: list[DashboardHitl] = []
        for (key, queue), reply, command in zip(queues, replies[2:4], first[2:4], strict=True):
            members = self._members(reply, command, key, "hitl", notes)
            notes.cut("hitl", len(members) > MAX_HITL)
            readable = [m for m in members[:MAX_HITL] if _json(m)]
            if len(readable) < len(members[:MAX_HITL]):
                notes.problems.append(f"{key}: members that are not JSON objects, not shown")
            hitl.extend(self._hitl(m, queue) for m in readable)
        work_ids = self._ids(replies[4], "work", MAX_WORK, notes)
        workflow_ids = self._ids(replies[5], "workflow", MAX_WORKFLOWS, notes)
        lessons = self._events(replies[6], lessons_key, (MAX_LESSONS, LESSONS_BYTES), notes)
        notes.cut("lessons", lessons[1])
        newest = self._events(replies[7], thread, (events, EVENTS_BYTES), notes)
        notes.cut("events", newest[1])

        second: list[Command] = [
            ("GETRANGE", self._signals_key(agent), 0, SIGNALS_BYTES - 1) for agent, _ in beats
        ]
        for work_id in work_ids:
            second.append(("GETRANGE", self._signals_key(f"work:{work_id}"), 0, SIGNALS_BYTES - 1))
            second.append(("HGET", keys.work_owners(), work_id))
        second.extend(
            newest_command(self._timeline_key(wf), WORKFLOW_EVENTS, max_bytes=WORKFLOW_BYTES)
            for wf in workflow_ids
        )
        more = self._ctx.store.pipeline(second) if second else []
        agents = self._agents(beats, more[: len(beats)], now, notes)
        work = self._work(work_ids, more[len(beats) : len(beats) + 2 * len(work_ids)], notes)
        workflows = self._workflows(workflow_ids, more[len(beats) + 2 * len(work_ids) :], notes)
        return {
            "tenant": keys.tenant,
            "now": now,
            "agents": agents,
            "locks": locks,
            "hitl": hitl,
            "work": work,
            "workflows": workflows,
            "lessons": lessons[0],
            "events": newest[0],
            "truncated": notes.truncated,
            "problems": notes.problems,
            "limits": dict(LIMITS),
        }

    @staticmethod
    def _locks(reply: Reply | StoreCommandError, now: int, notes: _Notes) -> list[DashboardLock]:
        """The held leases, soonest expiry first (an expired one is no longer held)."""
        members = reply if isinstance(reply, list) else []
        notes.cut("locks", len(members) > MAX_LOCKS)
        leases = [lease for lease in map(parse_lease_entry, members[:MAX_LOCKS]) if lease]
        return [
            {
                "resource": lease.resource,
                "owner": lease.owner,
                "fence": lease.fence,
                "expires_at": lease.expires_at,
                "expires_in_ms": lease.expires_at - now,
            }
            for lease in sorted(leases, key=lambda lease: lease.expires_at)
            if lease.expires_at > now
        ]

    def _ids(
        self, reply: Reply | StoreCommandError, category: str, cap: int, notes: _Notes
    ) -> list[str]:
        """One SSCAN step of a category index: its ids, sorted, at most ``cap``."""
        ids = _scan_ids(reply)
        notes.cut("work" if category == "work" else "workflows", len(ids) > cap or _more(reply))
        return [i for i in ids[:cap] if self._entity(f"{category}:{i}", category, notes)]

    def _agents(
        self,
        beats: list[tuple[str, int]],
        replies: Sequence[Reply | StoreCommandError],
        now: int,
        notes: _Notes,
    ) -> list[DashboardAgent]:
        agents: list[DashboardAgent] = []
        for (agent, beat), reply in zip(beats, replies, strict=True):
            signals = self._signals(reply, self._signals_key(agent), notes)
            stored = signals.get("status")
            age = now - beat
            agents.append(
                {
                    "agent": agent,
                    "last_heartbeat_ts": beat,
                    "age_ms": age,
                    "status": stored if isinstance(stored, str) else None,
                    "status_note": _str_or_none(signals.get("status_note")),
                    "stalled": stored == STALLED or age > STALL_AFTER_MS,
                }
            )
        return agents

    def _work(
        self, ids: list[str], replies: Sequence[Reply | StoreCommandError], notes: _Notes
    ) -> list[DashboardWork]:
        """By owner (the unowned last), then status, then id."""
        work: list[DashboardWork] = []
        for j, work_id in enumerate(ids):
            signals = self._signals(replies[2 * j], self._signals_key(f"work:{work_id}"), notes)
            status = signals.get("status")
            work.append(
                {
                    "id": work_id,
                    "owner": _text(replies[2 * j + 1]),
                    "status": status if isinstance(status, str) else None,
                    "open": is_open(status),
                }
            )
        work.sort(key=lambda item: (item["owner"] or "\uffff", item["status"] or "", item["id"]))
        return work

    def _workflows(
        self, ids: list[str], replies: Sequence[Reply | StoreCommandError], notes: _Notes
    ) -> list[DashboardWorkflow]:
        workflows: list[DashboardWorkflow] = []
        for wf, reply in zip(ids, replies, strict=True):
            timeline = self._timeline_key(wf)
            try:
                members, cursor = newest_members(
                    self._ctx.store, reply, timeline, WORKFLOW_EVENTS, max_bytes=WORKFLOW_BYTES
                )
            except CorruptData as exc:
                notes.problems.append(exc.message)
                members, cursor = [], None
            workflows.append(_scores(f"workflow:{wf}", members, complete=cursor is None))
        return workflows

    def _signals_key(self, entity: str) -> str:
        return self._keys.signals(EntityId.parse(entity, "entity"))

    def _timeline_key(self, workflow: str) -> str:
        return self._keys.timeline(EntityId.parse(f"workflow:{workflow}", "workflow"))

    @staticmethod
    def _entity(raw: str, index: str, notes: _Notes) -> EntityId | None:
        try:
            return EntityId.parse(raw, index)
        except AcmiValidationError:
            notes.problems.append(f"{index} index: a member that is no entity id, not shown")
            return None

    def _events(
        self,
        reply: Reply | StoreCommandError,
        key: str,
        caps: tuple[int, int],
        notes: _Notes,
    ) -> tuple[list[dict[str, Any]], bool]:
        """Newest first, each event as stored (the members that are not a JSON object
        left out and counted in ``problems``), and whether the byte cap cut the read."""
        count, max_bytes = caps
        try:
            members, cursor = newest_members(
                self._ctx.store, reply, key, count, max_bytes=max_bytes
            )
        except CorruptData as exc:
            notes.problems.append(exc.message)
            return [], False
        found = [_json(m) for m in reversed(members)]
        unreadable = sum(1 for doc in found if doc is None)
        if unreadable:
            notes.problems.append(f"{key}: {unreadable} members are not JSON objects, not shown")
        return [doc for doc in found if doc is not None], cursor is not None

    @staticmethod
    def _hitl(member: Reply, queue: str) -> DashboardHitl:
        event = _json(member) or {}
        payload = event.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        deadline = payload.get("deadline")
        return {
            "correlationId": _str_or_none(event.get("correlationId")),
            "queue": queue,
            "topic": _str_or_none(payload.get("topic")),
            "request": _str_or_none(payload.get("concrete_unblock_request")),
            "urgency": _str_or_none(payload.get("urgency")),
            "deadline": deadline if isinstance(deadline, int) else None,
            "asked_by": _str_or_none(event.get("source")),
            "addressee": _str_or_none(payload.get("addressee")),
            "summary": _str_or_none(event.get("summary")),
        }


def _more(reply: Reply | StoreCommandError) -> bool:
    """An SSCAN step that did not finish the set (cursor not 0)."""
    return isinstance(reply, list) and bool(reply) and reply[0] not in (b"0", 0)


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _scores(workflow: str, members: Sequence[Reply], *, complete: bool) -> DashboardWorkflow:
    """Per step: the count, the mean and the newest of the assessment scores among the
    workflow's newest events (``members``, oldest first), and its lessons' count."""
    steps: dict[str, dict[str, Any]] = {}
    improvements = 0
    for member in reversed(members):  # newest first: the first score seen is the last given
        event = _json(member)
        if event is None:
            continue
        payload = event.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        step = payload.get("step")
        if event.get("kind") == "improvement":
            improvements += 1
        score = payload.get("score")
        if (
            event.get("kind") != "assessment"
            or not isinstance(step, str)
            or isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            continue
        entry = steps.setdefault(step, {"count": 0, "total": 0.0, "last": None})
        entry["count"] += 1
        entry["total"] += score
        if entry["last"] is None:
            entry["last"] = score
    return {
        "workflow": workflow,
        "steps": {
            name: {
                "count": entry["count"],
                "mean": round(entry["total"] / entry["count"], 2),
                "last": entry["last"],
            }
            for name, entry in sorted(steps.items())
        },
        "lessons": improvements,
        "examined": len(members),
        "complete": complete,
    }


__all__ = ["LIMITS", "STALL_AFTER_MS", "DashboardAPI"]

"""Work items: cross-session projects, ideas and tasks (``acmi.work``).

One module: the work-item API and the indexes it keeps (the index contract below) change
together: every write that moves a status or an owner updates the indexes in the same
WritePlan, so the contract sits beside the only code that keeps it.

    acmi.work.create("acmi-launch", {"title": "ACMI public launch"}, owner="bentley")
    acmi.work.event("acmi-launch", {"source": "agent:bentley", "kind": "progress",
                    "correlationId": "c-1", "summary": "drafted the post"},
                    session_id="sess-42")
    acmi.work.signal("acmi-launch", {"status": "done"})
    item = acmi.work.get("acmi-launch")          # profile, signals, events, sessions

A work item is the entity ``work:<id>`` (reference layout, wire-compatible with the
TypeScript CLI's ``acmi work ...``)::

    acmi:work:<id>:profile     STRING JSON, e.g. {"title": "...", "owner": "bentley"}
    acmi:work:<id>:signals     STRING JSON, {"status": "open", ...}
    acmi:work:<id>:timeline    ZSET of Comms v1.1 events (``session_id`` on each)
    acmi:work:<id>:sessions    SET of session ids
    acmi:work:list             SET of ids
    (other tenants under acmi:tenant:<t>:)

so ``acmi.profile`` / ``signals`` / ``timeline`` / ``get`` work on ``work:<id>`` too; but
change status and owner through ``acmi.work`` (and delete through ``acmi.work.delete``),
which keep the indexes below exact.

Index contract (the bootstrap bundle reads these directly; do not change their shape):

- ``keys.work_owners()``: HASH work id -> owner entity id (``agent:bentley``), for every
  item that has an owner.
- ``keys.work_open(owner)``: ZSET work id -> last update (ms, the client's clock),
  holding exactly the open items ``owner`` owns. Open: ``signals.status`` is not one of
  ``CLOSED_STATUSES`` (compared lowercased; no status is open). Kept by create, event
  (bumps the score of an open item), signal (a status change adds or removes it; other
  signals bump it), assign (moves it) and delete, each in the same atomic step as the
  write itself.

Owners: any entity id; a bare name (the reference writes ``"owner": "bentley"``) means
``agent:<name>``. The profile keeps the owner as given; the indexes hold the entity id.

Choices:

- ``create`` on an id that exists (its profile or signals key exists) is a 409
  Conflict naming the id, where the reference silently overwrites: an overwrite resets
  the status and drops the profile another agent wrote, and two sessions creating the
  same item would both "succeed" with one losing. Update with ``signal`` / ``assign`` /
  ``acmi.profile.merge``, or ``delete`` first.
- ``get``, ``event``, ``signal``, ``assign`` on an item that does not exist raise
  NotFound (HTTP 404) naming the id: a typo'd id must not silently start a new,
  unlisted item. (``delete`` of a missing item is a no-op.)

Round trips (reference CLI in brackets): create 1 [2], get 1 [4], event 1 [2], signal 1,
assign 1, delete 1, one page of ``list``/``sessions`` 1, except ``list`` of open items
with no owner: 2 per page (the page of ids, then their statuses). Every write is one run
of ``store/lua/work.lua`` + ``store/lua/apply.lua`` as one script: atomic, all-or-nothing.

Limits: id = an entity local id ``[A-Za-z0-9_.-]+``, ``work:<id>`` at most 256
characters (``work:<id>`` is accepted for ``<id>``); session id 1-256 characters;
status 1-64 characters; profile and signals as for ``acmi.profile`` / ``acmi.signals``
(JSON objects of at most 64 KiB, signal keys 1-128 characters); events as Comms v1.1
(``parse_event``); ``get`` returns at most ``MAX_GET_SESSIONS`` sessions (all of them
through ``sessions``); a page holds 1-1,000 ids.

One module: it is one coordination protocol (ARCHITECTURE.md: a protocol, its module), and
its index contract is its core: the writes that keep ``work_owners`` and ``work_open``
exact (one ``store/lua/work.lua`` run each) and the pages that read them are held to the same
rules (``is_open``, the owner's entity id), so splitting writes from reads would put the
two halves of that contract in different places.

A lost reply does not turn a write into a Conflict: every plan of one write starts with
the same RECORD op (a request id drawn once per call), so the transport's retry answers
with the first run's results (``scripts.REPLAY_TTL_MS``).

Known gap: items the reference wrote (no entry in the owners HASH) are listed by
``list()`` without an owner, but are in no owner's open index until ``assign`` names
their owner: ``acmi doctor`` reports each one whose profile names an owner
(``work_unowned``) and ``acmi migrate`` assigns it to that owner.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import (
    AcmiValidationError,
    Conflict,
    CorruptData,
    NotFound,
    StoreCommandError,
    StoreError,
)
from acmi_core.base.keys import SESSIONS
from acmi_core.base.model import (
    EVENT_FIELD_ORDER,
    MAX_ENTITY_LEN,
    EntityId,
    Event,
    check_json_object,
    check_profile,
    check_signal_key,
    dumps,
    parse_event,
    profile_defaults,
)
from acmi_core.base.pages import DEFAULT_PAGE_SIZE, decode_cursor, encode_cursor, page_size
from acmi_core.base.stored import StoredObject, Unreadable, decode_event, load_stored
from acmi_core.coordination.results import (
    LegacyRow,
    SessionPageBody,
    SkippedMember,
    WorkItemBody,
    WorkPageBody,
    WorkRefBody,
)
from acmi_core.entities.api import EntityAPI, newest_command, newest_members
from acmi_core.store import scripts
from acmi_core.store.base import Arg, Command, Reply
from acmi_core.store.writes import WritePlan, script_error

if TYPE_CHECKING:
    from acmi_core.entities.context import Context

CATEGORY: Final = "work"
CLOSED_STATUSES: Final = frozenset(
    {"done", "closed", "cancelled", "canceled", "archived", "resolved"}
)
MAX_SESSION_ID_LEN: Final = 256
MAX_STATUS_LEN: Final = 64
MAX_GET_SESSIONS: Final = 100
MAX_ID_LEN: Final = MAX_ENTITY_LEN - len(CATEGORY) - 1

# One script: the prologue picks a plan, apply.lua (unchanged) checks and writes it.
WORK: Final = scripts.WORK.script

# Stands for the open index of the item's current owner, which only the script knows
# (it reads the owners HASH); work.lua appends the real key in its place.
_CURRENT_OWNER_INDEX: Final = "acmi:_work-open:\x00current-owner"


# --- rules ----------------------------------------------------------------------------------


def work_entity(raw: object, field: str = "id") -> EntityId:
    """``<id>`` or ``work:<id>`` as the entity ``work:<id>``."""
    if isinstance(raw, str) and ":" not in raw:
        raw = f"{CATEGORY}:{raw}"
    eid = EntityId.parse(raw, field)
    if eid.category != CATEGORY:
        raise AcmiValidationError(field, "category", "must be a work id (or work:<id>)")
    return eid


def owner_entity(raw: object, field: str = "owner") -> EntityId:
    """An owner as an entity id: a bare name means ``agent:<name>`` (the reference's
    ``"owner": "bentley"``)."""
    if isinstance(raw, str) and ":" not in raw:
        raw = f"agent:{raw}"
    return EntityId.parse(raw, field)


def check_status(value: object, field: str = "status") -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_STATUS_LEN:
        raise AcmiValidationError(
            field, "status", f"must be a string of 1-{MAX_STATUS_LEN} characters"
        )
    return value


def check_session_id(value: object, field: str = "session_id") -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_SESSION_ID_LEN:
        raise AcmiValidationError(
            field, "string", f"must be a string of 1-{MAX_SESSION_ID_LEN} characters"
        )
    return value


def is_open(status: object) -> bool:
    """Open unless the status is a closed one (lowercased); no status, or a status that is
    not a string (another tool wrote it), is open. ``store/lua/work.lua`` mirrors this."""
    return not (isinstance(status, str) and status.lower() in CLOSED_STATUSES)


# --- results --------------------------------------------------------------------------------


def _timeline_rows(
    members: list[Reply], key: str
) -> tuple[list[dict[str, Any]], list[LegacyRow], list[SkippedMember]]:
    """A work item's events as stored (known fields first), the legacy ones by index,
    and the members that could not be read, by position."""
    timeline: list[dict[str, Any]] = []
    legacy: list[LegacyRow] = []
    skipped: list[SkippedMember] = []
    for position, member in enumerate(members):
        decoded = decode_event(member)
        if isinstance(decoded, str):
            skipped.append({"key": key, "position": position, "reason": decoded})
            continue
        event, data = decoded
        if event.legacy:
            legacy.append({"index": len(timeline), "reasons": list(event.legacy)})
        ordered: dict[str, Any] = {n: data[n] for n in EVENT_FIELD_ORDER if n in data}
        ordered.update(data)  # unknown fields keep their order, after the known ones
        timeline.append(ordered)
    return timeline, legacy, skipped


@dataclass(frozen=True)
class WorkItem:
    """One work item, as ``get`` read it (one round trip) or ``create`` stored it.

    ``timeline``: the newest events, oldest first, each as stored; ``legacy`` flags those
    another tool wrote without following every rule, by index; ``skipped``: members that
    could not be read. ``owner``: the indexed owner, else the profile's (as an entity id).
    ``sessions``: sorted, at most ``MAX_GET_SESSIONS`` of ``sessions_total``."""

    id: str
    entity: str
    profile: dict[str, Any] | None
    signals: dict[str, Any]
    owner: str | None
    status: Any
    open: bool
    timeline: list[dict[str, Any]] = field(default_factory=list)
    legacy: list[LegacyRow] = field(default_factory=list)
    skipped: list[SkippedMember] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    sessions_total: int = 0
    problems: list[str] = field(default_factory=list)
    # the page byte cap stopped the events: GET .../timeline?reverse=true&cursor= goes on
    next_cursor: str | None = None

    def to_dict(self) -> WorkItemBody:
        # Not asdict: it copies every nested value recursively, and a stored value another
        # tool nested ~500 deep (reads take 512) would pass Python's recursion limit.
        body: WorkItemBody = {
            "id": self.id,
            "entity": self.entity,
            "profile": copy.copy(self.profile),
            "signals": copy.copy(self.signals),
            "owner": self.owner,
            "status": copy.copy(self.status),
            "open": self.open,
            "timeline": copy.copy(self.timeline),
            "legacy": copy.copy(self.legacy),
            "skipped": copy.copy(self.skipped),
            "sessions": copy.copy(self.sessions),
            "sessions_total": self.sessions_total,
            "problems": copy.copy(self.problems),
        }
        if self.next_cursor is not None:  # a key only when the cap cut the events
            body["next_cursor"] = self.next_cursor
        return body


@dataclass(frozen=True)
class WorkRef:
    """An item in a ``list`` page: ``updated_at`` (ms) from an owner's open index,
    ``status`` when the page was filtered by it, ``owner`` when listed by owner."""

    id: str
    updated_at: int | float | None = None
    status: Any = None
    owner: str | None = None

    def to_dict(self) -> WorkRefBody:
        body: WorkRefBody = {"id": self.id}
        if self.updated_at is not None:
            body["updated_at"] = self.updated_at
        if self.status is not None:
            body["status"] = copy.deepcopy(self.status)  # asdict's copy, as before
        if self.owner is not None:
            body["owner"] = self.owner
        return body


@dataclass(frozen=True)
class WorkPage:
    items: list[WorkRef]
    next_cursor: str | None

    def to_dict(self) -> WorkPageBody:
        return {"items": [i.to_dict() for i in self.items], "next_cursor": self.next_cursor}


@dataclass(frozen=True)
class SessionPage:
    sessions: list[str]
    next_cursor: str | None

    def to_dict(self) -> SessionPageBody:
        return {"sessions": list(self.sessions), "next_cursor": self.next_cursor}


# --- the API --------------------------------------------------------------------------------


def _text(reply: Reply | StoreCommandError) -> str | None:
    return reply.decode("utf-8", "replace") if isinstance(reply, bytes) else None


def _stored_object(
    reply: Reply | StoreCommandError, key: str
) -> tuple[dict[str, Any] | None, str | None]:
    """A stored JSON object (profile, signals), tolerantly: (value, None), or (None, the
    problem) for what cannot be served; (None, None) when absent or JSON null."""
    if reply is None:
        return None, None
    if isinstance(reply, StoreCommandError):
        return None, f"{key}: {reply}"
    if not isinstance(reply, bytes):
        return None, f"{key} does not hold a string"
    try:
        value = load_stored(reply)
    except Unreadable as exc:
        return None, f"{key}: {exc.reason}"
    if value is None or isinstance(value, dict):
        return value, None
    return None, f"{key} holds JSON that is not an object"


def _pack(plans: list[WritePlan]) -> tuple[list[str], list[Arg]]:
    """The plans as work.lua takes them: one key list of which every plan's keys are a
    prefix (the current owner's index, when a plan uses it, last and left out), and
    ``[n, count_1, args_1..., count_2, args_2...]``."""
    declared: list[list[str]] = []
    for plan in plans:
        keys = list(plan.keys)  # WritePlan's own key order: what its ops index
        if _CURRENT_OWNER_INDEX in keys[:-1]:
            raise AssertionError("the current owner's index must be a plan's last key")
        declared.append(keys[:-1] if keys and keys[-1] == _CURRENT_OWNER_INDEX else keys)
    union = max(declared, key=len)
    args: list[Arg] = [len(plans)]
    for plan, keys in zip(plans, declared, strict=True):
        if union[: len(keys)] != keys or (
            _CURRENT_OWNER_INDEX in plan.keys and len(keys) != len(union)
        ):
            raise AssertionError("work plans must share one key order")
        plan_args: list[Arg] = [len(plan), *plan.args]
        args += [len(plan_args), *plan_args]
    return union, args


# a run that failed ACMI_WORK_OWNER names the owner it read; a second such failure means
# the item changed hands in between (a third: it keeps changing)
_OWNER_TRIES: Final = 3
_OWNERS_KEPT: Final = 1024  # the owners this process saw, newest last (a bounded hint)


class WorkAPI:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._keys = ctx.keys
        self._entities = EntityAPI(ctx)
        self._owners: dict[str, str] = {}

    def _saw(self, work_id: str, owner: str | None) -> None:
        """Remember the item's owner ("" for none): the guess of this process's next
        write of it (the script checks it)."""
        self._owners.pop(work_id, None)
        self._owners[work_id] = owner or ""
        while len(self._owners) > _OWNERS_KEPT:
            del self._owners[next(iter(self._owners))]

    # writes --------------------------------------------------------------------------

    def _run(self, op: str, eid: EntityId, mode: str, plans: list[WritePlan]) -> list[Reply]:
        """One run of work.lua (its prologue picks a plan, apply.lua writes it).

        The script names every key before it runs, the current owner's open index too:
        the client sends the index of the owner it expects (the one this process last
        saw for the item; none at first), and a run that finds another owner fails
        ACMI_WORK_OWNER with it, nothing written, and is sent again with that owner's
        index. So a write of an item whose owner this process has not seen costs a
        second round trip."""
        keys = self._keys
        plan_keys, plan_args = _pack(plans)
        replay = plan_keys[0]  # every plan records at it (its RECORD op, the first)
        if any(plan.keys[:1] != (replay,) for plan in plans):
            raise AssertionError("every work plan starts with the request's RECORD op")
        expected = self._owners.get(eid.local_id, "")
        for _ in range(_OWNER_TRIES):
            try:
                reply = scripts.WORK.eval(
                    self._ctx.store,
                    {
                        "profile": keys.profile(eid),
                        "signals": keys.signals(eid),
                        "owners": keys.work_owners(),
                        "owner_open": keys.internal("work-open", expected),
                        "replay": replay,
                        "plan_keys": plan_keys[1:],
                    },
                    {
                        "op": op,
                        "work_id": eid.local_id,
                        "owner": expected,
                        "mode": mode,
                        "plan_count": plan_args[0],
                        "plans": plan_args[1:],
                    },
                    script=WORK,
                )
                break
            except StoreCommandError as exc:
                message = str(exc)
                if message.startswith("ACMI_WORK_OWNER "):
                    expected = message.removeprefix("ACMI_WORK_OWNER ").strip()
                    continue
                if "ACMI_WORK_EXISTS" in message:
                    raise Conflict(
                        f"id: work item {eid.local_id} already exists; change it with "
                        "signal/assign or a profile merge, or delete it first",
                        field="id",
                        rule="unique",
                    ) from None
                if "ACMI_WORK_MISSING" in message:
                    raise self._missing(eid) from None
                error = script_error(exc)
                if error is exc:
                    raise
                raise error from None
        else:
            raise StoreError(f"work.lua: the owner of work:{eid.local_id} kept changing")
        self._saw(eid.local_id, expected)
        results = reply["results"]  # apply.lua's (no plan of a work write has a ONCE op)
        assert isinstance(results, list)
        return results

    def _request(self) -> str:
        """The record of one work write (its plans' RECORD op): a retry of it, the
        transport's after a lost reply, answers with its first run's results."""
        return self._keys.request(scripts.new_request_id())

    @staticmethod
    def _missing(eid: EntityId) -> NotFound:
        return NotFound(
            f"id: work item {eid.local_id} does not exist; create it first",
            field="id",
            rule="exists",
        )

    def create(
        self,
        id: str,
        profile: Mapping[str, Any],
        *,
        owner: str | None = None,
        status: str = "open",
    ) -> WorkItem:
        """Create the item: its profile (validated and auto-filled as ``acmi.profile``),
        ``signals.status``, its place in ``work:list`` and, with an owner (``owner`` or
        the profile's ``owner``), in the owners HASH and, if open, the owner's open index.
        ``owner`` is written into the profile when the profile has none. One round trip.
        Raises Conflict (409) when the item exists."""
        eid = work_entity(id)
        self._ctx.guard_id(eid.local_id, "id")
        if isinstance(profile, Mapping):  # an id: refused before redact could rewrite it
            self._ctx.guard_ids((profile.get("owner"), "profile.owner"))
        doc = dict(check_profile(self._ctx.guard(profile, "profile")))
        given = doc.get("owner")
        owner_id: EntityId | None = None
        if given is not None:
            owner_id = owner_entity(given, "profile.owner")
        if owner is not None:
            named = owner_entity(owner)
            if owner_id is not None and owner_id != named:
                raise AcmiValidationError(
                    "owner", "matches_profile", f"is {named}, but profile.owner is {owner_id}"
                )
            owner_id = named
            doc.setdefault("owner", owner)
        self._ctx.guard_ids((owner, "owner"))
        for name, value in profile_defaults(eid, self._keys.tenant).items():
            doc.setdefault(name, value)
        status = check_status(status)
        signals = {"status": status}
        profile_text = dumps(doc, "profile")
        now = self._ctx.clock()

        plan = WritePlan(record=self._request())
        plan.set(self._keys.profile(eid), profile_text)
        plan.set(self._keys.signals(eid), dumps(signals))
        plan.sadd(self._keys.index(CATEGORY), eid.local_id)
        if owner_id is not None:
            plan.hset(self._keys.work_owners(), eid.local_id, str(owner_id))
            if is_open(status):
                plan.zset(self._keys.work_open(owner_id), now, eid.local_id)
        self._run("create", eid, "", [plan])
        self._saw(eid.local_id, str(owner_id) if owner_id else None)
        return WorkItem(
            eid.local_id,
            str(eid),
            doc,
            signals,
            str(owner_id) if owner_id else None,
            status,
            is_open(status),
        )

    def event(
        self, id: str, event: Mapping[str, Any] | Event, session_id: str | None = None
    ) -> StoredObject:
        """Append a Comms v1.1 event to the item's timeline. With a session id (the
        argument, or the event's own ``session_id``, the reference field) the event
        carries ``session_id`` and the session joins the item's sessions, in the same
        atomic step. An open item's index score becomes now. One round trip. Returns
        the event as stored."""
        eid = work_entity(id)
        self._ctx.guard_ids((eid.local_id, "id"), (session_id, "session_id"))
        if isinstance(event, Event):
            data = event.to_dict()
        elif isinstance(event, Mapping):
            data = dict(event)
        else:
            raise AcmiValidationError("event", "object", "event must be a JSON object")
        data = self._ctx.guard(data, "event")
        stated = data.get("session_id")
        if session_id is not None:
            check_session_id(session_id)
            if stated is not None and stated != session_id:
                raise AcmiValidationError(
                    "event.session_id", "matches", "differs from the session_id given"
                )
            data["session_id"] = session_id
        elif stated is not None:
            session_id = check_session_id(stated, "event.session_id")
        now = self._ctx.clock()
        parsed = parse_event(data, now_ms=now, tenant=self._keys.tenant)
        member = parsed.to_json()
        replay = self._request()  # one request: every plan records at it

        def build(bump: bool) -> WritePlan:
            plan = WritePlan(record=replay)
            plan.zadd(self._keys.timeline(eid), parsed.ts, member)
            if session_id is not None:
                plan.sadd(self._keys.slot(eid, SESSIONS), session_id)
            plan.sadd(self._keys.index(CATEGORY), eid.local_id)
            plan.mark_changed(self._keys, now, str(eid))  # for scheduled jobs
            if bump:
                plan.zset(_CURRENT_OWNER_INDEX, now, eid.local_id)
            return plan

        self._run("event", eid, "", [build(False), build(True)])
        return parsed.to_dict()

    def signal(self, id: str, signals: Mapping[str, Any]) -> StoredObject:
        """Merge ``signals`` into the item's signals (other signals are kept), atomically.
        A ``status`` adds the item to its owner's open index or removes it (a closed
        status: ``CLOSED_STATUSES``); other signals bump an open item's score. One round
        trip. Returns the merged signals."""
        eid = work_entity(id)
        self._ctx.guard_id(eid.local_id, "id")
        values = check_json_object(self._ctx.guard(dict(signals), "signals"), "signals")
        fields: list[tuple[Any, str, str]] = [
            ("set", check_signal_key(k, f"signals.{k}"), dumps(v, f"signals.{k}"))
            for k, v in values.items()
        ]
        if not fields:
            raise AcmiValidationError("signals", "non_empty", "give at least one signal")
        mode = "bump"
        if "status" in values:
            mode = "open" if is_open(check_status(values["status"], "signals.status")) else "close"
        now = self._ctx.clock()
        replay = self._request()  # one request: every plan records at it

        def build(index: bool) -> WritePlan:
            plan = WritePlan(record=replay)
            plan.edit_object(self._keys.signals(eid), fields, field="signals")
            plan.sadd(self._keys.index(CATEGORY), eid.local_id)
            if index and mode == "close":
                plan.zrem(_CURRENT_OWNER_INDEX, eid.local_id)
            elif index:
                plan.zset(_CURRENT_OWNER_INDEX, now, eid.local_id)
            return plan

        reply = self._run("signal", eid, mode, [build(False), build(True)])
        # op 0 is the plan's RECORD, op 1 the signals edit
        merged = load_stored(reply[1]) if isinstance(reply[1], bytes) else None
        return merged if isinstance(merged, dict) else {}

    def assign(self, id: str, owner: str) -> str:
        """Make ``owner`` the item's owner: ``profile.owner`` (as given), the owners
        HASH, and the open indexes: out of the previous owner's, into the new owner's
        when ``signals.status`` is open, atomically. One round trip. Returns the owner's
        entity id."""
        eid = work_entity(id)
        new = owner_entity(owner)
        self._ctx.guard_ids((eid.local_id, "id"), (new, "owner"))
        now = self._ctx.clock()
        replay = self._request()  # one request: every plan records at it

        def build(open: bool, previous: bool) -> WritePlan:
            plan = WritePlan(record=replay)
            plan.edit_object(
                self._keys.profile(eid), [("set", "owner", dumps(owner))], field="profile"
            )
            plan.hset(self._keys.work_owners(), eid.local_id, str(new))
            plan.sadd(self._keys.index(CATEGORY), eid.local_id)
            if open:
                plan.zset(self._keys.work_open(new), now, eid.local_id)
            else:  # a no-op on an exact index; a repair of one written around us
                plan.zrem(self._keys.work_open(new), eid.local_id)
            if previous:
                plan.zrem(_CURRENT_OWNER_INDEX, eid.local_id)
            return plan

        plans = [build(open, previous) for open in (False, True) for previous in (False, True)]
        self._run("assign", eid, str(new), plans)
        self._saw(eid.local_id, str(new))
        return str(new)

    def delete(self, id: str) -> None:
        """Delete every key of the item and its index entries (``work:list``, the owners
        HASH, the owner's open index), atomically. Prefer it to ``acmi.delete``, which
        leaves the work indexes behind. A missing item is a no-op. One round trip."""
        eid = work_entity(id)
        replay = self._request()  # one request: every plan records at it

        def build(index: bool) -> WritePlan:
            plan = WritePlan(record=replay)
            for key in self._keys.all_slots(eid):
                plan.delete(key)
            plan.srem(self._keys.index(CATEGORY), eid.local_id)
            plan.hdel(self._keys.work_owners(), eid.local_id)
            if index:
                plan.zrem(_CURRENT_OWNER_INDEX, eid.local_id)
            return plan

        self._run("delete", eid, "", [build(False), build(True)])
        self._owners.pop(eid.local_id, None)

    # reads ---------------------------------------------------------------------------

    def get(self, id: str, events: int = 50) -> WorkItem:
        """Profile, signals, the newest ``events`` events (oldest first), the sessions
        and the owner: one round trip (the reference takes 4). Stored values another
        tool wrote are read tolerantly: an unreadable one is reported in ``problems`` or
        ``skipped``, never raised. NotFound (404) when the item has neither profile nor
        signals."""
        eid = work_entity(id)
        if isinstance(events, bool) or not isinstance(events, int) or not 0 <= events <= 1000:
            raise AcmiValidationError("events", "range", "must be an integer from 0 to 1000")
        keys = self._keys
        timeline_key, sessions_key = keys.timeline(eid), keys.slot(eid, SESSIONS)
        commands: list[Command] = [
            ("GET", keys.profile(eid)),
            ("GET", keys.signals(eid)),
            ("HGET", keys.work_owners(), eid.local_id),
            ("SCARD", sessions_key),
            ("SSCAN", sessions_key, 0, "COUNT", MAX_GET_SESSIONS),
        ]
        if events:  # newest first, stopping at the page byte cap (store/lua/page.lua)
            commands.append(newest_command(timeline_key, events))
        replies = self._ctx.store.pipeline(commands)
        if replies[0] is None and replies[1] is None:
            raise self._missing(eid)
        problems: list[str] = []

        def obj(reply: Reply | StoreCommandError, key: str) -> dict[str, Any] | None:
            value, problem = _stored_object(reply, key)
            if problem:
                problems.append(problem)
            return value

        profile = obj(replies[0], keys.profile(eid))
        signals = obj(replies[1], keys.signals(eid)) or {}
        owner = _text(replies[2])
        if owner is None and profile is not None:
            try:
                owner = str(owner_entity(profile.get("owner")))
            except AcmiValidationError:
                owner = None  # no owner, or one the reference wrote that is no entity id
        total = replies[3] if isinstance(replies[3], int) else 0
        if isinstance(replies[3], StoreCommandError):
            problems.append(f"{sessions_key}: {replies[3]}")
        sessions: list[str] = []
        scan = replies[4]
        if isinstance(scan, list) and len(scan) == 2 and isinstance(scan[1], list):
            sessions = sorted(m.decode("utf-8", "replace") for m in scan[1] if isinstance(m, bytes))
        sessions = sessions[:MAX_GET_SESSIONS]
        members: list[Reply] = []
        cursor: str | None = None
        if events:
            try:
                members, cursor = newest_members(self._ctx.store, replies[5], timeline_key, events)
            except CorruptData as exc:
                problems.append(exc.message)
        timeline, legacy, skipped = _timeline_rows(members, timeline_key)
        status = signals.get("status")
        return WorkItem(
            eid.local_id,
            str(eid),
            profile,
            signals,
            owner,
            status,
            is_open(status),
            timeline,
            legacy,
            skipped,
            sessions,
            total,
            problems,
            cursor,
        )

    def sessions_page(
        self, id: str, *, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> SessionPage:
        """One SSCAN step of the item's sessions (one round trip), sorted within the page;
        pass ``next_cursor`` back for the next. A session present for the whole walk is
        listed (more than once only if Redis resizes the set meanwhile)."""
        eid = work_entity(id)
        size = page_size(limit)
        scan = 0
        if cursor is not None:
            (scan,) = decode_cursor(cursor, "ws", 1)
            if isinstance(scan, bool) or not isinstance(scan, int) or not 0 <= scan < 2**64:
                raise AcmiValidationError("cursor", "cursor", "is not a cursor this API returned")
        key = self._keys.slot(eid, SESSIONS)
        try:
            reply = self._ctx.store.execute(("SSCAN", key, scan, "COUNT", size))
        except StoreCommandError as exc:
            from acmi_core.base.errors import CorruptData

            raise CorruptData(f"{key}: {exc}", field=key) from None
        next_scan, members = _scan(reply)
        sessions = sorted(m.decode("utf-8", "replace") for m in members if isinstance(m, bytes))
        return SessionPage(sessions, encode_cursor("ws", next_scan) if next_scan else None)

    def sessions(self, id: str) -> list[str]:
        """Every session id of the item, sorted (one round trip per 1,000)."""
        found: set[str] = set()
        cursor: str | None = None
        while True:
            page = self.sessions_page(id, cursor=cursor, limit=1000)
            found.update(page.sessions)
            if page.next_cursor is None:
                return sorted(found)
            cursor = page.next_cursor

    def ids(self, owner: str | None = None, status: str | None = "open") -> list[str]:
        """Every id ``list`` gives (walking its pages), in page order, without repeats."""
        seen: dict[str, None] = {}
        cursor: str | None = None
        while True:
            page = self.list(owner, status, cursor=cursor, limit=1000)
            seen.update(dict.fromkeys(i.id for i in page.items))
            if page.next_cursor is None:
                return list(seen)
            cursor = page.next_cursor

    def list(
        self,
        owner: str | None = None,
        status: str | None = "open",
        *,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> WorkPage:
        """One page of work items (at most ``limit``, 1-1,000):

        - ``owner`` and ``status="open"``: the owner's open index, most recently updated
          first, with ``updated_at``; one round trip. The cursor is a position: an item
          updated while you page moves to the front (seen twice or not at all).
        - ``owner`` and ``status=None``: every item the owners HASH gives that owner
          (HSCAN; a page may hold fewer than ``limit``); one round trip.
        - no owner, ``status=None``: ``work:list`` (SSCAN order); one round trip.
        - no owner, ``status="open"``: ``work:list`` filtered by ``signals.status``;
          two round trips (ids, then their signals).
        """
        if status not in ("open", None):
            raise AcmiValidationError("status", "enum", "must be 'open' or None (any status)")
        size = page_size(limit)
        if owner is not None:
            who = owner_entity(owner)
            if status == "open":
                return self._open_page(who, cursor, size)
            return self._owned_page(who, cursor, size)
        page = self._entities.list_page(CATEGORY, cursor=cursor, limit=size)
        ids = [e.partition(":")[2] for e in page.entities]
        if status is None or not ids:
            return WorkPage([WorkRef(i) for i in ids], page.next_cursor)
        signal_keys = [self._keys.signals(work_entity(i)) for i in ids]
        replies = self._ctx.store.pipeline([("GET", k) for k in signal_keys])
        items = []
        for work_id, reply in zip(ids, replies, strict=True):
            state: Any = None
            if isinstance(reply, bytes):
                try:
                    doc = load_stored(reply)
                except Unreadable:
                    doc = None
                state = doc.get("status") if isinstance(doc, dict) else None
            if is_open(state):
                items.append(WorkRef(work_id, status=state))
        return WorkPage(items, page.next_cursor)

    def _open_page(self, who: EntityId, cursor: str | None, size: int) -> WorkPage:
        offset = 0
        if cursor is not None:
            (offset,) = decode_cursor(cursor, "wo", 1)
            if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < 2**53:
                raise AcmiValidationError("cursor", "cursor", "is not a cursor this API returned")
        key = self._keys.work_open(who)
        command = ("ZRANGE", key, offset, offset + size, "REV", "WITHSCORES")
        reply = self._ctx.store.execute(command)
        flat = reply if isinstance(reply, list) else []
        items = []
        for member, score in zip(flat[::2], flat[1::2], strict=False):
            if isinstance(member, bytes) and isinstance(score, bytes):
                number = float(score)
                updated = int(number) if number.is_integer() else number
                items.append(WorkRef(member.decode("utf-8", "replace"), updated, owner=str(who)))
        more = len(items) > size
        next_cursor = encode_cursor("wo", offset + size) if more else None
        return WorkPage(items[:size], next_cursor)

    def _owned_page(self, who: EntityId, cursor: str | None, size: int) -> WorkPage:
        scan = 0
        if cursor is not None:
            (scan,) = decode_cursor(cursor, "wh", 1)
            if isinstance(scan, bool) or not isinstance(scan, int) or not 0 <= scan < 2**64:
                raise AcmiValidationError("cursor", "cursor", "is not a cursor this API returned")
        reply = self._ctx.store.execute(("HSCAN", self._keys.work_owners(), scan, "COUNT", size))
        next_scan, flat = _scan(reply)
        wanted = str(who).encode()
        items = sorted(
            (
                WorkRef(f.decode("utf-8", "replace"), owner=str(who))
                for f, v in zip(flat[::2], flat[1::2], strict=False)
                if isinstance(f, bytes) and v == wanted
            ),
            key=lambda ref: ref.id,
        )
        return WorkPage(items, encode_cursor("wh", next_scan) if next_scan else None)


def _scan(reply: Reply) -> tuple[int, list[Reply]]:
    """SSCAN / HSCAN's [cursor, [items]]."""
    if (
        isinstance(reply, list)
        and len(reply) == 2
        and isinstance(reply[0], bytes)
        and reply[0].isdigit()
        and isinstance(reply[1], list)
    ):
        return int(reply[0]), reply[1]
    return 0, []


__all__ = [
    "CLOSED_STATUSES",
    "SessionPage",
    "WorkAPI",
    "WorkItem",
    "WorkPage",
    "WorkRef",
    "is_open",
    "owner_entity",
    "work_entity",
]

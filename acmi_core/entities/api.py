"""The ACMI client: profile, signals and timeline per entity, plus batch, get, list, delete.

One module: profile, signals and timeline share one read path (stored values decoded,
what cannot be served skipped and reported) and one write path (a WritePlan per call;
Batch stages the same operations), and EntityAPI composes them.

    acmi = create_acmi()                       # Upstash, Redis or embedded, from the env
    acmi.profile.set("user:mikey", {"name": "Mikey"})
    acmi.signals.set("user:mikey", "current_task", "shooting")
    acmi.timeline.append("user:mikey", {"source": "user:mikey", "kind": "note",
                                        "correlationId": "c-1", "summary": "hi"})
    ctx = acmi.get("user:mikey")               # one round trip
    page = acmi.timeline.page("user:mikey", limit=100)   # then cursor=page.next_cursor

Round trips: every write (including batch and its index) = 1, get = 1, read = 1, one
page (``list_page``, ``timeline.page``) = 1.

Reads never raise on what is stored: a value that cannot be served (not JSON, nested
deeper than ``MAX_READ_DEPTH``, NaN) is skipped and reported; everything else comes back
exactly, lone surrogates and numbers beyond the double range included (``render_json``).
Timeline reads show what the reference's readers show: an event another tool wrote
without following every rule (no kind/correlationId, a speaker_type outside the enum, a
numeric tenant_id, ts out of range, a long summary) is returned, flagged in
``Event.legacy`` (a record with no source or summary too: a ``message``, an MCP spawn
record); only a member with no usable ts is skipped.
"""

from __future__ import annotations

import base64
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, TypeVar

from acmi_core.base.errors import AcmiError, AcmiValidationError, CorruptData, StoreCommandError
from acmi_core.base.keys import COORDINATION_THREAD, MENTIONS_KEPT, mentioned
from acmi_core.base.model import (
    EVENT_FIELD_ORDER,
    MAX_ENTITY_LEN,
    EntityId,
    Event,
    check_category,
    check_profile,
    check_signal_key,
    dumps,
    encode_event,
    json_members,
    json_object_text,
    profile_defaults,
    profile_members,
)
from acmi_core.base.pages import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_BYTES,
    TimelinePosition,
    bucket_cursor,
    decode_cursor,
    encode_cursor,
    entity_cursor,
    member_digest,
    page_size,
)
from acmi_core.base.stored import (
    StoredObject,
    StoredValue,
    decode_events,
    decode_object,
    plain_dict,
    stored_dict,
)
from acmi_core.entities.context import Context
from acmi_core.entities.expiry import TTL_PREFIX, live, ttl_field, ttl_ms
from acmi_core.entities.results import (
    EntityBody,
    EventDeleted,
    EventPageBody,
    LegacyEvent,
    SkippedMember,
)
from acmi_core.entities.timeline_parts import event_parts, incomplete
from acmi_core.entities.unlog import delete_event
from acmi_core.store import scripts
from acmi_core.store.base import Arg, Command, Reply, Store, is_noscript
from acmi_core.store.writes import WritePlan

log = logging.getLogger("acmi")
_Default = TypeVar("_Default")  # what a signal read answers for a missing signal

DEFAULT_BUNDLE_EVENTS = 50
MAX_CAT_ENTITIES: Final = 20  # timelines one cat merges
MAX_CAT_LIMIT: Final = 1000  # events one cat returns
_LIST_SCAN_COUNT: Final = 1000
# A timeline page (and an entity's newest events), by rank and to a byte cap (see the
# script's header).
PAGE: Final = scripts.PAGE.script
# A page of several timelines merged, to the same byte cap (see the script's header).
MERGE: Final = scripts.MERGE.script
_MARK_BYTES: Final = 16  # a merge cursor's first and last bytes of its event


# --- read results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Skipped:
    """A stored timeline member that could not be read. Its content is not echoed."""

    key: str
    position: int
    reason: str


class Events(list[Event]):
    """Timeline events (a plain list) plus the stored members that were skipped.

    ``to_dicts()`` gives each event as stored (what the API returns): an ``Event`` holds
    well-formed text (a lone surrogate becomes U+FFFD) and its ``to_dict`` stops at
    pydantic's depth 255; the stored dict has neither limit. ``legacy_report()`` lists
    the legacy events among them, by index: beside the events, never inside them, so it
    cannot collide with a stored field."""

    def __init__(
        self,
        events: Iterable[Event] = (),
        skipped: Iterable[Skipped] = (),
        stored: Iterable[tuple[Event, dict[str, Any] | bytes]] = (),
    ) -> None:
        super().__init__(events)
        self.skipped: list[Skipped] = list(skipped)
        # The pairs as given; mapped by id() on the first to_dicts(), not here: a read
        # whose caller takes the events themselves (most client calls) never pays for it.
        self._pairs = list(stored)
        self._by_id: dict[int, tuple[Event, dict[str, Any] | bytes]] | None = None

    def _stored(self) -> dict[int, tuple[Event, dict[str, Any] | bytes]]:
        # keyed by id(), holding the event itself so the id cannot be reused
        if self._by_id is None:
            self._by_id = {id(event): (event, data) for event, data in self._pairs}
        return self._by_id

    def to_dicts(self) -> list[dict[str, Any]]:
        dicts = []
        stored_of = self._stored().get
        for event in self:
            pair = stored_of(id(event))
            if pair is None or pair[0] is not event:
                dicts.append(event.to_dict())
                continue
            stored = pair[1]
            if type(stored) is bytes:  # a plain event: served from the event, not parsed
                dicts.append(plain_dict(event))
                continue
            data = stored_dict(stored)
            ordered: dict[str, Any] = {n: data[n] for n in EVENT_FIELD_ORDER if n in data}
            ordered.update(data)  # unknown fields keep their order, after the known ones
            dicts.append(ordered)
        return dicts

    def legacy_report(self) -> list[LegacyEvent]:
        """``[{"index": i, "reasons": ["kind: required", ...]}]`` for each legacy event,
        ``i`` its position in this list (and in ``to_dicts()``)."""
        return [
            {"index": index, "reasons": list(event.legacy)}
            for index, event in enumerate(self)
            if event.legacy
        ]

    def skipped_report(self) -> list[SkippedMember]:
        """The skipped members, as the bodies list them (the dataclass's fields, in order)."""
        return [{"key": s.key, "position": s.position, "reason": s.reason} for s in self.skipped]


@dataclass(frozen=True)
class EntityContext:
    """Everything about one entity, read in one round trip."""

    entity: str
    profile: dict[str, Any] | None
    signals: dict[str, Any]
    timeline: Events
    problems: list[str] = field(default_factory=list)
    # Set when the newest events stopped at MAX_PAGE_BYTES before ``events`` of them: a
    # cursor of timeline.page(reverse=True) to the older ones (in the body only then).
    next_cursor: str | None = None

    def to_dict(self) -> EntityBody:
        body: EntityBody = {
            "entity": self.entity,
            "profile": self.profile,
            "signals": self.signals,
            "timeline": self.timeline.to_dicts(),
            "legacy": self.timeline.legacy_report(),
            "skipped": self.timeline.skipped_report(),
            "problems": self.problems,
        }
        if self.next_cursor is not None:
            body["next_cursor"] = self.next_cursor
        return body


@dataclass(frozen=True)
class EntityPage:
    """Entity ids from one SSCAN step of a category index; ``next_cursor`` is None at the end."""

    entities: list[str]
    next_cursor: str | None


@dataclass(frozen=True)
class EventPage:
    """One page of a timeline; ``next_cursor`` is None at the end."""

    events: Events
    next_cursor: str | None

    def to_dict(self) -> EventPageBody:
        return {
            "events": self.events.to_dicts(),
            "legacy": self.events.legacy_report(),
            "skipped": self.events.skipped_report(),
            "next_cursor": self.next_cursor,
        }


@dataclass(frozen=True)
class CatPage:
    """One page of a merge of timelines: (entity, event) pairs newest first;
    ``next_cursor`` is set only when the byte cap cut the page."""

    events: list[tuple[str, Event]]
    next_cursor: str | None


@dataclass(frozen=True)
class MergePosition:
    """After one event of a merge: its score, its timeline (``at``, 1-based, in the
    order given), how many of that timeline's events of that score come up to it
    (``run``), and its length and first and last bytes (the script checks the run
    against them). ``entities`` is a digest of the entity list the cursor belongs to."""

    entities: str
    score: float
    at: int
    run: int
    size: int
    head: bytes
    tail: bytes

    def encode(self) -> str:
        return encode_cursor(
            "m",
            self.entities,
            repr(self.score),
            self.at,
            self.run,
            self.size,
            self.head.hex(),
            self.tail.hex(),
        )

    @classmethod
    def decode(cls, cursor: object, names: list[str]) -> MergePosition:
        digest, score_text, at, run, size, head, tail = decode_cursor(cursor, "m", 7)
        try:
            score = float(score_text) if isinstance(score_text, str) else math.nan
            marks = (bytes.fromhex(head), bytes.fromhex(tail))
        except (ValueError, TypeError):
            raise _bad_cursor() from None
        if (
            not isinstance(digest, str)
            or math.isnan(score)
            or not _whole(at, 1, len(names))
            or not _whole(run, 1, 2**53)
            or not _whole(size, 1, 2**53)
            or not all(0 < len(mark) <= min(size, _MARK_BYTES) for mark in marks)
        ):
            raise _bad_cursor()
        if digest != _names_digest(names):
            raise _bad_cursor("was issued for other entities (give the same ones, in order)")
        return cls(digest, score, at, run, size, *marks)


def _bad_cursor(why: str = "is not a cursor this API returned") -> AcmiValidationError:
    return AcmiValidationError("cursor", "cursor", f"{why}; pass next_cursor back unchanged")


def _whole(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _decode_events(raw: Reply, key: str, *, max_bytes: int | None = None) -> Events:
    decoded, unread = decode_events(raw if isinstance(raw, list) else [], max_bytes)
    skipped = [Skipped(key, position, reason) for position, reason in unread]
    if skipped:
        log.warning(
            "skipped unreadable timeline members",
            extra={
                "key": key,
                "count": len(skipped),
                "reasons": sorted({s.reason for s in skipped}),
            },
        )
    return Events([event for event, _ in decoded], skipped, decoded)


def _newest_args(
    events: int, until: float | None = None, since: float | None = None, max_bytes: int = 0
) -> dict[str, Arg]:
    return {
        "score": "+inf" if until is None else repr(float(until)),
        "offset": 0,
        "count": events,
        "bound": "" if since is None else repr(float(since)),
        "reverse": "1",
        "max_bytes": max_bytes or MAX_PAGE_BYTES,
        "lead": 0,
    }


def newest_command(
    key: str,
    events: int,
    *,
    until: float | None = None,
    since: float | None = None,
    max_bytes: int = 0,
) -> Command:
    """The EVALSHA (for a read's pipeline) of page.lua reading the newest ``events``
    members of timeline ``key`` (with ts in ``[since, until]`` when given), stopping at
    ``max_bytes`` (``MAX_PAGE_BYTES``): a whole read stays under Lambda's response limit
    however large the events (``newest_members`` reads the reply, given the same bounds)."""
    args = _newest_args(events, until, since, max_bytes)
    packed_keys, packed_args = scripts.PAGE.pack({"timeline": key}, args)
    return ("EVALSHA", PAGE.sha, len(packed_keys), *packed_keys, *packed_args)


def newest_members(
    store: Store,
    reply: Reply | StoreCommandError,
    key: str,
    events: int,
    *,
    until: float | None = None,
    since: float | None = None,
    max_bytes: int = 0,
) -> tuple[list[Reply], str | None]:
    """The stored members of a ``newest_command`` reply, oldest first, and, when the
    byte cap stopped the read, the cursor of ``timeline.page(reverse=True)`` to the
    older ones. A server that has not loaded the script yet answers NOSCRIPT: it is sent
    once more whole (EVAL, which loads it)."""
    try:
        if isinstance(reply, StoreCommandError) and is_noscript(reply):
            args = _newest_args(events, until, since, max_bytes)
            packed_keys, packed_args = scripts.PAGE.pack({"timeline": key}, args)
            reply = store.execute(
                ("EVAL", PAGE.source, len(packed_keys), *packed_keys, *packed_args)
            )
        page = scripts.PAGE.decode(_check_reply(reply, key))
    except StoreCommandError as exc:  # a key of another type, written by another tool
        raise CorruptData(f"{key}: {exc}", field=key) from None
    items = page["window"]  # member, score, ... newest first
    if not isinstance(items, list):
        items = []
    elif len(items) % 2:  # a member without its score: left out, as _score_pairs does
        items = items[:-1]
    cursor = None
    if page["more"] == 1 and items:  # only then are the scores read
        window = _score_pairs(items)
        member, score = window[-1]
        run = sum(1 for _, other in window if other == score)
        digest = member_digest(member) if isinstance(member, bytes) else "0" * 16
        cursor = TimelinePosition(True, score, run, digest).encode()
    return items[-2::-2], cursor  # the members, oldest first


def newest_events(
    store: Store, reply: Reply | StoreCommandError, key: str, events: int
) -> tuple[Events, str | None]:
    """``newest_members``, decoded."""
    members, cursor = newest_members(store, reply, key, events)
    return _decode_events(members, key, max_bytes=MAX_PAGE_BYTES), cursor


def _check_reply(reply: Reply | StoreCommandError, key: str) -> Reply:
    if isinstance(reply, StoreCommandError):
        raise CorruptData(f"{key}: {reply}", field=key)
    return reply


def _read(store: Store, command: Command, key: str) -> Reply:
    """One read command; an error reply (a key of the wrong type, written by another
    tool) is stored data that cannot be used as asked, not a server failure."""
    try:
        return store.execute(command)
    except StoreCommandError as exc:
        raise CorruptData(f"{key}: {exc}", field=key) from None


def _score_pairs(reply: Reply) -> list[tuple[Reply, float]]:
    """A WITHSCORES reply as (member, score) pairs."""
    items = reply if isinstance(reply, list) else []
    pairs = []
    for member, score in zip(items[::2], items[1::2], strict=False):
        try:
            pairs.append((member, float(score) if isinstance(score, bytes) else math.nan))
        except ValueError:
            pairs.append((member, math.nan))
    return pairs


# --- writers (shared by the client and batches) ---------------------------------------------


class _Slot:
    """Base of the slot APIs. With a plan, writes join it (a batch); without, each
    write is its own plan, applied at once (one round trip)."""

    def __init__(self, ctx: Context, plan: WritePlan | None = None) -> None:
        self._ctx = ctx
        self._keys = ctx.keys
        self._plan = plan

    def _write(self, build: Callable[[WritePlan], int]) -> Reply:
        if self._plan is not None:
            build(self._plan)
            return None
        plan = WritePlan()
        index = build(plan)
        return plan.apply(self._ctx.store)[index]

    def _joined(self, plan: WritePlan, entity: EntityId) -> WritePlan:
        """``plan``, with ``entity`` in it (a batch's entities share one bucket)."""
        plan.entity_bucket(self._keys, str(entity))
        return plan

    def _index(self, plan: WritePlan, entity: EntityId) -> None:
        # every write that can create the entity passes here: its id is checked once
        self._ctx.guard_id(str(entity), "entity")
        plan.entity_bucket(self._keys, str(entity))
        plan.sadd(self._ctx.index_key(entity), entity.local_id)


class ProfileAPI(_Slot):
    """Who: a stable JSON object per entity."""

    def get(self, entity: str | EntityId) -> StoredObject | None:
        key = self._keys.profile(EntityId.parse_listed(entity))
        return decode_object(_read(self._ctx.store, ("GET", key), key), key)

    def set(self, entity: str | EntityId, doc: Mapping[str, Any]) -> StoredObject | None:
        """Overwrite the profile. actor_type/tenant_id are filled when absent."""
        eid = EntityId.parse(entity)
        stored = dict(check_profile(self._ctx.guard(doc, "profile")))
        for name, value in profile_defaults(eid, self._keys.tenant).items():
            stored.setdefault(name, value)
        text = dumps(stored, "profile")

        def build(plan: WritePlan) -> int:
            self._index(plan, eid)
            return plan.set(self._keys.profile(eid), text)

        self._write(build)
        return stored if self._plan is None else None

    def merge(self, entity: str | EntityId, partial: Mapping[str, Any]) -> StoredObject | None:
        """Shallow merge, atomically; creates the profile when missing. Returns the merged
        doc (None inside a batch). Auto-filled actor_type/tenant_id never overwrite
        stored values; explicit values in ``partial`` do."""
        eid = EntityId.parse(entity)
        partial = self._ctx.guard(partial, "profile")
        fields: list[tuple[Any, str, str]] = [
            ("set", name, text) for name, text in profile_members(partial)
        ]
        fields += [
            ("setnx", name, text)
            for name, text in self._ctx.profile_fills(eid.category)
            if name not in partial
        ]
        key = self._keys.profile(eid)

        def build(plan: WritePlan) -> int:
            self._index(plan, eid)
            return plan.edit_object(key, fields, field="profile")

        merged = self._write(build)
        if merged is None:
            return None
        return decode_object(merged, key) or {}

    def delete(self, entity: str | EntityId) -> None:
        eid = EntityId.parse(entity)
        self._write(lambda plan: self._joined(plan, eid).delete(self._keys.profile(eid)))


def _signal_key(key: object) -> str:
    """A signal key a caller may write: not one of the expiry fields."""
    name = check_signal_key(key, f"signals.{key}")
    if name.startswith(TTL_PREFIX):
        raise AcmiValidationError(f"signals.{name}", "reserved", f"{TTL_PREFIX}* is ACMI's own")
    return name


class SignalsAPI(_Slot):
    """Now: a flat map of key -> any JSON value per entity."""

    def all(self, entity: str | EntityId) -> StoredObject:
        """Every live signal: an expired one, and the expiry fields, are not shown
        (``entities/expiry.py``)."""
        key = self._keys.signals(EntityId.parse_listed(entity))
        stored = decode_object(_read(self._ctx.store, ("GET", key), key), key) or {}
        return live(stored, self._ctx.clock)

    def get(
        self, entity: str | EntityId, key: str, default: _Default | None = None
    ) -> StoredValue | _Default:
        """The signal's value, or ``default`` when it is missing."""
        check_signal_key(key)
        return self.all(entity).get(key, default)

    def set(
        self, entity: str | EntityId, key: str, value: Any, ttl: str | None = None
    ) -> StoredValue:
        """Set one signal; returns its value as stored (redacted under that policy).
        ``ttl`` (``30m``, ``24h``, ``7d``): reads stop showing it after that; without
        one, an earlier ttl of the signal is dropped (``entities/expiry.py``)."""
        check_signal_key(key)
        expiry = None if ttl is None else self._ctx.clock() + ttl_ms(ttl)
        values = self._ctx.guard({key: value}, "signals")
        meta = [
            ("del", ttl_field(key), "null")
            if expiry is None
            else ("set", ttl_field(key), str(expiry))
        ]
        self.update(entity, values, guarded=True, _meta=meta)
        stored: StoredValue = values[key]
        return stored

    def update(
        self,
        entity: str | EntityId,
        values: Mapping[str, Any],
        *,
        guarded: bool = False,
        _meta: Sequence[tuple[Any, str, str]] = (),
    ) -> None:
        """Set several signals in one atomic step; other signals are kept (a ttl too).
        ``guarded``: ``values`` has passed the secret guard already (``set``, which
        adds its key's expiry field as ``_meta``)."""
        eid = EntityId.parse(entity)
        if not guarded:
            values = self._ctx.guard(values, "signals")
        fields: list[tuple[Any, str, str]] = [
            ("set", _signal_key(k), text) for k, text in json_members(dict(values), "signals")
        ]
        if not fields:
            raise AcmiValidationError("signals", "non_empty", "give at least one signal")
        fields += _meta

        def build(plan: WritePlan) -> int:
            self._index(plan, eid)
            return plan.edit_object(self._keys.signals(eid), fields, field="signals")

        self._write(build)

    def replace(self, entity: str | EntityId, values: Mapping[str, Any]) -> StoredObject:
        """Replace the whole signals map; returns it as stored (redacted under that policy)."""
        eid = EntityId.parse(entity)
        values = self._ctx.guard(values, "signals")
        for k in values:
            _signal_key(k)
        text = json_object_text(dict(values), "signals")

        def build(plan: WritePlan) -> int:
            self._index(plan, eid)
            return plan.set(self._keys.signals(eid), text)

        self._write(build)
        return dict(values)

    def clear(self, entity: str | EntityId) -> None:
        """Delete every signal of the entity."""
        eid = EntityId.parse(entity)
        self._write(lambda plan: self._joined(plan, eid).delete(self._keys.signals(eid)))

    def delete(self, entity: str | EntityId, key: str) -> None:
        eid = EntityId.parse(entity)
        check_signal_key(key)
        self._write(
            lambda plan: self._joined(plan, eid).edit_object(
                self._keys.signals(eid), [("del", key, "null")]
            )
        )


class TimelineAPI(_Slot):
    """Then: append-only Comms v1.1 events, ordered by ts (ties by stored bytes)."""

    def append(self, entity: str | EntityId, event: Mapping[str, Any] | Event) -> Event:
        """Validate, fill ts/speaker_type/tenant_id, store. An exact duplicate is stored once."""
        return self.extend(entity, [event])[0]

    def extend(
        self, entity: str | EntityId, events: Iterable[Mapping[str, Any] | Event]
    ) -> list[Event]:
        """Append several events in one atomic step, all stored or none, when they fit one
        request (about 990 events; on the coordination thread fewer, as each mention
        adds to the request). More are stored in parts, in order, each one request and
        all-or-nothing: a part that fails raises its error saying how many events (the
        first k) were stored before it (``timeline_parts``). In a batch, all go in the
        batch's one request."""
        eid = EntityId.parse(entity)
        now = self._ctx.clock()
        tenant = self._keys.tenant
        guard = self._ctx.guard_event
        encoded = [
            encode_event(
                guard(e.to_dict() if isinstance(e, Event) else e, f"events[{i}]"),
                now_ms=now,
                tenant=tenant,
                field=f"events[{i}]",
            )
            for i, e in enumerate(events)
        ]
        if not encoded:
            raise AcmiValidationError("events", "non_empty", "give at least one event")
        parsed = [event for event, _ in encoded]
        texts = [text for _, text in encoded]
        parts = (
            [range(len(texts))]
            if self._plan is not None
            else event_parts(texts, str(eid) == COORDINATION_THREAD)
        )
        for part in parts:
            events, part_texts = parsed[part.start : part.stop], texts[part.start : part.stop]

            def build(plan: WritePlan, e: list[Event] = events, t: list[str] = part_texts) -> int:
                return self.stage(plan, eid, e, t)

            try:
                self._write(build)
            except AcmiError as exc:
                if len(parts) > 1:
                    incomplete(exc, part.start, len(texts))
                raise
        return parsed

    def stage(
        self,
        plan: WritePlan,
        entity: EntityId,
        events: list[Event],
        texts: list[str] | None = None,
    ) -> int:
        """Add validated events (see ``parse_event``) and the index entry to ``plan``;
        ``texts``, when given, are the events' ``to_json()`` (from ``encode_event``)."""
        key = self._keys.timeline(entity)
        self._index(plan, entity)
        plan.mark_changed(self._keys, self._ctx.clock(), str(entity))  # for jobs
        index = -1
        coordination = str(entity) == COORDINATION_THREAD
        for i, event in enumerate(events):
            text = event.to_json() if texts is None else texts[i]
            index = plan.zadd(key, event.ts, text)
            if coordination:  # the mentions index, so a bootstrap never scans the thread
                for local in mentioned(text):
                    plan.zadd(self._keys.mentions(local), event.ts, text)
                    plan.zkeep(self._keys.mentions(local), MENTIONS_KEPT)
        return index

    def read(
        self,
        entity: str | EntityId,
        *,
        limit: int | None = None,
        reverse: bool = False,
        since_ms: float | None = None,
        until_ms: float | None = None,
    ) -> Events:
        """Oldest first (newest first with ``reverse``); bounds inclusive; ``limit``
        counts from the first event in that order. Without ``limit`` this reads the whole
        range: for long timelines use ``page``/``pages``."""
        key = self._keys.timeline(EntityId.parse_listed(entity))
        low, high = _bounds(since_ms, until_ms)
        command: list[str | int] = ["ZRANGE", key]
        command += [high, low, "BYSCORE", "REV"] if reverse else [low, high, "BYSCORE"]
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise AcmiValidationError("limit", "range", "must be an integer >= 1")
            command += ["LIMIT", 0, limit]
        return _decode_events(_read(self._ctx.store, command, key), key)

    def cat(
        self,
        entities: Iterable[str | EntityId],
        *,
        limit: int = 50,
        since_ms: float | None = None,
        until_ms: float | None = None,
    ) -> list[tuple[str, Event]]:
        """Several timelines merged newest first (equal ts in the order given), at most
        ``limit`` (1-``MAX_CAT_LIMIT``) events from 1-``MAX_CAT_ENTITIES`` entities.
        ``cat_page`` after ``cat_page``: one round trip when the events fit in
        ``MAX_PAGE_BYTES``, one more per page past it, each read bounded inside Redis.
        Unreadable members are skipped as in ``read``. To hold one page at a time (a
        response of bounded size), use ``cat_page``."""
        eids = _cat_entities(entities)
        size = _cat_limit(limit)
        merged: list[tuple[str, Event]] = []
        cursor: str | None = None
        while True:
            page = self.cat_page(
                eids,
                cursor=cursor,
                limit=size - len(merged),
                since_ms=since_ms,
                until_ms=until_ms,
            )
            merged.extend(page.events)
            cursor = page.next_cursor
            if cursor is None or len(merged) >= size:
                return merged

    def cat_page(
        self,
        entities: Iterable[str | EntityId],
        *,
        cursor: str | None = None,
        limit: int = 50,
        since_ms: float | None = None,
        until_ms: float | None = None,
    ) -> CatPage:
        """One page of ``cat``'s merge (one round trip): at most ``limit`` events and
        ``MAX_PAGE_BYTES`` of stored JSON (always at least one event, so every page
        moves on). ``next_cursor`` is set only when the byte cap cut the page before
        ``limit``: pass it back with the same entities, in the same order, for the
        next events (ask with ``limit`` less what you have). The merge (lua/merge.lua)
        runs inside Redis and stops reading at the cap: a page reads about what it
        answers plus the next event of each timeline.

        The cursor names one event: its ts, its timeline and its place among that
        timeline's events of that ts, so events of equal ts, in one timeline or
        across several, are neither lost nor repeated across pages."""
        eids = _cat_entities(entities)
        size = _cat_limit(limit)
        low, high = _bounds(since_ms, until_ms)
        one_run = WritePlan()  # the merge is one script: its timelines share one bucket
        for i, eid in enumerate(eids):
            one_run.entity_bucket(self._keys, str(eid), f"entities[{i}]")
        keys = [self._keys.timeline(eid) for eid in eids]
        names = [str(eid) for eid in eids]
        at = None if cursor is None else MergePosition.decode(cursor, names)
        if at is not None and until_ms is not None and until_ms < at.score:
            at = None  # the caller moved the start before the cursor: start there
        args: dict[str, Arg] = {
            "high": high,
            "low": low,
            "count": size,
            "max_bytes": MAX_PAGE_BYTES,
            "at": 0 if at is None else at.at,
            "at_score": "0" if at is None else repr(at.score),
            "at_run": 0 if at is None else at.run,
            "at_size": 0 if at is None else at.size,
            "at_head": b"" if at is None else at.head,
            "at_tail": b"" if at is None else at.tail,
        }
        try:
            page = scripts.MERGE.eval(self._ctx.store, {"timelines": keys}, args, script=MERGE)
        except StoreCommandError as exc:  # a key of another type, written by another tool
            raise CorruptData(f"{', '.join(keys)}: {exc}", field="entities") from None
        window = page["window"] if isinstance(page["window"], list) else []
        triples: list[tuple[Reply, float, int]] = []
        for member, text, place in zip(window[::3], window[1::3], window[2::3], strict=True):
            assert isinstance(place, int) and 1 <= place <= len(keys)  # the script's reply
            ((_, value),) = _score_pairs([member, text])
            triples.append((member, value, place - 1))
        # decoded a timeline at a time (one log line per timeline), put back in merge order
        by_key: dict[int, list[Reply]] = {}
        for member, _, index in triples:
            by_key.setdefault(index, []).append(member)
        readable: dict[int, Iterator[Event]] = {}
        skipped: dict[int, set[int]] = {}
        for index, members in by_key.items():
            events = _decode_events(members, keys[index], max_bytes=MAX_PAGE_BYTES)
            readable[index] = iter(events)
            skipped[index] = {s.position for s in events.skipped}
        seen: dict[int, int] = {}
        merged: list[tuple[str, Event]] = []
        for _, _, index in triples:
            position = seen.get(index, 0)
            seen[index] = position + 1
            if position not in skipped[index]:
                merged.append((names[index], next(readable[index])))
        next_cursor = None
        if page["more"] == 1 and triples:
            member, score, index = triples[-1]
            run = sum(1 for _, s, i in triples if s == score and i == index)
            if at is not None and at.at == index + 1 and at.score == score:
                resumed = page["resumed"]
                run += resumed if isinstance(resumed, int) else 0
            body = member if isinstance(member, bytes) else b""
            next_cursor = MergePosition(
                _names_digest(names), score, index + 1, run, len(body), *_marks(body)
            ).encode()
        return CatPage(merged, next_cursor)

    def page(
        self,
        entity: str | EntityId,
        *,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        reverse: bool = False,
        since_ms: float | None = None,
        until_ms: float | None = None,
    ) -> EventPage:
        """One page of ``read``'s order (one round trip): at most ``limit`` events
        (1-``MAX_PAGE_SIZE``) and ``MAX_PAGE_BYTES`` of stored JSON; pass ``next_cursor``
        back, with the same ``reverse``, for the next page.

        The cursor is a score plus a position among the members of that score (Redis
        orders equal scores by member bytes) and a digest of the last member, so events
        with equal ``ts`` are neither lost nor repeated across pages, even when events
        are added at that very ``ts`` meanwhile (those land behind the cursor)."""
        key = self._keys.timeline(EntityId.parse_listed(entity))
        low, high = _bounds(since_ms, until_ms)
        size = page_size(limit)
        at = None if cursor is None else TimelinePosition.decode(cursor, reverse)
        if at is not None and at.behind(until_ms if reverse else since_ms):
            at = None
        far = low if reverse else high
        # By rank (lua/page.lua): O(log N) however many events share a ts, and the byte
        # cap applied as the script reads (it stops there: `more`). A first page starts at
        # the near bound; a later one re-reads the last member returned (the digest
        # confirms it is still where the position says, uncounted against the cap), and
        # the extra member tells whether more follow.
        if at is None:
            start, offset, count, lead = (high if reverse else low), 0, size + 1, 0
        else:
            start, offset, count, lead = repr(at.score), at.run - 1, size + 2, 1
        args: dict[str, Arg] = {
            "score": start,
            "offset": offset,
            "count": count,
            "bound": "" if far.endswith("inf") else far,
            "reverse": "1" if reverse else "0",
            "max_bytes": MAX_PAGE_BYTES,
            "lead": lead,
        }
        try:
            page = scripts.PAGE.eval(self._ctx.store, {"timeline": key}, args, script=PAGE)
        except StoreCommandError as exc:
            raise CorruptData(f"{key}: {exc}", field=key) from None
        window = _score_pairs(page["window"])
        more = page["more"] == 1

        drop = 0
        if at is not None:
            for index, (member, score) in enumerate(window):
                if score != at.score:
                    break
                if isinstance(member, bytes) and member_digest(member) == at.digest:
                    drop = index + 1
                    break
        taken = 0
        total = 0
        for member, _ in window[drop : drop + size]:
            length = len(member) if isinstance(member, bytes) else 0
            length = 0 if length > MAX_PAGE_BYTES else length  # skipped, not carried
            if taken and total + length > MAX_PAGE_BYTES:
                break
            taken += 1
            total += length
        last = drop + taken - 1
        next_cursor = None
        if (more or len(window) == count or len(window) > drop + taken) and last >= 0:
            member, score = window[last]
            run = sum(1 for _, other in window[: last + 1] if other == score)
            if at is not None and score == at.score:
                run += offset  # members of that score before the window
            digest = member_digest(member) if isinstance(member, bytes) else "0" * 16
            next_cursor = TimelinePosition(reverse, score, run, digest).encode()
        members = [member for member, _ in window[drop : drop + taken]]
        events = _decode_events(members, key, max_bytes=MAX_PAGE_BYTES)
        return EventPage(events, next_cursor)

    def pages(
        self,
        entity: str | EntityId,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        reverse: bool = False,
        since_ms: float | None = None,
        until_ms: float | None = None,
    ) -> Iterator[EventPage]:
        """Every page of the range, one round trip each, fetched as the caller iterates."""
        cursor: str | None = None
        while True:
            page = self.page(
                entity,
                cursor=cursor,
                limit=limit,
                reverse=reverse,
                since_ms=since_ms,
                until_ms=until_ms,
            )
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def delete_event(
        self,
        entity: str | EntityId,
        ts: object = None,
        id: object = None,
        member: object = None,
    ) -> EventDeleted:
        """Delete one event, by ``ts`` and ``id`` (its correlationId) or by its stored
        ``member``, with an audit event on the same timeline: one script run
        (``entities/unlog.py``, which says what happens to the indexes)."""
        return delete_event(self._ctx, entity, ts, id, member)

    def size(self, entity: str | EntityId) -> int:
        reply = self._ctx.store.execute(
            ("ZCARD", self._keys.timeline(EntityId.parse_listed(entity)))
        )
        assert isinstance(reply, int)
        return reply


def deletable(entity: str | EntityId) -> EntityId:
    """The entity a delete names: any id a list prints, unless it holds ':'."""
    eid = EntityId.parse_listed(entity)
    return EntityId.parse(entity) if ":" in eid.local_id else eid


def _bounds(since_ms: float | None, until_ms: float | None) -> tuple[str, str]:
    low = _bound(since_ms, "since_ms", "-inf")
    high = _bound(until_ms, "until_ms", "+inf")
    if since_ms is not None and until_ms is not None and since_ms > until_ms:
        raise AcmiValidationError("since_ms", "range", "must be <= until_ms")
    return low, high


def _cat_entities(entities: Iterable[str | EntityId]) -> list[EntityId]:
    eids = list(dict.fromkeys(EntityId.parse_listed(e) for e in entities))
    if not 1 <= len(eids) <= MAX_CAT_ENTITIES:
        raise AcmiValidationError(
            "entities", "count", f"must name 1-{MAX_CAT_ENTITIES} distinct entities"
        )
    return eids


def _cat_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_CAT_LIMIT:
        raise AcmiValidationError("limit", "range", f"must be an integer 1-{MAX_CAT_LIMIT}")
    return limit


def _names_digest(names: Iterable[str]) -> str:
    return member_digest("\n".join(names).encode())


def _marks(member: bytes) -> tuple[bytes, bytes]:
    """The first and last bytes of a member, by which merge.lua finds it again."""
    return member[:_MARK_BYTES], member[-_MARK_BYTES:]


def _scan_reply(reply: Reply, key: str) -> tuple[int, list[Reply]]:
    """SSCAN's [cursor, [members]]."""
    if (
        isinstance(reply, list)
        and len(reply) == 2
        and isinstance(reply[0], bytes)
        and reply[0].isdigit()
        and isinstance(reply[1], list)
    ):
        return int(reply[0]), reply[1]
    raise CorruptData(f"{key}: SSCAN gave an unexpected reply", field=key)


def _bound(value: float | None, name: str, open_end: str) -> str:
    if value is None:
        return open_end
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise AcmiValidationError(name, "type", "must be a number of milliseconds")
    return repr(value)


# --- the client -----------------------------------------------------------------------------


class Batch:
    """Queued writes applied together, all or nothing, in one round trip.

        with acmi.batch() as b:
            b.profile.set(...); b.signals.set(...); b.timeline.append(...)

    Validation happens as each write is queued; nothing is sent if the block raises.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._plan = WritePlan()
        self.profile = ProfileAPI(ctx, self._plan)
        self.signals = SignalsAPI(ctx, self._plan)
        self.timeline = TimelineAPI(ctx, self._plan)
        self.applied = False

    def __len__(self) -> int:
        return len(self._plan)

    def apply(self) -> None:
        if self.applied:
            raise AcmiValidationError("batch", "once", "a batch is applied once")
        self._plan.apply(self._ctx.store)
        self.applied = True

    def __enter__(self) -> Batch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.apply()


class EntityAPI:
    """Whole entities: one round trip to read one (profile, signals, newest events), a page
    of a category's ids, every key of one deleted at once."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def get(self, entity: str | EntityId, events: int = DEFAULT_BUNDLE_EVENTS) -> EntityContext:
        """Profile, signals and the newest ``events`` events (oldest first): one round trip.
        Any id ``list`` prints reads back (``EntityId.parse_listed``)."""
        eid = EntityId.parse_listed(entity)
        if isinstance(events, bool) or not isinstance(events, int) or not 0 <= events <= 1000:
            # the bound every surface gave (HTTP and MCP checked it before the core did)
            raise AcmiValidationError("events", "range", "must be an integer from 0 to 1000")
        keys = self._ctx.keys
        commands: list[Command] = [
            ("GET", keys.profile(eid)),
            ("GET", keys.signals(eid)),
        ]
        if events:
            commands.append(newest_command(keys.timeline(eid), events))
        replies = self._ctx.store.pipeline(commands)
        problems: list[str] = []

        def obj(reply: Reply | StoreCommandError, key: str) -> dict[str, Any] | None:
            try:
                return decode_object(_check_reply(reply, key), key)
            except CorruptData as exc:
                problems.append(exc.message)
                return None

        profile = obj(replies[0], keys.profile(eid))
        signals = live(obj(replies[1], keys.signals(eid)) or {}, self._ctx.clock)
        timeline, cursor = Events(), None
        if events:
            try:
                timeline, cursor = newest_events(
                    self._ctx.store, replies[2], keys.timeline(eid), events
                )
            except CorruptData as exc:
                problems.append(exc.message)
        return EntityContext(str(eid), profile, signals, timeline, problems, cursor)

    def list(self, category: str) -> list[str]:
        """Every entity id of a category (its ``acmi:<cat>:list`` index), sorted. Read in
        SSCAN steps of 1,000 (one round trip each) so no single reply is the whole index;
        to hold one page at a time instead, use ``iter_list`` or ``list_page``."""
        check_category(category)
        ids: set[str] = set()
        cursor: str | None = None
        while True:
            page = self.list_page(category, cursor=cursor, limit=_LIST_SCAN_COUNT)
            ids.update(page.entities)  # a set: SSCAN may repeat an id while the set resizes
            if page.next_cursor is None:
                return sorted(ids)
            cursor = page.next_cursor

    def list_page(
        self, category: str, *, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> EntityPage:
        """One page of a category's entity ids (one round trip): at most ``limit``
        (1-``MAX_PAGE_SIZE``), sorted within the page, in index (hash) order across pages;
        pass ``next_cursor`` back for the next page. An id present for the whole walk is
        listed; exactly once unless Redis resizes the set meanwhile (SSCAN's guarantee).
        Index members longer than an entity id can be (only another tool writes those)
        are left out."""
        keys = self._ctx.keys
        size = page_size(limit)
        bucket = 0
        if keys.buckets == 1:
            scan, count, after = (0, size, None) if cursor is None else entity_cursor(cursor)
        elif cursor is None:
            scan, count, after = 0, size, None
        else:  # B > 1: the buckets' indexes one after another, the cursor names the bucket
            bucket, scan, count, after = bucket_cursor(cursor, keys.buckets)
        key = keys.at(bucket).index(check_category(category))
        reply = _read(self._ctx.store, ("SSCAN", key, scan, "COUNT", count), key)
        next_scan, members = _scan_reply(reply, key)
        local_len = MAX_ENTITY_LEN - len(category) - 1
        ids = sorted({m for m in members if isinstance(m, bytes) and 0 < len(m) <= local_len})
        if after is not None:
            # the same SSCAN step again: leave out what the previous page returned
            ids = [m for m in ids if m > after]
        chosen = ids[:size]
        # B = 1 keeps its cursors ("e"); B > 1 names the bucket first ("b", bucket, ...)
        at: tuple[object, ...] = ("e",) if keys.buckets == 1 else ("b", bucket)
        if len(ids) > size:
            # the same SSCAN step has more: resume it after the last id of this page
            last = base64.urlsafe_b64encode(chosen[-1]).decode().rstrip("=")
            next_cursor: str | None = encode_cursor(*at, scan, count, last)
        elif next_scan:
            next_cursor = encode_cursor(*at, next_scan, size, None)
        elif bucket + 1 < keys.buckets:  # this bucket is done: the next one from its start
            next_cursor = encode_cursor("b", bucket + 1, 0, size, None)
        else:
            next_cursor = None
        entities = [f"{category}:{m.decode('utf-8', 'replace')}" for m in chosen]
        return EntityPage(entities, next_cursor)

    def iter_list(self, category: str, *, limit: int = DEFAULT_PAGE_SIZE) -> Iterator[str]:
        """Every entity id of a category, one ``list_page`` (one round trip) at a time, as
        the caller iterates: memory stays one page whatever the size of the category."""
        cursor: str | None = None
        while True:
            page = self.list_page(category, cursor=cursor, limit=limit)
            yield from page.entities
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def delete(self, entity: str | EntityId) -> None:
        """Every key of the entity (extensions included), its index entry and its place in
        the tenant's change, activity, wake and hygiene indexes, atomically. An id another
        writer made (``user:mikey@example.com``, ``parse_listed``) too, but not one holding
        ':' (``user:del:profile`` reads as a key's name: refused as ``parse`` refuses it)."""
        eid = deletable(entity)
        plan = WritePlan()
        keys = self._ctx.keys.of(eid)
        for key in keys.all_slots(eid):
            plan.delete(key)
        plan.srem(keys.index(eid.category), eid.local_id)
        from acmi_core.entities.items import namespace_member  # a rare call: no cold start

        member = namespace_member(eid)
        if member is not None:  # a store namespace leaves the tenant's namespace index
            plan.zhas(keys.store_namespaces(), member, keys.store_items(eid))
        # the activity and wake indexes (bucket 0's) hold agents only, pinned to bucket 0
        pinned = [keys.activity(), keys.wake_due()] if keys.bucket == 0 else []
        indexes = [keys.changed(), *pinned, keys.hygiene_due()]
        for index in indexes:
            plan.zrem(index, str(eid))
        plan.apply(self._ctx.store)

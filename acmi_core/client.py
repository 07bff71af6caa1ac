"""The ACMI client: profile, signals and timeline per entity, plus batch, get, list, delete.

    acmi = create_acmi()                       # Upstash, Redis or embedded, from the env
    acmi.profile.set("user:mikey", {"name": "Mikey"})
    acmi.signals.set("user:mikey", "current_task", "shooting")
    acmi.timeline.append("user:mikey", {"source": "user:mikey", "kind": "note",
                                        "correlationId": "c-1", "summary": "hi"})
    ctx = acmi.get("user:mikey")               # one round trip

Round trips: every write (including batch and its index) = 1, get = 1, read = 1.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from acmi_core.agents import AgentAPI
from acmi_core.errors import AcmiValidationError, CorruptData, StoreCommandError
from acmi_core.keys import Keys
from acmi_core.model import (
    EntityId,
    Event,
    check_category,
    check_json_object,
    check_profile,
    check_signal_key,
    dumps,
    event_from_member,
    parse_event,
    profile_defaults,
)
from acmi_core.settings import Settings
from acmi_core.store.base import Reply, Store
from acmi_core.writes import WritePlan

log = logging.getLogger("acmi")

Clock = Callable[[], int]
"""Returns now in epoch milliseconds."""

DEFAULT_BUNDLE_EVENTS = 50


def system_clock() -> int:
    return time.time_ns() // 1_000_000


# --- read results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Skipped:
    """A stored timeline member that could not be read. Its content is not echoed."""

    key: str
    position: int
    reason: str


class Events(list[Event]):
    """Timeline events (a plain list) plus the stored members that were skipped."""

    def __init__(self, events: Iterable[Event] = (), skipped: Iterable[Skipped] = ()) -> None:
        super().__init__(events)
        self.skipped: list[Skipped] = list(skipped)


@dataclass(frozen=True)
class EntityContext:
    """Everything about one entity, read in one round trip."""

    entity: str
    profile: dict[str, Any] | None
    signals: dict[str, Any]
    timeline: Events
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entity": self.entity,
            "profile": self.profile,
            "signals": self.signals,
            "timeline": [e.to_dict() for e in self.timeline],
            "skipped": [s.__dict__ for s in self.timeline.skipped],
            "problems": self.problems,
        }


def _decode_object(raw: Reply, key: str) -> dict[str, Any] | None:
    """A stored JSON object (profile or signals); None when the key is absent."""
    if raw is None:
        return None
    if not isinstance(raw, bytes):
        raise CorruptData(f"{key} does not hold a string", field=key)
    try:
        value = json.loads(raw.decode("utf-8"))
    except ValueError:  # includes UnicodeDecodeError
        raise CorruptData(f"{key} does not hold valid UTF-8 JSON", field=key) from None
    if value is None:  # the reference could store null profiles
        return None
    if not isinstance(value, dict):
        raise CorruptData(f"{key} holds JSON that is not an object", field=key)
    return value


def _decode_events(raw: Reply, key: str) -> Events:
    members = raw if isinstance(raw, list) else []
    events: list[Event] = []
    skipped: list[Skipped] = []
    for position, member in enumerate(members):
        parsed = event_from_member(member) if isinstance(member, bytes) else "not a string"
        if isinstance(parsed, Event):
            events.append(parsed)
        else:
            skipped.append(Skipped(key, position, parsed))
    if skipped:
        log.warning(
            "skipped unreadable timeline members",
            extra={
                "key": key,
                "count": len(skipped),
                "reasons": sorted({s.reason for s in skipped}),
            },
        )
    return Events(events, skipped)


def _check_reply(reply: Reply | StoreCommandError, key: str) -> Reply:
    if isinstance(reply, StoreCommandError):
        raise CorruptData(f"{key}: {reply}", field=key)
    return reply


# --- writers (shared by the client and batches) ---------------------------------------------


class _Slot:
    """Base of the slot APIs. With a plan, writes join it (a batch); without, each
    write is its own plan, applied at once (one round trip)."""

    def __init__(self, acmi: Acmi, plan: WritePlan | None = None) -> None:
        self._acmi = acmi
        self._keys = acmi.keys
        self._plan = plan

    def _write(self, build: Callable[[WritePlan], int]) -> Reply:
        if self._plan is not None:
            build(self._plan)
            return None
        plan = WritePlan()
        index = build(plan)
        return plan.apply(self._acmi.store)[index]

    def _index(self, plan: WritePlan, entity: EntityId) -> None:
        plan.sadd(self._keys.index(entity.category), entity.local_id)


class ProfileAPI(_Slot):
    """Who: a stable JSON object per entity."""

    def get(self, entity: str | EntityId) -> dict[str, Any] | None:
        key = self._keys.profile(EntityId.parse(entity))
        return _decode_object(self._acmi.store.execute(("GET", key)), key)

    def set(self, entity: str | EntityId, doc: Mapping[str, Any]) -> dict[str, Any] | None:
        """Overwrite the profile. actor_type/tenant_id are filled when absent."""
        eid = EntityId.parse(entity)
        stored = dict(check_profile(doc))
        for name, value in profile_defaults(eid, self._keys.tenant).items():
            stored.setdefault(name, value)
        text = dumps(stored, "profile")

        def build(plan: WritePlan) -> int:
            self._index(plan, eid)
            return plan.set(self._keys.profile(eid), text)

        self._write(build)
        return stored if self._plan is None else None

    def merge(self, entity: str | EntityId, partial: Mapping[str, Any]) -> dict[str, Any] | None:
        """Shallow merge, atomically; creates the profile when missing. Returns the merged
        doc (None inside a batch). Auto-filled actor_type/tenant_id never overwrite
        stored values; explicit values in ``partial`` do."""
        eid = EntityId.parse(entity)
        fields: list[tuple[Any, str, str]] = [
            ("set", name, dumps(value, f"profile.{name}"))
            for name, value in check_profile(partial).items()
        ]
        fields += [
            ("setnx", name, dumps(value))
            for name, value in profile_defaults(eid, self._keys.tenant).items()
            if name not in partial
        ]

        def build(plan: WritePlan) -> int:
            self._index(plan, eid)
            return plan.edit_object(self._keys.profile(eid), fields)

        merged = self._write(build)
        if merged is None:
            return None
        assert isinstance(merged, bytes)
        result: dict[str, Any] = json.loads(merged)
        return result

    def delete(self, entity: str | EntityId) -> None:
        eid = EntityId.parse(entity)
        self._write(lambda plan: plan.delete(self._keys.profile(eid)))


class SignalsAPI(_Slot):
    """Now: a flat map of key -> any JSON value per entity."""

    def all(self, entity: str | EntityId) -> dict[str, Any]:
        key = self._keys.signals(EntityId.parse(entity))
        return _decode_object(self._acmi.store.execute(("GET", key)), key) or {}

    def get(self, entity: str | EntityId, key: str, default: Any = None) -> Any:
        """The signal's value, or ``default`` when it is missing."""
        check_signal_key(key)
        return self.all(entity).get(key, default)

    def set(self, entity: str | EntityId, key: str, value: Any) -> None:
        self.update(entity, {key: value})

    def update(self, entity: str | EntityId, values: Mapping[str, Any]) -> None:
        """Set several signals in one atomic step; other signals are kept."""
        eid = EntityId.parse(entity)
        check_json_object(dict(values), "signals")
        fields: list[tuple[Any, str, str]] = [
            ("set", check_signal_key(k, f"signals.{k}"), dumps(v, f"signals.{k}"))
            for k, v in values.items()
        ]
        if not fields:
            raise AcmiValidationError("signals", "non_empty", "give at least one signal")

        def build(plan: WritePlan) -> int:
            self._index(plan, eid)
            return plan.edit_object(self._keys.signals(eid), fields)

        self._write(build)

    def replace(self, entity: str | EntityId, values: Mapping[str, Any]) -> None:
        """Replace the whole signals map."""
        eid = EntityId.parse(entity)
        for k in values:
            check_signal_key(k, f"signals.{k}")
        text = dumps(check_json_object(dict(values), "signals"), "signals")

        def build(plan: WritePlan) -> int:
            self._index(plan, eid)
            return plan.set(self._keys.signals(eid), text)

        self._write(build)

    def clear(self, entity: str | EntityId) -> None:
        """Delete every signal of the entity."""
        eid = EntityId.parse(entity)
        self._write(lambda plan: plan.delete(self._keys.signals(eid)))

    def delete(self, entity: str | EntityId, key: str) -> None:
        eid = EntityId.parse(entity)
        check_signal_key(key)
        self._write(lambda plan: plan.edit_object(self._keys.signals(eid), [("del", key, "null")]))


class TimelineAPI(_Slot):
    """Then: append-only Comms v1.1 events, ordered by ts (ties by stored bytes)."""

    def append(self, entity: str | EntityId, event: Mapping[str, Any] | Event) -> Event:
        """Validate, fill ts/speaker_type/tenant_id, store. An exact duplicate is stored once."""
        return self.extend(entity, [event])[0]

    def extend(
        self, entity: str | EntityId, events: Iterable[Mapping[str, Any] | Event]
    ) -> list[Event]:
        """Append several events in one atomic step: all are stored or none."""
        eid = EntityId.parse(entity)
        now = self._acmi.clock()
        parsed = [
            parse_event(e, now_ms=now, tenant=self._keys.tenant, field=f"events[{i}]")
            for i, e in enumerate(events)
        ]
        if not parsed:
            raise AcmiValidationError("events", "non_empty", "give at least one event")
        self._write(lambda plan: self.stage(plan, eid, parsed))
        return parsed

    def stage(self, plan: WritePlan, entity: EntityId, events: list[Event]) -> int:
        """Add validated events (see ``parse_event``) and the index entry to ``plan``."""
        key = self._keys.timeline(entity)
        self._index(plan, entity)
        index = -1
        for event in events:
            index = plan.zadd(key, event.ts, event.to_json())
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
        counts from the first event in that order."""
        key = self._keys.timeline(EntityId.parse(entity))
        low = _bound(since_ms, "since_ms", "-inf")
        high = _bound(until_ms, "until_ms", "+inf")
        if since_ms is not None and until_ms is not None and since_ms > until_ms:
            raise AcmiValidationError("since_ms", "range", "must be <= until_ms")
        command: list[str | int] = ["ZRANGE", key]
        command += [high, low, "BYSCORE", "REV"] if reverse else [low, high, "BYSCORE"]
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise AcmiValidationError("limit", "range", "must be an integer >= 1")
            command += ["LIMIT", 0, limit]
        return _decode_events(self._acmi.store.execute(command), key)

    def size(self, entity: str | EntityId) -> int:
        reply = self._acmi.store.execute(("ZCARD", self._keys.timeline(EntityId.parse(entity))))
        assert isinstance(reply, int)
        return reply


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

    def __init__(self, acmi: Acmi) -> None:
        self._acmi = acmi
        self._plan = WritePlan()
        self.profile = ProfileAPI(acmi, self._plan)
        self.signals = SignalsAPI(acmi, self._plan)
        self.timeline = TimelineAPI(acmi, self._plan)
        self.applied = False

    def __len__(self) -> int:
        return len(self._plan)

    def apply(self) -> None:
        if self.applied:
            raise AcmiValidationError("batch", "once", "a batch is applied once")
        self._plan.apply(self._acmi.store)
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


class Acmi:
    """One tenant's view of an ACMI store. Thread-safe; share one per process."""

    def __init__(
        self,
        store: Store,
        settings: Settings | None = None,
        *,
        tenant: str | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.store = store
        self.settings = settings or Settings()
        self.keys = Keys(tenant or self.settings.default_tenant, self.settings.default_tenant)
        self.clock = clock
        self.profile = ProfileAPI(self)
        self.signals = SignalsAPI(self)
        self.timeline = TimelineAPI(self)
        self.agents = AgentAPI(self)

    @property
    def tenant(self) -> str:
        return self.keys.tenant

    def for_tenant(self, tenant: str) -> Acmi:
        """The same store seen as another tenant (keys under acmi:tenant:<t>:...)."""
        return Acmi(self.store, self.settings, tenant=tenant, clock=self.clock)

    def batch(self) -> Batch:
        return Batch(self)

    def get(self, entity: str | EntityId, events: int = DEFAULT_BUNDLE_EVENTS) -> EntityContext:
        """Profile, signals and the newest ``events`` events (oldest first): one round trip."""
        eid = EntityId.parse(entity)
        if isinstance(events, bool) or not isinstance(events, int) or events < 0:
            raise AcmiValidationError("events", "range", "must be an integer >= 0")
        keys = self.keys
        commands: list[tuple[str | int, ...]] = [
            ("GET", keys.profile(eid)),
            ("GET", keys.signals(eid)),
        ]
        if events:
            commands.append(("ZRANGE", keys.timeline(eid), -events, -1))
        replies = self.store.pipeline(commands)
        problems: list[str] = []

        def obj(reply: Reply | StoreCommandError, key: str) -> dict[str, Any] | None:
            try:
                return _decode_object(_check_reply(reply, key), key)
            except CorruptData as exc:
                problems.append(exc.message)
                return None

        profile = obj(replies[0], keys.profile(eid))
        signals = obj(replies[1], keys.signals(eid)) or {}
        timeline = Events()
        if events:
            try:
                timeline = _decode_events(
                    _check_reply(replies[2], keys.timeline(eid)), keys.timeline(eid)
                )
            except CorruptData as exc:
                problems.append(exc.message)
        return EntityContext(str(eid), profile, signals, timeline, problems)

    def list(self, category: str) -> list[str]:
        """Entity ids of a category (from its ``acmi:<cat>:list`` index), sorted."""
        key = self.keys.index(check_category(category))
        reply = _check_reply(self.store.execute(("SMEMBERS", key)), key)
        ids = reply if isinstance(reply, list) else []
        return sorted(
            f"{category}:{m.decode('utf-8', 'replace')}" for m in ids if isinstance(m, bytes)
        )

    def delete(self, entity: str | EntityId) -> None:
        """Every key of the entity (extensions included) and its index entry, atomically."""
        eid = EntityId.parse(entity)
        plan = WritePlan()
        for key in self.keys.all_slots(eid):
            plan.delete(key)
        plan.srem(self.keys.index(eid.category), eid.local_id)
        plan.apply(self.store)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Acmi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

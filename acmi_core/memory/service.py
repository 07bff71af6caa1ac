"""The seed's memory commands on a store (``MemoryAPI(acmi)``), each a bounded number of
round trips (reads are one pipeline, plus one for the topic profiles a read needs; every
write is one :class:`~acmi_core.store.writes.WritePlan`, applied after its budget check).

===================  ===========================================================  ==========
operation            what                                                          round trips
===================  ===========================================================  ==========
status               sizes, lines, tokens, budget verdicts, staleness, next due    2
remember             write-ahead: stored (one script) before it returns            2
active / set_active  the hot layer: read / replace                                 1 / 1
daily_summary        one day's note and what it holds                              1
topic_create         a ``topic:<slug>`` entity from the seed's template, linked    2
prune                hot items done or dated > N days ago moved to today's note    2
handoff / take       HANDOFF.md written / read and cleared atomically (GETDEL)     1 / 1
review               the weekly review: promote lessons and decisions, prune       2
search               every layer, fast to slow, ranked                             2
                     (+ 1 sink read per archived quarter, 4 at most)
debug                missing pieces, hot/warm conflicts, stale items               2
export_snapshot      the whole tree                                                2 + pages
import_snapshot      a tree, idempotent: only what differs is written              2 + pages
                                                                                   + chunks
===================  ===========================================================  ==========

Budgets (``acmi_core.memory.budgets``) are checked on the file a write produces, before
anything is sent: over budget is :class:`MemoryOverBudget` (400) naming the layer, the
limit and the seed's fix, and nothing is stored; nothing is ever cut. A check reads then
writes, so two writers racing near a limit can both pass: a budget is the seed's
housekeeping rule, not a hard quota.

Where things live: ``acmi_core.memory.slots`` (signals ``hot.*`` and ``heartbeat.*``,
profile ``warm.*``, timeline events, ``topic:<slug>`` profiles) plus
the ``keys.MEMORY_ARCHIVE`` slot (archive documents, a HASH by quarter), the
``keys.MEMORY_HANDOFF`` slot (the handoff) and the ``keys.MEMORY_STAMPS`` slot (the ts of
every daily-note line, added by the write that adds the line: the wake bundle reads
today's lines by them; a stamp whose lines went stays and reads nothing).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError, Conflict, CorruptData, NotFound
from acmi_core.base.keys import MEMORY_ARCHIVE, MEMORY_HANDOFF, MEMORY_STAMPS
from acmi_core.base.model import EntityId, Event, dumps, encode_event, parse_event
from acmi_core.base.pages import MAX_PAGE_SIZE
from acmi_core.base.stored import decode_events, decode_object
from acmi_core.memory.budgets import BUDGETS, BudgetReport, check, check_snapshot, count_lines
from acmi_core.memory.conflicts import hot_warm_conflicts
from acmi_core.memory.layers import (
    ACTIVE_CONTEXT,
    LAYERS,
    LONG_TERM_MEMORY,
    SEARCH_ORDER,
    SLUG_RE,
    TOPIC,
    ActiveContext,
    DailyNote,
    Layer,
    MemorySnapshot,
    Quarter,
    Template,
)
from acmi_core.memory.slots import (
    DAILY,
    HEADER_KIND,
    HEARTBEAT,
    HOT,
    TOPIC_LINKS,
    TOPIC_PREFIX,
    WARM,
    SlotImage,
    daily_from_events,
    entry_event,
    from_profile,
    from_signals,
    heartbeat_from_signals,
    new_topic,
    snapshot_from_slots,
    snapshot_to_slots,
    to_signals,
    topic_entity,
    topic_from_profile,
    topic_to_profile,
    zone,
)
from acmi_core.memory.tree import read_tree
from acmi_core.store.base import Reply
from acmi_core.store.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.client import Acmi

DAY_MS: Final = 86_400_000
MAX_TEXT_LEN: Final = 2_000  # one remembered line (a daily note is 10 KB in all)
MAX_HANDOFF_BYTES: Final = 16 * 1024
MAX_QUERY_LEN: Final = 200
MAX_QUERY_TERMS: Final = 20
MAX_SEARCH_HITS: Final = 200
# Events a read takes from the timeline in one reply: search looks at the newest this
# many, status and debug at the retention window (seed §4: 30 days of daily notes, at
# most 200 lines a day within budget), review at the last 7 days.
SEARCH_EVENTS: Final = 2_000
# the newest quarters whose raw archived events a search reads from the sink (one GET
# each: an object holds a whole quarter, read whole)
ARCHIVED_QUARTERS: Final = 4
WINDOW_EVENTS: Final = 10_000
RETENTION_DAYS: Final = 30
REVIEW_DAYS: Final = 7
DEFAULT_PRUNE_DAYS: Final = 7
STALE_TOPIC_DAYS: Final = 30
IMPORT_CHUNK_OPS: Final = 500  # ops per write script during an import
REMEMBER_LAYERS: Final = ("daily", "hot", "warm", "topic")
DEFAULT_SECTION: Final[Mapping[str, str]] = {
    "hot": "in_progress",
    "warm": "lessons",
    "topic": "key_facts",
}
DAILY_SECTIONS: Final = {
    "morning": "Morning",
    "afternoon": "Afternoon",
    "takeaways": "Key Takeaways",
    "tomorrow": "Tomorrow",
}
_DATE_IN_TEXT: Final = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")

Progress = Callable[[int, int], None]
"""Called with (ops written so far, ops in all) as an import writes."""


class MemoryOverBudget(AcmiValidationError):
    """A write would take a memory file over its layer's budget (seed §12). ``field`` is
    what the caller sent (``text``, ``files.MEMORY.md``); the message names the layer, the
    file, the limit and the seed's fix. Nothing was stored (HTTP 400)."""

    code = "memory_over_budget"

    def __init__(self, report: BudgetReport, field: str) -> None:
        budget = BUDGETS[report.layer]
        super().__init__(
            field,
            "memory_budget",
            f"the {report.layer} layer's {report.path or budget.file} would be "
            f"{report.lines} lines / {report.bytes} bytes, over its budget of "
            f"{budget.max_lines} lines / {budget.max_bytes} bytes ({' and '.join(report.over)});"
            f" fix: {budget.fix}. Nothing was stored",
        )
        self.report = report


# --- small helpers --------------------------------------------------------------------------


def _one_line(value: object, name: str, max_len: int = MAX_TEXT_LEN) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AcmiValidationError(name, "required", "must be a non-empty string")
    if "\n" in value or "\r" in value:
        raise AcmiValidationError(name, "one_line", "must be one line (no line break)")
    if len(value) > max_len:
        raise AcmiValidationError(name, "max_length", f"must be at most {max_len} characters")
    return value.strip()


def _object(raw: Reply, key: str) -> dict[str, Any]:
    """A stored JSON object ({} when absent)."""
    return decode_object(raw, key) or {}


def _reply(reply: object, key: str) -> Reply:
    if isinstance(reply, Exception):  # a pipeline slot's StoreCommandError
        raise CorruptData(f"{key}: {reply}", field=key)
    assert reply is None or isinstance(reply, bytes | int | list)
    return reply


def _hash(raw: Reply, key: str) -> dict[str, dict[str, Any]]:
    items = raw if isinstance(raw, list) else []
    out: dict[str, dict[str, Any]] = {}
    for name, value in zip(items[::2], items[1::2], strict=False):
        if isinstance(name, bytes):
            out[name.decode("utf-8", "replace")] = _object(value, f"{key}.{name!r}")
    return out


def _events(raw: Reply) -> list[Event]:
    decoded, _ = decode_events(raw if isinstance(raw, list) else [])
    return [event for event, _ in decoded]


def _changed(current: Mapping[str, Any], key: str, value: Any) -> bool:
    return key not in current or dumps(current[key]) != dumps(value)


def _edits(
    current: Mapping[str, Any], new: Mapping[str, Any], delete: Iterable[str] = ()
) -> list[tuple[Any, str, str]]:
    """The object edit that turns ``current`` into ``new`` on those keys: only what
    differs (so a re-run writes nothing), then the deletions of keys ``current`` has."""
    fields: list[tuple[Any, str, str]] = [
        ("set", k, dumps(v, k)) for k, v in new.items() if _changed(current, k, v)
    ]
    fields += [("del", k, "null") for k in delete if k in current and k not in new]
    return fields


def _known(template: Template, prefix: str) -> frozenset[str]:
    names = {"layout", "title", *(k for k, _ in template.fields)}
    names |= {s.key for s in template.sections}
    return frozenset(prefix + n for n in names)


HOT_KEYS: Final = _known(ACTIVE_CONTEXT, HOT)
WARM_KEYS: Final = _known(LONG_TERM_MEMORY, WARM)
TOPIC_KEYS: Final = _known(TOPIC, TOPIC_PREFIX)


def _append_item(current: Any, item: Any) -> Any:
    """A section value with ``item`` added at the end of its body."""
    if current is None or current == []:
        return [item]
    if isinstance(current, str):  # prose: its lines stay lines
        return [{"line": line} for line in current.split("\n")] + [item]
    if isinstance(current, list):
        return [*current, item]
    if isinstance(current, dict):
        return {**current, "body": _append_item(current.get("body"), item)}
    return [item]


def _local(now_ms: float, tz: dt.tzinfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(now_ms / 1000, tz)


def _midnight_ms(day: dt.date, tz: dt.tzinfo) -> int:
    return int(dt.datetime.combine(day, dt.time(), tzinfo=tz).timestamp()) * 1000


def _stamp(now: dt.datetime) -> str:
    """The seed's ``Last updated: 2026-01-15 14:30 GMT``."""
    return f"{now:%Y-%m-%d %H:%M} {now.tzname() or 'UTC'}"


def _item_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for name in ("task", "text", "line", "decision"):
            if isinstance(item.get(name), str):
                return str(item[name])
    return ""


def _first_date(text: str) -> dt.date | None:
    for match in _DATE_IN_TEXT.finditer(text):
        try:
            return dt.date.fromisoformat(match[1])
        except ValueError:
            continue
    return None


def _next_month(day: dt.date) -> dt.date:
    return dt.date(day.year + day.month // 12, day.month % 12 + 1, 1)


def _quarter_end(day: dt.date) -> dt.date:
    quarter = Quarter.of(day)
    return _next_month(dt.date(day.year, quarter.number * 3, 1)) - dt.timedelta(days=1)


def _text_of(event: Event) -> str:
    payload = event.payload if isinstance(event.payload, dict) else {}
    text = payload.get("text", event.summary)
    return text if isinstance(text, str) else event.summary


# --- what a read brings back ----------------------------------------------------------------


@dataclass
class MemoryState:
    """One entity's memory as read: signals, profile, the events of a window, topic
    profiles (by slug), archive documents (by quarter), the pending handoff."""

    entity: EntityId
    signals: dict[str, Any]
    profile: dict[str, Any]
    events: list[Event]
    archives: dict[str, dict[str, Any]]
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    handoff: dict[str, Any] | None = None
    total_events: int = 0
    truncated: bool = False

    @property
    def tz(self) -> dt.tzinfo:
        return _tz(self.signals)

    @property
    def topic_links(self) -> list[str]:
        links = self.profile.get(TOPIC_LINKS)
        return [x for x in links if isinstance(x, str)] if isinstance(links, list) else []

    def snapshot(self, *, include_foreign: bool = False) -> MemorySnapshot:
        image = SlotImage(self.signals, self.profile, self.events, self.topics, self.archives)
        return snapshot_from_slots(image, include_foreign=include_foreign)


# (entity, quarter "YYYY-QN") -> the events archived in its object, None when unreadable
ArchivedReader = Callable[[EntityId, str], Sequence[Event] | None]


def _raw_quarters(archives: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The quarters, newest first, whose document names a raw object (written by an
    archive with a sink: its metrics carry a ``Raw events:`` line)."""
    out = []
    for quarter, doc in archives.items():
        metrics = doc.get("archive.metrics")
        if isinstance(metrics, list) and any(
            isinstance(m, str) and m.startswith("Raw events:") for m in metrics
        ):
            out.append(quarter)
    return sorted(out, reverse=True)


def _archived_line(event: Event) -> str:
    """One archived event as a search line: when, kind, who, text (one line)."""
    when = dt.datetime.fromtimestamp(float(event.ts) / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")
    text = " ".join(_text_of(event).split())
    return f"{when} {event.kind} by {event.source}: {text}"


def _tz(signals: Mapping[str, Any]) -> dt.tzinfo:
    """The zone of the entity's [HH:MM] stamps: heartbeat-state's ``timezone``, or UTC."""
    heartbeat = heartbeat_from_signals(signals)
    return zone("UTC" if heartbeat is None else heartbeat.timezone)


def _slug(link: str) -> str:
    return link.removeprefix("topic:")


@dataclass(frozen=True)
class Hit:
    """A search result: a line of a memory file."""

    layer: str
    path: str
    line: int
    text: str
    matched: int
    terms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "path": self.path,
            "line": self.line,
            "text": self.text,
            "score": round(self.matched / self.terms, 3),
        }


# --- the API --------------------------------------------------------------------------------


class MemoryAPI:
    """The seed's memory commands for the entities of ``acmi``'s tenant."""

    def __init__(self, acmi: Acmi) -> None:
        self._acmi = acmi
        self._keys = acmi.keys

    # -- reads

    def _slots(self, eid: EntityId) -> tuple[str, str]:
        return self._keys.slot(eid, MEMORY_ARCHIVE), self._keys.slot(eid, MEMORY_HANDOFF)

    def load(
        self,
        entity: str | EntityId,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = WINDOW_EVENTS,
        newest: bool = False,
        events: bool = True,
        topics: bool = True,
        extras: bool = False,
    ) -> MemoryState:
        """Signals, profile, archives and (``events``) up to ``limit`` timeline events in
        [since_ms, until_ms] (``newest``: the newest ones) in one pipeline; the linked
        topic profiles in a second (``topics``). ``extras``: the handoff and the
        timeline's size too."""
        eid = EntityId.parse(entity)
        keys = self._keys
        archive_key, handoff_key = self._slots(eid)
        timeline = keys.timeline(eid)
        low = "-inf" if since_ms is None else str(since_ms)
        high = "+inf" if until_ms is None else str(until_ms)
        commands: list[tuple[str | int, ...]] = [
            ("GET", keys.signals(eid)),
            ("GET", keys.profile(eid)),
            ("HGETALL", archive_key),
        ]
        if events:
            if newest:
                commands.append(
                    ("ZRANGE", timeline, high, low, "BYSCORE", "REV", "LIMIT", 0, limit)
                )
            else:
                commands.append(("ZRANGE", timeline, low, high, "BYSCORE", "LIMIT", 0, limit))
        if extras:
            commands += [("GET", handoff_key), ("ZCARD", timeline)]
        replies = self._acmi.store.pipeline(commands)
        signals = _object(_reply(replies[0], keys.signals(eid)), keys.signals(eid))
        profile = _object(_reply(replies[1], keys.profile(eid)), keys.profile(eid))
        archives = _hash(_reply(replies[2], archive_key), archive_key)
        found: list[Event] = []
        at = 3
        truncated = False
        if events:
            raw = _reply(replies[3], timeline)
            truncated = isinstance(raw, list) and len(raw) >= limit
            found = _events(raw)
            if newest:
                found.reverse()
            at = 4
        state = MemoryState(eid, signals, profile, found, archives, truncated=truncated)
        if extras:
            handoff = _object(_reply(replies[at], handoff_key), handoff_key)
            state.handoff = handoff or None
            size = _reply(replies[at + 1], timeline)
            state.total_events = size if isinstance(size, int) else 0
        if topics and state.topic_links:
            state.topics = self._topics(state.topic_links)
        return state

    def _topics(self, links: Sequence[str]) -> dict[str, dict[str, Any]]:
        eids = [EntityId.parse(link, TOPIC_LINKS) for link in links]
        replies = self._acmi.store.pipeline([("GET", self._keys.profile(e)) for e in eids])
        return {
            e.local_id: _object(_reply(r, self._keys.profile(e)), self._keys.profile(e))
            for e, r in zip(eids, replies, strict=True)
        }

    def _now(self, now_ms: int | None) -> int:
        if now_ms is None:
            return self._acmi.clock()
        if isinstance(now_ms, bool) or not isinstance(now_ms, int) or now_ms < 0:
            raise AcmiValidationError("now_ms", "integer", "must be epoch milliseconds >= 0")
        return now_ms

    # -- the tree

    def export_snapshot(self, entity: str | EntityId) -> MemorySnapshot:
        """The entity's memory tree: 2 round trips + one per timeline page."""
        state = self.load(entity, events=False)
        for page in self._acmi.timeline.pages(state.entity, limit=MAX_PAGE_SIZE):
            state.events.extend(page.events)
        return state.snapshot()

    def _raw_window(self, eid: EntityId, low: int, high: int) -> list[tuple[bytes, Event]]:
        """Every stored member with ts in [low, high], with its event: one round trip per
        ``MAX_PAGE_SIZE`` members (an import's days, so bounded by the tree)."""
        key = self._keys.timeline(eid)
        out: list[tuple[bytes, Event]] = []
        offset = 0
        while True:
            raw = self._acmi.store.execute(
                ("ZRANGE", key, low, high, "BYSCORE", "LIMIT", offset, MAX_PAGE_SIZE)
            )
            members = [m for m in (raw if isinstance(raw, list) else []) if isinstance(m, bytes)]
            for member in members:
                decoded, _ = decode_events([member])
                if decoded:
                    out.append((member, decoded[0][0]))
            if len(members) < MAX_PAGE_SIZE:
                return out
            offset += MAX_PAGE_SIZE

    def import_snapshot(
        self,
        entity: str | EntityId,
        snapshot: MemorySnapshot,
        *,
        progress: Progress | None = None,
        strict: bool = False,
    ) -> dict[str, Any]:
        """Migrate a tree into ACMI, idempotently: what the store already holds is not
        written again (a re-run sends no write at all). A day's note replaces what an
        earlier import stored for that day (its header, lines edited or removed since);
        lines written through the API that the tree does not hold are kept. A layer the
        tree has replaces the stored one (its sections absent from the tree are deleted);
        a layer it lacks is left alone. Files over budget are imported whole and listed in
        ``over_budget`` (a migration must not lose what the tree holds; the seed reports,
        never cuts); ``strict`` refuses them instead (MemoryOverBudget, nothing stored).

        Round trips: 2 reads, one per 1,000 events of the tree's days, one per
        ``IMPORT_CHUNK_OPS`` writes."""
        eid = EntityId.parse(entity)
        over = [r for r in check_snapshot(snapshot) if not r.ok]
        if over and strict:
            raise MemoryOverBudget(over[0], f"files.{over[0].path}")
        image = self._guarded(snapshot_to_slots(snapshot, source=str(eid)))
        state = self.load(eid, events=False, topics=False)
        linked = sorted({*state.topic_links, *image.profile.get(TOPIC_LINKS, [])})
        state.topics = self._topics(linked) if image.topics else {}
        counts: dict[str, int] = defaultdict(int)
        ops: list[Callable[[WritePlan], object]] = []

        self._daily_ops(eid, snapshot, image, counts, ops)

        # hot + heartbeat: signals
        signal_delete: set[str] = set()
        if snapshot.active_context is not None:
            signal_delete |= HOT_KEYS
        if snapshot.heartbeat is not None:
            signal_delete |= {k for k in state.signals if k.startswith(HEARTBEAT)}
        edit = _edits(state.signals, image.signals, signal_delete)
        if edit:
            ops.append(_edit_op(self._acmi, eid, "signals", edit))
            counts["signals_written"] = len(edit)

        # warm: profile (topic links are added to, never dropped)
        profile_new = {**image.profile}
        if linked:
            profile_new[TOPIC_LINKS] = linked
        edit = _edits(state.profile, profile_new, WARM_KEYS if snapshot.memory is not None else ())
        if edit:
            ops.append(_edit_op(self._acmi, eid, "profile", edit))
            counts["profile_written"] = len(edit)

        for slug, fields in image.topics.items():
            edit = _edits(state.topics.get(slug, {}), fields, TOPIC_KEYS)
            if edit:
                ops.append(_edit_op(self._acmi, topic_entity(slug), "profile", edit))
                counts["topics_written"] += 1

        archive_key, _ = self._slots(eid)
        for quarter, doc in image.archives.items():
            if _changed(state.archives, quarter, doc):
                text = dumps(doc, f"archives.{quarter}")
                ops.append(_hset(archive_key, quarter, text))
                counts["archives_written"] += 1

        written = self._apply_chunks(ops, progress)
        return {
            "entity": str(eid),
            "files": len(snapshot.daily)
            + len(snapshot.topics)
            + len(snapshot.archives)
            + sum(x is not None for x in (snapshot.active_context, snapshot.memory))
            + (snapshot.heartbeat is not None),
            "ignored": list(snapshot.ignored),
            "over_budget": [r.to_dict() for r in over],
            "writes": written,
            **{
                k: counts[k]
                for k in (
                    "events_added",
                    "events_removed",
                    "events_unchanged",
                    "signals_written",
                    "profile_written",
                    "topics_written",
                    "archives_written",
                )
            },
        }

    def _guarded(self, image: SlotImage) -> SlotImage:
        """An import's slots through the secret guard, file by file (paths name the file:
        ``files["MEMORY.md"]["warm.lessons"][0]``), all before anything is written."""
        guard = self._acmi.guard
        tenant, now = self._keys.tenant, self._acmi.clock()
        signals = guard(image.signals, 'files["ACTIVE-CONTEXT.md"]')
        profile = guard(image.profile, 'files["MEMORY.md"]')
        topics = {
            slug: guard(doc, f'files["memory/topics/{slug}.md"]')
            for slug, doc in image.topics.items()
        }
        archives = {
            quarter: guard(doc, f'files["memory/archive/{quarter}.md"]')
            for quarter, doc in image.archives.items()
        }
        events: list[Event] = []
        for n, event in enumerate(image.events):
            payload = event.payload if isinstance(event.payload, dict) else {}
            day = payload.get("date")
            where = f'files["memory/{day}.md"]' if isinstance(day, str) else f"events[{n}]"
            data = event.to_dict()
            clean = guard(data, where)
            # redacted: validated again (the size limits too); its ts is kept
            events.append(
                event
                if clean is data
                else parse_event(clean, now_ms=now, tenant=tenant, field=where)
            )
        return SlotImage(signals, profile, events, topics, archives)

    def _daily_ops(
        self,
        eid: EntityId,
        snapshot: MemorySnapshot,
        image: SlotImage,
        counts: dict[str, int],
        ops: list[Callable[[WritePlan], object]],
    ) -> None:
        """An import's timeline writes: the tree's days replace what an earlier import
        stored for them (see ``import_snapshot``)."""
        now = self._acmi.clock()
        tz = zone(snapshot.timezone)
        timeline = self._keys.timeline(eid)
        if not snapshot.daily:
            return
        low = _midnight_ms(snapshot.daily[0].date, tz)
        high = _midnight_ms(snapshot.daily[-1].date + dt.timedelta(days=1), tz) - 1
        stored = self._raw_window(eid, low, high)
        days = {note.date.isoformat() for note in snapshot.daily}
        members = {m for m, _ in stored}
        by_cid: dict[str, list[tuple[bytes, Event]]] = defaultdict(list)
        for member, event in stored:
            payload = event.payload if isinstance(event.payload, dict) else {}
            if payload.get("memory") == DAILY and payload.get("date") in days:
                by_cid[event.correlationId].append((member, event))
        new_cids = set()
        for n, raw_event in enumerate(image.events):
            event, text = encode_event(
                raw_event, now_ms=now, tenant=self._keys.tenant, field=f"events[{n}]"
            )
            new_cids.add(event.correlationId)
            if text.encode("utf-8") in members:
                counts["events_unchanged"] += 1
                continue
            olds = by_cid.get(event.correlationId, [])
            by_api = [o for o in olds if not isinstance(_numbered(o[1]), int)]
            if by_api and event.kind != HEADER_KIND:
                counts["events_unchanged"] += 1  # the line was written through the API
                continue
            for member, _ in olds:  # the same line or header, moved or regrown
                ops.append(_zrem(timeline, member))
                counts["events_removed"] += 1
            ops.append(_zadd(self._acmi, eid, event, text))
            counts["events_added"] += 1
        for cid, olds in by_cid.items():
            if cid in new_cids:
                continue
            for member, event in olds:
                if event.kind == HEADER_KIND or isinstance(_numbered(event), int):
                    ops.append(_zrem(timeline, member))  # a line the tree no longer has
                    counts["events_removed"] += 1

    def _apply_chunks(
        self, ops: list[Callable[[WritePlan], object]], progress: Progress | None
    ) -> int:
        total = len(ops)
        if progress is not None:
            progress(0, total)
        done = 0
        for start in range(0, total, IMPORT_CHUNK_OPS):
            plan = WritePlan()
            for op in ops[start : start + IMPORT_CHUNK_OPS]:
                op(plan)
            plan.apply(self._acmi.store)
            done = min(total, start + IMPORT_CHUNK_OPS)
            if progress is not None:
                progress(done, total)
        return total

    def migrate(
        self,
        entity: str | EntityId,
        root: str | Path,
        *,
        progress: Progress | None = None,
        strict: bool = False,
    ) -> dict[str, Any]:
        """``/memory-migrate``: the seed's tree under ``root`` imported into ACMI."""
        return self.import_snapshot(entity, read_tree(root), progress=progress, strict=strict)

    # -- status

    def status(self, entity: str | EntityId, now_ms: int | None = None) -> dict[str, Any]:
        """``/memory-status``: each file's size, lines, estimated tokens and budget verdict
        (with the seed's fix), per layer; staleness from heartbeat-state; what maintenance
        is next. Daily notes: the retention window (30 days). 2 round trips."""
        now = self._now(now_ms)
        state = self.load(
            entity, since_ms=now - (RETENTION_DAYS + 1) * DAY_MS, until_ms=now + DAY_MS, extras=True
        )
        tz = state.tz
        today = _local(now, tz).date()
        snap = state.snapshot(include_foreign=True)
        snap = _window(snap, today)
        reports = check_snapshot(snap)
        layers: dict[str, Any] = {}
        for layer in LAYERS:
            mine = [r for r in reports if r.layer == layer]
            over = [r for r in mine if not r.ok]
            budget = BUDGETS.get(layer)
            layers[layer] = {
                "files": len(mine),
                "lines": sum(r.lines for r in mine),
                "bytes": sum(r.bytes for r in mine),
                "tokens": sum(r.tokens for r in mine),
                "budget": None
                if budget is None
                else {"max_lines": budget.max_lines, "max_bytes": budget.max_bytes, "per": "file"},
                "verdict": "over" if over else "ok",
                "over": [r.path for r in over],
                "fix": budget.fix if over and budget is not None else None,
            }
        heartbeat = heartbeat_from_signals(state.signals)
        data: Mapping[str, Any] = {} if heartbeat is None else heartbeat.data
        stale: dict[str, Any] = {}
        for key in ("last_memory_review", "last_archive", "last_active_context_prune"):
            raw = data.get(key)
            when = dt.date.fromisoformat(raw) if isinstance(raw, str) else None
            stale[key] = {"date": raw, "days_ago": None if when is None else (today - when).days}
        return {
            "entity": str(state.entity),
            "today": today.isoformat(),
            "files": [r.to_dict() for r in reports],
            "layers": layers,
            "daily_notes_in_window": len(snap.daily),
            "timeline_events": state.total_events,
            "staleness": stale,
            "next_maintenance": _next_due(data, today),
            "handoff_pending": state.handoff is not None,
            "heartbeat_state": dict(data),
        }

    # -- the hot layer

    def active(self, entity: str | EntityId) -> dict[str, Any]:
        """``/active-context``: ACTIVE-CONTEXT.md, its sections and budget. 1 round trip."""
        eid = EntityId.parse(entity)
        signals = self._acmi.signals.all(eid)
        active = from_signals(signals)
        text = None if active is None else active.render()
        return {
            "entity": str(eid),
            "path": "ACTIVE-CONTEXT.md",
            "text": text,
            "sections": {k[len(HOT) :]: v for k, v in signals.items() if k in HOT_KEYS},
            "budget": None if text is None else check("hot", text, "ACTIVE-CONTEXT.md").to_dict(),
        }

    def set_active(self, entity: str | EntityId, text: object) -> dict[str, Any]:
        """Replace the hot layer with an ACTIVE-CONTEXT.md text (checked against its
        budget first). 1 round trip."""
        eid = EntityId.parse(entity)
        if not isinstance(text, str) or not text.strip():
            raise AcmiValidationError("text", "required", "must be the ACTIVE-CONTEXT.md text")
        text = self._acmi.guard(text, "text")
        active = ActiveContext.parse(text, "text")
        report = check("hot", active.render(), "ACTIVE-CONTEXT.md")
        if not report.ok:
            raise MemoryOverBudget(report, "text")
        edit = [(m, k, v) for m, k, v in _edits({}, to_signals(active))]
        edit += [("del", k, "null") for k in sorted(HOT_KEYS - {k for _, k, _ in edit})]
        plan = WritePlan()
        _edit_op(self._acmi, eid, "signals", edit)(plan)
        plan.apply(self._acmi.store)
        return {"entity": str(eid), "path": "ACTIVE-CONTEXT.md", "budget": report.to_dict()}

    # -- writes

    def remember(
        self,
        entity: str | EntityId,
        text: object,
        *,
        layer: str = "warm",
        section: str | None = None,
        topic: str | None = None,
        now_ms: int | None = None,
    ) -> dict[str, Any]:
        """``/remember``, write-ahead: stored (one script) before it returns. ``layer``:
        ``warm`` (MEMORY.md, default section ``lessons``), ``hot`` (ACTIVE-CONTEXT.md,
        default ``in_progress``: an open task), ``daily`` (today's note, ``- [HH:MM]
        text`` under Morning/Afternoon by the hour, or ``section``), ``topic`` (the topic
        file ``topic`` names, default ``key_facts``). 2 round trips: read, write."""
        eid = EntityId.parse(entity)
        line = _one_line(self._acmi.guard(text, "text"), "text")
        if layer not in REMEMBER_LAYERS:
            raise AcmiValidationError(
                "layer", "memory_layer", f"must be one of {', '.join(REMEMBER_LAYERS)}"
            )
        now = self._now(now_ms)
        if layer == "daily":
            return self._remember_daily(eid, line, section, now)
        template = {"hot": ACTIVE_CONTEXT, "warm": LONG_TERM_MEMORY, "topic": TOPIC}[layer]
        key = section or DEFAULT_SECTION[layer]
        if not any(s.key == key for s in template.sections):
            known = ", ".join(s.key for s in template.sections)
            raise AcmiValidationError("section", "memory_section", f"{layer}: one of {known}")
        if layer == "hot":
            return self._remember_hot(eid, key, line, now)
        if layer == "warm":
            return self._remember_warm(eid, key, line)
        return self._remember_topic(eid, key, line, topic, now)

    def _remember_hot(self, eid: EntityId, key: str, line: str, now: int) -> dict[str, Any]:
        signals = self._acmi.signals.all(eid)
        local = _local(now, _tz(signals))
        current = signals.get(HOT + key)
        value: Any
        if key == "current_priority":
            value = line  # the seed: one priority
        elif key == "next_session":
            value = f"{current}\n{line}" if isinstance(current, str) and current else line
        elif key == "in_progress":
            value = _append_item(current, {"task": line, "done": False})
        else:
            value = _append_item(current, line)
        new = {HOT + key: value, HOT + "updated": _stamp(local)}
        active = from_signals({**signals, **new})
        assert active is not None
        report = check("hot", active.render(), "ACTIVE-CONTEXT.md")
        if not report.ok:
            raise MemoryOverBudget(report, "text")
        plan = WritePlan()
        _edit_op(self._acmi, eid, "signals", _edits(signals, new))(plan)
        plan.apply(self._acmi.store)
        return _remembered(eid, "hot", key, report)

    def _remember_warm(self, eid: EntityId, key: str, line: str) -> dict[str, Any]:
        profile = self._acmi.profile.get(eid) or {}
        new = {WARM + key: _append_item(profile.get(WARM + key), line)}
        memory = from_profile({**profile, **new})
        assert memory is not None
        report = check("warm", memory.render(), "MEMORY.md")
        if not report.ok:
            raise MemoryOverBudget(report, "text")
        plan = WritePlan()
        _edit_op(self._acmi, eid, "profile", _edits(profile, new))(plan)
        plan.apply(self._acmi.store)
        return _remembered(eid, "warm", key, report)

    def _remember_topic(
        self, eid: EntityId, key: str, line: str, topic: str | None, now: int
    ) -> dict[str, Any]:
        if topic is None:
            raise AcmiValidationError("topic", "required", "the topic's slug is required")
        slug = _topic_slug(topic)
        tid = topic_entity(slug)
        replies = self._acmi.store.pipeline(
            [("GET", self._keys.profile(tid)), ("GET", self._keys.signals(eid))]
        )
        profile = _object(_reply(replies[0], "topic"), self._keys.profile(tid))
        tz = _tz(_object(_reply(replies[1], "signals"), self._keys.signals(eid)))
        if not any(k in TOPIC_KEYS for k in profile):
            raise NotFound(
                f"topic: {tid} does not exist; create it with topic-create",
                field="topic",
                rule="exists",
            )
        today = _local(now, tz).date().isoformat()
        item: Any = line
        if key == "decision_log":
            item = {"date": today, "decision": line, "reasoning": "", "outcome": ""}
        new = {TOPIC_PREFIX + key: _append_item(profile.get(TOPIC_PREFIX + key), item)}
        if TOPIC_PREFIX + "updated" in profile:
            new[TOPIC_PREFIX + "updated"] = today
        topic_file = topic_from_profile(slug, {**profile, **new})
        assert topic_file is not None
        report = check("topic", topic_file.render(), topic_file.path)
        if not report.ok:
            raise MemoryOverBudget(report, "text")
        plan = WritePlan()
        _edit_op(self._acmi, tid, "profile", _edits(profile, new))(plan)
        plan.apply(self._acmi.store)
        return _remembered(eid, "topic", key, report)

    def _remember_daily(
        self, eid: EntityId, line: str, section: str | None, now: int
    ) -> dict[str, Any]:
        heading = None
        if section is not None:
            heading = DAILY_SECTIONS.get(section)
            if heading is None:
                raise AcmiValidationError(
                    "section", "memory_section", f"daily: one of {', '.join(DAILY_SECTIONS)}"
                )
        # the zone is in the signals: read the day's events around now, filter after
        state = self.load(
            eid, since_ms=now - DAY_MS, until_ms=now + DAY_MS, events=True, topics=False
        )
        tz = state.tz
        local = _local(now, tz)
        day = local.date()
        event = entry_event(day, f"{local:%H:%M}", line, source=str(eid), tz=tz, section=heading)
        note = _note(state.events, day, tz, [event])
        report = check("daily", note.render(), note.path)
        if not report.ok:
            raise MemoryOverBudget(report, "text")
        plan = WritePlan()
        _zadd(self._acmi, eid, event, event.to_json())(plan)
        plan.apply(self._acmi.store)
        return _remembered(eid, "daily", section or _heading_key(event), report)

    def daily_summary(
        self, entity: str | EntityId, date: str | None = None, now_ms: int | None = None
    ) -> dict[str, Any]:
        """``/daily-summary``: a day's note (default today) and what it holds: entries,
        decisions, lessons, takeaways, open tasks for tomorrow. Other events of that day
        (webhooks, agents) are in it as entries. 1 round trip."""
        now = self._now(now_ms)
        eid = EntityId.parse(entity)
        if date is not None:
            if not isinstance(date, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
                raise AcmiValidationError("date", "date", "must be a date YYYY-MM-DD")
            try:
                day: dt.date | None = dt.date.fromisoformat(date)
            except ValueError:
                raise AcmiValidationError("date", "date", "is not a real date") from None
        else:
            day = None
        centre = now if day is None else _midnight_ms(day, dt.UTC)
        state = self.load(
            eid, since_ms=centre - 2 * DAY_MS, until_ms=centre + 2 * DAY_MS, topics=False
        )
        tz = state.tz
        day = day or _local(now, tz).date()
        note = _note(state.events, day, tz, [], include_foreign=True)
        kinds: dict[str, list[str]] = defaultdict(list)
        for event in state.events:
            if _local(event.ts, tz).date() == day and event.kind in ("decision", "lesson"):
                kinds[event.kind].append(_text_of(event))
        text = note.render()
        entries = [f"[{e.at}] {e.text}" for _, e in note.entries]
        open_tasks = [t.text for t in note.tomorrow if not t.done]
        summary = (
            f"{day.isoformat()}: {len(entries)} entries, {len(kinds['decision'])} decisions, "
            f"{len(kinds['lesson'])} lessons, {len(note.takeaways)} takeaways, "
            f"{len(open_tasks)} open for tomorrow"
        )
        return {
            "entity": str(eid),
            "date": day.isoformat(),
            "path": note.path,
            "summary": summary,
            "entries": entries,
            "decisions": kinds["decision"],
            "lessons": kinds["lesson"],
            "takeaways": list(note.takeaways),
            "tomorrow": open_tasks,
            "text": text,
            "budget": check("daily", text, note.path).to_dict(),
        }

    def topic_create(
        self, entity: str | EntityId, slug: object, name: object, now_ms: int | None = None
    ) -> dict[str, Any]:
        """``/topic-create``: the ``topic:<slug>`` entity from the seed's template, linked
        from the owner's profile (``warm.topics``). An existing topic not yet linked is
        linked; one already linked is a Conflict (409). 2 round trips."""
        eid = EntityId.parse(entity)
        slug = _topic_slug(slug, "slug")
        title = _one_line(self._acmi.guard(name, "name"), "name", 200)
        tid = topic_entity(slug)
        now = self._now(now_ms)
        replies = self._acmi.store.pipeline(
            [
                ("GET", self._keys.profile(eid)),
                ("GET", self._keys.profile(tid)),
                ("GET", self._keys.signals(eid)),
            ]
        )
        profile = _object(_reply(replies[0], "profile"), self._keys.profile(eid))
        existing = _object(_reply(replies[1], "topic"), self._keys.profile(tid))
        tz = _tz(_object(_reply(replies[2], "signals"), self._keys.signals(eid)))
        links = profile.get(TOPIC_LINKS)
        links = [x for x in links if isinstance(x, str)] if isinstance(links, list) else []
        exists = any(k in TOPIC_KEYS for k in existing)
        if exists and str(tid) in links:
            raise Conflict(f"slug: {tid} exists and is linked already", field="slug", rule="unique")
        plan = WritePlan()
        if exists:
            topic_file = topic_from_profile(slug, existing)
        else:
            topic_file = new_topic(slug, title, _local(now, tz).date())
            _edit_op(self._acmi, tid, "profile", _edits({}, topic_to_profile(topic_file)))(plan)
        new_links = sorted({*links, str(tid)})
        _edit_op(self._acmi, eid, "profile", [("set", TOPIC_LINKS, dumps(new_links))])(plan)
        plan.apply(self._acmi.store)
        assert topic_file is not None
        return {
            "entity": str(eid),
            "topic": str(tid),
            "created": not exists,
            "path": topic_file.path,
            "text": topic_file.render(),
        }

    def _prune_plan(
        self,
        state: MemoryState,
        now: int,
        days: int,
        plan: WritePlan,
        extra: Sequence[Event] = (),
    ) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """What a prune moves: completed tasks, items dated more than ``days`` ago, and
        yesterday's "Key Decisions Made Today". Adds the moves to ``plan`` (the entries
        to today's note; the new hot sections are returned, with the prune date)."""
        tz = state.tz
        local = _local(now, tz)
        today = local.date()
        cutoff = today - dt.timedelta(days=days)
        updated = _first_date(str(state.signals.get(HOT + "updated", "")))
        moved: list[dict[str, str]] = []
        new: dict[str, Any] = {}
        for key in ("in_progress", "waiting_on", "decisions_today"):
            value = state.signals.get(HOT + key)
            if not isinstance(value, list):
                continue
            keep = []
            for item in value:
                text = _item_text(item)
                dated = _first_date(text)
                done = isinstance(item, dict) and item.get("done") is True
                old = dated is not None and dated < cutoff
                stale_decision = (
                    key == "decisions_today" and updated is not None and updated < today
                )
                if text and (done or old or stale_decision):
                    moved.append({"section": key, "item": text})
                else:
                    keep.append(item)
            if len(keep) != len(value):
                new[HOT + key] = keep
        events = []
        for move in moved:
            heading = ACTIVE_CONTEXT.by_key(move["section"]).heading
            prefix = "Done" if move["section"] == "in_progress" else f"From {heading}"
            events.append(
                entry_event(
                    today,
                    f"{local:%H:%M}",
                    f"{prefix}: {move['item']}",
                    source=str(state.entity),
                    tz=tz,
                )
            )
        if events:
            note = _note(state.events, today, tz, [*extra, *events])
            report = check("daily", note.render(), note.path)
            if not report.ok:
                raise MemoryOverBudget(report, "hot")
            for event in events:
                _zadd(self._acmi, state.entity, event, event.to_json())(plan)
        new[HEARTBEAT + "last_active_context_prune"] = today.isoformat()
        return moved, new

    def prune(
        self, entity: str | EntityId, days: int = DEFAULT_PRUNE_DAYS, now_ms: int | None = None
    ) -> dict[str, Any]:
        """``/memory-prune`` of the hot layer (seed §2 "Move completed items to daily
        notes", §10 "Prune ACTIVE-CONTEXT.md (remove stale items)"): completed tasks,
        items whose date is more than ``days`` ago and yesterday's decisions move to
        today's note as entries. Idempotent. 2 round trips."""
        if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= 365:
            raise AcmiValidationError("days", "range", "must be an integer from 0 to 365")
        now = self._now(now_ms)
        state = self.load(
            entity, since_ms=now - DAY_MS - DAY_MS, until_ms=now + DAY_MS, topics=False
        )
        plan = WritePlan()
        moved, new = self._prune_plan(state, now, days, plan)
        edit = _edits(state.signals, new)
        if edit:
            _edit_op(self._acmi, state.entity, "signals", edit)(plan)
        if len(plan):
            plan.apply(self._acmi.store)
        return {"entity": str(state.entity), "moved": moved, "written": bool(len(plan))}

    def handoff(
        self, entity: str | EntityId, text: object, now_ms: int | None = None
    ) -> dict[str, Any]:
        """``/handoff``: the seed's HANDOFF.md (what was done, in progress, next steps,
        decisions, gotchas), kept until the next session takes it. 1 round trip."""
        eid = EntityId.parse(entity)
        if not isinstance(text, str) or not text.strip():
            raise AcmiValidationError("text", "required", "must be a non-empty string")
        text = self._acmi.guard(text, "text")
        if len(text.encode("utf-8", "surrogatepass")) > MAX_HANDOFF_BYTES:
            raise AcmiValidationError(
                "text", "max_bytes", f"must be at most {MAX_HANDOFF_BYTES} bytes"
            )
        doc = {"text": text, "ts": self._now(now_ms)}
        plan = WritePlan()
        _, key = self._slots(eid)
        plan.set(key, dumps(doc, "text"))
        plan.apply(self._acmi.store)
        return {"entity": str(eid), **doc}

    def take_handoff(self, entity: str | EntityId) -> dict[str, Any] | None:
        """The pending handoff, read and cleared in one atomic step (GETDEL): two
        sessions starting at once cannot both take it. None when there is none."""
        eid = EntityId.parse(entity)
        _, key = self._slots(eid)
        return _object(self._acmi.store.execute(("GETDEL", key)), key) or None

    def review(self, entity: str | EntityId, now_ms: int | None = None) -> dict[str, Any]:
        """``/memory-review``, the weekly review (seed §10): the last 7 days' lessons,
        decisions and takeaways promoted to MEMORY.md's Lessons Learned as ``YYYY-MM-DD —
        text`` (once: a bullet already there is not added again), the hot layer pruned,
        heartbeat-state updated. Idempotent: a second run the same day writes nothing.
        2 round trips (read, one write); over the warm budget: MemoryOverBudget."""
        now = self._now(now_ms)
        state = self.load(
            entity, since_ms=now - (REVIEW_DAYS + 1) * DAY_MS, until_ms=now + DAY_MS, topics=False
        )
        tz = state.tz
        today = _local(now, tz).date()
        first = today - dt.timedelta(days=REVIEW_DAYS - 1)
        lessons = state.profile.get(WARM + "lessons")
        promoted = _promotions(state, lessons, first, today)
        plan = WritePlan()
        profile_edit: list[tuple[Any, str, str]] = []
        warm_lines = None
        if promoted:
            value = lessons
            for bullet in promoted:
                value = _append_item(value, bullet)
            new_profile = {**state.profile, WARM + "lessons": value}
            memory_file = from_profile(new_profile)
            assert memory_file is not None
            report = check("warm", memory_file.render(), "MEMORY.md")
            if not report.ok:
                raise MemoryOverBudget(report, "warm.lessons")
            warm_lines = report.lines
            profile_edit = _edits(state.profile, {WARM + "lessons": value})
        else:
            memory_file = from_profile(state.profile)
            warm_lines = None if memory_file is None else count_lines(memory_file.render())
        moved, signals_new = self._prune_plan(state, now, DEFAULT_PRUNE_DAYS, plan)
        heartbeat = heartbeat_from_signals(state.signals)
        schedule = dict((heartbeat.data if heartbeat else {}).get("next_scheduled") or {})
        schedule["weekly_review"] = (today + dt.timedelta(days=REVIEW_DAYS)).isoformat()
        schedule.setdefault("monthly_audit", _next_month(today).isoformat())
        schedule.setdefault("quarterly_archive", _quarter_end(today).isoformat())
        signals_new[HEARTBEAT + "last_memory_review"] = today.isoformat()
        signals_new[HEARTBEAT + "next_scheduled"] = schedule
        if warm_lines is not None:
            signals_new[HEARTBEAT + "memory_md_lines"] = warm_lines
        if profile_edit:
            _edit_op(self._acmi, state.entity, "profile", profile_edit)(plan)
        signals_edit = _edits(state.signals, signals_new)
        if signals_edit:
            _edit_op(self._acmi, state.entity, "signals", signals_edit)(plan)
        if len(plan):
            plan.apply(self._acmi.store)
        return {
            "entity": str(state.entity),
            "since": first.isoformat(),
            "promoted": promoted,
            "moved": moved,
            "next_review": schedule["weekly_review"],
            "written": bool(len(plan)),
            "truncated": state.truncated,
        }

    # -- search and debug

    def search(
        self,
        entity: str | EntityId,
        query: object,
        *,
        limit: int = 20,
        now_ms: int | None = None,
        archived: ArchivedReader | None = None,
    ) -> dict[str, Any]:
        """``/memory-search``: every line of every layer that holds a term of ``query``
        (case-insensitive), in the seed's order fast to slow (hot, warm, today,
        yesterday, topics, older daily notes, archives) and ranked: lines holding every
        term first, then by that order, then by how many terms. Daily notes: the newest
        2,000 events (``truncated`` says when there were more). 2 round trips.

        ``archived`` (the caller's reader of an archive sink,
        ``acmi_core.jobs.archive.archived_reader``): the raw events trimmed into the
        sink are searched too, as layer ``archived`` (ranked after the archive
        documents), one line per event, for the newest ``ARCHIVED_QUARTERS`` quarters
        whose document says it has a raw object: one sink read each. A quarter the sink
        could not read is listed in ``archived_unread``."""
        if not isinstance(query, str) or not query.strip():
            raise AcmiValidationError("query", "required", "must be a non-empty string")
        if len(query) > MAX_QUERY_LEN:
            raise AcmiValidationError("query", "max_length", f"at most {MAX_QUERY_LEN} characters")
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_SEARCH_HITS
        ):
            raise AcmiValidationError("limit", "range", f"must be 1-{MAX_SEARCH_HITS}")
        terms = list(dict.fromkeys(query.casefold().split()))[:MAX_QUERY_TERMS]
        now = self._now(now_ms)
        state = self.load(entity, limit=SEARCH_EVENTS, newest=True)
        tz = state.tz
        today = _local(now, tz).date()
        snap = state.snapshot(include_foreign=True)
        files: list[tuple[str, str, str]] = []  # (search-order layer, path, text)
        if snap.active_context is not None:
            files.append(("hot", "ACTIVE-CONTEXT.md", snap.active_context.render()))
        if snap.memory is not None:
            files.append(("warm", "MEMORY.md", snap.memory.render()))
        older: list[DailyNote] = []
        for note in sorted(snap.daily, key=lambda d: d.date, reverse=True):
            if note.date == today:
                files.append(("today", note.path, note.render()))
            elif note.date == today - dt.timedelta(days=1):
                files.append(("yesterday", note.path, note.render()))
            else:
                older.append(note)
        files += [("topic", t.path, t.render()) for t in snap.topics]
        files += [("daily", n.path, n.render()) for n in older]
        files += [("cold", a.path, a.render()) for a in reversed(snap.archives)]
        unread: list[str] = []
        if archived is not None:
            for quarter in _raw_quarters(state.archives)[:ARCHIVED_QUARTERS]:
                events = archived(state.entity, quarter)
                if events is None:
                    unread.append(quarter)
                    continue
                lines = "\n".join(_archived_line(e) for e in events)
                files.append(("archived", f"memory/archive/{quarter}.jsonl", lines))
        # "semantic" is this search itself; "archived": the raw events under the documents
        order = [*SEARCH_ORDER[:5], "daily", "cold", "archived"]
        hits: list[tuple[tuple[int, int, int, int], Hit]] = []
        for rank, (layer, path, text) in enumerate(files):
            for number, line in enumerate(text.split("\n"), 1):
                folded = line.casefold()
                matched = sum(1 for t in terms if t in folded)
                if matched:
                    hit = Hit(layer, path, number, line, matched, len(terms))
                    full = 0 if matched == len(terms) else 1
                    hits.append(((full, order.index(layer), -matched, rank), hit))
        hits.sort(key=lambda h: h[0])
        return {
            "entity": str(state.entity),
            "query": query,
            "order": order,
            "hits": [h.to_dict() for _, h in hits[:limit]],
            "total": len(hits),
            "truncated": state.truncated,
            **({"archived_unread": unread} if unread else {}),
        }

    def debug(self, entity: str | EntityId, now_ms: int | None = None) -> dict[str, Any]:
        """``/memory-debug``: missing pieces, conflicts between the hot and warm layers
        (``CONFLICT_RULES``: hot wins for current state), stale items, budgets over.
        2 round trips."""
        now = self._now(now_ms)
        state = self.load(
            entity, since_ms=now - (RETENTION_DAYS + 1) * DAY_MS, until_ms=now + DAY_MS, extras=True
        )
        tz = state.tz
        today = _local(now, tz).date()
        snap = state.snapshot(include_foreign=False)
        snap = _window(snap, today)
        missing: list[dict[str, str]] = []
        if snap.active_context is None:
            missing.append({"piece": "ACTIVE-CONTEXT.md", "fix": "set it: memory active --set"})
        if snap.memory is None:
            missing.append({"piece": "MEMORY.md", "fix": "remember a fact: memory remember"})
        if snap.day(today) is None:
            missing.append(
                {"piece": f"memory/{today}.md", "fix": "log the day: remember --layer daily"}
            )
        if snap.heartbeat is None:
            missing.append({"piece": "memory/heartbeat-state.json", "fix": "run memory review"})
        for link in state.topic_links:
            if not any(k in TOPIC_KEYS for k in state.topics.get(_slug(link), {})):
                missing.append(
                    {
                        "piece": f"memory/topics/{_slug(link)}.md",
                        "fix": f"{link} is linked but empty: topic-create",
                    }
                )
        conflicts = hot_warm_conflicts(snap.active_context, snap.memory)
        stale: list[dict[str, Any]] = []
        if snap.active_context is not None:
            updated = _first_date(snap.active_context.last_updated or "")
            if updated is not None and updated < today:
                stale.append(
                    {
                        "item": "ACTIVE-CONTEXT.md",
                        "why": f"last updated {updated}",
                        "fix": "update it before ending a session",
                    }
                )
            for task in snap.active_context.in_progress:
                if task.done:
                    stale.append({"item": task.text, "why": "completed", "fix": "memory prune"})
            for text in (
                *snap.active_context.waiting_on,
                *(t.text for t in snap.active_context.in_progress if not t.done),
            ):
                dated = _first_date(text)
                if dated is not None and (today - dated).days > DEFAULT_PRUNE_DAYS:
                    stale.append({"item": text, "why": f"dated {dated}", "fix": "memory prune"})
        for topic in snap.topics:
            updated = _first_date(topic.last_updated or "")
            if updated is not None and (today - updated).days > STALE_TOPIC_DAYS:
                stale.append(
                    {
                        "item": topic.path,
                        "why": f"last updated {updated}",
                        "fix": "update it or archive it",
                    }
                )
        data: Mapping[str, Any] = {} if snap.heartbeat is None else snap.heartbeat.data
        for job, due in _next_due(data, today).items():
            if due["overdue"]:
                stale.append(
                    {
                        "item": job,
                        "why": f"was due {due['date']}",
                        "fix": f"run {job.replace('_', ' ')}",
                    }
                )
        over = [r.to_dict() for r in check_snapshot(snap) if not r.ok]
        return {
            "entity": str(state.entity),
            "ok": not (missing or conflicts or stale or over),
            "missing": missing,
            "conflicts": conflicts,
            "stale": stale,
            "over_budget": over,
        }


# --- plan pieces ----------------------------------------------------------------------------


def _window(snapshot: MemorySnapshot, today: dt.date) -> MemorySnapshot:
    """The snapshot with the daily notes of the retention window only: the read window
    starts mid-day, and a day read in part would be measured in part."""
    first = today - dt.timedelta(days=RETENTION_DAYS)
    return replace(snapshot, daily=tuple(d for d in snapshot.daily if d.date >= first))


def _promotions(state: MemoryState, lessons: Any, first: dt.date, today: dt.date) -> list[str]:
    """The review's new Lessons Learned bullets: memory lessons, decisions and takeaways
    (and other events of kind lesson or decision) dated ``first``..``today``, as
    ``YYYY-MM-DD — text``, leaving out those ``lessons`` holds already."""
    tz = state.tz
    have = {_item_text(i) for i in lessons} if isinstance(lessons, list) else set()
    if isinstance(lessons, str):
        have = set(lessons.split("\n"))
    promoted: list[str] = []
    for event in sorted(state.events, key=lambda e: e.ts):
        day = _local(event.ts, tz).date()
        if not first <= day <= today:
            continue
        payload = event.payload if isinstance(event.payload, dict) else {}
        memory = payload.get("memory") == DAILY
        if event.kind not in ("lesson", "decision", "takeaway"):
            continue
        if not memory and event.kind == "takeaway":
            continue
        # a bullet is one line: an event's text may hold newlines (any sender's lesson)
        bullet = f"{day.isoformat()} — {' '.join(_text_of(event).split())}"
        if bullet not in have and bullet not in promoted:
            promoted.append(bullet)
    return promoted


def _heading_key(event: Event) -> str:
    payload = event.payload if isinstance(event.payload, dict) else {}
    heading = str(payload.get("section", ""))
    return next((k for k, h in DAILY_SECTIONS.items() if h == heading), heading.lower())


def _remembered(eid: EntityId, layer: Layer, section: str, report: BudgetReport) -> dict[str, Any]:
    return {
        "entity": str(eid),
        "layer": layer,
        "section": section,
        "path": report.path,
        "stored": True,
        "budget": report.to_dict(),
    }


def _topic_slug(value: object, name: str = "topic") -> str:
    slug = value.removeprefix("topic:") if isinstance(value, str) else value
    if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug) or len(slug) > 128:
        raise AcmiValidationError(name, "topic_slug", "must match [A-Za-z0-9_.-]{1,128}")
    return slug


def _numbered(event: Event) -> object:
    payload = event.payload if isinstance(event.payload, dict) else {}
    return payload.get("n")


def _note(
    events: Iterable[Event],
    day: dt.date,
    tz: dt.tzinfo,
    extra: Sequence[Event],
    *,
    include_foreign: bool = False,
) -> DailyNote:
    """``day``'s note from ``events`` plus ``extra`` (an empty one when nothing)."""
    notes = daily_from_events([*events, *extra], tz=tz, include_foreign=include_foreign)
    found = next((n for n in notes if n.date == day), None)
    return found or DailyNote.parse(f"# {day.isoformat()} — Daily Notes\n", day)


def _next_due(data: Mapping[str, Any], today: dt.date) -> dict[str, dict[str, Any]]:
    """heartbeat-state's next_scheduled, else what the seed's rhythm gives (weekly from
    the last review, the 1st of next month, the quarter's last day)."""
    schedule = data.get("next_scheduled") if isinstance(data.get("next_scheduled"), dict) else {}
    last = data.get("last_memory_review")
    weekly = (
        dt.date.fromisoformat(last) + dt.timedelta(days=REVIEW_DAYS)
        if isinstance(last, str)
        else today
    )
    defaults = {
        "weekly_review": weekly,
        "monthly_audit": _next_month(today),
        "quarterly_archive": _quarter_end(today),
    }
    out = {}
    for job, default in defaults.items():
        raw = schedule.get(job) if isinstance(schedule, dict) else None
        due = dt.date.fromisoformat(raw) if isinstance(raw, str) else default
        out[job] = {
            "date": due.isoformat(),
            "overdue": due < today,
            "from": "heartbeat-state" if isinstance(raw, str) else "rhythm",
        }
    return out


def _zadd(acmi: Acmi, eid: EntityId, event: Event, text: str) -> Callable[[WritePlan], object]:
    """The event on the timeline; a daily-note line's stamp in ``MEMORY_STAMPS`` in the same
    write (the bootstrap reads today's lines by it)."""
    stamps = acmi.keys.slot(eid, MEMORY_STAMPS)
    daily = isinstance(event.payload, dict) and event.payload.get("memory") == DAILY

    def op(plan: WritePlan) -> object:
        if daily:
            plan.zadd(stamps, event.ts, str(event.ts))
        return acmi.timeline.stage(plan, eid, [event], [text])

    return op


def _hset(key: str, name: str, text: str) -> Callable[[WritePlan], object]:
    return lambda plan: plan.hset(key, name, text)


def _zrem(key: str, member: bytes) -> Callable[[WritePlan], object]:
    text = member.decode("utf-8", "surrogatepass")
    return lambda plan: plan.zrem(key, text)


def _edit_op(
    acmi: Acmi, eid: EntityId, slot: str, fields: list[tuple[Any, str, str]]
) -> Callable[[WritePlan], object]:
    """An object edit of ``eid``'s signals or profile (a profile gets ACMI's auto-fill,
    as ``profile.merge`` does), with the entity's index entry."""
    key = acmi.keys.signals(eid) if slot == "signals" else acmi.keys.profile(eid)
    if slot == "profile":
        names = {name for _, name, _ in fields}
        fields = fields + [
            ("setnx", name, text)
            for name, text in acmi.profile_fills(eid.category)
            if name not in names
        ]

    def op(plan: WritePlan) -> object:
        plan.sadd(acmi.index_key(eid.category), eid.local_id)
        return plan.edit_object(key, fields, field=slot)

    return op


__all__ = ["MemoryAPI", "MemoryOverBudget", "MemoryState", "Progress"]

"""What every memory command starts from: one entity's memory read in one pipeline
(:class:`MemoryState`, ``MemoryCommands.load``), the writes the commands share (a timeline
event with its daily-note stamp, an object edit with its index entry), the seed's
maintenance rhythm (``next_due``) and the small rules of the layers' values (object edits
that write only what differs, a section's body appended to, local dates and zones).

The commands themselves are built on :class:`MemoryCommands`, one module a concern:
``memory/reads.py`` (status, the hot layer read, search, debug), ``memory/writes.py``
(remember, the hot layer replaced, topics, the handoff), ``memory/upkeep.py`` (prune,
the weekly review, the daily summary), ``memory/transfer.py`` (the tree exported,
imported, migrated); ``memory/service.py``'s ``MemoryAPI`` composes them.

One module: :class:`MemoryCommands` is the base each of those extends, and its load, the
write stages they share and the layers' small rules are what every one of them calls;
apart, they would import one another."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError, CorruptData
from acmi_core.base.keys import (
    MEMORY_AGENTS,
    MEMORY_ARCHIVE,
    MEMORY_HANDOFF,
    MEMORY_SOUL,
    MEMORY_STAMPS,
    MEMORY_USER,
    MEMORY_VECTORS,
    MEMORY_VECTORS_PASS,
)
from acmi_core.base.model import EntityId, Event, dumps
from acmi_core.base.stored import decode_events, decode_object
from acmi_core.entities.api import ProfileAPI, SignalsAPI, TimelineAPI
from acmi_core.memory.budgets import BUDGETS, BudgetReport
from acmi_core.memory.daily import DAILY, daily_from_events, zone
from acmi_core.memory.embedding_calls import (
    EMBED_BUDGET_S,
    embedded,
    note_stored,
    stored_here,
    unindexed,
)
from acmi_core.memory.embeddings import (
    GEN_FIELD,
    MARKING_GEN,
    MAX_EMBED_LINES,
    EmbeddingError,
    digest,
    embedder_for,
    placed,
    texts_of,
)
from acmi_core.memory.expiry import unexpired
from acmi_core.memory.layers import (
    ACTIVE_CONTEXT,
    LONG_TERM_MEMORY,
    TOPIC,
    DailyNote,
    MemorySnapshot,
    Quarter,
    Template,
)
from acmi_core.memory.results import Due
from acmi_core.memory.slots import (
    HOT,
    LAYER_SLOTS,
    TOPIC_LINKS,
    TOPIC_PREFIX,
    WARM,
    SlotImage,
    heartbeat_from_signals,
    memory_slot,
    snapshot_from_slots,
)
from acmi_core.store.base import Reply
from acmi_core.store.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.entities.context import Context


DAY_MS: Final = 86_400_000
# Events a read takes from the timeline in one reply when it names no limit (status and
# debug read the retention window: seed §4, 30 days of daily notes, at most 200 lines a
# day within budget; review the last 7 days).
WINDOW_EVENTS: Final = 10_000
REVIEW_DAYS: Final = 7
DEFAULT_PRUNE_DAYS: Final = 7
_DATE_IN_TEXT: Final = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")


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


def stored_object(raw: Reply, key: str) -> dict[str, Any]:
    """A stored JSON object ({} when absent)."""
    return decode_object(raw, key) or {}


def pipeline_reply(reply: object, key: str) -> Reply:
    if isinstance(reply, Exception):  # a pipeline slot's StoreCommandError
        raise CorruptData(f"{key}: {reply}", field=key)
    assert reply is None or isinstance(reply, bytes | int | list)
    return reply


def _hash(raw: Reply, key: str) -> dict[str, dict[str, Any]]:
    items = raw if isinstance(raw, list) else []
    out: dict[str, dict[str, Any]] = {}
    for name, value in zip(items[::2], items[1::2], strict=False):
        if isinstance(name, bytes):
            out[name.decode("utf-8", "replace")] = stored_object(value, f"{key}.{name!r}")
    return out


def scan_step(raw: object, key: str) -> tuple[dict[str, dict[str, Any]], str]:
    """An HSCAN step's reply (a pipeline's: an error raises) of a HASH of JSON objects:
    its fields, and the cursor after it ("0": the last step)."""
    reply = pipeline_reply(raw, key)
    parts = reply if isinstance(reply, list) and len(reply) == 2 else [b"0", []]
    cursor = parts[0].decode("ascii") if isinstance(parts[0], bytes) else "0"
    items = parts[1] if isinstance(parts[1], list) else []
    return _hash(items, key), cursor


def _events(raw: Reply) -> list[Event]:
    decoded, _ = decode_events(raw if isinstance(raw, list) else [])
    return [event for event, _ in decoded]


def differs(current: Mapping[str, Any], key: str, value: Any) -> bool:
    return key not in current or dumps(current[key]) != dumps(value)


def object_edits(
    current: Mapping[str, Any], new: Mapping[str, Any], delete: Iterable[str] = ()
) -> list[tuple[Any, str, str]]:
    """The object edit that turns ``current`` into ``new`` on those keys: only what
    differs (so a re-run writes nothing), then the deletions of keys ``current`` has."""
    fields: list[tuple[Any, str, str]] = [
        ("set", k, dumps(v, k)) for k, v in new.items() if differs(current, k, v)
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


def append_item(current: Any, item: Any) -> Any:
    """A section value with ``item`` added at the end of its body."""
    if current is None or current == []:
        return [item]
    if isinstance(current, str):  # prose: its lines stay lines
        return [{"line": line} for line in current.split("\n")] + [item]
    if isinstance(current, list):
        return [*current, item]
    if isinstance(current, dict):
        return {**current, "body": append_item(current.get("body"), item)}
    return [item]


def local_time(now_ms: float, tz: dt.tzinfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(now_ms / 1000, tz)


def midnight_ms(day: dt.date, tz: dt.tzinfo) -> int:
    return int(dt.datetime.combine(day, dt.time(), tzinfo=tz).timestamp()) * 1000


def first_date(text: str) -> dt.date | None:
    for match in _DATE_IN_TEXT.finditer(text):
        try:
            return dt.date.fromisoformat(match[1])
        except ValueError:
            continue
    return None


def next_month(day: dt.date) -> dt.date:
    return dt.date(day.year + day.month // 12, day.month % 12 + 1, 1)


def quarter_end(day: dt.date) -> dt.date:
    quarter = Quarter.of(day)
    return next_month(dt.date(day.year, quarter.number * 3, 1)) - dt.timedelta(days=1)


def text_of(event: Event) -> str:
    payload = event.payload if isinstance(event.payload, dict) else {}
    text = payload.get("text", event.summary)
    return text if isinstance(text, str) else event.summary


def signals_zone(signals: Mapping[str, Any]) -> dt.tzinfo:
    """The zone of the entity's [HH:MM] stamps: heartbeat-state's ``timezone``, or UTC."""
    heartbeat = heartbeat_from_signals(signals)
    return zone("UTC" if heartbeat is None else heartbeat.timezone)


def day_note(
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


def next_due(data: Mapping[str, Any], today: dt.date) -> dict[str, Due]:
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
        "monthly_audit": next_month(today),
        "quarterly_archive": quarter_end(today),
    }
    out: dict[str, Due] = {}
    for job, default in defaults.items():
        raw = schedule.get(job) if isinstance(schedule, dict) else None
        due = dt.date.fromisoformat(raw) if isinstance(raw, str) else default
        out[job] = {
            "date": due.isoformat(),
            "overdue": due < today,
            "from": "heartbeat-state" if isinstance(raw, str) else "rhythm",
        }
    return out


MEMORY_SLOTS: Final = tuple(slot for _, slot in LAYER_SLOTS)
# each startup file's slot, in STARTUP_PATHS order: {"text": the file as written}
STARTUP_SLOTS: Final = (
    ("SOUL.md", MEMORY_SOUL),
    ("USER.md", MEMORY_USER),
    ("AGENTS.md", MEMORY_AGENTS),
)
STARTUP_TEXT: Final = "text"


def startup_text(raw: Reply, key: str) -> str | None:
    """A startup file's text from its slot's GET reply (None when absent or not text)."""
    text = stored_object(raw, key).get(STARTUP_TEXT)
    return text if isinstance(text, str) else None


@dataclass
class MemoryState:
    """One entity's memory as read: ``memory``, the fields of its three memory slots
    (``hot.*``, ``heartbeat.*``, ``warm.*``: disjoint prefixes, so one view), the events of
    a window, topic profiles (by slug), archive documents (by quarter), the pending
    handoff."""

    entity: EntityId
    memory: dict[str, Any]
    events: list[Event]
    archives: dict[str, dict[str, Any]]
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    handoff: dict[str, Any] | None = None
    total_events: int = 0
    truncated: bool = False
    startup: dict[str, str] = field(default_factory=dict)  # path -> text (STARTUP_SLOTS)
    # the HSCAN cursor after the archive documents a load read a step of ("0": it read the
    # last); None: it read them all, or none
    archive_cursor: str | None = None

    @property
    def tz(self) -> dt.tzinfo:
        return signals_zone(self.memory)

    @property
    def topic_links(self) -> list[str]:
        links = self.memory.get(TOPIC_LINKS)
        return [x for x in links if isinstance(x, str)] if isinstance(links, list) else []

    def snapshot(self, *, include_foreign: bool = False) -> MemorySnapshot:
        image = SlotImage(self.memory, self.memory, self.events, self.topics, self.archives)
        snapshot = snapshot_from_slots(image, include_foreign=include_foreign)
        startup = tuple((p, self.startup[p]) for p, _ in STARTUP_SLOTS if p in self.startup)
        return dataclasses.replace(snapshot, startup=startup)


class MemoryCommands:
    """The base of the memory commands on one tenant's :class:`Context`: the read they all
    start from and the writes they share."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._keys = ctx.keys
        self._signals = SignalsAPI(ctx)
        self._profile = ProfileAPI(ctx)
        self._timeline = TimelineAPI(ctx)

    # -- reads

    def _slots(self, eid: EntityId) -> tuple[str, str]:
        return self._keys.slot(eid, MEMORY_ARCHIVE), self._keys.slot(eid, MEMORY_HANDOFF)

    def _memory_keys(self, eid: EntityId) -> list[str]:
        return [self._keys.slot(eid, slot) for slot in MEMORY_SLOTS]

    def _memory_of(self, replies: Sequence[object], keys: Sequence[str]) -> dict[str, Any]:
        """The fields of the memory slots' GET replies, as one view (disjoint prefixes; a
        field in the wrong slot is ignored, as a foreign field is)."""
        memory: dict[str, Any] = {}
        for reply, key, slot in zip(replies, keys, MEMORY_SLOTS, strict=True):
            fields = stored_object(pipeline_reply(reply, key), key)
            memory.update((k, v) for k, v in fields.items() if memory_slot(k) == slot)
        # lines whose ttl ran out are not read (memory/expiry.py)
        return unexpired(unexpired(memory, HOT, self._ctx.clock), WARM, self._ctx.clock)

    def _memory_fields(self, entity: str | EntityId) -> dict[str, Any]:
        """The entity's memory fields (its three memory slots): 1 round trip."""
        keys = self._memory_keys(EntityId.parse(entity))
        return self._memory_of(self._ctx.store.pipeline([("GET", k) for k in keys]), keys)

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
        archive_page: int | None = None,
    ) -> MemoryState:
        """The memory slots, the startup files, archives and (``events``) up to ``limit``
        timeline events in [since_ms, until_ms] (``newest``: the newest ones) in one
        pipeline; the linked topic profiles in a second (``topics``). ``extras``: the handoff and
        the timeline's size too. ``archive_page``: None, every archive document;
        0, none; n, one HSCAN step of about n, read after the events, its cursor in
        ``archive_cursor`` (the vector prune reads them in steps: an HGETALL of them is
        unbounded)."""
        eid = EntityId.parse(entity)
        keys = self._keys
        archive_key, handoff_key = self._slots(eid)
        timeline = keys.timeline(eid)
        low = "-inf" if since_ms is None else str(since_ms)
        high = "+inf" if until_ms is None else str(until_ms)
        memory_keys = self._memory_keys(eid)
        commands: list[tuple[str | int, ...]] = [
            *(("GET", key) for key in memory_keys),
            *([("HGETALL", archive_key)] if archive_page is None else []),
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
        if archive_page:
            commands.append(("HSCAN", archive_key, 0, "COUNT", archive_page))
        startup_keys = [(path, keys.slot(eid, slot)) for path, slot in STARTUP_SLOTS]
        commands += [("GET", key) for _, key in startup_keys]
        replies = self._ctx.store.pipeline(commands)
        startup = {
            path: text
            for (path, key), reply in zip(
                startup_keys, replies[len(commands) - len(startup_keys) :], strict=True
            )
            if (text := startup_text(pipeline_reply(reply, key), key)) is not None
        }
        at = len(memory_keys)
        memory = self._memory_of(replies[:at], memory_keys)
        stored: dict[str, dict[str, Any]] = {}
        if archive_page is None:
            stored = _hash(pipeline_reply(replies[at], archive_key), archive_key)
            at += 1
        found: list[Event] = []
        truncated = False
        if events:
            raw = pipeline_reply(replies[at], timeline)
            truncated = isinstance(raw, list) and len(raw) >= limit
            found = _events(raw)
            if newest:
                found.reverse()
            at += 1
        state = MemoryState(eid, memory, found, stored, truncated=truncated, startup=startup)
        if extras:
            handoff = stored_object(pipeline_reply(replies[at], handoff_key), handoff_key)
            state.handoff = handoff or None
            size = pipeline_reply(replies[at + 1], timeline)
            state.total_events = size if isinstance(size, int) else 0
            at += 2
        if archive_page:
            state.archives, state.archive_cursor = scan_step(replies[at], archive_key)
        if topics and state.topic_links:
            state.topics = self._topics(state.topic_links)
        return state

    def _topics(self, links: Sequence[str]) -> dict[str, dict[str, Any]]:
        eids = [EntityId.parse(link, TOPIC_LINKS) for link in links]
        replies = self._ctx.store.pipeline([("GET", self._keys.profile(e)) for e in eids])
        return {
            e.local_id: unexpired(
                stored_object(pipeline_reply(r, self._keys.profile(e)), self._keys.profile(e)),
                TOPIC_PREFIX,
                self._ctx.clock,
            )
            for e, r in zip(eids, replies, strict=True)
        }

    def _now(self, now_ms: int | None) -> int:
        if now_ms is None:
            return self._ctx.clock()
        if isinstance(now_ms, bool) or not isinstance(now_ms, int) or now_ms < 0:
            raise AcmiValidationError("now_ms", "integer", "must be epoch milliseconds >= 0")
        return now_ms

    # -- the writes every command shares

    def _zadd(self, eid: EntityId, event: Event, text: str) -> Callable[[WritePlan], object]:
        """The event on the timeline; a daily-note line's stamp in ``MEMORY_STAMPS`` in the
        same write (the bootstrap reads today's lines by it)."""
        stamps = self._keys.slot(eid, MEMORY_STAMPS)
        daily = isinstance(event.payload, dict) and event.payload.get("memory") == DAILY
        timeline = self._timeline
        index, now = self._keys.of(eid).memory_index(), self._ctx.clock()

        def op(plan: WritePlan) -> object:
            if daily:
                plan.zadd(stamps, event.ts, str(event.ts))
                plan.zset(index, now, str(eid))
            return timeline.stage(plan, eid, [event], [text])

        return op

    def _memory_edit(
        self,
        eid: EntityId,
        fields: list[tuple[Any, str, str]],
        files: Sequence[str] = (),
        *,
        ask: bool = True,
        before: Mapping[str, Any] | None = None,
        until: float | None = None,
    ) -> Callable[[WritePlan], object]:
        """An edit of ``eid``'s memory fields, each in its layer's slot (by its prefix),
        with the entity's entries in its category index and the memory index (what the
        hygiene job visits). Never the entity's profile or signals. ``files``: the
        rendered files the edit leaves (its lines' vectors carry their headings there:
        :meth:`_vector_ops`); none, no vectors (an edit that adds no line: a forget, a
        prune, heartbeat fields). ``before``: the fields as read before the edit (their
        lines already there need no vector this process knows is stored); ``until``: the
        embedding's deadline (``time.monotonic()``; an import's, shared by its files)."""
        by_slot: dict[str, list[tuple[Any, str, str]]] = {}
        for edit in fields:
            slot = memory_slot(edit[1])
            if slot is None:  # a bug in the caller: memory fields are prefixed
                raise AssertionError(f"{edit[1]!r} is no memory field")
            by_slot.setdefault(slot, []).append(edit)
        ctx = self._ctx
        index, now = ctx.keys.of(eid).memory_index(), ctx.clock()
        lines: list[str] = []
        new: set[str] = set()
        for mode, name, value in fields:
            if mode != "del":
                try:
                    words = texts_of(json.loads(value))
                except ValueError:
                    continue
                lines += words
                had = () if before is None else texts_of(before.get(name))
                new.update(set(words).difference(had))
        vectors = self._vectors(eid, lines, files, ask, new=new, until=until)

        def op(plan: WritePlan) -> object:
            plan.sadd(ctx.index_key(eid), eid.local_id)
            plan.zset(index, now, str(eid))
            for slot, edits in by_slot.items():
                plan.edit_object(ctx.keys.slot(eid, slot), edits, field=slot)
            vectors(plan)
            return None

        return op

    def _vectors(
        self,
        eid: EntityId,
        lines: Sequence[str],
        files: Sequence[str],
        ask: bool = True,
        *,
        new: Collection[str] | None = None,
        until: float | None = None,
    ) -> Callable[[WritePlan], None]:
        """All of :meth:`_vector_ops` as one stage."""
        ops = self._vector_ops(eid, lines, files, ask=ask, new=new, until=until)

        def op(plan: WritePlan) -> None:
            for each in ops:
                each(plan)

        return op

    def _vector_ops(
        self,
        eid: EntityId,
        lines: Sequence[str],
        files: Sequence[str],
        *,
        ask: bool = True,
        new: Collection[str] | None = None,
        until: float | None = None,
    ) -> list[Callable[[WritePlan], None]]:
        """The vectors of ``lines`` (their words, as ``texts_of`` gives them; already
        through the secret guard: the callers guard what they write before they build its
        edit) into ``eid``'s index, one stage a line, for the write's own plan: each line
        as it sits in ``files`` (the rendered files the write leaves), after its section's
        heading (``embeddings.placed``: the text a search embeds for it). Computed now,
        not when the plan runs; a provider that fails leaves the lines unindexed (the
        write goes on: a search embeds what its index lacks). ``new``: those of ``lines``
        the write adds (None: all); a line it keeps is left out when this process knows
        its vector is stored (``embedding_calls.stored_here``: a remember re-sends its
        whole section). ``until``: a deadline (``time.monotonic()``) in place of the
        call's own ``EMBED_BUDGET_S``; past it nothing is embedded (the lines stay
        unindexed: a later write of their field, or a search, embeds them)."""
        ctx = self._ctx
        key = ctx.keys.slot(eid, MEMORY_VECTORS)
        texts = placed(lines, files) if lines else {}
        unique = list(texts)[:MAX_EMBED_LINES]
        fields: list[tuple[str, str]] = []
        if unique:
            try:
                embedder = embedder_for(ctx.settings)
                if embedder is not None and new is not None:
                    kept = [t for t in unique if texts[t] not in new]
                    names = {digest(embedder.name, t): t for t in kept}
                    held = {names[n] for n in stored_here(ctx.store, key, names)}
                    unique = [t for t in unique if t not in held]
                if embedder is not None and unique:
                    # an edit re-sends its field's lines: a cold process asks the index
                    # which it holds (an import writes whole files: none, or what it
                    # already decided differs)
                    unique = unindexed(ctx.store, key, embedder, unique) if ask else unique
                    budget = EMBED_BUDGET_S if until is None else until - time.monotonic()
                    done = embedded(embedder, unique, budget_s=budget)
                    fields = [(digest(embedder.name, t), v) for t, v in done]
            except EmbeddingError:
                fields = []
        # each vector is marked needed in the entity's prune pass when one is under way, in
        # the same run as it is stored, so the pass's sweep keeps it (memory/vectors.py);
        # the token ("m": a write that marks) tells a pass that no write which does not
        # mark (an older release's) stored a vector since it began
        mark = ctx.keys.slot(eid, MEMORY_VECTORS_PASS)
        gen = MARKING_GEN + uuid.uuid4().hex[:15]

        def one(name: str, value: str, first: bool) -> Callable[[WritePlan], None]:
            def stage(plan: WritePlan) -> None:
                plan.hmark(key, name, value, mark)
                plan.on_applied(lambda: note_stored(ctx.store, key, (name,)))
                if first:
                    plan.hset(key, GEN_FIELD, gen)

            return stage

        return [one(name, value, i == 0) for i, (name, value) in enumerate(fields)]

    def _edit(
        self, eid: EntityId, slot: str, fields: list[tuple[Any, str, str]]
    ) -> Callable[[WritePlan], object]:
        """An object edit of ``eid``'s signals or profile (a topic's profile: a profile gets
        ACMI's auto-fill, as ``profile.merge`` does), with the entity's index entry."""
        ctx = self._ctx
        key = ctx.keys.signals(eid) if slot == "signals" else ctx.keys.profile(eid)
        if slot == "profile":
            names = {name for _, name, _ in fields}
            fields = fields + [
                ("setnx", name, text)
                for name, text in ctx.profile_fills(eid.category)
                if name not in names
            ]

        def op(plan: WritePlan) -> object:
            plan.sadd(ctx.index_key(eid), eid.local_id)
            return plan.edit_object(key, fields, field=slot)

        return op


__all__ = [
    "DAY_MS",
    "DEFAULT_PRUNE_DAYS",
    "HOT_KEYS",
    "MEMORY_SLOTS",
    "REVIEW_DAYS",
    "TOPIC_KEYS",
    "WARM_KEYS",
    "WINDOW_EVENTS",
    "MemoryCommands",
    "MemoryOverBudget",
    "MemoryState",
    "append_item",
    "day_note",
    "differs",
    "first_date",
    "local_time",
    "midnight_ms",
    "next_due",
    "next_month",
    "object_edits",
    "pipeline_reply",
    "quarter_end",
    "signals_zone",
    "stored_object",
    "text_of",
]

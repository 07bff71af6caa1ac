"""Pruning an entity's vector index (``memory:vectors``): the vectors no current line of
the entity needs any more (a line forgotten, replaced, pruned, archived; the vectors of
another provider than ``ACMI_EMBEDDINGS``'s) are deleted, for an entity of any size, in
bounded runs, while the entity is written.

A digest may be shared by the layers, the daily notes and the topics of one entity, so a
vector goes only when no line of any of them (as written, and as a search renders it)
has its digest under the current provider. Which digests are needed is built up by a
*pass* (``memory:vectors:pass``, a HASH of the digests found so far and the pass's
cursors), which may span many runs:

1. Each run begins with ``store/lua/vectors.lua`` ``begin`` (one round trip): the pass
   under way, or a new one (one of another provider dropped), with the timeline's
   highest score as its end. The pass exists before any line it reads is read, and every
   write that stores a vector marks it needed in the pass in the same script
   (``WritePlan.hmark``): a line written while the pass is under way keeps its vector
   whatever the pass read, and the pass need not read it.
2. *Mark*: the timeline up to that end in pages of ``PAGE_EVENTS`` events, oldest first
   (the first page with the entity's other lines, one ``load``), each page's digests
   added to the pass by ``vectors.lua`` ``mark`` (at most ``MARK_CHUNK`` a script) with
   the cursor after the page. With the last page the lines outside the timeline (memory
   slots, topics, startup files: read at the end) are marked; then the archive
   documents, ``ARCHIVE_PAGE`` an ``HSCAN`` step (read after the whole timeline, so an
   event the archive job moves off it meanwhile is read in its archive; never one
   unbounded HGETALL), and the pass goes to the sweep.
3. *Sweep*: ``vectors.lua`` ``sweep`` runs one ``HSCAN`` step of ``PRUNE_CHUNK`` fields of
   the vectors in Redis (no vector crosses the network) and deletes those the pass does
   not hold; the last step deletes the pass.

Writes never restart a pass, so it ends within a number of runs set by the entity's size
when it began: its timeline up to the end (events written before the pass at an earlier
score than its cursor, by an import, are read too), its archive documents, and the index
(HSCAN ends on a hash that grows). A write that does not mark (an older release's, during
a deploy) changes the ``GEN_FIELD`` token to a hex one: the next step answers ``BUSY`` and
deletes the pass (the next run begins a new one). Two runs at once (the hygiene job and
``memory prune``): the one that finds the pass moved stops (``busy``).

A run reads at most ``MAX_PAGES`` pages (timeline pages of ``PAGE_EVENTS`` events and
archive steps alike) and runs at most ``MAX_PRUNE_CHUNKS`` sweep scripts; ``more`` says a
run stopped at a cap and the next goes on where it stopped. Round trips a run: 1 + a page
each (the last timeline page with the lines outside the timeline: 1 to 2 more) + the mark
scripts (``ceil(digests / MARK_CHUNK)`` a page) + the sweep scripts. Not pruned: under
``ACMI_EMBEDDINGS=none`` (no provider: which vectors are stale is not known). A page
cursor is a score bound and an offset within it; the offset is used only when more than
``PAGE_EVENTS`` events share one millisecond, where an event deleted meanwhile may make
the next page skip one (its vector is then re-embedded by the next search that needs
it)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from acmi_core.base.keys import (
    MEMORY_ARCHIVE,
    MEMORY_HEARTBEAT,
    MEMORY_VECTORS,
    MEMORY_VECTORS_PASS,
)
from acmi_core.base.model import EntityId, Event
from acmi_core.base.stored import decode_events
from acmi_core.memory.embeddings import digest, provider_name, section_texts, texts_of
from acmi_core.memory.results import VectorsPruned
from acmi_core.memory.slots import memory_slot
from acmi_core.memory.state import (
    MemoryCommands,
    MemoryState,
    pipeline_reply,
    scan_step,
    stored_object,
)
from acmi_core.store.scripts import VECTORS, Value

# fields one sweep script scans (its HSCAN COUNT) and deletes at most
PRUNE_CHUNK: Final = 500
# sweep scripts one run runs at most (20,000 fields a run)
MAX_PRUNE_CHUNKS: Final = 40
# timeline events one mark step reads (one ZRANGE page)
PAGE_EVENTS: Final = 1_000
# mark steps (pages) one run reads at most: 10,000 events a run
MAX_PAGES: Final = 10
# archive documents one mark step reads (one HSCAN COUNT; a step is one of MAX_PAGES)
ARCHIVE_PAGE: Final = 8
# digests one mark script adds at most
MARK_CHUNK: Final = 1_000
# an unfinished pass is kept this long after its last step (a week of daily hygiene runs)
PASS_TTL_MS: Final = 7 * 86_400_000
_START: Final = "-inf|0"
_ARCHIVES: Final = "a|"  # the cursor of the archive steps: this and an HSCAN cursor
_DONE: Final = "done"


def needed(state: MemoryState, provider: str) -> set[str]:
    """The digests under ``provider`` of every line ``state`` holds as a search embeds it:
    each line of the files it renders, after its section's heading
    (``embeddings.section_texts``), and its startup files' lines. A vector of a line's
    bare words (written before headings were embedded) is no longer needed: the next
    write or search embeds the line under its heading."""
    texts = set(texts_of(list(state.startup.values())))
    snap = state.snapshot(include_foreign=True)
    files = [
        *([snap.active_context.render()] if snap.active_context is not None else []),
        *([snap.memory.render()] if snap.memory is not None else []),
        *(n.render() for n in snap.daily),
        *(t.render() for t in snap.topics),
        *(a.render() for a in snap.archives),
    ]
    for text in files:
        texts.update(w for w in section_texts(text) if w)
    return {digest(provider, t) for t in texts}


def next_cursor(cursor: str, scores: Sequence[float], count: int, page: int) -> str:
    """Where the page after this one starts: ``_DONE`` after a short page; else after the
    page's scores below its last one (the events at the last score are read again, whole,
    by the next page), or, a page of one score, ``count`` further within the same bound.
    ``scores``: the page's scores as read (ascending), ``count``: the members it held."""
    if count < page:
        return _DONE
    bound, _, offset = cursor.partition("|")
    below = [s for s in scores if scores and s < scores[-1]]
    if below:
        return f"({_score(max(below))}|0"
    return f"{bound}|{int(offset) + count}"


def _score(score: float) -> str:
    return str(int(score)) if score == int(score) else repr(score)


class MemoryVectors(MemoryCommands):
    """``prune_vectors``: the stale vectors of one entity deleted (module docstring)."""

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
        """One run of the entity's prune pass (module docstring): at most ``max_pages``
        mark steps (timeline pages of ``page`` events, archive steps of ``archive_page``
        documents), at most ``max_chunks`` sweep scripts of ``chunk`` fields."""
        eid = entity if isinstance(entity, EntityId) else EntityId.parse(entity)
        store = self._ctx.store
        keys = {
            "vectors": self._keys.slot(eid, MEMORY_VECTORS),
            "pass": self._keys.slot(eid, MEMORY_VECTORS_PASS),
        }
        provider = provider_name(self._ctx.settings)
        out: VectorsPruned = {
            "entity": str(eid),
            "provider": provider,
            "scanned": 0,
            "dropped": 0,
            "chunks": 0,
            "more": False,
            "pages": 0,
            "marked": 0,
        }
        if provider == "none":
            out["skipped"] = "no embeddings provider (ACMI_EMBEDDINGS=none)"
            return out
        begun = VECTORS.eval(
            store,
            {**keys, "timeline": self._keys.timeline(eid)},
            {
                "mode": "begin",
                "pass": uuid.uuid4().hex[:16],
                "provider": provider,
                "at": _START,
                "ttl": PASS_TTL_MS,
            },
        )
        run = _Pass(
            keys,
            provider,
            _text(begun["pass"]),
            _text(begun["at"]),
            _text(begun["scan"]) or "0",
            _text(begun["end"]),
            _int(begun["events"]),
            begun["last"] if isinstance(begun["last"], bytes) else b"",
            _int(begun["size"]),
        )
        while run.at != _DONE:  # mark
            if out["pages"] >= max_pages:
                out["more"] = True
                return out
            out["pages"] += 1
            if not self._mark(eid, run, page, archive_page, out):
                out["busy"] = True
                return out
        while out["chunks"] < max_chunks:  # sweep
            done = VECTORS.eval(store, keys, {**run.args(), "cursor": run.scan, "count": chunk})
            if done.tag != "SWEPT":
                out["busy"] = True
                return out
            out["chunks"] += 1
            out["scanned"] += _int(done["scanned"])
            out["dropped"] += _int(done["dropped"])
            run.scan = _text(done["next"]) or "0"
            if run.scan == "0":
                return out
        out["more"] = True
        return out

    def _mark(
        self, eid: EntityId, run: _Pass, page: int, archive_page: int, out: VectorsPruned
    ) -> bool:
        """One mark step: a page of the timeline (the first with the lines outside it, the
        last with them read again) or of the archive documents, its digests added to the
        pass, its cursor moved. False: the pass is busy or moved."""
        if run.at.startswith(_ARCHIVES):
            docs, scan, beat = self._archives(eid, run.at[len(_ARCHIVES) :], archive_page)
            state = MemoryState(eid, beat, [], docs, {})
            nxt = _DONE if scan == "0" else _ARCHIVES + scan
        else:
            state, nxt = self._timeline_step(eid, run, page, archive_page)
        digests = sorted(needed(state, run.provider))
        batches = [digests[i : i + MARK_CHUNK] for i in range(0, len(digests), MARK_CHUNK)]
        batches = batches or [[]]
        for n, batch in enumerate(batches):
            step = nxt if n == len(batches) - 1 else run.at
            done = VECTORS.eval(
                self._ctx.store,
                run.keys,
                {**run.args("mark"), "at": run.at, "next": step, "digests": batch},
            )
            if done.tag != "MARKED":
                return False
            run.at = step
            out["marked"] = out.get("marked", 0) + _int(done["count"])
        return True

    def _timeline_step(
        self, eid: EntityId, run: _Pass, page: int, archive_page: int
    ) -> tuple[MemoryState, str]:
        """A timeline page up to the pass's end (the lines outside the timeline and the
        first archive step read with the last) and the cursor after it: the next archive
        step's, or the sweep's after the last."""
        if not run.end:  # the timeline was empty when the pass began: the rest alone
            state = self.load(eid, events=False, archive_page=archive_page)
            nxt = _DONE
        elif run.at == _START:  # the first page, with the lines outside the timeline
            until = math.ceil(float(run.end))  # the end's events (an earlier score: harmless)
            # the first archive step too when this page is likely the last (read after it)
            first = archive_page if run.events <= page else 0
            state = self.load(eid, limit=page, until_ms=until, archive_page=first)
            count = page if state.truncated else len(state.events)  # truncated: a full page
            nxt = next_cursor(run.at, [e.ts for e in state.events], count, page)
        else:
            events, scores, count, beat, reached = self._page(
                eid, run.at, page, run.end, (run.last, run.size)
            )
            # its last member as the pass began read: events at the end's score written
            # since (marked by their writes) do not prolong the pass
            nxt = _DONE if reached else next_cursor(run.at, scores, count, page)
            state = MemoryState(eid, beat, events, {})
            if nxt == _DONE:
                rest = self.load(eid, events=False, archive_page=archive_page)
                state.memory, state.topics, state.startup = rest.memory, rest.topics, rest.startup
                state.archives, state.archive_cursor = rest.archives, rest.archive_cursor
        if nxt == _DONE and eid.category == "topic":  # a topic's own lines are its profile's
            state.topics = {**state.topics, **self._topics([str(eid)])}
        if nxt != _DONE:  # the lines outside the timeline are read (again) at the end;
            # heartbeat-state stays: its zone places a daily line under its heading
            state.memory = {
                k: v for k, v in state.memory.items() if memory_slot(k) == MEMORY_HEARTBEAT
            }
            state.topics, state.startup, state.archives = {}, {}, {}
        elif state.archive_cursor != "0":  # more archive documents, or none read yet
            nxt = _ARCHIVES + (state.archive_cursor or "0")
        return state, nxt

    def _page(
        self, eid: EntityId, cursor: str, page: int, end: str, last: tuple[bytes, int] = (b"", 0)
    ) -> tuple[list[Event], list[float], int, dict[str, object], bool]:
        """One timeline page from ``cursor`` (a score bound, an offset) up to the score
        ``end``: its events, the scores of its members, how many it held,
        heartbeat-state's fields (the zone a daily line's heading is in), and whether it
        holds the member at ``end`` that ``last`` is (its first 1,024 bytes, its length).
        1 round trip."""
        bound, _, offset = cursor.partition("|")
        beat_key = self._keys.slot(eid, MEMORY_HEARTBEAT)
        reply, beat = self._ctx.store.pipeline(
            [
                (
                    "ZRANGE",
                    self._keys.timeline(eid),
                    bound,
                    end,
                    "BYSCORE",
                    "LIMIT",
                    int(offset or 0),
                    page,
                    "WITHSCORES",
                ),
                ("GET", beat_key),
            ]
        )
        items = pipeline_reply(reply, self._keys.timeline(eid))
        items = items if isinstance(items, list) else []
        members = [m for m in items[::2] if isinstance(m, bytes)]
        scores = [float(s) for s in items[1::2] if isinstance(s, bytes)]
        decoded, _ = decode_events(list(members))
        at_end = float(end)
        head, size = last
        reached = size > 0 and any(
            score == at_end and len(member) == size and member[:1024] == head
            for member, score in zip(members, scores, strict=False)
        )
        events = [event for event, _ in decoded]
        return events, scores, len(members), self._beat(beat, beat_key), reached

    def _archives(
        self, eid: EntityId, cursor: str, count: int
    ) -> tuple[dict[str, dict[str, Any]], str, dict[str, object]]:
        """One HSCAN step of the archive documents from ``cursor`` (about ``count`` of
        them), the cursor after it ("0": the last) and heartbeat-state's fields. 1 round
        trip."""
        key = self._keys.slot(eid, MEMORY_ARCHIVE)
        beat_key = self._keys.slot(eid, MEMORY_HEARTBEAT)
        reply, beat = self._ctx.store.pipeline(
            [("HSCAN", key, cursor, "COUNT", count), ("GET", beat_key)]
        )
        docs, scan = scan_step(reply, key)
        return docs, scan, self._beat(beat, beat_key)

    def _beat(self, reply: object, key: str) -> dict[str, object]:
        fields = stored_object(pipeline_reply(reply, key), key)
        return {k: v for k, v in fields.items() if memory_slot(k) == MEMORY_HEARTBEAT}


@dataclass
class _Pass:
    """The pass one run goes on with (or began)."""

    keys: dict[str, str]
    provider: str
    id: str
    at: str  # the timeline cursor, the archive steps' (_ARCHIVES first), or _DONE
    scan: str  # the sweep's HSCAN cursor
    end: str  # the timeline's highest score when the pass began ('' none)
    events: int  # the timeline's events when this run began
    last: bytes  # the timeline's last member when the pass began: its first 1,024 bytes
    size: int  # and its length

    def args(self, mode: str = "sweep") -> dict[str, Value]:
        return {"mode": mode, "pass": self.id, "ttl": PASS_TTL_MS}


def _int(reply: object) -> int:
    return reply if isinstance(reply, int) else 0


def _text(reply: object) -> str:
    return reply.decode("ascii", "replace") if isinstance(reply, bytes) else ""


__all__ = [
    "ARCHIVE_PAGE",
    "MARK_CHUNK",
    "MAX_PAGES",
    "MAX_PRUNE_CHUNKS",
    "PAGE_EVENTS",
    "PASS_TTL_MS",
    "PRUNE_CHUNK",
    "MemoryVectors",
    "needed",
    "next_cursor",
]

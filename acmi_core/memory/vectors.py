"""Pruning an entity's vector index (``memory:vectors``): the vectors no current line of
the entity needs any more (a line forgotten, replaced, pruned, archived; the vectors of
another provider than ``ACMI_EMBEDDINGS``'s) are deleted, for an entity of any size, in
bounded runs.

A digest may be shared by the layers, the daily notes and the topics of one entity, so a
vector goes only when no line of any of them (as written, and as a search renders it)
has its digest under the current provider. Which digests are needed is built up by a
*pass* (``memory:vectors:pass``, a HASH of the digests found so far and the pass's
cursor), which may span many runs:

1. Each run reads the hash's ``GEN_FIELD`` and the pass (one pipeline). A pass of another
   provider, or begun from another token, is dropped and a new one begun: every write
   that stores vectors sets ``GEN_FIELD`` to a token of its own in the same script as its
   lines, and the pass recorded the token it read before it read any line.
2. *Mark*: the timeline in pages of ``PAGE_EVENTS`` events, oldest first (the first page
   with the entity's other lines, one ``load``), each page's digests added to the pass by
   ``store/lua/vectors.lua`` ``mark`` (at most ``MARK_CHUNK`` a script) with the cursor
   after the page. After the last page, the lines outside the timeline (memory slots,
   topics, archives, startup files: read at the end, so an event the archive job moves
   off the timeline meanwhile is read in its archive) are marked and the pass goes to
   the sweep.
3. *Sweep*: ``vectors.lua`` ``sweep`` runs one ``HSCAN`` step of ``PRUNE_CHUNK`` fields of
   the vectors in Redis (no vector crosses the network) and deletes those the pass does
   not hold; the last step deletes the pass.

Every mark and sweep script first compares ``GEN_FIELD`` with the pass's token: a vector
written while a pass is under way makes it answer ``BUSY`` and delete the pass (the next
run begins a new one), so such a vector is never deleted. Two runs at once (the hygiene
job and ``memory prune``): the one that finds the pass moved stops (``busy``).

A run reads at most ``MAX_PAGES`` pages (``PAGE_EVENTS`` x ``MAX_PAGES`` events: the bytes
the single read of ``WINDOW_EVENTS`` events took before) and runs at most
``MAX_PRUNE_CHUNKS`` sweep scripts; ``more`` says a run stopped at a cap and the next goes
on where it stopped. Round trips a run: 1 + 1 to 2 (the first page, or the lines at the
end) + a page each after the first + the mark scripts (``ceil(digests / MARK_CHUNK)`` a
page) + the sweep scripts. Not pruned: under ``ACMI_EMBEDDINGS=none`` (no provider:
which vectors are stale is not known). A page cursor is a score bound and an offset
within it; the offset is used only when more than ``PAGE_EVENTS`` events share one
millisecond, where an event deleted meanwhile may make the next page skip one (its
vector is then re-embedded by the next search that needs it)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from acmi_core.base.keys import MEMORY_HEARTBEAT, MEMORY_VECTORS, MEMORY_VECTORS_PASS
from acmi_core.base.model import EntityId, Event
from acmi_core.base.stored import decode_events
from acmi_core.memory.embeddings import GEN_FIELD, digest, provider_name, section_texts, texts_of
from acmi_core.memory.results import VectorsPruned
from acmi_core.memory.slots import memory_slot
from acmi_core.memory.state import MemoryCommands, MemoryState, pipeline_reply, stored_object
from acmi_core.store.scripts import VECTORS, Value

# fields one sweep script scans (its HSCAN COUNT) and deletes at most
PRUNE_CHUNK: Final = 500
# sweep scripts one run runs at most (20,000 fields a run)
MAX_PRUNE_CHUNKS: Final = 40
# timeline events one mark step reads (one ZRANGE page)
PAGE_EVENTS: Final = 1_000
# mark steps (pages) one run reads at most: 10,000 events a run
MAX_PAGES: Final = 10
# digests one mark script adds at most
MARK_CHUNK: Final = 1_000
# an unfinished pass is kept this long after its last step (a week of daily hygiene runs)
PASS_TTL_MS: Final = 7 * 86_400_000
_META: Final = ("~pass", "~prov", "~gen", "~at", "~scan")
_START: Final = "-inf|0"
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
    ) -> VectorsPruned:
        """One run of the entity's prune pass (module docstring): at most ``max_pages``
        timeline pages of ``page`` events marked, at most ``max_chunks`` sweep scripts of
        ``chunk`` fields."""
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
        raw_gen, raw_pass = store.pipeline(
            [("HGET", keys["vectors"], GEN_FIELD), ("HMGET", keys["pass"], *_META)]
        )
        gen = _text(raw_gen)
        meta = [_text(x) for x in raw_pass] if isinstance(raw_pass, list) else [""] * 5
        pass_id, pass_provider, pass_gen, at, scan = meta
        run = _Pass(keys, provider, gen, pass_id, at, scan or "0", fresh=False)
        if not (pass_id and at and pass_provider == provider and pass_gen == gen):
            run = _Pass(keys, provider, gen, uuid.uuid4().hex[:16], _START, "0", fresh=True)
        while run.at != _DONE:  # mark
            if out["pages"] >= max_pages:
                out["more"] = True
                return out
            out["pages"] += 1
            if not self._mark(eid, run, page, out):
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

    def _mark(self, eid: EntityId, run: _Pass, page: int, out: VectorsPruned) -> bool:
        """One mark step: a page of the timeline (the first with the lines outside it, the
        last with them read again), its digests added to the pass, its cursor moved.
        False: the pass is busy or moved."""
        if run.fresh:  # the first page, with the lines outside the timeline
            state = self.load(eid, limit=page)
            count = page if state.truncated else len(state.events)  # truncated: a full page
            nxt = next_cursor(run.at, [e.ts for e in state.events], count, page)
        else:
            events, scores, count, beat = self._page(eid, run.at, page)
            nxt = next_cursor(run.at, scores, count, page)
            state = MemoryState(eid, beat, events, {})
            if nxt == _DONE:
                rest = self.load(eid, events=False)
                state.memory, state.archives = rest.memory, rest.archives
                state.topics, state.startup = rest.topics, rest.startup
        if nxt == _DONE and eid.category == "topic":  # a topic's own lines are its profile's
            state.topics = {**state.topics, **self._topics([str(eid)])}
        if nxt != _DONE:  # the lines outside the timeline are read (again) at the end;
            # heartbeat-state stays: its zone places a daily line under its heading
            state.memory = {
                k: v for k, v in state.memory.items() if memory_slot(k) == MEMORY_HEARTBEAT
            }
            state.archives, state.topics, state.startup = {}, {}, {}
        digests = sorted(needed(state, run.provider))
        batches = [digests[i : i + MARK_CHUNK] for i in range(0, len(digests), MARK_CHUNK)]
        batches = batches or [[]]
        for n, batch in enumerate(batches):
            step = nxt if n == len(batches) - 1 else run.at
            done = VECTORS.eval(
                self._ctx.store,
                run.keys,
                {
                    **run.args("mark"),
                    "provider": run.provider,
                    "fresh": "1" if run.fresh else "0",
                    "at": run.at,
                    "next": step,
                    "digests": batch,
                },
            )
            if done.tag != "MARKED":
                return False
            run.fresh, run.at = False, step
            out["marked"] = out.get("marked", 0) + _int(done["count"])
        return True

    def _page(
        self, eid: EntityId, cursor: str, page: int
    ) -> tuple[list[Event], list[float], int, dict[str, object]]:
        """One timeline page from ``cursor`` (a score bound, an offset): its events, the
        scores of its members, how many it held, and heartbeat-state's fields (the zone a
        daily line's heading is in). 1 round trip."""
        bound, _, offset = cursor.partition("|")
        beat_key = self._keys.slot(eid, MEMORY_HEARTBEAT)
        reply, beat = self._ctx.store.pipeline(
            [
                (
                    "ZRANGE",
                    self._keys.timeline(eid),
                    bound,
                    "+inf",
                    "BYSCORE",
                    "LIMIT",
                    int(offset or 0),
                    page,
                    "WITHSCORES",
                ),
                ("GET", beat_key),
            ]
        )
        fields = stored_object(pipeline_reply(beat, beat_key), beat_key)
        heartbeat = {k: v for k, v in fields.items() if memory_slot(k) == MEMORY_HEARTBEAT}
        items = pipeline_reply(reply, self._keys.timeline(eid))
        items = items if isinstance(items, list) else []
        members = [m for m in items[::2] if isinstance(m, bytes)]
        scores = [float(s) for s in items[1::2] if isinstance(s, bytes)]
        decoded, _ = decode_events(list(members))
        return [event for event, _ in decoded], scores, len(members), heartbeat


@dataclass
class _Pass:
    """The pass one run goes on with (or begins: ``fresh``)."""

    keys: dict[str, str]
    provider: str
    gen: str
    id: str
    at: str  # the timeline cursor, or _DONE
    scan: str  # the sweep's HSCAN cursor
    fresh: bool

    def args(self, mode: str = "sweep") -> dict[str, Value]:
        return {"mode": mode, "gen": self.gen, "pass": self.id, "ttl": PASS_TTL_MS}


def _int(reply: object) -> int:
    return reply if isinstance(reply, int) else 0


def _text(reply: object) -> str:
    return reply.decode("ascii", "replace") if isinstance(reply, bytes) else ""


__all__ = [
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

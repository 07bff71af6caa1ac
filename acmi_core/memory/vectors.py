"""Pruning an entity's vector index (``memory:vectors``): the vectors no current line of
the entity needs any more (a line forgotten, replaced, pruned, archived; the vectors of
another provider than ``ACMI_EMBEDDINGS``'s) are deleted, in bounded chunks.

A digest may be shared by the layers, the daily notes and the topics of one entity, so a
vector goes only when no line of any of them (as written, and as a search renders it)
has its digest under the current provider. The steps, per entity:

1. ``HGET`` the hash's ``GEN_FIELD`` (every write that stores vectors sets it to a token
   of its own, in the same script as its lines), then read the entity's lines (one
   ``load``: its memory slots, the newest ``WINDOW_EVENTS`` events, topics, archives).
2. ``HSCAN`` the hash ``PRUNE_CHUNK`` fields at a time; the fields no line needs go to
   ``store/lua/vectors.lua``, which deletes them only if ``GEN_FIELD`` still holds the
   token of step 1: a line written while pruning keeps its vector (that chunk answers
   ``BUSY``, the rest of the run stops, the next run retries).

Each script is one HGET and one HDEL of at most ``PRUNE_CHUNK`` fields; a run stops after
``MAX_PRUNE_CHUNKS`` chunks (``more`` says so) and the next run goes on from the start.
Not pruned: an entity whose timeline holds more than ``WINDOW_EVENTS`` events (its older
daily notes were not read: ``skipped`` says why), and under ``ACMI_EMBEDDINGS=none`` (no
provider: which vectors are stale is not known)."""

from __future__ import annotations

from typing import Final

from acmi_core.base.keys import MEMORY_VECTORS
from acmi_core.base.model import EntityId
from acmi_core.memory.embeddings import (
    GEN_FIELD,
    digest,
    provider_name,
    section_texts,
    texts_of,
)
from acmi_core.memory.results import VectorsPruned
from acmi_core.memory.state import WINDOW_EVENTS, MemoryCommands, MemoryState
from acmi_core.store.scripts import VECTORS

# fields a chunk scans and deletes at most (one HSCAN COUNT, one HDEL)
PRUNE_CHUNK: Final = 500
# chunks one run goes through at most (the index is meant for ~10,000 lines)
MAX_PRUNE_CHUNKS: Final = 40


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


class MemoryVectors(MemoryCommands):
    """``prune_vectors``: the stale vectors of one entity deleted (module docstring)."""

    def prune_vectors(
        self,
        entity: str | EntityId,
        *,
        chunk: int = PRUNE_CHUNK,
        max_chunks: int = MAX_PRUNE_CHUNKS,
    ) -> VectorsPruned:
        """The entity's vectors no current line needs, deleted in chunks of ``chunk``
        fields, at most ``max_chunks`` of them. 2 round trips + 2 a chunk."""
        eid = entity if isinstance(entity, EntityId) else EntityId.parse(entity)
        store = self._ctx.store
        key = self._keys.slot(eid, MEMORY_VECTORS)
        out: VectorsPruned = {
            "entity": str(eid),
            "provider": provider_name(self._ctx.settings),
            "scanned": 0,
            "dropped": 0,
            "chunks": 0,
            "more": False,
        }
        if out["provider"] == "none":
            out["skipped"] = "no embeddings provider (ACMI_EMBEDDINGS=none)"
            return out
        raw_gen = store.execute(("HGET", key, GEN_FIELD))
        gen = raw_gen.decode("ascii", "replace") if isinstance(raw_gen, bytes) else ""
        state = self.load(eid, limit=WINDOW_EVENTS, newest=True)
        if state.truncated:
            out["skipped"] = f"more than {WINDOW_EVENTS:,} events: older daily notes unread"
            return out
        if eid.category == "topic":  # a topic's own lines are its profile's
            state.topics = {**state.topics, **self._topics([str(eid)])}
        keep = needed(state, out["provider"])
        cursor = "0"
        while True:
            if out["chunks"] >= max_chunks:
                out["more"] = True
                break
            reply = store.execute(("HSCAN", key, cursor, "COUNT", chunk))
            if not isinstance(reply, list) or len(reply) != 2 or not isinstance(reply[1], list):
                break
            head, items = reply[0], reply[1]
            assert isinstance(items, list)
            cursor = head.decode("ascii") if isinstance(head, bytes) else str(head)
            names = [n.decode("ascii", "replace") for n in items[::2] if isinstance(n, bytes)]
            out["scanned"] += sum(1 for n in names if n != GEN_FIELD)
            stale = [n for n in names if n != GEN_FIELD and n not in keep]
            # HSCAN may return more than COUNT: each script deletes at most ``chunk``
            for at in range(0, len(stale), chunk):
                if out["chunks"] >= max_chunks:
                    out["more"] = True
                    return out
                part = stale[at : at + chunk]
                done = VECTORS.eval(store, {"vectors": key}, {"gen": gen, "fields": part})
                out["chunks"] += 1
                if done.tag == "BUSY":
                    out["busy"] = True
                    return out
                count = done["count"]
                out["dropped"] += count if isinstance(count, int) else 0
            if cursor == "0":
                break
        return out


__all__ = ["MAX_PRUNE_CHUNKS", "PRUNE_CHUNK", "MemoryVectors", "needed"]

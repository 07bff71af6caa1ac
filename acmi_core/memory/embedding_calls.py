"""What a process embeds, and how long for: the lines it has already embedded (a bounded
cache: a write re-sends a whole field, a search meets the same lines again), the vectors
it knows an index holds (so a write stores only its new lines'), the time budget of one
call (``EMBED_BUDGET_S``, batches sized from the rate measured) and a write's question
to its index (``unindexed``: one HMGET) when a process has not seen its lines. The
providers and the stored form are ``memory/embeddings.py``'s."""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

from acmi_core.memory.embeddings import Embedder, digest, embed_query, quantise

if TYPE_CHECKING:
    from acmi_core.memory.embeddings import Matrix
    from acmi_core.store.base import Store

# (provider, line) -> its stored text: a write re-sends a whole field (a list of lines),
# so a warm process embeds only the lines it has not seen (a remote call each, else)
_SEEN: OrderedDict[tuple[str, str], str] = OrderedDict()
_SEEN_LOCK = threading.Lock()
SEEN_LINES: Final = 8_192


# A call embeds for at most about this long (it stops between batches): a local model on
# a fraction of a Lambda vCPU takes ~20 ms a line, so 2,000 lines would outlast the
# request. The lines left over stay unindexed; a search embeds them (and this process
# remembers them) when it meets them, each search within its own budget.
EMBED_BUDGET_S: Final = 3.0
# the first batch: sized so a slow provider's overshoot is small; the next ones from the
# rate measured (a fast model takes the rest in one call)
FIRST_BATCH: Final = 32


# store -> (index key, vector field) this process stored there in a write that committed, or
# read there: a write re-sends a whole field, and the vectors of the lines it keeps need no
# second HSET (a 500-line section re-sent 170 KB and spent ~4.8 ms of Redis time a
# remember). A line new to the field is always sent: a vector this process once stored
# may have been pruned since the line left (forgotten, by another process's job).
_STORED: weakref.WeakKeyDictionary[Store, OrderedDict[tuple[str, str], None]] = (
    weakref.WeakKeyDictionary()
)
STORED_VECTORS: Final = 32_768


def stored_here(store: Store, key: str, names: Iterable[str]) -> set[str]:
    """Those of ``names`` (vector fields of the index at ``key``) this process knows the
    index holds."""
    with _SEEN_LOCK:
        known = _STORED.get(store)
        return set() if known is None else {n for n in names if (key, n) in known}


def note_stored(store: Store, key: str, names: Iterable[str]) -> None:
    """``names`` are in the index at ``key``: a write that carried them committed, or a
    read found them."""
    with _SEEN_LOCK:
        known = _STORED.setdefault(store, OrderedDict())
        for name in names:
            known[(key, name)] = None
            known.move_to_end((key, name))
        while len(known) > STORED_VECTORS:
            known.popitem(last=False)


def note_missing(store: Store, keys: Iterable[str], names: Iterable[str]) -> None:
    """``names`` are in none of the indexes at ``keys`` (a read found them absent: deleted
    by another client): the next write of their lines sends them again."""
    with _SEEN_LOCK:
        known = _STORED.get(store)
        if known is not None:
            for key in keys:
                for name in names:
                    known.pop((key, name), None)


def cold() -> None:
    """Forget what this process embedded and stored (a test's cold process)."""
    with _SEEN_LOCK:
        _SEEN.clear()
        _STORED.clear()


def unseen(embedder: Embedder, texts: Iterable[str]) -> list[str]:
    """Those of ``texts`` this process has not embedded (nor met in a write) yet."""
    with _SEEN_LOCK:
        return [t for t in texts if (embedder.name, t) not in _SEEN]


def _seen(embedder: Embedder, texts: Iterable[str]) -> dict[str, str]:
    with _SEEN_LOCK:
        return {t: _SEEN[(embedder.name, t)] for t in texts if (embedder.name, t) in _SEEN}


def _remember(embedder: Embedder, texts: Sequence[str], values: Sequence[str]) -> None:
    with _SEEN_LOCK:
        for text, value in zip(texts, values, strict=True):
            _SEEN[(embedder.name, text)] = value
        while len(_SEEN) > SEEN_LINES:
            _SEEN.popitem(last=False)


def _within_budget(
    fresh: Sequence[str],
    embed: Callable[[Sequence[str], bool], list[str]],
    budget_s: float,
    clock: Callable[[], float],
) -> int:
    """``embed(batch, first)`` on batches of ``fresh`` from its start until ``budget_s``
    has passed (the first batch always runs): how many of ``fresh`` were embedded."""
    start = clock()
    done, size = 0, FIRST_BATCH
    while done < len(fresh):
        began = clock()
        batch = fresh[done : done + size]
        embed(batch, done == 0)
        done += len(batch)
        now = clock()
        left = budget_s - (now - start)
        if left <= 0:
            break
        per_line = (now - began) / len(batch)
        size = len(fresh) if per_line <= 0 else max(1, int(left / per_line))
    return done


def embedded(
    embedder: Embedder,
    texts: Sequence[str],
    *,
    budget_s: float = EMBED_BUDGET_S,
    clock: Callable[[], float] = time.monotonic,
) -> list[tuple[str, str]]:
    """(text, stored vector text) for each of ``texts`` this process has seen or embeds
    within ``budget_s`` (in order; a text past the budget is left out; none embedded
    when it is spent already)."""
    known = _seen(embedder, texts)
    fresh = [t for t in dict.fromkeys(texts) if t not in known]

    def embed(batch: Sequence[str], _first: bool) -> list[str]:
        values = quantise(embedder.embed(batch))
        known.update(zip(batch, values, strict=True))
        _remember(embedder, batch, values)
        return values

    if fresh and budget_s > 0:
        _within_budget(fresh, embed, budget_s, clock)
    return [(t, known[t]) for t in texts if t in known]


def embedded_with_query(
    embedder: Embedder,
    query: str,
    texts: Sequence[str],
    *,
    budget_s: float = EMBED_BUDGET_S,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Matrix, list[str | None]]:
    """The query's unit row and each of ``texts``' stored vector text (None past the
    budget), the query in the first provider call with the first lines this process has
    not seen (a search's lines the index lacks: an entity indexed before headings were
    embedded is embedded once a warm process, not at every search)."""
    known = _seen(embedder, texts)
    fresh = [t for t in dict.fromkeys(texts) if t not in known]
    rows: list[Matrix] = []

    def embed(batch: Sequence[str], first: bool) -> list[str]:
        out = embed_query(embedder, query, batch) if first else embedder.embed(batch)
        if first:
            rows.append(out[:1])
            out = out[1:]
        values = quantise(out) if len(batch) else []
        known.update(zip(batch, values, strict=True))
        _remember(embedder, batch, values)
        return values

    if fresh:
        _within_budget(fresh, embed, budget_s, clock)
    else:
        rows.append(embed_query(embedder, query, [])[:1])
    return rows[0], [known.get(t) for t in texts]


def unindexed(store: Store, key: str, embedder: Embedder, texts: list[str]) -> list[str]:
    """``texts`` less those the index at ``key`` holds, asked (one HMGET) only when more
    than a first batch of them are new to this process: a write re-sends a whole field's
    lines, which a cold process (a Lambda's first call) would embed again, ~20 ms a line
    with a local model; a warm one knows them, and a line just written is embedded
    without asking. What the index holds is remembered: the next write asks no more."""
    fresh = unseen(embedder, texts)
    if len(fresh) <= FIRST_BATCH:
        return texts
    held = store.execute(("HMGET", key, *(digest(embedder.name, t) for t in fresh)))
    replies = held if isinstance(held, list) else []
    have = {
        t: v.decode("ascii")
        for t, v in zip(fresh, replies, strict=False)
        if isinstance(v, bytes) and v.isascii()
    }
    _remember(embedder, list(have), list(have.values()))
    note_stored(store, key, (digest(embedder.name, t) for t in have))
    return [t for t in texts if t not in have]

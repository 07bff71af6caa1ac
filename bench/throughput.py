"""4. Throughput and contention.

a) events/s through ``functions.ingest.handler`` (API Gateway v2 events, in process, one
   fresh interpreter per store) on the embedded store and on a real redis-server.
b) W concurrent writers on ONE entity's signals, each setting its own keys: ACMI (one Lua
   script per write, no compare-and-set), the reference's read-modify-write (GET + SET) and
   a compare-and-set loop (GET, then a Lua CAS on the whole text, retried with jittered
   backoff), on the Upstash double (with a small per-request delay), real Redis and the
   embedded store. Reported: keys kept (lost updates) and attempts per write.
c) N concurrent clients appending to distinct entities on one redis-server: ours as N
   threads sharing one Acmi (one store, as a Lambda fleet shares one Redis), the reference
   SDK's append (ZADD NX) as N ioredis connections in one node process
   (``bench/contender.py``); events/s and p99, rounds interleaved.
d) The batch path: ``timeline.extend`` with 10 / 100 / 1,000 events per call against single
   appends, in events/s, next to the reference's batch (MULTI, k x ZADD NX, EXEC).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acmi_core import Acmi, Settings
from acmi_core.base.errors import StoreCommandError
from acmi_core.store.base import Arg, Command, Reply, Script, Store
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from bench import _workload as w
from bench import contender as c
from bench._infra import ROOT, Column, RedisServer, UpstashDouble, median, table_of
from bench._ingest_worker import WARMUP

TITLE = "4. Throughput and contention"
CONTENTION_DELAY_MS = 5.0
WORKER_DB = 5


# --- a) the ingest handler ------------------------------------------------------------------


def _worker_env(extra_env: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACMI_", "UPSTASH_"))}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "POWERTOOLS_METRICS_NAMESPACE": "ACMI",
            **extra_env,
        }
    )
    return env


def _ingest_worker(n: int, extra_env: dict[str, str]) -> dict[str, Any]:
    """One fresh interpreter (a cold start) feeding the handler n events; its timings."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        result = subprocess.run(
            [sys.executable, "-m", "bench._ingest_worker", str(n), str(out)],
            cwd=ROOT,
            env=_worker_env(extra_env),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
            check=False,
        )
        if result.returncode != 0 or not out.exists():
            raise RuntimeError(f"ingest worker failed: {result.stderr[-3000:]}")
        data: dict[str, Any] = json.loads(out.read_text())
        return data


def measure_ingest(server: RedisServer, *, rounds: int, n: int) -> dict[str, list[dict[str, Any]]]:
    """Rounds of fresh workers, the two stores alternating, so that machine noise hits both
    alike. Store label -> one worker result per round."""
    stores: tuple[tuple[str, dict[str, str]], ...] = (
        ("embedded (memory)", {}),
        ("redis-server", {"ACMI_REDIS_URL": server.url_for(WORKER_DB)}),
    )
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in stores}
    for _ in range(rounds):
        for label, env in stores:
            server.flush(WORKER_DB)  # same bodies each round: new deliveries, not replays
            runs[label].append(_ingest_worker(n, env))
    return runs


def ingest_rows(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per store the median round, with every round's rate and the summed statuses."""
    rows = []
    for label, results in runs.items():
        ordered = sorted(results, key=lambda r: r["events_per_s"])
        row = dict(ordered[len(ordered) // 2])
        row["label"] = label
        row["rounds"] = len(results)
        row["events_per_s_rounds"] = [r["events_per_s"] for r in results]
        row["all_stored"] = all(r["stored"] == r["expected_stored"] for r in results)
        row["statuses"] = {
            code: sum(r["statuses"].get(code, 0) for r in results)
            for code in sorted({c for r in results for c in r["statuses"]})
        }
        rows.append(row)
    return rows


# --- b) contention --------------------------------------------------------------------------


class CountingStore:
    """Counts calls that reach the store (each is one round trip / one attempt)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.calls += 1

    def execute(self, command: Command) -> Reply:
        self._count()
        return self.inner.execute(command)

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        self._count()
        return self.inner.pipeline(commands)

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        self._count()
        return self.inner.eval(script, keys, args)

    def close(self) -> None:
        self.inner.close()


@dataclass
class Outcome:
    attempts: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, attempts: int) -> None:
        with self.lock:
            self.attempts.append(attempts)


Writer = Callable[[CountingStore, Acmi, str, str, int, Outcome], None]


def acmi_write(
    store: CountingStore, acmi: Acmi, entity: str, key: str, value: int, out: Outcome
) -> None:
    acmi.signals.set(entity, key, value)
    out.add(1)


def naive_write(
    store: CountingStore, acmi: Acmi, entity: str, key: str, value: int, out: Outcome
) -> None:
    w.reference_signal_set(store, entity, key, value)
    out.add(1)


def cas_write(
    store: CountingStore, acmi: Acmi, entity: str, key: str, value: int, out: Outcome
) -> None:
    _, signals, _ = w.ref_keys(entity)
    rng = random.Random(hash((entity, key)))
    deadline = time.monotonic() + 60
    attempt = 0
    while True:
        attempt += 1
        raw = store.execute(("GET", signals))
        old = raw.decode() if isinstance(raw, bytes) else ""
        current = json.loads(old) if old else {}
        current[key] = value
        new = json.dumps(current, separators=(",", ":"))
        if store.execute(("EVAL", w.CAS_SCRIPT, 1, signals, old, new)) == 1:
            out.add(attempt)
            return
        if time.monotonic() > deadline:
            out.errors.append(f"{key}: CAS gave up after {attempt} attempts")
            return
        time.sleep(rng.random() * min(0.05, 0.001 * 2**attempt))  # full jitter


METHODS: dict[str, tuple[str, Writer, int]] = {
    # method: (label, writer, store calls per attempt)
    "acmi": ("ACMI (one Lua script)", acmi_write, 1),
    "naive": ("read-modify-write GET+SET (reference)", naive_write, 2),
    "cas": ("compare-and-set loop (GET + CAS)", cas_write, 2),
}


@dataclass(frozen=True)
class Race:
    """One contention run: what the writers did and what the entity kept."""

    method: str
    writers: int
    writes: int
    kept: int
    calls: int  # store calls by the writers, retries included
    elapsed_s: float
    outcome: Outcome


def _race(store: CountingStore, method: str, writers: int, per_writer: int, entity: str) -> Race:
    acmi = Acmi(store, Settings())
    writer = METHODS[method][1]
    out = Outcome()
    barrier = threading.Barrier(writers + 1)  # + this thread, which starts the clock

    def work(index: int) -> None:
        try:
            store.inner.execute(("PING",))  # this thread's connection exists before the start
            barrier.wait(timeout=60)
            for j in range(per_writer):
                writer(store, acmi, entity, f"w{index}-{j}", index * 1000 + j, out)
        except Exception as exc:  # a writer must never die silently
            out.errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(writers)]
    calls_before = store.calls  # the writers' PINGs bypass the count
    for t in threads:
        t.start()
    barrier.wait(timeout=60)  # every writer is started and connected: go
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    calls = store.calls - calls_before  # before _kept: its read-back is no write
    kept = _kept(store, acmi, method, entity)
    return Race(method, writers, writers * per_writer, kept, calls, elapsed, out)


def _kept(store: CountingStore, acmi: Acmi, method: str, entity: str) -> int:
    """Signal keys the entity holds once the writers are done."""
    if method == "acmi":
        return len(acmi.signals.all(entity))
    raw = store.inner.execute(("GET", w.ref_keys(entity)[1]))
    return len(json.loads(raw)) if isinstance(raw, bytes) else 0


def race_row(race: Race) -> dict[str, Any]:
    attempts, writes = race.outcome.attempts, race.writes
    return {
        "method": race.method,
        "writers": race.writers,
        "writes": writes,
        "kept": race.kept,
        "lost": writes - race.kept,
        "attempts_per_write": sum(attempts) / len(attempts) if attempts else float("nan"),
        "max_attempts": max(attempts) if attempts else 0,
        "requests_per_write": race.calls / writes,
        "attempts_from_requests": race.calls / writes / METHODS[race.method][2],
        "writes_per_s": writes / race.elapsed_s,
        "errors": race.outcome.errors[:5],
    }


@dataclass(frozen=True)
class Backend:
    label: str
    connect: Callable[[], Store]
    double: UpstashDouble | None = None  # the HTTP requests are counted there too


@contextmanager
def contention_backends(server: RedisServer, settings: Settings) -> Iterator[list[Backend]]:
    """The three stores, built one at a time; the double lives for all of them."""
    server.flush(6)
    with UpstashDouble(server.url_for(6), delay_s=CONTENTION_DELAY_MS / 1000) as double:
        yield [
            Backend(
                f"upstash double ({CONTENTION_DELAY_MS:g} ms/request)",
                lambda: UpstashStore(double.url, double.token, settings=settings),
                double,
            ),
            Backend("redis-server", lambda: RedisStore.from_url(server.url_for(7), settings)),
            Backend("embedded (memory)", MemoryStore),
        ]


@contextmanager
def counting_store(backend: Backend, settings: Settings) -> Iterator[CountingStore]:
    """The backend's store, counted, with both Lua scripts already loaded (untimed)."""
    store = CountingStore(backend.connect())
    try:
        Acmi(store, settings).signals.set("user:warm", "k", 1)
        store.execute(("EVAL", w.CAS_SCRIPT, 1, "acmi:user:warm:x", "", "1"))
        yield store
    finally:
        store.close()


def measure_contention(
    backends: Sequence[Backend], settings: Settings, writer_counts: Sequence[int], per_writer: int
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for backend in backends:
        with counting_store(backend, settings) as store:
            for writers in writer_counts:
                for method in METHODS:
                    double = backend.double
                    before = double.requests if double is not None else 0
                    race = _race(store, method, writers, per_writer, f"user:c-{method}-{writers}")
                    row = race_row(race)
                    if double is not None:  # PINGs and read-back included, as before
                        row["http_requests_per_write"] = (double.requests - before) / race.writes
                    row["backend"] = backend.label
                    rows.append(row)
    return rows


def contention_summary(
    handler_rows: list[dict[str, Any]], contention_rows: list[dict[str, Any]]
) -> dict[str, Any]:
    ours = [r for r in contention_rows if r["method"] == "acmi"]
    naive = [r for r in contention_rows if r["method"] == "naive"]
    return {
        "acmi_lost_total": sum(r["lost"] for r in ours),
        "acmi_attempts_per_write_max": max(r["requests_per_write"] for r in ours),
        "naive_lost_total": sum(r["lost"] for r in naive),
        "naive_writes_total": sum(r["writes"] for r in naive),
        "redis_vs_memory_events_per_s": (
            handler_rows[1]["events_per_s"] / handler_rows[0]["events_per_s"]
        ),
    }


# --- c) concurrent clients and d) the batch path ----------------------------------------------

CONCURRENCY_DB = 15  # client_cpu uses 14


def _scale_ops(side: str, clients: Sequence[int], total: int, sizes: Sequence[int]) -> list[c.Op]:
    """One process per side and round runs them all: each client count appends ``total``
    events between its clients, then single appends and each batch size write ``total``.
    The first op only warms the process up (node's JIT, our caches), untimed in the rows."""
    ops = [c.Op("warm", "append", f"user:warm-{side}", n=300, warmup=300)]
    ops += [
        c.Op(f"clients:{k}", "append", f"user:conc-{side}-{k}", clients=k, n=max(20, total // k))
        for k in clients
    ]
    ops.append(c.Op("batch:1", "append", f"user:batch-{side}-1", n=total))
    ops += [
        c.Op(
            f"batch:{k}", "batch", f"user:batch-{side}-{k}", batch=k, n=max(3, total // k), warmup=2
        )
        for k in sizes
    ]
    return ops


def measure_scale(
    server: RedisServer, *, rounds: int, clients: Sequence[int], total: int, sizes: Sequence[int]
) -> dict[str, Any]:
    """Interleaved rounds (ours, node); per side the list of runs. The contender is a
    reason string when node, npm or ioredis is unavailable."""
    server.flush(CONCURRENCY_DB)
    url = server.url_for(CONCURRENCY_DB)
    node = c.node_runtime()
    runs: dict[str, list[c.Run]] = {"ours": [], "contender": []}
    for _ in range(rounds):
        runs["ours"].append(
            c.run_ours(url, _scale_ops("ours", clients, total, sizes), n=total, warmup=20)
        )
        if isinstance(node, c.Node):
            ops = _scale_ops("node", clients, total, sizes)
            runs["contender"].append(c.run_node(node, url, ops, n=total, warmup=20))
    return {"runs": runs, "node": node}


def _scale_row(runs: dict[str, list[c.Run]], name: str, skipped: str | None) -> dict[str, Any]:
    ours = [r.ops[name] for r in runs["ours"]]
    theirs = [r.ops[name] for r in runs["contender"]]
    nan = float("nan")
    row: dict[str, Any] = {
        "op": name,
        "rounds": len(ours),
        "events": ours[0].items,
        "ours_events_per_s": median([t.items_per_s for t in ours]),
        "ours_p50_us": median([t.p50_us() for t in ours]),
        "ours_p99_us": median([t.p99_us() for t in ours]),
        "contender_skipped": skipped,
        "contender_events_per_s": nan,
        "contender_p50_us": nan,
        "contender_p99_us": nan,
        "ratio": nan,
    }
    if theirs:
        row["contender_events_per_s"] = median([t.items_per_s for t in theirs])
        row["contender_p50_us"] = median([t.p50_us() for t in theirs])
        row["contender_p99_us"] = median([t.p99_us() for t in theirs])
        row["ratio"] = c.paired_ratio(
            [t.items_per_s for t in ours], [t.items_per_s for t in theirs]
        )
    return row


def scale_rows(
    measured: dict[str, Any], clients: Sequence[int], sizes: Sequence[int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(concurrency rows, batch rows); a batch row also says how far it beats single appends."""
    runs, node = measured["runs"], measured["node"]
    skipped = node if isinstance(node, str) else None
    concurrency = [_scale_row(runs, f"clients:{k}", skipped) | {"clients": k} for k in clients]
    batches = [_scale_row(runs, f"batch:{k}", skipped) | {"batch": k} for k in (1, *sizes)]
    for row in batches:
        row["vs_single"] = row["ours_events_per_s"] / batches[0]["ours_events_per_s"]
    return concurrency, batches


def _contender(key: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda r: r["contender_skipped"] or r[key]


# --- the section ----------------------------------------------------------------------------

HANDLER_COLUMNS: tuple[Column, ...] = (
    ("store", "label"),
    ("events x rounds", lambda r: f"{r['n']} x {r['rounds']}"),
    ("events/s", "events_per_s"),
    ("p50 ms", "p50_ms"),
    ("p99 ms", "p99_ms"),
    ("all stored", "all_stored"),
    ("first call ms", lambda r: r["first_invocation_s"] * 1000),
)
CONTENTION_COLUMNS: tuple[Column, ...] = (
    ("backend", "backend"),
    ("method", lambda r: METHODS[r["method"]][0]),
    ("writers", "writers"),
    ("writes", "writes"),
    ("kept", "kept"),
    ("lost", "lost"),
    ("attempts/write", "attempts_per_write"),
    ("max attempts", "max_attempts"),
    ("requests/write", "requests_per_write"),
    ("writes/s", "writes_per_s"),
)
CONCURRENCY_COLUMNS: tuple[Column, ...] = (
    ("clients", "clients"),
    ("events", "events"),
    ("ours events/s", "ours_events_per_s"),
    ("ours p50 µs", "ours_p50_us"),
    ("ours p99 µs", "ours_p99_us"),
    ("contender events/s", _contender("contender_events_per_s")),
    ("contender p99 µs", _contender("contender_p99_us")),
    ("ours / contender", "ratio"),
)
BATCH_COLUMNS: tuple[Column, ...] = (
    ("events per call", "batch"),
    ("events", "events"),
    ("ours events/s", "ours_events_per_s"),
    ("ours p50 µs per call", "ours_p50_us"),
    ("x single appends", "vs_single"),
    ("contender events/s", _contender("contender_events_per_s")),
    ("ours / contender", "ratio"),
)


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    rounds, n = (1, 100) if quick else (3, 700)
    writer_counts, per_writer = ([1, 16], 2) if quick else ([1, 4, 16, 50], 4)
    handler_rows = ingest_rows(measure_ingest(server, rounds=rounds, n=n))
    settings = Settings(store_timeout_s=10.0)
    with contention_backends(server, settings) as backends:
        contention_rows = measure_contention(backends, settings, writer_counts, per_writer)
    scale_rounds, clients, total = (1, [1, 4], 200) if quick else (5, [1, 4, 16, 64], 4000)
    sizes = [10, 100] if quick else [10, 100, 1000]
    scaled = measure_scale(server, rounds=scale_rounds, clients=clients, total=total, sizes=sizes)
    concurrency_rows, batch_rows = scale_rows(scaled, clients, sizes)
    ours_runtime = scaled["runs"]["ours"][0].runtime
    node = scaled["node"]
    contender = node if isinstance(node, str) else scaled["runs"]["contender"][0].runtime
    return {
        "ingest_handler": handler_rows,
        "contention": contention_rows,
        "contention_summary": contention_summary(handler_rows, contention_rows),
        "concurrency": concurrency_rows,
        "batch": batch_rows,
        "tables": {
            "ingest_handler": table_of(HANDLER_COLUMNS, handler_rows),
            "contention": table_of(CONTENTION_COLUMNS, contention_rows),
            "concurrent_clients": table_of(CONCURRENCY_COLUMNS, concurrency_rows),
            "batch_path": table_of(BATCH_COLUMNS, batch_rows),
        },
        "note": (
            "ingest: functions.ingest.handler fed API Gateway v2 events in process "
            f"({WARMUP} warm-up calls untimed), a fresh interpreter per round, the stores "
            "alternating; the median round is shown. Contention: W threads start together, "
            f"each sets {per_writer} keys of one entity's signals; "
            "requests/write counts every store call (ACMI: 1 means no retries at all). "
            f"Concurrent clients: ours is N threads sharing one Acmi ({ours_runtime}); no async "
            "Python client exists, so there is no asyncio row; the contender is N ioredis "
            f"connections driven by N async loops in one node process ({contender}), each "
            f"client appending to its own entity, {total:,} events per client count; "
            f"{scale_rounds} interleaved round(s), medians, ratio = median per-round events/s "
            "ratio. Batch path: acmi.timeline.extend (one EVALSHA, all or nothing) against "
            "the reference's batch (MULTI, k x ZADD NX, EXEC); 'x single appends' compares "
            "ours with ours, one event per call."
        ),
    }

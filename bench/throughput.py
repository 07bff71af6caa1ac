"""4. Throughput and contention.

a) events/s through ``functions.ingest.handler`` (API Gateway v2 events, in process, one
   fresh interpreter per store) on the embedded store and on a real redis-server.
b) W concurrent writers on ONE entity's signals, each setting its own keys: ACMI (one Lua
   script per write, no compare-and-set), the reference's read-modify-write (GET + SET) and
   a compare-and-set loop (GET, then a Lua CAS on the whole text, retried with jittered
   backoff), on the Upstash double (with a small per-request delay), real Redis and the
   embedded store. Reported: keys kept (lost updates) and attempts per write.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acmi_core import Acmi, Settings
from acmi_core.errors import StoreCommandError
from acmi_core.store.base import Arg, Command, Reply, Script, Store
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from bench import _workload as w
from bench._infra import ROOT, RedisServer, UpstashDouble, fmt_table

CONTENTION_DELAY_MS = 5.0
WORKER_DB = 5


# --- a) the ingest handler ------------------------------------------------------------------


def _ingest_worker(n: int, extra_env: dict[str, str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACMI_", "UPSTASH_"))}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "ACMI_API_KEY": "acmi_local_example_admin_key_0001",
            "POWERTOOLS_METRICS_NAMESPACE": "ACMI",
            **extra_env,
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        result = subprocess.run(
            [sys.executable, "-m", "bench._ingest_worker", str(n), str(out)],
            cwd=ROOT,
            env=env,
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


def ingest_handler(server: RedisServer, *, quick: bool) -> list[dict[str, Any]]:
    """Rounds of fresh workers, the two stores alternating, so that machine noise hits both
    alike; per store the median round is reported."""
    rounds, n = (1, 100) if quick else (3, 700)
    stores: tuple[tuple[str, dict[str, str]], ...] = (
        ("embedded (memory)", {}),
        ("redis-server", {"ACMI_REDIS_URL": server.url_for(WORKER_DB)}),
    )
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in stores}
    for _ in range(rounds):
        for label, env in stores:
            server.flush(WORKER_DB)  # same bodies each round: new deliveries, not replays
            runs[label].append(_ingest_worker(n, env))
    rows = []
    for label, results in runs.items():
        ordered = sorted(results, key=lambda r: r["events_per_s"])
        row = dict(ordered[len(ordered) // 2])  # the median round
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

    def transaction(self, commands: Sequence[Command]) -> list[Reply]:
        self._count()
        return self.inner.transaction(commands)

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


def contend(
    store: CountingStore, method: str, writers: int, per_writer: int, entity: str
) -> dict[str, Any]:
    acmi = Acmi(store, Settings())
    _, writer, calls_per_attempt = METHODS[method]
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
    calls = store.calls - calls_before
    expected = writers * per_writer
    if method == "acmi":
        kept = len(acmi.signals.all(entity))
    else:
        raw = store.inner.execute(("GET", w.ref_keys(entity)[1]))
        kept = len(json.loads(raw)) if isinstance(raw, bytes) else 0
    attempts = out.attempts
    return {
        "method": method,
        "writers": writers,
        "writes": expected,
        "kept": kept,
        "lost": expected - kept,
        "attempts_per_write": sum(attempts) / len(attempts) if attempts else float("nan"),
        "max_attempts": max(attempts) if attempts else 0,
        "requests_per_write": calls / expected,
        "attempts_from_requests": calls / expected / calls_per_attempt,
        "writes_per_s": expected / elapsed,
        "errors": out.errors[:5],
    }


def contention(server: RedisServer, *, quick: bool) -> list[dict[str, Any]]:
    writer_counts = [1, 16] if quick else [1, 4, 16, 50]
    per_writer = 2 if quick else 4
    server.flush(6)
    rows: list[dict[str, Any]] = []
    settings = Settings(store_timeout_s=10.0)
    with UpstashDouble(server.url_for(6), delay_s=CONTENTION_DELAY_MS / 1000) as double:
        backends: list[tuple[str, Callable[[], Store]]] = [
            (
                f"upstash double ({CONTENTION_DELAY_MS:g} ms/request)",
                lambda: UpstashStore(double.url, double.token, settings=settings),
            ),
            ("redis-server", lambda: RedisStore.from_url(server.url_for(7), settings)),
            ("embedded (memory)", MemoryStore),
        ]
        for backend, factory in backends:
            store = CountingStore(factory())
            Acmi(store, settings).signals.set("user:warm", "k", 1)  # load the script
            store.execute(("EVAL", w.CAS_SCRIPT, 1, "acmi:user:warm:x", "", "1"))
            for writers in writer_counts:
                for method in METHODS:
                    entity = f"user:c-{method}-{writers}"
                    before = double.requests
                    row = contend(store, method, writers, per_writer, entity)
                    if backend.startswith("upstash"):
                        row["http_requests_per_write"] = (double.requests - before) / row["writes"]
                    row["backend"] = backend
                    rows.append(row)
            store.close()
    return rows


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    handler_rows = ingest_handler(server, quick=quick)
    contention_rows = contention(server, quick=quick)
    handler_table = fmt_table(
        ["store", "events x rounds", "events/s", "p50 ms", "p99 ms", "all stored", "first call ms"],
        [
            [
                r["label"],
                f"{r['n']} x {r['rounds']}",
                r["events_per_s"],
                r["p50_ms"],
                r["p99_ms"],
                r["all_stored"],
                r["first_invocation_s"] * 1000,
            ]
            for r in handler_rows
        ],
    )
    redis_rate = handler_rows[1]["events_per_s"]
    memory_rate = handler_rows[0]["events_per_s"]
    contention_table = fmt_table(
        [
            "backend",
            "method",
            "writers",
            "writes",
            "kept",
            "lost",
            "attempts/write",
            "max attempts",
            "requests/write",
            "writes/s",
        ],
        [
            [
                r["backend"],
                METHODS[r["method"]][0],
                r["writers"],
                r["writes"],
                r["kept"],
                r["lost"],
                r["attempts_per_write"],
                r["max_attempts"],
                r["requests_per_write"],
                r["writes_per_s"],
            ]
            for r in contention_rows
        ],
    )
    ours = [r for r in contention_rows if r["method"] == "acmi"]
    naive = [r for r in contention_rows if r["method"] == "naive"]
    summary = {
        "acmi_lost_total": sum(r["lost"] for r in ours),
        "acmi_attempts_per_write_max": max(r["requests_per_write"] for r in ours),
        "naive_lost_total": sum(r["lost"] for r in naive),
        "naive_writes_total": sum(r["writes"] for r in naive),
        "redis_vs_memory_events_per_s": redis_rate / memory_rate,
    }
    return {
        "ingest_handler": handler_rows,
        "contention": contention_rows,
        "contention_summary": summary,
        "tables": {"ingest_handler": handler_table, "contention": contention_table},
        "note": (
            "ingest: functions.ingest.handler fed API Gateway v2 events in process (20 warm-up "
            "calls untimed), a fresh interpreter per round, the stores alternating; the median "
            "round is shown. Contention: W threads start "
            f"together, each sets {2 if quick else 4} keys of one entity's signals; "
            "requests/write counts every store call (ACMI: 1 means no retries at all)."
        ),
    }

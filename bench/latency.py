"""2. Latency under RTT: the Upstash double delays every request by ``delay_ms`` (a stand-in
for the network round trip to Upstash). p50/p99 per operation, and each as a ratio to the
delay: the physical limit is 1.0 per round trip. The reference's access patterns run on the
same double in the same loop, interleaved with ours."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from acmi_core import Acmi
from bench import _workload as w
from bench._infra import Column, RedisServer, median, percentile, table_of

DELAY_MS = 20.0
TITLE = "2. Latency under RTT (Upstash double, injected delay per request)"
# operation -> what it is; the order is the table's and the loop's
OPS: dict[str, str] = {
    "PING": "one raw request: the floor",
    "get": "acmi.get (profile + signals + 50 events)",
    "append": "acmi.timeline.append",
    "signal set": "acmi.signals.set",
    "ingest (HTTP)": "POST /v1/ingest/n8n via the app",
    "bootstrap": "acmi.bootstrap of a realistic agent (every section)",
    "lock claim+release": "acmi.locks.claim, then release",
    "get, reference pattern": "3 sequential reads",
    "signal set, reference pattern": "GET + SET (racy)",
    "bootstrap, reference pattern": "6 sequential reads (reference CLI)",
}
COLUMNS: tuple[Column, ...] = (
    ("operation", "op"),
    ("requests", "round_trips"),
    ("p50 ms", "p50_ms"),
    ("p99 ms", "p99_ms"),
    ("p50 / delay", "p50_ratio"),
    ("p99 / delay", "p99_ratio"),
    ("p50/delay/rt", "p50_ratio_per_round_trip"),
)


@dataclass(frozen=True)
class Samples:
    n: int
    ms: dict[str, list[float]]  # per operation, one per call
    requests: dict[str, int]  # per operation, summed over the n calls


def _claim_release(acmi: Acmi, resource: str) -> None:
    lease = acmi.locks.claim(resource, w.AGENT, 60_000)
    acmi.locks.release(resource, lease.owner_token or "")


def _calls(rig: w.UpstashRig, api: w.ApiClient) -> dict[str, Callable[[], object]]:
    acmi, store = rig.acmi, rig.store
    seq = iter(range(10**9))  # fresh ids: each call is a new write, not a replay
    calls: dict[str, Callable[[], object]] = {
        "PING": lambda: store.execute(("PING",)),
        "get": lambda: acmi.get("user:lat"),
        "append": lambda: acmi.timeline.append(
            "user:lat", {**w.EVENT, "correlationId": f"c-{next(seq)}"}
        ),
        "signal set": lambda: acmi.signals.set("user:lat", "k", next(seq)),
        "ingest (HTTP)": lambda: api.webhook(next(seq)),
        "bootstrap": lambda: acmi.bootstrap(w.AGENT),
        "lock claim+release": lambda: _claim_release(acmi, f"bench:lat-{next(seq)}"),
        "get, reference pattern": lambda: w.reference_get(store, "user:lat"),
        "signal set, reference pattern": lambda: w.reference_signal_set(
            store, "user:lat", "r", next(seq)
        ),
        "bootstrap, reference pattern": lambda: w.reference_bootstrap(store, w.AGENT),
    }
    assert list(calls) == list(OPS)
    return calls


def _warm(rig: w.UpstashRig, api: w.ApiClient) -> None:
    """Script cache, key cache, connections: before the delay, untimed."""
    rig.acmi.profile.set("user:lat", {"name": "lat"})
    rig.acmi.signals.set("user:lat", "k", 0)
    for i in range(5):
        rig.acmi.timeline.append("user:lat", {**w.EVENT, "correlationId": f"warm-{i}"})
        w.reference_get(rig.store, "user:lat")
    rig.acmi.get("user:lat")  # loads the page script its newest events run
    api.webhook(-1)
    w.realistic_agent(rig.acmi)  # bootstrap's agent; loads the bootstrap and lock scripts


def measure(rig: w.UpstashRig, api: w.ApiClient, *, n: int, delay_ms: float) -> Samples:
    _warm(rig, api)
    calls = _calls(rig, api)
    samples = Samples(n, {name: [] for name in OPS}, dict.fromkeys(OPS, 0))
    rig.double.delay_s = delay_ms / 1000
    try:
        for _ in range(n):
            for name, call in calls.items():  # interleaved: noise hits every op alike
                before = rig.double.requests
                start = time.perf_counter()
                call()
                samples.ms[name].append((time.perf_counter() - start) * 1000)
                samples.requests[name] += rig.double.requests - before
    finally:
        rig.double.delay_s = 0.0
    return samples


def rows(samples: Samples, delay_ms: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, what in OPS.items():
        p50, p99 = median(samples.ms[name]), percentile(samples.ms[name], 99)
        round_trips = samples.requests[name] / samples.n
        out.append(
            {
                "op": name,
                "what": what,
                "round_trips": round_trips,
                "p50_ms": p50,
                "p99_ms": p99,
                "p50_ratio": p50 / delay_ms,
                "p99_ratio": p99 / delay_ms,
                "p50_ratio_per_round_trip": p50 / delay_ms / round_trips,
            }
        )
    return out


def run(server: RedisServer, *, quick: bool, delay_ms: float = DELAY_MS) -> dict[str, Any]:
    n = 15 if quick else 200
    with (
        w.upstash_rig(server, w.api_settings(store_timeout_s=10.0)) as rig,
        w.ApiClient(rig.acmi) as api,
    ):
        ops = rows(measure(rig, api, n=n, delay_ms=delay_ms), delay_ms)
    by_op = {r["op"]: r for r in ops}
    speedup = by_op["bootstrap, reference pattern"]["p50_ms"] / by_op["bootstrap"]["p50_ms"]
    return {
        "delay_ms": delay_ms,
        "n": n,
        "operations": by_op,
        "bootstrap_speedup_p50": speedup,
        "table": table_of(COLUMNS, ops),
        "note": (
            f"Upstash double with {delay_ms:g} ms injected per request; n = {n} per operation, "
            "interleaved. Ratio 1.0 per round trip is the physical limit. Bootstrap (realistic "
            f"agent, one script) vs the reference's 6 sequential reads: {speedup:.1f}x at p50."
        ),
    }

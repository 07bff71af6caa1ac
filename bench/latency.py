"""2. Latency under RTT: the Upstash double delays every request by ``delay_ms`` (a stand-in
for the network round trip to Upstash). p50/p99 per operation, and each as a ratio to the
delay: the physical limit is 1.0 per round trip. The reference's access patterns run on the
same double in the same loop, interleaved with ours."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from acmi_core import Acmi
from acmi_core.store.upstash import UpstashStore
from bench import _workload as w
from bench._infra import RedisServer, UpstashDouble, fmt_table, median, percentile

DELAY_MS = 20.0


def run(server: RedisServer, *, quick: bool, delay_ms: float = DELAY_MS) -> dict[str, Any]:
    n = 15 if quick else 200
    server.flush()
    settings = w.api_settings(store_timeout_s=10.0)
    with UpstashDouble(server.url_for()) as double:
        store = UpstashStore(double.url, double.token, settings=settings)
        acmi = Acmi(store, settings)
        api = w.ApiClient(acmi)
        # warm: script cache, key cache, connections
        acmi.profile.set("user:lat", {"name": "lat"})
        acmi.signals.set("user:lat", "k", 0)
        for i in range(5):
            acmi.timeline.append("user:lat", {**w.EVENT, "correlationId": f"warm-{i}"})
            w.reference_get(store, "user:lat")
        api.webhook(-1)
        double.delay_s = delay_ms / 1000
        seq = iter(range(10**9))
        ops: list[tuple[str, str, Callable[[], Any]]] = [
            ("PING", "one raw request: the floor", lambda: store.execute(("PING",))),
            ("get", "acmi.get (profile + signals + 50 events)", lambda: acmi.get("user:lat")),
            (
                "append",
                "acmi.timeline.append",
                lambda: acmi.timeline.append(
                    "user:lat", {**w.EVENT, "correlationId": f"c-{next(seq)}"}
                ),
            ),
            (
                "signal set",
                "acmi.signals.set",
                lambda: acmi.signals.set("user:lat", "k", next(seq)),
            ),
            ("ingest (HTTP)", "POST /v1/ingest/n8n via the app", lambda: api.webhook(next(seq))),
            (
                "get, reference pattern",
                "3 sequential reads",
                lambda: w.reference_get(store, "user:lat"),
            ),
            (
                "signal set, reference pattern",
                "GET + SET (racy)",
                lambda: w.reference_signal_set(store, "user:lat", "r", next(seq)),
            ),
        ]
        samples: dict[str, list[float]] = {name: [] for name, _, _ in ops}
        requests: dict[str, int] = dict.fromkeys(samples, 0)
        for _ in range(n):
            for name, _, call in ops:  # interleaved: noise hits every op alike
                before = double.requests
                start = time.perf_counter()
                call()
                samples[name].append((time.perf_counter() - start) * 1000)
                requests[name] += double.requests - before
        double.delay_s = 0.0
        api.close()
        store.close()
    rows: list[dict[str, Any]] = []
    for name, what, _ in ops:
        values = samples[name]
        p50, p99 = median(values), percentile(values, 99)
        round_trips = requests[name] / n
        rows.append(
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
    table = fmt_table(
        ["operation", "requests", "p50 ms", "p99 ms", "p50 / delay", "p99 / delay", "p50/delay/rt"],
        [
            [
                r["op"],
                r["round_trips"],
                r["p50_ms"],
                r["p99_ms"],
                r["p50_ratio"],
                r["p99_ratio"],
                r["p50_ratio_per_round_trip"],
            ]
            for r in rows
        ],
    )
    note = (
        f"Upstash double with {delay_ms:g} ms injected per request; n = {n} per operation, "
        "interleaved. Ratio 1.0 per round trip is the physical limit."
    )
    return {
        "delay_ms": delay_ms,
        "n": n,
        "operations": {r["op"]: r for r in rows},
        "table": table,
        "note": note,
    }

"""11. One tenant on a Redis Cluster: its write throughput on 3 masters next to one node.

T threads sharing one Acmi (as a Lambda fleet shares one store) append events to distinct
entities of ONE tenant: on the standalone redis-server (the RESP store, reference layout),
on a 3-master cluster started here (``acmi_core.testing.redis_cluster``: redis-py's
RedisCluster, the cluster layout) and on a one-node cluster (the shape ElastiCache
Serverless presents). Rounds interleave the stores; the medians are reported and the
ratio cluster / standalone is the figure (the machine is shared: never the absolute
rates). With one bucket per tenant (B = 1) every key of the tenant is in one slot, so all
its writes land on one master whatever the cluster's size: the ratio measures the
cluster client's cost, not the cluster's capacity. B > 1 (the next step) adds its
column here: the same tenant spread over B slots, so over min(B, masters) masters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.store import open_store
from acmi_core.testing.redis_cluster import redis_cluster
from bench._infra import Column, RedisServer, median, table_of

TITLE = "11. One tenant's writes on a Redis Cluster (B = 1) next to one node"
DB = 6


def _event(i: int) -> dict[str, Any]:
    return {"source": "agent:bench", "kind": "note", "correlationId": f"c{i}", "summary": "s"}


def _rate(acmi: Acmi, threads: int, per_thread: int, round_no: int) -> float:
    """Events per second: ``threads`` threads, each appending ``per_thread`` events to
    entities of its own (one tenant)."""
    start = threading.Barrier(threads + 1)

    def work(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            acmi.timeline.append(f"deal:r{round_no}-t{t}-{i % 8}", _event(i))

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in pool:
        thread.join()
    return threads * per_thread / (time.perf_counter() - began)


def run(server: RedisServer, *, quick: bool = False) -> dict[str, Any]:
    threads, per_thread, rounds = (2, 50, 2) if quick else (4, 300, 9)
    server.flush(DB)
    with redis_cluster(3) as three, redis_cluster(1) as one:
        clients: dict[str, Acmi] = {
            "standalone": create_acmi(
                settings=Settings(redis_url=server.url_for(DB), store_timeout_s=10.0)
            )
        }
        for name, cluster in (("3-master cluster", three), ("1-node cluster", one)):
            settings = Settings(
                redis_url=cluster.url,
                redis_cluster=True,
                key_layout="cluster",
                store_timeout_s=10.0,
            )
            clients[name] = create_acmi(open_store(settings), settings)
        rates: dict[str, list[float]] = {name: [] for name in clients}

        def measure_on(acmi: Acmi) -> Callable[[int], float]:
            return lambda round_no: _rate(acmi, threads, per_thread, round_no)

        runs = [(name, measure_on(acmi)) for name, acmi in clients.items()]
        for round_no in range(rounds):
            order = runs if round_no % 2 == 0 else runs[::-1]  # no store always goes first
            for name, measure in order:
                rates[name].append(measure(round_no))
        for acmi in clients.values():
            acmi.close()
    # each round's ratio to that round's standalone rate: the machine's load shifts
    # between rounds far more than between the stores of one round
    records = [
        {
            "store": name,
            "events_per_s": median(values),
            "ratio": median(
                [v / base for v, base in zip(values, rates["standalone"], strict=True)]
            ),
        }
        for name, values in rates.items()
    ]
    columns: list[Column] = [
        ("store", "store"),
        ("events/s (median)", lambda r: round(r["events_per_s"])),
        ("ratio to standalone (median of rounds)", lambda r: round(r["ratio"], 2)),
    ]
    table = table_of(columns, records)
    server.flush(DB)
    return {
        "threads": threads,
        "events_per_thread": per_thread,
        "rounds": rounds,
        "rates": rates,
        "records": records,
        "table": table,
        "note": (
            f"{threads} threads x {per_thread} appends of one tenant per round, {rounds}"
            " rounds interleaved. B = 1: the tenant's keys share one slot, so one master"
            " takes all its writes on any cluster size."
        ),
    }

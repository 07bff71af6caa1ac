"""11. One tenant on a Redis Cluster: its write throughput on 3 masters next to one node,
at B = 1 and B = 3 buckets, and how list and job costs grow with B.

T threads sharing one Acmi (as a Lambda fleet shares one store) append events to distinct
entities of ONE tenant: on the standalone redis-server (the RESP store, reference layout),
on a 3-master cluster started here (``acmi_core.testing.redis_cluster``: redis-py's
RedisCluster, the cluster layout) and on a one-node cluster (the shape ElastiCache
Serverless presents). Rounds interleave the stores; the medians are reported and the
ratio cluster / standalone is the figure (the machine is shared: never the absolute
rates). With one bucket per tenant (B = 1) every key of the tenant is in one slot, so all
its writes land on one master whatever the cluster's size: the ratio measures the
cluster client's cost, not the cluster's capacity. At B = 3 (``ACMI_CLUSTER_BUCKETS``)
the same tenant's entities spread over 3 hash tags, so over the 3 masters: its row gives
the throughput ratio B = 3 / B = 1 and the busiest master's share of the appends (exact,
from each appended entity's node). The machine runs the client and every master on 2
shared cores, so a throughput ratio here shows the cost or gain of the spread, not a
real cluster's capacity; the share is the figure that carries over.

Costs by B (exact counts, the 3-master cluster): a list of 2,000 entities (round trips:
one SSCAN step a bucket at least), and one rollup-cron run of a tenant after 30 changes
(commands and requests: the run once per bucket, each with its own state and record).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from redis.cluster import RedisCluster as ClusterClient

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base.model import EntityId
from acmi_core.jobs import rollup
from acmi_core.jobs.runner import JobRun
from acmi_core.jobs.tenants import run_buckets
from acmi_core.store import open_store
from acmi_core.store.counting import CountingStore
from acmi_core.testing.redis_cluster import redis_cluster
from bench._infra import Column, RedisServer, median, table_of

TITLE = "11. One tenant's writes on a Redis Cluster (B = 1 and B = 3) next to one node"
DB = 6


def _event(i: int) -> dict[str, Any]:
    return {"source": "agent:bench", "kind": "note", "correlationId": f"c{i}", "summary": "s"}


def _entity(round_no: int, t: int, i: int) -> str:
    return f"deal:r{round_no}-t{t}-{i % 8}"


def _rate(acmi: Acmi, threads: int, per_thread: int, round_no: int) -> float:
    """Events per second: ``threads`` threads, each appending ``per_thread`` events to
    entities of its own (one tenant)."""
    start = threading.Barrier(threads + 1)

    def work(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            acmi.timeline.append(_entity(round_no, t, i), _event(i))

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
        shapes = (
            ("3-master cluster", three, "1"),
            ("1-node cluster", one, "1"),
            ("3-master cluster, B = 3", three, "3"),
        )
        for name, cluster, buckets in shapes:
            settings = Settings(
                redis_url=cluster.url,
                redis_cluster=True,
                key_layout="cluster",
                cluster_buckets=buckets,
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
        shares = {
            name: _busiest_share(clients[name], three, threads, per_thread, rounds)
            for name in ("3-master cluster", "3-master cluster, B = 3")
        }
        costs = _costs_by_b(three, quick=quick)
        for acmi in clients.values():
            acmi.close()
    # each round's ratio to that round's standalone rate: the machine's load shifts
    # between rounds far more than between the stores of one round
    one_bucket = rates["3-master cluster"]
    records = [
        {
            "store": name,
            "events_per_s": median(values),
            "ratio": median(
                [v / base for v, base in zip(values, rates["standalone"], strict=True)]
            ),
            "ratio_b1": median([v / base for v, base in zip(values, one_bucket, strict=True)])
            if name.startswith("3-master")
            else None,
            "busiest": shares.get(name),
        }
        for name, values in rates.items()
    ]
    columns: list[Column] = [
        ("store", "store"),
        ("events/s (median)", lambda r: round(r["events_per_s"])),
        ("ratio to standalone (median of rounds)", lambda r: round(r["ratio"], 2)),
        ("ratio to B = 1 on 3 masters", lambda r: _maybe(r["ratio_b1"], 2)),
        ("busiest master's share of the appends", lambda r: _percent(r["busiest"])),
    ]
    table = table_of(columns, records)
    cost_columns: list[Column] = [
        ("B", "buckets"),
        ("list of 2,000: round trips", "list_requests"),
        ("list of 2,000: commands", "list_commands"),
        ("rollup-cron after 30 changes: requests", "rollup_requests"),
        ("rollup-cron after 30 changes: commands", "rollup_commands"),
    ]
    server.flush(DB)
    return {
        "threads": threads,
        "events_per_thread": per_thread,
        "rounds": rounds,
        "rates": rates,
        "records": records,
        "costs": costs,
        "table": table,
        "tables": {"costs_by_B_(3_masters)": table_of(cost_columns, costs)},
        "note": (
            f"{threads} threads x {per_thread} appends of one tenant per round, {rounds}"
            " rounds interleaved, each to"
            f" {threads * 8} entities. B = 1: the tenant's keys share one"
            " slot, so one master takes all its writes on any cluster size; B = 3: each"
            " entity in its bucket's slot (CRC-32 of its id mod 3), coordination in bucket"
            " 0. Busiest share: of the appends, exact, by each entity's node. Costs: exact"
            " counts of one call; a list walks the buckets one after another (a cursor"
            " names the bucket), a bucketed job runs once per bucket."
        ),
    }


def _maybe(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _percent(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def _busiest_share(acmi: Acmi, cluster: Any, threads: int, per_thread: int, rounds: int) -> float:
    """Of the appends the rate rounds made, the share the busiest master took: each
    entity's timeline key's node (exact, not sampled)."""
    per_node: dict[int, int] = {}
    with ClusterClient.from_url(cluster.url) as client:
        for round_no in range(rounds):
            for t in range(threads):
                for i in range(per_thread):
                    key = acmi.keys.timeline(EntityId.parse(_entity(round_no, t, i)))
                    port = int(client.get_node_from_key(key).port)
                    per_node[port] = per_node.get(port, 0) + 1
    return max(per_node.values()) / sum(per_node.values())


class _Clock:
    """A clock the bench moves by hand (ms)."""

    def __init__(self) -> None:
        self.now = 1_790_000_000_000

    def __call__(self) -> int:
        return self.now


def _costs_by_b(cluster: Any, *, quick: bool) -> list[dict[str, Any]]:
    """A list of 2,000 entities and a rollup run after 30 changes, at B = 1, 3 and 12."""
    out: list[dict[str, Any]] = []
    for buckets in (1, 3) if quick else (1, 3, 12):
        tenant = f"costs-b{buckets}"
        settings = Settings(
            redis_url=cluster.url,
            redis_cluster=True,
            key_layout="cluster",
            cluster_buckets=f"1,{tenant}={buckets}",
            store_timeout_s=10.0,
        )
        store = open_store(settings)
        acmi = Acmi(store, settings, tenant=tenant)
        by_bucket: dict[int, list[str]] = {}
        for n in range(2000):
            by_bucket.setdefault(acmi.keys.bucket_of(f"contact:c{n}"), []).append(f"contact:c{n}")
        for members in by_bucket.values():  # a batch is one bucket's
            for start in range(0, len(members), 200):
                with acmi.batch() as batch:
                    for entity in members[start : start + 200]:
                        batch.signals.set(entity, "seen", 1)
        counted = CountingStore(store)
        listed = Acmi(counted, settings, tenant=tenant).list("contact")
        assert len(listed) == 2000
        row: dict[str, Any] = {
            "buckets": buckets,
            "list_requests": counted.requests,
            "list_commands": counted.commands,
        }
        clock = _Clock()
        clocked = Acmi(store, settings, tenant=tenant, clock=clock)
        for n in range(30):
            clocked.timeline.append(f"deal:a{n}", _event(n) | {"ts": clock()})
        clock.now += 10 * 60_000  # past the job's settle time
        run = JobRun("rollup-cron", f"costs-{buckets}-{time.time_ns()}", clock(), {})
        result = run_buckets(clocked, run, rollup.run, clock=time.perf_counter)
        assert result["visited"] == 30, result
        row["rollup_requests"], row["rollup_commands"] = result["requests"], result["commands"]
        out.append(row)
        store.close()
    return out

"""The failover drill: a 3-master Redis Cluster with one replica each, a master killed
(SIGKILL) under load, and what an acknowledged write can lose, without and with
``ACMI_REDIS_WAIT_REPLICAS=1``. A writer appends events (each its own correlationId) to
the timelines of six tenants spread over the masters; every append that returned is
acknowledged. After the replica took over, every timeline is read back: an acknowledged
event missing is lost. Also the cost of WAIT, as a ratio of the acknowledged writes per
second before the kill."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from redis.cluster import RedisCluster as ClusterClient

from acmi_core import Acmi
from acmi_core.base.errors import AcmiError
from acmi_core.base.keys import Keys
from acmi_core.base.model import EntityId
from acmi_core.base.settings import Settings
from acmi_core.store import open_store
from acmi_core.testing.redis_cluster import RedisCluster
from acmi_core.testing.redis_cluster import redis_cluster as start_redis_cluster

pytestmark = pytest.mark.slow

TENANTS = tuple(f"t{n}" for n in range(6))
ENTITY = EntityId.parse("deal:drill")
BEFORE_S = 2.0  # load before the kill (what the throughput is measured on)
AFTER_S = 2.0  # load once the replica serves the killed master's slots
FAILOVER_MAX_S = 30.0


@dataclass
class Drill:
    acked: dict[str, list[str]] = field(default_factory=lambda: {t: [] for t in TENANTS})
    refused: int = 0  # writes answered with an error (never acknowledged)
    before: int = 0  # acknowledged before the kill
    kill_n: int = 0  # the number of the first write after the kill
    lost: dict[str, int] = field(default_factory=dict)
    failover_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.before / BEFORE_S


@pytest.fixture
def cluster() -> Iterator[RedisCluster]:
    with start_redis_cluster(3, replicas=1, node_timeout_ms=1000) as started:
        yield started


def _owner(client: ClusterClient, tenant: str) -> int:
    key = Keys(tenant, "default", "cluster").timeline(ENTITY)
    return int(client.get_node_from_key(key).port)


def _write(acmis: dict[str, Acmi], drill: Drill, n: int) -> None:
    for tenant, acmi in acmis.items():
        cid = f"{tenant}-{n}"
        event = {"source": "agent:drill", "kind": "note", "correlationId": cid, "summary": cid}
        try:
            acmi.timeline.append(str(ENTITY), event)
        except AcmiError:
            drill.refused += 1  # a 503 while the shard is down: not acknowledged
            continue
        drill.acked[tenant].append(cid)


def _serves(client: ClusterClient, victim: int) -> bool:
    """Whether a replica owns the killed master's slots (the survivors say so)."""
    try:
        client.nodes_manager.initialize()
    except Exception:
        return False
    return all(node.port != victim for node in client.get_primaries())


def run_drill(cluster: RedisCluster, wait_replicas: int) -> tuple[Drill, list[str]]:
    settings = Settings(
        key_layout="cluster",
        redis_cluster=True,
        redis_url=cluster.url,
        redis_wait_replicas=wait_replicas,
        store_timeout_s=0.5,
    )
    store = open_store(settings)
    acmis = {t: Acmi(store, settings, tenant=t) for t in TENANTS}
    drill = Drill()
    survivor = f"redis://127.0.0.1:{cluster.ports[1]}"
    with ClusterClient.from_url(cluster.url) as seeing, ClusterClient.from_url(survivor) as rest:
        owners = {t: _owner(seeing, t) for t in TENANTS}
        victim = owners[TENANTS[0]]
        on_victim = [t for t in TENANTS if owners[t] == victim]
        assert len(set(owners.values())) >= 2  # the load spans masters
        _write(acmis, drill, -1)  # scripts loaded, slot map read
        drill.acked = {t: [] for t in TENANTS}
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < BEFORE_S:
            _write(acmis, drill, n)
            n += 1
        drill.before = sum(len(v) for v in drill.acked.values())
        os.kill(cluster.pids[victim], signal.SIGKILL)  # under load: no goodbye
        killed, drill.kill_n = time.perf_counter(), n
        while not _serves(rest, victim):
            assert time.perf_counter() - killed < FAILOVER_MAX_S, "no failover"
            _write(acmis, drill, n)
            n += 1
        drill.failover_s = time.perf_counter() - killed
        until = time.perf_counter() + AFTER_S
        while time.perf_counter() < until:
            _write(acmis, drill, n)
            n += 1
        for tenant in TENANTS:
            key = Keys(tenant, "default", "cluster").timeline(ENTITY)
            stored = {json.loads(m)["correlationId"] for m in rest.zrange(key, 0, -1)}
            drill.lost[tenant] = len(set(drill.acked[tenant]) - stored)
    store.close()
    return drill, on_victim


@pytest.fixture
def second_cluster() -> Iterator[RedisCluster]:
    with start_redis_cluster(3, replicas=1, node_timeout_ms=1000) as started:
        yield started


def test_what_an_acknowledged_write_can_lose_without_wait_and_what_wait_costs(
    cluster: RedisCluster, second_cluster: RedisCluster
) -> None:
    plain, on_victim = run_drill(cluster, wait_replicas=0)
    waited, _ = run_drill(second_cluster, wait_replicas=1)
    acked = sum(len(v) for v in plain.acked.values())
    lost = sum(plain.lost.values())
    ratio = waited.rate / plain.rate
    print(
        f"# no WAIT: {lost}/{acked} acknowledged writes lost (the killed master held"
        f" tenants {on_victim}), {plain.refused} refused, failover {plain.failover_s:.1f} s;"
        f" WAIT 1: {sum(waited.lost.values())} lost; throughput with WAIT 1:"
        f" {ratio:.2f}x ({waited.rate:.0f} vs {plain.rate:.0f} writes/s)"
    )
    # without WAIT only the killed master's tenants can lose (asynchronous replication:
    # what it acknowledged and had not sent yet); the others lose nothing, and the killed
    # master's tenants are served again once its replica took over
    assert plain.before > 0 and waited.before > 0
    assert all(plain.lost[t] == 0 for t in TENANTS if t not in on_victim)
    for tenant in on_victim:
        assert any(int(c.rsplit("-", 1)[1]) > plain.kill_n for c in plain.acked[tenant])
    # with WAIT 1 no acknowledged write is lost; the killed master's tenants are refused
    # from the kill on (their new primary has no replica left to wait for), the others
    # served throughout
    assert sum(waited.lost.values()) == 0
    assert waited.refused > 0
    assert all(waited.acked[t] for t in TENANTS)
    assert ratio > 0

"""`acmi doctor` on a real 3-master Redis Cluster: it walks every primary (redis-py's
per-node SCAN) and finds what it finds on one redis-server holding the same data, in
the cluster layout, for two tenants; and the reference layout's copy of those problems
gives the same findings by kind, entity and tenant."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any, Protocol

import pytest
import redis
from redis.cluster import RedisCluster as ClusterClient

from acmi_core import Acmi, create_acmi
from acmi_core.base.keys import Keys, Layout
from acmi_core.base.model import EntityId
from acmi_core.base.settings import Settings
from acmi_core.ops.doctor import Doctor, doctor_report
from acmi_core.ops.findings import Finding, Kind
from acmi_core.ops.keyspace import tagged_tenant
from acmi_core.ops.migrate import Migrate
from acmi_core.store import open_store
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_cluster import RedisCluster
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS

DB = TEST_DBS["cluster_doctor"]  # this module's own database (tests/kit.py TEST_DBS)
TENANTS = ("default", "beta")
TS = 1_700_000_000_000


class Raw(Protocol):
    def set(self, name: str, value: str) -> Any: ...
    def sadd(self, name: str, *values: str) -> Any: ...
    def zadd(self, name: str, mapping: dict[bytes, int]) -> Any: ...
    def hset(self, name: str, key: str, value: str) -> Any: ...


def _event(summary: str, **extra: Any) -> bytes:
    data = {"ts": TS, "source": "user:x", "kind": "note", "correlationId": "m-1"}
    return json.dumps({**data, "summary": summary, **extra}).encode()


def seed(raw: Raw, layout: Layout) -> None:
    """Each problem doctor finds (but the MCP v2.0 layout, a reference-only shape), in
    both tenants, written as another tool would: raw commands, no index kept."""
    for tenant in TENANTS:
        keys = Keys(tenant, "default", layout)
        p = keys.prefix
        raw.set(f"{p}user:sdk1:profile", '{"name":"Ann"}')  # no acmi:...:user:list entry
        raw.sadd(keys.index("agent"), "cli1")
        raw.zadd(
            keys.timeline(EntityId.parse("agent:cli1")),
            {b'{"ts":1700000000000,"source":"agent:cli1","summary":"legacy"}': TS, b"x": TS + 1},
        )
        raw.set(f"{p}user:John Smith:profile", '{"name":"John"}')  # outside the id grammar
        raw.sadd(keys.index("user"), "arr", "h", "mem")
        raw.set(keys.profile(EntityId.parse("user:arr")), "[1,2]")
        raw.hset(keys.signals(EntityId.parse("user:h")), "a", "1")
        raw.set(keys.signals(EntityId.parse("user:mem")), '{"hot.focus":"x"}')
        raw.zadd(keys.changed(), {b"user:mem": TS})  # a change no tenants_with mark covers


def _found(findings: list[Finding]) -> set[tuple[str, str, str | None, str | None, str]]:
    return {(f.kind.value, f.key, f.entity, f.tenant, f.detail) for f in findings}


EXPECTED_KINDS = {
    (kind, entity, tenant)
    for tenant in TENANTS
    for kind, entity in (
        (Kind.INDEX_MISSING, "user:sdk1"),
        (Kind.TIMELINE_MEMBERS, "agent:cli1"),
        (Kind.BAD_ID, None),
        (Kind.NOT_OBJECT, "user:arr"),
        (Kind.WRONG_TYPE, "user:h"),
        (Kind.MEMORY_OLD_PLACE, "user:mem"),
        (Kind.TENANT_UNINDEXED, None),
    )
}


@pytest.fixture
def on_cluster(redis_cluster3: RedisCluster) -> Iterator[Acmi]:
    redis_cluster3.flush()
    settings = Settings(key_layout="cluster", redis_cluster=True, redis_url=redis_cluster3.url)
    with ClusterClient.from_url(redis_cluster3.url) as raw:
        seed(raw, Layout.CLUSTER)
    acmi = create_acmi(open_store(settings), settings)
    yield acmi
    acmi.close()


def _on_one_node(redis_server: RedisServer, layout: Layout) -> Acmi:
    redis_server.flush(DB)
    url = redis_server.url_for(DB)
    with redis.Redis.from_url(url) as raw:
        seed(raw, layout)
    return create_acmi(RedisStore.from_url(url), Settings(key_layout=layout.value))


def test_doctor_scans_every_primary_and_finds_what_one_node_finds(
    on_cluster: Acmi, redis_cluster3: RedisCluster, redis_server: RedisServer
) -> None:
    with ClusterClient.from_url(redis_cluster3.url) as client:
        holding = [n for n in client.get_primaries() if client.get_redis_connection(n).dbsize()]
    assert len(holding) >= 2  # the two tenants' slots live on different primaries
    doctor = Doctor(on_cluster)
    clustered = list(doctor.findings())
    single = _on_one_node(redis_server, Layout.CLUSTER)
    try:
        one_node = Doctor(single)
        alone = list(one_node.findings())
    finally:
        single.close()
    assert _found(clustered) == _found(alone)
    assert doctor.scanned == one_node.scanned
    assert {(f.kind, f.entity, f.tenant) for f in clustered} == EXPECTED_KINDS


def test_the_reference_layout_of_the_same_problems_gives_the_same_findings(
    on_cluster: Acmi, redis_server: RedisServer
) -> None:
    reference = _on_one_node(redis_server, Layout.REFERENCE)
    try:
        found = {(f.kind, f.entity, f.tenant) for f in Doctor(reference).findings()}
    finally:
        reference.close()
    assert found == EXPECTED_KINDS
    assert {(f.kind, f.entity, f.tenant) for f in Doctor(on_cluster).findings()} == found


def test_acmi_doctor_reports_the_cluster_with_its_exit_code(on_cluster: Acmi) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert doctor_report(on_cluster, out=out, err=err, as_json=True) == 1
    summary = json.loads(out.getvalue().splitlines()[-1])["summary"]
    assert summary["problems"] == len(EXPECTED_KINDS)
    assert "127.0.0.1" not in out.getvalue() + err.getvalue()  # no node named


def test_a_tag_names_its_tenant_and_a_bucket_tag_too() -> None:
    assert tagged_tenant("{beta}:user:a:profile") == ("beta", "user:a:profile")
    assert tagged_tenant("{beta:2}:user:a:profile") == ("beta", "user:a:profile")  # B > 1
    assert tagged_tenant("{_deployment}:_tenants") is None  # the deployment's, no tenant
    assert tagged_tenant("user:a:profile") is None


def test_migrate_repairs_on_the_cluster_what_it_repairs_on_one_node(
    on_cluster: Acmi, redis_server: RedisServer
) -> None:
    """The repairs of many tenants' findings (several on one primary, so one SCAN step
    holds more than one tenant's), each script within its tenant's slot."""
    single = _on_one_node(redis_server, Layout.CLUSTER)
    with (
        ClusterClient.from_url(on_cluster.settings.redis_url or "") as raw_cluster,
        redis.Redis.from_url(redis_server.url_for(DB)) as raw_single,
    ):
        for raw in (raw_cluster, raw_single):
            for n in range(8):
                keys = Keys(f"t{n}", "default", Layout.CLUSTER)
                raw.set(f"{keys.prefix}user:sdk{n}:profile", '{"name":"no index"}')
                raw.zadd(keys.changed(), {f"user:sdk{n}".encode(): TS})
    try:
        steps = {
            acmi: sorted(s.to_dict()["action"] for s in Migrate(acmi).run())
            for acmi in (on_cluster, single)
        }
        left = {acmi: _found(list(Doctor(acmi).findings())) for acmi in (on_cluster, single)}
    finally:
        single.close()
    assert steps[on_cluster] == steps[single] and steps[single]
    assert left[on_cluster] == left[single]
    kinds = {kind for kind, *_ in left[on_cluster]}
    assert "index_missing" not in kinds and "tenant_unindexed" not in kinds


def test_a_buckets_tenant_index_is_checked_as_bucket_zeros_is() -> None:
    """B > 1: a bucket's change index (``acmi:{t:b}:_changed``) is one doctor checks
    against its bucket's mark, as bucket 0's; a bucket past the tenant's B is not its."""
    from acmi_core.ops.backfill import _tenant_target
    from acmi_core.store.memory import MemoryStore

    settings = Settings(ACMI_KEY_LAYOUT="cluster", ACMI_CLUSTER_BUCKETS="1,acme=3")  # type: ignore[call-arg]
    doctor = Doctor(create_acmi(MemoryStore(), settings))
    three = Keys("acme", "default", Layout.CLUSTER, 3)
    for bucket in range(3):
        target = _tenant_target(doctor, three.at(bucket).changed())
        assert target is not None and target[0].bucket == bucket, bucket
    assert _tenant_target(doctor, "acmi:{acme:3}:_changed") is None  # past acme's B
    assert _tenant_target(doctor, "acmi:{beta:1}:_changed") is None  # beta has B = 1
    assert _tenant_target(doctor, "acmi:{acme:x}:_changed") is None

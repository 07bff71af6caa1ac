"""ACMI on a real Redis Cluster (3 masters, and one node with every slot): the cluster key
layout (one hash tag per tenant), the cluster client selected by ACMI_REDIS_CLUSTER, the
tenants' marks of work read by the jobs through the registry, what a cluster cannot do
refused with an error naming the setting, and no node's address in any answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster as ClusterClient
from redis.exceptions import MovedError

from acmi_core import Acmi, create_acmi
from acmi_core.api.status import error_answer
from acmi_core.base.errors import (
    AcmiValidationError,
    StoreBusy,
    StoreCommandError,
    StoreError,
    StoreUnavailable,
)
from acmi_core.base.keys import (
    CHANGED,
    MEMORY_VECTORS,
    MEMORY_VECTORS_PASS,
    ROLLUP_LATEST,
    TENANT_REGISTRY,
    WAKE,
    Keys,
    Layout,
    marked_tenant,
)
from acmi_core.base.model import EntityId
from acmi_core.base.settings import Settings
from acmi_core.jobs import rollup
from acmi_core.jobs.runner import JobRun
from acmi_core.jobs.tenants import indexed, run_tenants
from acmi_core.memory.vectors import MemoryVectors
from acmi_core.store import open_store
from acmi_core.store.cluster import CheckedRespStore, ClusterStore, scrub
from acmi_core.store.cluster import _error as cluster_error
from acmi_core.store.counting import CountingStore
from acmi_core.testing.redis_cluster import RedisCluster
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS, FakeClock

ALICE = EntityId.parse("user:alice")
SHAPES = ("redis_cluster3", "redis_cluster1")


def _keyslot(key: str) -> int:
    from redis.crc import key_slot

    return int(key_slot(key.encode()))


@pytest.fixture(params=SHAPES)
def cluster(request: pytest.FixtureRequest) -> RedisCluster:
    shape: RedisCluster = request.getfixturevalue(request.param)
    return shape


@pytest.fixture
def cluster_acmi(cluster: RedisCluster) -> Iterator[Acmi]:
    cluster.flush()
    settings = Settings(key_layout="cluster", redis_cluster=True, redis_url=cluster.url)
    acmi = create_acmi(open_store(settings), settings)
    yield acmi
    acmi.close()


def _event(text: str) -> dict[str, Any]:
    return {"source": "user:mikey", "kind": "note", "correlationId": text, "summary": text}


# --- the layout ------------------------------------------------------------------------------


def test_the_reference_layout_is_the_reference_keys_byte_for_byte() -> None:
    default, acme = Keys("default", "default"), Keys("acme", "default")
    assert default.layout is Layout.REFERENCE
    assert default.profile(ALICE) == "acmi:user:alice:profile"
    assert acme.timeline(ALICE) == "acmi:tenant:acme:user:alice:timeline"
    assert acme.changed() == "acmi:_changed:acme"
    assert acme.tenants_with(CHANGED) == "acmi:_tenants:changed"
    assert acme.job_tenants("wake") == "acmi:_jobtenants:wake"
    assert marked_tenant(acme.tenants_with(CHANGED)) is None  # no registry step there


def test_the_cluster_layout_puts_every_key_of_a_tenant_in_its_one_slot() -> None:
    for tenant in ("default", "acme"):
        keys = Keys(tenant, "default", Layout.CLUSTER)
        built = [
            *keys.all_slots(ALICE),
            keys.index("user"),
            keys.registry("agent-model-policy"),
            keys.hitl_queue(None, "open"),
            keys.hitl_queue(ALICE, "closed"),
            keys.coordination_timeline(),
            keys.lock("deploy"),
            keys.leases(),
            keys.changed(),
            keys.request("r1"),
            keys.mentions("claude"),
            keys.job_state("wake"),
            keys.job_run("wake", "exec-1"),
            *(keys.tenants_with(kind) for kind in (CHANGED, WAKE)),
        ]
        assert all(key.startswith(f"acmi:{{{tenant}}}:") for key in built), built
        assert len({_keyslot(key) for key in built}) == 1
        assert keys.profile(ALICE) == f"acmi:{{{tenant}}}:user:alice:profile"
        assert keys.changed() == f"acmi:{{{tenant}}}:_changed"
        assert marked_tenant(keys.tenants_with(WAKE)) == tenant
        assert marked_tenant(keys.changed()) is None
    acme, beta = Keys("acme", "default", "cluster"), Keys("beta", "default", "cluster")
    assert _keyslot(acme.profile(ALICE)) != _keyslot(beta.profile(ALICE))
    # the deployment's own keys: one slot apart from every tenant's
    assert acme.tenant_registry() == TENANT_REGISTRY == "acmi:{_deployment}:_tenants"
    assert acme.job_tenants("wake") == "acmi:{_deployment}:_jobtenants:wake"


# --- the settings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"ACMI_KEY_LAYOUT": "sharded"}, "ACMI_KEY_LAYOUT"),
        ({"ACMI_REDIS_CLUSTER": "maybe"}, "ACMI_REDIS_CLUSTER"),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(AcmiValidationError) as caught:
        Settings.from_env(env)
    assert caught.value.field == variable


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"ACMI_REDIS_CLUSTER": "1", "ACMI_KEY_LAYOUT": "cluster"}, "ACMI_REDIS_CLUSTER"),
        (
            {"ACMI_REDIS_CLUSTER": "1", "ACMI_REDIS_URL": "redis://127.0.0.1:1"},
            "ACMI_KEY_LAYOUT",
        ),
        (
            {
                "ACMI_REDIS_CLUSTER": "1",
                "ACMI_KEY_LAYOUT": "cluster",
                "ACMI_REDIS_URL": "unix:///tmp/redis.sock",
            },
            "ACMI_REDIS_CLUSTER",
        ),
    ],
)
def test_the_cluster_client_refuses_what_cannot_be_a_cluster(
    env: dict[str, str], variable: str
) -> None:
    with pytest.raises(AcmiValidationError) as caught:
        open_store(Settings.from_env(env))
    assert caught.value.field == variable


def test_the_settings_select_the_store() -> None:
    cluster = Settings.from_env(
        {
            "ACMI_REDIS_CLUSTER": "1",
            "ACMI_KEY_LAYOUT": "cluster",
            "ACMI_REDIS_URL": "redis://127.0.0.1:1",
        }
    )
    assert isinstance(open_store(cluster), ClusterStore)  # connects on its first call
    one_node = Settings.from_env({"ACMI_REDIS_URL": "redis://127.0.0.1:1"})
    assert isinstance(open_store(one_node), CheckedRespStore)


# --- refused at start-up: the reference layout on a cluster-enabled server --------------------


def test_the_reference_layout_stops_at_its_first_command_on_a_cluster(
    cluster: RedisCluster,
) -> None:
    acmi = create_acmi(settings=Settings.from_env({"ACMI_REDIS_URL": cluster.url}))
    try:
        with pytest.raises(StoreError) as caught:
            acmi.profile.set("user:alice", {"name": "Alice"})
        assert caught.value.field == "ACMI_KEY_LAYOUT"
        assert "ACMI_KEY_LAYOUT=cluster" in caught.value.message
        with pytest.raises(StoreError):  # every later call too, never a partial answer
            acmi.get("user:alice")
    finally:
        acmi.close()
    with ClusterClient.from_url(cluster.url) as client:  # nothing was written
        # (the entity's keys and its category index: other tests share this cluster)
        assert not list(client.scan_iter(match="acmi:user:*"))


def test_the_reference_layout_on_one_node_checks_once(redis_server: RedisServer) -> None:
    settings = Settings.from_env({"ACMI_REDIS_URL": redis_server.url_for(TEST_DBS["cluster"])})
    store = open_store(settings)
    try:
        counted = CountingStore(store)
        acmi = Acmi(counted, settings)
        acmi.profile.set("user:alice", {"name": "Alice"})
        assert acmi.profile.get("user:alice")["name"] == "Alice"
        assert counted.requests == 2  # the INFO is the store's own, once, and no request
        acmi.delete("user:alice")
    finally:
        store.close()


# --- the cluster client --------------------------------------------------------------------


def test_entities_and_indexes_work_for_two_tenants(cluster_acmi: Acmi) -> None:
    beta = Acmi(cluster_acmi.store, cluster_acmi.settings, tenant="beta")
    for acmi, name in ((cluster_acmi, "Alice"), (beta, "Beta Alice")):
        acmi.profile.set("user:alice", {"name": name})
        acmi.signals.set("user:alice", "task", {"n": 1})
        acmi.timeline.append("user:alice", _event(name))
    assert cluster_acmi.get("user:alice").to_dict()["profile"]["name"] == "Alice"
    got = beta.get("user:alice").to_dict()
    assert got["profile"]["name"] == "Beta Alice"
    assert not got.get("problems"), got
    assert [e.summary for e in beta.timeline.read("user:alice")] == ["Beta Alice"]
    assert beta.list("user") == ["user:alice"]
    # the two tenants' keys live in their own slots, each mark in its tenant's
    assert _keyslot(beta.keys.profile(ALICE)) != _keyslot(cluster_acmi.keys.profile(ALICE))
    raw = cluster_acmi.store.execute(("SMEMBERS", TENANT_REGISTRY))
    assert isinstance(raw, list) and sorted(raw) == [b"beta", b"default"]


def test_the_registry_is_one_extra_round_trip_per_tenant_and_process(
    cluster_acmi: Acmi,
) -> None:
    counted = CountingStore(cluster_acmi.store)
    beta = Acmi(counted, cluster_acmi.settings, tenant="beta")
    beta.timeline.append("user:alice", _event("one"))
    first = counted.requests
    counted.reset()
    beta.timeline.append("user:alice", _event("two"))
    assert counted.requests == first - 1  # the SADD happened once, with the first write


def test_the_jobs_serve_every_registered_tenant_with_work(cluster_acmi: Acmi) -> None:
    clock = FakeClock()
    store, settings = cluster_acmi.store, cluster_acmi.settings
    default = Acmi(store, settings, clock=clock)
    beta = Acmi(store, settings, tenant="beta", clock=clock)
    gamma = Acmi(store, settings, tenant="gamma", clock=clock)
    beta.timeline.append("deal:a", _event("beta's"))
    gamma.profile.set("user:g", {"name": "no timeline change"})  # marks no work
    assert indexed(default, "rollup-cron") == ["beta"]
    clock.now += 10 * 60_000  # past the job's settle time
    run = JobRun("rollup-cron", f"exec-{time.monotonic_ns()}", clock(), {})
    result = run_tenants(default, run, rollup.run, clock=time.perf_counter)
    assert set(result.get("tenants", {})) == {"beta"}, result
    rolled = store.execute(("EXISTS", beta.keys.slot(EntityId.parse("deal:a"), ROLLUP_LATEST)))
    assert rolled == 1
    # the job's state in the deployment's slot, beta's mark re-read from beta's slot
    assert store.execute(("EXISTS", default.keys.job_tenants("rollup-cron"))) == 1


def test_a_hitl_create_alone_registers_its_tenant(cluster_acmi: Acmi) -> None:
    """A tenant whose only work is an open HITL item is registered by its create (the
    mark in hitl.lua's run, the registry as its second step), so standup-brief finds it;
    an item for another addressee marks nothing and registers nothing."""
    store, settings = cluster_acmi.store, cluster_acmi.settings
    Acmi(store, settings, tenant="delta").hitl.create(
        "q", "ask", asked_by="agent:a", addressee="agent:other"
    )
    gamma = Acmi(store, settings, tenant="gamma")
    counted = CountingStore(store)
    Acmi(counted, settings, tenant="gamma").hitl.create("key", "paste it", asked_by="agent:a")
    assert store.execute(("SMEMBERS", TENANT_REGISTRY)) == [b"gamma"]
    assert indexed(cluster_acmi, "standup-brief") == ["gamma"]
    assert counted.requests == 2  # the create's run, then the one SADD
    counted.reset()
    Acmi(counted, settings, tenant="gamma").hitl.create("k2", "again", asked_by="agent:a")
    assert counted.requests == 1  # registered once per process and tenant
    assert [i["payload"]["topic"] for i in gamma.hitl.list().items] == ["key", "k2"]


def test_a_keyspace_scan_is_refused(cluster_acmi: Acmi) -> None:
    with pytest.raises(StoreCommandError, match="SCAN reads the whole keyspace"):
        cluster_acmi.store.execute(("SCAN", 0))
    with pytest.raises(StoreCommandError, match="DBSIZE"):
        cluster_acmi.store.pipeline([("GET", "acmi:{default}:x"), ("DBSIZE",)])


def test_a_cross_slot_script_is_refused_naming_no_node(
    cluster_acmi: Acmi, cluster: RedisCluster
) -> None:
    acme, beta = (Keys(t, "default", "cluster") for t in ("acme", "beta"))
    keys = [acme.profile(ALICE), beta.profile(ALICE)]
    with pytest.raises(StoreCommandError) as caught:
        cluster_acmi.store.execute(("EVAL", "return 1", 2, *keys))
    assert "CROSSSLOT" in str(caught.value)
    status, body, _ = error_answer(caught.value)
    assert status == 500
    assert "127.0.0.1" not in str(body) and str(cluster.ports[0]) not in str(body)


def test_a_moved_reply_is_a_503_naming_no_node(redis_cluster3: RedisCluster) -> None:
    """A real MOVED from a node that does not own the key's slot (what redis-py retries
    and, when the slot map keeps changing, gives up with): a 503 to retry, no address."""
    with ClusterClient.from_url(redis_cluster3.url) as cluster:
        owner = cluster.get_node_from_key("acmi:{acme}:x").port
    other = next(port for port in redis_cluster3.ports if port != owner)
    with redis.Redis(port=other) as node, pytest.raises(MovedError) as moved:
        node.get("acmi:{acme}:x")
    ours = cluster_error(moved.value)
    assert isinstance(ours, StoreBusy)
    status, body, headers = error_answer(ours)
    assert status == 503 and "Retry-After" in headers
    assert "127.0.0.1" not in str(body) and str(owner) not in str(body)


def test_a_seed_node_unreachable_at_start_is_a_503_naming_no_node() -> None:
    """No node answers the first call (the slot map cannot be read): a 503 to retry,
    through HTTP too, with no address or port in the answer."""
    from fastapi.testclient import TestClient

    from acmi_core.api.app import create_app
    from acmi_core.api.context import ApiContext
    from acmi_core.testing.redis_server import free_port

    port = free_port()  # nothing listens there
    settings = Settings(
        key_layout="cluster",
        redis_cluster=True,
        redis_url=f"redis://127.0.0.1:{port}",
        store_timeout_s=1.0,
        api_key="acmi_drill_key_of_the_default_tenant_01",
    )
    store = open_store(settings)
    with pytest.raises(StoreUnavailable) as caught:
        store.execute(("GET", "acmi:{default}:x"))
    status, body, headers = error_answer(caught.value)
    assert status == 503 and "Retry-After" in headers
    assert "127.0.0.1" not in str(body) and str(port) not in str(body)
    client = TestClient(create_app(ApiContext(Acmi(store, settings))))
    answer = client.get(
        "/v1/entities/user:alice", headers={"authorization": f"Bearer {settings.api_key}"}
    )
    assert answer.status_code == 503, answer.text
    assert "127.0.0.1" not in answer.text and str(port) not in answer.text


def test_a_write_that_no_replica_acknowledges_is_a_503(redis_cluster3: RedisCluster) -> None:
    """ACMI_REDIS_WAIT_REPLICAS=1 on masters without replicas: each write (a script, a
    one-key write) runs, then WAIT finds no replica within WAIT_TIMEOUT_MS: a 503 to
    retry, naming the setting and no node; reads are not waited for."""
    redis_cluster3.flush()
    settings = Settings(
        key_layout="cluster",
        redis_cluster=True,
        redis_url=redis_cluster3.url,
        redis_wait_replicas=1,
    )
    acmi = create_acmi(open_store(settings), settings)
    try:
        with pytest.raises(StoreUnavailable, match="ACMI_REDIS_WAIT_REPLICAS") as caught:
            acmi.profile.set("user:alice", {"name": "Alice"})
        status, body, _ = error_answer(caught.value)
        assert status == 503 and "127.0.0.1" not in str(body)
        assert acmi.profile.get("user:alice")["name"] == "Alice"  # made, not acknowledged
        with pytest.raises(StoreUnavailable, match="0 of the 1 replica"):
            acmi.store.execute(("SADD", TENANT_REGISTRY, "beta"))
    finally:
        acmi.close()


def test_scrub_removes_node_addresses() -> None:
    assert scrub("MOVED 12447 127.0.0.1:7001") == "MOVED 12447 <node>"
    assert scrub("ASK 1 [::1]:7002 and node-3.cache.amazonaws.com:6379") == (
        "ASK 1 <node> and <node>"
    )


def test_a_vector_prune_pass_runs_on_the_cluster_for_two_tenants(cluster_acmi: Acmi) -> None:
    """vectors.lua's two keys (the index and the pass) in the entity's slot: a pass over
    several runs deletes one tenant's stale vectors, the other's stay."""
    beta = Acmi(cluster_acmi.store, cluster_acmi.settings, tenant="beta")
    eid = EntityId.parse("agent:atlas")
    for acmi in (cluster_acmi, beta):
        acmi.timeline.extend(eid, [_event(f"line {i} of the ledger") for i in range(250)])
        key = acmi.keys.slot(eid, MEMORY_VECTORS)
        stale = [x for i in range(300) for x in (f"{i:016x}", "0" * 32)]
        acmi.store.execute(("HSET", key, *stale))
    assert _keyslot(cluster_acmi.keys.slot(eid, MEMORY_VECTORS)) == _keyslot(
        cluster_acmi.keys.slot(eid, MEMORY_VECTORS_PASS)
    )
    runner, runs = MemoryVectors(cluster_acmi.context), []
    while not runs or runs[-1]["more"]:
        runs.append(runner.prune_vectors(eid, page=100, max_pages=1, chunk=100, max_chunks=2))
        assert len(runs) < 20
    assert sum(r["dropped"] for r in runs) == 300 and len(runs) >= 3
    left = beta.store.execute(("HLEN", beta.keys.slot(eid, MEMORY_VECTORS)))
    assert left == 300

"""One tenant over B > 1 buckets on a real 3-master Redis Cluster (ACMI_CLUSTER_BUCKETS):
entity keys under their bucket's tag and spread over the masters, two tenants with
different B side by side, a list of 2,000 entities walking every bucket, the cross-bucket
refusal on the HTTP API, a webhook delivery's retry, and the jobs reading every bucket
(rollup per bucket at a cost independent of idle entities; drift over every bucket)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from redis.cluster import RedisCluster as ClusterClient

from acmi_core import Acmi
from acmi_core.api.status import error_answer
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import CHANGED, ROLLUP_LATEST, key_tag
from acmi_core.base.model import EntityId
from acmi_core.base.settings import Settings
from acmi_core.jobs import drift, rollup
from acmi_core.jobs.runner import JobRun
from acmi_core.jobs.tenants import run_tenants
from acmi_core.store import open_store
from acmi_core.store.counting import CountingStore
from acmi_core.testing.redis_cluster import RedisCluster
from tests.kit import FakeClock


def _event(text: str, ts: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "source": "user:mikey",
        "kind": "note",
        "correlationId": text,
        "summary": text,
    }
    if ts is not None:
        event["ts"] = ts
    return event


@pytest.fixture
def tenants() -> tuple[str, str]:
    """Two tenants of this test only (the cluster is shared): B = 3 and B = 5."""
    token = uuid.uuid4().hex[:8]
    return f"bk3-{token}", f"bk5-{token}"


@pytest.fixture
def settings(redis_cluster3: RedisCluster, tenants: tuple[str, str]) -> Settings:
    return Settings(
        key_layout="cluster",
        redis_cluster=True,
        redis_url=redis_cluster3.url,
        cluster_buckets=f"3,{tenants[1]}=5",
    )


@pytest.fixture
def store(settings: Settings) -> Iterator[Any]:
    opened = open_store(settings)
    yield opened
    opened.close()


def _node_of(cluster: RedisCluster, key: str) -> int:
    with ClusterClient.from_url(cluster.url) as client:
        return int(client.get_node_from_key(key).port)


def test_two_tenants_with_different_b(
    store: Any, settings: Settings, tenants: tuple[str, str], redis_cluster3: RedisCluster
) -> None:
    three, five = (Acmi(store, settings, tenant=t) for t in tenants)
    assert (three.keys.buckets, five.keys.buckets) == (3, 5)
    users = [f"user:u{n}" for n in range(40)]
    for acmi in (three, five):
        for user in users:
            acmi.profile.set(user, {"name": f"{acmi.tenant} {user}"})
            acmi.timeline.append(user, _event(user))
    for acmi in (three, five):
        seen = set()
        for user in users:
            key = acmi.keys.profile(EntityId.parse(user))
            bucket = acmi.keys.bucket_of(user)
            seen.add(bucket)
            assert key_tag(key) == (
                f"{{{acmi.tenant}}}" if bucket == 0 else f"{{{acmi.tenant}:{bucket}}}"
            )
            got = acmi.get(user).to_dict()
            assert got["profile"]["name"] == f"{acmi.tenant} {user}", got
            assert not got.get("problems"), got
        assert seen == set(range(acmi.keys.buckets))
        assert acmi.list("user") == sorted(users)  # each tenant's own, every bucket
    # one tenant's entities on every master, not one
    nodes = {_node_of(redis_cluster3, five.keys.profile(EntityId.parse(u))) for u in users}
    assert len(nodes) == 3
    # coordination stays in bucket 0: a lock and an agent's heartbeat, one slot each
    lease = three.locks.claim("db-migration", "agent:bot", ttl_ms=60_000)
    assert lease.owner == "agent:bot"
    three.agents.heartbeat("agent:bot")
    assert key_tag(three.keys.lock("db-migration")) == f"{{{three.tenant}}}"


def test_a_list_of_2000_entities_walks_every_bucket(
    store: Any, settings: Settings, tenants: tuple[str, str]
) -> None:
    acmi = Acmi(store, settings, tenant=tenants[0])
    ids = [f"contact:c{n:04d}" for n in range(2000)]
    by_bucket: dict[int, list[str]] = {}
    for entity in ids:
        by_bucket.setdefault(acmi.keys.bucket_of(entity), []).append(entity)
    for members in by_bucket.values():  # a batch per bucket of 200: one slot each
        for start in range(0, len(members), 200):
            with acmi.batch() as batch:
                for entity in members[start : start + 200]:
                    batch.signals.set(entity, "seen", 1)
    counted = CountingStore(store)
    listed = Acmi(counted, settings, tenant=tenants[0]).list("contact")
    assert listed == sorted(ids)
    print(f"\nlist of 2,000 at B=3: {counted.requests} round trips")
    assert 3 <= counted.requests <= 6  # one SSCAN step a bucket, about
    pages, cursor = [], None
    while True:  # the paged read: every id once, each cursor naming its bucket
        page = acmi.entities.list_page("contact", cursor=cursor, limit=500)
        pages += page.entities
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(pages) == sorted(ids) and len(pages) == len(set(pages))


def test_a_batch_or_cat_over_buckets_is_refused_with_400(
    store: Any, settings: Settings, tenants: tuple[str, str]
) -> None:
    acmi = Acmi(store, settings, tenant=tenants[0])
    first = next(f"user:u{n}" for n in range(50) if acmi.keys.bucket_of(f"user:u{n}") == 1)
    other = next(f"user:u{n}" for n in range(50) if acmi.keys.bucket_of(f"user:u{n}") == 2)
    batch = acmi.batch()
    batch.profile.set(first, {"name": "one"})
    with pytest.raises(AcmiValidationError) as caught:
        batch.profile.set(other, {"name": "two"})
    assert (caught.value.field, caught.value.rule) == ("entity", "one_bucket")
    assert first in caught.value.message and other in caught.value.message
    status, body, _ = error_answer(caught.value)
    assert status == 400 and "one_bucket" in str(body), body
    with pytest.raises(AcmiValidationError) as merged:
        acmi.timeline.cat([first, other])
    assert (merged.value.field, merged.value.rule) == ("entities[1]", "one_bucket")
    assert acmi.profile.get(other) is None  # nothing stored
    # entities of one bucket: one script, as at B = 1
    same = next(f"user:u{n}" for n in range(50, 99) if acmi.keys.bucket_of(f"user:u{n}") == 1)
    acmi.timeline.append(first, _event("a"))
    acmi.timeline.append(same, _event("b"))
    assert len(acmi.timeline.cat([first, same])) == 2


def test_a_webhook_retry_answers_the_first_run_in_the_entitys_bucket(
    store: Any, settings: Settings, tenants: tuple[str, str]
) -> None:
    from acmi_core.ingest.service import idempotency_from_header, store_deliveries
    from acmi_core.ingest.webhook import Delivery

    acmi = Acmi(store, settings, tenant=tenants[0])
    entity = next(f"user:w{n}" for n in range(50) if acmi.keys.bucket_of(f"user:w{n}") == 2)
    deliveries = [Delivery(entity, _event("hook")), Delivery(entity, _event("hook-2"))]
    idem = idempotency_from_header(acmi, "key-1", "request-digest")
    first = store_deliveries(acmi, deliveries, idem)
    again = store_deliveries(acmi, deliveries, idem)
    assert not first.replayed and again.replayed
    assert again.body["stored"] == first.body["stored"] == 2
    assert len(acmi.timeline.read(entity)) == 2  # stored once
    elsewhere = next(f"user:w{n}" for n in range(50) if acmi.keys.bucket_of(f"user:w{n}") != 2)
    with pytest.raises(AcmiValidationError) as caught:
        store_deliveries(
            acmi, [Delivery(entity, _event("a")), Delivery(elsewhere, _event("b"))], None
        )
    assert (caught.value.field, caught.value.rule) == ("events[1].entity", "one_bucket")
    assert acmi.timeline.read(elsewhere) == []  # nothing stored


def _rollup_commands(
    store: Any, settings: Settings, tenant: str, idle: int, clock: FakeClock
) -> int:
    """A rollup-cron run's commands for ``tenant`` after 30 changes, with ``idle``
    entities changed before the previous run (below every bucket's watermark)."""
    acmi = Acmi(store, settings, tenant=tenant, clock=clock)
    by_bucket: dict[int, list[str]] = {}
    for n in range(idle):
        by_bucket.setdefault(acmi.keys.bucket_of(f"deal:i{n}"), []).append(f"deal:i{n}")
    for members in by_bucket.values():
        for start in range(0, len(members), 100):
            with acmi.batch() as batch:
                for entity in members[start : start + 100]:
                    batch.timeline.append(entity, _event("idle", clock()))
    default = Acmi(store, settings, clock=clock)

    def run_once(name: str) -> dict[str, Any]:
        clock.now += 10 * 60_000  # past the settle time
        run = JobRun("rollup-cron", f"{name}-{uuid.uuid4().hex}", clock(), {"max": 5_000})
        result = run_tenants(default, run, rollup.run, clock=time.perf_counter)
        return dict(result.get("tenants", {}).get(tenant, {}))

    run_once("first")  # takes the idle ones: the watermarks pass them
    for n in range(30):  # 30 changes: 10 in each bucket
        entity = next(
            f"deal:a{n}-{m}" for m in range(100) if acmi.keys.bucket_of(f"deal:a{n}-{m}") == n % 3
        )
        acmi.timeline.append(entity, _event("active", clock()))
    second = run_once("second")
    assert second["visited"] == 30, second
    assert {b: r["visited"] for b, r in second["buckets"].items()} == {"0": 10, "1": 10, "2": 10}
    assert second["commands"] == sum(int(r["commands"]) for r in second["buckets"].values())
    return int(second["commands"])


def test_a_rollup_costs_the_same_over_10000_or_100_idle_entities(
    store: Any, settings: Settings
) -> None:
    clock = FakeClock()  # one clock: the deployment's job state carries over
    few = _rollup_commands(store, settings, f"few-{uuid.uuid4().hex[:8]}", 100, clock)
    many = _rollup_commands(store, settings, f"many-{uuid.uuid4().hex[:8]}", 10_000, clock)
    print(f"\nrollup at B=3 after 30 changes: {few} commands (100 idle), {many} (10,000 idle)")
    assert few == many


def test_drift_reads_every_bucket(store: Any, settings: Settings, tenants: tuple[str, str]) -> None:
    clock = FakeClock()
    acmi = Acmi(store, settings, tenant=tenants[0], clock=clock)
    entities = [
        next(f"user:d{b}-{m}" for m in range(100) if acmi.keys.bucket_of(f"user:d{b}-{m}") == b)
        for b in range(3)
    ]
    for entity in entities:
        acmi.timeline.append(entity, _event("drift", clock()))
    clock.now += 60_000
    default = Acmi(store, settings, clock=clock)
    run = JobRun("drift-diff", f"drift-{uuid.uuid4().hex}", clock(), {})
    result = run_tenants(default, run, drift.run, clock=time.perf_counter)
    mine = result["tenants"][tenants[0]]
    assert mine["entities"] == 3, mine  # one in each bucket, none left out
    assert acmi.keys.at(1).tenants_with(CHANGED) != acmi.keys.tenants_with(CHANGED)
    assert (
        store.execute(("EXISTS", acmi.keys.slot(EntityId.parse(entities[0]), ROLLUP_LATEST))) == 0
    )


def test_hygiene_serves_the_memory_of_every_bucket(
    store: Any, settings: Settings, tenants: tuple[str, str]
) -> None:
    from acmi_core.jobs import hygiene
    from acmi_core.jobs.runner import pending
    from acmi_core.memory.service import MemoryAPI

    clock = FakeClock()
    acmi = Acmi(store, settings, tenant=tenants[0], clock=clock)
    users = [
        next(f"user:m{b}-{m}" for m in range(100) if acmi.keys.bucket_of(f"user:m{b}-{m}") == b)
        for b in range(3)
    ]
    for user in users:  # each memory write keeps its own bucket's memory index
        MemoryAPI(acmi.context).remember(user, f"remember {user}", layer="hot")
        assert acmi.store.execute(("ZSCORE", acmi.keys.of(user).memory_index(), user))
        acmi.timeline.append(user, _event("note", clock()))  # marks the tenant changed
    clock.now += 60_000
    default = Acmi(store, settings, clock=clock)
    run = JobRun("hygiene", f"hy-{uuid.uuid4().hex}", clock(), {"archive": None})
    result = run_tenants(default, run, hygiene.run, clock=time.perf_counter)
    mine = result["tenants"][tenants[0]]
    assert mine["visited"] == 3, mine  # one entity a bucket, each in its bucket's run
    assert {b: r["visited"] for b, r in mine["buckets"].items()} == {"0": 1, "1": 1, "2": 1}
    assert mine["problems"] == [], mine
    # what waits for rollup-cron: every bucket's changes, each from its own watermark
    for user in users:
        acmi.timeline.append(user, _event("later", clock()))
    assert pending(acmi, "rollup-cron", {})["changed_since_watermark"] == 3

"""Retention (acmi_core/jobs/retention.py) through the hygiene job on a real redis-server,
two tenants served by run_tenants: 6,000 coordination events trimmed to the policy (by age
in one tenant, by count in the other), archived first to the sink, closed HITL records
past their days deleted while open ones stay, a second run writes nothing, a write landing
during the archive is kept, and without a sink the policy trims (or keeps, when it says)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from acmi_core import Acmi
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.model import EntityId
from acmi_core.base.settings import Settings
from acmi_core.jobs import hygiene as hy
from acmi_core.jobs import sink as archive_sink
from acmi_core.jobs.runner import JobRun
from acmi_core.jobs.tenants import run_tenants
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, START, FakeClock, MemorySink

pytestmark = pytest.mark.slow  # 6,000 events a tenant, archived and trimmed: seconds each

DAY = 24 * 3600 * 1000
KEEP = 2_000  # the policy's newest events, set low so one tenant is trimmed by count


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisStore]:
    url = redis_server.url_for(DB["retention"])
    with redis.Redis.from_url(url) as client:
        client.flushdb()  # the job serves every tenant with work in the database
    store = RedisStore.from_url(url)
    yield store
    store.close()


@pytest.fixture
def sink() -> Iterator[MemorySink]:
    sink = MemorySink()
    archive_sink.register_sink("mem", lambda location: sink)
    yield sink
    archive_sink.SINKS.pop("mem", None)


def client(store: RedisStore, clock: FakeClock, tenant: str | None, **policy: Any) -> Acmi:
    settings = Settings(retention_coordination_events=KEEP, **policy)
    if tenant is None:
        return Acmi(store, settings, clock=clock)
    return Acmi(store, settings, tenant=tenant, clock=clock)


def events(first_ts: int, n: int, kind: str) -> list[dict[str, Any]]:
    return [
        {
            "ts": first_ts + i,
            "source": "agent:claude",
            "kind": kind,
            "correlationId": f"{kind}-{first_ts + i}",
            "summary": f"{kind} {i}",
        }
        for i in range(n)
    ]


def thread(acmi: Acmi) -> list[bytes]:
    reply = acmi.store.execute(("ZRANGE", acmi.keys.coordination_timeline(), 0, -1))
    assert isinstance(reply, list)
    return [m for m in reply if isinstance(m, bytes)]


def archived(sink: MemorySink, tenant: str) -> set[bytes]:
    return {
        line
        for key, body in sink.objects.items()
        if f"/{tenant}/" in key
        for line in archive_sink.split_jsonl(body)
    }


def hitl(acmi: Acmi, clock: FakeClock) -> None:
    """An item resolved 40 days ago, one still open since then, one resolved yesterday."""
    clock.now = START - 40 * DAY
    for cid in ("old-closed", "old-open"):
        acmi.hitl.create("t", "r", asked_by="agent:claude", addressee="user:op", correlation_id=cid)
    acmi.hitl.resolve("old-closed", "done", by="user:op")
    clock.now = START - DAY
    acmi.hitl.create("t", "r", asked_by="agent:claude", addressee="user:op", correlation_id="new")
    acmi.hitl.resolve("new", "done", by="user:op")
    clock.now = START


def hygiene(acmi: Acmi, execution_id: str, **params: Any) -> dict[str, Any]:
    acmi.clock.now += 10_000  # type: ignore[attr-defined]  # past the settle margin
    run = JobRun("hygiene", execution_id, START, params)
    return run_tenants(acmi, run, hy.run, clock=time.perf_counter)


def record(acmi: Acmi, cid: str) -> bytes | None:
    reply = acmi.store.execute(("HGET", acmi.keys.hitl_items(), cid))
    assert reply is None or isinstance(reply, bytes)
    return reply


def queue(acmi: Acmi, state: str) -> int:
    reply = acmi.store.execute(("ZCARD", acmi.keys.hitl_queue(EntityId.parse("user:op"), state)))
    assert isinstance(reply, int)
    return reply


def test_two_tenants_trimmed_to_the_policy_archived_first(
    store: RedisStore, sink: MemorySink
) -> None:
    clock = FakeClock()
    base = client(store, clock, None)
    by_age, by_count = client(store, clock, "ta"), client(store, clock, "tb")
    # by_age: 5,500 events from 60 days ago, 500 from yesterday; by_count: 6,000 of yesterday
    by_age.timeline.extend(COORDINATION_THREAD, events(START - 60 * DAY, 5_500, "lock-claimed"))
    by_age.timeline.extend(COORDINATION_THREAD, events(START - DAY, 500, "lock-released"))
    by_count.timeline.extend(COORDINATION_THREAD, events(START - DAY, 6_000, "lock-claimed"))
    for acmi in (by_age, by_count):
        hitl(acmi, clock)
    before = {acmi.tenant: thread(acmi) for acmi in (by_age, by_count)}
    assert [len(b) for b in before.values()] == [6_002, 6_002]  # and the two hitl-resolved

    hygiene(base, "retention-1", archive="mem://bucket/archive")

    kept_by_age, kept_by_count = thread(by_age), thread(by_count)
    # older than 30 days goes: the 500 of yesterday and yesterday's hitl-resolved stay
    assert len(kept_by_age) == 501
    assert kept_by_count == before["tb"][-KEEP:]  # the newest KEEP, by count
    for acmi, kept in ((by_age, kept_by_age), (by_count, kept_by_count)):
        gone = set(before[acmi.tenant]) - set(kept)
        assert gone and gone <= archived(sink, acmi.tenant)  # archived before trimmed
        assert record(acmi, "old-closed") is None  # resolved 40 days ago: gone
        assert record(acmi, "old-open") is not None and queue(acmi, "open") == 1
        assert record(acmi, "new") is not None and queue(acmi, "closed") == 1

    objects = dict(sink.objects)
    hygiene(base, "retention-2", archive="mem://bucket/archive")
    assert thread(by_age) == kept_by_age and thread(by_count) == kept_by_count
    assert sink.objects == objects  # nothing archived again
    for acmi in (by_age, by_count):
        assert record(acmi, "new") is not None and record(acmi, "old-open") is not None


def test_a_write_during_the_archive_is_kept(store: RedisStore, sink: MemorySink) -> None:
    clock = FakeClock()
    base = client(store, clock, None)
    acmi = client(store, clock, "tc")
    acmi.timeline.extend(COORDINATION_THREAD, events(START - 60 * DAY, 3_000, "lock-claimed"))
    landed: list[str] = []
    real_put = sink.put

    def put_then_write(key: str, body: bytes, *, sha256: str, count: int) -> None:
        real_put(key, body, sha256=sha256, count=count)
        if not landed:  # another agent posts while the archive runs: one new, one backdated
            for event in events(START - 45 * DAY, 1, "late") + events(START, 1, "now"):
                landed.append(acmi.timeline.append(COORDINATION_THREAD, event).to_json())

    sink.put = put_then_write  # type: ignore[method-assign]
    hygiene(base, "retention-race", archive="mem://bucket/archive")
    members = {m.decode() for m in thread(acmi)}
    stored = {m.decode() for m in archived(sink, "tc")}
    assert landed[1] in members  # the new one stays
    assert landed[0] in members | stored  # the backdated one: live, or archived before its trim


def test_without_a_sink_the_policy_trims_or_keeps(store: RedisStore) -> None:
    clock = FakeClock()
    trims = client(store, clock, None)
    trims.timeline.extend(COORDINATION_THREAD, events(START - DAY, 3_000, "lock-claimed"))
    hygiene(trims, "no-sink-1", archive=None)
    assert len(thread(trims)) == KEEP

    keeps = client(store, clock, "td", retention_without_sink="keep")
    keeps.timeline.extend(COORDINATION_THREAD, events(START - DAY, 3_000, "lock-claimed"))
    hygiene(keeps, "no-sink-2", archive=None)
    assert len(thread(keeps)) == 3_000

"""The scheduled jobs read a timeline's newest events up to ``JOB_READ_BYTES`` inside
Redis (page.lua), not by count alone: a tenant's 256 KB events cannot make a run read (and
hold) hundreds of MB, which would take the job's memory and every tenant after it.
Measured as the bytes Redis sent (INFO stats), two tenants on one real redis-server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.entities.api import PAGE
from acmi_core.jobs import drift, rollup, standup
from acmi_core.jobs.foreign import JOB_READ_BYTES
from acmi_core.jobs.runner import JobRun, run_job
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, FakeClock, fresh_tenant

EVENTS, SIZE = 40, 200_000  # 8 MB of events in each of two entities
JOBS: dict[str, Callable[[Acmi, JobRun], dict[str, Any]]] = {
    "rollup-cron": rollup.run,
    "drift-diff": drift.run,
    "standup-brief": standup.run,
}


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[tuple[RedisStore, redis.Redis]]:
    url = redis_server.url_for(DB["backends"])
    store = RedisStore.from_url(url)
    raw = redis.Redis.from_url(url)
    yield store, raw
    raw.close()
    store.close()


def _sent(raw: redis.Redis) -> int:
    return int(raw.info("stats")["total_net_output_bytes"])


@pytest.mark.parametrize("job", sorted(JOBS))
def test_a_run_over_the_largest_events_reads_to_the_cap(
    store: tuple[RedisStore, redis.Redis], job: str
) -> None:
    redis_store, raw = store
    clock = FakeClock()
    base = create_acmi(redis_store, Settings())
    tenants = [fresh_tenant(base, clock) for _ in range(2)]
    pad = "x" * SIZE
    for acmi in tenants:
        for entity in ("thread:agent-coordination", "thread:ops"):
            for n in range(EVENTS):
                clock.now += 1
                event = {"source": "agent:a", "kind": "note", "correlationId": f"{n}"}
                acmi.timeline.append(entity, {**event, "summary": "big", "payload": pad})
    clock.now += 60_000
    redis_store.execute(("SCRIPT", "LOAD", PAGE.source))  # cached, as after any first read
    for acmi in tenants:
        before = _sent(raw)
        run = JobRun(job, f"exec-{clock.now}", clock.now, {})
        result = run_job(acmi, run, JOBS[job], clock=time.perf_counter)
        sent = _sent(raw) - before
        # two entities, each read at most to the cap plus the one event past it (8 MB each
        # before: every event of the window)
        assert sent < 2 * (JOB_READ_BYTES + 2 * SIZE) + 100_000, (job, sent, result)

"""Every scheduled job serves every tenant that has work, through its real handler fed
its events/ sample: two tenants, ``default`` and ``acme``, each with work for the job;
acme's must be done too (issue 21 item 2: the handlers built a default-tenant client
only, so acme's changes stayed in its indexes for ever)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
import redis

from acmi_core import Acmi
from acmi_core.base.keys import LAST_BRIEF, ROLLUP_LATEST
from acmi_core.base.model import EntityId
from acmi_core.cli import main
from acmi_core.jobs.runner import job_state
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from functions.drift_diff import handler as drift_handler
from functions.hygiene import handler as hygiene_handler
from functions.rollup_cron import handler as rollup_handler
from functions.runtime import LambdaFunction
from functions.standup_brief import handler as standup_handler
from functions.sweep import handler as sweep_handler
from functions.wake import handler as wake_handler
from tests.kit import DB, FakeLambdaContext, configured, load_event

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

HOUR = 3600 * 1000
ENV = {"ACMI_DEFAULT_TENANT": "default"}
TENANTS = ("default", "acme")


def scheduled_ms(name: str) -> int:
    moment = datetime.fromisoformat(load_event(name)["scheduled_time"].replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000)


def client(store: MemoryStore, tenant: str, at: int | None = None) -> Acmi:
    if at is None:
        return Acmi(store, tenant=tenant)
    return Acmi(store, tenant=tenant, clock=lambda: at)


def _note(text: str) -> dict[str, Any]:
    return {"summary": text, "source": "user:mikey", "kind": "note", "correlationId": "n-1"}


def _rollup_work(store: MemoryStore, tenant: str) -> Callable[[], bool]:
    writer = client(store, tenant, Acmi(store).clock() - HOUR)
    writer.timeline.append(
        "deal:big",
        _note(f"{tenant} signed"),
    )
    slot = writer.keys.slot(EntityId.parse("deal:big"), ROLLUP_LATEST)
    return lambda: store.execute(("EXISTS", slot)) == 1


def _sweep_work(store: MemoryStore, tenant: str) -> Callable[[], bool]:
    acmi = client(store, tenant)
    acmi.agents.heartbeat("claude", now=acmi.clock() - 49 * HOUR)
    return lambda: acmi.signals.all("agent:claude").get("status") == "STALLED"


def _wake_work(store: MemoryStore, tenant: str) -> Callable[[], bool]:
    client(store, tenant, Acmi(store).clock() - 2 * HOUR).wake.set("claude", minute=15)
    acmi = client(store, tenant)
    return lambda: len(acmi.agents.spawns("claude")) == 1


def _hygiene_work(store: MemoryStore, tenant: str) -> Callable[[], bool]:
    acmi = client(store, tenant, Acmi(store).clock() - HOUR)
    acmi.memory.remember("agent:w", f"{tenant} prefers short replies", layer="hot")
    acmi.timeline.append(
        "agent:w",
        _note("said hello"),
    )
    due = acmi.keys.hygiene_due()
    return lambda: store.execute(("ZSCORE", due, "agent:w")) is not None


def _standup_work(store: MemoryStore, tenant: str) -> Callable[[], bool]:
    at = scheduled_ms("standup-brief.scheduled") - HOUR
    acmi = client(store, tenant, at)
    acmi.timeline.append(
        "deal:big",
        _note(f"{tenant} signed"),
    )
    brief = acmi.keys.slot(EntityId.parse(acmi.settings.operator), LAST_BRIEF)
    return lambda: store.execute(("EXISTS", brief)) == 1


def _drift_work(store: MemoryStore, tenant: str) -> Callable[[], bool]:
    acmi = client(store, tenant, Acmi(store).clock() - HOUR)
    acmi.timeline.append(
        "deal:big",
        _note(f"{tenant} signed"),
    )
    report = acmi.keys.drift_report()
    return lambda: store.execute(("EXISTS", report)) == 1


JOBS: dict[str, tuple[LambdaFunction, Callable[[MemoryStore, str], Callable[[], bool]]]] = {
    "rollup-cron": (rollup_handler, _rollup_work),
    "sweep": (sweep_handler, _sweep_work),
    "wake": (wake_handler, _wake_work),
    "hygiene": (hygiene_handler, _hygiene_work),
    "standup-brief": (standup_handler, _standup_work),
    "drift-diff": (drift_handler, _drift_work),
}


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_job_serves_every_tenant_with_work(job: str, store: MemoryStore) -> None:
    handler, work = JOBS[job]
    done = {tenant: work(store, tenant) for tenant in TENANTS}
    gen: Iterator[LambdaFunction] = configured(handler, store, ENV)
    run = next(gen)
    try:
        result: dict[str, Any] = run(load_event(f"{job}.scheduled"), FakeLambdaContext(job))
    finally:
        next(gen, None)
    assert {tenant: check() for tenant, check in done.items()} == {t: True for t in TENANTS}
    # the default tenant's summary stays where it was; acme's is beside it, with its own
    # watermark, kept in acme's job state
    assert result["job"] == job and "error" not in result["tenants"]["acme"]
    assert job_state(client(store, "acme"), job)["execution_id"] == result["execution_id"]


def test_jobs_status_shows_the_backlog_per_tenant(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = redis_server.url_for(DB["cli"])
    redis.Redis.from_url(url).flushdb()
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    store = RedisStore.from_url(url)
    writer = Acmi(store, tenant="acme", clock=lambda: Acmi(store).clock() - HOUR)
    for n in range(3):
        writer.timeline.append(f"deal:{n}", _note(f"n{n}"))
    assert main(["jobs", "run", "rollup-cron", "--param", "max=1"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert ran["tenants"]["acme"]["backlog"] == 2  # `jobs run` serves every tenant too
    assert main(["jobs", "status"]) == 0
    status = json.loads(capsys.readouterr().out)
    acme = status["rollup-cron"]["tenants"]["acme"]
    assert (acme["backlog"], acme["waiting"]) == (2, "backlog: 2")
    store.close()

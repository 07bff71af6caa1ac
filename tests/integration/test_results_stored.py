"""Real answers of the rows that serve stored JSON as written (``StoredObject`` and
``StoredValue``: a profile, the signals, a work item's event and signals, an agent's
threads and rollup, lessons, a job's run record and state), on a real redis-server,
through the core and HTTP (and the MCP tools where a row has one): held to the declared
type, including what another tool stored (a number no double holds, deep values).

Also the bug this found: an agent's rollup or thread that another tool stored with such a
number answered 500 (decoded to an infinity, which no JSON encoder writes); it is now
served digit for digit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from acmi_core import Acmi, create_acmi
from acmi_core.auth.apikeys import Scope
from acmi_core.base.keys import ACTIVE_CONTEXT, ROLLUP_LATEST
from acmi_core.base.model import EntityId
from acmi_core.base.settings import Settings
from acmi_core.jobs import rollup
from acmi_core.jobs.runner import JobRun, job_state, run_job
from acmi_core.mcp.server import build_server
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, FakeClock, RouteClient, fresh_tenant
from tests.results import assert_result

# What other writers leave: a number past the double range, a 30-digit integer, nesting
BIG_NUMBER = "1e999"
ODD = (
    '{"ts": 1790000000000, "summary": "from another tool", "big": ' + BIG_NUMBER + ", "
    '"deep": {"n": 123456789012345678901234567890, "list": [1, [2, [3]]]}}'
)
DOC: dict[str, Any] = {"name": "Mikey", "tags": ["a", "b"], "meta": {"n": 1.5, "ok": True}}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def tenant(redis_server: RedisServer, clock: FakeClock) -> Iterator[Acmi]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    yield fresh_tenant(create_acmi(store, Settings()), clock)
    store.close()


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_server.url_for(DB["backends"])) as client:
        yield client


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def tool(acmi: Acmi, name: str, arguments: dict[str, Any]) -> Any:
    result = asyncio.run(build_server(acmi, Scope.ADMIN).call_tool(name, arguments))
    assert not result.isError, result.content
    return result.structuredContent


def test_profile_and_signals_rows(tenant: Acmi, raw: redis.Redis) -> None:
    http = RouteClient(tenant, "entities")
    entity = "user:mikey"
    assert_result("entities.profile.put", tenant.profile.set(entity, DOC))
    assert_result("entities.profile.patch", tenant.profile.merge(entity, {"plan": "pro"}))
    assert_result("entities.profile.get", tenant.profile.get(entity))
    assert tenant.profile.get("user:nobody") is None  # the type's optional answer
    assert_result("entities.signals.put", tenant.signals.replace(entity, {"mood": "ok"}))
    assert_result("entities.signal.put", tenant.signals.set(entity, "plan", DOC))
    assert_result("entities.signal.get", tenant.signals.get(entity, "plan"))
    assert_result("entities.signal.get", tenant.signals.get(entity, "absent"))
    assert_result("entities.signals.get", tenant.signals.all(entity))

    path = f"/v1/entities/{entity}"
    assert_result("entities.profile.put", ok(http.call("PUT", f"{path}/profile", DOC)))
    assert_result("entities.profile.patch", ok(http.call("PATCH", f"{path}/profile", {"x": 1})))
    assert_result("entities.signals.put", ok(http.call("PUT", f"{path}/signals", {"a": [1]})))
    assert_result("entities.signal.put", ok(http.call("PUT", f"{path}/signals/b", {"v": 2})))
    assert_result("entities.signal.get", ok(http.call("GET", f"{path}/signals/b"))["value"])
    assert_result("entities.profile.get", tool(tenant, "profile_get", {"entity": entity}))

    # what another tool stored: served as written, and still of the declared type
    other = EntityId.parse("user:other")
    raw.set(tenant.keys.profile(other), ODD)
    raw.set(tenant.keys.signals(other), ODD)
    assert_result("entities.profile.get", tenant.profile.get(other))
    assert_result("entities.signals.get", tenant.signals.all(other))
    served = http.call("GET", "/v1/entities/user:other/profile", scope="read")
    assert served.status_code == 200 and BIG_NUMBER.encode() in served.content
    assert_result("entities.profile.get", served.json())


def test_work_rows(tenant: Acmi) -> None:
    http = RouteClient(tenant, "work")
    tenant.work.create("launch", {"title": "Launch"}, owner="agent:claude")
    event = {"source": "agent:claude", "kind": "note", "correlationId": "c1", "summary": "go"}
    assert_result("work.event", tenant.work.event("launch", event, session_id="s1"))
    assert_result("work.signals", tenant.work.signal("launch", {"status": "blocked", "n": 1}))
    body = ok(http.call("POST", "/v1/work/launch/events", {**event, "correlationId": "c2"}), 201)
    assert_result("work.event", body)
    answer = ok(http.call("PATCH", "/v1/work/launch/signals", {"progress": 0.5}))
    assert_result("work.signals", answer["signals"])  # the API wraps them: {id, signals}


def test_agent_rows_serve_what_another_tool_stored(tenant: Acmi, raw: redis.Redis) -> None:
    http = RouteClient(tenant, "agents")
    agent = EntityId.parse("agent:claude")
    tenant.agents.join(str(agent), "thread:launch", "lead")
    assert_result("agents.threads", tenant.agents.active(str(agent)))
    assert_result("agents.rollup.put", tenant.agents.set_rollup(str(agent), "did things", n=3))
    assert_result("agents.rollup.get", tenant.agents.rollup(str(agent)))
    assert tenant.agents.rollup("agent:nobody") is None
    assert_result(
        "agents.rollup.put", ok(http.call("PUT", "/v1/agents/claude/rollup", {"summary": "s"}))
    )
    assert_result("agents.rollup.get", tool(tenant, "rollup_get", {"agent": "claude"}))

    raw.set(tenant.keys.slot(agent, ROLLUP_LATEST), ODD)
    raw.hset(tenant.keys.slot(agent, ACTIVE_CONTEXT), "thread:odd", ODD)
    assert_result("agents.rollup.get", tenant.agents.rollup(str(agent)))
    assert_result("agents.threads", tenant.agents.active(str(agent)))
    for path in ("/v1/agents/claude/rollup", "/v1/agents/claude/threads"):
        served = http.call("GET", path, scope="read")
        assert served.status_code == 200, (path, served.text)  # was 500
        assert f'"big":{BIG_NUMBER}'.encode() in served.content, served.content
        assert b"123456789012345678901234567890" in served.content
    assert_result("agents.threads", served.json()["threads"])


def test_lesson_rows(tenant: Acmi) -> None:
    http = RouteClient(tenant, "workflows")
    tenant.workflows.improve("workflow:ship", "deploy", "smaller batches", "agent:claude")
    lessons = tenant.workflows.lessons(workflow="workflow:ship")
    assert len(lessons) == 1
    assert_result("workflows.lessons", lessons)
    assert_result("workflows.agent_lessons", tenant.workflows.lessons(agent="agent:claude"))
    body = ok(http.call("GET", "/v1/workflows/workflow:ship/lessons", scope="read"))
    assert_result("workflows.lessons", body["lessons"])


def test_job_rows(tenant: Acmi, clock: FakeClock) -> None:
    assert_result("jobs.status", job_state(tenant, "rollup-cron"))  # {} before a run
    tenant.timeline.append(
        "user:mikey",
        {"source": "user:mikey", "kind": "note", "correlationId": "j1", "summary": "hi"},
    )
    clock.now += 3_600_000  # past the job's settle time
    run = JobRun("rollup-cron", "exec-1", clock.now, {})
    first = run_job(tenant, run, rollup.run, clock=time.perf_counter)
    assert_result("jobs.run", first)
    again = run_job(tenant, run, rollup.run, clock=time.perf_counter)
    assert again["replayed"] is True
    assert_result("jobs.run", again)
    assert_result("jobs.status", job_state(tenant, "rollup-cron"))

"""Real answers of the coordination and operator rows, held to the types they declare.

Each row runs on a real redis-server with realistic input, its rarer branches too (a note
left out, a host given, an invite that changes nothing, a wake target of each kind, a
stale or unreadable quota reading, a push token minted once), and ``assert_result`` holds
the core's answer, the HTTP body and the MCP tool's structured result to the row's
declared type (``Operation.result``).

The rows whose core answers a result object (a lease, a work item, a queue page: the
table's rule admits a TypedDict, a pydantic model or a plain value, not a dataclass) are
held here through what every surface prints, the object's ``to_dict()``: its ``*Body``
type in ``acmi_core.coordination.results``, on the core's dict, the HTTP body and the
MCP result alike. Where a surface adds keys of its own (a release's ``released``, the
item id over a sessions page, the spawns list under ``spawns``), its own type says so."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import redis
from pydantic import TypeAdapter

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import ApiKeyBody, Scope
from acmi_core.base.keys import SESSIONS
from acmi_core.coordination import results as r
from acmi_core.coordination.work import work_entity
from acmi_core.ingest import config as source_configs
from acmi_core.mcp.server import build_server
from acmi_core.ops import quota
from acmi_core.ops.doctor import doctor_report
from acmi_core.ops.migrate import migrate_report
from acmi_core.ops.results import FindingLine, StepLine
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, START, TEST_DBS, FakeClock, RouteClient, fresh_tenant
from tests.results import assert_closed, assert_result, portable

OPS_DB = TEST_DBS["results_coordination"]  # this module's own database (tests/kit.py TEST_DBS)
HOOKS = "https://agent.example/"
WAKE_SETTINGS = Settings(auth_cache_s=0, wake_allowed_urls=HOOKS, wake_allowed_buses="ops")
EVENT_BYTES = 200_000  # six of them pass a work item read's page byte cap


def holds(kind: Any, value: Any) -> None:
    """``value`` is of ``kind``: validated (pydantic) and closed (no undeclared key)."""
    TypeAdapter(portable(kind)).validate_python(value)
    assert_closed(kind, value, getattr(kind, "__name__", str(kind)))


def structured(acmi: Acmi, tool: str, arguments: dict[str, Any]) -> Any:
    """The MCP tool's structured result, called in process on a write-scope server."""
    answer = asyncio.run(build_server(acmi, Scope.WRITE).call_tool(tool, arguments))
    assert not getattr(answer, "isError", False), answer
    return answer.structuredContent


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisStore]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    yield store
    store.close()


@pytest.fixture
def http(store: RedisStore, clock: FakeClock) -> RouteClient:
    acmi = fresh_tenant(create_acmi(store, WAKE_SETTINGS), clock)
    return RouteClient(acmi, "agents", "locks", "work", "hitl", "workflows")


# --- agents ------------------------------------------------------------------------------


def test_heartbeats_with_and_without_a_note(http: RouteClient) -> None:
    acmi = http.acmi
    bare = acmi.agents.heartbeat("claude")
    assert "note" not in bare
    assert_result("agents.heartbeat", bare)
    body = http.call("POST", "/v1/agents/claude/heartbeat", {"status": "IDLE", "note": "lunch"})
    assert body.status_code == 200, body.text
    assert body.json()["note"] == "lunch"
    assert_result("agents.heartbeat", body.json())
    tool = structured(acmi, "heartbeat", {"agent": "scout", "status": "BUSY", "note": "ci"})
    assert_result("agents.heartbeat", tool)


def test_spawns_joins_and_leaves(http: RouteClient, clock: FakeClock) -> None:
    acmi = http.acmi
    plain = acmi.agents.spawn("claude", "s-1", "opus")
    assert "host" not in plain
    assert_result("agents.spawn", plain)
    clock.now += 1
    made = http.call(
        "POST", "/v1/agents/claude/spawns", {"session_id": "s-2", "model_id": "opus", "host": "ci"}
    )
    assert made.status_code == 201 and made.json()["host"] == "ci"
    assert_result("agents.spawn", made.json())
    clock.now += 1
    assert_result("agents.spawn", structured(acmi, "spawn", {"agent": "claude", **_session(3)}))

    log = acmi.agents.spawns("claude", 10)
    assert [s["session_id"] for s in log] == ["s-3", "s-2", "s-1"]
    assert_result("agents.spawns", log)
    listed = http.call("GET", "/v1/agents/claude/spawns?limit=2", scope="read").json()
    holds(r.SpawnsBody, listed)
    assert_result("agents.spawns", listed["spawns"])

    entry = acmi.agents.join("claude", "thread:deploy", "lead")
    assert_result("agents.join", entry)
    joined = http.call("PUT", "/v1/agents/claude/threads/thread:review", {})
    assert joined.json()["role"] == "participant"
    holds(r.JoinedBody, joined.json())
    tool = structured(
        acmi, "active", {"agent": "claude", "action": "add", "thread": "thread:ops", "role": "x"}
    )
    assert_result("agents.join", tool)

    assert_result("agents.leave", acmi.agents.leave("claude", "thread:deploy"))
    left = http.call("DELETE", "/v1/agents/claude/threads/thread:review")
    holds(r.LeftBody, left.json())


def _session(n: int) -> dict[str, str]:
    return {"session_id": f"s-{n}", "model_id": "opus"}


def test_invites_of_every_action(http: RouteClient, clock: FakeClock) -> None:
    acmi = http.acmi
    onboarded = acmi.agents.invite("scout", "operator", model="claude-sonnet-4", role="research")
    assert (onboarded["action"], onboarded["created"]) == ("onboarded", True)
    assert onboarded["event"] is not None and onboarded["previous_tier"] is None
    assert_result("agents.invite", onboarded)
    again = acmi.agents.invite("scout", "Operator", model="claude-sonnet-4", role="research")
    assert (again["action"], again["event"], again["changed"]) == ("unchanged", None, [])
    assert_result("agents.invite", again)
    updated = acmi.agents.invite("scout", "Operator", lane="docs")
    assert (updated["action"], updated["changed"]) == ("updated", ["lane"])
    assert_result("agents.invite", updated)
    clock.now += 1
    moved = acmi.agents.invite("scout", "Admin")
    assert (moved["action"], moved["previous_tier"]) == ("tier-changed", "Operator")
    assert_result("agents.invite", moved)


def test_wake_slots_of_each_target(http: RouteClient) -> None:
    acmi = http.acmi
    recorded = acmi.wake.set("claude", 15)
    assert recorded["target"] is None and recorded["next_due"] > START
    assert_result("agents.wake", recorded)
    hook = acmi.wake.set("claude", 0, every_hours=6, target={"type": "webhook", "url": HOOKS})
    assert hook["target"] == {"type": "webhook", "url": HOOKS}
    assert_result("agents.wake", hook)
    bus = acmi.wake.set("scout", 30, every_hours=24, target={"type": "eventbridge", "bus": "ops"})
    assert_result("agents.wake", bus)


# --- locks -------------------------------------------------------------------------------


def test_leases_as_every_surface_prints_them(http: RouteClient, clock: FakeClock) -> None:
    acmi = http.acmi
    free = acmi.locks.get("deploy:web").to_dict()
    assert free["held"] is False and free["owner"] is None
    holds(r.LockStateBody, free)

    lease = acmi.locks.claim("deploy:web", "agent:claude", 60_000).to_dict()
    assert "owner_token" in lease
    holds(r.LeaseBody, lease)
    renewed = acmi.locks.renew("deploy:web", lease["owner_token"], 90_000).to_dict()
    assert "owner_token" not in renewed  # only the claimant's own answer carries it
    holds(r.LeaseBody, renewed)
    holds(r.LockStateBody, acmi.locks.get("deploy:web").to_dict())
    holds(r.LeaseBody, acmi.locks.release("deploy:web", lease["owner_token"]).to_dict())

    claimed = http.call("POST", "/v1/locks/deploy:api/claim", {"owner": "agent:a", "ttl_ms": 5000})
    assert claimed.status_code == 200, claimed.text
    holds(r.LeaseBody, claimed.json())
    token = claimed.json()["owner_token"]
    held = http.call("GET", "/v1/locks/deploy:api", scope="read").json()
    assert held["held"] is True
    holds(r.LockStateBody, held)
    conflict = http.call("POST", "/v1/locks/deploy:api/claim", {"owner": "agent:b", "ttl_ms": 5000})
    assert conflict.status_code == 409 and conflict.json()["rule"] == "held"
    renew = {"owner_token": token, "ttl_ms": 9000}
    holds(r.LeaseBody, http.call("POST", "/v1/locks/deploy:api/renew", renew).json())
    released = http.call("POST", "/v1/locks/deploy:api/release", {"owner_token": token}).json()
    assert released["released"] is True
    holds(r.ReleasedBody, released)

    tool = structured(
        acmi, "lock_claim", {"resource": "deploy:mcp", "owner": "agent:m", "ttl_ms": 5000}
    )
    holds(r.LeaseBody, tool)
    holds(r.LockStateBody, structured(acmi, "lock_get", {"resource": "deploy:mcp"}))
    # the tool answers the lease released, without the route's "released"
    gone = structured(
        acmi, "lock_release", {"resource": "deploy:mcp", "owner_token": tool["owner_token"]}
    )
    holds(r.LeaseBody, gone)


# --- work --------------------------------------------------------------------------------


def _big_events(acmi: Acmi, id: str, count: int) -> None:
    """Large events, as another tool may have written them (each under the body cap)."""
    key = acmi.keys.timeline(work_entity(id))
    for n in range(count):
        event = {
            "ts": START - 1000 + n,
            "source": "user:x",
            "kind": "note",
            "correlationId": f"c-{n}",
        }
        member = json.dumps({**event, "summary": f"e{n}", "payload": {"blob": "x" * EVENT_BYTES}})
        acmi.store.execute(("ZADD", key, START - 1000 + n, member))


def test_work_items_pages_and_sessions(http: RouteClient, clock: FakeClock) -> None:
    acmi = http.acmi
    created = acmi.work.create("w-1", {"title": "Ship"}, owner="user:bentley").to_dict()
    holds(r.WorkItemBody, created)
    made = http.call(
        "POST", "/v1/work", {"id": "w-2", "profile": {"title": "Two"}, "owner": "user:bentley"}
    )
    assert made.status_code == 201, made.text
    holds(r.WorkItemBody, made.json())
    holds(r.WorkItemBody, structured(acmi, "work_create", {"id": "w-3", "title": "Three"}))

    clock.now += 1
    acmi.work.event(
        "w-1",
        {
            "source": "agent:claude",
            "kind": "note",
            "correlationId": "c-1",
            "summary": "did it",
            "session_id": "s-1",
        },
    )
    acmi.signals.update(work_entity("w-1"), {"stray": "another tool's"})
    item = acmi.work.get("w-1").to_dict()
    assert item["sessions"] == ["s-1"] and "next_cursor" not in item
    holds(r.WorkItemBody, item)
    _big_events(acmi, "w-big", 6)
    acmi.work.create("w-big", {"title": "big"})
    cut = acmi.work.get("w-big", events=50).to_dict()
    assert "next_cursor" in cut
    holds(r.WorkItemBody, cut)
    served = http.call("GET", "/v1/work/w-big?events=50", scope="read").json()
    assert "next_cursor" in served
    holds(r.WorkItemBody, served)
    holds(r.WorkItemBody, structured(acmi, "work_get", {"id": "w-1"}))

    first = acmi.work.list("user:bentley", limit=1).to_dict()
    assert first["next_cursor"] is not None and set(first["items"][0]) >= {"id", "updated_at"}
    holds(r.WorkPageBody, first)
    everything = acmi.work.list(None, None).to_dict()  # all items: no owner, no status
    holds(r.WorkPageBody, everything)
    listed = http.call("GET", "/v1/work?owner=user:bentley", scope="read").json()
    holds(r.WorkPageBody, listed)
    holds(r.WorkPageBody, structured(acmi, "work_list", {"owner": "user:bentley", "limit": 1}))

    for n in range(3):
        acmi.work.event(
            "w-1",
            {"source": "agent:claude", "kind": "note", "correlationId": f"s{n}", "summary": "s"},
            session_id=f"s-{n + 2}",
        )
    # enough sessions that one SSCAN step of 2 cannot finish the set, whatever the hash
    # seed (4 members may all come back in one step, cursor 0)
    sessions_key = acmi.keys.slot(work_entity("w-1"), SESSIONS)
    acmi.store.execute(("SADD", sessions_key, *(f"s-extra-{n}" for n in range(200))))
    page = acmi.work.sessions_page("w-1", limit=2).to_dict()
    assert page["next_cursor"] is not None
    holds(r.SessionPageBody, page)
    sessions = http.call("GET", "/v1/work/w-1/sessions?limit=2", scope="read").json()
    holds(r.SessionsBody, sessions)
    holds(r.SessionPageBody, structured(acmi, "work_sessions", {"id": "w-1", "limit": 2}))

    owner = acmi.work.assign("w-1", "user:mikey")
    assert_result("work.owner", owner)
    moved = http.call("PUT", "/v1/work/w-2/owner", {"owner": "user:mikey"})
    holds(r.OwnerBody, moved.json())
    assert_result("work.owner", moved.json()["owner"])


# --- hitl --------------------------------------------------------------------------------


def test_queue_pages_and_resolutions(http: RouteClient, clock: FakeClock) -> None:
    acmi = http.acmi
    for n in range(3):
        clock.now += 1
        acmi.hitl.create(f"topic {n}", "approve?", asked_by="agent:claude", correlation_id=f"h-{n}")
    acmi.hitl.create("to mikey", "look", asked_by="agent:claude", addressee="user:mikey")
    ask = {"topic": "deploy", "request": "go?", "asked_by": "agent:claude", "correlationId": "h-9"}
    new = http.call("POST", "/v1/hitl", ask)
    again = http.call("POST", "/v1/hitl", ask)  # idempotent: the stored item, 200
    assert (new.status_code, again.status_code) == (201, 200) and not again.json()["created"]
    holds(r.CreatedBody, new.json())
    holds(r.CreatedBody, again.json())
    tool = {"topic": "t", "request": "r", "asked_by": "agent:claude"}
    holds(r.CreatedBody, structured(acmi, "hitl_create", tool))
    first = acmi.hitl.list(limit=2).to_dict()
    assert first["next_cursor"] is not None and first["addressee"] is None
    holds(r.HitlPageBody, first)
    holds(r.HitlPageBody, acmi.hitl.list("user:mikey").to_dict())
    holds(r.HitlPageBody, http.call("GET", "/v1/hitl?limit=2", scope="read").json())
    holds(r.HitlPageBody, structured(acmi, "hitl_list", {"limit": 2}))

    done = acmi.hitl.resolve("h-0", "yes", by="user:mikey").to_dict()
    holds(r.ResolvedBody, done)
    holds(r.HitlPageBody, acmi.hitl.list(state="closed").to_dict())
    served = http.call("POST", "/v1/hitl/h-1/resolve", {"resolution": "no", "by": "user:mikey"})
    assert served.status_code == 200, served.text
    holds(r.ResolvedBody, served.json())
    tool = structured(
        acmi, "hitl_resolve", {"correlation_id": "h-2", "resolution": "ok", "by": "user:m"}
    )
    holds(r.ResolvedBody, tool)


# --- workflows ---------------------------------------------------------------------------


def test_workflow_writes_and_scans(http: RouteClient, clock: FakeClock) -> None:
    acmi = http.acmi
    executed = acmi.workflows.execute("deploy-web", "build", "agent:claude", payload={"sha": "abc"})
    assert_result("workflows.execute", executed)
    clock.now += 1
    run = http.call(
        "POST", "/v1/workflows/deploy-web/executions", {"step": "test", "agent": "agent:claude"}
    )
    assert run.status_code == 201, run.text
    assert_result("workflows.execute", run.json())
    unassessed = acmi.workflows.unassessed("deploy-web").to_dict()
    assert len(unassessed["unassessed"]) == 2
    holds(r.UnassessedBody, unassessed)
    holds(
        r.UnassessedBody,
        http.call("GET", "/v1/workflows/deploy-web/unassessed", scope="read").json(),
    )

    clock.now += 1
    assessed = acmi.workflows.assess("deploy-web", "build", 80, ["fast", "green"], "agent:judge")
    assert_result("workflows.assess", assessed)
    body = {
        "step": "test",
        "score": 55,
        "criteria": {"flaky": 2},
        "agent": "agent:judge",
        "note": "retry",
    }
    assert_result(
        "workflows.assess", http.call("POST", "/v1/workflows/deploy-web/assessments", body).json()
    )
    tool = structured(
        acmi,
        "assess",
        {
            "workflow": "deploy-web",
            "step": "build",
            "score": 90,
            "criteria": ["x"],
            "agent": "agent:j",
        },
    )
    assert_result("workflows.assess", tool)
    scores = acmi.workflows.assessments("deploy-web").to_dict()
    assert scores["steps"]["build"]["count"] == 2
    holds(r.AssessmentsBody, scores)
    holds(r.AssessmentsBody, acmi.workflows.assessments("no-such-flow").to_dict())  # no steps
    holds(
        r.AssessmentsBody,
        http.call("GET", "/v1/workflows/deploy-web/assessments", scope="read").json(),
    )

    lesson = acmi.workflows.improve("deploy-web", "build", "cache the wheels", "agent:claude")
    assert_result("workflows.improve", lesson)
    learned = http.call(
        "POST",
        "/v1/workflows/deploy-web/improvements",
        {"step": "test", "lesson": "pin", "agent": "agent:claude"},
    )
    assert_result("workflows.improve", learned.json())
    tool = structured(
        acmi, "improve", {"workflow": "deploy-web", "step": "x", "lesson": "y", "agent": "agent:c"}
    )
    assert_result("workflows.improve", tool)


# --- the operator's rows -----------------------------------------------------------------


class Provider:
    """A quota provider whose readings the test chooses (or whose read fails)."""

    def __init__(self, name: str, readings: Sequence[quota.Reading] = (), fails: bool = False):
        self._name, self._readings, self._fails = name, readings, fails

    @property
    def name(self) -> str:
        return self._name

    def read(self) -> Sequence[quota.Reading]:
        if self._fails:
            raise TimeoutError("the provider did not answer")
        return self._readings


def test_quota_reports_and_checks(http: RouteClient, clock: FakeClock) -> None:
    acmi = http.acmi
    plain = quota.report(acmi, "openai", "requests", remaining=80, limit=100)
    assert set(plain["reading"]) == {"remaining", "limit", "observed_ms"}
    assert_result("quota.report", plain)
    full = quota.report(
        acmi,
        "openai",
        "tokens",
        remaining="9.5",
        limit=100,
        unit="k",
        resets_at="2026-12-02T00:00:00Z",
    )
    assert_result("quota.report", full)

    providers = [
        Provider(
            "live",
            [
                quota.Reading("requests", 5, 100, "req", 1_800_000_000_000),
                quota.Reading("tokens", "lots", 10),
            ],
        ),
        Provider("zero", [quota.Reading("requests", 0, 0)]),
        Provider("stale", [quota.Reading("requests", 50, 100, observed_ms=START - 10**9)]),
        Provider("down", fails=True),
        quota.ReportedQuota(acmi, "openai"),
    ]
    checked = quota.monitor(acmi, providers, max_age_ms=60_000)
    assert checked["recorded"] and {p["previous"] for p in checked["providers"]} == {None}
    readings = [reading for p in checked["providers"] for reading in p["readings"]]
    assert any("problem" in x and "remaining" not in x for x in readings)  # unreadable numbers
    assert any("problem" in x and "remaining" in x for x in readings)  # stale, or a 0 limit
    assert_result("quota.monitor", checked)
    clock.now += 1
    again = quota.monitor(acmi, providers, record=False, max_age_ms=None)
    assert not again["recorded"] and again["providers"][0]["previous"] == "red"
    assert_result("quota.monitor", again)
    assert_result("quota.monitor", quota.monitor(acmi, []))


def test_source_configs_with_and_without_a_new_push_token(store: RedisStore) -> None:
    acmi = fresh_tenant(create_acmi(store, Settings()), FakeClock())
    made = source_configs.put_config(acmi.store, acmi.keys, "make", new_push_token=True)
    assert isinstance(made[1], str)
    assert_result("sources.set", made)
    mapped = source_configs.put_config(acmi.store, acmi.keys, "make", mapping={"kind": "=note"})
    assert mapped[1] is None and mapped[0].mapping == {"kind": "=note"}
    assert_result("sources.set", mapped)


def test_key_records_never_show_the_key(store: RedisStore) -> None:
    tenant = fresh_tenant(create_acmi(store, Settings()), FakeClock()).tenant
    plaintext, record = apikeys.mint(store, tenant=tenant, scope="write", name="ci", now_ms=START)
    assert plaintext not in json.dumps(record.to_dict())
    holds(ApiKeyBody, record.to_dict())
    for listed in apikeys.list_keys(store, tenant):
        holds(ApiKeyBody, listed.to_dict())
    holds(ApiKeyBody, apikeys.revoke(store, record.id).to_dict())


@pytest.fixture
def keyspace(redis_server: RedisServer) -> Iterator[tuple[Acmi, redis.Redis]]:
    redis_server.flush(OPS_DB)
    store = RedisStore.from_url(redis_server.url_for(OPS_DB))
    with redis.Redis.from_url(redis_server.url_for(OPS_DB)) as raw:
        yield create_acmi(store, Settings()), raw
    store.close()


def test_doctor_and_migrate_answer_their_exit_code(keyspace: tuple[Acmi, redis.Redis]) -> None:
    acmi, raw = keyspace
    acmi.profile.set("user:mikey", {"name": "Mikey"})
    err = io.StringIO()
    clean = doctor_report(acmi, out=io.StringIO(), err=err)
    assert clean == 0
    assert_result("ops.doctor", clean)
    assert_result("ops.migrate", migrate_report(acmi, out=io.StringIO(), err=err, dry_run=True))

    # what other tools leave: a profile that is no object, an entity its index lacks, a
    # timeline member without the fields an event needs
    raw.set("acmi:user:arr:profile", "[1, 2]")
    raw.set("acmi:user:lost:profile", '{"name": "Lost"}')
    raw.zadd("acmi:user:mikey:timeline", {'{"ts": 1}': 1})
    out = io.StringIO()
    found = doctor_report(acmi, out=out, err=err, as_json=True)
    assert found == 1
    assert_result("ops.doctor", found)
    *findings, summary = [json.loads(line) for line in out.getvalue().splitlines()]
    assert "summary" in summary and {"entity", "counts"} <= {k for f in findings for k in f}
    for finding in findings:  # each line of --json is a Finding's dict
        holds(FindingLine, finding)
    out = io.StringIO()
    assert_result("ops.migrate", migrate_report(acmi, out=out, err=err, as_json=True))
    *steps, summary = [json.loads(line) for line in out.getvalue().splitlines()]
    assert steps and "summary" in summary and any("entity" in step for step in steps)
    for step in steps:
        holds(StepLine, step)

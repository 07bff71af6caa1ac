"""The fleet dashboard's read (acmi.dashboard and GET /v1/dashboard) on every backend:
what a seeded tenant shows, nothing of another tenant, two round trips, the caps, stored
values another tool wrote reported rather than raised, and the page's route."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth.apikeys import mint
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.model import EntityId
from acmi_core.coordination import dashboard
from acmi_core.jobs.sweep import STALL_AFTER_MS
from acmi_core.store import open_store
from acmi_core.store.counting import CountingStore
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_cluster import RedisCluster
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble
from bench import script_limits
from tests.kit import TEST_DBS, FakeClock, fresh_tenant
from tests.results import assert_result

HOUR = 3600 * 1000
DB_BOUNDS = TEST_DBS["dashboard_bounds"]  # this module's own database (tests/kit.py TEST_DBS)


def seed(acmi: Acmi, clock: FakeClock, tag: str) -> None:
    """Two agents (one silent past the sweep's threshold), a lease, an item in the shared
    queue and one in the operator's, two work items, an assessed step with a lesson and
    a coordination event; ``tag`` marks every id as this tenant's."""
    acmi.agents.heartbeat(f"{tag}-old", now=clock.now - 50 * HOUR)
    acmi.agents.heartbeat(f"{tag}-live", note="building")
    acmi.locks.claim(f"{tag}-deploy", f"agent:{tag}-live", 60_000)
    acmi.hitl.create("deploy", "approve PR 42", asked_by=f"agent:{tag}-live",
                     correlation_id=f"{tag}-h1")  # fmt: skip
    acmi.hitl.create("budget", "raise the cap", asked_by=f"agent:{tag}-live", urgency="P0",
                     addressee="user:operator", correlation_id=f"{tag}-h2")  # fmt: skip
    acmi.work.create(f"{tag}-w1", {"name": "ship"}, owner=f"agent:{tag}-live", status="doing")
    acmi.work.create(f"{tag}-w2", {"name": "docs"}, status="done")
    acmi.workflows.execute(f"{tag}-release", "build", f"agent:{tag}-live", correlation_id="r1")
    acmi.workflows.assess(f"{tag}-release", "build", 70, ["green"], f"agent:{tag}-live",
                          correlation_id="r1")  # fmt: skip
    acmi.workflows.assess(f"{tag}-release", "build", 90, ["fast"], f"agent:{tag}-live",
                          correlation_id="r2")  # fmt: skip
    acmi.workflows.improve(f"{tag}-release", "build", "cache the deps", f"agent:{tag}-live")
    acmi.timeline.append(
        COORDINATION_THREAD,
        {"source": f"agent:{tag}-live", "kind": "note", "correlationId": f"{tag}-n1",
         "summary": f"{tag}: <img src=x onerror=alert(1)>"},
    )  # fmt: skip


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(tick=1)


def test_a_tenant_sees_what_it_wrote_and_nothing_of_another(acmi: Acmi, clock: FakeClock) -> None:
    mine, theirs = fresh_tenant(acmi, clock), fresh_tenant(acmi, clock)
    seed(mine, clock, "a")
    seed(theirs, clock, "b")
    view = mine.dashboard.read()
    assert view["tenant"] == mine.keys.tenant
    assert "b-" not in json.dumps(view)  # not one id, summary or queue of the other tenant

    agents = {a["agent"]: a for a in view["agents"]}
    assert list(agents) == ["agent:a-live", "agent:a-old"]  # newest heartbeat first
    assert agents["agent:a-live"]["stalled"] is False
    assert agents["agent:a-live"]["status_note"] == "building"
    assert agents["agent:a-old"]["stalled"] is True  # silent 50 h: stalled before a sweep
    assert agents["agent:a-old"]["age_ms"] > STALL_AFTER_MS
    (lock,) = view["locks"]
    assert lock["resource"] == "a-deploy" and lock["owner"] == "agent:a-live"
    assert 0 < lock["expires_in_ms"] <= 60_000 and "owner_token" not in lock
    queues = {h["correlationId"]: h["queue"] for h in view["hitl"]}
    assert queues == {"a-h1": "shared", "a-h2": "user:operator"}
    work = {w["id"]: (w["owner"], w["status"], w["open"]) for w in view["work"]}
    assert work == {"a-w1": ("agent:a-live", "doing", True), "a-w2": (None, "done", False)}
    (wf,) = view["workflows"]
    assert wf["workflow"] == "workflow:a-release" and wf["lessons"] == 1 and wf["complete"]
    assert wf["steps"] == {"build": {"count": 2, "mean": 80.0, "last": 90}}
    assert [e["payload"]["lesson"] for e in view["lessons"]] == ["cache the deps"]
    assert view["events"][0]["correlationId"] == "a-n1"  # newest first
    assert "a-deploy" in {e.get("payload", {}).get("resource") for e in view["events"]}
    assert view["truncated"] == [] and view["problems"] == []
    assert view["limits"] == dashboard.LIMITS
    assert_result("dashboard.read", view)  # the declared DashboardBody, no undeclared key


def test_the_stall_threshold_is_the_sweeps() -> None:
    assert dashboard.STALL_AFTER_MS == STALL_AFTER_MS


def test_an_expired_lease_is_not_shown(acmi: Acmi, clock: FakeClock) -> None:
    mine = fresh_tenant(acmi, clock)
    mine.locks.claim("short", "agent:x", 1_000)
    clock.now += 2_000
    assert mine.dashboard.read()["locks"] == []


def test_each_part_stops_at_its_cap_and_says_so(acmi: Acmi, clock: FakeClock) -> None:
    mine = fresh_tenant(acmi, clock)
    for i in range(dashboard.MAX_AGENTS + 3):
        mine.agents.heartbeat(f"agent-{i:03}")
    for i in range(dashboard.DEFAULT_EVENTS + 2):
        mine.timeline.append(COORDINATION_THREAD, {"source": "agent:x", "kind": "note",
                             "correlationId": f"n{i}", "summary": f"event {i}"})  # fmt: skip
    view = mine.dashboard.read()
    assert len(view["agents"]) == dashboard.MAX_AGENTS
    assert view["agents"][0]["agent"] == f"agent:agent-{dashboard.MAX_AGENTS + 2:03}"
    assert "agents" in view["truncated"]
    assert len(view["events"]) == dashboard.DEFAULT_EVENTS
    assert view["events"][0]["summary"] == f"event {dashboard.DEFAULT_EVENTS + 1}"
    assert [e["summary"] for e in mine.dashboard.read(events=2)["events"]] == [
        f"event {dashboard.DEFAULT_EVENTS + 1}",
        f"event {dashboard.DEFAULT_EVENTS}",
    ]


@pytest.mark.parametrize("events", [0, 101, True, "5"])
def test_a_bad_events_count_is_refused_naming_the_field(acmi: Acmi, events: Any) -> None:
    with pytest.raises(AcmiValidationError) as refused:
        acmi.dashboard.read(events=events)
    assert (refused.value.field, refused.value.rule) == ("events", "range")


def test_a_timeline_read_stops_at_its_byte_cap(acmi: Acmi, clock: FakeClock) -> None:
    mine = fresh_tenant(acmi, clock)
    big = "x" * 60_000  # five of these pass EVENTS_BYTES (256 KiB)
    for i in range(6):
        mine.timeline.append(COORDINATION_THREAD, {"source": "agent:x", "kind": "note",
                             "correlationId": f"b{i}", "summary": "big",
                             "payload": {"text": big}})  # fmt: skip
    view = mine.dashboard.read()
    assert 1 <= len(view["events"]) < 6
    assert "events" in view["truncated"]


def test_values_another_tool_wrote_are_reported_not_raised(acmi: Acmi, clock: FakeClock) -> None:
    mine = fresh_tenant(acmi, clock)
    mine.agents.heartbeat("odd")
    mine.agents.heartbeat("huge")
    keys = mine.keys
    mine.store.execute(("SET", keys.signals(EntityId.parse("agent:odd")), b"{not json"))
    mine.store.execute(
        ("SET", keys.signals(EntityId.parse("agent:huge")), json.dumps({"s": "y" * 20_000}))
    )
    mine.store.execute(("ZADD", keys.activity(), 1, "foreign member"))
    mine.store.execute(("ZADD", keys.hitl_queue(None, "open"), 5, "not an event"))
    mine.store.execute(("SADD", keys.index("work"), "w1"))
    mine.store.execute(("SET", keys.signals(EntityId.parse("work:w1")), b"[1, 2]"))
    view = mine.dashboard.read()
    assert {a["agent"] for a in view["agents"]} == {"agent:odd", "agent:huge"}
    assert all(a["status"] is None for a in view["agents"])
    problems = " ".join(view["problems"])
    assert "agent:odd:signals" in problems and "not shown" in problems
    assert "agent index" in problems
    assert "thread:hitl:open: members that are not JSON objects" in problems
    assert "work:w1:signals holds JSON that is not an object" in problems
    assert view["hitl"] == [] and view["work"][0]["status"] is None
    assert "foreign member" not in problems  # named by its index, not echoed


def test_two_round_trips_and_one_when_empty(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    clock = FakeClock(tick=1)
    acmi = fresh_tenant(create_acmi(upstash_store, Settings()), clock)
    acmi.dashboard.read()  # loads page.lua (a pipeline's EVALSHA finds it after this)
    upstash_double.reset_counts()
    acmi.dashboard.read()
    assert upstash_double.requests == 1  # nothing indexed: no second pipeline
    seed(acmi, clock, "a")
    upstash_double.reset_counts()
    view = acmi.dashboard.read()
    assert upstash_double.requests == 2
    assert len(view["agents"]) == 2 and len(view["workflows"]) == 1


# --- the routes ---------------------------------------------------------------------------


def _client(store: MemoryStore) -> tuple[TestClient, dict[str, str]]:
    settings = Settings()
    acmi = create_acmi(store, settings)
    keys = {
        name: mint(store, tenant=tenant, scope=scope, name=name, now_ms=0)[0]
        for name, tenant, scope in (
            ("read", "dash-a", "read"),
            ("write", "dash-a", "write"),
            ("other", "dash-b", "read"),
        )
    }
    return TestClient(create_app(ApiContext(acmi))), keys


def test_the_read_route_answers_the_keys_tenant_only() -> None:
    store = MemoryStore()
    client, keys = _client(store)
    clock = FakeClock(tick=1)
    base = create_acmi(store, Settings())
    seed(Acmi(store, base.settings, tenant="dash-a", clock=clock), clock, "a")
    seed(Acmi(store, base.settings, tenant="dash-b", clock=clock), clock, "b")
    answer = client.get("/v1/dashboard", headers={"Authorization": f"Bearer {keys['read']}"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    body: dict[str, Any] = answer.json()
    assert_result("dashboard.read", body)
    assert body["tenant"] == "dash-a" and "b-" not in answer.text
    assert {h["correlationId"] for h in body["hitl"]} == {"a-h1", "a-h2"}
    other = client.get("/v1/dashboard", headers={"Authorization": f"Bearer {keys['other']}"})
    assert other.json()["tenant"] == "dash-b" and "a-" not in other.text
    refused = client.get("/v1/dashboard")
    assert refused.status_code == 401 and refused.json()["field"] == "authorization"
    # the key goes in the header only: one in the query is not a credential
    in_url = client.get(f"/v1/dashboard?key={keys['read']}")
    assert in_url.status_code in (400, 401)


def test_the_page_and_its_assets_are_served_without_a_key() -> None:
    client, _ = _client(MemoryStore())
    page = client.get("/dashboard")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert "http" not in page.text  # no CDN, no absolute URL
    assert "acmi_" not in page.text  # no key in the page
    for asset, kind in dashboard_assets().items():
        answer = client.get(f"/dashboard?asset={asset}")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(kind)
    script = client.get("/dashboard?asset=dashboard.js").text
    assert "innerHTML" not in script and "http" not in script  # text only; same origin
    missing = client.get("/dashboard?asset=../secrets")
    assert missing.status_code == 404 and missing.json()["field"] == "asset"
    assert "/dashboard" not in client.get("/openapi.json").json()["paths"]  # like /docs
    assert "/v1/dashboard" in client.get("/openapi.json").json()["paths"]


def dashboard_assets() -> dict[str, str]:
    from acmi_core.api.routes.dashboard import ASSETS

    return {name: kind.split(";")[0] for name, kind in ASSETS.items()}


# --- at the largest inputs the caps allow ---------------------------------------------------


@pytest.mark.slow  # fills ~30 MB
def test_the_read_at_the_largest_inputs_stays_within_the_script_budget(
    redis_server: RedisServer,
) -> None:
    """Every index full past its cap, every value it reads at the write limits (64 KiB
    signals, 4,000-character HITL texts, events of a whole request body): the read's
    Redis CPU time stays under the scripts' budget (each page.lua run in it too, in
    SLOWLOG time when the machine has a core for Redis), and the answer stays under the
    documented ~0.9 MB of stored bytes."""
    store = RedisStore.from_url(redis_server.url_for(DB_BOUNDS))
    store.execute(("FLUSHDB",))
    try:
        counting = CountingStore(store)
        acmi = Acmi(counting, Settings())
        _fill(store, acmi)
        acmi.dashboard.read(events=dashboard.MAX_EVENTS)  # page.lua loaded
        runs: list[tuple[float, float, int]] = []
        with script_limits.slowlog_everything(store):
            for _ in range(3):
                store.execute(("SLOWLOG", "RESET"))
                before = script_limits.cpu_us(store)
                counting.reset()
                view = acmi.dashboard.read(events=dashboard.MAX_EVENTS)
                cpu_ms = (script_limits.cpu_us(store) - before) / 1000
                entries = store.execute(("SLOWLOG", "GET", "-1"))
                assert isinstance(entries, list)
                slowest = max(e[2] for e in entries if isinstance(e, list)) / 1000
                runs.append((cpu_ms, slowest, counting.requests))
        size = len(json.dumps(view))
        print(f"dashboard read at the caps: CPU ms {sorted(r[0] for r in runs)}, slowest "
              f"command ms {sorted(r[1] for r in runs)}, answer {size:,} bytes")  # fmt: skip
        assert {r[2] for r in runs} == {2}  # two round trips, full or not
        assert min(r[0] for r in runs) < script_limits.BUDGET_MS
        if script_limits.quiet():
            assert min(r[1] for r in runs) < script_limits.BUDGET_MS
        assert size < 1_000_000  # the README: at most ~0.9 MB of stored bytes
        assert len(view["agents"]) == dashboard.MAX_AGENTS
        assert len(view["work"]) == dashboard.MAX_WORK
        assert len(view["workflows"]) == dashboard.MAX_WORKFLOWS
        assert len(view["locks"]) == dashboard.MAX_LOCKS
        assert set(view["truncated"]) >= {"agents", "locks", "hitl", "work", "workflows"}
    finally:
        store.execute(("FLUSHDB",))
        store.close()


def _fill(store: RedisStore, acmi: Acmi) -> None:
    keys, now = acmi.keys, acmi.clock()
    big_signals = json.dumps({"status": "ACTIVE", "status_note": "n" * (64 * 1024 - 60)})

    def bulk(command: str, key: str, items: list[Any], step: int = 1000) -> None:
        for i in range(0, len(items), step):
            store.execute((command, key, *items[i : i + step]))

    agents = [f"agent:a{i:05}" for i in range(10_000)]
    bulk("ZADD", keys.activity(), [x for i, a in enumerate(agents) for x in (now - i, a)])
    for agent in agents[: dashboard.MAX_AGENTS + 1]:
        store.execute(("SET", keys.signals(EntityId.parse(agent)), big_signals))
    leases = [f"agent:a{i:05}|res-{i}|{now + 60_000}|1|c{i}" for i in range(10_000)]
    bulk("ZADD", keys.leases(), [x for lease in leases for x in (0, lease)])
    text = "t" * 4000
    payload = {"topic": "x", "concrete_unblock_request": text, "urgency": "P1"}
    for queue in (keys.hitl_queue(None, "open"),
                  keys.hitl_queue(EntityId.parse("user:operator"), "open")):  # fmt: skip
        items: list[Any] = []
        for i in range(1000):
            item = {"ts": now, "source": "agent:a", "kind": "hitl-required",
                    "correlationId": f"h{i}", "summary": "[HITL] x",
                    "payload": {**payload, "deadline": now + i}}  # fmt: skip
            items += [now + i, json.dumps(item)]
        bulk("ZADD", queue, items, step=200)
    work = [f"w{i:03}" for i in range(128)]  # a listpack set: one SSCAN step answers all
    bulk("SADD", keys.index("work"), work)
    for w in work:
        store.execute(("SET", keys.signals(EntityId.parse(f"work:{w}")), big_signals))
    flows = [f"f{i:03}" for i in range(128)]
    bulk("SADD", keys.index("workflow"), flows)
    event = {"source": "agent:a", "kind": "assessment", "summary": "s",
             "payload": {"step": "build", "score": 80, "note": "n" * 60_000}}  # fmt: skip
    for f in flows[: dashboard.MAX_WORKFLOWS]:
        timeline = keys.timeline(EntityId.parse(f"workflow:{f}"))
        for i in range(20):
            member = json.dumps({**event, "ts": now - i, "correlationId": f"r{i}"})
            store.execute(("ZADD", timeline, now - i, member))
    huge = "e" * script_limits.EVENT_BYTES
    for i in range(20):
        note = {"ts": now - i, "source": "agent:a", "kind": "note", "correlationId": f"n{i}",
                "summary": "big", "payload": huge}  # fmt: skip
        member = json.dumps(note)
        store.execute(("ZADD", keys.coordination_timeline(), now - i, member))
    lessons = [json.dumps({"ts": now - i, "kind": "improvement", "summary": "l" * 4000})
               for i in range(1000)]  # fmt: skip
    bulk("ZADD", keys.lessons(), [x for i, m in enumerate(lessons) for x in (now - i, m)], 200)


@pytest.mark.parametrize("shape", ["redis_cluster3", "redis_cluster1"])
def test_the_read_on_a_cluster_is_each_tenants_in_its_slot(
    request: pytest.FixtureRequest, shape: str
) -> None:
    """The cluster layout: every key the read names carries the tenant's hash tag, so
    both pipelines go to the tenant's node; two tenants see their own."""
    cluster: RedisCluster = request.getfixturevalue(shape)
    settings = Settings(key_layout="cluster", redis_cluster=True, redis_url=cluster.url)
    base = create_acmi(open_store(settings), settings)
    clock = FakeClock(tick=1)
    try:
        mine, theirs = fresh_tenant(base, clock), fresh_tenant(base, clock)
        seed(mine, clock, "a")
        seed(theirs, clock, "b")
        view = mine.dashboard.read()
        assert view["problems"] == [] and "b-" not in json.dumps(view)
        assert [a["agent"] for a in view["agents"]] == ["agent:a-live", "agent:a-old"]
        assert {h["correlationId"] for h in view["hitl"]} == {"a-h1", "a-h2"}
        assert [w["workflow"] for w in view["workflows"]] == ["workflow:a-release"]
        assert {w["id"] for w in theirs.dashboard.read()["work"]} == {"b-w1", "b-w2"}
    finally:
        base.close()

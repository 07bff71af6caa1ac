"""Tier permissions (``acmi_core/auth/tiers.py``): a key bound to an agent writes only what
its agent's tier allows, on the whole HTTP app over a real redis-server, two tenants.

- a Specialist key writes thread:x and is refused tracker:y (403 tier_namespace naming
  the field, nothing stored), and still runs the agent loop (heartbeat, bootstrap,
  spawn, lock claim, join and post to its thread, its own memory);
- a Utility key is read-only except its own agent entity (403 tier_read_only);
- a tier change (invite again with another tier) is in force after the cache time (the
  gate's clock moved), not before;
- the same agent id in another tenant has its own tier;
- an unbound key is not affected; a key's record keeps its agent, and old records load;
- the tier in force: the permissions slot, else the profile's rbac_tier, else Utility.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.auth.tiers import (
    ACTORS,
    REFERENCE_ACTORS,
    REFERENCE_TARGETS,
    TIER_CACHE_S,
    WRITE_TARGETS,
    TierGate,
    effective_tier,
)
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import PERMISSIONS
from acmi_core.base.model import EntityId
from acmi_core.mcp import reference
from acmi_core.operations import OPERATIONS, Access
from acmi_core.operations.bind import params_model
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS

DB = TEST_DBS["tiers"]  # this module's own database (tests/kit.py TEST_DBS)


class Clock:
    """The gate's clock (seconds), moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class World:
    """The app on one store, its tier gate on a clock the test moves; keys minted on
    demand, bound or not, in either tenant."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self.acmi = create_acmi(store, Settings(auth_cache_s=0))
        self.acme = self.acmi.for_tenant("acme")
        self.clock = Clock()
        self.ctx = ApiContext(self.acmi, tiers=TierGate(clock=self.clock))
        self.client = TestClient(create_app(self.ctx), raise_server_exceptions=False)

    def key(self, agent: str | None, tenant: str = "default", scope: str = "write") -> str:
        key, record = apikeys.mint(
            self.store, tenant=tenant, scope=scope, name="t", now_ms=0, agent=agent
        )
        assert record.agent == agent
        return key

    def call(self, key: str, method: str, path: str, body: Any = None) -> Any:
        kwargs: dict[str, Any] = {"headers": {"authorization": f"Bearer {key}"}}
        if body is not None:
            kwargs["json"] = body
        return self.client.request(method, path, **kwargs)

    def dbsize(self) -> int:
        size = self.store.execute(("DBSIZE",))
        assert isinstance(size, int)
        return size


@pytest.fixture
def world(redis_server: RedisServer) -> Iterator[World]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    yield World(store)
    store.close()


def event(summary: str, source: str = "agent:scout") -> dict[str, Any]:
    return {"source": source, "summary": summary, "kind": "note", "correlationId": "c-1"}


def refused(response: Any, field: str, rule: str) -> dict[str, Any]:
    assert response.status_code == 403, response.text
    body: dict[str, Any] = response.json()
    assert (body["error"], body["field"], body["rule"]) == ("forbidden", field, rule), body
    assert body["message"].startswith(f"{field}: "), body
    return body


def test_a_specialist_writes_its_namespaces_and_is_refused_the_others(world: World) -> None:
    world.acmi.agents.invite("scout", "Specialist")
    key = world.key("agent:scout")
    posted = world.call(key, "POST", "/v1/entities/thread:x/events", event("hello"))
    assert posted.status_code == 201, posted.text
    before = world.dbsize()
    answer = world.call(key, "POST", "/v1/entities/tracker:y/events", event("no"))
    body = refused(answer, "entity", "tier_namespace")
    assert "'tracker'" in body["message"] and "Specialist" in body["message"]
    assert world.dbsize() == before  # nothing stored
    assert world.acmi.get("tracker:y").timeline == []
    profile = world.call(key, "PUT", "/v1/entities/tracker:y/profile", {"name": "y"})
    refused(profile, "entity", "tier_namespace")
    assert world.acmi.profile.get("tracker:y") is None
    # reads are not limited by tier
    assert world.call(key, "GET", "/v1/entities/tracker:y").status_code == 200


def test_a_specialist_runs_the_agent_loop(world: World) -> None:
    world.acmi.agents.invite("scout", "Specialist")
    key = world.key("agent:scout")
    steps = [
        ("POST", "/v1/agents/scout/heartbeat", {"status": "ACTIVE"}, 200),
        ("GET", "/v1/agents/scout/bootstrap", None, 200),
        ("POST", "/v1/agents/agent:scout/spawns", {"session_id": "s-1", "model_id": "m"}, 201),
        ("POST", "/v1/locks/deploy-web/claim", {"owner": "agent:scout", "ttl_ms": 60_000}, 200),
        ("PUT", "/v1/agents/scout/threads/thread:x", {"role": "participant"}, 200),
        ("POST", "/v1/entities/thread:x/events", event("working"), 201),
        ("POST", "/v1/memory/agent:scout/remember", {"text": "a lesson", "layer": "warm"}, 201),
    ]
    for method, path, body, status in steps:
        answer = world.call(key, method, path, body)
        assert answer.status_code in (status, 200, 201), (path, answer.text)
    assert world.acmi.signals.get("agent:scout", "status") == "ACTIVE"
    assert world.acmi.locks.get("deploy-web").to_dict()["owner"] == "agent:scout"


def test_a_utility_key_is_read_only_except_its_own_agent(world: World) -> None:
    world.acmi.agents.invite("helper", "Utility")
    key = world.key("agent:helper")
    own = [
        ("POST", "/v1/agents/helper/heartbeat", {"status": "IDLE"}),
        ("PUT", "/v1/entities/agent:helper/signals/focus", "triage"),
        ("POST", "/v1/entities/agent:helper/events", event("mine", "agent:helper")),
        ("POST", "/v1/memory/agent:helper/remember", {"text": "note to self"}),
    ]
    for method, path, body in own:
        answer = world.call(key, method, path, body)
        assert answer.status_code in (200, 201), (path, answer.text)
    before = world.dbsize()
    others = [
        ("POST", "/v1/entities/thread:x/events", event("no", "agent:helper"), "entity"),
        ("POST", "/v1/agents/scout/heartbeat", {"status": "ACTIVE"}, "agent"),
        ("PUT", "/v1/entities/agent:scout/signals/focus", "x", "entity"),
        ("POST", "/v1/locks/deploy-web/claim", {"owner": "agent:helper", "ttl_ms": 60_000},
         "resource"),
        ("POST", "/v1/work", {"id": "w-1", "profile": {"title": "t"}}, "id"),
    ]  # fmt: skip
    for method, path, body, field in others:
        refused(world.call(key, method, path, body), field, "tier_read_only")
    assert world.dbsize() == before
    assert world.call(key, "GET", "/v1/entities/thread:x").status_code == 200


def test_an_agent_never_invited_holds_the_default_tier(world: World) -> None:
    key = world.key("agent:ghost")
    assert world.call(key, "POST", "/v1/agents/ghost/heartbeat", {}).status_code == 200
    answer = world.call(key, "POST", "/v1/entities/thread:x/events", event("no", "agent:ghost"))
    body = refused(answer, "entity", "tier_read_only")
    assert "'Utility'" in body["message"]


def test_a_tier_change_is_in_force_after_the_cache_time(world: World) -> None:
    world.acmi.agents.invite("scout", "Utility")
    key = world.key("agent:scout")
    path = "/v1/entities/thread:x/events"
    refused(world.call(key, "POST", path, event("1")), "entity", "tier_read_only")
    world.acmi.agents.invite("scout", "Specialist")  # the tier change
    world.clock.now += TIER_CACHE_S - 1
    refused(world.call(key, "POST", path, event("2")), "entity", "tier_read_only")  # cached
    world.clock.now += 2
    assert world.call(key, "POST", path, event("3")).status_code == 201
    world.acmi.agents.invite("scout", "Utility")  # and back
    world.clock.now += TIER_CACHE_S + 1
    refused(world.call(key, "POST", path, event("4")), "entity", "tier_read_only")
    summaries = [e.summary for e in world.acmi.get("thread:x").timeline]
    assert summaries == ["3"]


def test_the_same_agent_in_another_tenant_keeps_its_own_tier(world: World) -> None:
    world.acme.agents.invite("scout", "Admin")
    world.acmi.agents.invite("scout", "Utility")
    acme_key = world.key("agent:scout", tenant="acme")
    default_key = world.key("agent:scout")
    path = "/v1/entities/tracker:y/events"
    assert world.call(acme_key, "POST", path, event("acme")).status_code == 201  # read first
    refused(world.call(default_key, "POST", path, event("default")), "entity", "tier_read_only")
    assert world.acmi.get("tracker:y").timeline == []
    assert [e.summary for e in world.acme.get("tracker:y").timeline] == ["acme"]
    # acme's Admin tier allows every namespace
    work = {"id": "w-1", "profile": {"title": "t"}}
    assert world.call(acme_key, "POST", "/v1/work", work).status_code == 201


def test_an_unbound_key_is_not_affected(world: World) -> None:
    world.acmi.agents.invite("scout", "Utility")
    key = world.key(None)
    for path in ("/v1/entities/tracker:y/events", "/v1/entities/agent:scout/events"):
        assert world.call(key, "POST", path, event("free")).status_code == 201
    work = {"id": "w-2", "profile": {"title": "t"}}
    assert world.call(key, "POST", "/v1/work", work).status_code == 201


def test_the_permissions_slot_wins_then_the_profile_then_the_default(world: World) -> None:
    acmi = world.acmi
    scout = EntityId.parse("agent:scout")
    slot = acmi.keys.slot(scout, PERMISSIONS)
    assert effective_tier(acmi, "agent:scout").source == "default"
    acmi.profile.set(scout, {"rbac_tier": "operator"})  # any case, as the reference writes it
    tier = effective_tier(acmi, "agent:scout")
    assert (tier.name, tier.source, "tracker" in tier.namespaces) == ("Operator", "profile", True)
    custom = {
        "role_tier": "Scribe",
        "allowed_namespaces": ["note"],
        "write_access": True,
        "max_tokens_per_hour": 10,
    }
    acmi.store.execute(("SET", slot, json.dumps(custom)))
    tier = effective_tier(acmi, "agent:scout")
    assert (tier.name, tier.namespaces) == ("Scribe", frozenset({"note"}))
    assert tier.source == "permissions"
    for bad in ("not json", "[]", json.dumps({**custom, "write_access": "yes"})):
        acmi.store.execute(("SET", slot, bad))
        assert effective_tier(acmi, "agent:scout").source == "profile", bad
    # and through the app: the slot's namespaces, nothing else
    acmi.store.execute(("SET", slot, json.dumps(custom)))
    key = world.key("agent:scout")
    assert world.call(key, "POST", "/v1/entities/note:n/events", event("ok")).status_code == 201
    refused(world.call(key, "POST", "/v1/entities/thread:x/events", event("no")), "entity",
            "tier_namespace")  # fmt: skip


def test_a_key_record_keeps_its_agent_and_old_records_load(world: World) -> None:
    store = world.store
    key, record = apikeys.mint(
        store, tenant="acme", scope="write", name="s", now_ms=1, agent="scout"
    )
    assert record.agent == "agent:scout"  # a bare id is the agent's
    assert list(record.to_dict())[-1] == "agent"  # added last
    assert apikeys.lookup(store, key) == record
    assert [r.agent for r in apikeys.list_keys(store, "acme")] == ["agent:scout"]
    _, plain = apikeys.mint(store, tenant="acme", scope="read", name="p", now_ms=2)
    assert plain.agent is None and "agent" not in plain.to_dict()
    for bad in ("user:mikey", "agent:", "agent:a b"):
        with pytest.raises(AcmiValidationError) as caught:
            apikeys.mint(store, tenant="acme", scope="write", name="b", now_ms=0, agent=bad)
        assert caught.value.field == "agent"
    # a record written before bound keys (no agent key) still loads, unbound
    old = "acmi_" + "o" * 40
    digest = apikeys.key_hash(old)
    fields = {"id": digest[:12], "tenant": "acme", "scope": "write", "name": "old", "created_ms": 0}
    store.execute(("SET", f"acmi:_apikey:{digest}", json.dumps(fields)))
    loaded = apikeys.lookup(store, old)
    assert loaded is not None and loaded.agent is None and loaded.to_dict() == fields


def test_every_writing_row_says_what_it_writes() -> None:
    """A write row (or a read row whose params may write) is in WRITE_TARGETS unless it
    is tenant-wide; each entity or agent target is a field of the row's params model."""
    tenant_wide = {
        "keys.create", "keys.revoke", "sources.set", "jobs.run", "quota.report",
        "ops.migrate", "ops.doctor", "agents.invite",
    }  # fmt: skip
    names = {row.name: row for row in OPERATIONS}
    for row in OPERATIONS:
        if row.access in (Access.WRITE, Access.ADMIN) and row.name not in tenant_wide:
            assert row.name in WRITE_TARGETS or row.access is Access.ADMIN, row.name
    for name, targets in WRITE_TARGETS.items():
        assert name in names, name
        model = params_model(names[name])
        for target in targets:
            assert target.field in model.model_fields, (name, target.field)
    tools = {tool.name: tool for tool in reference.REFERENCE}
    for name, targets in REFERENCE_TARGETS.items():
        assert tools[name].writes, name
        arguments = {arg[0] for arg in tools[name].args}
        assert all(t.field in arguments for t in targets), name
    # acmi_delete names a raw Redis key: tenant-wide
    assert {t.name for t in reference.REFERENCE if t.writes} == {*REFERENCE_TARGETS, "acmi_delete"}


def test_the_cache_reads_a_tier_once_per_tenant_and_agent(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: list[int] = []
    acmi: Acmi = world.acmi
    gate = TierGate(clock=world.clock)
    real = effective_tier

    def counting(client: Acmi, agent: str) -> Any:
        counted.append(1)
        return real(client, agent)

    monkeypatch.setattr("acmi_core.auth.tiers.effective_tier", counting)
    for _ in range(3):
        gate.tier(acmi, "agent:scout")
        gate.tier(world.acme, "agent:scout")
    assert len(counted) == 2
    world.clock.now += TIER_CACHE_S + 1
    gate.tier(acmi, "agent:scout")
    assert len(counted) == 3


def test_a_webhook_push_with_a_bound_key_is_tenant_wide(world: World) -> None:
    """A source maps the body to any entity: a bound key pushes only with '*' (Admin)."""
    world.acmi.agents.invite("scout", "Operator")
    world.acme.agents.invite("scout", "Admin")
    path = "/v1/ingest/n8n?entity=deal:a"
    body = {"message": "hi"}
    bound = world.key("agent:scout")
    before = world.dbsize()
    answer = world.call(bound, "POST", path, body)
    refused(answer, "authorization", "tier_namespace")
    assert world.dbsize() == before
    admin = world.call(world.key("agent:scout", tenant="acme"), "POST", path, body)
    assert admin.status_code in (200, 201, 202), admin.text
    unbound = world.call(world.key(None), "POST", path, body)
    assert unbound.status_code in (200, 201, 202), unbound.text
    assert world.acmi.timeline.size("deal:a") == 1
    assert world.acme.timeline.size("deal:a") == 1


def test_a_bound_key_costs_one_round_trip_per_cache_time(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round trips of one write, counted at the store: an unbound key's as before; a
    bound key's first adds the tier read (one pipeline), the next ones within the cache
    time add none."""
    world.acmi.agents.invite("scout", "Specialist")
    sent: list[str] = []
    store = world.store
    for name in ("execute", "pipeline", "eval"):
        real = getattr(store, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            sent.append(_name)
            return _real(*args)

        monkeypatch.setattr(store, name, counted)
    unbound, bound = world.key(None), world.key("agent:scout")

    def trips(key: str) -> int:
        sent.clear()
        answer = world.call(key, "PUT", "/v1/entities/thread:x/signals/focus", "x")
        assert answer.status_code == 200, answer.text
        return len(sent)

    trips(unbound)  # the script's first run may load it: not what is counted
    base = trips(unbound)
    cold, warm = trips(bound), trips(bound)
    assert (trips(unbound), cold, warm) == (base, base + 1, base)
    world.clock.now += TIER_CACHE_S + 1
    assert trips(bound) == base + 1  # read again after the cache time
    print(f"round trips per write: unbound {base}, bound cold {cold}, bound warm {warm}")


def test_a_bound_key_acts_only_as_its_agent(world: World) -> None:
    """Identity (tier_identity): who acts (owner, asked_by, by, agent, an event's source)
    is the key's agent, whatever its tier (acme's Admin too); nothing stored when
    refused; an event's source may name a relay (user:, gmail:), not another agent."""
    world.acmi.agents.invite("scout", "Specialist")
    world.acme.agents.invite("scout", "Admin")
    keys = {"default": world.key("agent:scout"), "acme": world.key("agent:scout", "acme")}
    lock = "/v1/locks/deploy-web/claim"
    hitl = {"topic": "deploy", "request": "ok?", "urgency": "P1"}
    others = [
        ("POST", lock, {"owner": "agent:other", "ttl_ms": 60_000}, "owner"),
        ("POST", lock, {"owner": "user:mikey", "ttl_ms": 60_000}, "owner"),
        ("POST", "/v1/hitl", {**hitl, "asked_by": "agent:other"}, "asked_by"),
        ("POST", "/v1/agents/other/heartbeat", {"status": "ACTIVE"}, "agent"),
        ("POST", "/v1/agents/agent:other/spawns", {"session_id": "s", "model_id": "m"},
         "agent"),
        ("POST", "/v1/agents/other/bootstrap", {"spawn": {"session_id": "s", "model_id": "m"}},
         "agent"),
        ("PUT", "/v1/agents/other/threads/thread:x", {"role": "participant"}, "agent"),
        ("POST", "/v1/entities/thread:x/events", event("as other", "agent:other"),
         "event.source"),
        ("POST", "/v1/entities/thread:x/events",
         [event("mine", "agent:scout"), event("theirs", "other")], "event.source"),
    ]  # fmt: skip
    admin_only = [
        ("POST", "/v1/work", {"id": "w-1", "profile": {"title": "t"}, "owner": "other"}, "owner"),
        ("PUT", "/v1/work/w-2/owner", {"owner": "agent:other"}, "owner"),
        ("POST", "/v1/workflows/deploy/executions", {"step": "build", "agent": "agent:other"},
         "agent"),
        ("POST", "/v1/workflows/deploy/assessments",
         {"step": "build", "score": 90, "criteria": ["ok"], "agent": "agent:other"}, "agent"),
    ]  # fmt: skip
    for tenant, key in keys.items():
        before = world.dbsize()
        for method, path, body, field in others + (admin_only if tenant == "acme" else []):
            answer = refused(world.call(key, method, path, body), field, "tier_identity")
            assert "agent:scout" in answer["message"], answer
        assert world.dbsize() == before, tenant
    # as itself: served; a relay's source too
    acme = keys["acme"]
    own = [
        ("POST", lock, {"owner": "agent:scout", "ttl_ms": 60_000}),
        ("POST", "/v1/hitl", {**hitl, "asked_by": "agent:scout", "correlationId": "h-1"}),
        ("POST", "/v1/hitl/h-1/resolve", {"resolution": "yes", "by": "agent:scout"}),
        ("POST", "/v1/entities/thread:x/events", event("relayed", "user:mikey")),
        ("POST", "/v1/work", {"id": "w-2", "profile": {"title": "t"}, "owner": "scout"}),
        ("PUT", "/v1/work/w-2/owner", {"owner": "agent:scout"}),
        ("POST", "/v1/workflows/deploy/executions", {"step": "build", "agent": "scout"}),
    ]
    for method, path, body in own:
        answer = world.call(acme, method, path, body)
        assert answer.status_code in (200, 201), (path, answer.text)
    refused(
        world.call(acme, "POST", "/v1/hitl/h-1/resolve", {"resolution": "no", "by": "user:mikey"}),
        "by",
        "tier_identity",
    )
    assert world.acme.locks.get("deploy-web").to_dict()["owner"] == "agent:scout"
    # an unbound key acts for anyone
    unbound = world.key(None)
    for method, path, body, _ in others[:4]:
        answer = world.call(unbound, method, path, body)
        assert answer.status_code in (200, 201, 409), (path, answer.text)


def test_every_acting_argument_is_in_the_identity_table() -> None:
    """Each write row's params field naming who acts (owner, agent, asked_by, by) is in
    ACTORS; each entry a field of its row's model (or the reference tool's argument)."""
    acting = {"owner", "agent", "asked_by", "by", "invited_by"}
    names = {row.name: row for row in OPERATIONS}
    # an argument naming whom a row acts on, not who acts: the agent an invite onboards
    acted_on = {"agents.invite": {"agent"}}
    for row in OPERATIONS:
        if row.params is None:
            continue
        model = params_model(row)
        writes = row.access is not Access.READ or row.name in WRITE_TARGETS
        named = (acting & set(model.model_fields)) - acted_on.get(row.name, set())
        if writes and named:
            assert {a.field for a in ACTORS.get(row.name, ())} >= named, row.name
    for name, actors in ACTORS.items():
        model = params_model(names[name])
        for actor in actors:
            assert actor.field.split(".")[0] in model.model_fields, (name, actor.field)
    tools = {tool.name: tool for tool in reference.REFERENCE}
    for name, actors in REFERENCE_ACTORS.items():
        assert tools[name].writes, name
        assert {a.field for a in actors} <= {arg[0] for arg in tools[name].args}, name
    for name, tool in tools.items():
        if tool.writes and {"agentId", "source"} & {arg[0] for arg in tool.args}:
            assert name in REFERENCE_ACTORS, name
    # every memory write names its owner: held to the key's own agent (tier_identity)
    for name in WRITE_TARGETS:
        if name.startswith("memory."):
            assert [(a.field, a.strict) for a in ACTORS[name]] == [("entity", False)], name

"""Wire compatibility with the reference deployment's data (DESIGN §3 table).

Data written with raw Redis commands in the reference layout reads back; what we write
has exactly the reference's key names, Redis types and JSON shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from acmi_core import Acmi, EntityId, Settings, create_acmi


def cmd(acmi: Acmi, *command: Any) -> Any:
    return acmi.store.execute(command)


def redis_type(acmi: Acmi, key: str) -> str:
    reply = cmd(acmi, "TYPE", key)
    assert isinstance(reply, bytes)
    return reply.decode()


def test_reads_reference_layout(acmi: Acmi) -> None:
    ns = f"wire{acmi.store.name}"
    cmd(acmi, "SET", f"acmi:{ns}:client-123:profile", '{"name":"ClientCo","stage":"Proposal"}')
    cmd(acmi, "SET", f"acmi:{ns}:client-123:signals", '{"sentiment":"positive","score":[]}')
    event = {
        "ts": 1745947200000,
        "source": "claude-engineer",
        "kind": "handoff-complete",
        "correlationId": "acmiPublicReadme-1745947200000",
        "summary": "[done] README.md rewritten to v1.2 spec",
        "payload": {"url": "https://example.test/acmi"},
    }
    cmd(acmi, "ZADD", f"acmi:{ns}:client-123:timeline", 1745947200000, json.dumps(event))
    cmd(acmi, "SADD", f"acmi:{ns}:list", "client-123")

    ctx = acmi.get(f"{ns}:client-123")
    assert ctx.profile == {"name": "ClientCo", "stage": "Proposal"}
    assert ctx.signals == {"sentiment": "positive", "score": []}
    assert [e.to_dict() for e in ctx.timeline] == [event]
    assert acmi.list(ns) == [f"{ns}:client-123"]


def test_reads_reference_agent_extensions(acmi: Acmi) -> None:
    agent = f"wire-{acmi.store.name}"
    spawn = {"ts": 1000, "session_id": "s-1", "model_id": "claude-opus", "host": "mac"}
    cmd(acmi, "ZADD", f"acmi:agent:{agent}:spawns", 1000, json.dumps(spawn))
    cmd(
        acmi,
        "ZADD",
        f"acmi:agent:{agent}:spawns",
        2000,
        '{"ts":2000,"session_id":"s-2","model_id":"m"}',
    )
    cmd(
        acmi,
        "HSET",
        f"acmi:agent:{agent}:active_context",
        "thread:x",
        '{"role":"lead","joined_at":5}',
    )
    cmd(acmi, "SET", f"acmi:agent:{agent}:rollup:latest", '{"ts":7,"summary":"all quiet"}')

    assert acmi.agents.spawns(agent) == [
        {"ts": 2000, "session_id": "s-2", "model_id": "m"},
        spawn,
    ]
    assert acmi.agents.active(agent) == {"thread:x": {"role": "lead", "joined_at": 5}}
    assert acmi.agents.rollup(agent) == {"ts": 7, "summary": "all quiet"}


def test_writes_reference_layout(acmi: Acmi) -> None:
    local = f"wire-out-{acmi.store.name}"
    entity = f"user:{local}"
    acmi.profile.set(entity, {"name": "Mikey"})
    acmi.signals.set(entity, "current_task", "x")
    acmi.timeline.append(
        entity,
        {"ts": 5, "source": "user:mikey", "kind": "k", "correlationId": "c", "summary": "s"},
    )
    acmi.agents.spawn(f"agent:{local}", "s1", "m1")
    acmi.agents.join(local, "thread:t", "lead")
    acmi.agents.set_rollup(local, "sum")

    assert redis_type(acmi, f"acmi:user:{local}:profile") == "string"
    assert redis_type(acmi, f"acmi:user:{local}:signals") == "string"
    assert redis_type(acmi, f"acmi:user:{local}:timeline") == "zset"
    assert redis_type(acmi, "acmi:user:list") == "set"
    assert redis_type(acmi, f"acmi:agent:{local}:spawns") == "zset"
    assert redis_type(acmi, f"acmi:agent:{local}:active_context") == "hash"
    assert redis_type(acmi, f"acmi:agent:{local}:rollup:latest") == "string"

    # compact JSON, as JSON.stringify writes it
    assert cmd(acmi, "GET", f"acmi:user:{local}:profile") == (
        b'{"name":"Mikey","actor_type":"human","tenant_id":"madez"}'
    )
    assert cmd(acmi, "GET", f"acmi:user:{local}:signals") == b'{"current_task":"x"}'
    assert cmd(acmi, "ZRANGE", f"acmi:user:{local}:timeline", 0, -1, "WITHSCORES") == [
        b'{"ts":5,"source":"user:mikey","kind":"k","correlationId":"c","summary":"s",'
        b'"speaker_type":"human","tenant_id":"madez"}',
        b"5",
    ]
    assert local.encode() in cmd(acmi, "SMEMBERS", "acmi:user:list")


def test_other_tenants_use_the_v13_prefix(acmi: Acmi) -> None:
    tenant = acmi.for_tenant("acme")
    local = f"wire-tenant-{acmi.store.name}"
    tenant.profile.set(f"deal:{local}", {"v": 1})
    tenant.timeline.append(
        f"deal:{local}", {"source": "s", "kind": "k", "correlationId": "c", "summary": "s"}
    )
    assert redis_type(acmi, f"acmi:tenant:acme:deal:{local}:profile") == "string"
    assert redis_type(acmi, f"acmi:tenant:acme:deal:{local}:timeline") == "zset"
    assert redis_type(acmi, "acmi:tenant:acme:deal:list") == "set"
    assert cmd(acmi, "EXISTS", f"acmi:deal:{local}:profile") == 0
    assert tenant.profile.get(f"deal:{local}") == {"v": 1, "tenant_id": "acme"}
    assert acmi.profile.get(f"deal:{local}") is None


def test_corrupt_members_are_skipped_and_legacy_ones_read_flagged(
    acmi: Acmi, raw: redis.Redis
) -> None:
    entity = f"user:wire-corrupt-{acmi.store.name}"
    key = acmi.keys.timeline(EntityId.parse(entity))
    good = {"ts": 10, "source": "s", "kind": "k", "correlationId": "c", "summary": "ok"}
    snake = '{"ts":13,"source":"s","kind":"k","correlation_id":"c","summary":"x"}'
    no_kind = '{"ts":14,"source":"s","correlationId":"c","summary":"no kind"}'
    raw.zadd(
        key,
        {
            json.dumps(good): 10,
            b"\xff\xfe not utf-8": 11,
            "not json": 12,
            snake: 13,
            no_kind: 14,
            "[1,2]": 15,
            '{"source":"s","summary":"no ts"}': 16,
        },
    )

    events = acmi.timeline.read(entity)
    assert [e.summary for e in events] == ["ok", "x", "no kind"]
    assert events.to_dicts() == [good, json.loads(snake), json.loads(no_kind)]
    assert [e.legacy for e in events] == [
        (),
        ("correlationId: camel_case",),
        ("kind: required",),
    ]
    assert sorted(s.reason for s in events.skipped) == sorted(
        ["not UTF-8", "not JSON", "not a JSON object", "ts: required"]
    )
    ctx = acmi.get(entity)
    assert len(ctx.timeline) == 3
    assert len(ctx.timeline.skipped) == 4
    assert ctx.to_dict()["legacy"] == [
        {"index": 1, "reasons": ["correlationId: camel_case"]},
        {"index": 2, "reasons": ["kind: required"]},
    ]


def test_reference_cli_events_read_back_as_the_reference_shows_them(
    acmi: Acmi, raw: redis.Redis
) -> None:
    """The reference CLI's `event` and `work event` and its MCP server write
    {ts, source, summary[, session_id]}: every reference reader shows them, so do we."""
    ns = f"wirecli{acmi.store.name}"
    written: list[dict[str, Any]] = [
        {"ts": 1745947200000, "source": "gmail", "summary": "Sent the PDF proposal."},
        {"ts": 1745947200001, "source": "agent:bob", "summary": "working", "session_id": "s-1"},
    ]
    raw.zadd(
        f"acmi:{ns}:client-123:timeline",
        {json.dumps(e, separators=(",", ":")): e["ts"] for e in written},
    )
    ctx = acmi.get(f"{ns}:client-123")
    assert ctx.timeline.to_dicts() == written
    assert [e.to_dict() for e in ctx.timeline] == written
    assert all(e.legacy == ("kind: required", "correlationId: required") for e in ctx.timeline)
    assert ctx.timeline.skipped == []


def test_same_event_same_bytes_as_json_stringify(acmi: Acmi) -> None:
    """Floats are written as JavaScript writes them, so the reference's append of the same
    event is the same ZSET member (ZADD NX dedupes exact bytes: one member, not two)."""
    entity = f"user:wire-floats-{acmi.store.name}"
    key = acmi.keys.timeline(EntityId.parse(entity))
    event = {
        "ts": 1745947200000.0,
        "source": "s",
        "kind": "k",
        "correlationId": "c",
        "summary": "s",
        "payload": {"p": 1e-7, "q": 3.0, "r": 1e-5, "s": 1e16, "t": -0.0, "u": 0.25},
        "tenant_id": "default",
    }
    # what JSON.stringify writes for this event (node: JSON.stringify(event))
    reference = (
        '{"ts":1745947200000,"source":"s","kind":"k","correlationId":"c","summary":"s",'
        '"payload":{"p":1e-7,"q":3,"r":0.00001,"s":10000000000000000,"t":0,"u":0.25},'
        '"tenant_id":"default"}'
    )
    cmd(acmi, "ZADD", key, "NX", 1745947200000, reference)
    acmi.timeline.append(entity, event)
    assert cmd(acmi, "ZRANGE", key, 0, -1) == [reference.encode()]


def test_wrong_type_keys_are_reported_in_get_not_raised(acmi: Acmi) -> None:
    entity = f"user:wire-wrongtype-{acmi.store.name}"
    cmd(acmi, "HSET", f"acmi:user:wire-wrongtype-{acmi.store.name}:timeline", "f", "v")
    cmd(acmi, "SET", f"acmi:user:wire-wrongtype-{acmi.store.name}:profile", "[1]")
    ctx = acmi.get(entity)
    assert ctx.profile is None
    assert ctx.timeline == []
    assert len(ctx.problems) == 2


def test_default_tenant_is_configurable(acmi: Acmi) -> None:
    other = create_acmi(acmi.store, Settings(default_tenant="fleet"))
    local = f"wire-default-{acmi.store.name}"
    other.profile.set(f"user:{local}", {})
    # the configured default tenant keeps the reference (unprefixed) layout
    assert json.loads(cmd(acmi, "GET", f"acmi:user:{local}:profile")) == {
        "actor_type": "human",
        "tenant_id": "fleet",
    }


@pytest.mark.parametrize("category", ["tenant"])
def test_reserved_category_is_rejected(acmi: Acmi, category: str) -> None:
    from acmi_core import AcmiValidationError

    with pytest.raises(AcmiValidationError, match="reserved"):
        acmi.profile.set(f"{category}:x", {})

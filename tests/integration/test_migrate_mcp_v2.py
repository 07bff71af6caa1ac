"""The reference MCP server v2.0's rollup (its `acmi_rollup_set` writes
`acmi:<tenant>:agent:<id>:rollup:latest`, mcp/mcp-server.mjs at madezmedia/acmi 886dfc0):
doctor reports it as an MCP-layout key to copy (it called it a bad id), migrate copies it
to the SPEC key the bootstrap reads, and a second run has nothing to do."""

from __future__ import annotations

import json

import redis

from acmi_core import Acmi
from acmi_core.ops.doctor import Doctor
from acmi_core.ops.findings import Kind
from acmi_core.ops.migrate import Action, Migrate
from tests.integration.test_doctor import env  # noqa: F401  (the fixture)

ROLLUP = "acmi:madez:agent:bentley:rollup:latest"  # tenant madez: env's default tenant


def test_the_mcp_rollup_is_copied_not_a_bad_id(env: tuple[Acmi, redis.Redis]) -> None:  # noqa: F811
    acmi, raw = env
    text = json.dumps({"ts": 1_700_000_000_000, "summary": "shipped the CLI"})
    raw.set(ROLLUP, text)
    found = {(f.kind, f.key) for f in Doctor(acmi).findings()}
    assert (Kind.MCP_LAYOUT, ROLLUP) in found
    assert not any(kind is Kind.BAD_ID for kind, _ in found)
    (mcp,) = [f for f in Doctor(acmi).findings() if f.key == ROLLUP]
    assert mcp.destination == "acmi:agent:bentley:rollup:latest" and mcp.state == "to_copy"
    steps = list(Migrate(acmi).run())
    assert [(s.action, s.key) for s in steps if s.action is Action.COPY] == [
        (Action.COPY, "acmi:agent:bentley:rollup:latest")
    ]
    assert raw.get("acmi:agent:bentley:rollup:latest") == text.encode()
    assert acmi.agents.rollup("bentley")["summary"] == "shipped the CLI"  # type: ignore[index]
    again = [s for s in Migrate(acmi).run() if s.action is Action.COPY]
    assert again == []


def test_mcp_spawn_records_go_to_spawns_not_the_timeline(
    env: tuple[Acmi, redis.Redis],  # noqa: F811
) -> None:
    """Its acmi_spawn writes {ts, sessionId?, modelId?} into the agent's timeline; the
    copy puts them in :spawns as our spawn records, its events in the timeline."""
    acmi, raw = env
    source = "acmi:madez:agent:bentley:timeline"
    event = {"ts": 1_700_000_000_000, "source": "agent:bentley", "summary": "hi", "kind": "k"}
    raw.zadd(
        source,
        {
            json.dumps({"ts": 1_700_000_000_001, "sessionId": "s-1", "modelId": "m"}): 1,
            json.dumps({"ts": 1_700_000_000_002}): 2,
            json.dumps(event): 3,
        },
    )
    steps = [s for s in Migrate(acmi).run() if s.action is Action.COPY]
    assert [s.key for s in steps] == ["acmi:agent:bentley:timeline"]
    assert "2 spawn records into acmi:agent:bentley:spawns" in steps[0].detail
    assert [json.loads(m) for m in raw.zrange("acmi:agent:bentley:timeline", 0, -1)] == [event]
    assert [(s["session_id"], s["model_id"]) for s in acmi.agents.spawns("bentley")] == [
        ("unknown", "unknown"),
        ("s-1", "m"),
    ]
    assert [f for f in Doctor(acmi).findings() if f.key == source] == []  # copied
    assert [s for s in Migrate(acmi).run() if s.action is Action.COPY] == []


def test_mcp_active_threads_become_the_agents_threads(
    env: tuple[Acmi, redis.Redis],  # noqa: F811
) -> None:
    """Its acmi_active SADDs "<thread>:<role>:<ts>" to acmi:<t>:agent:<id>:active_threads,
    which nothing read: migrate copies each thread (its latest role and ts) into the
    agent's :active_context, where the bootstrap reads joined threads; a thread joined
    here already is kept as is. Per tenant; a second run copies nothing."""
    acmi, raw = env
    raw.sadd(
        "acmi:madez:agent:bentley:active_threads",
        "agent-coordination:participant:1700000000000",
        "agent-coordination:lead:1700000000500",  # the later call wins
        "launch:participant:1700000000100",
    )
    raw.sadd("acmi:acme:agent:bentley:active_threads", "ops:lead:1700000000200")
    acmi.agents.join("bentley", "launch", "lead")  # joined here: kept
    found = [f for f in Doctor(acmi).findings() if f.kind is Kind.MCP_LAYOUT]
    assert {(f.key, f.destination, f.state) for f in found} == {
        (
            "acmi:madez:agent:bentley:active_threads",
            "acmi:agent:bentley:active_context",
            "to_copy",
        ),
        (
            "acmi:acme:agent:bentley:active_threads",
            "acmi:tenant:acme:agent:bentley:active_context",
            "to_copy",
        ),
    }
    steps = [s for s in Migrate(acmi).run() if s.action is Action.COPY]
    assert sorted(s.key for s in steps) == [
        "acmi:agent:bentley:active_context",
        "acmi:tenant:acme:agent:bentley:active_context",
    ]
    threads = acmi.agents.active("bentley")
    assert threads["agent-coordination"] == {"role": "lead", "joined_at": 1_700_000_000_500}
    assert threads["launch"]["role"] == "lead"  # ours, not the MCP's participant
    assert acmi.for_tenant("acme").agents.active("bentley") == {
        "ops": {"role": "lead", "joined_at": 1_700_000_000_200}
    }
    sections = acmi.bootstrap("bentley").to_dict()["sections"]
    assert {t["thread"] for t in sections["active_threads"]} == {"agent-coordination", "launch"}
    assert [s for s in Migrate(acmi).run() if s.action is Action.COPY] == []
    assert not [f for f in Doctor(acmi).findings() if f.kind is Kind.MCP_LAYOUT]


def test_an_active_threads_member_of_another_shape_is_reported_not_guessed(
    env: tuple[Acmi, redis.Redis],  # noqa: F811
) -> None:
    acmi, raw = env
    raw.sadd("acmi:madez:agent:scout:active_threads", "no role or ts")
    raw.sadd("acmi:madez:user:mikey:active_threads", "x:lead:1")  # not an agent's: not ours
    (finding,) = [f for f in Doctor(acmi).findings() if "active_threads" in f.key]
    assert finding.key == "acmi:madez:agent:scout:active_threads"
    assert finding.state == "uncopyable"
    assert [s for s in Migrate(acmi).run() if s.action is Action.COPY] == []
    assert acmi.agents.active("scout") == {}

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

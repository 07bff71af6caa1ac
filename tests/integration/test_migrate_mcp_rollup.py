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

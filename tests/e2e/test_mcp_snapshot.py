"""The MCP surface is a contract: the tools' names, descriptions and input schemas
(``tools/list``) and what a representative call of each answers (text, structured
content, errors) stay exactly as ``snapshots/mcp_tools.json`` recorded them from the
hand-written server, now that the tools are derived from the operation table."""

from __future__ import annotations

import json

from acmi_core.operations import OPERATIONS
from tests.e2e.mcp_snapshot import CALLS, SNAPSHOT, snapshot


def test_every_tool_has_a_recorded_call() -> None:
    recorded = json.loads(SNAPSHOT.read_text())
    listed = {tool["name"] for tool in recorded["tools"]}
    assert listed == {name for name, _ in CALLS}
    assert listed == {row.mcp for row in OPERATIONS if row.mcp}  # every row's tool


def test_the_server_answers_as_recorded() -> None:
    recorded = json.loads(SNAPSHOT.read_text())
    now = snapshot()
    assert now["tools"] == recorded["tools"]
    # call by call, so a failure names the tool and the arguments
    for was, new in zip(recorded["calls"], now["calls"], strict=True):
        assert new == was, was["tool"]
    for was, new in zip(recorded["read_only_calls"], now["read_only_calls"], strict=True):
        assert new == was, was["tool"]

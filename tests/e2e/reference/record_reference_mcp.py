"""Records the reference MCP server's tool list and answers into
``tests/e2e/snapshots/reference_mcp.json``, the golden file ``test_mcp_reference.py``
holds our ``ACMI_MCP_TOOLS=reference`` set to. Run by hand when the reference changes:

    git --git-dir=<mirror of madezmedia/acmi> show <commit>:mcp/mcp-server.mjs > DIR/mcp-server.mjs
    (and mcp-server-helpers.mjs; `npm install @modelcontextprotocol/sdk@1.29.0 zod@3` in DIR)
    python tests/e2e/reference/record_reference_mcp.py DIR <commit>

The reference server runs under node, on the Upstash REST double in front of a throwaway
redis-server, driven by the official MCP SDK client with the calls of ``SCENARIO``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from acmi_core.testing.redis_server import redis_server
from acmi_core.testing.upstash_double import UpstashDouble

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.e2e.reference.scenario import SCENARIO, report, resolved

GOLDEN = Path(__file__).resolve().parents[1] / "snapshots" / "reference_mcp.json"


async def record(directory: Path, url: str, token: str) -> dict[str, Any]:
    params = StdioServerParameters(
        command="node",
        args=[str(directory / "mcp-server.mjs")],
        env={"UPSTASH_REDIS_REST_URL": url, "UPSTASH_REDIS_REST_TOKEN": token, "PATH": "/usr/bin"},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        tools = [t.model_dump(mode="json", exclude_none=True) for t in listed.tools]
        calls = []
        reported: dict[str, str] = {}
        for name, given in SCENARIO:
            arguments = resolved(given, reported)
            result = await session.call_tool(name, arguments)
            text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
            report(name, arguments, json.loads(text), reported)
            calls.append(
                {
                    "tool": name,
                    "arguments": arguments,
                    "result": result.model_dump(mode="json", exclude_none=True),
                }
            )
    return {
        "server": init.serverInfo.model_dump(mode="json", exclude_none=True),
        "tools": tools,
        "calls": calls,
    }


def main() -> None:
    directory, commit = Path(sys.argv[1]), sys.argv[2]
    with redis_server() as server, UpstashDouble(server.url) as double:
        recorded = asyncio.run(record(directory, double.url, double.token))
    golden = {
        "_comment": (
            "Recorded from madezmedia/acmi mcp/mcp-server.mjs at commit "
            f"{commit} (@modelcontextprotocol/sdk 1.29.0, zod 3) by "
            "tests/e2e/reference/record_reference_mcp.py; do not edit by hand."
        ),
        **recorded,
    }
    GOLDEN.write_text(json.dumps(golden, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

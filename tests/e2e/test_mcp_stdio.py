"""``acmi mcp`` through the official MCP SDK's own client, over stdio, on a real redis."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

from acmi_core import Settings
from acmi_core.auth import apikeys
from acmi_core.store import open_store
from acmi_core.testing.redis_server import RedisServer

MCP_DB = 12  # a database of its own on the session's redis-server

EXPECTED_TOOLS = {
    *("profile_get", "profile_merge", "signal_get", "signal_set", "event", "get", "list"),
    *("cat", "bootstrap", "spawn", "active", "rollup_set", "work_create", "work_event"),
    *("work_signal", "work_get", "work_list", "delete", "tenant_list", "lock_claim"),
    *("lock_renew", "lock_release", "heartbeat", "hitl_create", "hitl_list", "hitl_resolve"),
    *("assess", "improve", "memory_remember", "memory_search", "memory_status"),
}

Session = Callable[[ClientSession], Awaitable[None]]


@pytest.fixture
def redis_url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = redis_server.url_for(MCP_DB)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    store = open_store(Settings.from_env())
    store.execute(("FLUSHDB",))
    store.close()
    yield url


def run(url: str, body: Session, api_key: str | None = None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACMI_", "UPSTASH_"))}
    env["ACMI_REDIS_URL"] = url
    if api_key is not None:
        env["ACMI_API_KEY"] = api_key
    params = StdioServerParameters(command=sys.executable, args=["-m", "acmi_core", "mcp"], env=env)

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(session)

    asyncio.run(main())


def payload(result: CallToolResult) -> Any:
    assert not result.isError, result.content
    block = result.content[0]
    assert isinstance(block, TextContent)
    return json.loads(block.text)


def error_text(result: CallToolResult) -> str:
    assert result.isError
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def test_tools_profile_cat_bootstrap_and_errors(redis_url: str) -> None:
    async def body(s: ClientSession) -> None:
        names = {t.name for t in (await s.list_tools()).tools}
        assert names >= EXPECTED_TOOLS, EXPECTED_TOOLS - names

        merged = payload(
            await s.call_tool("profile_merge", {"entity": "user:ana", "partial": {"name": "Ana"}})
        )
        assert merged["name"] == "Ana"
        got = payload(await s.call_tool("profile_get", {"entity": "user:ana"}))
        assert got["profile"]["name"] == "Ana"

        for entity, summary in (("user:ana", "first"), ("user:bob", "second")):
            ev = {"source": "test", "summary": summary, "kind": "note", "correlationId": "c1"}
            payload(await s.call_tool("event", {"entity": entity, "event": ev}))
        cat = payload(
            await s.call_tool("cat", {"entities": ["user:ana", "user:bob"], "since": "24h"})
        )
        assert [e["summary"] for e in cat["events"]] == ["second", "first"]  # newest first

        bad = await s.call_tool("cat", {"entities": ["user:ana"], "since": "2026-01-01"})
        assert "since" in error_text(bad) and "rule: duration" in error_text(bad)

        markdown = (await s.call_tool("bootstrap", {"agent": "claude"})).content[0]
        assert isinstance(markdown, TextContent) and markdown.text.startswith("#")
        prompt = await s.get_prompt("bootstrap", {"agent": "claude"})
        prompt_block = prompt.messages[0].content
        assert isinstance(prompt_block, TextContent) and prompt_block.text.startswith("#")
        resource = await s.read_resource("acmi://agents/claude/bootstrap")  # type: ignore[arg-type]
        assert resource.contents[0].mimeType == "text/markdown"

        dry = payload(await s.call_tool("delete", {"entity": "user:ana"}))
        assert dry["dry_run"] is True and dry["deleted"] is False
        still = payload(await s.call_tool("profile_get", {"entity": "user:ana"}))
        assert still["profile"]["name"] == "Ana"
        tenants = payload(await s.call_tool("tenant_list", {}))
        assert tenants == {"tenants": ["default"]}

    run(redis_url, body)


def test_read_scope_key_reads_its_tenant_and_cannot_write(redis_url: str) -> None:
    store = open_store(Settings.from_env())
    key, _ = apikeys.mint(store, tenant="acme", scope="read", name="mcp-test", now_ms=1)
    store.close()

    async def body(s: ClientSession) -> None:
        tenants = payload(await s.call_tool("tenant_list", {}))
        assert tenants == {"tenants": ["acme"]}
        got = payload(await s.call_tool("profile_get", {"entity": "user:ana"}))
        assert got == {"entity": "user:ana", "profile": None}
        refused = await s.call_tool("profile_merge", {"entity": "user:ana", "partial": {"a": 1}})
        assert "scope" in error_text(refused) and "read-only" in error_text(refused)

    run(redis_url, body, api_key=key)


def test_agent_work_lock_hitl_and_memory_tools(redis_url: str) -> None:
    async def body(s: ClientSession) -> None:
        async def call(name: str, args: dict[str, Any]) -> Any:
            return payload(await s.call_tool(name, args))

        await call("spawn", {"agent": "claude", "session_id": "s1", "model_id": "m1"})
        await call("active", {"agent": "claude", "action": "add", "thread": "t1"})
        assert "t1" in await call("active", {"agent": "claude"})
        await call("rollup_set", {"agent": "claude", "summary": "all good"})
        assert (await call("heartbeat", {"agent": "claude"}))["status"] == "ACTIVE"

        await call("work_create", {"id": "w1", "profile": {"title": "Ship"}, "owner": "claude"})
        ev = {"source": "test", "summary": "started", "kind": "note", "correlationId": "c2"}
        await call("work_event", {"id": "w1", "event": ev})
        await call("work_signal", {"id": "w1", "signals": {"progress": 50}})
        item = await call("work_get", {"id": "w1"})
        assert item["timeline"][-1]["summary"] == "started"
        assert item["signals"]["progress"] == 50
        assert await call("work_list", {"owner": "claude"})

        lease = await call(
            "lock_claim", {"resource": "r1", "owner": "agent:claude", "ttl_ms": 60_000}
        )
        token = lease["owner_token"]
        await call("lock_renew", {"resource": "r1", "owner_token": token, "ttl_ms": 60_000})
        await call("lock_release", {"resource": "r1", "owner_token": token})

        created = await call(
            "hitl_create", {"topic": "ok?", "request": "ship?", "asked_by": "agent:claude"}
        )
        cid = created["item"]["correlationId"]
        assert (await call("hitl_list", {}))["items"][0]["correlationId"] == cid
        await call("hitl_resolve", {"correlation_id": cid, "resolution": "yes", "by": "user:ana"})

        await call("memory_remember", {"entity": "agent:claude", "text": "prefer small diffs"})
        found = await call("memory_search", {"entity": "agent:claude", "query": "small diffs"})
        assert "small diffs" in json.dumps(found)
        assert await call("memory_status", {"entity": "agent:claude"})

        gone = await call("delete", {"entity": "work:w1", "dry_run": False})
        assert gone["deleted"] is True

    run(redis_url, body)


def test_unknown_key_is_refused_before_serving(redis_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACMI_", "UPSTASH_"))}
    env |= {"ACMI_REDIS_URL": redis_url, "ACMI_API_KEY": "acmi_" + "x" * 40}
    done = subprocess.run(
        [sys.executable, "-m", "acmi_core", "mcp"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "ACMI_API_KEY: is unknown or revoked" in done.stderr

"""Today's MCP surface as data: ``tools/list`` (name, description, inputSchema) and the
answer of a representative call of every tool (plus the refusals every tool shares),
over the SDK's in-memory client session on the embedded store with a pinned clock.
``tests/e2e/test_mcp_snapshot.py`` holds the server to ``snapshots/mcp_tools.json``;
``python -m tests.e2e.mcp_snapshot`` rewrites it (only when a change of the surface is
meant: the file is the contract)."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from pathlib import Path
from typing import Any

from mcp.shared.memory import create_connected_server_and_client_session

from acmi_core import create_acmi
from acmi_core.auth.apikeys import Scope
from acmi_core.base.settings import Settings
from acmi_core.mcp.server import build_server
from acmi_core.store.memory import MemoryStore

SNAPSHOT = Path(__file__).parent / "snapshots" / "mcp_tools.json"
START_MS = 1_780_000_000_000  # 2026-05-28: a fixed "now" so stamps repeat

# Ids the core draws at random (lease tokens and correlation ids, HITL ids, audit
# events' correlation ids): masked.
_RANDOM_ID = re.compile(r"(lock|hitl|forget|unlog)-[0-9a-f]{32}")
_RANDOM_TOKEN = re.compile(r'("owner_token": ")[\w-]{43}"')


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return _RANDOM_TOKEN.sub(r'\1<random>"', _RANDOM_ID.sub(r"\1-<random>", value))
    if isinstance(value, dict):
        return {k: "<random>" if k == "owner_token" else _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _event(summary: str) -> dict[str, Any]:
    return {"source": "cli", "summary": summary, "kind": "note", "correlationId": f"c-{summary}"}


# (tool, arguments) in order: each tool at least once, a store state that makes the
# answers say something (a profile before it is read, a lease before it is renewed).
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("tenant_list", {}),
    ("profile", {"entity": "user:ann", "profile": {"name": "Ann", "n": 1.50}}),
    ("profile", {"entity": "user:ann", "profile": {"city": "Oslo"}, "merge": True}),
    ("profile_get", {"entity": "user:ann"}),
    ("profile_get", {"entity": "user:none"}),
    ("profile_merge", {"entity": "user:ann", "partial": {"age": 30}}),
    ("signal", {"entity": "user:ann", "signals": {"mood": "ok"}}),
    ("signal", {"entity": "user:ann", "signals": {"load": 2}, "merge": True}),
    ("signal_get", {"entity": "user:ann"}),
    ("signal_get", {"entity": "user:ann", "key": "mood"}),
    ("signal_set", {"entity": "user:ann", "key": "mood", "value": [1, {"a": None}]}),
    ("signal_set", {"entity": "user:ann", "key": "tmp", "value": 1, "ttl": "1h"}),
    ("signal_set", {"entity": "user:ann", "key": "tmp", "value": 1, "ttl": "soon"}),
    ("event", {"entity": "user:ann", "event": _event("one")}),
    ("event", {"entity": "user:ann", "event": {**_event("two"), "ts": START_MS - 5}}),
    ("get", {"entity": "user:ann"}),
    ("get", {"entity": "user:ann", "events": 1}),
    ("get", {"entity": "user:ann", "events": 1001}),
    ("event", {"entity": "user:ann", "event": {**_event("gone"), "ts": START_MS - 9}}),
    ("event_delete", {"entity": "user:ann", "ts": START_MS - 9, "id": "c-gone"}),
    ("event_delete", {"entity": "user:ann", "ts": START_MS - 9, "id": "c-gone"}),
    ("event_delete", {"entity": "user:ann", "id": "c-one"}),
    ("list", {"category": "user"}),
    ("list", {"category": "user", "limit": 1}),
    ("cat", {"entities": ["user:ann", "user:bob"], "since": "7d"}),
    ("cat", {"entities": ["bad"]}),
    ("spawn", {"agent": "ava", "session_id": "s-1", "model_id": "m-1", "host": "h"}),
    ("bootstrap", {"agent": "ava"}),
    ("bootstrap", {"agent": "ava", "format": "json", "events": 2, "include": "topics"}),
    ("active", {"agent": "ava"}),
    ("active", {"agent": "ava", "action": "add", "thread": "slack:c1", "role": "lead"}),
    ("active", {"agent": "ava", "action": "remove", "thread": "slack:c1"}),
    ("active", {"agent": "ava", "action": "add"}),
    ("active", {"agent": "ava", "action": "jump"}),
    ("rollup_set", {"agent": "ava", "summary": "all quiet"}),
    ("rollup_get", {"agent": "ava"}),
    ("rollup_get", {"agent": "bob"}),
    ("heartbeat", {"agent": "ava"}),
    ("heartbeat", {"agent": "ava", "status": "BUSY", "note": "n"}),
    ("work_create", {"id": "w1", "title": "One", "owner": "agent:ava"}),
    ("work_create", {"id": "w2", "profile": {"p": 1}, "status": "blocked"}),
    ("work_create", {"id": "w1"}),
    ("work_event", {"id": "w1", "event": _event("w"), "session_id": "s-1"}),
    ("work_signal", {"id": "w1", "signals": {"status": "done"}}),
    ("work_get", {"id": "w1"}),
    ("work_get", {"id": "w1", "events": 0}),
    ("work_list", {}),
    ("work_list", {"status": None, "limit": 1}),
    ("work_list", {"owner": "agent:ava", "status": "done"}),
    ("work_sessions", {"id": "w1"}),
    ("lock_claim", {"resource": "deploy", "owner": "agent:ava", "ttl_ms": 60000}),
    ("lock_claim", {"resource": "deploy", "owner": "agent:bob", "ttl_ms": 60000}),
    ("lock_get", {"resource": "deploy"}),
    ("lock_renew", {"resource": "deploy", "owner_token": "TOKEN", "ttl_ms": 1000}),
    ("lock_release", {"resource": "deploy", "owner_token": "nope"}),
    ("lock_release", {"resource": "deploy", "owner_token": "TOKEN"}),
    ("hitl_create", {"topic": "t", "request": "r?", "asked_by": "agent:ava"}),
    (
        "hitl_create",
        {
            "topic": "t",
            "request": "r2",
            "asked_by": "agent:ava",
            "urgency": "P0",
            "addressee": "user:ann",
        },
    ),
    ("hitl_list", {}),
    ("hitl_list", {"addressee": "user:ann", "state": "closed", "limit": 5}),
    ("hitl_resolve", {"correlation_id": "HITL", "resolution": "yes", "by": "user:ann"}),
    ("hitl_resolve", {"correlation_id": "hitl-nope", "resolution": "yes", "by": "user:ann"}),
    (
        "assess",
        {
            "workflow": "wf",
            "step": "s1",
            "score": 80,
            "criteria": ["a", "b"],
            "agent": "agent:ava",
            "note": "fine",
        },
    ),
    (
        "assess",
        {
            "workflow": "wf",
            "step": "s1",
            "score": 80,
            "criteria": {"a": True},
            "agent": "agent:ava",
        },
    ),
    (
        "assess",
        {"workflow": "wf", "step": "s1", "score": 101, "criteria": [], "agent": "agent:ava"},
    ),
    ("improve", {"workflow": "wf", "step": "s1", "lesson": "go slow", "agent": "agent:ava"}),
    ("memory_remember", {"entity": "agent:ava", "text": "likes tea"}),
    ("memory_remember", {"entity": "agent:ava", "text": "likes tea"}),  # held: nothing stored
    (
        "memory_remember",
        {"entity": "agent:ava", "text": "hot one", "layer": "hot", "section": "Now"},
    ),
    ("memory_remember", {"entity": "agent:ava", "text": "x", "layer": "cold"}),
    ("memory_topic_create", {"entity": "agent:ava", "slug": "tea", "name": "Tea"}),
    ("memory_remember", {"entity": "agent:ava", "text": "green", "layer": "topic", "topic": "tea"}),
    ("memory_search", {"entity": "agent:ava", "query": "tea"}),
    ("memory_search", {"entity": "agent:ava", "query": "tea", "limit": 1}),
    ("memory_get", {"entity": "agent:ava", "path": "MEMORY.md", "from_line": 1, "to_line": 3}),
    ("memory_get", {"entity": "agent:ava", "path": "memory/topics/tea.md"}),
    ("memory_get", {"entity": "agent:ava", "path": "MEMORY.md", "from_line": 5, "to_line": 4}),
    ("memory_get", {"entity": "agent:ava", "path": "notes.txt"}),
    ("memory_remember", {"entity": "agent:ava", "text": "forget me"}),
    ("memory_forget", {"entity": "agent:ava", "path": "MEMORY.md", "text": "forget me"}),
    ("memory_forget", {"entity": "agent:ava", "path": "MEMORY.md", "line": 1}),
    ("memory_forget", {"entity": "agent:ava", "path": "MEMORY.md"}),
    ("memory_status", {"entity": "agent:ava"}),
    ("memory_active", {"entity": "agent:ava"}),
    ("memory_active", {"entity": "agent:ava", "text": "# Active\n\n- [ ] task\n"}),
    ("memory_review", {"entity": "agent:ava"}),
    ("memory_prune", {"entity": "agent:ava"}),
    ("memory_prune", {"entity": "agent:ava", "days": 400}),
    ("memory_daily_summary", {"entity": "agent:ava"}),
    ("memory_daily_summary", {"entity": "agent:ava", "date": "2026-05-27"}),
    ("memory_debug", {"entity": "agent:ava"}),
    ("memory_export", {"entity": "agent:ava"}),
    ("memory_import", {"entity": "agent:cid", "files": {"MEMORY.md": "# Memory\n\n- one\n"}}),
    (
        "memory_import",
        {"entity": "agent:cid", "files": {"MEMORY.md": "# Memory\n\n- one\n"}, "strict": True},
    ),
    ("memory_handoff", {"entity": "agent:ava", "text": "pick up w1"}),
    ("memory_handoff", {"entity": "agent:ava"}),
    ("memory_handoff", {"entity": "agent:ava"}),
    ("delete", {"entity": "user:ann"}),
    ("delete", {"entity": "user:*"}),
    ("delete", {"entity": "user:ann", "dry_run": False}),
    ("profile_get", {"entity": "user:ann"}),
    # refusals every tool shares: a bad argument type, a missing one, an extra one
    ("get", {"entity": "user:ann", "events": "many"}),
    ("profile", {"entity": "user:ann"}),
    ("get", {"entity": "user:ann", "tenant": "other"}),
    ("get", {"entity": "user:ann", "colour": "red"}),
    ("profile", {"entity": "nocolon", "profile": {}}),
]
# Called with a read-only key: every write tool, and a read tool's write half.
READ_ONLY_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("profile", {"entity": "user:x", "profile": {}}),
    ("bootstrap", {"agent": "ava", "spawn": {"session_id": "s", "model_id": "m"}}),
    ("memory_active", {"entity": "agent:ava", "text": "x"}),
    ("memory_active", {"entity": "agent:ava"}),
    ("tenant_list", {}),
]


def _result(result: Any) -> dict[str, Any]:
    return result.model_dump(mode="json", exclude_none=True, by_alias=True)  # type: ignore[no-any-return]


async def _run(
    server: Any, calls: list[tuple[str, dict[str, Any]]], seen: dict[str, str]
) -> list[Any]:
    out = []
    async with create_connected_server_and_client_session(server) as client:
        for name, arguments in calls:
            args = json.loads(
                json.dumps(arguments)
                .replace('"TOKEN"', json.dumps(seen.get("token", "")))
                .replace('"HITL"', json.dumps(seen.get("hitl", "")))
            )
            answer = _result(await client.call_tool(name, args))
            text = answer["content"][0]["text"] if answer.get("content") else ""
            if name == "lock_claim" and not answer.get("isError"):
                seen["token"] = json.loads(text)["owner_token"]
            if name == "hitl_create" and "hitl" not in seen:
                seen["hitl"] = json.loads(text)["item"]["correlationId"]
            out.append({"tool": name, "arguments": arguments, "result": answer})
    return out


async def _snapshot() -> dict[str, Any]:
    ticks = itertools.count(START_MS, 1000)
    acmi = create_acmi(MemoryStore(), Settings(), clock=lambda: next(ticks))
    server = build_server(acmi, Scope.ADMIN)
    async with create_connected_server_and_client_session(server) as client:
        listed = await client.list_tools()
    tools = [t.model_dump(mode="json", exclude_none=True, by_alias=True) for t in listed.tools]
    seen: dict[str, str] = {}
    calls = await _run(server, CALLS, seen)
    reader = build_server(acmi, Scope.READ)
    read_only = await _run(reader, READ_ONLY_CALLS, seen)
    return _masked({"tools": tools, "calls": calls, "read_only_calls": read_only})  # type: ignore[no-any-return]


def snapshot() -> dict[str, Any]:
    """Today's surface of a fresh server (see the module docstring)."""
    return asyncio.run(_snapshot())


if __name__ == "__main__":
    import logging
    from unittest.mock import patch

    from acmi_core.memory import embeddings

    logging.disable(logging.INFO)
    # as the tests answer (tests/conftest.py): ACMI_EMBEDDINGS unset resolves to wordllama
    with patch.object(embeddings, "DEFAULT_PROVIDERS", ("wordllama",)):
        SNAPSHOT.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")

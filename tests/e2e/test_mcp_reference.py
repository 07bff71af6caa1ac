"""``ACMI_MCP_TOOLS=reference`` (and ``all``) through the official MCP SDK's client, on a
real redis-server, held to the golden file recorded from the reference server itself
(``snapshots/reference_mcp.json``: madezmedia/acmi ``mcp/mcp-server.mjs`` at the commit
its ``_comment`` names, run under node by ``reference/record_reference_mcp.py``).

- tools/list: the reference's 17 entries exactly (name, description, input schema);
- every tool called with the scenario's realistic arguments (``reference/scenario.py``),
  each answer held to the reference's answer to the same call: the same JSON text form
  (compact, one text block), the same keys in the same order at the tool's own level,
  the same values where neither clock nor layout decides them; stored objects (profiles,
  events) keep every key the reference's had; the differences the README lists are named
  in ``KEPT_DIFFERENCES`` and checked as they are;
- our guarantees underneath: the tenant is the key's (a ``tenant`` argument changes
  nothing), ``acmi_delete`` is confined, a read-only key writes nothing;
- ``all`` serves both sets, no name twice; stdio ends quietly and reports our version."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.types import CallToolResult, TextContent

from acmi_core import Acmi, __version__
from acmi_core.auth import apikeys
from acmi_core.base.model import EntityId
from acmi_core.mcp.reference import REFERENCE, REFERENCE_COMMIT
from tests.e2e.reference.scenario import SCENARIO, report, resolved
from tests.e2e.test_mcp_stdio import EXPECTED_TOOLS, McpClient, server_env
from tests.e2e.test_mcp_stdio import acmi as acmi  # noqa: PLC0414  (fixtures, by name)
from tests.e2e.test_mcp_stdio import redis_url as redis_url  # noqa: PLC0414

GOLDEN: dict[str, Any] = json.loads(
    (Path(__file__).parent / "snapshots" / "reference_mcp.json").read_text(encoding="utf-8")
)
NAMES = [tool["name"] for tool in GOLDEN["tools"]]

# Values the clock, the tenant or the key layout decide: compared by kind, not value.
VARYING = {"ts", "created_at", "joined_at", "correlationId", "tenant", "default_tenant", "key"}
# Objects whose keys are stored data: ours may add keys (auto-filled actor_type,
# speaker_type, tenant_id; a work item's status signal; a rollup's ts), never drop one.
STORED = {"profile", "signals", "event", "rollup_latest", "active_context"}
# (tool, key): what differs from the reference on purpose (the README lists each).
KEPT_DIFFERENCES = {
    # the reference logged spawns into the timeline; ours keeps them apart (:spawns)
    ("acmi_bootstrap", "timeline_recent"),
    # ... and read active_context as a string it never wrote; ours answers the threads
    ("acmi_bootstrap", "active_context"),
    # the reference's error text; ours names the field and the rule
    ("acmi_profile", "error"),
    ("acmi_delete", "error"),
}


def mcp_client(url: str, tools: str, api_key: str | None = None) -> McpClient:
    client = McpClient(url, api_key)
    assert client.params.env is not None
    client.params.env["ACMI_MCP_TOOLS"] = tools
    return client


@pytest.fixture(scope="module")
def ref(redis_url: str) -> Iterator[McpClient]:
    with mcp_client(redis_url, "reference") as client:
        yield client


def answer(result: CallToolResult) -> tuple[str, Any]:
    assert len(result.content) == 1 and result.structuredContent is None
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text, json.loads(block.text)


def kind(value: Any) -> str:
    return (
        "number"
        if isinstance(value, int | float) and not isinstance(value, bool)
        else (type(value).__name__)
    )


def same_shape(tool: str, ours: Any, theirs: Any, path: str = "") -> None:
    """``ours`` answers as ``theirs`` did (module docstring); ``path`` names the place."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), (tool, path, ours)
        stored = path.rpartition(".")[2] in STORED or path.endswith("]")
        if stored:
            assert set(theirs) <= set(ours), (tool, path, set(theirs) - set(ours))
        else:
            assert list(ours) == list(theirs), (tool, path, list(ours), list(theirs))
        for name, value in theirs.items():
            if (tool, name) in KEPT_DIFFERENCES and not path:
                continue
            same_shape(tool, ours[name], value, f"{path}.{name}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), (tool, path, ours, theirs)
        for n, (mine, other) in enumerate(zip(ours, theirs, strict=True)):
            same_shape(tool, mine, other, f"{path}[{n}]")
    elif path.rpartition(".")[2] in VARYING or path.endswith(".allowed_tenants[0]"):
        assert kind(ours) == kind(theirs), (tool, path, ours, theirs)
    else:
        assert ours == theirs, (tool, path, ours, theirs)


# --- the listing ----------------------------------------------------------------------


def test_the_golden_file_names_the_reference_commit() -> None:
    assert REFERENCE_COMMIT in GOLDEN["_comment"] and len(NAMES) == 17


def test_list_tools_is_the_reference_listing_exactly(ref: McpClient) -> None:
    listed = ref.run(lambda s: s.list_tools()).tools
    assert [t.name for t in listed] == NAMES == [t.name for t in REFERENCE]
    for tool, golden in zip(listed, GOLDEN["tools"], strict=True):
        entry = tool.model_dump(mode="json", exclude_none=True)
        assert entry == golden
        # byte for byte as the reference's SDK serialises it (key order included)
        assert json.dumps(entry["inputSchema"]) == json.dumps(golden["inputSchema"])


def test_all_serves_both_sets_without_a_clash(redis_url: str) -> None:
    with mcp_client(redis_url, "all") as client:
        names = [t.name for t in client.run(lambda s: s.list_tools()).tools]
        assert len(names) == len(set(names)) == len(EXPECTED_TOOLS) + 17
        assert set(names) == EXPECTED_TOOLS | set(NAMES)
        # one of each set answers on the same server
        assert client.ok("tenant_list")["tenants"] == ["default"]
        tenants = json.loads(client.text("acmi_tenant_list"))
        assert tenants == {"allowed_tenants": ["default"], "default_tenant": "default"}


# --- the scenario, call by call against the reference's answers -----------------------


def test_every_tool_answers_in_the_reference_shape(ref: McpClient, acmi: Acmi) -> None:
    reported: dict[str, str] = {}
    called, byte_for_byte = set(), set()
    for (name, given), golden in zip(SCENARIO, GOLDEN["calls"], strict=True):
        arguments = resolved(given, reported)
        assert golden["tool"] == name
        result = ref.call(name, arguments)
        text, ours = answer(result)
        theirs = json.loads(golden["result"]["content"][0]["text"])
        # JSON.stringify's form: compact, nothing escaped that it leaves as it is
        assert text == json.dumps(ours, separators=(",", ":"), ensure_ascii=False)
        # a refusal is flagged as one (the reference answered it as a success)
        assert result.isError is (theirs.get("ok") is False), (name, text)
        same_shape(name, ours, theirs)
        if not (STORED | LISTS) & set(theirs) and theirs.get("ok") is not False:
            # nothing stored (auto-filled) in it, no refusal: the reference's bytes
            golden_text = golden["result"]["content"][0]["text"]
            assert normalized(text, "default") == normalized(golden_text, "madez"), name
            byte_for_byte.add(name)
        report(name, arguments, ours, reported)
        called.add(name)
    assert called == set(NAMES)
    assert byte_for_byte == BYTE_FOR_BYTE


# The tools whose answers (in the scenario) hold no stored data and are the reference's
# bytes, but for the clock, the tenant's name and the key layout.
BYTE_FOR_BYTE = {
    *("acmi_profile", "acmi_signal", "acmi_list", "acmi_spawn", "acmi_active"),
    *("acmi_rollup_set", "acmi_work_create", "acmi_work_signal", "acmi_work_list"),
    *("acmi_tenant_list", "acmi_delete"),
}
LISTS = {"timeline_recent", "timeline", "events"}


def normalized(text: str, tenant: str) -> str:
    """``text`` with what the clock, the tenant and the key layout decide blanked."""
    text = re.sub(r'"(ts|created_at|joined_at)":\d+', r'"\1":0', text)
    text = re.sub(r'"key":"[^"]*"', '"key":"<key>"', text)
    return text.replace(f'"{tenant}"', '"<tenant>"')


def test_the_kept_differences_are_what_the_readme_says(ref: McpClient, acmi: Acmi) -> None:
    ref.ok("acmi_spawn", {"agentId": "kd", "sessionId": "s-1", "modelId": "m-1"})
    ref.ok("acmi_active", {"agentId": "kd", "threadKey": "coord"})
    boot = ref.ok("acmi_bootstrap", {"agentId": "kd"})
    assert boot["timeline_recent"] == []  # spawns are not timeline events here
    assert boot["recent_spawns"][0]["sessionId"] == "s-1"
    assert acmi.agents.spawns("agent:kd")[0]["session_id"] == "s-1"
    assert boot["active_context"]["coord"]["role"] == "participant"
    # an event without kind or correlationId gets the documented kind and an id
    event = ref.ok(
        "acmi_event", {"namespace": "user", "id": "kd", "source": "agent:x", "summary": "hi"}
    )["event"]
    assert event["kind"] == "event" and event["correlationId"].startswith("mcp-")
    # since is a window back from now: an hour-old event is outside 30m
    old = {"source": "agent:x", "kind": "note", "correlationId": "c", "summary": "old"}
    acmi.timeline.append("user:kd", old | {"ts": acmi.clock() - 3_600_000})
    cat = ref.ok("acmi_cat", {"keys": ["user:kd"], "since": "30m"})
    assert [e["summary"] for e in cat["events"]] == ["hi"] and cat["total"] == 1
    assert ref.ok("acmi_cat", {"keys": ["user:kd"]})["total"] == 2
    # work signals merge (the reference replaced them, losing the item's status)
    ref.ok("acmi_work_create", {"id": "kd-1", "title": "t"})
    ref.ok("acmi_work_signal", {"id": "kd-1", "signals": '{"priority": "low"}'})
    signals = ref.ok("acmi_work_get", {"id": "kd-1"})["signals"]
    assert signals == {"status": "open", "priority": "low"}
    # a missing work item reads as the reference's nulls
    missing = ref.ok("acmi_work_get", {"id": "nope"})
    assert missing["profile"] is None and missing["timeline"] == []


# --- our guarantees underneath ----------------------------------------------------------


def test_the_tenant_argument_never_chooses_the_tenant(ref: McpClient, acmi: Acmi) -> None:
    answer_ = ref.ok(
        "acmi_profile",
        {"namespace": "user", "id": "tn", "profile": '{"a": 1}', "tenant": "madez"},
    )
    assert answer_["tenant"] == "default" and answer_["key"] == "acmi:user:tn:profile"
    assert acmi.profile.get("user:tn") is not None
    assert acmi.for_tenant("madez").profile.get("user:tn") is None


def test_delete_reaches_only_a_profile_or_signals_of_this_tenant(
    ref: McpClient,
    acmi: Acmi,
) -> None:
    acmi.profile.set("user:del", {"a": 1})
    acmi.signals.set("user:del", "s", 1)
    other = acmi.for_tenant("other")
    other.profile.set("user:del", {"b": 2})
    other_key = other.keys.profile(EntityId.parse("user:del"))
    for key in (
        other_key,  # another tenant's, in our layout
        "acmi:other:user:del:profile",  # ... or the reference's
        "acmi:user:del:timeline",  # a timeline: only with its whole entity
        "acmi:user:*:profile",  # a pattern
        "acmi:_keys:default",  # an index, not an entity slot
        "acmi:registry:agents",  # the reference's protected path
        "user:del",  # no key at all
    ):
        result = ref.call("acmi_delete", {"key": key, "confirm": True})
        text, refused = answer(result)
        assert result.isError and refused["ok"] is False, key
        assert refused["error"].startswith(f"Refusing to delete {key}: "), text
    assert other.profile.get("user:del") == {"b": 2, "actor_type": "human", "tenant_id": "other"}
    assert acmi.timeline.size("user:del") == 0 and acmi.profile.get("user:del") is not None
    # the reference's layout for this tenant names the same slot
    dry = ref.ok("acmi_delete", {"key": "acmi:default:user:del:signals"})
    assert dry == {
        "ok": True,
        "dry_run": True,
        "key": "acmi:default:user:del:signals",
        "action": "would delete",
    }
    assert acmi.signals.all("user:del") == {"s": 1}
    ref.ok("acmi_delete", {"key": "acmi:default:user:del:signals", "confirm": True})
    assert acmi.signals.all("user:del") == {}
    ref.ok("acmi_delete", {"key": "acmi:user:del:profile", "confirm": True})
    assert acmi.profile.get("user:del") is None


def test_a_read_only_key_reads_and_writes_nothing(redis_url: str, acmi: Acmi) -> None:
    key, _ = apikeys.mint(acmi.store, tenant="default", scope="read", name="ro", now_ms=1)
    acmi.profile.set("user:ro", {"a": 1})
    with mcp_client(redis_url, "reference", key) as client:
        assert client.ok("acmi_get", {"namespace": "user", "id": "ro"})["profile"]["a"] == 1
        dry = client.ok("acmi_delete", {"key": "acmi:user:ro:profile"})
        assert dry["dry_run"] is True
        for name, arguments in (
            ("acmi_profile", {"namespace": "user", "id": "ro", "profile": "{}"}),
            ("acmi_delete", {"key": "acmi:user:ro:profile", "confirm": True}),
            ("acmi_spawn", {"agentId": "ro"}),
        ):
            result = client.call(name, arguments)
            _, refused = answer(result)
            assert result.isError and refused == {
                "ok": False,
                "tool": name,
                "error": "scope: this key is read-only (rule: write_scope)",
            }
    assert acmi.profile.get("user:ro") is not None and acmi.agents.spawns("agent:ro") == []


def test_a_bad_argument_is_a_tool_error_naming_it(ref: McpClient) -> None:
    text = ref.error("acmi_get", {"namespace": "user"})
    assert "id" in text and "required" in text
    _, refused = answer(ref.call("acmi_get", {"namespace": "Bad", "id": "x"}))
    assert refused["ok"] is False and refused["tool"] == "acmi_get"


def test_an_unknown_tool_set_is_refused_naming_the_variable(redis_url: str) -> None:
    env = server_env(redis_url) | {"ACMI_MCP_TOOLS": "both"}
    done = subprocess.run(
        [sys.executable, "-m", "acmi_core", "mcp"],
        env=env,
        input=b"",
        check=False,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert b"ACMI_MCP_TOOLS" in done.stderr and b"Traceback" not in done.stderr


# --- acmi mcp: a session's end, its log, its version ---------------------------------------

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def session(url: str, *flags: str) -> tuple[int, list[dict[str, Any]], str]:
    """One whole stdio session: initialize, a tool call, its answer read, then stdin
    closed (a client that closes stdin with a request in flight may get no answer: the
    SDK's stdio server ends with its input)."""
    lines = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "get", "arguments": {"entity": "user:end"}},
        },
    ]
    with subprocess.Popen(
        [sys.executable, "-m", "acmi_core", "mcp", *flags],
        env=server_env(url),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("".join(json.dumps(line) + "\n" for line in lines).encode())
        server.stdin.flush()
        watchdog = threading.Timer(60, server.kill)  # no answer: fail, never hang
        watchdog.start()
        try:
            answers = [json.loads(server.stdout.readline()) for _ in range(2)]  # ids 1, 2
        finally:
            watchdog.cancel()
        server.stdin.close()
        assert server.stderr is not None
        rest, stderr = server.stdout.read(), server.stderr.read()  # to the end: it exited
        server.wait(timeout=60)
    answers += [json.loads(line) for line in rest.splitlines()]
    return server.returncode, answers, stderr.decode()


def test_a_session_ends_quietly_with_acmis_version(redis_url: str) -> None:
    code, answers, stderr = session(redis_url)
    assert code == 0, stderr
    assert "Traceback" not in stderr and "Error" not in stderr
    assert "Processing request" not in stderr  # no line per request by default
    assert answers[0]["result"]["serverInfo"] == {"name": "acmi", "version": __version__}
    assert [a["id"] for a in answers] == [1, 2] and "error" not in answers[1]


def test_verbose_logs_each_request(redis_url: str) -> None:
    code, _, stderr = session(redis_url, "-v")
    assert code == 0 and "Processing request" in stderr and "Traceback" not in stderr

"""``acmi mcp`` through the official MCP SDK's own client, over stdio, on a real redis: the
reference's 17 tools, one test each, every stored value read back through the
``acmi_core`` client; the errors (isError naming field and rule); a read-only key.

One server process serves the whole module (``McpClient``: the SDK's ClientSession on a
background event loop, called synchronously by the tests), so a test costs its calls,
not a process start. Each test uses entities of its own."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

from acmi_core import Acmi, Settings
from acmi_core.auth import apikeys
from acmi_core.mcp.server import REFERENCE_TOOLS
from acmi_core.store import open_store
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS

MCP_DB = TEST_DBS["mcp_stdio"]  # this module's own database (tests/kit.py TEST_DBS)

EXPECTED_TOOLS = {
    # the reference's 17 (REFERENCE_TOOLS)
    *("profile", "signal", "event", "get", "list", "cat", "bootstrap", "spawn", "active"),
    *("rollup_set", "work_create", "work_event", "work_signal", "work_get", "work_list"),
    *("delete", "tenant_list"),
    # ours beside them
    *("profile_get", "profile_merge", "signal_get", "signal_set", "rollup_get", "heartbeat"),
    *("work_sessions", "lock_claim", "lock_renew", "lock_release", "lock_get"),
    *("hitl_create", "hitl_list", "hitl_resolve", "assess", "improve"),
    *("memory_remember", "memory_search", "memory_get", "memory_status", "memory_active"),
    *("memory_handoff", "memory_forget", "event_delete"),
    *("memory_review", "memory_prune", "memory_daily_summary", "memory_topic_create"),
    *("memory_debug", "memory_export", "memory_import"),
}

T = TypeVar("T")


def server_env(url: str, api_key: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACMI_", "UPSTASH_"))}
    env["ACMI_REDIS_URL"] = url
    if api_key is not None:
        env["ACMI_API_KEY"] = api_key
    return env


def payload(result: CallToolResult) -> Any:
    assert not result.isError, result.content
    block = result.content[0]
    assert isinstance(block, TextContent)
    return json.loads(block.text)


def error_text(result: CallToolResult) -> str:
    assert result.isError, result.content
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


class McpClient:
    """One ``python -m acmi_core mcp`` process and the SDK's ClientSession on it. The
    session lives in one task on a background event loop (the SDK's streams must be
    opened and closed by the same task); tests submit calls to that loop and wait."""

    def __init__(self, url: str, api_key: str | None = None) -> None:
        self.params = StdioServerParameters(
            command=sys.executable, args=["-m", "acmi_core", "mcp"], env=server_env(url, api_key)
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.stop = asyncio.Event()
        self.session: ClientSession | None = None

    async def _serve(self, ready: concurrent.futures.Future[ClientSession]) -> None:
        try:
            async with (
                stdio_client(self.params) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                ready.set_result(session)
                await self.stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    def __enter__(self) -> McpClient:
        self.thread.start()
        ready: concurrent.futures.Future[ClientSession] = concurrent.futures.Future()
        self.main = asyncio.run_coroutine_threadsafe(self._serve(ready), self.loop)
        self.session = ready.result(timeout=60)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.main.result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=60)
        self.loop.close()

    def run(self, step: Callable[[ClientSession], Coroutine[Any, Any, T]]) -> T:
        assert self.session is not None
        return asyncio.run_coroutine_threadsafe(step(self.session), self.loop).result(60)

    def call(self, name: str, args: dict[str, Any] | None = None) -> CallToolResult:
        return self.run(lambda s: s.call_tool(name, args or {}))

    def ok(self, name: str, args: dict[str, Any] | None = None) -> Any:
        return payload(self.call(name, args))

    def error(self, name: str, args: dict[str, Any] | None = None) -> str:
        return error_text(self.call(name, args))

    def text(self, name: str, args: dict[str, Any] | None = None) -> str:
        result = self.call(name, args)
        assert not result.isError, result.content
        block = result.content[0]
        assert isinstance(block, TextContent)
        return block.text


@pytest.fixture(scope="module")
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    url = redis_server.url_for(MCP_DB)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACMI_REDIS_URL", url)
        store = open_store(Settings.from_env())
        store.execute(("FLUSHDB",))
        store.close()
        yield url


@pytest.fixture(scope="module")
def acmi(redis_url: str) -> Iterator[Acmi]:
    """The test's own client on the server's database: what the tools stored, read back."""
    with Acmi(open_store(Settings.from_env())) as client:
        yield client


@pytest.fixture(scope="module")
def mcp(redis_url: str) -> Iterator[McpClient]:
    with McpClient(redis_url) as client:
        yield client


def event(summary: str, **extra: Any) -> dict[str, Any]:
    return {
        "source": "agent:test",
        "summary": summary,
        "kind": "note",
        "correlationId": "c1",
    } | extra


# --- the surface -----------------------------------------------------------------------


def test_every_reference_tool_is_served_with_a_description(mcp: McpClient) -> None:
    tools = {t.name: t for t in mcp.run(lambda s: s.list_tools()).tools}
    assert len(REFERENCE_TOOLS) == 17 and set(REFERENCE_TOOLS) <= set(tools)
    assert set(tools) == EXPECTED_TOOLS
    for tool in tools.values():
        assert tool.description and "ACMI_API_KEY" in tool.description
        assert "tenant" not in tool.inputSchema.get("properties", {})  # never an argument


# --- the reference's tools, one test each ----------------------------------------------


def test_profile_replaces_or_merges(mcp: McpClient, acmi: Acmi) -> None:
    first = mcp.ok("profile", {"entity": "user:pro", "profile": {"name": "Ana", "role": "x"}})
    assert first["profile"]["name"] == "Ana" and first["merged"] is False
    # the reference passed a JSON string: the SDK parses it into the object
    mcp.ok("profile", {"entity": "user:pro", "profile": '{"name": "Bea"}'})
    stored = acmi.profile.get("user:pro")
    assert stored is not None and stored["name"] == "Bea" and "role" not in stored  # replaced
    merged = mcp.ok("profile", {"entity": "user:pro", "profile": {"role": "y"}, "merge": True})
    assert merged["merged"] is True
    stored = acmi.profile.get("user:pro")
    assert stored is not None and (stored["name"], stored["role"]) == ("Bea", "y")


def test_signal_replaces_or_merges(mcp: McpClient, acmi: Acmi) -> None:
    mcp.ok("signal", {"entity": "user:sig", "signals": {"mood": "ok", "load": 3}})
    replaced = mcp.ok("signal", {"entity": "user:sig", "signals": {"mood": "busy"}})
    assert replaced["signals"] == {"mood": "busy"}
    assert acmi.signals.all("user:sig") == {"mood": "busy"}
    merged = mcp.ok("signal", {"entity": "user:sig", "signals": {"load": 5}, "merge": True})
    assert merged["signals"] == {"mood": "busy", "load": 5}
    assert acmi.signals.all("user:sig") == {"mood": "busy", "load": 5}


def test_event_appends_to_the_timeline(mcp: McpClient, acmi: Acmi) -> None:
    stored = mcp.ok("event", {"entity": "user:ev", "event": event("hello", correlationId="c9")})
    assert stored["summary"] == "hello" and stored["tenant_id"] == "madez"
    (read,) = acmi.timeline.read("user:ev")
    assert (read.summary, read.correlationId, read.ts) == ("hello", "c9", stored["ts"])


def test_event_with_a_seconds_ts_is_refused_naming_ts_and_seconds(
    mcp: McpClient, acmi: Acmi
) -> None:
    refused = mcp.error("event", {"entity": "user:evs", "event": event("s", ts=1_745_947_200)})
    assert "ts" in refused and "rule: seconds" in refused, refused
    assert "milliseconds" in refused
    assert acmi.timeline.size("user:evs") == 0
    assert mcp.ok("event", {"entity": "user:evs", "event": event("ms", ts=1_745_947_200_000)})


def test_get_reads_profile_signals_and_newest_events(mcp: McpClient, acmi: Acmi) -> None:
    acmi.profile.merge("user:get", {"name": "Gil"})
    acmi.signals.set("user:get", "mood", "ok")
    acmi.timeline.extend("user:get", [event("one", ts=1_000), event("two", ts=2_000)])
    got = mcp.ok("get", {"entity": "user:get", "events": 1})
    assert got["profile"]["name"] == "Gil" and got["signals"] == {"mood": "ok"}
    assert [e["summary"] for e in got["timeline"]] == ["two"]
    assert len(mcp.ok("get", {"entity": "user:get"})["timeline"]) == 2
    assert "events" in mcp.error("get", {"entity": "user:get", "events": 1001})


def test_list_pages_a_category(mcp: McpClient, acmi: Acmi) -> None:
    for name in ("a", "b", "c"):
        acmi.profile.merge(f"team:{name}", {"name": name})
    first = mcp.ok("list", {"category": "team", "limit": 2})
    assert len(first["entities"]) == 2 and first["next_cursor"]
    seen, cursor = list(first["entities"]), first["next_cursor"]
    while cursor is not None:  # SSCAN steps: follow next_cursor until null
        page = mcp.ok("list", {"category": "team", "limit": 2, "cursor": cursor})
        seen, cursor = seen + page["entities"], page["next_cursor"]
    assert sorted(seen) == ["team:a", "team:b", "team:c"]
    assert mcp.ok("list", {"category": "team"})["entities"] == ["team:a", "team:b", "team:c"]
    assert "rule: cursor" in mcp.error("list", {"category": "team", "cursor": "junk"})


def test_cat_merges_timelines_between_since_and_until(mcp: McpClient, acmi: Acmi) -> None:
    now = acmi.clock()
    acmi.timeline.append("user:cat1", event("old", ts=now - 3 * 3_600_000))
    acmi.timeline.append("user:cat2", event("recent", ts=now - 10 * 60_000))
    acmi.timeline.append("user:cat1", event("newest", ts=now - 60_000))
    both = mcp.ok("cat", {"entities": ["user:cat1", "user:cat2"], "since": "24h"})
    assert [e["summary"] for e in both["events"]] == ["newest", "recent", "old"]
    assert both["events"][1]["entity"] == "user:cat2"
    window = {"entities": ["user:cat1", "user:cat2"], "since": "24h", "until": "5m"}
    assert [e["summary"] for e in mcp.ok("cat", window)["events"]] == ["recent", "old"]
    last_hour = {"entities": ["user:cat1", "user:cat2"], "since": "1h", "limit": 1}
    assert [e["summary"] for e in mcp.ok("cat", last_hour)["events"]] == ["newest"]


def test_bootstrap_renders_with_its_options(mcp: McpClient, acmi: Acmi) -> None:
    acmi.profile.merge("agent:boot", {"name": "Boot"})
    acmi.timeline.append("agent:boot", event("woke"))
    markdown = mcp.text("bootstrap", {"agent": "boot"})
    assert markdown.startswith("#") and "woke" in markdown
    bundle = json.loads(mcp.text("bootstrap", {"agent": "boot", "format": "json", "events": 0}))
    assert bundle["agent"] == "agent:boot" and bundle["sections"]["timeline"] == []
    group = json.loads(mcp.text("bootstrap", {"agent": "boot", "format": "json", "scope": "group"}))
    assert group["scope"] == "group" and "profile" not in group["sections"]  # private
    assert "rule: enum" in mcp.error("bootstrap", {"agent": "boot", "include": "secrets"})
    assert "rule: scope" in mcp.error(
        "bootstrap", {"agent": "boot", "scope": "group", "topic": "x"}
    )

    # a spawn logs the session start and, in a main bundle, takes the pending handoff
    acmi.memory.handoff("agent:boot", "finish the release notes")
    spawn = {"session_id": "s-boot", "model_id": "m1"}
    woken = json.loads(mcp.text("bootstrap", {"agent": "boot", "format": "json", "spawn": spawn}))
    assert woken["spawn"]["session_id"] == "s-boot"
    assert acmi.agents.spawns("boot")[0]["session_id"] == "s-boot"
    assert acmi.memory.take_handoff("agent:boot") is None  # taken by the bootstrap


def test_spawn_logs_a_session_start(mcp: McpClient, acmi: Acmi) -> None:
    record = mcp.ok("spawn", {"agent": "spawner", "session_id": "s1", "model_id": "m1"})
    (stored,) = acmi.agents.spawns("spawner")
    assert stored == record and stored["model_id"] == "m1"
    assert acmi.timeline.read("agent:spawner") == []  # never in the timeline (a defect there)


def test_active_adds_lists_and_removes_threads(mcp: McpClient, acmi: Acmi) -> None:
    mcp.ok("active", {"agent": "act", "action": "add", "thread": "t1", "role": "lead"})
    mcp.ok("active", {"agent": "act", "action": "add", "thread": "t2"})
    assert acmi.agents.active("act")["t1"]["role"] == "lead"
    assert set(mcp.ok("active", {"agent": "act"})) == {"t1", "t2"}
    assert mcp.ok("active", {"agent": "act", "action": "remove", "thread": "t1"}) == {
        "removed": "t1"
    }
    assert set(acmi.agents.active("act")) == {"t2"}
    assert "rule: required" in mcp.error("active", {"agent": "act", "action": "add"})


def test_rollup_set_is_what_rollup_get_and_the_client_read(mcp: McpClient, acmi: Acmi) -> None:
    written = mcp.ok("rollup_set", {"agent": "roll", "summary": "shipped the parser"})
    stored = acmi.agents.rollup("roll")
    assert stored is not None and stored == written and stored["summary"] == "shipped the parser"
    assert mcp.ok("rollup_get", {"agent": "roll"}) == {"agent": "roll", "rollup": written}
    assert mcp.ok("rollup_get", {"agent": "norollup"})["rollup"] is None


def test_work_create_stores_the_item(mcp: McpClient, acmi: Acmi) -> None:
    created = mcp.ok("work_create", {"id": "wc1", "title": "Ship", "owner": "agent:claude"})
    assert created["open"] is True and created["owner"] == "agent:claude"
    item = acmi.work.get("wc1")
    assert item.profile is not None and item.profile["title"] == "Ship"
    assert item.signals == {"status": "open"}
    assert "rule: unique" in mcp.error("work_create", {"id": "wc1", "title": "again"})


def test_work_event_appends_and_joins_the_session(mcp: McpClient, acmi: Acmi) -> None:
    acmi.work.create("we1", {"title": "Log"})
    mcp.ok("work_event", {"id": "we1", "event": event("started"), "session_id": "s-7"})
    item = acmi.work.get("we1")
    assert item.timeline[-1]["summary"] == "started" and item.sessions == ["s-7"]
    assert "rule: exists" in mcp.error("work_event", {"id": "nope", "event": event("x")})


def test_work_signal_merges_and_closes(mcp: McpClient, acmi: Acmi) -> None:
    acmi.work.create("ws1", {"title": "Sig"}, owner="agent:sig")
    merged = mcp.ok("work_signal", {"id": "ws1", "signals": {"progress": 50}})
    assert merged == {"status": "open", "progress": 50}
    mcp.ok("work_signal", {"id": "ws1", "signals": {"status": "done"}})
    assert acmi.work.get("ws1").open is False
    assert acmi.work.ids("agent:sig") == []  # left its owner's open index


def test_work_get_reads_the_item(mcp: McpClient, acmi: Acmi) -> None:
    acmi.work.create("wg1", {"title": "Get"})
    acmi.work.event("wg1", event("one"))
    acmi.work.event("wg1", event("two"))
    item = mcp.ok("work_get", {"id": "wg1", "events": 1})
    assert item["profile"]["title"] == "Get" and [e["summary"] for e in item["timeline"]] == ["two"]
    assert "rule: range" in mcp.error("work_get", {"id": "wg1", "events": 5000})


def test_work_list_pages_an_owners_open_items(mcp: McpClient, acmi: Acmi) -> None:
    for n in range(3):
        acmi.work.create(f"wl{n}", {"title": f"item {n}"}, owner="agent:lister")
    first = mcp.ok("work_list", {"owner": "agent:lister", "limit": 2})
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = mcp.ok(
        "work_list", {"owner": "agent:lister", "limit": 2, "cursor": first["next_cursor"]}
    )
    ids = [i["id"] for i in first["items"] + rest["items"]]
    assert sorted(ids) == ["wl0", "wl1", "wl2"]
    any_status = mcp.ok("work_list", {"owner": "agent:lister", "status": None})
    assert sorted(i["id"] for i in any_status["items"]) == ["wl0", "wl1", "wl2"]


def test_delete_is_a_dry_run_unless_told_and_stays_in_its_tenant(
    mcp: McpClient, acmi: Acmi
) -> None:
    acmi.profile.merge("user:del", {"name": "Del"})
    acmi.timeline.append("user:del", event("hi"))
    other = acmi.for_tenant("other")
    other.profile.merge("user:x", {"name": "theirs"})
    keys_before = acmi.store.execute(("DBSIZE",))

    dry = mcp.ok("delete", {"entity": "user:del"})
    assert dry["dry_run"] is True and dry["deleted"] is False
    assert dry["found"]["profile"]["name"] == "Del" and dry["found"]["events"] == 1
    assert acmi.profile.get("user:del") is not None

    for escape, rule in (
        ("tenant:other:user:x", "own_tenant"),
        ("acmi:tenant:other:user:x:profile", "entity_not_key"),
        ("acmi:user:del:profile", "entity_not_key"),
        ("user:*", "no_wildcard"),
        ("*", "no_wildcard"),
        ("user:de?", "no_wildcard"),
        ("user:del:profile", "id_format"),
    ):
        text = mcp.error("delete", {"entity": escape, "dry_run": False})
        assert text.startswith("entity:") and f"rule: {rule}" in text, text
    assert acmi.store.execute(("DBSIZE",)) == keys_before  # nothing deleted
    assert other.profile.get("user:x") == {
        "name": "theirs",
        "actor_type": "human",
        "tenant_id": "other",
    }

    gone = mcp.ok("delete", {"entity": "user:del", "dry_run": False})
    assert gone["deleted"] is True
    assert acmi.get("user:del").to_dict()["profile"] is None
    assert acmi.timeline.size("user:del") == 0
    assert "user:del" not in acmi.list("user")


def test_tenant_list_names_only_its_own(mcp: McpClient) -> None:
    assert mcp.ok("tenant_list") == {"tenants": ["default"], "scope": "admin"}


# --- errors ------------------------------------------------------------------------------


def test_errors_are_tool_errors_naming_field_and_rule(mcp: McpClient) -> None:
    bad_entity = mcp.error("profile_get", {"entity": "no-colon"})
    assert bad_entity.startswith("entity:") and "rule: format" in bad_entity
    bad_since = mcp.error("cat", {"entities": ["user:a"], "since": "2026-01-01"})
    assert bad_since.startswith("since:") and "rule: duration" in bad_since
    bad_until = mcp.error("cat", {"entities": ["user:a"], "until": "soon"})
    assert bad_until.startswith("until:") and "rule: duration" in bad_until
    inverted = mcp.error("cat", {"entities": ["user:a"], "since": "1h", "until": "2h"})
    assert inverted.startswith("until:") and "rule: range" in inverted
    bad_entity_in_list = mcp.error("cat", {"entities": ["user:a", "nope"]})
    assert bad_entity_in_list.startswith("entities[1]:")
    # the SDK's own argument check (pydantic), reported the same way
    typed = mcp.error("get", {"entity": "user:a", "events": "many"})
    assert typed.startswith("events:") and "rule: type" in typed
    missing = mcp.error("profile", {"entity": "user:a"})
    assert missing.startswith("profile:") and "rule: required" in missing
    not_object = mcp.error("profile", {"entity": "user:a", "profile": [1, 2]})
    assert not_object.startswith("profile:")
    # an argument the tool does not take is refused, the tenant above all
    tenant = mcp.error("profile_get", {"entity": "user:a", "tenant": "other"})
    assert tenant.startswith("tenant:") and "rule: unknown_argument" in tenant
    typo = mcp.error("get", {"entity": "user:a", "event": 3})
    assert typo.startswith("event:") and "rule: unknown_argument" in typo
    assert "Unknown tool" in mcp.error("acmi_profile", {})


# --- keys --------------------------------------------------------------------------------


def test_read_scope_key_reads_its_tenant_and_cannot_write(redis_url: str, acmi: Acmi) -> None:
    key, _ = apikeys.mint(acmi.store, tenant="acme", scope="read", name="mcp-test", now_ms=1)
    acmi.profile.merge("user:shared", {"name": "default tenant's"})
    acme = acmi.for_tenant("acme")
    acme.profile.merge("user:ana", {"name": "Ana"})
    acme.memory.handoff("agent:bot", "keep me")

    with McpClient(redis_url, api_key=key) as mcp:
        assert mcp.ok("tenant_list") == {"tenants": ["acme"], "scope": "read"}
        assert mcp.ok("profile_get", {"entity": "user:ana"})["profile"]["name"] == "Ana"
        assert mcp.ok("profile_get", {"entity": "user:shared"})["profile"] is None
        writes: list[tuple[str, dict[str, Any]]] = [
            ("profile", {"entity": "user:ana", "profile": {"a": 1}}),
            ("profile_merge", {"entity": "user:ana", "partial": {"a": 1}}),
            ("signal", {"entity": "user:ana", "signals": {"a": 1}}),
            ("delete", {"entity": "user:ana"}),  # even a dry run: delete is a write tool
            ("memory_handoff", {"entity": "agent:bot"}),  # taking clears it
            ("memory_active", {"entity": "agent:bot", "text": "# ACTIVE\n"}),  # a replace
            ("memory_import", {"entity": "agent:bot", "files": {"MEMORY.md": "# M\n"}}),
            ("bootstrap", {"agent": "bot", "spawn": {"session_id": "s", "model_id": "m"}}),
        ]
        for name, args in writes:
            text = mcp.error(name, args)
            assert text.startswith("scope:") and "rule: write_scope" in text, name
        assert mcp.text("bootstrap", {"agent": "bot"}).startswith("#")  # reading is fine
    assert acme.profile.get("user:ana") == {
        "name": "Ana",
        "actor_type": "human",
        "tenant_id": "acme",
    }
    assert acme.memory.take_handoff("agent:bot") is not None
    assert acme.agents.spawns("bot") == []


def test_unknown_key_is_refused_before_serving(redis_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acmi_core", "mcp"],
        env=server_env(redis_url, "acmi_" + "x" * 40),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "ACMI_API_KEY: is unknown or revoked" in done.stderr


def test_the_server_ends_quietly_when_the_client_leaves(redis_url: str) -> None:
    """A client that initializes, lists the tools, reads both answers and closes stdin:
    the server exits 0 with nothing on stderr but its store note (its stdio transport
    closes stdout itself; a flush of the closed stream was a traceback)."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]  # fmt: skip
    with subprocess.Popen(
        [sys.executable, "-m", "acmi_core", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(redis_url),
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        server.stdin.flush()
        answers = [json.loads(server.stdout.readline()) for _ in range(2)]
        server.stdin.close()  # the client leaves
        assert server.stderr is not None
        stderr = server.stderr.read()  # until the server closes it, exiting
        server.wait(timeout=60)
    assert server.returncode == 0, stderr
    assert [a["id"] for a in answers] == [1, 2] and answers[1]["result"]["tools"]
    assert "Traceback" not in stderr and "Error" not in stderr, stderr

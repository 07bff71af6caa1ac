"""The README's command line and MCP snippets, run as a reader would copy them: the CLI
tour line by line, the MCP client configs (stdio through the SDK's client on the command
they name, HTTP through the SDK's client over the mcp function), the session-start hook
through the installed `acmi` script, and the skill file against the tools it names."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from acmi_core import Settings, create_acmi
from acmi_core.auth import apikeys
from acmi_core.cli import main
from acmi_core.mcp.server import REFERENCE_TOOLS
from acmi_core.store import open_store
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from functions.mcp import handler as mcp_handler
from tests.e2e.test_mcp_http import DOMAIN, LambdaTransport
from tests.kit import ROOT, TEST_DBS, configured, console_script

README = (ROOT / "README.md").read_text(encoding="utf-8")
SKILL = (ROOT / "acmi_core" / "skill" / "SKILL.md").read_text(encoding="utf-8")
DB = TEST_DBS["readme_agents"]  # this module's own database (tests/kit.py TEST_DBS)
ACMI = console_script()

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


def snippet(name: str) -> str:
    """The fenced block after ``<!-- snippet: name -->``."""
    match = re.search(rf"<!-- snippet: {name} -->\n```\w*\n(.*?)```", README, re.S)
    assert match, f"README has no snippet {name!r}"
    return match.group(1)


@pytest.fixture
def redis_url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    redis_server.flush(DB)
    url = redis_server.url_for(DB)
    for name in [n for n in os.environ if n.startswith(("ACMI_", "UPSTASH_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    monkeypatch.setenv("ACMI_CONFIG", "/nonexistent/acmi.toml")
    yield url


def minted(scope: str = "write") -> str:
    store = open_store(Settings.from_env())
    try:
        key, _ = apikeys.mint(store, tenant="default", scope=scope, name="readme", now_ms=1)
    finally:
        store.close()
    return key


def test_the_cli_tour_runs_line_by_line(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [ln for ln in snippet("cli-tour").splitlines() if ln.strip()]
    assert len(lines) >= 20
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "acmi", line
        assert main(argv[1:]) == 0, (line, capsys.readouterr().err)
    capsys.readouterr()
    acmi = create_acmi(open_store(Settings.from_env()), Settings.from_env())
    assert acmi.get("sales:client-123").profile is None  # the tour ends with its delete
    assert acmi.agents.rollup("claude")["summary"].startswith("Shipped 2.4")
    assert acmi.work.get("web-deploy").to_dict()["sessions"] == ["s-42"]
    (spawn,) = acmi.agents.spawns("claude")
    assert spawn["session_id"] == "s-42"
    # the tour's lease is brief: the wake routine's claim of deploy:web that a reader runs
    # next finds it free
    lease = acmi.locks.get("deploy:web")
    assert lease.held and lease.expires_at is not None
    assert lease.expires_at - int(time.time() * 1000) <= 5_000


def test_the_workflow_snippet_runs_the_cycle(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [ln for ln in snippet("cli-workflow").splitlines() if ln.strip()]
    out = ""
    for line in lines:
        assert main(shlex.split(line)[1:]) == 0, (line, capsys.readouterr().err)
        out = capsys.readouterr().out
    lessons = json.loads(out)["lessons"]  # the last line's: the lesson the third recorded
    assert lessons[0]["payload"]["lesson"] == "restore the wheel cache first"
    # the run assessed, it may run again; then another run before its assessment may not
    assert main(shlex.split(lines[0])[1:]) == 0
    refused = shlex.split(lines[0].replace("run-42", "run-43"))[1:]
    capsys.readouterr()
    assert main(refused) == 4
    assert "run run-42 has no assessment entry" in capsys.readouterr().err


def test_the_codex_config_is_the_same_server() -> None:
    stdio = json.loads(snippet("mcp-stdio"))["mcpServers"]["acmi"]
    codex = tomllib.loads(snippet("mcp-codex"))["mcp_servers"]["acmi"]
    assert (codex["command"], codex["args"], set(codex["env"])) == (
        stdio["command"],
        stdio["args"],
        set(stdio["env"]),
    )


def test_the_stdio_config_serves_the_tools(redis_url: str) -> None:
    config = json.loads(snippet("mcp-stdio"))["mcpServers"]["acmi"]
    key = minted()
    env = {**os.environ, **config["env"], "ACMI_API_KEY": key}
    assert config["command"] == "acmi"
    params = StdioServerParameters(command=ACMI, args=config["args"], env=env)

    async def session() -> tuple[set[str], Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            tools = {t.name for t in (await s.list_tools()).tools}
            await s.call_tool("profile", {"entity": "user:ann", "profile": {"name": "Ann"}})
            got = await s.call_tool("get", {"entity": "user:ann"})
            return tools, got

    tools, got = asyncio.run(session())
    assert set(REFERENCE_TOOLS) <= tools
    assert not got.isError
    assert json.loads(got.content[0].text)["profile"]["name"] == "Ann"  # type: ignore[union-attr]


def test_the_http_config_serves_the_tools_through_the_function(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = json.loads(snippet("mcp-http"))["mcpServers"]["acmi"]
    assert config["type"] == "http"
    url = config["url"].replace("<id>.execute-api.<region>.amazonaws.com", DOMAIN)
    assert httpx.URL(url).path == "/mcp"
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    key, _ = apikeys.mint(store, tenant="acme", scope="write", name="readme", now_ms=1)
    monkeypatch.setenv("ACMI_API_KEY", key)
    headers = {k: os.path.expandvars(v) for k, v in config["headers"].items()}
    assert headers["Authorization"] == f"Bearer {key}"
    handlers = configured(mcp_handler, store)
    transport = LambdaTransport(next(handlers))

    async def session() -> Any:
        async with (
            httpx.AsyncClient(transport=transport, headers=headers) as client,
            streamable_http_client(url, http_client=client) as (read, write, _),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            tools = {t.name for t in (await s.list_tools()).tools}
            assert set(REFERENCE_TOOLS) <= tools
            return await s.call_tool("tenant_list", {})

    try:
        listed = asyncio.run(session())
    finally:
        handlers.close()
        store.close()
    assert json.loads(listed.content[0].text)["tenants"] == ["acme"]  # type: ignore[union-attr]


def test_the_session_start_hook_prints_the_bundle_and_logs_the_spawn(redis_url: str) -> None:
    config = json.loads(snippet("hook"))
    (entry,) = config["hooks"]["SessionStart"]
    (hook,) = entry["hooks"]
    assert hook["type"] == "command"
    argv = shlex.split(hook["command"])
    assert argv[0] == "acmi"
    stdin = json.dumps(
        {"session_id": "hook-1", "hook_event_name": "SessionStart", "source": "startup"}
    )
    result = subprocess.run(
        [ACMI, *argv[1:]],
        input=stdin,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Wake bundle for agent:claude")
    assert "hook-1" in result.stdout
    acmi = create_acmi(open_store(Settings.from_env()), Settings.from_env())
    assert [s["session_id"] for s in acmi.agents.spawns("claude")] == ["hook-1"]


def test_the_skill_names_only_tools_and_commands_that_exist(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from acmi_core.mcp.server import build_server
    from acmi_core.store.memory import MemoryStore

    server = build_server(create_acmi(MemoryStore(), Settings()), apikeys.Scope.ADMIN)
    tools = {t.name for t in asyncio.run(server.list_tools())}
    named = set(re.findall(r"`([a-z_]+)\(", SKILL))
    assert {"bootstrap", "lock_claim", "heartbeat", "lock_release", "rollup_set"} <= named
    assert named <= tools, named - tools
    for command in re.findall(r"\[`acmi ([^`]+)`\]", SKILL):
        path = [word for word in shlex.split(command) if re.fullmatch(r"[a-z][a-z-]*", word)]
        assert main([*path[:2], "--help"]) == 0 or main([path[0], "--help"]) == 0, command
    capsys.readouterr()
    assert main(["skill"]) == 0
    assert capsys.readouterr().out == SKILL
    assert main(["skill", "--install", str(tmp_path)]) == 0
    assert (tmp_path / "acmi" / "SKILL.md").read_text(encoding="utf-8") == SKILL

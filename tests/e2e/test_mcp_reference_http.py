"""The reference tool set over streamable HTTP, through the official MCP SDK's client on a
real redis-server: the mcp Lambda function with ``ACMI_MCP_TOOLS=reference`` (two
tenants, each the tenant of its key), and ``acmi serve``'s app, which answers ``/mcp``
as the function does (the same key auth) beside the HTTP API."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from acmi_core import Acmi, Settings, __version__
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.base.settings import MCP_TOOL_SETS
from acmi_core.cli.local import serve_app
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from functions.mcp import handler as mcp_handler
from functions.runtime import LambdaFunction
from tests.e2e.test_mcp_http import LambdaTransport, mcp_session, mint
from tests.e2e.test_mcp_http import store as store  # noqa: PLC0414  (a fixture, by name)
from tests.kit import configured, load_template

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

REFERENCE_NAMES = 17


def text_of(result: CallToolResult) -> Any:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return json.loads(block.text)


@pytest.fixture
def handler(store: RedisStore) -> Iterator[LambdaFunction]:
    env = {"ACMI_DEFAULT_TENANT": "default", "ACMI_MCP_TOOLS": "reference"}
    yield from configured(mcp_handler, store, env)


def over_function(
    handler: LambdaFunction, key: str, body: Callable[[ClientSession], Coroutine[Any, Any, Any]]
) -> Any:
    async def main() -> Any:
        async with mcp_session(LambdaTransport(handler), key) as session:
            return await body(session)

    return asyncio.run(main())


def test_the_function_serves_the_reference_set_each_key_its_own_tenant(
    handler: LambdaFunction, store: RedisStore
) -> None:
    acme, globex = mint(store, "acme", "write"), mint(store, "globex", "write")

    async def write(s: ClientSession) -> Any:
        names = [t.name for t in (await s.list_tools()).tools]
        assert len(names) == REFERENCE_NAMES and all(n.startswith("acmi_") for n in names)
        arguments = {"namespace": "user", "id": "x", "profile": '{"plan": "gold"}'}
        # the tenant argument the reference declared changes nothing
        return text_of(await s.call_tool("acmi_profile", arguments | {"tenant": "globex"}))

    written = over_function(handler, acme, write)
    assert written == {"ok": True, "tenant": "acme", "key": "acmi:tenant:acme:user:x:profile"}

    async def read(s: ClientSession) -> tuple[Any, Any]:
        got = text_of(await s.call_tool("acmi_get", {"namespace": "user", "id": "x"}))
        listed = text_of(await s.call_tool("acmi_list", {"namespace": "user"}))
        return got, listed

    got, listed = over_function(handler, globex, read)
    assert (got["tenant"], got["profile"], listed["count"]) == ("globex", None, 0)
    got, listed = over_function(handler, acme, read)
    assert got["tenant"] == "acme" and got["profile"]["plan"] == "gold"
    assert listed == {"namespace": "user", "tenant": "acme", "count": 1, "ids": ["x"]}
    assert Acmi(store, tenant="globex").profile.get("user:x") is None


# --- acmi serve: /mcp beside the API ---------------------------------------------------------


@pytest.fixture
def served() -> Iterator[tuple[Acmi, Any]]:
    # the embedded store, as `acmi serve` runs it (no shared database to flush)
    acmi = Acmi(MemoryStore())
    yield acmi, serve_app(acmi, create_app(ApiContext(acmi)))
    acmi.store.close()


@asynccontextmanager
async def serve_session(app: Any, key: str) -> AsyncIterator[ClientSession]:
    transport = httpx.ASGITransport(app=app)
    headers = {"authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(transport=transport, headers=headers) as client,
        streamable_http_client("http://127.0.0.1:8000/mcp", http_client=client) as (r, w, _),
        ClientSession(r, w) as session,
    ):
        init = await session.initialize()
        assert (init.serverInfo.name, init.serverInfo.version) == ("acmi", __version__)
        yield session


def test_acmi_serve_answers_mcp_with_the_api_keys(served: tuple[Acmi, Any]) -> None:
    acmi, app = served
    key = mint(acmi.store, "default", "write")

    async def main() -> None:
        async with serve_session(app, key) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert "get" in names and "acmi_get" not in names  # ours by default
            event = {"source": "agent:x", "kind": "note", "correlationId": "c", "summary": "s"}
            result = await s.call_tool("event", {"entity": "user:srv", "event": event})
            assert not result.isError, result.content
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as plain:
            # no key: refused before any tool, as the function refuses it
            refused = await plain.post("http://127.0.0.1:8000/mcp", json={})
            assert refused.status_code == 401 and refused.json()["field"] == "authorization"
            # the API itself is still there, on the same app
            read = await plain.get(
                "http://127.0.0.1:8000/v1/entities/user:srv",
                headers={"authorization": f"Bearer {key}"},
            )
            assert read.status_code == 200 and read.json()["timeline"][0]["summary"] == "s"

    asyncio.run(main())
    assert acmi.timeline.size("user:srv") == 1


def test_acmi_serve_applies_the_tool_set_setting() -> None:
    settings = Settings(mcp_tools="reference")
    acmi = Acmi(MemoryStore(), settings)
    app = serve_app(acmi, create_app(ApiContext(acmi)))
    key = mint(acmi.store, "default", "write")

    async def main() -> list[str]:
        async with serve_session(app, key) as s:
            return [t.name for t in (await s.list_tools()).tools]

    try:
        assert len(asyncio.run(main())) == REFERENCE_NAMES
    finally:
        acmi.store.close()


def test_the_template_passes_the_tool_set_to_the_mcp_function_only() -> None:
    template = load_template()
    parameter = template["Parameters"]["McpTools"]
    assert parameter["Default"] == "ours" and tuple(parameter["AllowedValues"]) == MCP_TOOL_SETS
    env = template["Resources"]["McpFunction"]["Properties"]["Environment"]["Variables"]
    assert env["ACMI_MCP_TOOLS"] == {"Ref": "McpTools"}
    assert "ACMI_MCP_TOOLS" not in template["Globals"]["Function"]["Environment"]["Variables"]


WITHOUT_MCP = """
import sys

class NoMcp:  # the `mcp` extra not installed
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoMcp())
from acmi_core import Acmi
from acmi_core.cli.local import serve_app
from acmi_core.store.memory import MemoryStore
api = object()
assert serve_app(Acmi(MemoryStore()), api) is api
"""


@pytest.mark.slow  # a fresh interpreter
def test_acmi_serve_without_the_mcp_extra_serves_the_api_and_says_what_to_install() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_MCP],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "# no /mcp: pip install 'acmi[mcp]'" in result.stderr

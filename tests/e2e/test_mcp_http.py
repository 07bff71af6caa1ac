"""The mcp Lambda function (``functions/mcp.py``): the MCP server over stateless streamable
HTTP, on a real redis-server.

- its events/ samples through the real handler, as `sam local invoke -e` passes them;
- the official MCP SDK client (``streamable_http_client``) over an httpx transport that
  turns each request into the API Gateway HTTP API v2 event of the template's route and
  invokes the handler in process: initialize, list_tools, call_tool;
- what is refused before any tool runs (no key, an unknown key, a route or method the
  function does not serve, an oversized body, bad JSON), what a key may do (a read-only
  key, tenant isolation), and the round trips a call costs.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from acmi_core import Acmi, Settings
from acmi_core.auth import apikeys
from acmi_core.base.lambdas import function
from acmi_core.mcp.server import REFERENCE_TOOLS
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble
from functions.mcp import handler as mcp_handler
from functions.runtime import LambdaFunction
from tests.kit import (
    EXAMPLE_KEY,
    TEST_DBS,
    FakeLambdaContext,
    configured,
    load_event,
    load_template,
)

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

DB = TEST_DBS["mcp_http"]  # this module's own database (tests/kit.py TEST_DBS)
DOMAIN = "r3pmxmplak.execute-api.us-east-1.amazonaws.com"
URL = f"https://{DOMAIN}/mcp"
CONTEXT = FakeLambdaContext("acmi-mcp")
# The tools this file calls (the server has more: tests/e2e/test_mcp_stdio.py).
CALLED_TOOLS = {"get", "event", "list", "bootstrap", "work_create", "work_get", "tenant_list"}

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


# --- the function on a real redis-server ---------------------------------------------------


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisStore]:
    """A flushed database where the samples' key is provisioned as an operator would."""
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    apikeys.register(store, EXAMPLE_KEY, tenant="default", scope="admin", name="samples", now_ms=0)
    yield store
    store.close()


@pytest.fixture
def handler(store: RedisStore) -> Iterator[LambdaFunction]:
    yield from configured(mcp_handler, store)


def mint(store: RedisStore, tenant: str, scope: str) -> str:
    key, _ = apikeys.mint(store, tenant=tenant, scope=scope, name=f"{tenant}-{scope}", now_ms=1)
    return key


# --- API Gateway HTTP API v2 events ------------------------------------------------------


@functools.cache
def template_routes() -> frozenset[tuple[str, str]]:
    """(method, path) of the McpFunction's HttpApi events: what API Gateway invokes it for."""
    resource = load_template()["Resources"][function("mcp").logical_id]
    return frozenset(
        (str(e["Properties"]["Method"]).upper(), str(e["Properties"]["Path"]))
        for e in resource["Properties"]["Events"].values()
        if e["Type"] == "HttpApi"
    )


def http_api_event(
    method: str, path: str, headers: dict[str, str], body: bytes, query: str = ""
) -> dict[str, Any]:
    """The event API Gateway (payload format 2.0) passes for one request; a body that is
    not UTF-8 goes base64, as API Gateway sends it."""
    routed = (method, path) in template_routes()
    route_key = f"{method} {path}" if routed else "$default"
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": query,
        "headers": {name.lower(): value for name, value in headers.items()},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": DOMAIN.split(".", 1)[0],
            "domainName": DOMAIN,
            "domainPrefix": DOMAIN.split(".", 1)[0],
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.24",
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": uuid.uuid4().hex[:14] + "=",
            "routeKey": route_key,
            "stage": "$default",
            "time": "29/Nov/2026:18:42:09 +0000",
            "timeEpoch": 1795977729311,
        },
        "isBase64Encoded": False,
    }
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
    return event


def post(
    handler: Handler, body: bytes | dict[str, Any], key: str | None = EXAMPLE_KEY, **extra: str
) -> dict[str, Any]:
    """POST /mcp as an MCP client sends it, straight to the handler."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "content-length": str(len(raw)),
        "host": DOMAIN,
        **extra,
    }
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    return handler(http_api_event("POST", "/mcp", headers, raw), CONTEXT)


def response_json(response: dict[str, Any]) -> Any:
    headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
    assert headers.get("content-type", "").startswith("application/json"), response
    assert response.get("isBase64Encoded") is False
    return json.loads(response["body"])


def api_error(response: dict[str, Any], status: int, field: str, rule: str) -> dict[str, Any]:
    """The API's error body: all four keys, naming ``field`` and ``rule``."""
    assert response["statusCode"] == status, response
    body = response_json(response)
    assert set(body) == {"error", "message", "field", "rule"}, body
    assert (body["field"], body["rule"]) == (field, rule), body
    assert body["message"], body
    return dict(body)


def note(summary: str, correlation_id: str, source: str = "agent:claude") -> dict[str, Any]:
    """A Comms v1.1 event for the ``event`` tool."""
    return {"source": source, "summary": summary, "kind": "note", "correlationId": correlation_id}


def rpc(method: str, params: dict[str, Any] | None = None, id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}


# --- (a) the events/ samples through the handler -----------------------------------------


def test_the_tools_list_sample_lists_the_tools(handler: LambdaFunction) -> None:
    response = handler(load_event("mcp.tools-list"), CONTEXT)
    assert response["statusCode"] == 200, response
    body = response_json(response)
    assert body["id"] == 1 and "error" not in body
    names = {tool["name"] for tool in body["result"]["tools"]}
    assert names >= CALLED_TOOLS, CALLED_TOOLS - names
    get = next(tool for tool in body["result"]["tools"] if tool["name"] == "get")
    assert get["inputSchema"]["required"] == ["entity"]


def test_the_tools_call_sample_reads_the_entity(handler: LambdaFunction, store: RedisStore) -> None:
    acmi = Acmi(store, Settings())
    acmi.profile.merge("user:mikey", {"name": "Mikey"})
    acmi.timeline.append("user:mikey", note("hello", "c1"))
    response = handler(load_event("mcp.tools-call"), CONTEXT)
    assert response["statusCode"] == 200, response
    result = response_json(response)["result"]
    assert result["isError"] is False
    context = json.loads(result["content"][0]["text"])
    assert context["profile"]["name"] == "Mikey"
    assert [e["summary"] for e in context["timeline"]] == ["hello"]


def test_the_no_auth_sample_is_refused_before_any_tool(
    handler: LambdaFunction, store: RedisStore
) -> None:
    before = store.execute(("DBSIZE",))
    response = handler(load_event("mcp.no-auth"), CONTEXT)
    api_error(response, 401, "authorization", "required")
    assert {k.lower(): v for k, v in response["headers"].items()}["www-authenticate"] == "Bearer"
    assert store.execute(("DBSIZE",)) == before


# --- (b) the SDK's own client over the function ------------------------------------------


class LambdaTransport(httpx.AsyncBaseTransport):
    """httpx -> API Gateway -> the Lambda handler, in process. A request for a route the
    template does not give the function is API Gateway's own 404 (the function never
    sees it). Invocations run one at a time on a worker thread with an event loop of its
    own, as Lambda runs them apart from the caller: mangum drives the app on that loop."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.invocations: list[tuple[str, int]] = []  # (JSON-RPC method, HTTP status)
        self._executor = ThreadPoolExecutor(
            max_workers=1, initializer=lambda: asyncio.set_event_loop(asyncio.new_event_loop())
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        path = request.url.path
        if (request.method, path) not in template_routes():
            return httpx.Response(404, json={"message": "Not Found"}, request=request)
        headers = {name: value for name, value in request.headers.multi_items()}
        event = http_api_event(request.method, path, headers, body, request.url.query.decode())
        loop = asyncio.get_running_loop()
        response = await loop.run_in_executor(self._executor, self.handler, event, CONTEXT)
        # found by pattern, not parsed: a body may be one no parser takes (100,000 deep)
        found = re.search(rb'"method"\s*:\s*"([^"\\]*)"', body)
        method = found[1].decode() if found else "?"
        self.invocations.append((method, response["statusCode"]))
        text = response.get("body") or ""
        content = base64.b64decode(text) if response.get("isBase64Encoded") else text.encode()
        return httpx.Response(
            response["statusCode"],
            headers=response.get("headers"),
            content=content,
            request=request,
        )

    async def aclose(self) -> None:
        def close_loop() -> None:
            asyncio.get_event_loop().close()

        await asyncio.get_running_loop().run_in_executor(self._executor, close_loop)
        self._executor.shutdown()


@asynccontextmanager
async def mcp_session(transport: LambdaTransport, key: str) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session over the function, with ``key`` as its bearer."""
    headers = {"authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(transport=transport, headers=headers) as client,
        streamable_http_client(URL, http_client=client) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        assert init.serverInfo.name == "acmi"
        yield session


def run_session(
    handler: Handler, key: str, body: Callable[[ClientSession], Any]
) -> LambdaTransport:
    transport = LambdaTransport(handler)

    async def main() -> None:
        async with mcp_session(transport, key) as session:
            await body(session)

    asyncio.run(main())
    return transport


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


def test_the_sdk_client_initializes_lists_and_calls_tools_through_the_function(
    handler: LambdaFunction,
) -> None:
    async def body(s: ClientSession) -> None:
        names = {tool.name for tool in (await s.list_tools()).tools}
        assert names >= CALLED_TOOLS, CALLED_TOOLS - names
        kickoff = note("kickoff", "k1")
        stored = payload(await s.call_tool("event", {"entity": "user:ana", "event": kickoff}))
        assert stored["summary"] == "kickoff" and stored["correlationId"]
        got = payload(await s.call_tool("get", {"entity": "user:ana"}))
        assert [e["summary"] for e in got["timeline"]] == ["kickoff"]
        listed = payload(await s.call_tool("list", {"category": "user"}))
        assert listed["entities"] == ["user:ana"]
        item = payload(await s.call_tool("work_create", {"id": "launch", "title": "Launch"}))
        assert item["id"] == "launch"
        assert payload(await s.call_tool("work_get", {"id": "launch"}))["id"] == "launch"
        markdown = (await s.call_tool("bootstrap", {"agent": "claude"})).content[0]
        assert isinstance(markdown, TextContent) and markdown.text.startswith("#")
        refused = await s.call_tool("get", {"entity": "not an entity"})
        assert "entity" in error_text(refused) and "rule:" in error_text(refused)

    transport = run_session(handler, EXAMPLE_KEY, body)
    # Stateless: the handshake is two POSTs (initialize, the initialized notification: 202),
    # then exactly one invocation per list or call; never a GET stream or a DELETE.
    methods = [method for method, _ in transport.invocations]
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/list"]
    assert methods[3:] == ["tools/call"] * 7
    assert [status for _, status in transport.invocations] == [200, 202] + [200] * 8


def test_every_reference_tool_through_the_function(
    handler: LambdaFunction, store: RedisStore
) -> None:
    """The reference's 17 tools, each called through the SDK's client over the function
    (over stdio: tests/e2e/test_mcp_stdio.py), what they stored read back by the client."""
    key = mint(store, "acme", "write")
    acme = Acmi(store, Settings(), tenant="acme")
    called: list[str] = []

    async def body(s: ClientSession) -> None:
        async def call(tool: str, **arguments: Any) -> Any:
            called.append(tool)
            return payload(await s.call_tool(tool, arguments))

        await call("profile", entity="user:ana", profile={"name": "Ana", "plan": "pro"})
        await call("profile", entity="user:ana", profile={"plan": "team"}, merge=True)
        await call("signal", entity="user:ana", signals={"mood": "busy"})
        await call("event", entity="user:ana", event=note("kickoff", "k1"))
        assert (await call("get", entity="user:ana"))["profile"]["plan"] == "team"
        assert (await call("list", category="user"))["entities"] == ["user:ana"]
        cat = await call("cat", entities=["user:ana", "thread:x"], since="1h")
        assert [e["summary"] for e in cat["events"]] == ["kickoff"]
        await call("spawn", agent="claude", session_id="s-1", model_id="opus")
        await call("active", agent="claude", action="add", thread="thread:launch")
        await call("rollup_set", agent="claude", summary="where we left off")
        called.append("bootstrap")
        bundle = (await s.call_tool("bootstrap", {"agent": "claude"})).content[0]
        assert isinstance(bundle, TextContent) and "where we left off" in bundle.text
        await call("work_create", id="launch", title="Launch", owner="agent:claude")
        await call("work_event", id="launch", event=note("drafted", "w1"), session_id="s-1")
        await call("work_signal", id="launch", signals={"stage": "review"})
        assert (await call("work_get", id="launch"))["sessions"] == ["s-1"]
        listed = await call("work_list", owner="agent:claude")
        assert [i["id"] for i in listed["items"]] == ["launch"]
        dry = await call("delete", entity="user:ana")
        assert dry["dry_run"] and not dry["deleted"]
        await call("delete", entity="user:ana", dry_run=False)
        assert (await call("tenant_list"))["tenants"] == ["acme"]

    run_session(handler, key, body)
    assert set(called) == set(REFERENCE_TOOLS)
    assert acme.get("user:ana").profile is None  # deleted, in its own tenant
    assert acme.signals.all("work:launch")["stage"] == "review"
    assert acme.agents.spawns("claude")[0]["session_id"] == "s-1"
    assert list(acme.agents.active("claude")) == ["thread:launch"]


def test_a_read_only_key_reads_but_its_write_tools_are_tool_errors(
    handler: LambdaFunction, store: RedisStore
) -> None:
    reader = mint(store, "default", "read")
    Acmi(store, Settings()).profile.merge("user:ana", {"name": "Ana"})

    async def body(s: ClientSession) -> None:
        got = payload(await s.call_tool("get", {"entity": "user:ana"}))
        assert got["profile"]["name"] == "Ana"
        refused = await s.call_tool("event", {"entity": "user:ana", "event": note("no", "n1")})
        assert "read-only" in error_text(refused) and "write_scope" in error_text(refused)
        refused = await s.call_tool("work_create", {"id": "launch", "title": "Launch"})
        assert "read-only" in error_text(refused)

    run_session(handler, reader, body)
    assert Acmi(store, Settings()).timeline.read("user:ana") == []


def test_a_key_sees_only_its_own_tenant(handler: LambdaFunction, store: RedisStore) -> None:
    acme, globex = mint(store, "acme", "write"), mint(store, "globex", "write")

    async def write_as_acme(s: ClientSession) -> None:
        assert payload(await s.call_tool("tenant_list", {}))["tenants"] == ["acme"]
        acme_only = note("acme only", "a1")
        payload(await s.call_tool("event", {"entity": "deal:acme-42", "event": acme_only}))
        payload(await s.call_tool("work_create", {"id": "acme-launch", "title": "Acme"}))

    async def read_as(s: ClientSession) -> None:
        got = payload(await s.call_tool("get", {"entity": "deal:acme-42"}))
        assert got["timeline"] == [] and got["profile"] is None
        assert payload(await s.call_tool("list", {"category": "deal"}))["entities"] == []
        missing = await s.call_tool("work_get", {"id": "acme-launch"})
        assert "exists" in error_text(missing)

    run_session(handler, acme, write_as_acme)
    run_session(handler, globex, read_as)
    run_session(handler, EXAMPLE_KEY, read_as)  # the default tenant's admin key too
    acme_view = Acmi(store, Settings(), tenant="acme").timeline.read("deal:acme-42")
    assert [e.summary for e in acme_view] == ["acme only"]


# --- (c) refused before any tool runs ------------------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "rule"),
    [
        (None, "required"),
        ("Bearer acmi_0123abcd_NotAKeyAnybodyMintedForThisTest", "known_key"),
        ("Basic dXNlcjpwYXNz", "bearer"),
    ],
)
def test_no_key_or_an_unknown_one_is_a_401_and_no_tool_call(
    handler: LambdaFunction, store: RedisStore, authorization: str | None, rule: str
) -> None:
    event = note("not stored", "x1")
    call = rpc("tools/call", {"name": "event", "arguments": {"entity": "user:ana", "event": event}})
    extra = {} if authorization is None else {"authorization": authorization}
    before = store.execute(("DBSIZE",))
    response = post(handler, call, key=None, **extra)
    body = api_error(response, 401, "authorization", rule)
    assert "NotAKey" not in body["message"]  # the key is never echoed
    assert store.execute(("DBSIZE",)) == before


def test_a_tenant_header_naming_another_tenant_is_a_403(handler: LambdaFunction) -> None:
    response = post(handler, rpc("tools/list"), **{"x-acmi-tenant": "acme"})
    api_error(response, 403, "X-Acmi-Tenant", "tenant_match")


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_only_post_is_served(handler: LambdaFunction, method: str) -> None:
    headers = {"accept": "text/event-stream", "authorization": f"Bearer {EXAMPLE_KEY}"}
    response = handler(http_api_event(method, "/mcp", headers, b""), CONTEXT)
    api_error(response, 405, "method", "method_allowed")
    assert response["headers"]["allow"] == "POST"


def test_another_path_is_a_404(handler: LambdaFunction) -> None:
    headers = {"authorization": f"Bearer {EXAMPLE_KEY}", "content-type": "application/json"}
    event = http_api_event("POST", "/mcp/extra", headers, json.dumps(rpc("tools/list")).encode())
    api_error(handler(event, CONTEXT), 404, "path", "route_exists")


@pytest.mark.parametrize("declared", [True, False])
def test_a_body_over_the_api_limit_is_a_413(
    handler: LambdaFunction, store: RedisStore, declared: bool
) -> None:
    """The API's cap (ACMI_MAX_BODY_BYTES), whether Content-Length says so or not."""
    limit = Settings().max_body_bytes
    event = note("x" * limit, "x2")
    raw = json.dumps(
        rpc("tools/call", {"name": "event", "arguments": {"entity": "user:ana", "event": event}})
    ).encode()
    headers = {
        "accept": "application/json",
        "content-type": "application/json",
        "authorization": f"Bearer {EXAMPLE_KEY}",
    }
    if declared:
        headers["content-length"] = str(len(raw))
    response = handler(http_api_event("POST", "/mcp", headers, raw), CONTEXT)
    body = api_error(response, 413, "body", "max_bytes")
    assert str(limit) in body["message"]
    assert Acmi(store, Settings()).timeline.read("user:ana") == []


def test_a_body_at_the_limit_is_served(handler: LambdaFunction) -> None:
    raw = json.dumps(rpc("tools/list")).encode()
    padded = raw[:-1] + b" " * (Settings().max_body_bytes - len(raw)) + b"}"
    assert len(padded) == Settings().max_body_bytes
    assert post(handler, padded)["statusCode"] == 200


@pytest.mark.parametrize(
    "raw", [b'{"jsonrpc": "2.0", "id": 1, "method": ', b"not json at all", b"\xff\xfe{}"]
)
def test_bad_json_is_a_json_rpc_parse_error(handler: LambdaFunction, raw: bytes) -> None:
    response = post(handler, raw)
    assert response["statusCode"] == 400, response
    body = response_json(response)
    assert body["jsonrpc"] == "2.0" and body["error"]["code"] == -32700  # Parse error


def test_api_gateway_host_is_accepted(handler: LambdaFunction) -> None:
    """The SDK's default host check answers API Gateway's Host with 421; ours is off
    (the comment on TRANSPORT_SECURITY says why), for any custom domain too."""
    for host in (DOMAIN, "mcp.acme.example.com"):
        response = post(handler, rpc("tools/list"), host=host, origin=f"https://{host}")
        assert response["statusCode"] == 200, response


# --- the Lambda path: threads, round trips ------------------------------------------------


def test_warm_invocations_start_no_thread(handler: LambdaFunction) -> None:
    """Like the HTTP functions (tests/infra/test_lambda_path.py): a warm invocation runs on
    mangum's loop, the SDK's per-request transport included, and starts no thread."""
    call = rpc("tools/call", {"name": "get", "arguments": {"entity": "user:ana"}})
    assert post(handler, call)["statusCode"] == 200  # cold: builds the app and the server
    before = threading.active_count()
    original = threading.Thread.start
    started: list[str] = []

    def counting_start(thread: threading.Thread) -> None:
        started.append(thread.name)
        original(thread)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threading.Thread, "start", counting_start)
        for _ in range(5):
            assert post(handler, call)["statusCode"] == 200
            assert post(handler, b"{")["statusCode"] == 400
            assert post(handler, call, key=None)["statusCode"] == 401
    assert started == [] and threading.active_count() == before


def test_round_trips_per_call_on_upstash(upstash_double: UpstashDouble) -> None:
    """Store requests per invocation on the Upstash REST double: the key lookup once per
    process (then cached), and each tool call its client operation's round trips."""
    with UpstashStore(upstash_double.url, upstash_double.token) as store:
        apikeys.register(store, EXAMPLE_KEY, tenant="default", scope="admin", name="s", now_ms=0)
        # the scripts loaded first: on a fresh server a first run also learns what its
        # shebang may carry (EVALSHA -> NOSCRIPT -> EVAL, once a process), which an
        # earlier test in this process may already have done
        warm = Acmi(store, Settings())
        warm.signals.set("user:warm", "k", 1)
        warm.get("user:warm")  # and a read's page script, in the plain form a pipeline sends
        warm.timeline.append("user:warm", note("warm", "w1"))  # and the append's lean script
        for handler in configured(mcp_handler, store):
            hello = {"entity": "user:a", "event": note("hello", "h1")}
            steps = {
                "tools/list (cold: key lookup)": rpc("tools/list"),
                "tools/list": rpc("tools/list"),
                "get": rpc("tools/call", {"name": "get", "arguments": {"entity": "user:a"}}),
                "event": rpc("tools/call", {"name": "event", "arguments": hello}),
            }
            counts = {}
            for name, call in steps.items():
                upstash_double.reset_counts()
                assert post(handler, call)["statusCode"] == 200
                counts[name] = upstash_double.requests
    assert counts == {"tools/list (cold: key lookup)": 1, "tools/list": 0, "get": 1, "event": 1}

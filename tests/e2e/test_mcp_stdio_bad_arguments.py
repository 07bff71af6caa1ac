"""``acmi mcp`` over stdio answers what the SDK cannot decode as the mcp function does
(``mcp/arguments.py``, one check for both transports): a tool error naming the argument
and the rule, never a crash, a -32603 or a request left unanswered; and it serves stored
values as deep as reads take them.

The official SDK's ClientSession drives the server process. Its serializer cannot write
100,000 levels, a 5,000-digit integer or a lone surrogate, so those lines are written
raw to the same process's stdin beside the session (``RawStdio``), and the session keeps
working after each. Before: the server's SDK reader only logged its parse failure, so
each of these requests went unanswered (the test's wait timed out)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
import redis
from anyio.abc import Process
from mcp import ClientSession
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage

from acmi_core.mcp.arguments import MAX_ARGUMENT_DEPTH
from acmi_core.testing.redis_server import RedisServer
from tests.e2e.test_mcp_stdio import payload, server_env
from tests.kit import TEST_DBS

DB = TEST_DBS["mcp_stdio_bad_arguments"]  # this module's own database (tests/kit.py TEST_DBS)
ANSWER_S = 30  # a refused line is answered at once; this only bounds a hang


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def call(ident: str, name: str, arguments_json: str) -> bytes:
    """A tools/call line with its arguments as raw JSON text."""
    head = f'{{"jsonrpc": "2.0", "id": "{ident}", "method": "tools/call", "params": {{"name": '
    return f'{head}"{name}", "arguments": {arguments_json}}}}}\n'.encode()


class RawStdio:
    """``python -m acmi_core mcp`` with the SDK's ClientSession on its stdio, plus
    ``raw``: a line written as given, its answer (by its string id ``raw-*``, which the
    session never uses) taken out before the session sees it."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.lock = anyio.Lock()
        self.waiting: dict[str, anyio.Event] = {}
        self.answers: dict[str, dict[str, Any]] = {}

    async def raw(self, ident: str, line: bytes) -> dict[str, Any]:
        event = self.waiting[ident] = anyio.Event()
        async with self.lock:
            assert self.process.stdin is not None
            await self.process.stdin.send(line)
        with anyio.fail_after(ANSWER_S):
            await event.wait()
        return self.answers.pop(ident)

    async def run(self, body: Callable[[ClientSession, RawStdio], Awaitable[None]]) -> None:
        to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](
            16
        )
        session_writes, from_session = anyio.create_memory_object_stream[SessionMessage](16)

        async def read_stdout() -> None:
            assert self.process.stdout is not None
            buffer = b""
            async with to_session:
                async for chunk in self.process.stdout:
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        answer = json.loads(line)
                        ident = answer.get("id")
                        if isinstance(ident, str) and ident in self.waiting:
                            self.answers[ident] = answer
                            self.waiting.pop(ident).set()
                        else:
                            message = JSONRPCMessage.model_validate(answer)
                            await to_session.send(SessionMessage(message))

        async def write_stdin() -> None:
            async with from_session:
                async for message in from_session:
                    text = message.message.model_dump_json(by_alias=True, exclude_none=True)
                    async with self.lock:
                        assert self.process.stdin is not None
                        await self.process.stdin.send(text.encode() + b"\n")

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_stdout)
            tasks.start_soon(write_stdin)
            async with ClientSession(session_reads, session_writes) as session:
                await session.initialize()
                await body(session, self)
            tasks.cancel_scope.cancel()


def serve(url: str, body: Callable[[ClientSession, RawStdio], Awaitable[None]]) -> None:
    async def main() -> None:
        command = [sys.executable, "-m", "acmi_core", "mcp"]
        async with await anyio.open_process(
            command, env=server_env(url), stderr=subprocess.DEVNULL
        ) as process:
            try:
                await RawStdio(process).run(body)
            finally:
                assert process.stdin is not None
                await process.stdin.aclose()
                with anyio.fail_after(ANSWER_S):
                    await process.wait()

    anyio.run(main)


@pytest.fixture(scope="module")
def url(redis_server: RedisServer) -> Iterator[str]:
    redis_server.flush(DB)
    yield redis_server.url_for(DB)


def tool_error(answer: dict[str, Any], ident: str) -> str:
    assert answer["id"] == ident and answer["result"]["isError"] is True, answer
    text = answer["result"]["content"][0]["text"]
    assert isinstance(text, str)
    return text


def test_what_the_sdk_cannot_decode_is_a_tool_error_over_stdio(url: str) -> None:
    got: dict[str, str] = {}

    async def body(session: ClientSession, stdio: RawStdio) -> None:
        deep = f'{{"entity": "user:a", "event": {nested(100_000)}}}'
        got["deep"] = tool_error(await stdio.raw("raw-1", call("raw-1", "event", deep)), "raw-1")
        inside = f'{{"entity": "user:a", "event": {{"payload": {nested(100_000)}}}}}'
        answer = await stdio.raw("raw-2", call("raw-2", "event", inside))
        got["inside"] = tool_error(answer, "raw-2")
        long = f'{{"entity": "user:a", "events": {"9" * 5000}}}'
        got["long"] = tool_error(await stdio.raw("raw-3", call("raw-3", "get", long)), "raw-3")
        answer = await stdio.raw("raw-4", call("raw-4", "get\\udfff", '{"entity": "user:a"}'))
        got["name"] = tool_error(answer, "raw-4")
        answer = await stdio.raw(
            "raw-5", call("raw-5", "get", '{"entity": "user:a", "\\udfff": 1}')
        )
        got["key"] = tool_error(answer, "raw-5")
        outside = b'{"jsonrpc": "2.0", "id": "raw-6", "method": "ping", "x": '
        answer = await stdio.raw("raw-6", outside + nested(100_000).encode() + b"}\n")
        got["outside"] = f"{answer['error']['code']} {answer['error']['message']}"
        # the session goes on: nothing of the refused lines was stored or broke it
        got["after"] = payload(await session.call_tool("get", {"entity": "user:a"}))

    serve(url, body)
    for name in ("deep", "inside"):
        assert got[name].startswith("event: ") and got[name].endswith("(rule: max_depth)")
        assert str(MAX_ARGUMENT_DEPTH) in got[name]
    assert (
        got["long"] == "events: integers may have at most 4300 digits (5000 given) (rule: number)"
    )
    assert (
        got["name"] == "name: contains a lone UTF-16 surrogate: not valid Unicode text (rule: utf8)"
    )
    assert got["key"] == "\\udfff: the name contains a lone UTF-16 surrogate (rule: utf8)"
    assert got["outside"].startswith("-32602 ") and "(rule: max_depth)" in got["outside"]
    assert got["after"]["profile"] is None and got["after"]["timeline"] == [], got["after"]


@pytest.mark.parametrize("depth", [253, 300, 511, 512])
def test_stored_values_as_deep_as_reads_take_are_served_over_stdio(
    url: str, redis_server: RedisServer, depth: int
) -> None:
    """Values another tool stored deeper than pydantic carries: served as text, exactly."""
    value = nested(depth - 1)  # inside the signals object: ``depth`` levels in all
    event = {"ts": 5, "source": "user:x", "kind": "note", "correlationId": "c", "summary": "s"}
    member = json.dumps(event)[:-1] + f', "payload": {value}}}'
    with redis.Redis.from_url(url) as raw:
        raw.set(f"acmi:user:deep{depth}:signals", f'{{"k": {value}}}')
        raw.set(f"acmi:work:deep{depth}:profile", f'{{"title": "t", "k": {value}}}')
        raw.zadd(f"acmi:work:deep{depth}:timeline", {member: 5})
    got: dict[str, Any] = {}

    async def body(session: ClientSession, stdio: RawStdio) -> None:
        entity = f"user:deep{depth}"
        got["signal"] = payload(
            await session.call_tool("signal_get", {"entity": entity, "key": "k"})
        )
        got["get"] = payload(await session.call_tool("get", {"entity": entity}))
        got["work"] = payload(await session.call_tool("work_get", {"id": f"deep{depth}"}))

    serve(url, body)

    def text(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"))

    assert text(got["signal"]["value"]) == value
    assert text(got["get"]["signals"]["k"]) == value
    assert text(got["work"]["profile"]["k"]) == value
    assert text(got["work"]["timeline"][0]["payload"]) == value

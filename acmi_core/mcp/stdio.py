"""The MCP server over stdio (``acmi mcp``): the SDK's stdio transport, with each line
checked by ``mcp/arguments.py`` before the SDK decodes it, as the mcp function checks
each POST body (``mcp/http.py``). One check, two transports.

Without it the SDK's own reader parses every line with pydantic: arguments nested
100,000 deep, a 5,000-digit integer or a lone surrogate in a tool's name end as an
exception the session only logs (the caller waits for an answer that never comes) or a
-32603. Here such a line is answered on stdout with the same tool error (or JSON-RPC
error) the HTTP transport gives, naming the field and the rule, and never reaches the
server; every other line goes through unchanged.

The rest mirrors ``mcp.server.stdio.stdio_server`` (SDK 1.x): stdin and stdout re-wrapped
as UTF-8 (undecodable bytes replaced), one JSON-RPC message per line, one writer task so
answers never interleave."""

from __future__ import annotations

import sys
from io import TextIOWrapper
from typing import Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from acmi_core.mcp.arguments import refusal


def checked(line: str) -> SessionMessage | Exception | types.JSONRPCMessage:
    """What one stdin line becomes: a message for the server, the SDK's parse failure
    (the server reports it as the SDK does), or, for a line the SDK could not decode,
    the answer to write back (a ``JSONRPCMessage``, never given to the server)."""
    refused = refusal(line.encode("utf-8"))
    if refused is not None:
        answer = refused[1]
        if answer["id"] is None:  # no request to answer: reported as a parse failure is
            return ValueError(answer["error"]["message"])
        return types.JSONRPCMessage.model_validate(answer)
    try:
        return SessionMessage(types.JSONRPCMessage.model_validate_json(line))
    except Exception as exc:  # the SDK's reader hands the server its parse errors
        return exc


async def serve(server: Server[Any, Any]) -> None:
    """Run ``server`` on this process's stdin and stdout until stdin closes."""
    stdin = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    read_writer: MemoryObjectSendStream[SessionMessage | Exception]
    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    write_stream: MemoryObjectSendStream[SessionMessage]
    write_reader: MemoryObjectReceiveStream[SessionMessage]
    read_writer, read_stream = anyio.create_memory_object_stream(0)
    write_stream, write_reader = anyio.create_memory_object_stream(0)
    # the reader's own handle on the writer's queue, for its refusals
    answers = write_stream.clone()

    async def stdin_reader() -> None:
        try:
            async with read_writer, answers:
                async for line in stdin:
                    message = checked(line)
                    if isinstance(message, types.JSONRPCMessage):
                        await answers.send(SessionMessage(message))
                    else:
                        await read_writer.send(message)
        except anyio.ClosedResourceError:  # the server is gone: nothing left to feed
            await anyio.lowlevel.checkpoint()

    async def stdout_writer() -> None:
        try:
            async with write_reader:
                async for session_message in write_reader:
                    text = session_message.message.model_dump_json(by_alias=True, exclude_none=True)
                    await stdout.write(text + "\n")
                    await stdout.flush()
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(stdin_reader)
        tasks.start_soon(stdout_writer)
        async with write_stream:
            await server.run(read_stream, write_stream, server.create_initialization_options())

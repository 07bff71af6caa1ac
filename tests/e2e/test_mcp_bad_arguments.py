"""What the SDK's transport could not decode is a tool error naming the argument and the
rule (``mcp/arguments.py``), not an HTTP 500 / -32603; stored values as deep as anything
can store them are served. Through the mcp function, with the official SDK client where
it can send the message (it cannot serialize 100,000 levels: those go as raw POSTs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from mcp import ClientSession

from acmi_core import Acmi, Settings
from acmi_core.auth import apikeys
from acmi_core.base.model import MAX_JSON_DEPTH
from acmi_core.mcp.arguments import MAX_ARGUMENT_DEPTH
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from functions.mcp import handler as mcp_handler
from functions.runtime import LambdaFunction
from tests.e2e.test_mcp_http import payload, post, response_json, rpc, run_session
from tests.kit import EXAMPLE_KEY, TEST_DBS, configured

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

DB = TEST_DBS["mcp_bad_arguments"]  # this module's own database (tests/kit.py TEST_DBS)


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisStore]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    apikeys.register(store, EXAMPLE_KEY, tenant="default", scope="admin", name="t", now_ms=0)
    yield store
    store.close()


@pytest.fixture
def handler(store: RedisStore) -> Iterator[LambdaFunction]:
    yield from configured(mcp_handler, store)


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def call(name: str, arguments_json: str) -> bytes:
    """A tools/call message with its arguments as raw JSON text."""
    envelope = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "'
    return f'{envelope}{name}", "arguments": {arguments_json}}}}}'.encode()


def tool_error(response: dict[str, Any]) -> str:
    assert response["statusCode"] == 200, response
    body = response_json(response)
    assert body["id"] == 7 and body["result"]["isError"] is True, body
    text = body["result"]["content"][0]["text"]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("event", f'{{"entity": "user:a", "event": {nested(100_000)}}}', "event: "),
        ("event", f'{{"entity": "user:a", "event": {{"payload": {nested(100_000)}}}}}', "event: "),
        ("signal_set", f'{{"entity": "user:a", "key": "k", "value": {nested(300)}}}', "value: "),
    ],
    ids=["100000-deep", "100000-deep-inside", "300-deep"],
)
def test_arguments_nested_too_deep_are_a_tool_error(
    handler: LambdaFunction, tool: str, arguments: str, named: str
) -> None:
    text = tool_error(post(handler, call(tool, arguments)))
    assert text.startswith(named) and text.endswith("(rule: max_depth)"), text
    assert str(MAX_ARGUMENT_DEPTH) in text


def test_a_value_as_deep_as_writes_take_passes_the_boundary(
    handler: LambdaFunction, store: RedisStore
) -> None:
    deepest = nested(MAX_JSON_DEPTH - 1)  # inside the signals object: MAX_JSON_DEPTH in all
    response = post(
        handler, call("signal_set", f'{{"entity": "user:a", "key": "k", "value": {deepest}}}')
    )
    assert response_json(response)["result"]["isError"] is False, response
    assert Acmi(store, Settings()).signals.get("user:a", "k") == json.loads(deepest)


def test_an_integer_too_long_to_convert_is_a_tool_error(handler: LambdaFunction) -> None:
    """(The SDK client cannot send one: its own log line fails to print the message.)"""
    text = tool_error(post(handler, call("get", f'{{"entity": "user:a", "events": {"9" * 5000}}}')))
    assert text == "events: integers may have at most 4300 digits (5000 given) (rule: number)"


def test_a_lone_surrogate_in_the_tool_name_or_an_argument_is_a_tool_error(
    handler: LambdaFunction,
) -> None:
    text = tool_error(post(handler, call("get\\udfff", '{"entity": "user:a"}')))
    assert text == "name: contains a lone UTF-16 surrogate: not valid Unicode text (rule: utf8)"
    text = tool_error(post(handler, call("get", '{"entity": "user:a", "\\udfff": 1}')))
    assert text == "\\udfff: the name contains a lone UTF-16 surrogate (rule: utf8)"
    text = tool_error(post(handler, call("get", '{"entity": "user:\\udfff"}')))
    assert text.startswith("entity: contains a lone") and text.endswith("(rule: utf8)")


def test_a_message_nested_too_deep_outside_a_tool_call_is_a_json_rpc_error(
    handler: LambdaFunction,
) -> None:
    response = post(
        handler,
        json.dumps(rpc("ping")).encode()[:-1] + b', "x": ' + nested(100_000).encode() + b"}",
    )
    assert response["statusCode"] == 200, response
    error = response_json(response)["error"]
    assert error["code"] == -32602 and "(rule: max_depth)" in error["message"]
    broken = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": ' + b"[" * 100_000
    response = post(handler, broken)
    assert response["statusCode"] == 400 and response_json(response)["error"]["code"] == -32700


@pytest.mark.parametrize("depth", [64, 200, 253, 300, 511])
def test_stored_values_of_any_depth_a_read_takes_are_served(
    handler: LambdaFunction, redis_server: RedisServer, depth: int
) -> None:
    """Values another tool stored (redis-cli, the reference) deeper than pydantic carries,
    in signals, a profile and an event: served as text, exactly, through the SDK client.
    Before: work_get of a 511-deep value was "maximum recursion depth exceeded"."""
    value = nested(depth)
    event = {"ts": 5, "source": "user:x", "kind": "note", "correlationId": "c", "summary": "s"}
    member = json.dumps(event)[:-1] + f', "payload": {value}}}'
    with redis.Redis.from_url(redis_server.url_for(DB)) as raw:
        raw.set("acmi:user:deep:signals", f'{{"k": {value}}}')
        raw.set("acmi:work:deep:profile", f'{{"title": "t", "k": {value}}}')
        raw.zadd("acmi:work:deep:timeline", {member: 5})

    def text(got: Any) -> str:
        return json.dumps(got, separators=(",", ":"))

    async def body(session: ClientSession) -> None:
        got = payload(await session.call_tool("signal_get", {"entity": "user:deep", "key": "k"}))
        assert text(got["value"]) == value
        whole = payload(await session.call_tool("get", {"entity": "user:deep"}))
        assert text(whole["signals"]["k"]) == value
        work = payload(await session.call_tool("work_get", {"id": "deep"}))
        assert text(work["profile"]["k"]) == value
        assert text(work["timeline"][0]["payload"]) == value

    run_session(handler, EXAMPLE_KEY, body)

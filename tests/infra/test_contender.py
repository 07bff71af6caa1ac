"""The bench's node + ioredis contender issues exactly the reference SDK's commands (read
off MONITOR on a real redis-server), ours answers the same spec, and the client-CPU section
returns its rows. Timings are never asserted (shared, noisy machine)."""

from __future__ import annotations

import json
import math
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from acmi_core.testing.redis_server import RedisServer
from bench import client_cpu
from bench import contender as c
from tests.kit import TEST_DBS

pytestmark = pytest.mark.slow  # node processes and a quick bench section (~10 s)

DB = TEST_DBS["contender"]  # this module's own database (tests/kit.py TEST_DBS)
# entities are this module's own and every check reads the commands, not the data
STOP = "contender-test:stop"


def _node() -> c.Node:
    runtime = c.node_runtime()
    if isinstance(runtime, str):
        print(f"contender test: {runtime}")
        pytest.skip(runtime)
    return runtime


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", '"': '"', "\\": "\\"}


def _unrepr(text: str) -> str:
    """Undo Redis's quoting of MONITOR arguments (sdscatrepr)."""
    raw = re.sub(
        r"\\(x[0-9a-f]{2}|.)",
        lambda m: chr(int(m[1][1:], 16)) if len(m[1]) == 3 else _ESCAPES[m[1]],
        text,
    )
    return raw.encode("latin-1").decode()  # \xHH are bytes of UTF-8 text


_LINE = re.compile(r"^\+\S+ \[(\d+) [^\]]+\] (.*)$")
_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')


@contextmanager
def monitor(server: RedisServer) -> Iterator[list[tuple[int, list[str]]]]:
    """Every command the server runs while the block runs, as (db, args) with the command
    name upper-cased, until the STOP echo sent on leaving it."""
    seen: list[tuple[int, list[str]]] = []
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(b"MONITOR\r\n")
    reader = sock.makefile("rb")
    assert reader.readline() == b"+OK\r\n"

    def collect() -> None:
        for raw in reader:
            match = _LINE.match(raw.decode("latin-1").rstrip("\r\n"))
            if match is None:
                continue
            args = [_unrepr(a) for a in _ARG.findall(match[2])]
            args[0] = args[0].upper()  # ioredis sends command names in lower case
            if args == ["ECHO", STOP]:
                return
            seen.append((int(match[1]), args))

    thread = threading.Thread(target=collect)
    thread.start()
    try:
        yield seen
    finally:
        import redis

        with redis.Redis.from_url(server.url_for(DB)) as client:
            client.echo(STOP)
        thread.join(timeout=30)
        sock.close()
    assert not thread.is_alive(), "MONITOR never saw the stop echo"


def traced(server: RedisServer, node: c.Node, op: c.Op, n: int) -> list[list[str]]:
    """The commands the contender ran for ``op``'s n timed calls (between its trace echoes)."""
    with monitor(server) as seen:
        c.run_node(node, server.url_for(DB), [op], n=n, warmup=0, trace=True)
    commands = [args for db, args in seen if db == DB]
    start, end = f"contender:start:{op.name}", f"contender:end:{op.name}"
    first = commands.index(["ECHO", start])
    return commands[first + 1 : commands.index(["ECHO", end])]


EVENT_FIELDS = {"ts", "source", "kind", "correlationId", "summary", "speaker_type", "tenant_id"}


def _zadd_nx(args: list[str], key: str) -> dict[str, Any]:
    assert args[:3] == ["ZADD", key, "NX"]
    event: dict[str, Any] = json.loads(args[4])
    assert set(event) == EVENT_FIELDS
    assert int(args[3]) == event["ts"]
    return event


@pytest.fixture
def node() -> c.Node:
    return _node()


def test_append_is_one_zadd_nx(redis_server: RedisServer, node: c.Node) -> None:
    commands = traced(redis_server, node, c.Op("a", "append", "user:t-append"), n=3)
    assert len(commands) == 3
    events = [_zadd_nx(args, "acmi:user:t-append:timeline") for args in commands]
    assert [e["correlationId"] for e in events] == ["bench-0", "bench-1", "bench-2"]
    assert {e["speaker_type"] for e in events} == {"agent"}


@pytest.mark.parametrize(
    ("kind", "slot", "written"),
    [
        ("signals.set", "signals", [{"k": 0}, {"k": 1}]),
        (
            "profile.merge",
            "profile",
            [{"n": i, "actor_type": "human", "tenant_id": "default"} for i in (0, 1)],
        ),
    ],
)
def test_read_modify_write_is_get_then_set(
    redis_server: RedisServer, node: c.Node, kind: str, slot: str, written: list[Any]
) -> None:
    key = f"acmi:user:t-rmw:{slot}"
    commands = traced(redis_server, node, c.Op("rmw", kind, "user:t-rmw"), n=2)
    assert [args[:2] for args in commands] == [["GET", key], ["SET", key]] * 2
    assert [json.loads(args[2]) for args in commands[1::2]] == written
    assert all(len(args) == 3 for args in commands[1::2])  # a plain SET: no NX, XX or expiry


@pytest.mark.parametrize("kind", ["get", "get.all"])
def test_get_is_two_gets_and_one_zrevrangebyscore(
    redis_server: RedisServer, node: c.Node, kind: str
) -> None:
    prefix = "acmi:user:t-get"
    one_get = [
        ["GET", f"{prefix}:profile"],
        ["GET", f"{prefix}:signals"],
        ["ZREVRANGEBYSCORE", f"{prefix}:timeline", "+inf", "-inf", "LIMIT", "0", "50"],
    ]
    assert traced(redis_server, node, c.Op("get", kind, "user:t-get"), n=2) == one_get * 2


def test_batch_is_one_multi_of_zadd_nx(redis_server: RedisServer, node: c.Node) -> None:
    op = c.Op("b", "batch", "user:t-batch", batch=3)
    commands = traced(redis_server, node, op, n=1)
    assert commands[0] == ["MULTI"] and commands[-1] == ["EXEC"]
    assert len(commands) == 5
    for args in commands[1:-1]:
        _zadd_nx(args, "acmi:user:t-batch:timeline")


def test_concurrent_clients_each_append_to_their_own_entity(
    redis_server: RedisServer, node: c.Node
) -> None:
    op = c.Op("conc", "append", "user:t-conc", clients=3)
    commands = traced(redis_server, node, op, n=2)
    keys = sorted(args[1] for args in commands)
    assert keys == sorted(f"acmi:user:t-conc-c{i}:timeline" for i in range(3) for _ in range(2))
    for args in commands:
        _zadd_nx(args, args[1])


def test_both_sides_answer_the_same_spec(redis_server: RedisServer) -> None:
    """Ours (with and without hiredis) and, when node is here, the contender on one spec:
    every op timed n times, events counted, and ``hiredis=False`` really hides hiredis."""
    url = redis_server.url_for(DB)
    ops = [
        c.Op("append", "append", "user:t-both"),
        c.Op("batch", "batch", "user:t-both-b", batch=4, n=2, warmup=1),
        c.Op("conc", "append", "user:t-both-c", clients=2),
    ]
    pure = c.run_ours(url, ops, n=3, warmup=1, hiredis=False)
    runs = [c.run_ours(url, ops, n=3, warmup=1), pure]
    runtime = c.node_runtime()
    if isinstance(runtime, c.Node):
        runs.append(c.run_node(runtime, url, ops, n=3, warmup=1))
    for run in runs:
        assert [len(run.ops[o].ns) for o in ("append", "batch", "conc")] == [3, 2, 6], run.runtime
        assert [run.ops[o].items for o in ("append", "batch", "conc")] == [3, 8, 6], run.runtime
    assert pure.runtime.endswith("pure-Python parser")


def test_client_cpu_quick_rows(redis_server: RedisServer) -> None:
    result = client_cpu.run(redis_server, quick=True)
    rows = result["rows"]
    assert [r["op"] for r in rows] == [op[0] for op in client_cpu.OPS]
    expected = {
        "op",
        "ours_does",
        "reference_commands",
        "rounds",
        "contender",
        "contender_skipped",
        "ours_ops_per_s",
        "ours_p50_us",
        "ours_pure_ops_per_s",
        "ours_pure_p50_us",
        "contender_ops_per_s",
        "contender_p50_us",
        "ratio",
        "ratio_p50",
        "ratio_pure",
    }
    runtime = c.node_runtime()
    for row in rows:
        assert set(row) == expected
        assert row["ours_ops_per_s"] > 0 and row["ours_p50_us"] > 0
        if isinstance(runtime, str):
            assert row["contender_skipped"] == runtime and math.isnan(row["ratio"])
        else:
            assert row["contender_skipped"] is None
            assert row["contender_ops_per_s"] > 0 and row["ratio"] > 0 and row["ratio_p50"] > 0
        assert math.isnan(row["ours_pure_ops_per_s"]) != c.hiredis_importable()
    assert all(r["op"] in result["table"] for r in rows)
    assert result["note"]

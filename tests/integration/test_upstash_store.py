"""UpstashStore against the REST double (a real redis-server behind it): protocol
fidelity. Reply shapes, bytes through real Redis, pipelines, scripts, bearer auth, and
what a real socket does (a dropped connection, a hang). The retry/timeout/status policy
itself is unit-tested with httpx.MockTransport in tests/unit/test_upstash_transport.py."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import redis

from acmi_core.base.errors import (
    AcmiValidationError,
    StoreAuthError,
    StoreCommandError,
    StoreUnavailable,
)
from acmi_core.base.settings import Settings
from acmi_core.store.base import Script
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble

FAST = Settings(store_timeout_s=2.0, retry_base_delay_s=0.001, retry_max_delay_s=0.01)


class SleepRecorder:
    """Injected sleep: records the delays instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """Direct redis-py access, to write what the REST API cannot (non-UTF-8 bytes)."""
    with redis.Redis.from_url(redis_server.url) as client:
        yield client


def make_store(
    double: UpstashDouble,
    settings: Settings = FAST,
    token: str | None = None,
    sleep: SleepRecorder | None = None,
) -> UpstashStore:
    return UpstashStore(
        double.url,
        double.token if token is None else token,
        settings=settings,
        sleep=sleep or SleepRecorder(),
        rng=lambda: 0.5,
    )


# -- wiring ------------------------------------------------------------------------------


def test_from_settings_requires_url_and_token(upstash_double: UpstashDouble) -> None:
    with pytest.raises(AcmiValidationError):
        UpstashStore.from_settings(Settings())
    settings = Settings(upstash_url=upstash_double.url, upstash_token=upstash_double.token)
    with UpstashStore.from_settings(settings) as store:
        assert store.execute(("PING",)) == b"PONG"


# -- reply shapes ------------------------------------------------------------------------


def test_execute_reply_shapes(upstash_store: UpstashStore, upstash_double: UpstashDouble) -> None:
    s = upstash_store
    assert s.execute(("SET", "k", "héllo")) == b"OK"
    assert s.execute(("GET", "k")) == "héllo".encode()
    assert s.execute(("GET", "missing")) is None
    assert s.execute(("SET", "empty", "")) == b"OK"
    assert s.execute(("GET", "empty")) == b""
    assert s.execute(("INCRBY", "n", 2**62)) == 2**62
    assert s.execute(("PING",)) == b"PONG"  # a status reply other than OK is base64 too
    assert s.execute(("RPUSH", "l", "a", b"b", 3)) == 3
    assert s.execute(("LRANGE", "l", 0, -1)) == [b"a", b"b", b"3"]
    assert s.execute(("LRANGE", "nolist", 0, -1)) == []
    assert s.execute(("EVAL", "return {1, {'x', 2}, false}", 0)) == [1, [b"x", 2], None]
    assert s.execute(("ZADD", "z", 0.1, "m")) == 1
    score = s.execute(("ZSCORE", "z", "m"))
    assert isinstance(score, bytes) and float(score) == 0.1  # floats go as repr(): exact
    assert upstash_double.requests == 13  # exactly one request per execute
    assert upstash_double.requests_by_path == {"/": 13}


def test_non_utf8_values_survive_as_bytes(upstash_store: UpstashStore, raw: redis.Redis) -> None:
    raw.set("bin", b"\xff\xfe")
    raw.zadd("zbin", {b"\xff\xfe": 1, b"ok": 2})
    assert upstash_store.execute(("GET", "bin")) == b"\xff\xfe"
    assert upstash_store.execute(("ZRANGE", "zbin", 0, -1, "WITHSCORES")) == [
        b"\xff\xfe",
        b"1",
        b"ok",
        b"2",
    ]
    assert upstash_store.pipeline([("GET", "bin")]) == [b"\xff\xfe"]


def test_command_error_keeps_redis_text(upstash_store: UpstashStore) -> None:
    upstash_store.execute(("SET", "s", "x"))
    with pytest.raises(StoreCommandError, match=r"^WRONGTYPE"):
        upstash_store.execute(("LPUSH", "s", "y"))
    with pytest.raises(StoreCommandError, match=r"^ERR unknown command"):
        upstash_store.execute(("NOPE",))


# -- pipeline ----------------------------------------------------------------------------


def test_pipeline_keeps_other_results_when_one_fails(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    results = upstash_store.pipeline(
        [("SET", "a", "1"), ("LPUSH", "a", "x"), ("GET", "a"), ("INCR", "n"), ("GET", "none")]
    )
    assert results[0] == b"OK"
    assert isinstance(results[1], StoreCommandError)
    assert str(results[1]).startswith("WRONGTYPE")
    assert results[2:] == [b"1", 1, None]
    assert upstash_double.requests_by_path == {"/pipeline": 1}


# -- scripts -----------------------------------------------------------------------------


def test_eval_falls_back_to_eval_once_on_noscript(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    script = Script("redis.call('SET', KEYS[1], ARGV[1]); return {KEYS[1], tonumber(ARGV[2])}")
    upstash_store.execute(("SCRIPT", "FLUSH"))
    upstash_double.reset_counts()
    assert upstash_store.eval(script, ["k1"], ["v1", 7]) == [b"k1", 7]
    # EVALSHA -> NOSCRIPT, then EVAL with allow-key-locking, which the double's redis-server
    # (OSS 7.0) refuses: learnt once, then EVAL without it (on Upstash: 2)
    assert upstash_double.requests == 3
    assert upstash_store.script_dialect.key_locking is False
    upstash_double.reset_counts()
    assert upstash_store.eval(Script("return 2"), [], []) == 2
    assert upstash_double.requests == 2  # another script: EVALSHA -> NOSCRIPT, then EVAL
    upstash_double.reset_counts()
    assert upstash_store.eval(script, ["k2"], ["v2", 8]) == [b"k2", 8]
    assert upstash_double.requests == 1  # cached by SHA now
    assert upstash_store.execute(("MGET", "k1", "k2")) == [b"v1", b"v2"]


def test_eval_script_error_is_a_command_error(upstash_store: UpstashStore) -> None:
    with pytest.raises(StoreCommandError, match="boom"):
        upstash_store.eval(Script("return redis.error_reply('boom')"), [], [])


# -- a real socket: dropped connections, bearer auth, hangs ------------------------------


def test_dropped_connection_is_retried(upstash_double: UpstashDouble) -> None:
    # A server closing without answering must surface as an httpx.TransportError (retried).
    sleep = SleepRecorder()
    upstash_double.drop_next(1)
    with make_store(upstash_double, sleep=sleep) as store:
        assert store.execute(("SET", "k", "v")) == b"OK"
    assert upstash_double.requests == 2 and len(sleep.delays) == 1


def test_wrong_token_is_auth_error_without_retry(upstash_double: UpstashDouble) -> None:
    token = "wrong-secret-token-123"
    with make_store(upstash_double, token=token) as store, pytest.raises(StoreAuthError) as info:
        store.execute(("GET", "k"))
    assert upstash_double.requests == 1
    assert token not in str(info.value) and token not in repr(info.value)


def test_hang_fails_within_store_timeout(upstash_double: UpstashDouble) -> None:
    timeout = 0.5
    upstash_double.hang_next(1, seconds=10)
    store = make_store(upstash_double, settings=Settings(store_timeout_s=timeout))
    start = time.monotonic()
    with store, pytest.raises(StoreUnavailable):
        store.execute(("GET", "k"))
    elapsed = time.monotonic() - start
    assert elapsed < timeout + 0.3
    assert upstash_double.requests == 1  # the one attempt used the whole budget


def test_a_refused_connection_is_retried_then_unavailable() -> None:
    # The network's own errors arrive as httpx's (a ConnectError), so they are retried.
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # closed again before the store connects
    sleep = SleepRecorder()
    store = UpstashStore(f"http://127.0.0.1:{port}", "tok-1234", settings=FAST, sleep=sleep)
    with store, pytest.raises(StoreUnavailable, match=r"after 4 attempt\(s\).*ConnectError"):
        store.execute(("PING",))
    assert len(sleep.delays) == 3


# -- a proxy from the environment ----------------------------------------------------------


def test_the_environment_s_proxy_is_used(
    upstash_double: UpstashDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The double answers a forward proxy's request too (absolute URL, same headers), so
    # a store whose host does not exist still reaches Redis through it.
    monkeypatch.setenv("HTTP_PROXY", upstash_double.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    nowhere = "http://acmi-upstash.invalid"
    with UpstashStore(nowhere, upstash_double.token, settings=FAST) as store:
        assert store.execute(("SET", "k", "v")) == b"OK"
        assert store.pipeline([("GET", "k")]) == [b"v"]
    assert upstash_double.requests_by_path == {"/": 1, "/pipeline": 1}
    monkeypatch.setenv("NO_PROXY", "localhost,.invalid")  # a suffix: no proxy for it
    store = UpstashStore(nowhere, upstash_double.token, settings=FAST)
    with store, pytest.raises(StoreUnavailable, match="ConnectError"):
        store.execute(("GET", "k"))
    assert upstash_double.requests == 2


def test_a_proxy_the_store_cannot_use_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(AcmiValidationError, match="HTTP"):
        UpstashStore("https://eu1-x.upstash.io", "t")


# -- the requests on the wire (httpcore's pool, no httpx client) ---------------------------


def test_the_network_sends_httpx_s_default_request_and_reads_a_gzip_reply() -> None:
    """The store speaks httpcore directly: each request carries what httpx's client would
    send (Host, Content-Length, keep-alive, gzip accepted) and a gzip reply is decoded."""
    import gzip
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            command = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body = gzip.compress(json.dumps({"result": command[-1]}).encode())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Upstash-Sync-Token", "sync-7")
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with UpstashStore(url, "tok-1234", settings=FAST) as store:
            assert store.execute(("ECHO", "aGk=")) == b"hi"  # base64, as Upstash encodes
            assert store.execute(("ECHO", "aGk=")) == b"hi"  # the kept-alive connection
    finally:
        server.shutdown()
        server.server_close()
    first, second = seen
    assert first["host"] == f"127.0.0.1:{server.server_address[1]}"
    assert first["authorization"] == "Bearer tok-1234"
    assert first["upstash-encoding"] == "base64"
    assert first["accept-encoding"] == "gzip"
    assert first["connection"] == "keep-alive"
    assert first["content-type"] == "application/json"
    assert second["upstash-sync-token"] == "sync-7"  # the reply's token, sent back

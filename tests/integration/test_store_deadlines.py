"""ACMI_STORE_TIMEOUT_S is a deadline over a whole store call, and a Redis that refuses
commands for now (BUSY, LOADING, TRYAGAIN, CLUSTERDOWN, MASTERDOWN) is a 503, not a 500.

Drips go through the Upstash double (a reply that arrives a byte at a time, so every
single read is quick). BUSY comes from a real script looping on a redis-server of this
module's own: it lowers busy-reply-threshold, which must not leak into other tests. The
other transient replies come from a minimal RESP server, since a real Redis gives them
only while loading a dataset or running a cluster."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager

import pytest
import redis
from fastapi.testclient import TestClient

from acmi_core import Acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.errors import StoreBusy, StoreCommandError, StoreUnavailable
from acmi_core.base.settings import Settings
from acmi_core.store.base import Script
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer, redis_server
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import TEST_DBS

REDIS_DB = TEST_DBS["store_deadlines.redis"]  # this module's own database (tests/kit.py TEST_DBS)
DOUBLE_DB = TEST_DBS["store_deadlines.double"]  # this module's own database (tests/kit.py TEST_DBS)

DEADLINE = Settings(store_timeout_s=1.0, retry_base_delay_s=0.001, retry_max_delay_s=0.01)
# One drip-fed call may end this much past its deadline (a read already under way, the
# thread switch on 2 shared cores); the old per-read timeout let it run for seconds.
SLACK_S = 0.5


def upstash(double: UpstashDouble, settings: Settings = DEADLINE) -> UpstashStore:
    return UpstashStore(double.url, double.token, settings=settings)


def timed_failure(call: Callable[[], object]) -> tuple[StoreUnavailable, float]:
    start = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        call()
    return info.value, time.monotonic() - start


# -- a reply that drips: the deadline covers the whole call --------------------------------


@pytest.mark.parametrize("headers", [False, True], ids=["body drips", "headers drip too"])
def test_a_dripping_upstash_reply_fails_at_the_deadline(
    upstash_double: UpstashDouble, headers: bool
) -> None:
    value = "v" * 60  # ~100 bytes of reply body: 5 s at 50 ms a byte
    with upstash(upstash_double) as store:
        assert store.execute(("SET", "k", value)) == b"OK"
        upstash_double.reset_counts()
        upstash_double.drip_next(1, 0.05, headers=headers)
        error, elapsed = timed_failure(lambda: store.execute(("GET", "k")))
        assert DEADLINE.store_timeout_s <= elapsed + 0.05  # it did wait for the reply
        assert elapsed < DEADLINE.store_timeout_s + SLACK_S, f"ran {elapsed:.2f}s"
        assert type(error) is StoreUnavailable
        assert error.retry_after == 1.0
        assert "within 1s" in str(error) and "Timeout" in str(error)
        assert upstash_double.requests == 1  # no retry once the deadline has passed
        # The abandoned connection is closed, not reused mid-reply: the next call is clean.
        assert store.execute(("GET", "k")) == value.encode()


def test_a_slow_pipeline_reply_fails_at_the_deadline(upstash_double: UpstashDouble) -> None:
    with upstash(upstash_double) as store:
        upstash_double.drip_next(1, 0.05)
        _, elapsed = timed_failure(lambda: store.pipeline([("INCR", "n")] * 20))
        assert elapsed < DEADLINE.store_timeout_s + SLACK_S, f"ran {elapsed:.2f}s"


def test_a_silent_redis_fails_within_the_timeout_in_one_attempt() -> None:
    # RedisStore bounds each socket step, not the call (see acmi_core/store/redis.py), so
    # a hidden redis-py retry would multiply the wait: it must make exactly one attempt.
    silent = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    port = silent.getsockname()[1]
    settings = Settings(store_timeout_s=0.5)
    with closing(RedisStore.from_url(f"redis://127.0.0.1:{port}/{REDIS_DB}", settings)) as store:
        start = time.monotonic()
        with pytest.raises(StoreUnavailable, match="Timeout"):
            store.execute(("GET", "k"))
        elapsed = time.monotonic() - start
    silent.close()
    for conn in accepted:
        conn.close()
    assert settings.store_timeout_s - 0.05 <= elapsed < settings.store_timeout_s + SLACK_S
    assert len(accepted) == 1


# -- BUSY and friends: 503 with Retry-After on every backend -------------------------------

BUSY_LOOP = """
local function now() local t = redis.call('TIME'); return t[1] * 1000000 + t[2] end
local stop = now() + tonumber(ARGV[1])
while now() < stop do end
return 1
"""
GET_SCRIPT = Script("return redis.call('GET', KEYS[1])")


@pytest.fixture(scope="module")
def busy_server() -> Iterator[RedisServer]:
    """A redis-server of our own that answers BUSY 100 ms into a long script."""
    with redis_server() as server, redis.Redis.from_url(server.url) as client:
        try:
            client.config_set("busy-reply-threshold", 100)
        except redis.ResponseError:  # Redis < 7 names it lua-time-limit
            client.config_set("lua-time-limit", 100)
        yield server


@contextmanager
def script_running(server: RedisServer, seconds: float = 1.5) -> Iterator[None]:
    """A Lua busy loop runs on another connection; yields once Redis answers BUSY."""
    done = threading.Event()

    def run() -> None:
        with redis.Redis.from_url(server.url_for(REDIS_DB), socket_timeout=10) as client:
            client.eval(BUSY_LOOP, 0, int(seconds * 1_000_000))
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    with redis.Redis.from_url(server.url_for(REDIS_DB), socket_timeout=5) as probe:
        deadline = time.monotonic() + seconds
        while True:
            try:
                probe.ping()
            except redis.ResponseError as exc:
                assert str(exc).startswith("BUSY"), exc
                break
            assert time.monotonic() < deadline, "the script never made Redis answer BUSY"
            time.sleep(0.02)
    try:
        yield
        assert not done.is_set(), "the script ended before the assertions ran"
    finally:
        thread.join(timeout=10)


def assert_busy(error: BaseException) -> None:
    assert type(error) is StoreBusy
    assert isinstance(error, StoreUnavailable)  # the API's 503
    assert error.retry_after == 1.0
    assert error.code == "store_busy"
    assert "BUSY" in str(error)


def test_busy_redis_is_transient_on_the_redis_backend(busy_server: RedisServer) -> None:
    store = RedisStore.from_url(busy_server.url_for(REDIS_DB), Settings(store_timeout_s=5.0))
    with closing(store), script_running(busy_server):
        for call in (
            lambda: store.execute(("GET", "k")),
            lambda: store.pipeline([("GET", "k"), ("INCR", "n")]),
            lambda: store.eval(GET_SCRIPT, ["k"], []),
        ):
            with pytest.raises(StoreBusy) as info:
                call()
            assert_busy(info.value)


def test_busy_redis_is_transient_through_the_upstash_double(busy_server: RedisServer) -> None:
    url = busy_server.url_for(DOUBLE_DB)
    with UpstashDouble(url) as double, upstash(double, Settings(store_timeout_s=5.0)) as store:
        # The double's own connection to Redis is opened now: its handshake (SELECT)
        # would get BUSY too, which a service whose connections are long open never shows.
        assert store.execute(("PING",)) == b"PONG"
        with script_running(busy_server):
            for call in (
                lambda: store.execute(("GET", "k")),
                lambda: store.pipeline([("GET", "k"), ("INCR", "n")]),
                lambda: store.eval(GET_SCRIPT, ["k"], []),
            ):
                double.reset_counts()
                with pytest.raises(StoreBusy) as info:
                    call()
                assert_busy(info.value)
                assert double.requests == 1  # answered at once; the caller retries later


def test_busy_store_is_a_503_with_retry_after(busy_server: RedisServer) -> None:
    settings = Settings(store_timeout_s=5.0)
    with closing(RedisStore.from_url(busy_server.url_for(REDIS_DB), settings)) as store:
        acmi = Acmi(store, settings)
        key, _ = apikeys.mint(store, tenant="default", scope="write", name="busy", now_ms=1)
        auth = {"authorization": f"Bearer {key}"}
        with TestClient(create_app(ApiContext(acmi)), raise_server_exceptions=False) as client:
            assert client.get("/v1/entities/user:busy/signals", headers=auth).status_code == 200
            with script_running(busy_server):
                response = client.get("/v1/entities/user:busy/signals", headers=auth)
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"] == "store_busy"


def test_busykey_is_still_a_command_error(busy_server: RedisServer) -> None:
    # BUSYKEY (RESTORE onto an existing key) shares the prefix but is final: not a 503.
    with closing(RedisStore.from_url(busy_server.url_for(REDIS_DB))) as store:
        store.execute(("SET", "dumped", "x"))
        dump = store.execute(("DUMP", "dumped"))
        assert isinstance(dump, bytes)
        with pytest.raises(StoreCommandError, match=r"^BUSYKEY") as info:
            store.execute(("RESTORE", "dumped", 0, dump))
        assert not isinstance(info.value, StoreUnavailable)


class RespServer:
    """Answers CLIENT and SELECT (the connection handshake) with +OK and every other
    command with one fixed error reply, as a loading or resharding Redis does."""

    def __init__(self, error: str) -> None:
        self.error = f"-{error}\r\n".encode()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        with conn, reader:
            while True:
                line = reader.readline()
                if not line.startswith(b"*"):
                    return
                args = []
                for _ in range(int(line[1:])):
                    size = int(reader.readline()[1:])
                    args.append(reader.read(size + 2)[:-2])
                name = args[0].upper()
                conn.sendall(b"+OK\r\n" if name in (b"CLIENT", b"SELECT") else self.error)

    def close(self) -> None:
        self._sock.close()


@pytest.mark.parametrize(
    "reply",
    [
        "LOADING Redis is loading the dataset in memory",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down",
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
    ],
    ids=lambda reply: reply.split()[0],
)
def test_transient_replies_are_busy_on_the_redis_backend(reply: str) -> None:
    server = RespServer(reply)
    store = RedisStore.from_url(f"redis://127.0.0.1:{server.port}/{REDIS_DB}")
    try:
        for call in (
            lambda: store.execute(("GET", "k")),
            lambda: store.pipeline([("GET", "k"), ("GET", "j")]),
        ):
            with pytest.raises(StoreBusy) as info:
                call()
            assert info.value.retry_after == 1.0
            assert reply.split(maxsplit=1)[0] in str(info.value)  # the code Redis gave is kept
    finally:
        store.close()
        server.close()

"""Shared fixtures: a real redis-server, the Upstash REST double in front of it, and a store."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis

from acmi_core import Acmi, Store, create_acmi
from acmi_core.settings import Settings
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from tests.upstash_double import UpstashDouble


@dataclass(frozen=True)
class RedisServer:
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server (cjson, MULTI/EXEC and Lua behave as in production)."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail(
            "redis-server is not on PATH: these tests need a real Redis 7 "
            "(e.g. `apt-get install redis-server`)",
            pytrace=False,
        )
    port = _free_port()
    args = [exe, "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = RedisServer(port)
    client = redis.Redis.from_url(server.url, socket_timeout=1)
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                pytest.fail(f"redis-server exited with {proc.returncode}: {stderr}", pytrace=False)
            try:
                if client.ping():
                    break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    pytest.fail(f"redis-server did not answer PING on port {port}", pytrace=False)
                time.sleep(0.02)
        yield server
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def upstash_double(redis_server: RedisServer) -> Iterator[UpstashDouble]:
    """A fresh double per test (fresh counts and faults) over a flushed database."""
    with redis.Redis.from_url(redis_server.url) as client:
        client.flushdb()
    with UpstashDouble(redis_server.url) as double:
        yield double


@pytest.fixture
def upstash_store(upstash_double: UpstashDouble) -> Iterator[UpstashStore]:
    settings = Settings(store_timeout_s=2.0, retry_base_delay_s=0.001, retry_max_delay_s=0.01)
    with UpstashStore(upstash_double.url, upstash_double.token, settings=settings) as store:
        yield store


BACKENDS = ("memory", "redis", "upstash")


@pytest.fixture(params=BACKENDS)
def acmi(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[Acmi]:
    """An ACMI client on each backend in turn: embedded, real Redis, Upstash REST double."""
    store: Store
    if request.param == "memory":
        store = MemoryStore()
    elif request.param == "redis":
        # db 1: the Upstash double flushes db 0 between its tests
        store = RedisStore.from_url(redis_server.url.replace("/0", "/1"))
    else:
        store = request.getfixturevalue("upstash_store")
    yield create_acmi(store, Settings())
    if request.param != "upstash":  # the upstash_store fixture closes its own
        store.close()


@pytest.fixture
def raw(acmi: Acmi, redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A plain redis-py client on the same data as ``acmi``: for writing what other
    tools (or corruption) leave behind, bytes the REST API could not even carry."""
    if isinstance(acmi.store, RedisStore):  # memory is a RedisStore over fakeredis
        yield acmi.store._client
        return
    with redis.Redis.from_url(redis_server.url, protocol=2) as client:
        yield client

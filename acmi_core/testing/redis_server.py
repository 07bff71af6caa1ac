"""A throwaway ``redis-server`` on a free loopback port, for tests and benchmarks that need
the real thing (cjson, MULTI/EXEC and Lua behave as in production; fakeredis does not)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis

# Databases on the server: one per test module that needs its own (tests/kit.py DB and
# TEST_DBS), past Redis's default 16.
DATABASES = 64


class RedisServerError(RuntimeError):
    """redis-server is missing, exited, or never answered."""


@dataclass(frozen=True)
class RedisServer:
    port: int
    version: str

    def url_for(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    @property
    def url(self) -> str:
        return self.url_for(0)

    def flush(self, db: int = 0) -> None:
        """Empty one database and the script cache (as on a fresh server)."""
        with redis.Redis.from_url(self.url_for(db)) as client:
            client.flushdb()
            client.script_flush()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def redis_server(start_timeout_s: float = 10.0) -> Iterator[RedisServer]:
    """Start redis-server (no persistence), wait for PING, stop it afterwards."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise RedisServerError(
            "redis-server is not on PATH: install Redis 7 (e.g. `apt-get install redis-server`)"
        )
    port = free_port()
    args = [exe, "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
    args += ["--databases", str(DATABASES)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    client = redis.Redis(port=port, socket_timeout=1)
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RedisServerError(f"redis-server exited with {proc.returncode}: {err}")
            try:
                if client.ping():
                    break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise RedisServerError(f"redis-server did not answer on port {port}") from None
                time.sleep(0.02)
        info = client.info("server")
        yield RedisServer(port, str(info.get("redis_version", "?")))
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

"""What every bench section shares: a redis-server of its own, the Upstash REST double,
statistics and plain-text tables."""

from __future__ import annotations

import math
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests.upstash_double is imported from the source tree
    sys.path.insert(0, str(ROOT))

from tests.upstash_double import UpstashDouble  # noqa: E402

__all__ = [
    "ROOT",
    "RedisServer",
    "UpstashDouble",
    "fmt_table",
    "median",
    "percentile",
    "redis_server",
]


@dataclass(frozen=True)
class RedisServer:
    port: int
    version: str

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def flush(self, db: int = 0) -> None:
        with redis.Redis.from_url(self.url(db)) as client:
            client.flushdb()
            client.script_flush()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A throwaway redis-server on a free loopback port (no persistence), stopped after."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("bench: redis-server is not on PATH (apt-get install redis-server)")
    port = _free_port()
    args = [exe, "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    client = redis.Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_timeout=1)
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise SystemExit(f"bench: redis-server exited with {proc.returncode}: {err}")
            try:
                if client.ping():
                    break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"bench: redis-server did not answer on {port}") from None
                time.sleep(0.02)
        info: Any = client.info("server")
        yield RedisServer(port, str(info.get("redis_version", "?")))
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- statistics -----------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): p99 of 100 samples is the 99th smallest."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


# --- tables ---------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return str(value)


def fmt_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table (readable as plain text too)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(row) for row in cells]
    return "\n".join(out)

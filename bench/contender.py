"""The same-run contender: the reference TypeScript SDK's Redis commands on node + ioredis
(``bench/contender.cjs``), next to ours (``bench/_cpu_worker.py``), both one fresh process
per round fed the same spec and answering the same JSON.

The reference SDK (``src/adapters/redis.ts`` and ``src/client.ts``, ioredis ^5 as its peer
dependency) issues, per operation:

- ``timeline.append``: ``ZADD acmi:<entity>:timeline NX <ts> <event JSON>``
- ``signals.set``: ``GET acmi:<entity>:signals``, then ``SET`` of the whole map (racy)
- ``profile.merge``: ``GET acmi:<entity>:profile``, then ``SET`` of the merged object (racy)
- get, which the SDK composes from three calls (``profile.get``, ``signals.all``,
  ``timeline.read(limit=50, reverse=True)``): ``GET`` profile, ``GET`` signals,
  ``ZREVRANGEBYSCORE acmi:<entity>:timeline +inf -inf LIMIT 0 50``; awaited one after
  another, or together with ``Promise.all`` (as the reference's MCP server does)
- ``batch`` of k appends: ``MULTI``, k x ``ZADD NX``, ``EXEC``

ioredis is installed with npm into ``bench/.node/`` (git-ignored) at a pinned version on
first use; without node, npm or the install, the contender is skipped with the reason.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._infra import ROOT, median, percentile

IOREDIS_VERSION = "5.11.1"  # the newest 5.x: the reference's peer dependency is ioredis ^5
NODE_DIR = ROOT / "bench" / ".node"
SCRIPT = ROOT / "bench" / "contender.cjs"
TIMEOUT_S = 900

# The reference SDK's commands per contender op kind (per call; batch per k appends).
REFERENCE_COMMANDS: dict[str, str] = {
    "append": "ZADD NX",
    "signals.set": "GET + SET",
    "profile.merge": "GET + SET",
    "get": "GET, GET, ZREVRANGEBYSCORE LIMIT 0 50, awaited in turn",
    "get.all": "GET, GET, ZREVRANGEBYSCORE LIMIT 0 50 under Promise.all",
    "batch": "MULTI, k x ZADD NX, EXEC",
}


@dataclass(frozen=True)
class Op:
    """One measured operation: ``kind`` is one of ``REFERENCE_COMMANDS`` (ours runs
    ``get.all`` as its own ``get``); ``clients`` > 0 runs that many concurrent appenders;
    ``n`` and ``warmup``, when given, override the run's counts for this op."""

    name: str
    kind: str
    entity: str
    batch: int = 1
    clients: int = 0
    n: int | None = None
    warmup: int | None = None

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "entity": self.entity}
        if self.kind == "batch":
            out["batch"] = self.batch
        if self.clients:
            out["clients"] = self.clients
        if self.n is not None:
            out["n"] = self.n
        if self.warmup is not None:
            out["warmup"] = self.warmup
        return out


@dataclass(frozen=True)
class Timing:
    """One op's calls in one process: per-call ns, and the loop's wall time."""

    ns: list[int]
    elapsed_ns: int
    items: int  # events written (batches and concurrent clients count every event)

    @property
    def calls_per_s(self) -> float:
        return len(self.ns) / self.elapsed_ns * 1e9

    @property
    def items_per_s(self) -> float:
        return self.items / self.elapsed_ns * 1e9

    def p50_us(self) -> float:
        return median(self.ns) / 1000

    def p99_us(self) -> float:
        return percentile(self.ns, 99) / 1000


@dataclass(frozen=True)
class Run:
    runtime: str
    ops: dict[str, Timing]


def spec(url: str, ops: list[Op], *, n: int, warmup: int, trace: bool = False) -> str:
    return json.dumps(
        {"url": url, "n": n, "warmup": warmup, "trace": trace, "ops": [o.spec() for o in ops]}
    )


def _parse(stdout: str) -> Run:
    data = json.loads(stdout)
    ops = {name: Timing(t["ns"], t["elapsed_ns"], t["items"]) for name, t in data["ops"].items()}
    return Run(data["runtime"], ops)


def _run(argv: list[str], env: dict[str, str], what: str) -> Run:
    result = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({result.returncode}): {result.stderr[-3000:]}")
    return _parse(result.stdout)


# --- ours -----------------------------------------------------------------------------------


def hiredis_importable() -> bool:
    """Whether redis-py can load hiredis here (then ours runs with and without it)."""
    import importlib.util

    return importlib.util.find_spec("hiredis") is not None


def run_ours(url: str, ops: list[Op], *, n: int, warmup: int, hiredis: bool = True) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACMI_", "UPSTASH_"))}
    env["PYTHONPATH"] = str(ROOT)
    argv = [sys.executable, "-m", "bench._cpu_worker", spec(url, ops, n=n, warmup=warmup)]
    return _run(argv + ([] if hiredis else ["--no-hiredis"]), env, "ours")


# --- the contender --------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    node: str
    modules: Path  # NODE_PATH: where ioredis resolves from


def _installed_version() -> str | None:
    manifest = NODE_DIR / "node_modules" / "ioredis" / "package.json"
    try:
        version: str = json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    return version


@functools.cache
def node_runtime() -> Node | str:
    """node with the pinned ioredis, installed on first use; else why not (a reason)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return f"skipped: {'node' if node is None else 'npm'} is not on PATH"
    if _installed_version() != IOREDIS_VERSION:
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        argv = [npm, "install", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund"]
        try:
            result = subprocess.run(
                [*argv, "--silent", f"ioredis@{IOREDIS_VERSION}"],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"skipped: npm install ioredis@{IOREDIS_VERSION} timed out"
        if result.returncode != 0 or _installed_version() != IOREDIS_VERSION:
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"skipped: npm install ioredis@{IOREDIS_VERSION} failed ({tail[0][:200]})"
    return Node(node, NODE_DIR / "node_modules")


def run_node(
    runtime: Node, url: str, ops: list[Op], *, n: int, warmup: int, trace: bool = False
) -> Run:
    env = {**os.environ, "NODE_PATH": str(runtime.modules)}
    argv = [runtime.node, str(SCRIPT), spec(url, ops, n=n, warmup=warmup, trace=trace)]
    return _run(argv, env, "the node contender")


def paired_ratio(ours: list[float], theirs: list[float]) -> float:
    """Median over rounds of ours/theirs in the same round: interleaved rounds see the
    same machine noise, so the per-round ratio is steadier than a ratio of medians."""
    return median([a / b for a, b in zip(ours, theirs, strict=True) if b > 0])

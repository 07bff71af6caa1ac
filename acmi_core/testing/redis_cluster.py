"""A throwaway Redis Cluster on free loopback ports, for tests and benchmarks: ``masters``
``redis-server --cluster-enabled yes`` processes, the 16384 slots split between them by
``CLUSTER ADDSLOTSRANGE``, joined by ``CLUSTER MEET``, ready once every node reports
``cluster_state:ok`` and knows every other. One master holding every slot is the shape
ElastiCache Serverless presents (a cluster-enabled endpoint, one slot map). With
``replicas``, each master gets that many (``CLUSTER REPLICATE``), ready once each
replica's link to its master is up: the failover drill's shape, whose ``pids`` let it
kill a master."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis

from acmi_core.testing.redis_server import RedisServerError, free_port

SLOTS = 16384


@dataclass(frozen=True)
class RedisCluster:
    ports: tuple[int, ...]  # the masters'
    version: str
    replica_ports: tuple[int, ...] = ()
    pids: dict[int, int] = field(default_factory=dict)  # port -> the node's process id

    @property
    def url(self) -> str:
        """One seed node's URL (a cluster client learns the others from it)."""
        return f"redis://127.0.0.1:{self.ports[0]}"

    @property
    def urls(self) -> list[str]:
        return [f"redis://127.0.0.1:{port}" for port in self.ports]

    def flush(self) -> None:
        """Empty every master and its script cache."""
        for port in self.ports:
            with redis.Redis(port=port) as client:
                client.flushall()
                client.script_flush()


def _start(
    exe: str, port: int, bus: int, workdir: Path, node_timeout_ms: int
) -> subprocess.Popen[bytes]:
    args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--daemonize", "no"]
    # the bus port is named: the default (port + 10000) may be taken or past 65535
    args += ["--cluster-port", str(bus)]
    args += ["--save", "", "--appendonly", "no", "--cluster-enabled", "yes"]
    # each node keeps its own nodes.conf: several nodes share the temporary directory
    args += ["--cluster-config-file", f"nodes-{port}.conf", "--dir", str(workdir)]
    args += ["--cluster-node-timeout", str(node_timeout_ms)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait(proc: subprocess.Popen[bytes], client: redis.Redis, deadline: float) -> None:
    while True:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RedisServerError(f"redis-server exited with {proc.returncode}: {err}")
        try:
            if client.ping():
                return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise RedisServerError("a cluster node did not answer") from None
            time.sleep(0.02)


def _ready(clients: list[redis.Redis]) -> bool:
    for client in clients:
        info = client.execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
        text = info.decode() if isinstance(info, bytes) else str(info)
        fields = dict(line.split(":", 1) for line in text.split() if ":" in line)
        if fields.get("cluster_state") != "ok" or fields.get("cluster_known_nodes") != str(
            len(clients)
        ):
            return False
    return True


@contextmanager
def redis_cluster(
    masters: int = 3,
    start_timeout_s: float = 20.0,
    *,
    replicas: int = 0,
    node_timeout_ms: int = 5000,
) -> Iterator[RedisCluster]:
    """Start a cluster of ``masters`` nodes (no persistence), each with ``replicas``
    replicas, wait for ``cluster_state:ok`` on every node (and every replica's link), stop
    every node afterwards. ``node_timeout_ms``: how long a master is unreachable before
    its replica takes over."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise RedisServerError(
            "redis-server is not on PATH: install Redis 7 (e.g. `apt-get install redis-server`)"
        )
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="acmi-cluster-")))
        total = masters * (1 + replicas)
        ports = tuple(free_port() for _ in range(total))
        buses = tuple(free_port() for _ in range(total))
        procs: list[subprocess.Popen[bytes]] = []
        clients: list[redis.Redis] = []

        def stop() -> None:
            for client in clients:
                client.close()
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

        stack.callback(stop)
        for port, bus in zip(ports, buses, strict=True):
            procs.append(_start(exe, port, bus, workdir, node_timeout_ms))
            clients.append(redis.Redis(port=port, socket_timeout=2))
        deadline = time.monotonic() + start_timeout_s
        for proc, client in zip(procs, clients, strict=True):
            _wait(proc, client, deadline)
        share = SLOTS // masters
        for i, client in enumerate(clients[:masters]):
            first = i * share
            last = SLOTS - 1 if i == masters - 1 else first + share - 1
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)  # type: ignore[no-untyped-call]
        for port, bus in zip(ports[1:], buses[1:], strict=True):
            meet = ("CLUSTER", "MEET", "127.0.0.1", port, bus)
            clients[0].execute_command(*meet)  # type: ignore[no-untyped-call]
        while not _ready(clients):
            if time.monotonic() > deadline:
                raise RedisServerError(f"the cluster on {ports} never reached cluster_state:ok")
            time.sleep(0.05)
        ids = [client.execute_command("CLUSTER", "MYID") for client in clients[:masters]]  # type: ignore[no-untyped-call]
        for n, client in enumerate(clients[masters:]):
            client.execute_command("CLUSTER", "REPLICATE", ids[n % masters])  # type: ignore[no-untyped-call]
        while not all(
            client.info("replication").get("master_link_status") == "up"
            for client in clients[masters:]
        ) or not _ready(clients):
            if time.monotonic() > deadline:
                raise RedisServerError(f"the replicas on {ports[masters:]} never synced")
            time.sleep(0.05)
        version = str(clients[0].info("server").get("redis_version", "?"))
        pids = {port: proc.pid for port, proc in zip(ports, procs, strict=True)}
        yield RedisCluster(ports[:masters], version, ports[masters:], pids)

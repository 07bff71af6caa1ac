"""Redis Cluster: the cluster client, and the refusal of what cannot work on a cluster.

:class:`ClusterStore` (``ACMI_REDIS_CLUSTER=1``, ``ACMI_REDIS_URL`` a seed node, the
cluster key layout) runs every call through redis-py's ``redis.cluster.RedisCluster``,
which keeps the slot map, follows MOVED and ASK, retries TRYAGAIN and CLUSTERDOWN, and
sends a pipeline to each node its commands' slots live on: ACMI has no slot router of its
own. Each script's keys share their tenant's hash tag (``Layout.CLUSTER``), so each runs
on one node; a command whose keys span slots is refused as CROSSSLOT, never split.

What a cluster has no answer for is refused, never answered partially: a keyspace scan
(SCAN, KEYS, DBSIZE, RANDOMKEY: each node holds part of it; ``acmi doctor`` and
``acmi migrate`` walk each primary instead, :meth:`ClusterStore.scan_primaries`), and an
error never carries a node's address (MOVED and ASK replies name one: they become a
503 to retry).

:class:`CheckedRespStore` is the one-node store of ``ACMI_REDIS_URL`` in the reference
layout: before its first command it asks ``INFO cluster``, and a cluster-enabled server
(a cluster node, ElastiCache Serverless) stops it there with an error naming
``ACMI_KEY_LAYOUT``: the reference keys of one write hash to many slots.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import (
    AcmiValidationError,
    StoreBusy,
    StoreCommandError,
    StoreError,
    StoreUnavailable,
)
from acmi_core.base.keys import Layout
from acmi_core.base.settings import Settings
from acmi_core.store.base import (
    BUSY_RETRY_AFTER_S,
    Arg,
    Command,
    Reply,
    Script,
    error_reply,
    eval_script,
    pipeline_slots,
)
from acmi_core.store.redis import RedisStore, RespStore, _error_text, _reply
from acmi_core.store.resp import Endpoint, Pool

if TYPE_CHECKING:
    from redis.cluster import RedisCluster

# ACMI_REDIS_WAIT_REPLICAS: how long a write waits for its replicas' acknowledgement
# (WAIT's timeout) before it answers 503, the write possibly made: a retry is idempotent.
WAIT_TIMEOUT_MS: Final = 1000
# The one-key writes outside scripts (API keys, the tenant registry) that wait too.
WAITED_COMMANDS: Final = frozenset(
    {"SET", "HSET", "HSETNX", "SADD", "SREM", "DEL", "HDEL", "ZADD", "ZREM", "PEXPIRE"}
)
# Commands whose answer is the whole keyspace: on a cluster each node has a part.
KEYSPACE_COMMANDS: Final = frozenset({"SCAN", "KEYS", "DBSIZE", "RANDOMKEY"})
# A node's address as MOVED/ASK and connection errors put it: never in an answer.
_ADDRESS: Final = re.compile(r"\[?[0-9A-Za-z.:_-]*[.:][0-9A-Za-z.:_-]*\]?:\d{2,5}")

LAYOUT_ON_CLUSTER: Final = (
    "the store is a cluster-enabled Redis (INFO cluster: cluster_enabled:1) and"
    " ACMI_KEY_LAYOUT is reference, whose keys of one write hash to different slots:"
    " set ACMI_KEY_LAYOUT=cluster (with ACMI_REDIS_CLUSTER=1) for a new deployment"
)


def check_cluster_settings(settings: Settings) -> None:
    """``ACMI_REDIS_CLUSTER`` names a seed node of ``ACMI_REDIS_URL`` and needs the cluster
    layout: each misconfiguration as one error naming its variable."""
    if not settings.redis_url:
        raise AcmiValidationError(
            "ACMI_REDIS_CLUSTER", "redis_url", "needs ACMI_REDIS_URL (a seed node of the cluster)"
        )
    if settings.redis_url.startswith("unix://"):
        raise AcmiValidationError(
            "ACMI_REDIS_CLUSTER", "redis_url", "needs a redis:// or rediss:// ACMI_REDIS_URL"
        )
    if settings.key_layout != Layout.CLUSTER:
        raise AcmiValidationError(
            "ACMI_KEY_LAYOUT",
            "key_layout",
            "must be cluster with ACMI_REDIS_CLUSTER=1: the reference layout's keys of one"
            " write hash to different slots",
        )


def cluster_enabled(info: Reply) -> bool:
    """Whether an ``INFO cluster`` reply says ``cluster_enabled:1``."""
    text = info.decode("utf-8", "replace") if isinstance(info, bytes) else ""
    return any(line.strip() == "cluster_enabled:1" for line in text.splitlines())


class CheckedRespStore(RespStore):
    """The RESP store, refusing a cluster-enabled server in the reference layout before its
    first command (one ``INFO cluster``, once per store)."""

    def __init__(self, url: str, pool: Pool) -> None:
        super().__init__(url, pool)
        self._checked = False
        self._check_lock = threading.Lock()

    @classmethod
    def for_settings(cls, url: str, settings: Settings) -> CheckedRespStore:
        return cls(url, Pool(Endpoint.parse(url), settings.store_timeout_s))

    def _check(self) -> None:
        if self._checked:
            return
        with self._check_lock:
            if self._checked:
                return
            try:
                info = super().execute(("INFO", "cluster"))
            except StoreCommandError:
                info = None  # a server without INFO (renamed, refused) is no cluster node
            if cluster_enabled(info):
                raise StoreError(LAYOUT_ON_CLUSTER, field="ACMI_KEY_LAYOUT", rule="key_layout")
            self._checked = True

    def execute(self, command: Command) -> Reply:
        self._check()
        return super().execute(command)

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        self._check()
        return super().pipeline(commands)

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        self._check()
        return super().eval(script, keys, args)


class ClusterStore(RedisStore):
    """Over redis-py's RedisCluster, built on the first call (as the RESP store connects
    then): the slot map is read from the seed node of ``url``."""

    name = "redis"
    description = "redis cluster"

    def __init__(self, url: str, settings: Settings) -> None:  # no super(): no client yet
        self._url = url
        self._timeout_s = settings.store_timeout_s
        self._wait_replicas = settings.redis_wait_replicas
        self._cluster: RedisCluster | None = None
        self._lock = threading.Lock()

    def _connected(self) -> RedisCluster:
        cluster = self._cluster
        if cluster is None:
            with self._lock:
                if self._cluster is None:
                    from redis.cluster import RedisCluster

                    with _translate():
                        self._cluster = RedisCluster.from_url(
                            self._url,
                            socket_timeout=self._timeout_s,
                            socket_connect_timeout=self._timeout_s,
                            protocol=2,  # RESP2: bulk-string scores, as every backend answers
                        )
                cluster = self._cluster
        _raw_replies(cluster)
        return cluster

    def execute(self, command: Command) -> Reply:
        _refuse_keyspace(command)
        if self._wait_replicas and len(command) > 1 and _name(command) in WAITED_COMMANDS:
            return self._waited(command, command[1])
        cluster = self._connected()
        with _translate():
            if _name(command) == "SCRIPT":
                result = _on_every_node(cluster, command)
            else:
                result = cluster.execute_command(*command)  # type: ignore[no-untyped-call]
        return _reply(_one_answer(command, result))

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        import redis

        if not commands:
            return []
        for command in commands:
            _refuse_keyspace(command)
        cluster = self._connected()
        with _translate():
            pipe = cluster.pipeline(transaction=False)  # type: ignore[no-untyped-call]
            for command in commands:
                pipe.execute_command(*command)
            results: list[Any] = pipe.execute(raise_on_error=False)
        slots: list[Reply | StoreCommandError | StoreBusy] = []
        for command, result in zip(commands, results, strict=True):
            if isinstance(result, redis.RedisError):
                error = _error(result)
                if isinstance(error, StoreUnavailable) and not isinstance(error, StoreBusy):
                    raise error  # a node unreachable fails the call, as on one node
                slots.append(error)
            else:
                slots.append(_reply(_one_answer(command, result)))
        return pipeline_slots(slots)

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        if self._wait_replicas and not script.read_only and keys:
            key = keys[0]  # every key of a script shares its slot
            return eval_script(lambda command: self._waited(command, key), script, keys, args)
        return eval_script(self.execute, script, keys, args)

    def _waited(self, command: Command, key: Arg) -> Reply:
        """``command``, then ``WAIT <replicas> WAIT_TIMEOUT_MS``, on one connection to the
        primary of ``key``'s slot (WAIT counts the replicas that have that connection's
        writes, so the two cannot go through the cluster client's pool). Acknowledged
        only when enough replicas have it; else a 503, the write maybe made. An error
        (the slot moved, the primary died) refreshes the slot map, as the cluster client
        does on its own path, and is answered as there (a 503 to retry)."""
        import redis

        cluster = self._connected()
        try:
            with _translate():
                node = cluster.get_node_from_key(key)  # type: ignore[no-untyped-call]
                client = cluster.get_redis_connection(node)
                pipe = client.pipeline(transaction=False)
                wait = ("WAIT", self._wait_replicas, WAIT_TIMEOUT_MS)
                for sent in (command, wait):
                    pipe.execute_command(*sent)  # type: ignore[no-untyped-call]
                reply, acked = pipe.execute(raise_on_error=False)
            if isinstance(reply, redis.RedisError):
                raise _error(reply)
        except (StoreBusy, StoreUnavailable):
            self._refresh(cluster)
            raise
        if isinstance(acked, redis.RedisError) or not isinstance(acked, int):
            raise StoreUnavailable("redis cluster: WAIT failed after a write; retry it")
        if acked < self._wait_replicas:
            raise StoreUnavailable(
                f"a write reached {acked} of the {self._wait_replicas} replica(s)"
                f" ACMI_REDIS_WAIT_REPLICAS asks for within {WAIT_TIMEOUT_MS} ms: retry it"
            )
        return _reply(reply)

    @staticmethod
    def _refresh(cluster: RedisCluster) -> None:
        """Read the slot map again (after a failover it names the new primary)."""
        import redis
        from redis.exceptions import RedisClusterException

        # no node answers yet: the next call tries again
        with contextlib.suppress(redis.RedisError, RedisClusterException):
            cluster.nodes_manager.initialize()

    def scan_primaries(self, pattern: str, count: int) -> Iterator[list[bytes]]:
        """Every key matching ``pattern``: each primary's SCAN (redis-py's ``scan`` with
        ``target_nodes``, the library's per-node call), one step a batch, primary after
        primary. What ``acmi doctor`` and ``acmi migrate`` walk instead of the SCAN this
        store refuses; a slot moving between primaries meanwhile may be seen twice or
        not at all, as a key written during one node's SCAN may."""
        cluster = self._connected()
        with _translate():
            primaries = list(cluster.get_primaries())  # type: ignore[no-untyped-call]
        for node in primaries:
            cursor = 0
            while True:
                with _translate():
                    # ({node name: next cursor}, keys): typed as any reply by redis-py
                    reply: Any = cluster.scan(
                        cursor=cursor, match=pattern, count=count, target_nodes=node
                    )
                cursors, found = reply
                cursor = int(cursors[node.name])
                yield [k for k in found if isinstance(k, bytes)]
                if cursor == 0:
                    break

    def close(self) -> None:
        with self._lock:
            if self._cluster is not None:
                self._cluster.close()
                self._cluster = None


def _on_every_node(cluster: RedisCluster, command: Command) -> dict[str, Any]:
    """``command`` (SCRIPT FLUSH, SCRIPT LOAD) on each node, node name -> its raw reply:
    redis-py folds the nodes' replies by its own response policy (since 8: SCRIPT FLUSH
    answers True), which a store must not answer."""
    return {
        node.name: cluster.get_redis_connection(node).execute_command(*command)  # type: ignore[no-untyped-call]
        for node in cluster.get_nodes()  # type: ignore[no-untyped-call]
    }


def _one_answer(command: Command, result: Any) -> Any:
    """A command redis-py sends to every node (SCRIPT FLUSH, SCRIPT LOAD) answers a map of
    node -> reply: the one reply when every node gave it, never the node names."""
    if not isinstance(result, dict):
        return result
    replies = list(result.values())
    if replies and all(reply == replies[0] for reply in replies):
        return replies[0]
    raise StoreCommandError(f"{command[0]!s} answered differently on the cluster's nodes")


def _raw_replies(cluster: RedisCluster) -> None:
    """No response callbacks on any node's client: replies stay raw (bytes, int, list,
    None), as RedisStore keeps them. Checked per call: a slot-map refresh may add a node."""
    from redis.client import CaseInsensitiveDict

    for node in cluster.get_nodes():  # type: ignore[no-untyped-call]
        client = cluster.get_redis_connection(node)  # made now if the node is new
        if client.response_callbacks:
            client.response_callbacks = CaseInsensitiveDict({})


def _name(command: Command) -> str:
    name = command[0]
    return (name.decode() if isinstance(name, bytes) else str(name)).upper()


def _refuse_keyspace(command: Command) -> None:
    name = _name(command)
    if name in KEYSPACE_COMMANDS:
        raise StoreCommandError(
            f"{name.upper()} reads the whole keyspace, which a Redis Cluster splits over its"
            " nodes: not supported with ACMI_REDIS_CLUSTER=1"
        )


def scrub(text: str) -> str:
    """``text`` without any node address in it."""
    return _ADDRESS.sub("<node>", text)


def _error(error: Exception) -> StoreCommandError | StoreBusy | StoreUnavailable:
    """A redis-py cluster error as ours, naming no node."""
    from redis.exceptions import AskError, ClusterError, RedisClusterException, ResponseError

    if isinstance(error, AskError):  # MOVED too: the slot moved past the client's retries
        return StoreBusy(
            "Redis refused the command for now: the cluster's slot map is changing",
            retry_after=BUSY_RETRY_AFTER_S,
        )
    if isinstance(error, ResponseError):  # ClusterDownError, TryAgainError included
        return error_reply(scrub(_error_text(error)))
    if isinstance(error, ClusterError):  # e.g. its retries exhausted
        return StoreUnavailable(f"redis cluster unavailable: {scrub(str(error))}")
    if isinstance(error, RedisClusterException):
        text = scrub(str(error))
        if "slot" in text:  # refused before sending: keys span slots ("same key slot")
            return StoreCommandError(f"CROSSSLOT {text}")
        # no seed node answered (the slot map cannot be read): the cluster is unreachable
        return StoreUnavailable(f"redis cluster unreachable: {text}")
    return StoreUnavailable(f"redis cluster unreachable: {type(error).__name__}")


@contextmanager
def _translate() -> Iterator[None]:
    """Map redis-py's cluster exceptions onto ACMI's error family, naming no node."""
    import redis
    from redis.exceptions import RedisClusterException

    try:
        yield
    except (redis.RedisError, RedisClusterException) as exc:
        raise _error(exc) from None

"""RedisStore: self-hosted Redis, ElastiCache or anything RESP-speaking.

:meth:`RedisStore.from_url` (every deployment, ``ACMI_REDIS_URL``) speaks RESP2 itself
(``store/resp.py``: one write and one read per call, hiredis's parser when the ``fast``
extra is installed). ``RedisStore(client)`` wraps a redis-py client instead: that is
how the embedded store drives its in-process fakeredis, which has no socket to speak to.

Redis Cluster: ACMI's write script touches every key of one operation (an entity's
slots plus its category index), so on a cluster those keys must share a hash slot;
plain Redis, Upstash and the embedded store have no such limit.

Timeouts: ``store_timeout_s`` is the connect timeout and the timeout of each socket
write and read, and every call makes exactly one attempt (the caller owns retries), so a
dead or silent server fails within it. Unlike on Upstash it is not a deadline over the
whole call: a reply trickling in with gaps under the timeout holds a call longer (a
67-byte reply at 50 ms a byte took 3.4 s with a 1 s timeout). We accept that: Redis
writes a reply out at once rather than pacing it, and sits in the deployment's own
network, not behind the internet's HTTP intermediaries. A connection that failed or
timed out is closed, never reused with half a reply in it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from acmi_core.base.errors import StoreCommandError, StoreUnavailable
from acmi_core.base.settings import Settings
from acmi_core.store.base import (
    Arg,
    Command,
    Reply,
    Script,
    ScriptDialect,
    check_packed,
    check_packed_pipeline,
    check_pipeline,
    check_request,
    error_reply,
    eval_script,
    pipeline_slots,
)
from acmi_core.store.resp import Endpoint, Pool, ReplyError, pack, pack_evalsha, pack_many

if TYPE_CHECKING:
    import redis


class RedisStore:
    """Over a redis-py client (fakeredis in process). :meth:`from_url` gives the lean
    RESP store, a subclass, for a real server."""

    name = "redis"

    def __init__(self, client: redis.Redis) -> None:
        from redis.client import CaseInsensitiveDict

        # No response callbacks: replies stay raw (bytes, int, list, None) as on Upstash.
        client.response_callbacks = CaseInsensitiveDict({})
        self._client = client
        # what the server takes of the script flags, learnt on the first script runs; no
        # OSS Redis has allow-key-locking (Upstash's), so this store does not opt in
        self.script_dialect = ScriptDialect()

    @classmethod
    def from_url(cls, url: str, settings: Settings | None = None) -> RedisStore:
        """redis://[[user]:password@]host[:port][/db], rediss://... (TLS; ``ssl_cert_reqs``,
        ``ssl_ca_certs``, ``ssl_check_hostname`` as query parameters) or
        unix://[[user]:password@]/path?db=N. Connects on the first call, not here."""
        settings = settings or Settings()
        return RespStore(url, Pool(Endpoint.parse(url), settings.store_timeout_s))

    def execute(self, command: Command) -> Reply:
        check_request(command)
        with _translate():
            return _reply(self._client.execute_command(*command))  # type: ignore[no-untyped-call]

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        import redis

        if not commands:
            return []
        check_pipeline(commands)
        with _translate():
            pipe = self._client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)  # type: ignore[no-untyped-call]
            results: list[Any] = pipe.execute(raise_on_error=False)
        return pipeline_slots(
            [
                error_reply(_error_text(r)) if isinstance(r, redis.ResponseError) else _reply(r)
                for r in results
            ]
        )

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        return eval_script(self.execute, script, keys, args, dialect=self.script_dialect)

    def close(self) -> None:
        self._client.close()


class RespStore(RedisStore):
    """RedisStore on its own RESP2 connections (``store/resp.py``): what
    :meth:`RedisStore.from_url` returns. Thread-safe and fork-safe (the pool's)."""

    def __init__(self, url: str, pool: Pool) -> None:  # no super(): no redis-py client
        self._url = url
        self._pool = pool
        self.script_dialect = ScriptDialect()

    # Each request is packed first and held to the limits by its packed size
    # (store.base.check_packed): its arguments are measured once, by the packing, unless it
    # is near a limit. A text the packing cannot encode (a lone surrogate) meets the exact
    # check first, as it would have before.

    def execute(self, command: Command) -> Reply:
        try:
            payload = pack(command)
        except UnicodeEncodeError:
            check_request(command)
            raise
        check_packed(len(payload), command)
        reply = self._pool.request(payload)
        if type(reply) is ReplyError:
            raise error_reply(reply.message)
        return reply  # type: ignore[no-any-return]

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        if not commands:
            return []
        try:
            payload = pack_many(commands)
        except UnicodeEncodeError:
            check_pipeline(commands)
            raise
        check_packed_pipeline(len(payload), commands)
        replies = self._pool.request_many(payload, len(commands))
        return pipeline_slots(
            [error_reply(r.message) if type(r) is ReplyError else r for r in replies]
        )

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        return eval_script(
            self.execute,
            script,
            keys,
            args,
            dialect=self.script_dialect,
            evalsha=self._evalsha,
            checked=True,
        )

    def _evalsha(self, command: str, sha: str, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        try:
            payload = pack_evalsha(sha, keys, args, command)
        except UnicodeEncodeError:
            check_request(keys, prefix=3, extra=args)
            raise
        check_packed(len(payload), keys, prefix=3, extra=args)  # EVALSHA, its SHA, numkeys
        reply = self._pool.request(payload)
        if type(reply) is ReplyError:
            raise error_reply(reply.message)
        return reply  # type: ignore[no-any-return]

    def close(self) -> None:
        self._pool.close()


# -- the redis-py path -----------------------------------------------------------------


def _reply(value: Any) -> Reply:
    if isinstance(value, str):  # simple strings from some servers / fakeredis
        return value.encode()
    if isinstance(value, list | tuple | set):
        return [_reply(v) for v in value]
    if isinstance(value, dict):  # a RESP3 map, if the caller's client speaks RESP3
        return [_reply(x) for pair in value.items() for x in pair]
    if isinstance(value, bool):
        return int(value)
    return value  # type: ignore[no-any-return]


def _error_text(error: Exception) -> str:
    """An error reply's text as Redis sent it, code first: redis-py strips the code from
    these errors' text (MasterDownError is a ClusterDownError: most specific first)."""
    from redis.exceptions import (
        BusyLoadingError,
        ClusterDownError,
        MasterDownError,
        NoScriptError,
        TryAgainError,
    )

    stripped: tuple[tuple[type[Exception], str], ...] = (
        (NoScriptError, "NOSCRIPT"),
        (BusyLoadingError, "LOADING"),
        (TryAgainError, "TRYAGAIN"),
        (MasterDownError, "MASTERDOWN"),
        (ClusterDownError, "CLUSTERDOWN"),
    )
    for kind, code in stripped:
        if isinstance(error, kind):
            return f"{code} {error}"
    return str(error)


@contextmanager
def _translate() -> Iterator[None]:
    """Map redis-py exceptions onto ACMI's error family."""
    import redis
    from redis.exceptions import BusyLoadingError

    try:
        yield
    except (redis.ResponseError, BusyLoadingError) as exc:
        # BusyLoadingError (LOADING) is a ConnectionError in redis-py, yet an error reply
        raise error_reply(_error_text(exc)) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise StoreUnavailable(f"redis unreachable: {type(exc).__name__}: {exc}") from exc

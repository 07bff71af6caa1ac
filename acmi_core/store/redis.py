"""RedisStore: redis-py, for self-hosted Redis, ElastiCache or anything RESP-speaking.

Redis Cluster: ACMI's write script touches every key of one operation (an entity's
slots plus its category index), so on a cluster those keys must share a hash slot;
plain Redis, Upstash and the embedded store have no such limit.

Timeouts: ``store_timeout_s`` is redis-py's connect timeout and its timeout for each
socket read or write, and redis-py makes exactly one attempt (its own retries are off:
the caller owns retries), so a dead or silent server fails within it. Unlike on Upstash
it is not a deadline over the whole call: redis-py applies it per read, with no hook
between reads short of replacing its socket handling, so a reply trickling in with gaps
under the timeout holds a call longer (a 67-byte reply at 50 ms a byte took 3.4 s with a
1 s timeout). We accept that: Redis writes a reply out at once rather than pacing it, and
sits in the deployment's own network, not behind the internet's HTTP intermediaries.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.client import CaseInsensitiveDict
from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    NoScriptError,
    TryAgainError,
)
from redis.retry import Retry

from acmi_core.errors import StoreCommandError, StoreUnavailable
from acmi_core.settings import Settings
from acmi_core.store.base import (
    Arg,
    Command,
    Reply,
    Script,
    error_reply,
    eval_script,
    pipeline_slots,
)

# redis-py strips the code from these errors' text; put it back, as Redis sent it
# (MasterDownError is a ClusterDownError: most specific first).
_STRIPPED_CODES: tuple[tuple[type[redis.RedisError], str], ...] = (
    (NoScriptError, "NOSCRIPT"),
    (BusyLoadingError, "LOADING"),
    (TryAgainError, "TRYAGAIN"),
    (MasterDownError, "MASTERDOWN"),
    (ClusterDownError, "CLUSTERDOWN"),
)


class RedisStore:
    name = "redis"

    def __init__(self, client: redis.Redis) -> None:
        # No response callbacks: replies stay raw (bytes, int, list, None) as on Upstash.
        client.response_callbacks = CaseInsensitiveDict({})
        self._client = client

    @classmethod
    def from_url(cls, url: str, settings: Settings | None = None) -> RedisStore:
        settings = settings or Settings()
        client = redis.Redis.from_url(
            url,
            socket_timeout=settings.store_timeout_s,
            socket_connect_timeout=settings.store_timeout_s,
            # One attempt, whatever redis-py's default of the day (redis.Redis() itself
            # retries 10 times in 8.x): a hidden retry would multiply the timeout.
            retry=Retry(NoBackoff(), 0),
            decode_responses=False,
            protocol=2,  # RESP2: flat arrays, the shape Upstash's REST API returns
        )
        return cls(client)

    def execute(self, command: Command) -> Reply:
        with _translate():
            return _reply(self._client.execute_command(*command))  # type: ignore[no-untyped-call]

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        if not commands:
            return []
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
        return eval_script(self.execute, script, keys, args)

    def close(self) -> None:
        self._client.close()


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


def _error_text(error: redis.RedisError) -> str:
    """An error reply's text as Redis sent it, code first."""
    for kind, code in _STRIPPED_CODES:
        if isinstance(error, kind):
            return f"{code} {error}"
    return str(error)


@contextmanager
def _translate() -> Iterator[None]:
    """Map redis-py exceptions onto ACMI's error family."""
    try:
        yield
    except (redis.ResponseError, BusyLoadingError) as exc:
        # BusyLoadingError (LOADING) is a ConnectionError in redis-py, yet an error reply
        raise error_reply(_error_text(exc)) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise StoreUnavailable(f"redis unreachable: {type(exc).__name__}: {exc}") from exc

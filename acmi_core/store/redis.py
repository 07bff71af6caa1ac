"""RedisStore: redis-py, for self-hosted Redis, ElastiCache or anything RESP-speaking.

Redis Cluster: ACMI's write script touches every key of one operation (an entity's
slots plus its category index), so on a cluster those keys must share a hash slot;
plain Redis, Upstash and the embedded store have no such limit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from redis.client import CaseInsensitiveDict

from acmi_core.errors import StoreCommandError, StoreUnavailable
from acmi_core.settings import Settings
from acmi_core.store.base import Arg, Command, Reply, Script, eval_script


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
        return [
            StoreCommandError(str(r)) if isinstance(r, redis.ResponseError) else _reply(r)
            for r in results
        ]

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


@contextmanager
def _translate() -> Iterator[None]:
    """Map redis-py exceptions onto ACMI's error family."""
    try:
        yield
    except redis.exceptions.NoScriptError as exc:
        # redis-py strips the error prefix; keep it so callers can recognise it
        raise StoreCommandError(f"NOSCRIPT {exc}") from exc
    except redis.ResponseError as exc:
        raise StoreCommandError(str(exc)) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise StoreUnavailable(f"redis unreachable: {type(exc).__name__}: {exc}") from exc

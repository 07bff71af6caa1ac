"""UpstashStore against the REST double (a real redis-server behind it): reply shapes,
round trips, and the transport's retry/timeout/auth policy."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
import redis
import upstash_redis

from acmi_core.errors import (
    AcmiValidationError,
    StoreAuthError,
    StoreCommandError,
    StoreUnavailable,
    Throttled,
)
from acmi_core.settings import Settings
from acmi_core.store.base import Script, Store
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble

FAST = Settings(store_timeout_s=2.0, retry_base_delay_s=0.001, retry_max_delay_s=0.01)


class SleepRecorder:
    """Injected sleep: records the delays instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """Direct redis-py access, to write what the REST API cannot (non-UTF-8 bytes)."""
    with redis.Redis.from_url(redis_server.url) as client:
        yield client


def make_store(
    double: UpstashDouble,
    settings: Settings = FAST,
    token: str | None = None,
    sleep: SleepRecorder | None = None,
) -> UpstashStore:
    return UpstashStore(
        double.url,
        double.token if token is None else token,
        settings=settings,
        sleep=sleep or SleepRecorder(),
        rng=lambda: 0.5,
    )


# -- wiring ---------------------------------------------------------------------------


def test_relies_on_pinned_upstash_redis_internals(upstash_store: UpstashStore) -> None:
    # The transport replaces private parts of upstash-redis; an upgrade must fail here.
    assert upstash_redis.__version__ == "1.8.0"
    assert isinstance(upstash_store, Store)
    assert upstash_store.name == "upstash"
    assert upstash_store._redis._http is upstash_store._transport
    assert upstash_store._redis._headers["Upstash-Encoding"] == "base64"
    assert "Upstash-Telemetry-Sdk" not in upstash_store._redis._headers


def test_from_settings_requires_url_and_token(upstash_double: UpstashDouble) -> None:
    with pytest.raises(AcmiValidationError):
        UpstashStore.from_settings(Settings())
    settings = Settings(upstash_url=upstash_double.url, upstash_token=upstash_double.token)
    with UpstashStore.from_settings(settings) as store:
        assert store.execute(("PING",)) == b"PONG"


# -- reply shapes ---------------------------------------------------------------------


def test_execute_reply_shapes(upstash_store: UpstashStore, upstash_double: UpstashDouble) -> None:
    s = upstash_store
    assert s.execute(("SET", "k", "héllo")) == b"OK"
    assert s.execute(("GET", "k")) == "héllo".encode()
    assert s.execute(("GET", "missing")) is None
    assert s.execute(("SET", "empty", "")) == b"OK"
    assert s.execute(("GET", "empty")) == b""
    assert s.execute(("INCRBY", "n", 2**62)) == 2**62
    assert s.execute(("PING",)) == b"PONG"  # a status reply other than OK is base64 too
    assert s.execute(("RPUSH", "l", "a", b"b", 3)) == 3
    assert s.execute(("LRANGE", "l", 0, -1)) == [b"a", b"b", b"3"]
    assert s.execute(("LRANGE", "nolist", 0, -1)) == []
    assert s.execute(("EVAL", "return {1, {'x', 2}, false}", 0)) == [1, [b"x", 2], None]
    assert s.execute(("ZADD", "z", 0.1, "m")) == 1
    score = s.execute(("ZSCORE", "z", "m"))
    assert isinstance(score, bytes) and float(score) == 0.1  # floats go as repr(): exact
    assert upstash_double.requests == 13  # exactly one request per execute
    assert upstash_double.requests_by_path == {"/": 13}


def test_non_utf8_values_survive_as_bytes(upstash_store: UpstashStore, raw: redis.Redis) -> None:
    raw.set("bin", b"\xff\xfe")
    raw.zadd("zbin", {b"\xff\xfe": 1, b"ok": 2})
    assert upstash_store.execute(("GET", "bin")) == b"\xff\xfe"
    assert upstash_store.execute(("ZRANGE", "zbin", 0, -1, "WITHSCORES")) == [
        b"\xff\xfe",
        b"1",
        b"ok",
        b"2",
    ]
    assert upstash_store.pipeline([("GET", "bin")]) == [b"\xff\xfe"]


def test_non_utf8_argument_is_refused_before_sending(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    with pytest.raises(StoreCommandError, match="not UTF-8"):
        upstash_store.execute(("SET", "k", b"\xff"))
    assert upstash_double.requests == 0


def test_command_error_keeps_redis_text(upstash_store: UpstashStore) -> None:
    upstash_store.execute(("SET", "s", "x"))
    with pytest.raises(StoreCommandError, match=r"^WRONGTYPE"):
        upstash_store.execute(("LPUSH", "s", "y"))
    with pytest.raises(StoreCommandError, match=r"^ERR unknown command"):
        upstash_store.execute(("NOPE",))


# -- pipeline / transaction -----------------------------------------------------------


def test_pipeline_keeps_other_results_when_one_fails(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    results = upstash_store.pipeline(
        [("SET", "a", "1"), ("LPUSH", "a", "x"), ("GET", "a"), ("INCR", "n"), ("GET", "none")]
    )
    assert results[0] == b"OK"
    assert isinstance(results[1], StoreCommandError)
    assert str(results[1]).startswith("WRONGTYPE")
    assert results[2:] == [b"1", 1, None]
    assert upstash_double.requests_by_path == {"/pipeline": 1}


def test_transaction_round_trip(upstash_store: UpstashStore, upstash_double: UpstashDouble) -> None:
    results = upstash_store.transaction(
        [("SET", "t", "v"), ("INCR", "c"), ("GET", "t"), ("LRANGE", "t2", 0, -1)]
    )
    assert results == [b"OK", 1, b"v", []]
    assert upstash_double.requests_by_path == {"/multi-exec": 1}
    assert upstash_store.pipeline([]) == [] and upstash_store.transaction([]) == []
    assert upstash_double.requests == 1  # empty batches make no request


def test_transaction_execabort_raises_and_runs_nothing(upstash_store: UpstashStore) -> None:
    with pytest.raises(StoreCommandError, match="EXECABORT"):
        upstash_store.transaction([("SET", "t", "1"), ("NOPE", "x")])
    assert upstash_store.execute(("GET", "t")) is None


def test_transaction_runtime_error_raises_naming_the_command(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    upstash_store.execute(("SET", "s", "x"))
    with pytest.raises(StoreCommandError, match=r"command 1 failed: WRONGTYPE"):
        upstash_store.transaction(
            [("SET", "before", "1"), ("LPUSH", "s", "y"), ("SET", "after", "2")]
        )
    # Redis has no rollback: the commands around the failed one ran.
    assert upstash_store.pipeline([("GET", "before"), ("GET", "after")]) == [b"1", b"2"]
    assert upstash_double.requests_by_path["/multi-exec"] == 1


# -- scripts --------------------------------------------------------------------------


def test_eval_falls_back_to_eval_once_on_noscript(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    script = Script("redis.call('SET', KEYS[1], ARGV[1]); return {KEYS[1], tonumber(ARGV[2])}")
    upstash_store.execute(("SCRIPT", "FLUSH"))
    upstash_double.reset_counts()
    assert upstash_store.eval(script, ["k1"], ["v1", 7]) == [b"k1", 7]
    assert upstash_double.requests == 2  # EVALSHA -> NOSCRIPT, then EVAL
    upstash_double.reset_counts()
    assert upstash_store.eval(script, ["k2"], ["v2", 8]) == [b"k2", 8]
    assert upstash_double.requests == 1  # cached by SHA now
    assert upstash_store.execute(("MGET", "k1", "k2")) == [b"v1", b"v2"]


def test_eval_script_error_is_a_command_error(upstash_store: UpstashStore) -> None:
    with pytest.raises(StoreCommandError, match="boom"):
        upstash_store.eval(Script("return redis.error_reply('boom')"), [], [])


# -- read-your-writes -----------------------------------------------------------------


def test_sync_token_is_sent_back(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    upstash_store.execute(("SET", "k", "v"))
    upstash_store.pipeline([("GET", "k")])
    upstash_store.transaction([("GET", "k")])
    # The first request has none; each later one carries the token of the answer before.
    assert upstash_double.sync_tokens_received == ["", "sync-1", "sync-2"]


# -- retries, throttling, timeouts, auth ----------------------------------------------


def test_429_storm_is_throttled_after_max_attempts(upstash_double: UpstashDouble) -> None:
    sleep = SleepRecorder()
    upstash_double.fail_next(100, status=429)
    with make_store(upstash_double, sleep=sleep) as store, pytest.raises(Throttled):
        store.execute(("GET", "k"))
    assert upstash_double.requests == FAST.store_max_attempts
    assert len(sleep.delays) == FAST.store_max_attempts - 1
    # Full jitter (rng=0.5) of a capped exponential: base*2^i, at most retry_max_delay_s.
    assert sleep.delays == [0.5 * min(0.01, 0.001 * 2**i) for i in range(3)]


def test_429_then_success(upstash_double: UpstashDouble) -> None:
    upstash_double.fail_next(1, status=429)
    with make_store(upstash_double) as store:
        assert store.execute(("SET", "k", "v")) == b"OK"
    assert upstash_double.requests == 2


def test_retry_after_is_honoured(upstash_double: UpstashDouble) -> None:
    sleep = SleepRecorder()
    upstash_double.fail_next(1, status=429, retry_after=0.25)
    with make_store(upstash_double, sleep=sleep) as store:
        assert store.execute(("PING",)) == b"PONG"
    assert sleep.delays == [0.25]


def test_retry_after_beyond_deadline_fails_fast(upstash_double: UpstashDouble) -> None:
    sleep = SleepRecorder()
    upstash_double.fail_next(1, status=429, retry_after=30)
    with make_store(upstash_double, sleep=sleep) as store, pytest.raises(Throttled) as info:
        store.execute(("PING",))
    assert upstash_double.requests == 1 and sleep.delays == []
    assert info.value.retry_after == 30


def test_503_then_success(upstash_double: UpstashDouble) -> None:
    upstash_double.fail_next(1, status=503)
    with make_store(upstash_double) as store:
        assert store.pipeline([("INCR", "n")]) == [1]
    assert upstash_double.requests == 2


def test_5xx_storm_is_unavailable(upstash_double: UpstashDouble) -> None:
    upstash_double.fail_next(100, status=500)
    with make_store(upstash_double) as store, pytest.raises(StoreUnavailable) as info:
        store.execute(("GET", "k"))
    assert not isinstance(info.value, Throttled)
    assert upstash_double.requests == FAST.store_max_attempts


def test_dropped_connection_then_success(upstash_double: UpstashDouble) -> None:
    upstash_double.drop_next(1)
    with make_store(upstash_double) as store:
        assert store.execute(("SET", "k", "v")) == b"OK"
    assert upstash_double.requests == 2


def test_dropped_connections_exhausted_is_unavailable(upstash_double: UpstashDouble) -> None:
    upstash_double.drop_next(100)
    with make_store(upstash_double) as store, pytest.raises(StoreUnavailable, match="Protocol"):
        store.execute(("GET", "k"))
    assert upstash_double.requests == FAST.store_max_attempts


def test_wrong_token_is_auth_error_without_retry(upstash_double: UpstashDouble) -> None:
    token = "wrong-secret-token-123"
    with make_store(upstash_double, token=token) as store, pytest.raises(StoreAuthError) as info:
        store.execute(("GET", "k"))
    assert upstash_double.requests == 1
    assert token not in str(info.value) and token not in repr(info.value)


def test_command_error_is_not_retried(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    with pytest.raises(StoreCommandError):
        upstash_store.execute(("NOPE",))
    assert upstash_double.requests == 1


def test_hang_fails_within_store_timeout(upstash_double: UpstashDouble) -> None:
    timeout = 0.5
    upstash_double.hang_next(1, seconds=10)
    store = make_store(upstash_double, settings=Settings(store_timeout_s=timeout))
    start = time.monotonic()
    with store, pytest.raises(StoreUnavailable):
        store.execute(("GET", "k"))
    elapsed = time.monotonic() - start
    assert elapsed < timeout + 0.3
    assert upstash_double.requests == 1  # the one attempt used the whole budget


def test_double_injected_delay(upstash_store: UpstashStore, upstash_double: UpstashDouble) -> None:
    upstash_double.delay_s = 0.05
    start = time.monotonic()
    upstash_store.execute(("PING",))
    assert time.monotonic() - start >= 0.05


def test_double_requires_bearer(upstash_double: UpstashDouble) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}):
        response = httpx.post(upstash_double.url, json=["PING"], headers=headers)
        assert response.status_code == 401
        assert response.json() == {"error": "Unauthorized"}

"""The RESP store holds each request to store.base's limits by the size it packed
(``check_packed``): exactly the requests ``check_request`` refuses are refused, on
execute, pipeline and a script run, on a real redis-server; and, as a property over
small limits, the packed check decides as the exact one does for any command."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from acmi_core.base.settings import Settings
from acmi_core.store import base
from acmi_core.store.base import (
    MAX_REQUEST_ARGS,
    MAX_REQUEST_BYTES,
    Arg,
    RequestTooLarge,
    Script,
    check_packed,
    check_packed_pipeline,
    check_pipeline,
    check_request,
)
from acmi_core.store.redis import RedisStore, RespStore
from acmi_core.store.resp import pack, pack_evalsha, pack_many
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS

DB = TEST_DBS["packed_limits"]
ECHO = Script("return #ARGV[1]")


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RespStore]:
    with redis.Redis.from_url(redis_server.url_for(DB)) as client:
        client.flushdb()
    opened = RedisStore.from_url(redis_server.url_for(DB), Settings(store_timeout_s=30.0))
    assert isinstance(opened, RespStore)
    with closing(opened):
        yield opened


def test_the_byte_limit_is_exact_on_every_call(store: RespStore) -> None:
    # "SET" and "k": 4 bytes; the value takes the rest of MAX_REQUEST_BYTES, exactly
    at_limit = "x" * (MAX_REQUEST_BYTES - 4)
    assert store.execute(("SET", "k", at_limit)) == b"OK"  # packed: over it, still taken
    with pytest.raises(RequestTooLarge) as err:
        store.execute(("SET", "k", at_limit + "x"))
    assert err.value.rule == "max_request_bytes"
    half = "x" * ((MAX_REQUEST_BYTES - 8) // 2)  # two "SET" "k" commands and their values
    assert store.pipeline([("SET", "a", half), ("SET", "b", half)]) == [b"OK", b"OK"]
    with pytest.raises(RequestTooLarge):
        store.pipeline([("SET", "a", half), ("SET", "b", half + "x")])
    # a script run: its keys' and arguments' bytes count (the key "k": 1), not the head
    arg = "y" * (MAX_REQUEST_BYTES - 1)
    assert store.eval(ECHO, ["k"], ["y"]) == 1  # loads it: the EVAL carries its text too
    assert store.eval(ECHO, ["k"], [arg]) == len(arg)
    with pytest.raises(RequestTooLarge):
        store.eval(ECHO, ["k"], [arg + "y"])
    assert store.execute(("STRLEN", "b")) == len(half)  # the refused ones sent nothing


def test_the_argument_limit_is_exact_on_every_call(store: RespStore) -> None:
    command: list[Arg] = ["SADD", "s", *[f"m{i}" for i in range(4_000)]]
    store.execute(command[:MAX_REQUEST_ARGS])  # 3,999: taken
    with pytest.raises(RequestTooLarge) as err:
        store.execute(command[: MAX_REQUEST_ARGS + 1])
    assert err.value.rule == "max_request_args"
    with pytest.raises(RequestTooLarge):
        store.pipeline([("SCARD", "s"), command])
    assert store.eval(ECHO, ["k"], ["a"]) == 1  # loaded: the next runs are EVALSHA
    args = ["a"] * (MAX_REQUEST_ARGS - 4)  # with EVALSHA, the SHA, the key count, the key
    assert store.eval(ECHO, ["k"], args) == 1
    with pytest.raises(RequestTooLarge):
        store.eval(ECHO, ["k"], [*args, "a"])


def test_a_lone_surrogate_over_the_limit_is_refused_as_too_large(store: RespStore) -> None:
    big = "\ud800" + "x" * MAX_REQUEST_BYTES  # the exact check first, as before packing
    with pytest.raises(RequestTooLarge):
        store.execute(("SET", "k", big))
    with pytest.raises(UnicodeEncodeError):  # within the limit: the packing's own error
        store.execute(("SET", "k", "\ud800"))


_args = st.lists(
    st.one_of(
        st.text(max_size=12),
        st.binary(max_size=12),
        st.integers(-(10**6), 10**6),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    min_size=1,
    max_size=9,
)


def _refused(check: object) -> bool:
    try:
        check()  # type: ignore[operator]
    except RequestTooLarge:
        return True
    return False


@settings(max_examples=400, deadline=None)
@given(_args, _args, st.integers(16, 90), st.integers(3, 12))
def test_the_packed_check_decides_as_the_exact_one(
    command: list[Arg], other: list[Arg], max_bytes: int, max_args: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "MAX_REQUEST_BYTES", max_bytes)
        patch.setattr(base, "MAX_REQUEST_ARGS", max_args)
        try:
            packed = len(pack(command))
        except UnicodeEncodeError:  # a lone surrogate: never packed, so never sent
            return
        assert _refused(lambda: check_packed(packed, command)) == _refused(
            lambda: check_request(command)
        )
        evalsha = len(pack_evalsha("0" * 40, [str(a) for a in other], command))
        assert _refused(
            lambda: check_packed(evalsha, [str(a) for a in other], prefix=3, extra=command)
        ) == _refused(lambda: check_request([str(a) for a in other], prefix=3, extra=command))
        commands = [command, other]
        try:
            many = len(pack_many(commands))
        except UnicodeEncodeError:
            return
        assert _refused(lambda: check_packed_pipeline(many, commands)) == _refused(
            lambda: check_pipeline(commands)
        )

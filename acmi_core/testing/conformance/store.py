"""``store``: the :class:`~acmi_core.store.base.Store` protocol itself, through ``acmi.store``.

Everything above the store (every other group) assumes what these check: replies are
normalised the same way on every backend (bulk strings ``bytes``, integers ``int``, nil
``None``, arrays ``list``, status replies ``b"OK"``), a pipeline keeps every result and puts
a :class:`StoreCommandError` in a failed command's slot, ``eval`` survives a flushed script
cache, bytes pass through unchanged, and a Redis error reply raises ``StoreCommandError``
with its text kept (never the client library's own exception). Keys come from
:meth:`Context.key` (inside the run's namespace, deleted afterwards).
"""

from __future__ import annotations

from typing import Final

from acmi_core.base.errors import StoreCommandError
from acmi_core.store.base import Reply, Script
from acmi_core.testing.conformance.harness import (
    ConformanceFailure,
    Context,
    check,
    expect,
    expect_equal,
    expect_raises,
    short,
)

NOT_UTF8_VALUE: Final = b"\xff\xfe\x00 not UTF-8 \x80\xc3( \xed\xa0\x80"
NOT_UTF8_MEMBER: Final = b'{"summary": "\xff\xfe"}'


def _same_reply(actual: object, expected: object) -> bool:
    """Equal, with the exact same types at every depth (``bytes`` is not ``str``,
    ``bytearray`` or ``memoryview``; ``int`` is not ``bool`` or ``float``)."""
    if type(actual) is not type(expected):
        return False
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(
            _same_reply(a, e) for a, e in zip(actual, expected, strict=True)
        )
    return actual == expected


def expect_reply(actual: object, expected: Reply, what: str) -> None:
    """``actual`` is the reply ``expected``, types included."""
    if not _same_reply(actual, expected):
        raise ConformanceFailure(
            f"{what}: expected {short(expected)}, got {short(actual)} ({type(actual).__name__})"
        )


@check("store", "replies are bytes, int, None, list and b'OK'")
def store_reply_types(ctx: Context) -> None:
    store = ctx.acmi.store
    text, number, missing = ctx.key("string"), ctx.key("int"), ctx.key("missing")
    hash_key, zset, lst = ctx.key("hash"), ctx.key("zset"), ctx.key("list")
    expect_reply(store.execute(("SET", text, "value")), b"OK", "SET (a status reply)")
    expect_reply(store.execute(("GET", text)), b"value", "GET (a bulk string)")
    expect_reply(store.execute(("GET", missing)), None, "GET of a missing key (nil)")
    expect_reply(store.execute(("EXISTS", text)), 1, "EXISTS of a key (an integer)")
    expect_reply(store.execute(("EXISTS", missing)), 0, "EXISTS of a missing key")
    expect_reply(store.execute(("INCR", number)), 1, "INCR")
    big = 12345678901234567
    expect_reply(store.execute(("INCRBY", number, big - 1)), big, "INCRBY past 2**53")
    expect_reply(store.execute(("GET", number)), str(big).encode(), "GET of a counter")
    expect_reply(store.execute(("RPUSH", lst, "a", "", "c")), 3, "RPUSH")
    expect_reply(store.execute(("LRANGE", lst, 0, -1)), [b"a", b"", b"c"], "LRANGE (an array)")
    expect_reply(store.execute(("LRANGE", missing, 0, -1)), [], "LRANGE of a missing key")
    expect_reply(store.execute(("ZADD", zset, 1.5, "m")), 1, "ZADD")
    expect_reply(store.execute(("ZSCORE", zset, "m")), b"1.5", "ZSCORE (a bulk string)")
    expect_reply(
        store.execute(("ZRANGE", zset, 0, -1, "WITHSCORES")), [b"m", b"1.5"], "ZRANGE WITHSCORES"
    )
    expect_reply(store.execute(("HSET", hash_key, "f", "1", "g", "")), 2, "HSET")
    pairs = store.execute(("HGETALL", hash_key))  # a flat array, as RESP2 and Upstash send
    if not (isinstance(pairs, list) and len(pairs) == 4 and all(type(p) is bytes for p in pairs)):
        raise ConformanceFailure(f"HGETALL: expected a flat array of 4 strings, got {short(pairs)}")
    as_dict = dict(zip(pairs[::2], pairs[1::2], strict=True))
    expect_equal(as_dict, {b"f": b"1", b"g": b""}, "HGETALL field/value pairs")


@check("store", "arguments of every type arrive as their text: str, bytes, int, float")
def store_arguments(ctx: Context) -> None:
    store = ctx.acmi.store
    cases: tuple[tuple[str | bytes | int | float, bytes], ...] = (
        ("text é 🎉", "text é 🎉".encode()),
        (b"bytes", b"bytes"),
        (12345678901234567, b"12345678901234567"),
        (-7, b"-7"),
        (1.5, b"1.5"),
        ("", b""),
    )
    for argument, stored in cases:
        key = ctx.key("arg")
        store.execute(("SET", key, argument))
        expect_reply(store.execute(("GET", key)), stored, f"GET after SET {argument!r}")


@check("store", "a pipeline keeps every result; a failed command's slot holds its error")
def store_pipeline(ctx: Context) -> None:
    store = ctx.acmi.store
    key, after, missing = ctx.key("text"), ctx.key("after"), ctx.key("missing")
    commands: list[tuple[str | int, ...]] = [
        ("SET", key, "text"),
        ("LPUSH", key, "x"),  # WRONGTYPE: the key holds a string
        ("GET", key),
        ("INCR", after),
        ("GET", missing),
        ("LRANGE", missing, 0, -1),
    ]
    try:
        replies = store.pipeline(commands)
    except StoreCommandError as exc:
        raise ConformanceFailure(
            f"pipeline raised {exc!r} for one failed command: it must return every result, "
            "the failed command's slot holding its StoreCommandError"
        ) from exc
    expect(isinstance(replies, list), f"pipeline: expected a list, got {short(replies)}")
    expect_equal(len(replies), 6, "pipeline: number of results")
    expect_reply(replies[0], b"OK", "pipeline slot 0 (SET)")
    failed = replies[1]
    expect(
        isinstance(failed, StoreCommandError),
        f"pipeline slot 1 (LPUSH onto a string): expected a StoreCommandError, "
        f"got {type(failed).__name__}: {short(failed)}",
    )
    expect("WRONGTYPE" in str(failed), f"pipeline slot 1: error text lost: {str(failed)!r}")
    expect_reply(replies[2], b"text", "pipeline slot 2 (GET after the failed command)")
    expect_reply(replies[3], 1, "pipeline slot 3 (INCR)")
    expect_reply(replies[4], None, "pipeline slot 4 (GET of a missing key)")
    expect_reply(replies[5], [], "pipeline slot 5 (LRANGE of a missing key)")
    expect_reply(store.execute(("GET", after)), b"1", "a command after the failure ran")


@check("store", "eval runs a script after SCRIPT FLUSH (NOSCRIPT falls back to EVAL)")
def store_eval_after_flush(ctx: Context) -> None:
    store, key = ctx.acmi.store, ctx.key("eval")
    # Unique per run, so no server has it cached before the first call either.
    script = Script(
        f"-- acmi conformance {ctx.token}\n"
        "redis.call('SET', KEYS[1], ARGV[1])\n"
        "return {redis.call('GET', KEYS[1]), tonumber(ARGV[2]) + 1, {KEYS[1]}}"
    )
    expected: Reply = [b"first", 42, [key.encode()]]
    expect_reply(store.eval(script, [key], ["first", 41]), expected, "eval of a new script")
    expect_reply(store.execute(("SCRIPT", "FLUSH")), b"OK", "SCRIPT FLUSH")
    expected = [b"again", 2, [key.encode()]]
    expect_reply(store.eval(script, [key], ["again", 1]), expected, "eval after SCRIPT FLUSH")
    expect_reply(store.execute(("GET", key)), b"again", "the key the script wrote")
    nil = Script(f"-- acmi conformance {ctx.token} nil\nreturn redis.call('GET', KEYS[1])")
    expect_reply(store.eval(nil, [ctx.key("missing")], []), None, "a script returning nil")


@check("store", "a script's error reply raises StoreCommandError, its text kept")
def store_script_error(ctx: Context) -> None:
    marker = f"ACMI_CONFORMANCE {ctx.token} refused"
    script = Script(f"return redis.error_reply('{marker}')")
    exc = expect_raises(
        StoreCommandError, lambda: ctx.acmi.store.eval(script, [ctx.key()], []), "error_reply"
    )
    # The write path recognises its own refusals (ACMI_WRONGTYPE, ACMI_CORRUPT) by this text.
    expect(marker in str(exc), f"error text {marker!r} lost: got {str(exc)!r}")


@check("store", "a Redis error reply raises StoreCommandError, not the client library's")
def store_error_mapping(ctx: Context) -> None:
    store, key = ctx.acmi.store, ctx.key("text")
    store.execute(("SET", key, "text"))
    exc = expect_raises(
        StoreCommandError, lambda: store.execute(("LPUSH", key, "x")), "LPUSH onto a string"
    )
    expect("WRONGTYPE" in str(exc), f"WRONGTYPE error text lost: got {str(exc)!r}")
    expect_raises(
        StoreCommandError,
        lambda: store.execute(("EVALSHA", "0" * 40, 0)),
        "EVALSHA of a script nobody loaded",
    )
    expect_reply(store.execute(("GET", key)), b"text", "the key after the failed command")


@check("store", "non-UTF-8 bytes written through the raw side door read back identical")
def store_bytes_transparent(ctx: Context) -> None:
    raw = ctx.require_raw("write bytes that are not UTF-8 and read them back")
    store, text, zset = ctx.acmi.store, ctx.key("bytes"), ctx.key("zset")
    raw(("SET", text, NOT_UTF8_VALUE))
    raw(("ZADD", zset, 1, NOT_UTF8_MEMBER))
    expect_reply(store.execute(("GET", text)), NOT_UTF8_VALUE, "GET")
    expect_reply(store.execute(("ZRANGE", zset, 0, -1)), [NOT_UTF8_MEMBER], "ZRANGE")
    expect_reply(store.pipeline([("GET", text)]), [NOT_UTF8_VALUE], "GET in a pipeline")
    script = Script(f"-- acmi conformance {ctx.token}\nreturn redis.call('GET', KEYS[1])")
    expect_reply(store.eval(script, [text], []), NOT_UTF8_VALUE, "a script returning them")


@check("store", "non-UTF-8 bytes written through execute read back identical, or are refused")
def store_bytes_own_transport(ctx: Context) -> None:
    store, key = ctx.acmi.store, ctx.key("bytes")
    try:
        store.execute(("SET", key, NOT_UTF8_VALUE))
    except StoreCommandError:
        # A text-only transport (Upstash REST) refuses them: cleanly, writing nothing.
        expect_reply(store.execute(("EXISTS", key)), 0, "the key after a refused write")
        return
    expect_reply(store.execute(("GET", key)), NOT_UTF8_VALUE, "GET")

"""The RESP2 wire of the Redis store (acmi_core/store/resp.py), without a server: the
pure-Python parser against hiredis's on every reply shape and every way a reply can be
cut into pieces, the packer against redis-py's, and the URL forms."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from redis._parsers.encoders import Encoder
from redis.connection import PythonRespSerializer

from acmi_core.base.errors import StoreCommandError
from acmi_core.store import resp
from acmi_core.store.resp import Endpoint, ProtocolError, PyReader, Reader, ReplyError

REPLIES: list[tuple[bytes, Any]] = [
    (b"+OK\r\n", b"OK"),
    (b"+\r\n", b""),
    (b":0\r\n", 0),
    (b":-42\r\n", -42),
    (b":9223372036854775807\r\n", 2**63 - 1),
    (b"$0\r\n\r\n", b""),
    (b"$-1\r\n", None),
    (b"$4\r\na\r\nb\r\n", b"a\r\nb"),  # CRLF inside a bulk string is data
    (b"$3\r\n\xff\x00\xfe\r\n", b"\xff\x00\xfe"),  # not UTF-8: stays bytes
    (b"*0\r\n", []),
    (b"*-1\r\n", None),
    (b"*3\r\n:1\r\n$-1\r\n+x\r\n", [1, None, b"x"]),
    (b"*2\r\n*2\r\n:1\r\n*0\r\n*1\r\n*1\r\n$1\r\nz\r\n", [[1, []], [[b"z"]]]),
    (b"*2\r\n*-1\r\n$1\r\na\r\n", [None, b"a"]),
]


def readers() -> list[Any]:
    factories: list[Any] = [pytest.param(PyReader, id="python")]
    hiredis = resp._hiredis_reader()
    if hiredis is None:
        reason = "hiredis is not installed (pip install 'acmi[fast]'): its parser is untested"
        factories.append(pytest.param(None, id="hiredis", marks=pytest.mark.skip(reason=reason)))
    else:
        factories.append(pytest.param(hiredis, id="hiredis"))
    return factories


@pytest.fixture(params=readers())
def new_reader(request: pytest.FixtureRequest) -> Callable[[], Reader]:
    factory: Callable[[], Reader] = request.param
    return factory


def read_all(reader: Reader, wire: bytes, piece: int) -> list[Any]:
    """Feed ``wire`` ``piece`` bytes at a time, collecting every whole reply."""
    replies: list[Any] = []
    for start in range(0, len(wire), piece):
        chunk = bytearray(wire[start : start + piece])
        reader.feed(memoryview(chunk), 0, len(chunk))
        while (reply := reader.gets()) is not False:
            replies.append(reply)
    return replies


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 1 << 20], ids=lambda n: f"{n}B pieces")
def test_every_reply_shape_whole_and_in_pieces(
    new_reader: Callable[[], Reader], piece: int
) -> None:
    wire = b"".join(raw for raw, _ in REPLIES)
    assert read_all(new_reader(), wire, piece) == [value for _, value in REPLIES]


def test_an_error_reply_is_a_value_code_first(new_reader: Callable[[], Reader]) -> None:
    wire = b"-WRONGTYPE Operation against a key\r\n*2\r\n-ERR inner\r\n:1\r\n"
    top, nested = read_all(new_reader(), wire, 5)
    assert type(top) is ReplyError and isinstance(top, StoreCommandError)
    assert top.message == "WRONGTYPE Operation against a key"
    assert type(nested[0]) is ReplyError and nested[0].message == "ERR inner"
    assert nested[1] == 1


def test_a_big_reply_in_many_pieces(new_reader: Callable[[], Reader]) -> None:
    big = bytes(range(256)) * 20_000  # 5 MB, with CR and LF bytes all through it
    items = [b"%d" % i for i in range(20_000)]
    wire = b"$%d\r\n%b\r\n" % (len(big), big)
    wire += b"*%d\r\n" % len(items) + b"".join(b"$%d\r\n%b\r\n" % (len(i), i) for i in items)
    assert read_all(new_reader(), wire, 65_536) == [big, items]


def test_garbage_is_a_protocol_error(new_reader: Callable[[], Reader]) -> None:
    reader = new_reader()
    reader.feed(b"?what\r\n")
    with pytest.raises(ProtocolError):
        reader.gets()


def test_the_python_reader_keeps_no_bytes_of_a_finished_reply() -> None:
    reader = PyReader()
    reader.feed(b"$5\r\nhello\r\n:1")
    assert reader.gets() == b"hello"
    assert reader.gets() is False  # ":1" without its CRLF yet
    reader.feed(b"\r\n")
    assert reader.gets() == 1
    assert reader._buf == bytearray()


COMMANDS: list[tuple[Any, ...]] = [
    ("PING",),
    ("SET", "k", "välue"),
    ("ZADD", "z", 1.5, "m", -3, b"\x00\xff"),
    ("GET", "x" * 10_000),  # over the small-argument path
    ("HSET", "h", "f", 2**70, 1e-300, float("inf")),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: str(c[0]))
def test_pack_matches_redis_py(command: tuple[Any, ...]) -> None:
    encoder = Encoder("utf-8", "strict", decode_responses=False)  # type: ignore[no-untyped-call]
    encode = encoder.encode
    serializer = PythonRespSerializer(6000, encode)
    expected = b"".join(serializer.pack(*command))  # type: ignore[no-untyped-call]
    assert resp.pack(command) == expected
    assert resp.pack_many([command, ("PING",)]) == expected + resp.pack(("PING",))


def test_evalsha_head_is_packed_once_and_matches_the_plain_command() -> None:
    sha = "a" * 40
    keys: list[str] = ["k1", "k2"]
    args: list[str | bytes | int | float] = ["x", 3, 2.5]
    plain = resp.pack(("EVALSHA", sha, len(keys), *keys, *args))
    assert resp.pack_evalsha(sha, keys, args) == plain
    head = resp._EVALSHA_HEADS[("EVALSHA", sha)]
    assert resp.pack_evalsha(sha, keys, args) == plain
    assert resp._EVALSHA_HEADS[("EVALSHA", sha)] is head
    assert resp.pack_evalsha(sha, [], []) == resp.pack(("EVALSHA", sha, 0))
    # the read-only form: its own head, the same layout
    ro = resp.pack(("EVALSHA_RO", sha, len(keys), *keys, *args))
    assert resp.pack_evalsha(sha, keys, args, "EVALSHA_RO") == ro


@pytest.mark.parametrize("bad", [True, None, object()], ids=["bool", "none", "object"])
def test_an_argument_of_another_kind_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="Redis argument"):
        resp.pack(("SET", "k", bad))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://localhost", Endpoint()),
        ("redis://h:7000/3", Endpoint(host="h", port=7000, db=3)),
        ("redis://:p%40ss@h/0", Endpoint(host="h", password="p@ss")),
        ("redis://u:p@h:1/2", Endpoint(host="h", port=1, username="u", password="p", db=2)),
        ("redis://h?db=5", Endpoint(host="h", db=5)),
        ("rediss://h", Endpoint(host="h", tls=True)),
        (
            "rediss://h?ssl_cert_reqs=none",
            Endpoint(host="h", tls=True, ssl_cert_reqs="none", ssl_check_hostname=False),
        ),
        (
            "rediss://h?ssl_ca_certs=/ca.pem&ssl_check_hostname=false",
            Endpoint(host="h", tls=True, ssl_ca_certs="/ca.pem", ssl_check_hostname=False),
        ),
        ("unix:///run/redis.sock?db=4", Endpoint(path="/run/redis.sock", db=4)),
        ("unix://:pw@/run/redis.sock", Endpoint(path="/run/redis.sock", password="pw")),
    ],
)
def test_url_forms(url: str, expected: Endpoint) -> None:
    assert Endpoint.parse(url) == expected


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("http://h", "redis://, rediss:// or unix://"),
        ("redis://h/x", "database is a number"),
        ("redis://h?socket_timeout=1", "unsupported parameter socket_timeout"),
        ("redis://h?ssl_cert_reqs=none", "need a rediss:// URL"),
        ("rediss://h?ssl_cert_reqs=maybe", "ssl_cert_reqs is none, optional or required"),
    ],
)
def test_bad_urls_name_the_rule(url: str, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        Endpoint.parse(url)

"""RESP2 on a socket, lean: the wire under :class:`acmi_core.store.redis.RedisStore`.

On a local or same-AZ Redis a round trip is ~25 µs and the client's own CPU decides
throughput; redis-py spends ~60 µs of Python per command around it (argument checks,
connection-pool bookkeeping, response callbacks). Here a command is packed into bytes
in one pass (an EVALSHA's head is packed once per script), written with one ``sendall``
and read back by ``hiredis.Reader`` when it is installed (``pip install 'acmi[fast]'``),
else by :class:`PyReader`, a resumable pure-Python RESP2 parser that gives the same
values. Nothing else: no retries (the caller owns them), no RESP3, no pub/sub.

Replies come back raw, in base.py's normal form: bulk and status strings as ``bytes``,
integers as ``int``, nil as ``None``, arrays as ``list``; an error reply is a
:class:`ReplyError` value (raised by the store, kept in its slot by a pipeline).

Timeouts (``timeout_s``): the connect, and each socket write and read. On a plain TCP or
unix socket they are the kernel's (SO_SNDTIMEO/SO_RCVTIMEO on a blocking socket), so a
round trip is two system calls, write and read, where a Python socket timeout adds a
poll() before each. TLS sockets use Python's own timeout.

A connection that failed or timed out anywhere in a call is closed, never reused: the
rest of its reply could still arrive and answer the next command. Connections are
pooled per :class:`Pool` (a thread takes one, or opens one, for the length of a call)
and forgotten in a forked child, which must not share its parent's sockets.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from acmi_core.base.errors import StoreBusy, StoreCommandError, StoreUnavailable
from acmi_core.store.base import Arg, Command, error_reply

if TYPE_CHECKING:
    import ssl


class ReplyError(StoreCommandError):
    """An error reply as a value: what the parser yields for ``-ERR ...``, code first."""


class ProtocolError(ConnectionError):
    """The bytes on the wire are not RESP2: the connection is unusable."""


class Reader(Protocol):
    """hiredis.Reader's interface, the part we use: gets() is False until a whole reply
    has been fed."""

    def feed(self, data: Any, offset: int = ..., length: int = ..., /) -> None: ...

    def gets(self) -> Any: ...


# -- packing ---------------------------------------------------------------------------


def _odd_arg(value: object) -> bytes:
    """The rare argument kinds, kept out of the hot path."""
    if isinstance(value, bool):  # an int, but Redis has no booleans: surely a bug
        raise TypeError("a Redis argument cannot be a bool")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return str.encode(value)
    if isinstance(value, int):
        return b"%d" % int(value)
    if isinstance(value, float):
        return repr(float(value)).encode()
    kind = type(value).__name__
    raise TypeError(f"a Redis argument must be str, bytes, int or float, not {kind}")


def _pack_into(out: list[bytes], args: Sequence[Arg]) -> None:
    append = out.append
    for value in args:
        kind = type(value)
        if kind is bytes:
            data: bytes = value  # type: ignore[assignment]
        elif kind is str:
            data = value.encode()  # type: ignore[union-attr]
        elif kind is int:
            data = b"%d" % value  # type: ignore[str-format]
        elif kind is float:
            data = repr(value).encode()  # repr: the shortest text that reads back exactly
        else:
            data = _odd_arg(value)
        if len(data) < 4096:  # one small copy beats three list items
            append(b"$%d\r\n%b\r\n" % (len(data), data))
        else:  # a big value is copied once, by the final join
            append(b"$%d\r\n" % len(data))
            append(data)
            append(b"\r\n")


def pack(command: Command) -> bytes:
    """One command as a RESP2 array of bulk strings."""
    out = [b"*%d\r\n" % len(command)]
    _pack_into(out, command)
    return b"".join(out)


def pack_many(commands: Sequence[Command]) -> bytes:
    """Several commands back to back, for one write."""
    out: list[bytes] = []
    for command in commands:
        out.append(b"*%d\r\n" % len(command))
        _pack_into(out, command)
    return b"".join(out)


# "$7\r\nEVALSHA\r\n$40\r\n<sha>\r\n" per script (and per command: EVALSHA_RO too):
# scripts are module constants, so this stays small; the cap only guards a process that
# builds scripts on the fly.
_EVALSHA_HEADS: dict[tuple[str, str], bytes] = {}
_EVALSHA_HEADS_MAX: Final = 1024


def pack_evalsha(
    sha: str, keys: Sequence[str], args: Sequence[Arg], command: str = "EVALSHA"
) -> bytes:
    """EVALSHA (or EVALSHA_RO) sha numkeys keys... args..., its head packed once per script."""
    head = _EVALSHA_HEADS.get((command, sha))
    if head is None:
        if len(_EVALSHA_HEADS) >= _EVALSHA_HEADS_MAX:
            _EVALSHA_HEADS.clear()
        raw, name = sha.encode(), command.encode()
        head = _EVALSHA_HEADS[(command, sha)] = b"$%d\r\n%b\r\n$%d\r\n%b\r\n" % (
            len(name),
            name,
            len(raw),
            raw,
        )
    numkeys = b"%d" % len(keys)
    out = [
        b"*%d\r\n" % (3 + len(keys) + len(args)),
        head,
        b"$%d\r\n%b\r\n" % (len(numkeys), numkeys),
    ]
    _pack_into(out, keys)
    _pack_into(out, args)
    return b"".join(out)


# -- parsing ---------------------------------------------------------------------------


class PyReader:
    """A RESP2 reply parser in pure Python, with hiredis.Reader's feed()/gets().

    Resumable: a reply that arrives in many pieces is parsed once, not again from its
    start for every piece. ``_stack`` holds the arrays still being filled, ``_pos`` the
    start of the first element not yet parsed."""

    __slots__ = ("_buf", "_pos", "_stack")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._stack: list[tuple[list[Any], int]] = []

    def feed(self, data: Any, offset: int = 0, length: int = -1, /) -> None:
        if length < 0:
            length = len(data) - offset
        self._buf += memoryview(data)[offset : offset + length]

    def gets(self) -> Any:
        buf = self._buf
        pos = self._pos
        stack = self._stack
        value: Any
        while True:
            end = buf.find(b"\r\n", pos)
            if end < 0:
                break
            kind = buf[pos]
            if kind == 36:  # $ bulk string
                size = int(buf[pos + 1 : end])
                if size < 0:
                    value = None
                    pos = end + 2
                else:
                    start = end + 2
                    stop = start + size
                    if len(buf) < stop + 2:
                        break  # its bytes are still on the way
                    value = bytes(buf[start:stop])
                    pos = stop + 2
            elif kind == 42:  # * array
                size = int(buf[pos + 1 : end])
                pos = end + 2
                if size > 0:
                    stack.append(([], size))
                    continue
                value = None if size < 0 else []
            elif kind == 58:  # : integer
                value = int(buf[pos + 1 : end])
                pos = end + 2
            elif kind == 43:  # + status
                value = bytes(buf[pos + 1 : end])
                pos = end + 2
            elif kind == 45:  # - error
                value = ReplyError(buf[pos + 1 : end].decode("utf-8", "replace"))
                pos = end + 2
            else:
                raise ProtocolError(f"not a RESP2 reply: type byte {bytes([kind])!r}")
            # Hand the value to its array; a filled array is a value for its parent.
            while stack:
                items, size = stack[-1]
                items.append(value)
                if len(items) < size:
                    break
                stack.pop()
                value = items
            else:
                del buf[:pos]  # a whole reply: drop its bytes
                self._pos = 0
                return value
        self._pos = pos
        return False


def _hiredis_reader() -> Callable[[], Reader] | None:
    try:
        import hiredis
    except ImportError:
        return None

    def reader() -> Reader:
        made: Reader = hiredis.Reader(
            replyError=ReplyError, protocolError=ProtocolError, notEnoughData=False
        )
        return made

    return reader


def reader_factory() -> Callable[[], Reader]:
    """hiredis.Reader when hiredis is installed (the ``fast`` extra), else PyReader."""
    return _hiredis_reader() or PyReader


# -- where to connect ------------------------------------------------------------------

_TLS_OPTIONS: Final = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_check_hostname")
_OPTIONS: Final = ("db", *_TLS_OPTIONS)


@dataclass(frozen=True)
class Endpoint:
    """A parsed redis://, rediss:// or unix:// URL (redis-py's URL forms)."""

    host: str = "localhost"
    port: int = 6379
    path: str | None = None  # a unix socket
    username: str | None = None
    password: str | None = None
    db: int = 0
    tls: bool = False
    ssl_cert_reqs: str = "required"  # none | optional | required
    ssl_ca_certs: str | None = None
    ssl_check_hostname: bool = True

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError("a Redis URL starts with redis://, rediss:// or unix://")
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        unknown = sorted(set(query) - set(_OPTIONS))
        if unknown:
            raise ValueError(
                f"Redis URL: unsupported parameter {', '.join(unknown)} "
                f"(supported: {', '.join(_OPTIONS)})"
            )
        tls = parts.scheme == "rediss"
        if not tls and set(query) & set(_TLS_OPTIONS):
            raise ValueError("Redis URL: ssl_* parameters need a rediss:// URL")
        db_text = query.get("db")
        if db_text is None and parts.scheme != "unix":
            db_text = parts.path.lstrip("/") or None
        try:
            db = int(db_text) if db_text is not None else 0
        except ValueError:
            raise ValueError("Redis URL: the database is a number (redis://host/0)") from None
        cert_reqs = query.get("ssl_cert_reqs", "required").lower()
        if cert_reqs not in ("none", "optional", "required"):
            raise ValueError("Redis URL: ssl_cert_reqs is none, optional or required")
        check = query.get("ssl_check_hostname", "true").lower() in ("1", "true", "yes")
        return cls(
            host=parts.hostname or "localhost",
            port=parts.port or 6379,
            path=unquote(parts.path) if parts.scheme == "unix" else None,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password is not None else None,
            db=db,
            tls=tls,
            ssl_cert_reqs=cert_reqs,
            ssl_ca_certs=query.get("ssl_ca_certs"),
            ssl_check_hostname=check and cert_reqs != "none",
        )

    def ssl_context(self) -> ssl.SSLContext:
        import ssl

        context = ssl.create_default_context(cafile=self.ssl_ca_certs)
        context.check_hostname = self.ssl_check_hostname
        context.verify_mode = {
            "none": ssl.CERT_NONE,
            "optional": ssl.CERT_OPTIONAL,
            "required": ssl.CERT_REQUIRED,
        }[self.ssl_cert_reqs]
        return context


# -- connections -----------------------------------------------------------------------

_RECV_BYTES: Final = 65536


class _Process:
    """Bumped in a forked child: connections of an older generation are the parent's."""

    generation = 0


def _forked() -> None:
    _Process.generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class Connection:
    """One socket and its parser. Not thread-safe: a Pool hands it to one caller at a time."""

    __slots__ = ("_buffer", "_reader", "_sock", "_view", "generation")

    def __init__(self, sock: socket.socket, reader: Reader) -> None:
        self._sock = sock
        self._reader = reader
        self._buffer = bytearray(_RECV_BYTES)
        self._view = memoryview(self._buffer)
        self.generation = _Process.generation

    def request(self, payload: bytes) -> Any:
        """Write one command, read its reply."""
        self._send(payload)
        reader = self._reader
        reply = reader.gets()
        while reply is False:
            self._fill()
            reply = reader.gets()
        return reply

    def request_many(self, payload: bytes, count: int) -> list[Any]:
        """Write ``count`` commands at once, read their ``count`` replies."""
        self._send(payload)
        reader = self._reader
        replies: list[Any] = []
        while len(replies) < count:
            reply = reader.gets()
            if reply is False:
                self._fill()
            else:
                replies.append(reply)
        return replies

    def _send(self, payload: bytes) -> None:
        try:
            self._sock.sendall(payload)
        except BlockingIOError:  # SO_SNDTIMEO ran out
            raise TimeoutError("timed out") from None

    def _fill(self) -> None:
        try:
            size = self._sock.recv_into(self._buffer)
        except BlockingIOError:  # SO_RCVTIMEO ran out
            raise TimeoutError("timed out") from None
        if not size:
            raise ConnectionResetError("Redis closed the connection")
        self._reader.feed(self._view, 0, size)

    def close(self) -> None:
        # close(), never shutdown(): in a forked child the parent may still use the socket
        self._sock.close()


def _kernel_timeouts(sock: socket.socket, timeout_s: float) -> bool:
    """Make ``sock`` blocking with kernel read/write timeouts; False where unsupported."""
    seconds = int(timeout_s)
    micros = int((timeout_s - seconds) * 1_000_000)
    if seconds == 0 and micros == 0:
        micros = 1  # 0 would mean "wait forever"
    timeval = struct.pack("@ll", seconds, micros)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
    except (OSError, AttributeError):
        return False
    sock.settimeout(None)
    return True


class Pool:
    """Connections to one endpoint, each used by one thread at a time.

    No lock: list.pop() and list.append() are atomic, and a thread that finds the list
    empty opens a connection of its own (as many as threads in flight; ``max_idle`` of
    them are kept). Exactly one attempt per call: a failure is the caller's to retry."""

    def __init__(
        self,
        endpoint: Endpoint,
        timeout_s: float,
        reader: Callable[[], Reader] | None = None,
        max_idle: int = 16,
    ) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.reader = reader or reader_factory()
        self.max_idle = max_idle
        self._idle: list[Connection] = []
        self._generation = _Process.generation
        self._ssl: ssl.SSLContext | None = None  # built once, at the first TLS connect
        self._closed = False

    # -- calls -------------------------------------------------------------------------

    def request(self, payload: bytes) -> Any:
        conn = self._take()
        try:
            reply = conn.request(payload)
        except BaseException as exc:
            conn.close()  # the rest of its reply may still come: never reuse it
            if isinstance(exc, OSError):
                raise _unavailable(exc) from exc
            raise
        self._give(conn)
        return reply

    def request_many(self, payload: bytes, count: int) -> list[Any]:
        conn = self._take()
        try:
            replies = conn.request_many(payload, count)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, OSError):
                raise _unavailable(exc) from exc
            raise
        self._give(conn)
        return replies

    def close(self) -> None:
        """Close the idle connections; one in use is closed when its call ends."""
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    # -- the pool ----------------------------------------------------------------------

    def _take(self) -> Connection:
        if self._generation != _Process.generation:  # a forked child: drop the parent's
            self._generation = _Process.generation
            idle, self._idle = self._idle, []
            for conn in idle:
                conn.close()  # only this process's descriptor
        try:
            return self._idle.pop()
        except IndexError:
            pass
        try:
            return self._connect()
        except OSError as exc:
            raise _unavailable(exc) from exc

    def _give(self, conn: Connection) -> None:
        stale = conn.generation != _Process.generation  # opened before a fork
        if self._closed or stale or len(self._idle) >= self.max_idle:
            conn.close()
        else:
            self._idle.append(conn)

    def _connect(self) -> Connection:
        endpoint = self.endpoint
        sock: socket.socket
        if endpoint.path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(self.timeout_s)
                sock.connect(endpoint.path)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection((endpoint.host, endpoint.port), self.timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if endpoint.tls:
                if self._ssl is None:
                    self._ssl = endpoint.ssl_context()
                sock = self._ssl.wrap_socket(sock, server_hostname=endpoint.host)
            else:
                _kernel_timeouts(sock, self.timeout_s)
            conn = Connection(sock, self.reader())
            self._handshake(conn)
        except BaseException:
            sock.close()
            raise
        return conn

    def _handshake(self, conn: Connection) -> None:
        """AUTH and SELECT, in one write."""
        endpoint = self.endpoint
        commands: list[tuple[str, ...]] = []
        if endpoint.password is not None:
            if endpoint.username:
                commands.append(("AUTH", endpoint.username, endpoint.password))
            else:
                commands.append(("AUTH", endpoint.password))
        if endpoint.db:
            commands.append(("SELECT", str(endpoint.db)))
        if not commands:
            return
        for command, reply in zip(
            commands, conn.request_many(pack_many(commands), len(commands)), strict=True
        ):
            if isinstance(reply, ReplyError):
                busy = error_reply(reply.message)
                if isinstance(busy, StoreBusy):  # BUSY, LOADING...: a 503 to retry, as any call
                    raise busy
                # AUTH's error text never holds the password; still name only the command
                raise ConnectionRefusedError(f"{command[0]} refused: {reply}")


def _unavailable(exc: OSError) -> StoreUnavailable:
    # The exception's text, never the address (a 503 body must not show it).
    return StoreUnavailable(f"redis unreachable: {type(exc).__name__}: {exc}")

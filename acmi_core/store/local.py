"""The embedded store as one local database for every ``acmi`` process, kept on disk.

The data directory (ACMI_HOME, else ``$XDG_DATA_HOME/acmi``, else ``~/.local/share/acmi``;
created 0700) holds:

- ``store.snapshot.json``: the data (Redis database 0) as DUMP payloads with each key's
  absolute expiry, replaced atomically (temp file + rename), so a crash leaves the
  previous snapshot whole. Expired keys (idempotency records) are not restored.
- ``store.lock``: the flock held by the one process that owns the data: ``acmi serve``
  for its lifetime, a CLI command for the length of the command, or ``create_acmi()``'s
  store for the length of one call (``shared.py``); its content, a random stamp each
  save replaces, tells a process that cached the data whether it changed since.
- ``serve.json`` (0600): where a running ``acmi serve`` serves the data over the Redis
  protocol (127.0.0.1, a random port, a random password), and its pid.

The directory is made 0700, and an existing one is narrowed to 0700 (its files hold the
data and the endpoint's password); every file in it is 0600.

The endpoint (:class:`Endpoint`) is ours, not fakeredis's TCP server (which buffers a
whole command, of any size, before it looks at the password): it reads at most
``PRE_AUTH_BYTES`` from a connection before an ``AUTH`` with the password succeeds (and
waits ``PRE_AUTH_TIMEOUT_S`` for it), then at most ``MAX_COMMAND_BYTES`` per command, and
holds at most ``MAX_CONNECTIONS`` connections; past any bound it answers an error and
closes the connection. Each authenticated connection runs its commands on a client of
the data (redis-py's connection API), so transactions and scripts behave as in process.

:func:`open_local_store`: a live ``acmi serve`` -> a Redis client to it; else the lock
-> the data loaded from the snapshot, saved back on close (and at exit). ``acmi serve``
calls :meth:`EmbeddedStore.serve`, then snapshots at most every
``SNAPSHOT_EVERY_S`` after a write and at shutdown. POSIX only (flock)."""

from __future__ import annotations

import atexit
import base64
import contextlib
import hmac
import json
import os
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from acmi_core.base.errors import CorruptData, StoreUnavailable
from acmi_core.base.settings import Settings
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore

SNAPSHOT_FILE: Final = "store.snapshot.json"
LOCK_FILE: Final = "store.lock"
ENDPOINT_FILE: Final = "serve.json"
SNAPSHOT_FORMAT: Final = "acmi-embedded-snapshot"
SNAPSHOT_VERSION: Final = 1
# How long a command waits for another command holding the data to finish (a CLI
# command holds it for its own length: well under this).
LOCK_WAIT_S: Final = 10.0
# `acmi serve`: the longest a write waits before it is on disk (a crash loses at most this).
SNAPSHOT_EVERY_S: Final = 1.0
# The one user on the served endpoint: the default (passwordless) user is disabled, so
# another local user who finds the port still cannot read or write.
_USER: Final = "acmi"
# The lock file holds a random stamp of this many bytes, replaced by every save.
STAMP_BYTES: Final = 16
# The endpoint's bounds (README, limits): what a connection may send before it has
# authenticated (an AUTH with the user and a 32-character password is ~70 bytes), how long
# it may take to, the largest command after (a CLI command's largest write is a few MB),
# and how many connections are served at once.
PRE_AUTH_BYTES: Final = 4 * 1024
PRE_AUTH_TIMEOUT_S: Final = 10.0
MAX_COMMAND_BYTES: Final = 64 * 1024 * 1024
MAX_CONNECTIONS: Final = 64
_MAX_ARGUMENTS: Final = 1024 * 1024
_HEADER_BYTES: Final = 32  # "*<count>\r\n" or "$<length>\r\n"

# Atomic over the whole database: a write script that touches several keys is either all
# in the snapshot or not at all.
_SNAPSHOT_SCRIPT: Final = """
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  local ttl = redis.call('PTTL', k)
  if ttl ~= -2 then
    out[#out + 1] = k
    out[#out + 1] = ttl
    out[#out + 1] = redis.call('DUMP', k)
  end
end
return out
"""


def data_dir(settings: Settings, env: Mapping[str, str] | None = None) -> Path:
    """Where the embedded store keeps its data."""
    if settings.home:
        return Path(settings.home).expanduser()
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "acmi"


def open_local_store(settings: Settings) -> RedisStore:
    """The local data: through a running ``acmi serve`` if there is one, else owned by
    this process until :meth:`close` (waiting up to ``LOCK_WAIT_S`` for another command)."""
    import fcntl

    home = prepared_home(settings)
    opened = _OPEN.get(home)
    if opened is not None:  # one owner per process: flock would block on a second fd
        opened.users += 1
        return opened
    deadline = time.monotonic() + LOCK_WAIT_S
    fd = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older lock file may be wider
        while True:
            served = _connect_to_serve(home, settings)
            if served is not None:
                os.close(fd)
                return served
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreUnavailable(
                        f"the embedded store at {home} is held by another acmi process "
                        f"(waited {LOCK_WAIT_S:g} s): retry when that command has finished"
                    ) from None
                time.sleep(0.05)
                continue
            store = EmbeddedStore(home, fd)
            _OPEN[home] = store
            return store
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def prepared_home(settings: Settings) -> Path:
    """The data directory, made (0700) if missing and narrowed to 0700 if wider."""
    home = data_dir(settings)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    if home.stat().st_mode & 0o077:  # made by hand, or by an older acmi: others could list it
        home.chmod(0o700)
    return home


def stamp_of(lock_fd: int) -> bytes:
    """The stamp the last save wrote into the lock file (``b""`` before any)."""
    return os.pread(lock_fd, STAMP_BYTES, 0)


def _connect_to_serve(home: Path, settings: Settings) -> ServedStore | None:
    try:
        info = json.loads((home / ENDPOINT_FILE).read_text(encoding="utf-8"))
        host, port, password = str(info["host"]), int(info["port"]), str(info["password"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    store = ServedStore(host, port, password, settings)
    try:
        store.execute(("PING",))
    except Exception:  # a stale file (killed server): the lock decides who owns the data
        store.close()
        return None
    return store


class ServedStore(RedisStore):
    """A client of the data a running ``acmi serve`` holds."""

    def __init__(self, host: str, port: int, password: str, settings: Settings) -> None:
        timeout = min(settings.store_timeout_s, 5.0)
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        super().__init__(
            redis.Redis(
                host=host,
                port=port,
                username=_USER,
                password=password,
                socket_timeout=settings.store_timeout_s,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),
                protocol=2,
            )
        )
        self.description = f"embedded via acmi serve at {host}:{port}"


class EmbeddedStore(MemoryStore):
    """The embedded store loaded from, and saved to, a data directory this process owns
    (it holds the flock on ``fd``). Not named "memory": its data outlives the process, so
    the public sample key is refused here as on any real store."""

    name = "embedded"

    def __init__(self, home: Path, lock_fd: int) -> None:
        import fakeredis

        self.home = home
        self.description = f"embedded, {home}"
        self.users = 1
        self._lock_fd: int | None = lock_fd
        self._password = secrets.token_urlsafe(24)
        self._server = fakeredis.FakeServer()
        admin = fakeredis.FakeRedis(server=self._server, protocol=2)
        admin.execute_command(
            "ACL", "SETUSER", _USER, "on", f">{self._password}", "~*", "&*", "+@all"
        )  # type: ignore[no-untyped-call]
        admin.execute_command("ACL", "SETUSER", "default", "off")  # type: ignore[no-untyped-call]
        RedisStore.__init__(
            self,
            fakeredis.FakeRedis(
                server=self._server, username=_USER, password=self._password, protocol=2
            ),
        )
        (home / ENDPOINT_FILE).unlink(missing_ok=True)  # we own the data: any is stale
        self._load()
        self._dirty = threading.Event()
        self._server.dbs[0].add_change_callback(self._dirty.set)
        self._tcp: Any = None
        self._stop = threading.Event()
        self._saver: threading.Thread | None = None
        self._save_lock = threading.Lock()

    # --- the snapshot ---------------------------------------------------------------------

    def _load(self) -> None:
        path = self.home / SNAPSHOT_FILE
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return
        now_ms = int(time.time() * 1000)
        try:
            data = json.loads(raw)
            if data.get("format") != SNAPSHOT_FORMAT or data.get("version") != SNAPSHOT_VERSION:
                raise ValueError(f"not a {SNAPSHOT_FORMAT} version {SNAPSHOT_VERSION}")
            pipe = self._client.pipeline(transaction=False)
            for key, expires_ms, payload in data["keys"]:
                ttl = 0 if expires_ms is None else int(expires_ms) - now_ms
                if expires_ms is not None and ttl <= 0:
                    continue  # expired while nobody served it
                pipe.execute_command(  # type: ignore[no-untyped-call]
                    "RESTORE", base64.b64decode(key), ttl, base64.b64decode(payload), "REPLACE"
                )
            pipe.execute()
        except Exception as exc:
            raise CorruptData(
                f"the embedded store's snapshot {path} cannot be read ({exc}); move it "
                "away to start empty"
            ) from None

    def save(self) -> bool:
        """Write the snapshot if anything changed since the last one. True if written."""
        with self._save_lock:
            if not self._dirty.is_set():
                return False
            self._dirty.clear()  # before reading: a write during the dump marks it again
            now_ms = int(time.time() * 1000)
            flat = self._client.execute_command("EVAL", _SNAPSHOT_SCRIPT, 0)  # type: ignore[no-untyped-call]
            keys = [
                [
                    base64.b64encode(flat[i]).decode("ascii"),
                    None if flat[i + 1] < 0 else now_ms + int(flat[i + 1]),
                    base64.b64encode(flat[i + 2]).decode("ascii"),
                ]
                for i in range(0, len(flat), 3)
            ]
            body = {
                "format": SNAPSHOT_FORMAT,
                "version": SNAPSHOT_VERSION,
                "saved_ms": now_ms,
                "keys": keys,
            }
            if self._lock_fd is not None:
                # a new stamp before the new snapshot: a process caching the data between
                # its holds (store/shared.py) sees any save begun since it last looked
                os.pwrite(self._lock_fd, secrets.token_hex(STAMP_BYTES // 2).encode(), 0)
            _write_atomically(self.home / SNAPSHOT_FILE, json.dumps(body).encode("utf-8"))
            return True

    # --- acmi serve -----------------------------------------------------------------------

    def serve(self, host: str = "127.0.0.1", *, avoid: int | None = None) -> tuple[str, int]:
        """Serve this data to other ``acmi`` processes over the Redis protocol on ``host``
        (a free port, never ``avoid``: the HTTP port, not yet bound when this starts) and
        snapshot it after writes, until :meth:`close`."""
        tcp = Endpoint((host, 0), self._server, self._password)
        while int(tcp.server_address[1]) == avoid:  # the OS handed out the HTTP port: again
            replacement = Endpoint((host, 0), self._server, self._password)
            tcp.server_close()
            tcp = replacement
        threading.Thread(
            target=tcp.serve_forever,
            kwargs={"poll_interval": 0.05},  # how soon shutdown() is noticed
            name="acmi-local-store",
            daemon=True,
        ).start()
        self._tcp = tcp
        port = int(tcp.server_address[1])
        info = {"host": host, "port": port, "pid": os.getpid(), "password": self._password}
        _write_atomically(self.home / ENDPOINT_FILE, json.dumps(info).encode("utf-8"))
        self._saver = threading.Thread(target=self._save_loop, name="acmi-snapshot", daemon=True)
        self._saver.start()
        self.description = f"embedded, {self.home}; served to other acmi commands at {host}:{port}"
        return host, port

    def _save_loop(self) -> None:
        while not self._stop.wait(SNAPSHOT_EVERY_S):
            with contextlib.suppress(Exception):  # a full disk: retried next tick, and on close
                self.save()

    def close(self) -> None:
        """Save, stop serving and release the data (the last of this process's users)."""
        self.users -= 1
        if self.users > 0:
            self.save()
            return
        if self._lock_fd is None:
            return
        self._stop.set()
        if self._tcp is not None:
            (self.home / ENDPOINT_FILE).unlink(missing_ok=True)
            self._tcp.shutdown()
            self._tcp.server_close()
            self._tcp = None
        if self._saver is not None:
            self._saver.join()
        try:
            self.save()
        finally:
            _OPEN.pop(self.home, None)
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None
            super().close()


class _Refused(Exception):
    """A connection past one of the endpoint's bounds: answered with this, then closed."""


class _Closed(Exception):
    """The peer closed the connection."""


def _read_command(rfile: Any, limit: int) -> tuple[list[bytes], int]:
    """One command (a RESP array of bulk strings, or an inline line) of at most ``limit``
    bytes, and the bytes it took, read without ever buffering more than it accepted."""
    line = rfile.readline(min(limit, MAX_COMMAND_BYTES) + 2)
    if not line:
        raise _Closed()
    if not line.endswith(b"\n"):
        raise _Refused("ERR command too large for this endpoint")
    used = len(line)
    if not line.startswith(b"*"):  # an inline command (redis-cli, telnet)
        return line.split(), used
    count = _header_number(line)
    if count > _MAX_ARGUMENTS:
        raise _Refused("ERR too many arguments for this endpoint")
    arguments: list[bytes] = []
    for _ in range(count):
        header = rfile.readline(_HEADER_BYTES)
        if not header:
            raise _Closed()
        if not header.startswith(b"$") or not header.endswith(b"\n"):
            raise _Refused("ERR Protocol error: expected '$'")
        size = _header_number(header)
        used += len(header) + size + 2
        if used > limit:
            raise _Refused("ERR command too large for this endpoint")
        data = rfile.read(size + 2)
        if len(data) != size + 2:
            raise _Closed()
        arguments.append(data[:size])
    return arguments, used


def _header_number(line: bytes) -> int:
    try:
        number = int(line[1:].strip())
    except ValueError:
        raise _Refused("ERR Protocol error: invalid length") from None
    if number < 0:
        raise _Refused("ERR Protocol error: invalid length")
    return number


# redis-py reads an error's first word into an exception class: the reverse, so a client
# of the endpoint gets the class the data's own client raised (NOSCRIPT, WRONGPASS, ...)
def _error_prefixes() -> list[tuple[type[BaseException], str]]:
    from redis.connection import DefaultParser

    pairs: list[tuple[type[BaseException], str]] = []
    for prefix, found in DefaultParser.EXCEPTION_CLASSES.items():
        for cls in found.values() if isinstance(found, dict) else [found]:
            if isinstance(cls, type) and issubclass(cls, BaseException):
                pairs.append((cls, prefix))
    return pairs


def _encode_reply(value: Any, prefixes: list[tuple[type[BaseException], str]]) -> bytes:
    if value is None:
        return b"$-1\r\n"
    if isinstance(value, BaseException):
        prefix = next((p for cls, p in prefixes if type(value) is cls), "ERR")
        message = str(value.args[0] if value.args else value).replace("\r\n", " ")
        return f"-{prefix} {message}\r\n".encode()
    if isinstance(value, bool):
        return b":1\r\n" if value else b":0\r\n"
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, float):
        value = repr(value)
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        return b"$%d\r\n%s\r\n" % (len(value), value)
    if isinstance(value, (list, tuple, set)):
        return b"*%d\r\n" % len(value) + b"".join(_encode_reply(v, prefixes) for v in value)
    if isinstance(value, dict):
        items = [item for pair in value.items() for item in pair]
        return _encode_reply(items, prefixes)
    raise TypeError(f"cannot encode a reply of type {type(value).__name__}")


class _Connection(socketserver.StreamRequestHandler):
    server: Endpoint

    def handle(self) -> None:
        if not self.server.slots.acquire(blocking=False):
            self.wfile.write(b"-ERR max number of clients reached\r\n")
            return
        try:
            self._serve()
        finally:
            self.server.slots.release()

    def _serve(self) -> None:
        self.connection.settimeout(PRE_AUTH_TIMEOUT_S)
        budget = PRE_AUTH_BYTES
        client: Any = None
        try:
            while client is None:  # before AUTH: a few small commands, then the door shuts
                if budget <= 0:
                    raise _Refused("ERR command too large for this endpoint")
                command, used = _read_command(self.rfile, budget)
                budget -= used
                client = self._before_auth(command)
            self.connection.settimeout(None)
            connection = client.connection
            while True:
                command, _ = _read_command(self.rfile, MAX_COMMAND_BYTES)
                if not command:
                    continue
                try:
                    connection.send_command(*command)
                    reply: Any = connection.read_response()
                except Exception as exc:  # an error reply is the data's answer: pass it on
                    reply = exc
                self._write(_encode_reply(reply, self.server.prefixes))
        except _Refused as exc:
            with contextlib.suppress(OSError):
                self._write(f"-{exc.args[0]}\r\n".encode())
        except (_Closed, OSError):
            pass
        finally:
            if client is not None:
                client.close()

    def _before_auth(self, command: list[bytes]) -> Any:
        """The connection's client of the data once ``command`` authenticated it, else
        None (having answered ``command``)."""
        import fakeredis

        name = command[0].upper() if command else b""
        if name == b"AUTH" and len(command) in (2, 3):
            user, password = (command[1], command[2]) if len(command) == 3 else (b"", command[1])
            expected = self.server.password.encode()
            if user == _USER.encode() and hmac.compare_digest(password, expected):
                self._write(b"+OK\r\n")
                return fakeredis.FakeRedis(
                    server=self.server.data,
                    username=_USER,
                    password=self.server.password,
                    protocol=2,
                    single_connection_client=True,
                )
            self._write(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
        elif name == b"QUIT":
            self._write(b"+OK\r\n")
            raise _Closed()
        else:
            self._write(b"-NOAUTH Authentication required.\r\n")
        return None

    def _write(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()


class Endpoint(socketserver.ThreadingTCPServer):
    """The data over the Redis protocol, to the holder of its password (bounds: the
    module docstring)."""

    daemon_threads = True
    allow_reuse_address = False
    address_family = socket.AF_INET

    def __init__(self, address: tuple[str, int], data: Any, password: str) -> None:
        self.data = data
        self.password = password
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.prefixes = _error_prefixes()
        self.live: set[socket.socket] = set()
        super().__init__(address, _Connection)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.live.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.live.discard(request)
        super().shutdown_request(request)

    def shutdown(self) -> None:
        """Stop accepting, and end the connections still open (their threads read on)."""
        super().shutdown()
        for request in list(self.live):
            with contextlib.suppress(OSError):
                request.shutdown(socket.SHUT_RDWR)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


_OPEN: dict[Path, EmbeddedStore] = {}


@atexit.register
def _close_all() -> None:
    """A process that never closed its store still saves it."""
    for store in list(_OPEN.values()):
        store.users = 1
        with contextlib.suppress(Exception):
            store.close()

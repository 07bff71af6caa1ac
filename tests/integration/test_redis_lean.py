"""RedisStore.from_url's own RESP2 path (acmi_core/store/resp.py) on a real redis-server,
with hiredis's parser and with the pure-Python one: every reply shape, errors, big
replies, pipelines, timeouts, broken connections, threads, fork, AUTH and TLS.

Servers that misbehave on purpose (silent, hanging up, answering BUSY) are a few lines
of socket code here; they read our commands with the same PyReader the store uses."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
import redis

from acmi_core.base.errors import StoreBusy, StoreCommandError, StoreUnavailable
from acmi_core.base.settings import Settings
from acmi_core.store import resp
from acmi_core.store.base import Script
from acmi_core.store.redis import RedisStore, RespStore
from acmi_core.testing.redis_server import RedisServer, free_port
from tests.kit import TEST_DBS

DB = TEST_DBS["redis_lean"]  # this module's own database (tests/kit.py TEST_DBS)
SLACK_S = 0.5  # 2 shared cores: a timeout may fire this late


@pytest.fixture(params=["hiredis", "python"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which reply parser stores opened in the test use."""
    if request.param == "python":
        monkeypatch.setattr(resp, "_hiredis_reader", lambda: None)
    elif resp._hiredis_reader() is None:
        pytest.skip("hiredis is not installed (pip install 'acmi[fast]'): its path is untested")
    name: str = request.param
    return name


def open_store(url: str, timeout_s: float = 5.0) -> RespStore:
    store = RedisStore.from_url(url, Settings(store_timeout_s=timeout_s))
    assert isinstance(store, RespStore)
    return store


@pytest.fixture
def store(redis_server: RedisServer, parser: str) -> Iterator[RespStore]:
    with redis.Redis.from_url(redis_server.url_for(DB)) as client:
        client.flushdb()
    with closing(open_store(redis_server.url_for(DB))) as opened:
        reader = opened._pool.reader()
        assert (type(reader) is resp.PyReader) == (parser == "python")
        yield opened


def test_every_reply_type(store: RespStore) -> None:
    assert store.execute(("PING",)) == b"PONG"  # status
    assert store.execute(("SET", "k", b"a\r\nb\xff")) == b"OK"
    assert store.execute(("GET", "k")) == b"a\r\nb\xff"  # bulk, CRLF and non-UTF-8 inside
    assert store.execute(("GET", "missing")) is None  # nil
    assert store.execute(("INCRBY", "n", -5)) == -5  # integer
    assert store.execute(("LRANGE", "missing", 0, -1)) == []  # empty array
    store.execute(("RPUSH", "l", "x", "", "välue"))
    assert store.execute(("LRANGE", "l", 0, -1)) == [b"x", b"", "välue".encode()]
    nested = Script("return {1, {KEYS[1], {ARGV[1]}}, {}, 'ok'}")
    assert store.eval(nested, ["key"], [2.5]) == [1, [b"key", [b"2.5"]], [], b"ok"]
    assert store.execute(("ZADD", "z", 1.5, "m")) == 1
    assert store.execute(("ZSCORE", "z", "m")) == b"1.5"


def test_error_replies(store: RespStore) -> None:
    store.execute(("SET", "s", "x"))
    with pytest.raises(StoreCommandError, match=r"^WRONGTYPE") as info:
        store.execute(("LPUSH", "s", "y"))
    assert type(info.value) is StoreCommandError  # not a 503
    with pytest.raises(StoreCommandError, match=r"^ERR"):
        store.eval(Script("return redis.error_reply('ERR from the script')"), [], [])
    assert store.execute(("GET", "s")) == b"x"  # the connection is fine after an error


def test_noscript_falls_back_to_eval_once(store: RespStore) -> None:
    script = Script(f"-- lean {time.time_ns()}\nreturn redis.call('INCR', KEYS[1])")
    store.execute(("SCRIPT", "FLUSH"))
    sent = store.script_dialect.render(script)[1]  # under its shebang (Redis 7)
    assert store.execute(("SCRIPT", "EXISTS", sent)) == [0]
    assert store.eval(script, ["c"], []) == 1  # NOSCRIPT, then EVAL (which loads it)
    assert store.execute(("SCRIPT", "EXISTS", sent)) == [1]
    assert store.script_dialect.shebang is True
    assert store.eval(script, ["c"], []) == 2  # EVALSHA now
    assert store.execute(("GET", "c")) == b"2"  # each call ran once


def test_a_reply_of_several_megabytes(store: RespStore) -> None:
    big = os.urandom(6 * 1024 * 1024)
    assert store.execute(("SET", "big", big)) == b"OK"
    assert store.execute(("GET", "big")) == big
    members = [b"m%06d" % i for i in range(100_000)]
    # pushed 2,000 a command: a request carries at most MAX_REQUEST_ARGS arguments
    store.pipeline([("RPUSH", "many", *members[i : i + 2_000]) for i in range(0, 100_000, 2_000)])
    assert store.execute(("LRANGE", "many", 0, -1)) == members


def test_a_pipeline_keeps_a_failed_slot(store: RespStore) -> None:
    results = store.pipeline([("SET", "p", "1"), ("HGET", "p", "f"), ("INCR", "p"), ("GET", "p")])
    assert results[0] == b"OK"
    assert isinstance(results[1], StoreCommandError) and str(results[1]).startswith("WRONGTYPE")
    assert results[2:] == [2, b"2"]
    assert store.pipeline([]) == []


def test_threads_share_one_store(store: RespStore) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(150):
                store.execute(("SET", f"t{n}", f"{n}:{i}"))
                # A reply crossed between threads would show another thread's value here.
                assert store.execute(("GET", f"t{n}")) == f"{n}:{i}".encode()
                assert store.pipeline([("INCR", "shared"), ("GET", f"t{n}")])[1] == (
                    f"{n}:{i}".encode()
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.execute(("GET", "shared")) == b"1200"
    assert 1 <= len(store._pool._idle) <= 8  # one connection per thread in flight at most


def test_a_killed_connection_fails_once_then_reconnects(
    store: RespStore, redis_server: RedisServer
) -> None:
    first = store.execute(("CLIENT", "ID"))
    with redis.Redis.from_url(redis_server.url) as admin:
        assert admin.execute_command("CLIENT", "KILL", "ID", first) == 1
    with pytest.raises(StoreUnavailable, match="redis unreachable"):
        store.execute(("GET", "k"))  # exactly one attempt: no hidden retry
    second = store.execute(("CLIENT", "ID"))
    assert isinstance(second, int) and second != first  # a new connection, in this db
    assert store.execute(("SET", "after", "1")) == b"OK"


def test_a_forked_child_never_uses_the_parents_connection(store: RespStore) -> None:
    parent = store.execute(("CLIENT", "ID"))  # leaves one connection idle in the pool
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its connection's id, then leave at once
        try:
            os.write(write_end, str(store.execute(("CLIENT", "ID"))).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        child = int(pipe.read() or b"-1")
    os.waitpid(pid, 0)
    assert child not in (-1, parent)
    assert store.execute(("CLIENT", "ID")) == parent  # the parent's is intact


# -- servers that misbehave ------------------------------------------------------------


class FakeRedis:
    """A RESP server on a free port whose every answer comes from ``answer(command)``:
    bytes to send, None to stay silent, or "close" to hang up."""

    def __init__(self, answer: Callable[[list[bytes]], bytes | str | None]) -> None:
        self.answer = answer
        self.accepted = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.accepted += 1
            self._conns.append(conn)
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        reader = resp.PyReader()  # a command is a RESP array too
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            reader.feed(data)
            while (command := reader.gets()) is not False:
                reply = self.answer(command)
                if reply == "close":
                    conn.close()
                    return
                if isinstance(reply, bytes):
                    conn.sendall(reply)

    def close(self) -> None:
        self._sock.close()
        for conn in self._conns:
            conn.close()


@contextmanager
def fake_redis(answer: Callable[[list[bytes]], bytes | str | None]) -> Iterator[FakeRedis]:
    server = FakeRedis(answer)
    try:
        yield server
    finally:
        server.close()


def test_a_silent_server_times_out_within_the_timeout(parser: str) -> None:
    with fake_redis(lambda command: None) as server:
        with closing(open_store(server.url(), timeout_s=0.4)) as store:
            for call in (
                lambda: store.execute(("GET", "k")),
                lambda: store.pipeline([("GET", "k")] * 3),
                lambda: store.eval(Script("return 1"), [], []),
            ):
                start = time.monotonic()
                with pytest.raises(StoreUnavailable, match="Timeout"):
                    call()
                elapsed = time.monotonic() - start
                assert 0.35 <= elapsed < 0.4 + SLACK_S, f"{elapsed:.2f}s"
            assert store._pool._idle == []  # each timed-out connection was dropped
        assert server.accepted == 3  # one attempt per call


def test_a_silent_handshake_times_out_too(parser: str) -> None:
    # The SELECT of a new connection gets no answer: bounded by the same timeout.
    with (
        fake_redis(lambda command: None) as server,
        closing(open_store(server.url(db=3), timeout_s=0.3)) as store,
    ):
        start = time.monotonic()
        with pytest.raises(StoreUnavailable, match="Timeout"):
            store.execute(("PING",))
        assert time.monotonic() - start < 0.3 + SLACK_S


def test_half_a_reply_then_silence_is_unavailable_and_not_reused(parser: str) -> None:
    sent: list[int] = []

    def answer(command: list[bytes]) -> bytes | str:
        sent.append(1)
        return b"*2\r\n$1\r\na\r\n" if len(sent) == 1 else b"+PONG\r\n"

    with fake_redis(answer) as server:
        with closing(open_store(server.url(), timeout_s=0.3)) as store:
            with pytest.raises(StoreUnavailable, match="Timeout"):
                store.execute(("LRANGE", "l", 0, -1))  # half a reply, then silence
            assert store.execute(("PING",)) == b"PONG"  # on a new connection
        assert server.accepted == 2


def test_a_closed_connection_is_unavailable(parser: str) -> None:
    with (
        fake_redis(lambda command: "close") as server,
        closing(open_store(server.url())) as store,
        pytest.raises(StoreUnavailable, match=r"ConnectionResetError|BrokenPipeError"),
    ):
        store.execute(("PING",))


def test_garbage_on_the_wire_is_unavailable(parser: str) -> None:
    with (
        fake_redis(lambda command: b"HTTP/1.1 400 Bad Request\r\n") as server,
        closing(open_store(server.url())) as store,
    ):
        with pytest.raises(StoreUnavailable, match="ProtocolError"):
            store.execute(("PING",))
        assert store._pool._idle == []


def test_busy_is_store_busy_from_a_call_a_pipeline_slot_and_the_handshake(parser: str) -> None:
    busy = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL\r\n"

    def answer(command: list[bytes]) -> bytes:
        return b"+OK\r\n" if command[0] == b"SELECT" else busy

    with fake_redis(answer) as server, closing(open_store(server.url(db=2))) as store:
        for call in (
            lambda: store.execute(("GET", "k")),
            lambda: store.pipeline([("GET", "k"), ("GET", "j")]),
            lambda: store.eval(Script("return 1"), [], []),
        ):
            with pytest.raises(StoreBusy, match="BUSY"):
                call()
        assert len(store._pool._idle) == 1  # an error reply leaves the connection usable
    with (
        fake_redis(lambda command: busy) as server,
        closing(open_store(server.url(db=2))) as store,
        pytest.raises(StoreBusy, match="BUSY"),
    ):
        store.execute(("PING",))  # its SELECT was refused for now


# -- AUTH, unix sockets, TLS -----------------------------------------------------------


def test_user_and_password_and_a_wrong_password(redis_server: RedisServer, parser: str) -> None:
    with redis.Redis.from_url(redis_server.url) as admin:
        admin.execute_command("ACL", "SETUSER", "lean", "on", ">s3cret", "~*", "+@all")
    port = redis_server.port
    with closing(open_store(f"redis://lean:s3cret@127.0.0.1:{port}/{DB}")) as store:
        assert store.execute(("ACL", "WHOAMI")) == b"lean"
        store.execute(("SET", "authed", "1"))
    with closing(open_store(f"redis://lean:wrong@127.0.0.1:{port}/{DB}")) as store:
        with pytest.raises(StoreUnavailable, match="AUTH refused: WRONGPASS") as info:
            store.execute(("PING",))
        assert "wrong" not in str(info.value)


@contextmanager
def own_redis(*args: str) -> Iterator[None]:
    """A redis-server of this test's own with extra options; yields once it listens."""
    exe = shutil.which("redis-server")
    assert exe is not None, "redis-server is on PATH (the session fixture needs it too)"
    proc = subprocess.Popen(
        [exe, "--save", "", "--appendonly", "no", "--bind", "127.0.0.1", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        time.sleep(0.05)
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"redis-server {' '.join(args)} exited: {err}")
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def ready(url: str) -> RespStore:
    deadline = time.monotonic() + 10
    while True:
        store = open_store(url, timeout_s=1.0)
        try:
            store.execute(("PING",))
            return store
        except StoreUnavailable:
            store.close()
            assert time.monotonic() < deadline, f"{url} never answered"
            time.sleep(0.05)


def test_a_unix_socket(tmp_path: Path, parser: str) -> None:
    path = tmp_path / "redis.sock"
    with (
        own_redis("--port", "0", "--unixsocket", str(path)),
        closing(ready(f"unix://{path}?db=2")) as store,
    ):
        assert store.execute(("SET", "u", "1")) == b"OK"
        assert store.pipeline([("GET", "u"), ("CLIENT", "INFO")])[0] == b"1"


def test_tls(tmp_path: Path, parser: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not on PATH: no certificate to serve TLS with")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    tls = ["--port", "0", "--tls-port", str(port), "--tls-auth-clients", "no"]
    tls += ["--tls-cert-file", str(cert), "--tls-key-file", str(key)]
    tls += ["--tls-ca-cert-file", str(cert)]
    with own_redis(*tls):
        url = f"rediss://127.0.0.1:{port}/1?ssl_ca_certs={cert}"
        with closing(ready(url)) as store:
            big = os.urandom(1 << 20)
            assert store.pipeline([("SET", "t", big), ("GET", "t")]) == [b"OK", big]
            assert store._pool._ssl is not None
            context = store._pool._ssl
            own_id = store.execute(("CLIENT", "ID"))
            assert isinstance(own_id, int)
            with closing(open_store(url)) as admin:
                admin.execute(("CLIENT", "KILL", "ID", own_id))
            with pytest.raises(StoreUnavailable):
                store.execute(("PING",))
            assert store.execute(("PING",)) == b"PONG"
            assert store._pool._ssl is context  # one context per store, reused
        with (
            closing(open_store(f"rediss://127.0.0.1:{port}/1")) as unknown_ca,
            pytest.raises(StoreUnavailable, match="CERTIFICATE_VERIFY_FAILED"),
        ):
            unknown_ca.execute(("PING",))
        with closing(open_store(f"rediss://127.0.0.1:{port}/1?ssl_cert_reqs=none")) as store:
            assert store.execute(("GET", "t")) == big


def test_a_redis_py_client_is_still_a_store(redis_server: RedisServer) -> None:
    # RedisStore(client): the embedded store's fakeredis path, here on a real server.
    with closing(RedisStore(redis.Redis.from_url(redis_server.url_for(DB)))) as store:
        assert store.execute(("SET", "py", "1")) == b"OK"
        assert store.pipeline([("GET", "py"), ("HGET", "py", "f")])[0] == b"1"
        assert store.eval(Script("return ARGV[1]"), [], ["x"]) == b"x"

"""The embedded default is one store for every local process, kept on disk (issue 9, item
4): `acmi serve`, every CLI command and a restarted server see the same data, in the data
directory (ACMI_HOME); the CLI says which store it uses. Every test uses its own tmp data
directory and a HOME under tmp: nothing here reads or writes the real home."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from acmi_core import CorruptData, Settings, StoreUnavailable, create_acmi
from acmi_core.store import local
from acmi_core.store.local import EmbeddedStore, ServedStore, open_local_store
from tests.kit import ROOT


def _env(home: Path) -> dict[str, str]:
    """A user's environment: no store configured, the data directory under ``home``."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "HOME": str(home / "home"),
        "ACMI_HOME": str(home / "data"),
    }


def acmi(home: Path, *argv: str) -> tuple[int, Any, str]:
    """``acmi <argv>`` in a fresh process: (exit code, stdout as JSON, stderr)."""
    result = subprocess.run(
        [sys.executable, "-m", "acmi_core", *argv],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out = json.loads(result.stdout) if result.stdout.strip() else None
    return result.returncode, out, result.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """``acmi serve`` in the background, started and stopped as a user does (Ctrl-C)."""

    def __init__(self, home: Path) -> None:
        self.home, self.port = home, _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "acmi_core", "serve", "--port", str(self.port)],
            env=_env(home),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.communicate()[1]
            try:
                if httpx.get(f"{self.base}/v1/entities/user:x", timeout=1).status_code == 401:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        self.stop()
        pytest.fail("acmi serve did not start")

    def stop(self, sig: int = signal.SIGINT) -> str:
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode in (0, 128 + sig), err
        return err


@pytest.mark.slow  # four CLI processes and two server starts (about 6 s)
def test_serve_cli_and_a_restarted_server_share_the_data(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = Server(tmp_path)
    try:
        endpoint = json.loads((data / local.ENDPOINT_FILE).read_text())
        # the CLI goes through the running server, and says so
        code, record, err = acmi(
            tmp_path, "keys", "create", "--tenant", "default", "--scope", "admin"
        )
        assert code == 0, err
        assert f"# store: embedded via acmi serve at 127.0.0.1:{endpoint['port']}" in err
        key = record["key"]
        # the key the CLI printed is one the server accepts
        response = httpx.post(
            f"{server.base}/v1/ingest/n8n?entity=deal:acme-42",
            headers={"authorization": f"Bearer {key}"},
            json={"message": "Invoice paid"},
        )
        assert response.status_code == 201, response.text
    finally:
        stopped = server.stop()
    assert "# store: embedded, " in stopped
    assert not (data / local.ENDPOINT_FILE).exists()  # gone with the server
    assert (data / local.SNAPSHOT_FILE).exists()

    server = Server(tmp_path)  # a restart loads the snapshot: the key and the event
    try:
        auth = {"authorization": f"Bearer {key}"}
        response = httpx.get(f"{server.base}/v1/entities/deal:acme-42", headers=auth)
        assert response.status_code == 200, response.text
        assert [e["summary"] for e in response.json()["timeline"]] == ["Invoice paid"]
        response = httpx.post(
            f"{server.base}/v1/ingest/n8n?entity=deal:acme-42", headers=auth, json={"message": "x"}
        )
        assert response.status_code == 201, response.text
    finally:
        server.stop(signal.SIGTERM)  # at once, as `kill` does: the last write still saved

    code, context, err = acmi(tmp_path, "get", "deal", "acme-42")  # no server: the file
    assert code == 0, err
    assert f"# store: embedded, {data}" in err
    assert sorted(e["summary"] for e in context["timeline"]) == ["Invoice paid", "x"]


@pytest.mark.slow  # two fresh interpreters (about 1.5 s)
def test_cli_commands_share_the_data_without_a_server(tmp_path: Path) -> None:
    code, _, err = acmi(tmp_path, "profile", "user", "alice", '{"name": "Alice"}')
    assert code == 0, err
    assert f"# store: embedded, {tmp_path / 'data'}" in err
    code, context, err = acmi(tmp_path, "get", "user", "alice")
    assert code == 0, err
    assert context["profile"]["name"] == "Alice"
    # private to the user: the directory 0700, the snapshot 0600
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "data" / local.SNAPSHOT_FILE).stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "home").exists()


@pytest.mark.slow  # four fresh interpreters at once (about 1.5 s)
def test_concurrent_cli_commands_lose_no_write(tmp_path: Path) -> None:
    """Each command holds the data (the lock) from load to save: none overwrites
    another's snapshot with an older copy."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "acmi_core",
                "signal",
                "user",
                "bob",
                json.dumps({f"s{i}": i}),
                "--merge",
            ],
            env=_env(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in range(4)
    ]
    for proc in procs:
        assert proc.wait(timeout=60) == 0, proc.communicate()[1]
    code, context, err = acmi(tmp_path, "get", "user", "bob")
    assert code == 0, err
    assert context["signals"] == {f"s{i}": i for i in range(4)}


@pytest.mark.slow  # a fresh interpreter
def test_demo_uses_a_throwaway_store(tmp_path: Path) -> None:
    code = subprocess.run(
        [sys.executable, "-m", "acmi_core", "demo"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert code.returncode == 0, code.stderr
    assert f"# store: embedded, throwaway (samples stay out of {tmp_path / 'data'})" in code.stderr
    assert not (tmp_path / "data").exists()


# --- the store in process ----------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=str(tmp_path / "data"))


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    """Stores a test opened, closed after it even if it fails."""
    stores: list[Any] = []
    yield stores
    for store in stores:
        if isinstance(store, EmbeddedStore) and store.users > 0:
            store.users = 1
        store.close()


def test_the_data_dir_default_follows_xdg(tmp_path: Path) -> None:
    assert local.data_dir(Settings(), {"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "acmi"
    assert local.data_dir(Settings(home=str(tmp_path / "x")), {}) == tmp_path / "x"
    assert local.data_dir(Settings(), {}) == Path.home() / ".local" / "share" / "acmi"
    assert Settings.from_env({"ACMI_HOME": "/srv/acmi"}).home == "/srv/acmi"


def test_expiry_survives_a_restart_and_expired_keys_are_dropped(
    settings: Settings, opened: list[Any]
) -> None:
    store = open_local_store(settings)
    assert isinstance(store, EmbeddedStore)
    store.execute(("SET", "lasting", "1"))
    store.execute(("SET", "expiring", "2", "PX", "600000"))
    store.execute(("HSET", "h", "f", "v"))
    store.close()
    path = store.home / local.SNAPSHOT_FILE
    snapshot = json.loads(path.read_text())
    assert snapshot["format"] == local.SNAPSHOT_FORMAT
    store = open_local_store(settings)
    opened.append(store)
    assert store.execute(("GET", "lasting")) == b"1"
    assert store.execute(("HGET", "h", "f")) == b"v"
    ttl = store.execute(("PTTL", "expiring"))
    assert isinstance(ttl, int) and 590_000 < ttl <= 600_000
    opened.pop().close()
    # the record's expiry passed while nothing ran: not restored
    for entry in snapshot["keys"]:
        if base64.b64decode(entry[0]) == b"expiring":
            entry[1] = int(time.time() * 1000) - 1
    path.write_text(json.dumps(snapshot))
    store = open_local_store(settings)
    opened.append(store)
    assert store.execute(("EXISTS", "expiring")) == 0
    assert store.execute(("GET", "lasting")) == b"1"


def test_a_second_command_waits_then_says_the_data_is_held(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "LOCK_WAIT_S", 0.2)
    home = local.data_dir(settings)
    home.mkdir(parents=True)
    fd = os.open(home / local.LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another command is writing
    try:
        with pytest.raises(StoreUnavailable, match="held by another acmi process"):
            open_local_store(settings)
    finally:
        os.close(fd)


def test_a_stale_endpoint_file_is_ignored(settings: Settings, opened: list[Any]) -> None:
    home = local.data_dir(settings)
    home.mkdir(parents=True)
    port = _free_port()  # nothing listens: the server was killed
    info = {"host": "127.0.0.1", "port": port, "pid": 1, "password": "x"}
    (home / local.ENDPOINT_FILE).write_text(json.dumps(info))
    store = open_local_store(settings)
    opened.append(store)
    assert isinstance(store, EmbeddedStore)
    assert not (home / local.ENDPOINT_FILE).exists()


def test_the_served_endpoint_needs_its_password(settings: Settings, opened: list[Any]) -> None:
    store = open_local_store(settings)
    opened.append(store)
    assert isinstance(store, EmbeddedStore)
    host, port = store.serve()
    store.execute(("SET", "k", "v"))
    anonymous = redis.Redis(host=host, port=port, protocol=2)
    with anonymous, pytest.raises(redis.AuthenticationError, match="Authentication required"):
        anonymous.get("k")
    wrong = redis.Redis(host=host, port=port, username="acmi", password="x" * 32, protocol=2)
    with wrong, pytest.raises(redis.AuthenticationError, match="invalid username-password"):
        wrong.get("k")
    client = open_local_store(settings)  # in this process: the owner itself
    assert client is store
    client.close()
    info = json.loads((store.home / local.ENDPOINT_FILE).read_text())
    assert (store.home / local.ENDPOINT_FILE).stat().st_mode & 0o777 == 0o600
    served = ServedStore(host, port, info["password"], settings)
    opened.insert(0, served)
    assert served.execute(("GET", "k")) == b"v"
    assert served.description == f"embedded via acmi serve at {host}:{port}"


def test_a_corrupt_snapshot_is_named_not_overwritten(settings: Settings, tmp_path: Path) -> None:
    home = local.data_dir(settings)
    home.mkdir(parents=True)
    (home / local.SNAPSHOT_FILE).write_text("{not json")
    with pytest.raises(CorruptData, match=str(home / local.SNAPSHOT_FILE)):
        open_local_store(settings)
    assert (home / local.SNAPSHOT_FILE).read_text() == "{not json"
    fd = os.open(home / local.LOCK_FILE, os.O_RDWR)
    try:  # the failed open let go of the data
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_the_endpoint_never_takes_the_http_port(
    settings: Settings, opened: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`acmi serve` binds its HTTP port after the endpoint: if the OS hands the endpoint
    that very port (both are free ephemeral ports), the endpoint takes another."""
    real = local.Endpoint
    http_port = socket_port()
    handed: list[int] = []

    class FirstGetsTheHttpPort(real):
        def __init__(self, address: tuple[str, int], *args: Any, **kwargs: Any) -> None:
            port = http_port if not handed else address[1]
            handed.append(port)
            super().__init__((address[0], port), *args, **kwargs)

    monkeypatch.setattr(local, "Endpoint", FirstGetsTheHttpPort)
    store = open_local_store(settings)
    opened.append(store)
    assert isinstance(store, EmbeddedStore)
    _, port = store.serve(avoid=http_port)
    assert handed[0] == http_port and port != http_port


def socket_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# --- the served endpoint's bounds and the data directory's mode ---------------------------


def _raw_connection(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    return sock


def _send_until_closed(sock: socket.socket, total: int) -> int:
    """Send ``total`` bytes of a bulk string's body; the bytes sent before the server
    closed the connection (``total`` when it never did)."""
    chunk = b"x" * (256 * 1024)
    sent = 0
    try:
        while sent < total:
            sent += sock.send(chunk)
    except OSError:  # reset or broken pipe: the server stopped reading and closed
        pass
    return sent


def _answer(sock: socket.socket) -> bytes:
    """What the server answered before closing (b"" if it answered nothing in 5 s)."""
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except (TimeoutError, OSError):
        pass
    return data


def test_the_endpoint_reads_a_few_kb_before_auth(settings: Settings, opened: list[Any]) -> None:
    """Before: the endpoint took a 200 MB AUTH argument whole before looking at it. Now it
    answers and closes once a connection passes PRE_AUTH_BYTES without authenticating."""
    store = open_local_store(settings)
    opened.append(store)
    assert isinstance(store, EmbeddedStore)
    host, port = store.serve()
    claimed = 200 * 1024 * 1024
    with _raw_connection(host, port) as sock:
        sock.sendall(b"*3\r\n$4\r\nAUTH\r\n$4\r\nacmi\r\n$%d\r\n" % claimed)
        sent = _send_until_closed(sock, 32 * 1024 * 1024)
        answer = _answer(sock)
    assert answer == b"-ERR command too large for this endpoint\r\n"
    # the server read nothing of the body: what was sent sits in the kernel's buffers
    assert sent < 32 * 1024 * 1024
    # and many small commands add up to the same budget
    with _raw_connection(host, port) as sock:
        pings = b"PING\r\n" * (local.PRE_AUTH_BYTES // 6 + 1)
        with contextlib.suppress(OSError):
            sock.sendall(pings)
        answer = _answer(sock)
    assert answer.endswith(b"-ERR command too large for this endpoint\r\n")
    assert answer.count(b"-NOAUTH") <= local.PRE_AUTH_BYTES // 6 + 1  # then it stopped
    assert store.execute(("PING",)) == b"PONG"  # the data is served on


def test_the_endpoint_bounds_a_command_after_auth(settings: Settings, opened: list[Any]) -> None:
    store = open_local_store(settings)
    opened.append(store)
    assert isinstance(store, EmbeddedStore)
    host, port = store.serve()
    password = json.loads((store.home / local.ENDPOINT_FILE).read_text())["password"].encode()
    with _raw_connection(host, port) as sock:
        auth = b"*3\r\n$4\r\nAUTH\r\n$4\r\nacmi\r\n$%d\r\n%s\r\n" % (len(password), password)
        sock.sendall(auth)
        assert sock.recv(5) == b"+OK\r\n"
        header = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (local.MAX_COMMAND_BYTES + 1)
        sock.sendall(header)
        assert _answer(sock) == b"-ERR command too large for this endpoint\r\n"
    assert store.execute(("EXISTS", "k")) == 0  # nothing stored


@pytest.mark.slow  # a server start and the whole suite (about 6 s)
def test_the_whole_conformance_suite_passes_through_the_endpoint(
    tmp_path: Path, opened: list[Any]
) -> None:
    """What the CLI does through a running ``acmi serve``: every store check, over the
    endpoint (scripts, pipelines, transactions, error replies). The server runs in its own
    process, as a user's does: 50 writer threads sharing one interpreter with the server
    measured the GIL's convoy (the slowest call past the 5 s store timeout), not the store."""
    from acmi_core.testing.conformance import run_conformance

    server = Server(tmp_path)
    try:
        endpoint = json.loads((tmp_path / "data" / local.ENDPOINT_FILE).read_text())
        settings = Settings(home=str(tmp_path / "data"))
        served = ServedStore(endpoint["host"], endpoint["port"], endpoint["password"], settings)
        opened.append(served)
        report = run_conformance(create_acmi(served, Settings()), store_independent=False)
        assert not report.failed, str(report)
        assert report.passed
    finally:
        server.stop()


def test_the_data_directory_is_0700_even_when_it_existed(
    settings: Settings, opened: list[Any]
) -> None:
    home = local.data_dir(settings)
    home.mkdir(parents=True, mode=0o755)
    home.chmod(0o755)  # as `mkdir` leaves it (before: it stayed so)
    (home / local.LOCK_FILE).touch(mode=0o644)
    store = open_local_store(settings)
    opened.append(store)
    assert isinstance(store, EmbeddedStore)
    store.execute(("SET", "k", "v"))
    store.serve()
    assert store.save()
    assert home.stat().st_mode & 0o777 == 0o700
    for name in (local.LOCK_FILE, local.SNAPSHOT_FILE, local.ENDPOINT_FILE):
        assert (home / name).stat().st_mode & 0o777 == 0o600, name

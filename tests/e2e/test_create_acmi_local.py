"""``create_acmi()`` with no store configured is the data the ``acmi`` command and ``acmi
serve`` share (issue 23): what the library writes the CLI reads and the reverse, through a
running server when one runs, and the lock is held per call, so a long-lived client never
locks the CLI out. Every test has its own data directory."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from acmi_core import Acmi, EntityId, Settings, StoreUnavailable, create_acmi
from acmi_core.store import local
from acmi_core.store.local import EmbeddedStore, open_local_store
from acmi_core.store.shared import SharedLocalStore
from tests.e2e.test_local_store import Server, acmi

EVENT = {"source": "user:mikey", "kind": "note", "correlationId": "m-1", "summary": "take 1"}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's environment: no Redis, no Upstash, the data directory under tmp."""
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_HOME", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture
def client(home: Path) -> Iterator[Acmi]:
    acmi_ = create_acmi()
    yield acmi_
    acmi_.close()


def test_no_configuration_is_the_shared_embedded_store(client: Acmi, home: Path) -> None:
    assert isinstance(client.store, SharedLocalStore)
    assert client.store.name == "embedded"  # persistent: the public sample key is refused
    assert client.store.home == home / "data"


@pytest.mark.slow  # four CLI processes (about 2 s)
def test_the_library_and_the_cli_see_each_others_writes(client: Acmi, home: Path) -> None:
    client.profile.set("user:mikey", {"name": "Mikey"})
    client.timeline.append("user:mikey", EVENT)
    client.for_tenant("acme").profile.set("user:mikey", {"name": "Acme's Mikey"})
    # the client is alive and holds nothing between calls: the CLI runs at once
    code, got, err = acmi(home, "get", "user", "mikey")
    assert code == 0, err
    assert f"# store: embedded, {home / 'data'}" in err
    assert got["profile"]["name"] == "Mikey"
    assert [e["summary"] for e in got["timeline"]] == ["take 1"]
    code, got, err = acmi(home, "--tenant", "acme", "get", "user", "mikey")
    assert code == 0, err
    assert got["profile"]["name"] == "Acme's Mikey" and got["timeline"] == []
    # the CLI's write reaches the client's next call (its cached copy is loaded again)
    code, _, err = acmi(home, "signal", "user", "mikey", '{"mood": "focused"}')
    assert code == 0, err
    assert client.get("user:mikey").signals == {"mood": "focused"}
    assert client.for_tenant("acme").get("user:mikey").signals == {}
    code, got, err = acmi(home, "list", "user")
    assert code == 0, err
    assert got == ["user:mikey"]


@pytest.mark.slow  # acmi serve and a CLI process (about 3 s)
def test_through_a_running_server(home: Path) -> None:
    server = Server(home)
    try:
        client = create_acmi()
        try:
            client.profile.set("user:ada", {"name": "Ada"})
            assert client.store.description.startswith("embedded via acmi serve at 127.0.0.1:")
            # the server holds the data for its lifetime: the client never took the lock
            assert client.for_tenant("acme").get("user:ada").profile is None
        finally:
            client.close()
        code, got, err = acmi(home, "get", "user", "ada")
        assert code == 0, err
        assert "via acmi serve" in err and got["profile"]["name"] == "Ada"
    finally:
        server.stop()
    # the server saved it at shutdown; the next client reads the file
    again = create_acmi()
    try:
        assert again.get("user:ada").profile["name"] == "Ada"
        assert again.store.description == f"embedded, {home / 'data'} (held per call)"
    finally:
        again.close()


def test_two_clients_lose_no_write(home: Path) -> None:
    """Each call holds the data from load to save, so two clients (each its own lock file
    descriptor, as two processes) interleaving writes keep every one."""
    settings = Settings.from_env()
    stores = [SharedLocalStore(settings), SharedLocalStore(settings)]

    def bump(store: SharedLocalStore) -> None:
        for _ in range(40):
            store.execute(("INCR", "counter"))

    threads = [threading.Thread(target=bump, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    fresh = SharedLocalStore(settings)
    try:
        assert fresh.execute(("GET", "counter")) == b"80"
        assert stores[0].execute(("GET", "counter")) == b"80"  # its copy was reloaded
    finally:
        for store in (*stores, fresh):
            store.close()


def test_a_store_this_process_holds_is_used_not_waited_for(home: Path) -> None:
    held = open_local_store(Settings.from_env())  # as a CLI command in this process
    assert isinstance(held, EmbeddedStore)
    client = create_acmi()
    try:
        client.profile.set("user:bob", {"name": "Bob"})
        key = client.keys.profile(EntityId.parse("user:bob", "entity"))
        assert held.execute(("EXISTS", key)) == 1
    finally:
        client.close()
        held.close()
    again = create_acmi()
    try:
        assert again.get("user:bob").profile["name"] == "Bob"  # saved by the holder's close
    finally:
        again.close()


def test_a_call_waits_for_a_command_then_says_the_data_is_held(
    client: Acmi, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "LOCK_WAIT_S", 0.2)
    client.profile.set("user:eve", {"name": "Eve"})
    fd = os.open(home / "data" / local.LOCK_FILE, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a CLI command is writing
    try:
        with pytest.raises(StoreUnavailable, match="held by another acmi process"):
            client.get("user:eve")
    finally:
        os.close(fd)
    assert client.get("user:eve").profile["name"] == "Eve"  # released: the next call runs

"""``create_acmi()``'s embedded store: the on-disk data the ``acmi`` command and ``acmi
serve`` share (``local.py``), held for one call at a time.

A library client may live as long as its program, so it cannot hold ``store.lock`` the way
a CLI command does (for its length) without locking every ``acmi`` command out. Each call
(one command, one pipeline, one script) instead picks where the data is now:

- this process already owns it (a CLI command or ``acmi serve`` in process): that store;
- a running ``acmi serve``: its endpoint (the client is kept while ``serve.json`` is
  unchanged);
- else the flock for the call alone (waiting up to ``local.LOCK_WAIT_S``), the data
  loaded (again only when the lock file's stamp or the snapshot changed since this
  process last held it), the call run, the snapshot saved if it wrote, the flock released.

So each call is still one round trip to the data and atomic as on Redis; a write is on
disk when the call returns. The data cached between holds is never trusted without the
stamp check: every save replaces the stamp before it replaces the snapshot.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from acmi_core.base.errors import StoreCommandError, StoreUnavailable
from acmi_core.base.settings import Settings
from acmi_core.store import local
from acmi_core.store.base import Arg, Command, Reply, Script, Store
from acmi_core.store.redis import RedisStore

T = TypeVar("T")
_Seen = tuple[bytes, tuple[int, int, int] | None]


class SharedLocalStore:
    """The shared local data, reached per call (module docstring)."""

    name = "embedded"  # persistent: the public sample key is refused, as on any real store

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.home: Path = local.prepared_home(settings)
        self._mutex = threading.RLock()  # one call at a time: a reload swaps the data
        self._fd: int | None = None
        self._data: local.EmbeddedStore | None = None
        self._seen: _Seen | None = None
        self._served: local.ServedStore | None = None
        self._served_info: bytes | None = None

    @property
    def description(self) -> str:
        served = self._served
        if served is not None:
            return served.description
        return f"embedded, {self.home} (held per call)"

    # --- the Store protocol -------------------------------------------------------------

    def execute(self, command: Command) -> Reply:
        return self._call(lambda store: store.execute(command))

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        return self._call(lambda store: store.pipeline(commands))

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        return self._call(lambda store: store.eval(script, keys, args))

    def close(self) -> None:
        with self._mutex:
            self._drop_served()
            self._drop_data()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    # --- where the data is, per call ----------------------------------------------------

    def _call(self, run: Callable[[Store], T]) -> T:
        import fcntl

        with self._mutex:
            owner = local._OPEN.get(self.home)
            if owner is not None:  # this process holds the data already: flock would wait on it
                return run(owner)
            served = self._serve_client()
            if served is not None:
                return run(served)
            fd = self._lock_fd()
            deadline = time.monotonic() + local.LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    served = self._serve_client()  # a server that started meanwhile holds it
                    if served is not None:
                        return run(served)
                    if time.monotonic() > deadline:
                        raise StoreUnavailable(
                            f"the embedded store at {self.home} is held by another acmi "
                            f"process (waited {local.LOCK_WAIT_S:g} s): retry when that "
                            "command has finished"
                        ) from None
                    time.sleep(0.05)
            try:
                data = self._current(fd)
                try:
                    return run(data)
                finally:
                    data.save()
                    self._seen = self._look(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _lock_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.home / local.LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
            os.fchmod(self._fd, 0o600)  # an older lock file may be wider
        return self._fd

    def _look(self, fd: int) -> _Seen:
        """What says whether the data changed: the lock file's stamp and the snapshot's
        identity (an older acmi writes no stamp)."""
        try:
            stat = (self.home / local.SNAPSHOT_FILE).stat()
            identity: tuple[int, int, int] | None = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        except FileNotFoundError:
            identity = None
        return local.stamp_of(fd), identity

    def _current(self, fd: int) -> local.EmbeddedStore:
        """The data as on disk (held under the flock): the cached copy if nothing saved
        since, else loaded again."""
        if self._data is None or self._seen != self._look(fd):
            self._drop_data()
            self._data = local.EmbeddedStore(self.home, fd)
        return self._data

    def _serve_client(self) -> local.ServedStore | None:
        """A client of the running ``acmi serve``, or None when none runs."""
        try:
            info = (self.home / local.ENDPOINT_FILE).read_bytes()
        except OSError:
            info = None
        if info is not None and info == self._served_info and self._served is not None:
            return self._served
        self._drop_served()
        if info is None:
            return None
        served = local._connect_to_serve(self.home, self._settings)
        if served is not None:
            self._served, self._served_info = served, info
        return served

    def _drop_served(self) -> None:
        if self._served is not None:
            with contextlib.suppress(Exception):
                self._served.close()
        self._served = self._served_info = None

    def _drop_data(self) -> None:
        if self._data is not None:
            # not EmbeddedStore.close: this store's fd and flock outlive the copy
            RedisStore.close(self._data)
            self._data = None
            self._seen = None

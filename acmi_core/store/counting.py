"""A store that counts what passes through it: requests (round trips) and Redis commands
(a script run counts as one command, a pipeline as its commands). Scheduled jobs run on
one, so each run can report what it cost; the O(changed) tests compare the counts."""

from __future__ import annotations

from collections.abc import Sequence

from acmi_core.base.errors import StoreCommandError
from acmi_core.store.base import Arg, Command, Reply, Script, Store


class CountingStore:
    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.name = inner.name
        self.requests = 0
        self.commands = 0

    def reset(self) -> None:
        self.requests = self.commands = 0

    def execute(self, command: Command) -> Reply:
        self.requests += 1
        self.commands += 1
        return self.inner.execute(command)

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        self.requests += 1
        self.commands += len(commands)
        return self.inner.pipeline(commands)

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        self.requests += 1
        self.commands += 1
        return self.inner.eval(script, keys, args)

    def close(self) -> None:
        self.inner.close()


__all__ = ["CountingStore"]

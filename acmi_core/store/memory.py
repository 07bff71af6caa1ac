"""MemoryStore: the embedded default. An in-process Redis (fakeredis, running our Lua
through lupa's Lua 5.1, as Redis does) behind the same code as RedisStore, so it
passes the same conformance suite. Data lives as long as the process; the `acmi`
command's default keeps it on disk and shares it (``local.py``, a subclass)."""

from __future__ import annotations

from acmi_core.store.redis import RedisStore


class MemoryStore(RedisStore):
    name = "memory"

    def __init__(self) -> None:
        import fakeredis  # only the embedded default pays for this import

        super().__init__(fakeredis.FakeRedis(server=fakeredis.FakeServer(), protocol=2))

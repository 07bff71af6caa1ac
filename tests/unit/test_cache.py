"""The per-process auth cache (TtlCache, KeyCache): least-recently-used eviction, misses
kept apart from hits, both bounded, expiry by an injected clock."""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

import pytest

from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import KeyCache
from acmi_core.base.cache import TtlCache
from acmi_core.store.base import Store
from acmi_core.store.memory import MemoryStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Loader:
    """Values for keys named ``known-*``, None for the rest; counts every load."""

    def __init__(self) -> None:
        self.loads: Counter[str] = Counter()

    def __call__(self, key: str) -> Any:
        def load() -> str | None:
            self.loads[key] += 1
            return f"value of {key}" if key.startswith("known") else None

        return load


def fetch(cache: TtlCache[str, str], loader: Loader, key: str) -> str | None:
    return cache.get(key, loader(key))


def test_a_full_cache_evicts_the_least_recently_used_entry_only() -> None:
    cache: TtlCache[str, str] = TtlCache(60, max_entries=3, clock=Clock())
    loader = Loader()
    for key in ("known-a", "known-b", "known-c"):
        assert fetch(cache, loader, key) == f"value of {key}"
    assert fetch(cache, loader, "known-a") == "value of known-a"  # a is now the most recent
    fetch(cache, loader, "known-d")  # full: evicts b, the least recently used
    for key in ("known-a", "known-c", "known-d"):
        fetch(cache, loader, key)
    assert loader.loads == {"known-a": 1, "known-b": 1, "known-c": 1, "known-d": 1}
    fetch(cache, loader, "known-b")
    assert loader.loads["known-b"] == 2
    assert cache.sizes() == (3, 0)


def test_a_flood_of_unknown_keys_cannot_evict_known_ones() -> None:
    cache: TtlCache[str, str] = TtlCache(60, max_entries=100, max_misses=10, clock=Clock())
    loader = Loader()
    known = [f"known-{i}" for i in range(100)]
    for key in known:
        fetch(cache, loader, key)
    for i in range(5_000):
        assert fetch(cache, loader, f"random-{i}") is None
    for key in known:
        assert fetch(cache, loader, key) == f"value of {key}"
    assert all(loader.loads[key] == 1 for key in known)
    assert cache.sizes() == (100, 10)  # both bounded


def test_misses_are_bounded_and_evicted_least_recently_used_first() -> None:
    cache: TtlCache[str, str] = TtlCache(60, max_misses=3, clock=Clock())
    loader = Loader()
    for key in ("x1", "x2", "x3"):
        fetch(cache, loader, key)
    fetch(cache, loader, "x1")  # still cached: no load, and now the most recent miss
    fetch(cache, loader, "x4")  # evicts x2
    assert loader.loads == {"x1": 1, "x2": 1, "x3": 1, "x4": 1}
    fetch(cache, loader, "x2")
    assert loader.loads["x2"] == 2


def test_entries_expire_after_their_ttl_and_misses_sooner() -> None:
    clock = Clock()
    cache: TtlCache[str, str] = TtlCache(30, miss_ttl_s=2, clock=clock)
    loader = Loader()
    fetch(cache, loader, "known-a")
    fetch(cache, loader, "nobody")
    clock.now += 1.9
    fetch(cache, loader, "known-a")
    fetch(cache, loader, "nobody")
    assert loader.loads == {"known-a": 1, "nobody": 1}
    clock.now += 0.2  # 2.1 s: the miss has expired, the hit has not
    fetch(cache, loader, "known-a")
    fetch(cache, loader, "nobody")
    assert loader.loads == {"known-a": 1, "nobody": 2}
    clock.now += 28  # 30.1 s
    fetch(cache, loader, "known-a")
    assert loader.loads["known-a"] == 2


def test_a_key_that_appears_replaces_its_miss_and_one_that_vanishes_its_hit() -> None:
    clock = Clock()
    cache: TtlCache[str, str] = TtlCache(30, miss_ttl_s=2, clock=clock)
    present = {"k": False}

    def load() -> str | None:
        return "v" if present["k"] else None

    assert cache.get("k", load) is None
    present["k"] = True
    clock.now += 3
    assert cache.get("k", load) == "v"
    assert cache.sizes() == (1, 0)
    present["k"] = False
    clock.now += 31
    assert cache.get("k", load) is None
    assert cache.sizes() == (0, 1)


def test_a_zero_ttl_caches_nothing() -> None:
    cache: TtlCache[str, str] = TtlCache(0, clock=Clock())
    loader = Loader()
    for _ in range(3):
        fetch(cache, loader, "known-a")
        fetch(cache, loader, "nobody")
    assert loader.loads == {"known-a": 3, "nobody": 3}
    assert cache.sizes() == (0, 0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_entries": 0}, "max_entries"),
        ({"max_misses": -1}, "max_misses"),
        ({"miss_ttl_s": -1}, "miss_ttl_s"),
    ],
)
def test_bad_bounds_are_refused(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        TtlCache(30, **kwargs)


class RecordStore:
    """The key records of a MemoryStore, served from a dict (a 10,001-token flood through
    fakeredis would take seconds); counts the GETs (one a lookup)."""

    name = "records"

    def __init__(self, source: MemoryStore) -> None:
        names = source.execute(("KEYS", "acmi:_apikey:*"))
        assert isinstance(names, list)
        self.records = {name.decode(): source.execute(("GET", name)) for name in names}
        self.key_gets = 0

    def execute(self, command: Any) -> Any:
        assert command[0] == "GET"
        self.key_gets += 1
        return self.records.get(command[1])

    def pipeline(self, commands: Any) -> list[Any]:
        """A lookup: the record's GET, and its hash's SISMEMBER (none revoked here)."""
        get, revoked = commands
        assert revoked[0] == "SISMEMBER"
        return [self.execute(get), 0]


def test_random_tokens_cannot_flush_valid_keys_from_the_key_cache() -> None:
    """With the default bounds: more unknown tokens than the whole cache holds, and the
    known keys still cost no round trip."""
    minted = MemoryStore()
    keys = [
        apikeys.mint(minted, tenant="default", scope="read", name=f"k{i}", now_ms=0)[0]
        for i in range(20)
    ]
    store = RecordStore(minted)
    cache = KeyCache(cast(Store, store), ttl_s=60, clock=Clock())
    for key in keys:
        assert cache.lookup(key) is not None
    assert store.key_gets == 20
    for i in range(apikeys.KEY_CACHE_MAX_KEYS + 1):
        assert cache.lookup(f"acmi_random_token_{i:06d}_xxxxxxxxxxxx") is None
    store.key_gets = 0
    for key in keys:
        assert cache.lookup(key) is not None
    assert store.key_gets == 0

"""A small per-process TTL cache: warm Lambdas skip a round trip for what rarely changes
(API key records, source configs).

Found values and misses live in two separate least-recently-used maps, each bounded: a
flood of unknown keys (random tokens) can only evict other misses, never a known key.
Misses are trusted for a shorter time (``miss_ttl_s``), so something created shows up
quickly. Memory is bounded by ``max_entries + max_misses`` entries.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_ENTRIES: Final = 10_000  # found values kept per cache
MAX_MISSES: Final = 1_000  # misses kept per cache (apart from the values)
MISS_TTL_S: Final = 2.0  # how long a miss is trusted (never longer than the ttl)


class TtlCache(Generic[K, V]):
    def __init__(
        self,
        ttl_s: float,
        *,
        miss_ttl_s: float = MISS_TTL_S,
        max_entries: int = MAX_ENTRIES,
        max_misses: int = MAX_MISSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries: must be >= 1")
        if max_misses < 0:
            raise ValueError("max_misses: must be >= 0")
        if miss_ttl_s < 0:
            raise ValueError("miss_ttl_s: must be >= 0")
        self._ttl = ttl_s
        self._miss_ttl = min(ttl_s, miss_ttl_s)
        self._max = max_entries
        self._max_misses = max_misses
        self._clock = clock
        self._lock = threading.Lock()
        # key -> expiry; the first item is the least recently used
        self._hits: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._misses: OrderedDict[K, float] = OrderedDict()

    def get(self, key: K, load: Callable[[], V | None]) -> V | None:
        """The cached value (or cached miss) of ``key``, else ``load()``'s, remembered."""
        now = self._clock()
        with self._lock:
            hit = self._hits.get(key)
            if hit is not None:
                if hit[0] > now:
                    self._hits.move_to_end(key)
                    return hit[1]
                del self._hits[key]
            miss = self._misses.get(key)
            if miss is not None:
                if miss > now:
                    self._misses.move_to_end(key)
                    return None
                del self._misses[key]
        # Loaded outside the lock: a store round trip must not serialize other lookups.
        value = load()
        with self._lock:
            self._hits.pop(key, None)
            self._misses.pop(key, None)
            if value is not None:
                if self._ttl > 0:
                    self._hits[key] = (now + self._ttl, value)
                    if len(self._hits) > self._max:
                        self._hits.popitem(last=False)
            elif self._miss_ttl > 0 and self._max_misses:
                self._misses[key] = now + self._miss_ttl
                if len(self._misses) > self._max_misses:
                    self._misses.popitem(last=False)
        return value

    def forget(self, key: K) -> None:
        """Drop what is cached for ``key``: the next ``get`` loads it."""
        with self._lock:
            self._hits.pop(key, None)
            self._misses.pop(key, None)

    def sizes(self) -> tuple[int, int]:
        """(values, misses) held now, expired ones included until evicted or looked up."""
        with self._lock:
            return len(self._hits), len(self._misses)

"""A small per-process TTL cache: warm Lambdas skip a round trip for what rarely changes
(API key records, source configs). Misses are cached briefly too, against floods."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    def __init__(
        self,
        ttl_s: float,
        *,
        miss_ttl_s: float = 2.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl_s
        self._miss_ttl = min(ttl_s, miss_ttl_s)
        self._max = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[K, tuple[float, V | None]] = {}

    def get(self, key: K, load: Callable[[], V | None]) -> V | None:
        now = self._clock()
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        value = load()
        with self._lock:
            if len(self._entries) >= self._max:
                self._entries.clear()  # crude, but bounded; the next calls reload
            self._entries[key] = (now + (self._ttl if value is not None else self._miss_ttl), value)
        return value

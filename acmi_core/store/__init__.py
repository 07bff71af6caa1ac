"""Store backends behind one protocol (base.Store): memory (embedded), redis, upstash."""

from __future__ import annotations

from acmi_core.settings import Settings
from acmi_core.store.base import Store


def open_store(settings: Settings) -> Store:
    """Upstash when its URL and token are set, Redis when ACMI_REDIS_URL is set, else the
    embedded default. Imports only the backend it picks (cold starts pay for one)."""
    if settings.upstash_url and settings.upstash_token:
        from acmi_core.store.upstash import UpstashStore

        return UpstashStore.from_settings(settings)
    if settings.redis_url:
        from acmi_core.store.redis import RedisStore

        return RedisStore.from_url(settings.redis_url, settings)
    from acmi_core.store.memory import MemoryStore

    return MemoryStore()


__all__ = ["Store", "open_store"]

"""Store backends behind one protocol (base.Store): memory (embedded), redis, upstash."""

from __future__ import annotations

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.extras import install_hint, missing_extra
from acmi_core.base.keys import Layout
from acmi_core.base.settings import Settings
from acmi_core.store.base import Store


def open_store(settings: Settings, *, local: bool = False, per_call: bool = False) -> Store:
    """A Redis Cluster when ACMI_REDIS_CLUSTER is set (``store/cluster.py``), Upstash when
    its URL and token are set, Redis when ACMI_REDIS_URL is set, else the
    embedded default: with ``local``, the one on disk that every ``acmi`` command and
    ``acmi serve`` share (``store/local.py``), held by this process until it closes (a
    CLI command), or with ``per_call`` too for one call at a time (``create_acmi()``:
    ``store/shared.py``); without, a throwaway in this process (the Lambda functions,
    tests, samples). Imports only the backend it picks (cold starts pay for one)."""
    if settings.key_layout == Layout.REFERENCE and settings.cluster_buckets.strip() != "1":
        raise AcmiValidationError(
            "ACMI_CLUSTER_BUCKETS",
            "key_layout",
            "needs ACMI_KEY_LAYOUT=cluster: buckets are hash tags, the reference layout has none",
        )
    if settings.redis_cluster:
        from acmi_core.store.cluster import ClusterStore, check_cluster_settings

        check_cluster_settings(settings)
        assert settings.redis_url is not None  # checked just above
        return ClusterStore(settings.redis_url, settings)
    if settings.upstash_url and settings.upstash_token:
        from acmi_core.store.upstash import UpstashStore

        return UpstashStore.from_settings(settings)
    if settings.redis_url:
        if settings.key_layout == Layout.REFERENCE:
            # refused on a cluster-enabled server at its first command (store/cluster.py)
            from acmi_core.store.cluster import CheckedRespStore

            return CheckedRespStore.for_settings(settings.redis_url, settings)
        from acmi_core.store.redis import RedisStore

        return RedisStore.from_url(settings.redis_url, settings)
    try:
        if local and per_call:
            import fakeredis  # noqa: F401  (missing extra: named here, not at the first call)

            from acmi_core.store.shared import SharedLocalStore

            return SharedLocalStore(settings)
        if local:
            from acmi_core.store.local import open_local_store

            return open_local_store(settings)
        from acmi_core.store.memory import MemoryStore

        return MemoryStore()
    except ModuleNotFoundError as exc:
        raise _missing_local_extra(exc) from None


def _missing_local_extra(exc: ModuleNotFoundError) -> Exception:
    """The embedded store without its extra (fakeredis, its lupa, redis-py), as one line
    saying what to install or which store to name instead; any other missing module stays
    the bug it is."""
    extra = missing_extra(exc)
    if extra is None:
        return exc
    return AcmiValidationError(
        "store",
        "installed",
        f"no store is configured and the embedded one needs {exc.name}: {install_hint(extra)}, "
        "or set UPSTASH_REDIS_REST_URL + UPSTASH_REDIS_REST_TOKEN, or ACMI_REDIS_URL",
    )


def describe_store(store: Store) -> str:
    """Which store, for a person (never a URL, token or password): ``embedded, <path>``,
    ``embedded via acmi serve at <host:port>``, or the backend's name."""
    description = getattr(store, "description", None)
    return description if isinstance(description, str) else store.name


__all__ = ["Store", "describe_store", "open_store"]

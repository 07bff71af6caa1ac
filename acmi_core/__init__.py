"""ACMI: profile (who), signals (now) and timeline (then) for every entity, over Redis."""

from __future__ import annotations

# The one place the version is written: pyproject.toml reads it (tool.setuptools.dynamic),
# `acmi --version` prints it. A literal, so a build reads it without importing the package.
__version__ = "0.1.0"

from acmi_core.base.errors import (
    AcmiError,
    AcmiValidationError,
    Conflict,
    CorruptData,
    NotFound,
    StoreAuthError,
    StoreBusy,
    StoreCommandError,
    StoreError,
    StoreUnavailable,
    Throttled,
    Unavailable,
)
from acmi_core.base.model import ActorType, EntityId, Event
from acmi_core.base.settings import Settings
from acmi_core.client import Acmi
from acmi_core.entities.api import Batch, EntityContext, Events, Skipped
from acmi_core.entities.context import Clock
from acmi_core.store import Store, open_store


def create_acmi(
    store: Store | None = None,
    settings: Settings | None = None,
    *,
    tenant: str | None = None,
    clock: Clock | None = None,
) -> Acmi:
    """An ACMI client. With no store, the environment picks one (see ``open_store``): with
    none configured, the embedded data the ``acmi`` command and ``acmi serve`` share, on
    disk, held per call (``store/shared.py``)."""
    settings = settings or Settings.from_env()
    store = store if store is not None else open_store(settings, local=True, per_call=True)
    if clock is None:
        return Acmi(store, settings, tenant=tenant)
    return Acmi(store, settings, tenant=tenant, clock=clock)


__all__ = [
    "Acmi",
    "AcmiError",
    "AcmiValidationError",
    "ActorType",
    "Batch",
    "Conflict",
    "CorruptData",
    "EntityContext",
    "EntityId",
    "Event",
    "Events",
    "NotFound",
    "Settings",
    "Skipped",
    "Store",
    "StoreAuthError",
    "StoreBusy",
    "StoreCommandError",
    "StoreError",
    "StoreUnavailable",
    "Throttled",
    "Unavailable",
    "__version__",
    "create_acmi",
    "open_store",
]

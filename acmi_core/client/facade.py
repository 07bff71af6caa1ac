"""The ``Acmi`` facade: one tenant's view of a store, with every capability as an attribute.

The entity slots (profile, signals, timeline, batch, get, list, delete) live in
``acmi_core.entities`` on a narrow :class:`~acmi_core.entities.context.Context`; the
coordination, bootstrap and memory APIs are built (and their modules imported) on first
use, so a function that never takes a lock does not import the lock module (cold start)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from acmi_core.base.keys import Keys
from acmi_core.base.model import EntityId
from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.base.settings import Settings
from acmi_core.entities.api import (
    DEFAULT_BUNDLE_EVENTS,
    Batch,
    EntityAPI,
    EntityContext,
    EntityPage,
    ProfileAPI,
    SignalsAPI,
    TimelineAPI,
)
from acmi_core.entities.context import Clock, Context, system_clock
from acmi_core.store.base import Store

if TYPE_CHECKING:
    from acmi_core.bootstrap.bootstrapper import Bootstrapper
    from acmi_core.coordination.agents import AgentAPI
    from acmi_core.coordination.dashboard import DashboardAPI
    from acmi_core.coordination.hitl import HitlAPI
    from acmi_core.coordination.locks import LockAPI
    from acmi_core.coordination.wake import WakeAPI
    from acmi_core.coordination.work import WorkAPI
    from acmi_core.coordination.workflows import WorkflowAPI
    from acmi_core.entities.items import ItemsAPI
    from acmi_core.guard.secrets import SecretPolicy
    from acmi_core.memory.service import MemoryAPI

T = TypeVar("T")


class Acmi:
    """One tenant's view of an ACMI store. Thread-safe; share one per process."""

    def __init__(
        self,
        store: Store,
        settings: Settings | None = None,
        *,
        tenant: str | None = None,
        clock: Clock = system_clock,
        bucket: int = 0,
    ) -> None:
        self.context = Context.open(store, settings, tenant=tenant, clock=clock, bucket=bucket)
        self.profile = ProfileAPI(self.context)
        self.signals = SignalsAPI(self.context)
        self.timeline = TimelineAPI(self.context)
        self.entities = EntityAPI(self.context)

    # What the context holds, read through (callers and tests use these names).

    @property
    def store(self) -> Store:
        return self.context.store

    @property
    def settings(self) -> Settings:
        return self.context.settings

    @property
    def keys(self) -> Keys:
        return self.context.keys

    @property
    def clock(self) -> Clock:
        return self.context.clock

    @property
    def tenant(self) -> str:
        return self.context.tenant

    @property
    def secret_policy(self) -> SecretPolicy:
        return self.context.secret_policy

    @property
    def changed_key(self) -> str:
        return self.context.changed_key

    def guard(self, value: T, path: str) -> T:
        """``Context.guard``: ``value`` as this tenant may store it."""
        return self.context.guard(value, path)

    def index_key(self, entity: EntityId) -> str:
        return self.context.index_key(entity)

    def profile_fills(self, category: str) -> list[tuple[str, str]]:
        return self.context.profile_fills(category)

    # The coordination and memory APIs, each built (and its module imported) on first use:
    # a function that never takes a lock or reads memory does not import them (cold start).

    @cached_property
    def agents(self) -> AgentAPI:
        from acmi_core.coordination.agents import AgentAPI

        return AgentAPI(self.context)

    @cached_property
    def locks(self) -> LockAPI:
        from acmi_core.coordination.locks import LockAPI

        return LockAPI(self.context)

    @cached_property
    def work(self) -> WorkAPI:
        from acmi_core.coordination.work import WorkAPI

        return WorkAPI(self.context)

    @cached_property
    def bootstrap(self) -> Bootstrapper:
        from acmi_core.bootstrap.bootstrapper import Bootstrapper

        return Bootstrapper(self.context)

    @cached_property
    def hitl(self) -> HitlAPI:
        from acmi_core.coordination.hitl import HitlAPI

        return HitlAPI(self.context)

    @cached_property
    def workflows(self) -> WorkflowAPI:
        from acmi_core.coordination.workflows import WorkflowAPI

        return WorkflowAPI(self.context)

    @cached_property
    def wake(self) -> WakeAPI:
        from acmi_core.coordination.wake import WakeAPI

        return WakeAPI(self.context)

    @cached_property
    def dashboard(self) -> DashboardAPI:
        from acmi_core.coordination.dashboard import DashboardAPI

        return DashboardAPI(self.context)

    @cached_property
    def memory(self) -> MemoryAPI:
        from acmi_core.memory.service import MemoryAPI

        return MemoryAPI(self.context)

    @cached_property
    def items(self) -> ItemsAPI:
        """Namespaced items: the long-term memory store's core (the LangGraph store)."""
        from acmi_core.entities.items import ItemsAPI

        return ItemsAPI(self.context)

    def for_tenant(self, tenant: str) -> Acmi:
        """The same store seen as another tenant (keys under acmi:tenant:<t>:...)."""
        return Acmi(self.store, self.settings, tenant=tenant, clock=self.clock)

    def batch(self) -> Batch:
        return Batch(self.context)

    def get(self, entity: str | EntityId, events: int = DEFAULT_BUNDLE_EVENTS) -> EntityContext:
        """Profile, signals and the newest ``events`` events (oldest first): one round trip."""
        return self.entities.get(entity, events)

    def list(self, category: str) -> list[str]:
        """Every entity id of a category, sorted (``EntityAPI.list``)."""
        return self.entities.list(category)

    def list_page(
        self, category: str, *, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> EntityPage:
        """One page of a category's entity ids (one round trip; ``EntityAPI.list_page``)."""
        return self.entities.list_page(category, cursor=cursor, limit=limit)

    def iter_list(self, category: str, *, limit: int = DEFAULT_PAGE_SIZE) -> Iterator[str]:
        """Every entity id of a category, one page at a time (``EntityAPI.iter_list``)."""
        return self.entities.iter_list(category, limit=limit)

    def delete(self, entity: str | EntityId) -> None:
        """Every key of the entity, its index entry and its place in the tenant's indexes."""
        self.entities.delete(entity)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Acmi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

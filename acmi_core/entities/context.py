"""The narrow context every capability is built on: one tenant's store, keys, settings,
clock and secret guard, frozen. Sub-APIs take it instead of the ``Acmi`` facade, so no
module below the facade depends on it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

from acmi_core.base.keys import Keys
from acmi_core.base.model import EntityId, dumps, profile_defaults
from acmi_core.base.settings import Settings
from acmi_core.store.base import Store

if TYPE_CHECKING:
    from acmi_core.guard.secrets import Finding, SecretPolicy

Clock = Callable[[], int]
"""Returns now in epoch milliseconds."""

_CATEGORY_CACHE_MAX: Final = 1024


def system_clock() -> int:
    return time.time_ns() // 1_000_000


# --- the secret guard's redactions ----------------------------------------------------------

T = TypeVar("T")
# The redactions of the writes run in this context (a request), when someone listens:
# a route that returns what it stored says which paths were redacted, by which rule.
_REDACTIONS: ContextVar[list[Finding] | None] = ContextVar("acmi_redactions", default=None)


@contextmanager
def collect_redactions() -> Iterator[list[Finding]]:
    """The redactions made by the writes inside the block (policy ``redact``), in order:
    ``[Finding(path, rule, text)]``, never the secret. Works across ``run_in_threadpool``
    (the list is shared, not the variable)."""
    found: list[Finding] = []
    token = _REDACTIONS.set(found)
    try:
        yield found
    finally:
        _REDACTIONS.reset(token)


@dataclass(frozen=True, eq=False)
class Context:
    """One tenant's view of a store: what every sub-API needs, nothing else. Thread-safe;
    the per-category caches are bounded and only ever hold derived text."""

    store: Store
    settings: Settings
    keys: Keys
    clock: Clock = system_clock
    secret_policy: SecretPolicy = field(init=False)
    changed_key: str = field(init=False)
    _index_keys: dict[str, str] = field(init=False, default_factory=dict, repr=False)
    _profile_fills: dict[str, list[tuple[str, str]]] = field(
        init=False, default_factory=dict, repr=False
    )

    def __post_init__(self) -> None:
        # resolved once: a write pays no lookup (ACMI_SECRET_POLICY, per-tenant overrides)
        policy = self.settings.secret_policy_for(self.keys.tenant)
        object.__setattr__(self, "secret_policy", "redact" if policy == "redact" else "reject")
        object.__setattr__(self, "changed_key", self.keys.changed())

    @classmethod
    def open(
        cls,
        store: Store,
        settings: Settings | None = None,
        *,
        tenant: str | None = None,
        clock: Clock = system_clock,
        bucket: int = 0,
    ) -> Context:
        """``bucket``: the tenant's bucket whose per-bucket indexes this context reads and
        keeps (a scheduled job's run of one bucket); entity keys always take their own."""
        settings = settings or Settings()
        name = tenant or settings.default_tenant
        buckets = settings.buckets_for(name)
        keys = Keys(name, settings.default_tenant, settings.key_layout, buckets).at(bucket)
        return cls(store, settings, keys, clock)

    @property
    def tenant(self) -> str:
        return self.keys.tenant

    def for_tenant(self, tenant: str) -> Context:
        """The same store seen as another tenant (keys under acmi:tenant:<t>:...)."""
        return Context.open(self.store, self.settings, tenant=tenant, clock=self.clock)

    def guard(self, value: T, path: str) -> T:
        """``value`` as this tenant may store it (``acmi_core.guard.secrets``): itself when
        clean; under ``redact`` a copy with each secret replaced by ``[REDACTED:<rule>]``
        (reported to ``collect_redactions``); under ``reject`` SecretDetected (422) naming
        ``path`` (e.g. ``profile.api_key``) and the rule. Every user-facing write calls it
        once, before validation, so a redacted value is still size-checked."""
        from acmi_core.guard.prefilter import provably_clean  # on the first write
        from acmi_core.guard.secrets import guard, redact

        if provably_clean(value):
            return value

        if self.secret_policy == "reject":
            checked: T = guard(value, "reject", path=path)
            return checked
        clean, findings = redact(value, path=path)
        if findings:
            found = _REDACTIONS.get()
            if found is not None:
                found.extend(findings)
        result: T = clean
        return result

    def guard_id(self, value: str, field: str) -> None:
        """Refuse a secret in an identifier (an entity id, a lock resource, a work id) under
        every policy, SecretDetected naming ``field``: an id names Redis keys and is echoed
        in events, logs and URLs, and a redacted one would name another thing."""
        from acmi_core.guard.prefilter import provably_clean

        if not provably_clean(value):
            from acmi_core.guard.secrets import guard

            guard(value, "reject", path=field)

    def guard_ids(self, *ids: tuple[object, str]) -> None:
        """:meth:`guard_id` on each ``(id, field)`` given; None (an id not given) passes."""
        for value, name in ids:
            if value is not None:
                self.guard_id(str(value), name)

    def index_key(self, entity: EntityId) -> str:
        """The category index ``entity`` belongs in (its bucket's), built once per
        category when the tenant has one bucket."""
        if self.keys.buckets > 1:
            return self.keys.of(entity).index(entity.category)
        category = entity.category
        key = self._index_keys.get(category)
        if key is None:
            key = self.keys.index(category)
            if len(self._index_keys) >= _CATEGORY_CACHE_MAX:
                self._index_keys.clear()
            self._index_keys[category] = key
        return key

    def profile_fills(self, category: str) -> list[tuple[str, str]]:
        """``profile_defaults`` of an entity of ``category``, as (name, JSON text)."""
        fills = self._profile_fills.get(category)
        if fills is None:
            defaults = profile_defaults(EntityId(category, "_"), self.keys.tenant)
            fills = [(name, dumps(value)) for name, value in defaults.items()]
            if len(self._profile_fills) >= _CATEGORY_CACHE_MAX:
                self._profile_fills.clear()
            self._profile_fills[category] = fills
        return fills

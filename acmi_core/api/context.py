"""The API's per-process context (``ApiContext``): the default tenant's client, the
authenticator, tenant views, how store calls run. Its own module so the app and the
operation table's registrar (``api/access.py``) both use it without importing each other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, ParamSpec, TypeVar

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from acmi_core.api.observe import LogObserver, Observer
from acmi_core.auth.apikeys import Scope
from acmi_core.auth.authenticator import Authenticator
from acmi_core.auth.principal import TENANT_HEADER, Principal
from acmi_core.auth.tiers import TierGate
from acmi_core.client import Acmi

if TYPE_CHECKING:
    from acmi_core.auth.google_oidc import GoogleTokenVerifier
    from acmi_core.ingest.service import GmailFetch

# Tenant views kept per process; past this many (a key per tenant, thousands of tenants)
# the map starts again rather than grow.
MAX_TENANT_VIEWS: Final = 1024

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class ApiContext:
    """What every route needs, built once per process (warm Lambdas reuse it).

    ``offload``: run store calls on a worker thread (a server with concurrent requests,
    ``acmi serve``) or inline (Lambda: one request per process at a time, and no thread
    started and stopped per invocation).

    ``gmail``: how a Gmail push fetches the mailbox's new messages (the Lambda kit builds
    it); None (``acmi serve``): gmail sources store the notification only.
    """

    acmi: Acmi  # the default tenant's view; routes get the caller's (api/access.py)
    observer: Observer = field(default_factory=LogObserver)
    offload: bool = False
    google: GoogleTokenVerifier | None = None
    gmail: GmailFetch | None = None
    # the tier check of keys bound to an agent, its tiers cached per process
    tiers: TierGate = field(default_factory=TierGate)
    auth: Authenticator = field(init=False)
    _views: dict[str, Acmi] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.auth = Authenticator(self.acmi.store, self.acmi.settings, google=self.google)
        self._views = {self.acmi.tenant: self.acmi}

    def view(self, tenant: str) -> Acmi:
        """The ACMI view of ``tenant``, built once (an ``Acmi`` is stateless and shared)."""
        acmi = self._views.get(tenant)
        if acmi is None:
            if len(self._views) >= MAX_TENANT_VIEWS:
                self._views = {self.acmi.tenant: self.acmi}
            acmi = self._views[tenant] = self.acmi.for_tenant(tenant)
        return acmi

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking (store) call as ``offload`` says."""
        if self.offload:
            return await run_in_threadpool(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    async def authorize(self, request: Request, scope: Scope) -> tuple[Principal, Acmi]:
        """The caller, checked for ``scope``, and the ACMI view of its tenant."""
        principal = await self.call(
            self.auth.api_key,
            request.headers.get("authorization"),
            scope,
            tenant_header=request.headers.get(TENANT_HEADER),
        )
        return principal, self.view(principal.tenant)

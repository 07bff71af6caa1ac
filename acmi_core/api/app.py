"""The ASGI app: one FastAPI app, built from routers, so each Lambda function can mount
only its own operations while local serving mounts them all."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from acmi_core.api.cache import TtlCache
from acmi_core.api.errors import install_error_handlers
from acmi_core.api.observe import LogObserver, Observer
from acmi_core.api.security import KeyCache, Principal
from acmi_core.auth.apikeys import Scope
from acmi_core.auth.google_oidc import GoogleTokenVerifier
from acmi_core.client import Acmi
from acmi_core.ingest import sources
from acmi_core.ingest.sources import SourceConfig

ROUTERS: Final = ("ingest", "entities")
TENANT_HEADER: Final = "X-Acmi-Tenant"


@dataclass
class ApiContext:
    """What every route needs, built once per process (warm Lambdas reuse it)."""

    acmi: Acmi  # the default tenant's view; routes switch to the caller's tenant
    observer: Observer = field(default_factory=LogObserver)
    google: GoogleTokenVerifier | None = None
    key_cache: KeyCache = field(init=False)
    source_cache: TtlCache[tuple[str, str], SourceConfig] = field(init=False)

    def __post_init__(self) -> None:
        ttl = self.acmi.settings.auth_cache_s
        self.key_cache = KeyCache(self.acmi.store, ttl)
        self.source_cache = TtlCache(ttl)

    def source_config(self, acmi: Acmi, source: str) -> SourceConfig | None:
        """A source's config (HMAC secret, OIDC, mapping), cached like keys: a warm
        webhook then costs exactly its one write round trip."""
        return self.source_cache.get(
            (acmi.tenant, source), lambda: sources.get_config(acmi.store, acmi.keys, source)
        )

    def google_verifier(self) -> GoogleTokenVerifier:
        if self.google is None:
            self.google = GoogleTokenVerifier()
        return self.google

    async def authorize(self, request: Request, scope: Scope) -> tuple[Principal, Acmi]:
        """The caller, checked for ``scope``, and the ACMI view of its tenant."""
        header = request.headers.get("authorization")
        principal = await run_in_threadpool(self.key_cache.authenticate, header)
        principal.require(scope, tenant_header=request.headers.get(TENANT_HEADER))
        return principal, self.acmi.for_tenant(principal.tenant)


def context(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.acmi
    return ctx


def create_app(ctx: ApiContext, routers: Sequence[str] = ROUTERS, *, docs: bool = True) -> FastAPI:
    unknown = set(routers) - set(ROUTERS)
    if unknown:
        raise ValueError(f"unknown routers: {sorted(unknown)}")
    app = FastAPI(
        title="ACMI",
        version="1",
        summary="Agent context: profile, signals and timeline per entity, over Redis.",
        description=(
            "Every route needs `Authorization: Bearer <key>` (keys: `acmi keys create`). "
            "Errors are JSON: `{error, message, field, rule}`. Request bodies are capped at "
            f"{ctx.acmi.settings.max_body_bytes} bytes and event batches at "
            f"{ctx.acmi.settings.max_batch_events} events."
        ),
        openapi_url="/openapi.json" if docs else None,
        docs_url="/docs" if docs else None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    app.state.acmi = ctx
    install_error_handlers(app)
    for name in routers:
        # Import only the routers asked for: a function's cold start pays for its own.
        module = importlib.import_module(f"acmi_core.api.routes.{name}")
        app.include_router(module.router)
    return app

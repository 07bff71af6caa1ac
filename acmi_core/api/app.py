"""The ASGI app: one FastAPI app built from routers, so each Lambda function mounts only
its own operations (``acmi_core.lambdas``) while ``acmi serve`` mounts them all."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, ParamSpec, TypeVar

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from acmi_core.api.errors import install_error_handlers
from acmi_core.api.observe import LogObserver, Observer
from acmi_core.auth.apikeys import Scope
from acmi_core.auth.authenticator import Authenticator
from acmi_core.auth.google_oidc import GoogleTokenVerifier
from acmi_core.auth.principal import TENANT_HEADER, Principal
from acmi_core.client import Acmi
from acmi_core.lambdas import http_routers

# Router name -> module; each module defines ``router``. Imported only when mounted, so a
# function's cold start pays for its own routes.
ROUTER_MODULES: Final = {
    "ingest": "acmi_core.api.routes.ingest",
    "entities": "acmi_core.api.routes.entities",
}

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class ApiContext:
    """What every route needs, built once per process (warm Lambdas reuse it).

    ``offload``: run store calls on a worker thread (a server with concurrent requests,
    ``acmi serve``) or inline (Lambda: one request per process at a time, and no thread
    started and stopped per invocation).
    """

    acmi: Acmi  # the default tenant's view; routes switch to the caller's tenant
    observer: Observer = field(default_factory=LogObserver)
    offload: bool = False
    google: GoogleTokenVerifier | None = None
    auth: Authenticator = field(init=False)

    def __post_init__(self) -> None:
        self.auth = Authenticator(self.acmi.store, self.acmi.settings, google=self.google)

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
        return principal, self.acmi.for_tenant(principal.tenant)


async def context(request: Request) -> ApiContext:
    # async: FastAPI runs a plain-def dependency on a worker thread, per request.
    ctx: ApiContext = request.app.state.acmi
    return ctx


def create_app(
    ctx: ApiContext, routers: Sequence[str] | None = None, *, docs: bool = True
) -> FastAPI:
    """An app mounting ``routers`` (default: every router some function mounts)."""
    routers = http_routers() if routers is None else tuple(routers)
    unknown = set(routers) - set(ROUTER_MODULES)
    if unknown:
        raise ValueError(f"unknown routers: {sorted(unknown)}")
    settings = ctx.acmi.settings
    app = FastAPI(
        title="ACMI",
        version="1",
        summary="Agent context: profile, signals and timeline per entity, over Redis.",
        description=(
            "Every route needs `Authorization: Bearer <key>` (keys: `acmi keys create`). "
            "Errors are JSON: `{error, message, field, rule}`. Request bodies are capped at "
            f"{settings.max_body_bytes} bytes and event batches at "
            f"{settings.max_batch_events} events."
        ),
        openapi_url="/openapi.json" if docs else None,
        docs_url="/docs" if docs else None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    app.state.acmi = ctx
    install_error_handlers(app)
    for name in routers:
        app.include_router(importlib.import_module(ROUTER_MODULES[name]).router)
    return app

"""The ASGI app: one FastAPI app built from routers, so each Lambda function mounts only
its own operations (``acmi_core.base.lambdas``) while ``acmi serve`` mounts them all."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute

from acmi_core.api.access import OPERATION_OF, check_routes, public_route
from acmi_core.api.context import ApiContext
from acmi_core.api.errors import ERROR_SCHEMA, install_error_handlers
from acmi_core.api.observe import RequestSpans
from acmi_core.auth.tiers import TOKEN_ROWS
from acmi_core.base.errors import NotFound
from acmi_core.base.lambdas import http_routers
from acmi_core.operations import operation

if TYPE_CHECKING:
    pass

# Router name -> module; each module defines ``router``. Imported only when mounted, so a
# function's cold start pays for its own routes.
ROUTER_MODULES: Final = {
    "ingest": "acmi_core.api.routes.ingest",
    "entities": "acmi_core.api.routes.entities",
    "locks": "acmi_core.api.routes.locks",
    "work": "acmi_core.api.routes.work",
    "bootstrap": "acmi_core.api.routes.bootstrap",
    "agents": "acmi_core.api.routes.agents",
    "hitl": "acmi_core.api.routes.hitl",
    "workflows": "acmi_core.api.routes.workflows",
    "memory": "acmi_core.api.routes.memory",
    "dashboard": "acmi_core.api.routes.dashboard",
}


# FastAPI (0.16x) traces every request itself once the process has a tracer provider,
# whatever ACMI_TRACES says, recording the query string (a push token: `?token=`) and the
# path (an entity id may be an email address): off on every app; ACMI_TRACES's own spans
# (RequestSpans and the operation spans) record neither. Older FastAPIs take no such
# argument and trace nothing themselves.
_NATIVE_TELEMETRY_OFF: Final[dict[str, Any]] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


def create_app(
    ctx: ApiContext, routers: Sequence[str] | None = None, *, docs: bool = True
) -> FastAPI:
    """An app mounting ``routers`` (default: every router some function mounts)."""
    routers = http_routers() if routers is None else tuple(routers)
    unknown = set(routers) - set(ROUTER_MODULES)
    if unknown:
        raise ValueError(f"unknown routers: {sorted(unknown)}")
    settings = ctx.acmi.settings
    # The routers' routes go straight into the app (FastAPI's ``routes``) rather than
    # through include_router: an included router is matched a second time per request
    # (~25 us). The routes already carry their router's tags and response class.
    api_routes = [
        route
        for name in routers
        for route in importlib.import_module(ROUTER_MODULES[name]).router.routes
        if isinstance(route, APIRoute)
    ]
    # The docs pages first: the docs function mounts every route (to describe them) but
    # serves only these two, which would otherwise be matched after all the others.
    pages = [public_route("docs.openapi", _openapi_page), public_route("docs.page", _docs_page)]
    # A route without its row, or a row of a mounted function without its route, is a
    # mistake in the table or a router: refused here, before the app serves anything.
    check_routes([*(pages if docs else ()), *api_routes], routers, docs=docs)
    app = FastAPI(
        routes=[*(pages if docs else ()), *api_routes],
        title="ACMI",
        version="1",
        summary="Agent context: profile, signals and timeline per entity, over Redis.",
        description=(
            "Every route needs `Authorization: Bearer <key>` (keys: `acmi keys create`). "
            "Errors are JSON: `{error, message, field, rule}`. Request bodies are capped at "
            f"{settings.max_body_bytes} bytes and event batches at "
            f"{settings.max_batch_events} events."
        ),
        openapi_url=None,  # served below, rendered once rather than per request
        docs_url=None,  # FastAPI's page loads Swagger UI from a CDN; ours is served here
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
        **_NATIVE_TELEMETRY_OFF,
    )
    app.state.acmi = ctx
    install_error_handlers(app)
    if settings.traces:
        app.add_middleware(RequestSpans)
    if docs:
        _document_errors(app, api_routes)
        app.state.openapi_bytes = {}  # root path -> the rendered document
    return app


# --- the error responses of each route, in the OpenAPI document ------------------------------

ERROR_DESCRIPTIONS: Final = {
    400: "The request breaks a rule (a parameter, a header or the body): `field` and `rule` "
    "name it; nothing stored.",
    401: "No credentials, or credentials we do not know (`WWW-Authenticate: Bearer`).",
    403: "Known credentials that may not do this (scope, tenant or source).",
    404: "The thing asked for does not exist.",
    409: "Stored data (often written by another tool) cannot be used as asked, or a "
    "concurrent writer won.",
    413: "The body is over the size cap (`rule: max_bytes`); nothing stored.",
    422: "The `Idempotency-Key` was already used with a different request (another body, "
    "entity or URL): `rule: reused`; nothing stored.",
    429: "A key bound to an agent was served its tier's `max_tokens_per_hour` bundle tokens "
    "this hour (`rule: tier_tokens`): retry after `Retry-After` seconds (the next hour); "
    "nothing stored.",
    500: "A server failure; the body says nothing inner.",
    503: "A dependency (the store, Google's keys) failed for now: retry after `Retry-After` "
    "seconds.",
}
# Every route authenticates (401, 403), validates its path and query (400), calls the
# store (503, 500) and reads or writes stored data (409).
COMMON_ERROR_STATUSES: Final = frozenset({400, 401, 403, 409, 500, 503})


def error_statuses(route: APIRoute, operation: dict[str, Any]) -> frozenset[int]:
    """The error statuses ``route`` can answer (``operation``: its OpenAPI operation)."""
    statuses = set(COMMON_ERROR_STATUSES)
    if "requestBody" in operation:
        statuses.add(413)
    parameters = operation.get("parameters") or []
    if any(str(p.get("name", "")).lower() == "idempotency-key" for p in parameters):
        statuses.add(422)  # the one 422: a reused Idempotency-Key
    # Routes raise NotFound themselves (a missing profile or signal); the name in the
    # endpoint's code is how we know, without a second list to keep in step.
    if NotFound.__name__ in _code_names(route.endpoint):
        statuses.add(404)
    row = OPERATION_OF.get(route.endpoint)
    if row is not None and row.name in TOKEN_ROWS:
        statuses.add(429)  # a bound key's hourly bundle tokens spent (auth/tiers.py)
    return frozenset(statuses)


def _code_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    code = getattr(inspect.unwrap(fn), "__code__", None)  # the handler, not its access
    return tuple(code.co_names) if code is not None else ()


# Every route's access reads `Authorization: Bearer <key>` itself (api/access.py; a
# webhook may use another credential). The document says so here rather than through a
# FastAPI security dependency on each router, which would cost every request a dependency
# solve (~20 us).
BEARER_SCHEME: Final = {"HTTPBearer": {"type": "http", "scheme": "bearer"}}


def _document_errors(app: FastAPI, routes: Sequence[APIRoute]) -> None:
    """Post-process the generated document once: FastAPI lists a 422 on every route with
    parameters (we answer validation errors with 400) and none of our real errors; every
    route takes the bearer scheme."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        # The routers' own routes (mounted without a prefix): FastAPI's app.routes wraps
        # included routers in private types.
        for route in routes:
            if not route.include_in_schema:
                continue
            for method in route.methods or ():
                operation = schema["paths"][route.path_format].get(method.lower())
                if operation is None:
                    continue
                operation["security"] = [{name: []} for name in BEARER_SCHEME]
                responses = operation.setdefault("responses", {})
                statuses = error_statuses(route, operation)
                if 422 not in statuses:
                    responses.pop("422", None)
                for status in sorted(statuses):
                    described = responses.get(str(status), {}).get("description")
                    responses[str(status)] = {
                        "description": described or ERROR_DESCRIPTIONS[status],
                        "content": error,
                    }
        components = schema.setdefault("components", {})
        components.setdefault("securitySchemes", {}).update(BEARER_SCHEME)
        schemas = components.setdefault("schemas", {})
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        schemas["Error"] = ERROR_SCHEMA
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


# --- /docs: Swagger UI served by the app, not a CDN ------------------------------------------

OPENAPI_URL: Final = str(operation("docs.openapi").path)
DOCS_URL: Final = str(operation("docs.page").path)
# The assets live at /docs?asset=<name>: the one docs path the Lambda's HTTP API routes
# (template.yaml), so a deployed page needs no route of its own for them.
DOCS_ASSETS: Final = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}


@functools.cache
def _asset(name: str) -> bytes:
    """An asset of the fastapi-offline package (found without importing it: its module
    imports FastAPI's static files machinery, which the docs page does not need)."""
    spec = importlib.util.find_spec("fastapi_offline")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise NotFound("asset: the Swagger UI assets (fastapi-offline) are not installed")
    return (Path(locations[0]) / "static" / name).read_bytes()


async def _openapi_page(request: Request) -> Response:
    """The document, as FastAPI's own route answers it (the root path listed in
    ``servers``), its bytes rendered once per root path: ~3 ms per request otherwise."""
    root = str(request.scope.get("root_path", "")).rstrip("/")
    rendered: dict[str, bytes] = request.app.state.openapi_bytes
    body = rendered.get(root)
    if body is None:
        schema = request.app.openapi()
        if root and root not in {s.get("url") for s in schema.get("servers", [])}:
            schema = {**schema, "servers": [{"url": root}, *schema.get("servers", [])]}
        if len(rendered) >= 16:  # the root path is the server's configuration: one, mostly
            rendered.clear()
        body = rendered[root] = bytes(JSONResponse(schema).body)
    return Response(body, media_type="application/json")


async def _docs_page(request: Request) -> Response:
    asset = request.query_params.get("asset")
    if asset is not None:
        if asset not in DOCS_ASSETS:
            raise NotFound(
                f"asset: no docs asset {asset!r}; one of {sorted(DOCS_ASSETS)}", field="asset"
            )
        return Response(
            _asset(asset),
            media_type=DOCS_ASSETS[asset],
            headers={"Cache-Control": "public, max-age=86400"},
        )
    root = str(request.scope.get("root_path", ""))
    return HTMLResponse(_swagger_page(request.app.title, root))


@functools.lru_cache(maxsize=16)
def _swagger_page(title: str, root: str) -> bytes:
    """The page for one root path, built once."""
    return bytes(
        get_swagger_ui_html(
            openapi_url=f"{root}{OPENAPI_URL}",
            title=f"{title} - Swagger UI",
            swagger_js_url=f"{root}{DOCS_URL}?asset=swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_URL}?asset=swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_URL}?asset=favicon.png",
            # no badge calling validator.swagger.io with our document
            swagger_ui_parameters={"validatorUrl": None},
        ).body
    )

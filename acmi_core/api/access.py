"""HTTP routes registered from the operation table (``acmi_core.operations``).

A route module declares each handler under its row's name (``@route("entities.get")``);
the method, the path and the summary come from the row, and the row's access is applied
by a wrapper before the handler runs. The handler's first parameter is the
:class:`Authorized` request: the caller's tenant view (``acmi``), never the default
tenant's, so a route cannot forget to authorize, nor read another tenant. The wrapper is
the route's endpoint (FastAPI solves the handler's own parameters, shown to it without
the first): no dependency is solved per request (each costs ~20 us) and it is a coroutine,
so nothing runs on a worker thread.

``create_app`` holds an app to the table: every mounted route has a row, and every row
of a mounted function a route (:func:`check_routes`)."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from acmi_core.api.body import read_raw
from acmi_core.api.params import Takes, read_params, request_body, solved_parameters, takes
from acmi_core.auth.apikeys import Scope
from acmi_core.auth.principal import Principal
from acmi_core.auth.tiers import TOKEN_ROWS, check_identity
from acmi_core.base.lambdas import FUNCTIONS
from acmi_core.bootstrap.allowance import allowed
from acmi_core.client import Acmi
from acmi_core.client.tracing import operation_span
from acmi_core.ingest.config import SourceConfig
from acmi_core.ingest.sources import SourceSpec, source_spec
from acmi_core.operations import Access, Operation, of_function, operation
from acmi_core.operations.bind import core_call, fields

if TYPE_CHECKING:
    from acmi_core.api.context import ApiContext
    from acmi_core.api.observe import Observer
    from acmi_core.ingest.service import GmailFetch
    from acmi_core.operations.params import Params

P = ParamSpec("P")
T = TypeVar("T")
M = TypeVar("M", bound="Params")
Handler = Callable[..., Awaitable[Response]]
Endpoint = Callable[..., Awaitable[Response]]

# Each registered endpoint -> its row: what create_app checks an app against.
OPERATION_OF: Final[dict[Callable[..., Any], Operation]] = {}
# Each endpoint whose input is its row's params model -> where each field arrives.
TAKES_OF: Final[dict[Callable[..., Any], Takes]] = {}


@dataclass(frozen=True, slots=True)
class Webhook:
    """A delivery whose caller the source's credential policy accepted: the source's row
    and config, the query, and the raw body, its signature already verified."""

    spec: SourceSpec
    config: SourceConfig | None
    query: dict[str, str]
    raw: bytes


class Authorized:
    """What a handler gets: the request, the caller's tenant view, and how to call the
    store (``call``: on a worker thread under ``acmi serve``, inline on Lambda); on a
    route whose input its row's params model defines, :meth:`params` and :meth:`run`."""

    __slots__ = (
        "_offload",
        "_solved",
        "_takes",
        "acmi",
        "gmail",
        "observer",
        "principal",
        "request",
        "webhook",
    )

    def __init__(
        self,
        request: Request,
        acmi: Acmi,
        principal: Principal,
        ctx: ApiContext,
        webhook: Webhook | None = None,
        takes: Takes | None = None,
        solved: dict[str, Any] | None = None,
    ) -> None:
        self.request, self.acmi, self.principal, self.webhook = request, acmi, principal, webhook
        self.observer: Observer = ctx.observer
        self.gmail: GmailFetch | None = ctx.gmail
        self._offload = ctx.offload
        self._takes, self._solved = takes, solved or {}

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking (store) call as the app's context says."""
        if self._offload:
            return await run_in_threadpool(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    async def params(self, model: type[M], **given: Any) -> M:
        """The row's params (``model``, its params model): the path and query values,
        the body's fields (``given``: on a route with its own body reader), validated by
        the model (``api/params.py``)."""
        if self._takes is None or self._takes.model is not model:
            raise TypeError(f"this route does not take {model.__name__}")
        taken = self._takes
        params = await read_params(taken, self.request, self.acmi, self._solved, given)
        assert isinstance(params, model)
        agent = self.principal.agent
        if agent is not None and (taken.row.access is not Access.READ or params.writes()):
            check_identity(agent, taken.row.name, fields(params))  # the body's too
        return params

    async def run(self, params: Params) -> Any:
        """The row's core callable on the caller's tenant, given the fields this route
        takes (the others keep the core's defaults), run as :meth:`call` runs."""
        assert self._takes is not None
        given = fields(params)
        taken = {name: given[name] for name in self._takes.fields}
        return await self.call(core_call(self.acmi, self._takes.row), **taken)


def registrar(router: APIRouter, function: str) -> Callable[..., Callable[[Handler], Handler]]:
    """``route(name, **options)``: a decorator adding the handler to ``router`` as the
    route of row ``name`` (a row of ``function``); ``options`` are the route's own
    (response model, OpenAPI body, status code, description)."""

    def route(
        name: str,
        *,
        query: tuple[str, ...] | None = None,
        exclude: tuple[str, ...] = (),
        wire: dict[str, str] | None = None,
        aliases: dict[str, str] | None = None,
        optional_body: bool = False,
        about: str = "",
        defaults: dict[str, Any] | None = None,
        reader: bool = False,
        required: tuple[str, ...] = (),
        **options: Any,
    ) -> Callable[[Handler], Handler]:
        row = operation(name)
        if row.function != function or row.path is None or row.method is None:
            raise ValueError(f"operation {name!r} is not an HTTP route of {function}")
        path, method = row.path, row.method

        def register(handler: Handler) -> Handler:
            taken: Takes | None = None
            if len(inspect.signature(handler).parameters) == 1:  # (req): the row's params
                taken = takes(
                    row,
                    query=query,
                    exclude=exclude,
                    wire=wire,
                    aliases=aliases,
                    optional_body=optional_body,
                    about=about,
                    defaults=defaults,
                    reader=reader,
                    required=required,
                )
                if (taken.body or optional_body) and not reader:
                    options.setdefault("openapi_extra", request_body(taken))
            endpoint = guarded(row, handler, taken)
            router.add_api_route(
                path,
                endpoint,
                methods=[method],
                summary=row.summary,
                name=handler.__name__,
                **options,
            )
            return handler

        return register

    return route


def public_route(name: str, endpoint: Endpoint) -> APIRoute:
    """The route of a ``public`` row (no credential): ``endpoint`` as it is, out of the
    OpenAPI document (the docs pages)."""
    row = operation(name)
    if row.access is not Access.PUBLIC or row.path is None or row.method is None:
        raise ValueError(f"operation {name!r} is not a public HTTP route")
    OPERATION_OF[endpoint] = row
    return APIRoute(row.path, endpoint, methods=[row.method], include_in_schema=False)


def guarded(row: Operation, handler: Handler, taken: Takes | None = None) -> Endpoint:
    """The endpoint of ``row``: its access, then ``handler``; with ``taken``, the handler
    takes only the request and gets its input from the row's params model."""
    if taken is not None and not row.access.keyed:
        raise ValueError(f"operation {row.name!r}: only key-scoped routes read their params")
    if row.access.keyed:
        endpoint = _keyed(row.name, Scope(row.access.value), row.metric, handler, taken)
    elif row.access is Access.WEBHOOK:
        endpoint = _webhook(row.name, handler)
    else:
        raise ValueError(f"operation {row.name!r}: {row.access} routes are mounted as they are")
    functools.update_wrapper(endpoint, handler)  # name, docstring, __wrapped__
    endpoint.__signature__ = _shown_signature(row, handler, taken)  # type: ignore[attr-defined]
    OPERATION_OF[endpoint] = row
    if taken is not None:
        TAKES_OF[endpoint] = taken
    return endpoint


def _context(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.acmi
    return ctx


def _keyed(
    name: str, scope: Scope, metric: str | None, handler: Handler, taken: Takes | None
) -> Endpoint:
    """An API key of at least ``scope`` (its tenant, checked against ``X-Acmi-Tenant``),
    counted under ``metric`` once accepted; the handler runs in the span of operation
    ``name`` (traces on)."""

    async def endpoint(request: Request, **values: Any) -> Response:
        ctx = _context(request)
        principal, acmi = await ctx.authorize(request, scope)
        agent = principal.agent
        if agent is not None and scope is not Scope.READ:  # its tier's (auth/tiers)
            await ctx.call(ctx.tiers.check, acmi, agent, name, values)
        # a bundle is served under a bound key's hourly tokens (bootstrap/allowance.py)
        allowance = (
            await ctx.call(ctx.tiers.allowance, acmi, agent)
            if agent is not None and name in TOKEN_ROWS
            else None
        )
        if metric is not None:
            ctx.observer.metric(metric)
        with operation_span(acmi, name, values) as acmi, allowed(allowance):
            if taken is not None:  # the solved path and query values are the params' own
                authorized = Authorized(request, acmi, principal, ctx, None, taken, values)
                return await handler(authorized)
            return await handler(Authorized(request, acmi, principal, ctx), **values)

    return endpoint


def _webhook(name: str, handler: Handler) -> Endpoint:
    """The source's credential policy (``Authenticator.webhook``: Google OIDC, a push
    token or an API key, as the source's row allows), then the body's signature."""

    async def endpoint(request: Request, **values: Any) -> Response:
        ctx = _context(request)
        source = str(values["source"])
        spec = source_spec(source)  # an unknown source is a 400 before anything else
        query = dict(request.query_params)
        caller = await ctx.call(ctx.auth.webhook, spec, source, request.headers, query)
        acmi = ctx.view(caller.principal.tenant)
        if caller.principal.agent is not None:  # a bound API key: a tenant-wide write
            await ctx.call(ctx.tiers.check, acmi, caller.principal.agent, name, values)
        raw = await read_raw(request, acmi.settings.max_body_bytes)
        ctx.auth.verify_body(caller, raw, request.headers)
        webhook = Webhook(spec, caller.config, query, raw)
        with operation_span(acmi, name, values) as acmi:
            authorized = Authorized(request, acmi, caller.principal, ctx, webhook)
            return await handler(authorized, **values)

    return endpoint


def _shown_signature(row: Operation, handler: Handler, taken: Takes | None) -> inspect.Signature:
    """What FastAPI solves: the request, then the handler's parameters after its first
    (the :class:`Authorized` the wrapper passes), annotations resolved in the handler's
    module (FastAPI would look them up in this one); with ``taken``, the path and query
    fields of the row's params model instead."""
    hints = typing.get_type_hints(handler, include_extras=True)
    params = list(inspect.signature(handler).parameters.values())
    if not params or hints.get(params[0].name) is not Authorized:
        raise TypeError(f"{row.name}: {handler.__qualname__} must take (Authorized, ...)")
    if any(p.name == "request" for p in params[1:]):  # the wrapper's own parameter
        raise TypeError(f"{row.name}: the request is Authorized.request, not a parameter")
    if row.access is Access.WEBHOOK and "source" not in hints:
        raise TypeError(f"{row.name}: a webhook route takes the source as a path parameter")
    shown = [
        inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)
    ]
    if taken is not None:
        shown += solved_parameters(taken)
    shown += [p.replace(annotation=hints.get(p.name, p.annotation)) for p in params[1:]]
    return inspect.Signature(shown, return_annotation=hints.get("return", inspect.Signature.empty))


# --- an app against the table -----------------------------------------------------------------


def check_routes(routes: Iterable[APIRoute], routers: Iterable[str], *, docs: bool) -> None:
    """Every route of the app has a row, and every row of the functions mounting
    ``routers`` (with ``docs``, the docs pages' too) has its route in the app."""
    mounted = set(routers)
    expected = {
        row
        for spec in FUNCTIONS
        if spec.routers and mounted & set(spec.routers)
        for row in of_function(spec.name)
    }
    if docs:
        expected |= {row for row in of_function("docs")}
    served: set[Operation] = set()
    unlisted: list[str] = []
    for route in routes:
        row = OPERATION_OF.get(route.endpoint)
        if row is None:
            unlisted.append(f"{','.join(sorted(route.methods or ()))} {route.path}")
        else:
            served.add(row)
    problems = []
    if unlisted:
        problems.append(f"routes without an operation row: {sorted(unlisted)}")
    stray = sorted(row.name for row in served - expected)
    if stray:
        problems.append(f"routes of operations no mounted function has: {stray}")
    missing = sorted(row.name for row in expected - served)
    if missing:
        problems.append(f"operations without their route: {missing}")
    if problems:
        raise ValueError("the app and the operation table disagree: " + "; ".join(problems))

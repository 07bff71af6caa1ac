"""The operation table against every surface, generated from the table and from each app's
own OpenAPI document rather than from hand lists.

HTTP: each function's app and the whole app (``acmi serve``, the docs function) serve
exactly their rows; every key-scoped or webhook route refuses a request without a key
(401) and one whose key's scope is too low (403), with today's error bodies, and lets the
right key through. MCP: every tool of the server has its row, every row's tool exists,
and each tool is derived from its row (description, arguments, write scope, the core
callable it calls); the CLI's remote backend makes each row's request from the row.
CLI: every row's command exists in the typer app, and every command is a row's or a
local tool. An app whose routes and rows disagree is refused when it is built."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
from collections.abc import Iterator
from types import CodeType
from typing import Any, Final

import annotated_types
import httpx
import pydantic
import pytest
import typer
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from mcp.server.fastmcp.exceptions import ToolError

from acmi_core import Acmi, Settings
from acmi_core.api.access import OPERATION_OF, Authorized, registrar
from acmi_core.api.app import ROUTER_MODULES, create_app
from acmi_core.api.context import ApiContext
from acmi_core.api.errors import install_error_handlers
from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import Scope
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.lambdas import FUNCTIONS, FunctionSpec, mounted_routers
from acmi_core.cli.app import app as cli_app
from acmi_core.cli.remote import HttpBackend
from acmi_core.mcp import server as mcp_server
from acmi_core.mcp.server import build_server
from acmi_core.mcp.shapes import SHAPES
from acmi_core.operations import KEYED, OPERATIONS, Access, Operation, bind, of_function, operation
from acmi_core.store.memory import MemoryStore

HTTP_FUNCTIONS: Final = tuple(spec for spec in FUNCTIONS if spec.kind == "http")
ROWS_BY_ROUTE: Final = {(row.method, row.openapi_path): row for row in OPERATIONS if row.http}
# A value for each path and required query parameter the routes take (a new one fails
# below with its name, rather than being guessed).
PARAMETER_VALUES: Final = {
    "entity": "user:x",
    "category": "user",
    "key": "k",
    "resource": "r1",
    "id": "w1",
    "agent": "a",
    "thread": "t1",
    "correlationId": "c-1",
    "workflow": "wf",
    "source": "n8n",
    "q": "x",
    "path": "MEMORY.md",
}
# What each scope is refused: the scope just below it (read is the least).
BELOW: Final = {Access.WRITE: "read", Access.ADMIN: "write", Access.WEBHOOK: "read"}
# Commands that are tools run on this machine, not operations of ACMI's.
LOCAL_TOOLS: Final = {
    "serve": "runs the HTTP API locally",
    "invoke": "runs a Lambda handler in process",
    "mcp": "serves the MCP tools over stdio",
    "skill": "prints the skill file",
    "demo": "runs the reference's example on a throwaway store",
    "memory migrate": "the seed's name for `memory import` (the same callback)",
}
MISSING_KEY: Final = {
    "error": "unauthorized",
    "message": "authorization: required ('Authorization: Bearer <key>')",
    "field": "authorization",
    "rule": "required",
}


def refused_scope(has: str, needs: str) -> dict[str, str]:
    return {
        "error": "forbidden",
        "message": f"authorization: this key has scope '{has}'; this route needs '{needs}'",
        "field": "authorization",
        "rule": "scope",
    }


class Served:
    """One app (a function's, or the whole app) on a fresh store, a key per scope."""

    def __init__(self, label: str, routers: tuple[str, ...], docs: bool) -> None:
        self.label, self.routers, self.docs = label, routers, docs
        self.acmi = Acmi(MemoryStore(), Settings(auth_cache_s=0))
        self.app: FastAPI = create_app(ApiContext(self.acmi), routers, docs=docs)
        self.client = TestClient(self.app, raise_server_exceptions=False)
        self.keys = {
            scope.value: apikeys.mint(
                self.acmi.store, tenant="default", scope=scope.value, name="t", now_ms=0
            )[0]
            for scope in Scope
        }

    def auth(self, scope: str | None) -> dict[str, str]:
        return {} if scope is None else {"authorization": f"Bearer {self.keys[scope]}"}

    def operations(self) -> Iterator[tuple[Operation, str, str, dict[str, str]]]:
        """(row, method, concrete path, required query) of every route its document lists."""
        for template, item in self.app.openapi()["paths"].items():
            for method, spec in item.items():
                row = ROWS_BY_ROUTE.get((method.upper(), template))
                assert row is not None, f"{self.label}: {method.upper()} {template} has no row"
                path, query = template, {}
                for param in spec.get("parameters", []):
                    name = param["name"]
                    if param["in"] == "path":
                        assert name in PARAMETER_VALUES, f"{template}: no value for {{{name}}}"
                        path = path.replace(f"{{{name}}}", PARAMETER_VALUES[name])
                    elif param["in"] == "query" and param.get("required"):
                        assert name in PARAMETER_VALUES, f"{template}: no value for ?{name}"
                        query[name] = PARAMETER_VALUES[name]
                yield row, method.upper(), path, query

    def send(self, method: str, path: str, query: dict[str, str], scope: str | None) -> Any:
        return self.client.request(method, path, params=query, json={}, headers=self.auth(scope))


def _apps() -> list[tuple[str, tuple[str, ...], bool]]:
    apps = [(spec.name, mounted_routers(spec), spec.docs) for spec in HTTP_FUNCTIONS]
    return [*apps, ("whole app", tuple(ROUTER_MODULES), True)]


@pytest.fixture(params=_apps(), ids=lambda app: app[0])
def served(request: pytest.FixtureRequest) -> Served:
    label, routers, docs = request.param
    return Served(label, routers, docs)


# --- the document and the table -------------------------------------------------------------


def _spec(name: str) -> FunctionSpec | None:
    return next((spec for spec in FUNCTIONS if spec.name == name), None)


def test_the_document_lists_exactly_the_rows_of_its_functions(served: Served) -> None:
    """Every path+method of the app's OpenAPI document has a row (of the function serving
    it), and every row of each mounted function has its path there; public rows (the
    docs pages) are served but left out of the document."""
    listed = {row for row, *_ in served.operations()}
    spec = _spec(served.label)
    if spec is not None and not spec.docs:
        assert {row.function for row in listed} == {spec.name}
        expected = set(of_function(spec.name))
    else:  # the docs function and `acmi serve`: every HTTP function's rows
        expected = {row for row in OPERATIONS if row.http and row.access is not Access.PUBLIC}
    assert listed == expected - {row for row in expected if row.access is Access.PUBLIC}
    public = [row for row in OPERATIONS if row.access is Access.PUBLIC]
    for row in public:
        assert row.openapi_path not in served.app.openapi()["paths"]
        answer = served.client.request(str(row.method), str(row.path))
        # the docs pages, and the dashboard's page on the dashboard function
        if served.docs or (spec is not None and row.function == spec.name):
            assert answer.status_code == 200, (row.name, answer.text)  # no key asked
        else:
            assert answer.status_code == 404, row.name  # not this function's route


def test_the_summary_and_the_method_come_from_the_row(served: Served) -> None:
    for template, item in served.app.openapi()["paths"].items():
        for method, spec in item.items():
            row = ROWS_BY_ROUTE[(method.upper(), template)]
            assert spec["summary"] == row.summary
            if served.docs:  # only a documenting app post-processes its document
                assert spec["security"] == [{"HTTPBearer": []}]


# --- access, route by route ------------------------------------------------------------------


def test_every_keyed_route_refuses_a_missing_key(served: Served) -> None:
    checked = 0
    for row, method, path, query in served.operations():
        assert row.access in KEYED | {Access.WEBHOOK}, row.name
        response = served.send(method, path, query, None)
        assert response.status_code == 401, (row.name, response.text)
        assert response.json() == MISSING_KEY, row.name
        assert response.headers["www-authenticate"] == "Bearer"
        checked += 1
    assert checked == len(list(served.operations())) > 0


def test_every_route_refuses_a_key_of_too_low_a_scope(served: Served) -> None:
    """A read key on a write (or webhook) route, a write key on an admin one: 403 naming
    both scopes; the scope the row declares is let through (whatever the route then
    answers to an empty body, it is not a refusal of the key)."""
    refused = allowed = 0
    for row, method, path, query in served.operations():
        needs = "write" if row.access is Access.WEBHOOK else row.access.value
        if row.access in BELOW:
            has = BELOW[row.access]
            response = served.send(method, path, query, has)
            assert response.status_code == 403, (row.name, response.text)
            assert response.json() == refused_scope(has, needs), row.name
            refused += 1
        response = served.send(method, path, query, needs)
        assert response.status_code not in (401, 403), (row.name, response.text)
        allowed += 1
    assert allowed == len(list(served.operations()))
    assert refused == sum(row.access in BELOW for row, *_ in served.operations())


def test_the_access_is_the_rows_whatever_the_handler_does() -> None:
    """A handler registered under a row gets the row's access without asking for it: the
    route that once answered ``GET /v1/entities/user:mikey/stats`` with 200 and no key
    would now be refused, and it sees only the caller's tenant."""
    router = APIRouter()
    route = registrar(router, "entities")

    @route("entities.get")
    async def careless(req: Authorized, entity: str) -> Response:
        return JSONResponse({"entity": entity, "tenant": req.acmi.tenant})

    endpoint = router.routes[0]
    assert isinstance(endpoint, APIRoute)
    app = FastAPI(routes=[endpoint])
    install_error_handlers(app)
    acmi = Acmi(MemoryStore(), Settings(auth_cache_s=0))
    app.state.acmi = ApiContext(acmi)
    key, _ = apikeys.mint(acmi.store, tenant="acme", scope="read", name="t", now_ms=0)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/v1/entities/user:mikey").status_code == 401
        answer = client.get("/v1/entities/user:mikey", headers={"authorization": f"Bearer {key}"})
    assert answer.json() == {"entity": "user:mikey", "tenant": "acme"}


def _names(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _names(const)
    return names


def test_no_route_body_reaches_the_app_context() -> None:
    """Route bodies get the caller's view (``Authorized``); the app's context, whose
    ``acmi`` is the default tenant's, is the access wrapper's alone."""
    app = create_app(ApiContext(Acmi(MemoryStore(), Settings())))
    handlers = [
        inspect.unwrap(route.endpoint)
        for route in app.routes
        if isinstance(route, APIRoute) and OPERATION_OF[route.endpoint].access is not Access.PUBLIC
    ]
    assert len(handlers) == sum(row.http and row.access is not Access.PUBLIC for row in OPERATIONS)
    for handler in handlers:
        code = getattr(handler, "__code__", None)
        assert isinstance(code, CodeType)
        reached = _names(code) & {"state", "api_context", "_context", "ApiContext"}
        assert not reached, f"{handler.__qualname__} reaches {sorted(reached)}"


# --- an app whose routes and rows disagree is not built --------------------------------------


def _entities_router() -> APIRouter:
    module = importlib.import_module(ROUTER_MODULES["entities"])
    router: APIRouter = module.router
    return router


def test_an_app_with_a_route_without_a_row_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    original = _entities_router()
    router = APIRouter()
    router.routes.extend(original.routes)

    @router.get("/v1/entities/{entity}/stats")
    async def stats(request: Request, entity: str) -> dict[str, str]:
        return {"entity": entity}

    monkeypatch.setattr(importlib.import_module(ROUTER_MODULES["entities"]), "router", router)
    with pytest.raises(ValueError, match=re.escape("GET /v1/entities/{entity}/stats")):
        create_app(ApiContext(Acmi(MemoryStore(), Settings())), ["entities"], docs=False)


def test_an_app_missing_a_route_of_its_rows_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    timeline = operation("entities.timeline")
    router = APIRouter()
    for route in _entities_router().routes:
        assert isinstance(route, APIRoute)
        if OPERATION_OF[route.endpoint] is not timeline:
            router.routes.append(route)
    monkeypatch.setattr(importlib.import_module(ROUTER_MODULES["entities"]), "router", router)
    with pytest.raises(ValueError, match=r"without their route: \['entities.timeline'\]"):
        create_app(ApiContext(Acmi(MemoryStore(), Settings())), ["entities"], docs=False)


def test_a_row_of_another_function_cannot_be_registered() -> None:
    with pytest.raises(ValueError, match="not an HTTP route of entities"):
        registrar(APIRouter(), "entities")("locks.get")


# --- the other surfaces ----------------------------------------------------------------------


def test_every_mcp_tool_is_a_row_and_every_rows_tool_exists() -> None:
    server = build_server(Acmi(MemoryStore(), Settings()), Scope.ADMIN)
    tools = {tool.name for tool in asyncio.run(server.list_tools())}
    named = {row.mcp for row in OPERATIONS if row.mcp}
    assert named - tools == set(), "rows naming a tool the server lacks"
    assert tools - named == set(), "tools without an operation row"


def test_each_tool_is_derived_from_its_row() -> None:
    """A tool's description is its params model's docstring, its arguments are exactly the
    model's fields (names, required ones, defaults), and a key of read scope is refused
    every tool of a write row."""
    acmi = Acmi(MemoryStore(), Settings())
    listed = {t.name: t for t in asyncio.run(build_server(acmi, Scope.ADMIN).list_tools())}
    reader = build_server(acmi, Scope.READ)
    for row in mcp_server.tool_rows():
        assert row.mcp is not None
        model = mcp_server.params_model(row)
        tool = listed[row.mcp]
        assert tool.description == mcp_server.tool_description(row)
        fields = {n: f for n, f in model.model_fields.items() if n not in model.not_tool_arguments}
        schema = tool.inputSchema
        assert list(schema["properties"]) == list(fields), row.name
        assert set(schema.get("required", [])) == {n for n, f in fields.items() if f.is_required()}
        for name, field in fields.items():
            if not field.is_required():
                assert schema["properties"][name]["default"] == field.default, (row.name, name)
        if row.access is Access.WRITE:
            arguments = {n: _example(f.annotation) for n, f in fields.items() if f.is_required()}
            with pytest.raises(ToolError, match=r"\(rule: write_scope\)"):
                asyncio.run(reader.call_tool(row.mcp, arguments))


def _example(annotation: Any) -> Any:
    """A value of the annotation's type (the first of a union), for an argument check."""
    text = str(annotation)
    if text.startswith(("dict", "list[str] | dict")):
        return {} if text.startswith("dict") else []
    return {"<class 'int'>": 1, "<class 'bool'>": False}.get(text, "x:y")


def test_a_tool_without_a_shape_calls_its_core_callable_with_its_params() -> None:
    """Tools not in ``SHAPES`` pass their params' fields, by name, to the row's core
    callable bound on the tenant's client: every field is a parameter of that callable."""
    acmi = Acmi(MemoryStore(), Settings())
    direct = [row for row in mcp_server.tool_rows() if row.name not in SHAPES]
    assert len(direct) >= 20
    for row in direct:
        call = bind.core_call(acmi, row)
        assert row.call is not None and call.__qualname__ == row.call.partition(":")[2]
        taken = inspect.signature(call).parameters
        for name in mcp_server.params_model(row).model_fields:
            assert name in taken, f"{row.name}: {name} is not a parameter of {row.call}"
    named = {row.name for row in OPERATIONS if row.mcp}
    assert set(SHAPES) <= named, "a shape without a row with a tool"
    for api, attribute in bind.CLIENT_APIS.items():
        assert type(getattr(acmi, attribute) if attribute else acmi).__name__ == api


def test_every_params_model_resolves_and_carries_bounds_only() -> None:
    """Each row's params model is a ``Params``; beyond types and defaults its fields carry
    bounds only (a range, a length, finite numbers: what the HTTP route checked before the
    core and every surface now checks), never a pattern or another rule of its own (those
    are the core's, so no surface can disagree with it)."""
    bounds = (
        annotated_types.Ge,
        annotated_types.Le,
        annotated_types.MinLen,
        annotated_types.MaxLen,
        pydantic.AllowInfNan,
    )
    for row in OPERATIONS:
        if row.params is None:
            assert row.mcp is None, row.name
            continue
        model = mcp_server.params_model(row)
        for name, field in model.model_fields.items():
            for rule in field.metadata:
                assert isinstance(rule, bounds), f"{row.name}.{name} carries {rule!r}"


def test_the_remote_backend_makes_each_rows_request_from_the_row() -> None:
    """``HttpBackend.send`` builds every key-scoped route's request from its row: the
    row's method, its path with the path parameters filled (checked as the core checks
    them, percent-encoded), the other values as the query of a read or a delete and as
    the JSON body of the rest."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={})

    backend = HttpBackend("http://localhost", "k", transport=httpx.MockTransport(answer))
    for row in OPERATIONS:
        if not (row.http and row.access.keyed) or row.path is None:
            continue
        names = re.findall(r"\{(\w+)(?::\w+)?\}", row.path)
        backend.send(row.name, **{name: PARAMETER_VALUES[name] for name in names}, extra="v")
        request = sent[-1]
        path = re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: PARAMETER_VALUES[m.group(1)], row.path)
        assert (request.method, request.url.path) == (row.method, path), row.name
        if row.method in ("GET", "DELETE"):
            assert (dict(request.url.params), request.content) == ({"extra": "v"}, b""), row.name
        else:
            assert (request.url.query, request.content) == (b"", b'{"extra":"v"}'), row.name
    assert len(sent) >= 60
    before = len(sent)
    with pytest.raises(AcmiValidationError, match="<category>:<id>"):
        backend.send("entities.get", entity="nocolon")
    assert len(sent) == before, "a path parameter the core refuses is never sent"


def _commands(command: Any, words: tuple[str, ...] = ()) -> Iterator[str]:
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in subcommands.items():
            yield from _commands(sub, (*words, name))
    else:
        yield " ".join(words)


def test_every_rows_command_exists_and_every_command_is_a_row() -> None:
    commands = set(_commands(typer.main.get_command(cli_app)))
    named = {row.cli for row in OPERATIONS if row.cli}
    assert named - commands == set(), "rows naming a command the CLI lacks"
    assert commands - named - set(LOCAL_TOOLS) == set(), "commands without an operation row"
    assert set(LOCAL_TOOLS) <= commands


def test_every_row_names_a_core_callable() -> None:
    for row in OPERATIONS:
        if row.call is None:
            continue
        module, _, qualname = row.call.partition(":")
        target: Any = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        assert callable(target), row.name


def test_every_key_scoped_http_row_is_metered_or_counts_what_it_stores() -> None:
    """The access metrics (``EntityReads``, ``LockOperations``, ...) are the rows'; the two
    that count what they store instead say so by having none."""
    unmetered = {row.name for row in OPERATIONS if row.http and row.access.keyed and not row.metric}
    assert unmetered == {"entities.events.append"}
    assert operation("ingest.webhook").metric is None

"""The Lambda HTTP path stays on one thread: no invocation starts a thread, every route,
dependency and exception handler is a coroutine (FastAPI and Starlette run a plain
``def`` one on a worker thread), and ``acmi serve`` (``offload=True``) keeps its store
calls off the event loop. The bench section measures every HTTP function."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings
from acmi_core.api.app import ROUTER_MODULES, create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth.apikeys import register
from acmi_core.base.lambdas import FUNCTIONS, FunctionSpec, mounted_routers
from acmi_core.store.base import Arg, Command, NoStore, Reply, Script, Store
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from bench import lambda_path
from functions.runtime import LambdaFunction
from tests.kit import EXAMPLE_KEY, TEST_DBS, FakeLambdaContext, event_names, load_event

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

DB = TEST_DBS["lambda_path"]  # this module's own database (tests/kit.py TEST_DBS)
HTTP_FUNCTIONS = tuple(spec for spec in FUNCTIONS if spec.kind == "http")
WARM_INVOCATIONS = 5


def handler_of(spec: FunctionSpec) -> LambdaFunction:
    handler = importlib.import_module(f"functions.{spec.module}").handler
    assert isinstance(handler, LambdaFunction)
    return handler


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisStore]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    register(store, EXAMPLE_KEY, tenant="default", scope="admin", name="samples", now_ms=0)
    yield store
    store.close()


@pytest.fixture
def handlers(store: RedisStore) -> Iterator[dict[str, LambdaFunction]]:
    """Every HTTP function's real handler on ``store``, warm (its app built)."""
    built = {spec.name: handler_of(spec) for spec in HTTP_FUNCTIONS}
    for handler in built.values():
        handler.configure(env={"ACMI_DEFAULT_TENANT": "default"}, store=store)
        handler.warm()
    yield built
    for handler in built.values():
        handler.configure()


def test_warm_invocations_of_every_http_sample_start_no_thread(
    handlers: dict[str, LambdaFunction], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every events/ sample of every HTTP function (successes and refusals alike, so the
    error handlers are on the path too), invoked warm a few times each: no thread is
    started, none is left running, and no event loop is made."""
    samples = [name for name in event_names() if name.split(".", 1)[0] in handlers]
    for name in samples:  # the first invocation of each sample, before counting
        handlers[name.split(".", 1)[0]](load_event(name), FakeLambdaContext())
    started: list[str] = []
    original = threading.Thread.start

    def counting_start(thread: threading.Thread) -> None:
        started.append(thread.name)
        original(thread)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    loops: list[asyncio.AbstractEventLoop] = []
    new_loop = asyncio.events.new_event_loop

    def counting_new_loop() -> asyncio.AbstractEventLoop:
        loops.append(new_loop())
        return loops[-1]

    # mangum runs every invocation on the one loop it set up (a new loop each time costs
    # ~0.1 ms); asyncio.run would make one through asyncio.events
    monkeypatch.setattr(asyncio, "new_event_loop", counting_new_loop)
    monkeypatch.setattr(asyncio.events, "new_event_loop", counting_new_loop)
    before = threading.active_count()
    statuses = set()
    for _ in range(WARM_INVOCATIONS):
        for name in samples:
            function = name.split(".", 1)[0]
            response = handlers[function](load_event(name), FakeLambdaContext(f"acmi-{function}"))
            statuses.add(response["statusCode"] // 100)
    assert started == []
    assert loops == []
    assert threading.active_count() == before
    assert {2, 4} <= statuses  # both paths were taken
    assert len({name.split(".", 1)[0] for name in samples}) == len(HTTP_FUNCTIONS)


# --- every route is a coroutine, all the way down --------------------------------------------


def _runs_on_a_thread(call: Callable[..., Any]) -> bool:
    """Whether FastAPI/Starlette would hand ``call`` to a worker thread: anything but a
    coroutine function or an instance whose ``__call__`` is one (a security scheme)."""
    if inspect.iscoroutinefunction(call):
        return False
    if inspect.isfunction(call) or inspect.ismethod(call) or inspect.isclass(call):
        return True
    return not inspect.iscoroutinefunction(type(call).__call__)


def _sync_calls(dependant: Dependant, where: str) -> Iterator[str]:
    if dependant.call is not None and _runs_on_a_thread(dependant.call):
        yield f"{where}: {getattr(dependant.call, '__qualname__', dependant.call)!r}"
    for sub in dependant.dependencies:
        yield from _sync_calls(sub, where)


def _apps() -> list[FastAPI]:
    """Each HTTP function's app, as its handler builds it (docs: every router)."""
    acmi = Acmi(NoStore(), Settings())  # building an app touches no store
    return [
        create_app(ApiContext(acmi), mounted_routers(spec), docs=spec.docs)
        for spec in HTTP_FUNCTIONS
    ]


def test_every_route_dependency_and_exception_handler_is_a_coroutine() -> None:
    """A plain ``def`` route or dependency runs on anyio's worker thread per request, and
    a plain ``def`` exception handler too: all of ours are ``async def``. Route modules
    reach the context with ``api_context(request)``, not a dependency."""
    offenders: list[str] = []
    routes = 0
    for module in ROUTER_MODULES.values():
        for route in importlib.import_module(module).router.routes:
            assert isinstance(route, APIRoute), route
            routes += 1
            offenders += _sync_calls(route.dependant, f"{route.methods} {route.path}")
    for app in _apps():
        for route in app.router.routes:
            if isinstance(route, APIRoute):
                offenders += _sync_calls(route.dependant, f"{route.methods} {route.path}")
        for error, handler in app.exception_handlers.items():
            if not inspect.iscoroutinefunction(handler):
                offenders.append(f"exception handler for {error!r}: {handler!r}")
        assert app.user_middleware == []  # none of ours wraps the request path
    assert offenders == []
    assert routes >= 17


def test_the_check_catches_a_plain_def_route() -> None:
    """The check above would fail on the routes it is meant to keep out."""
    from fastapi import APIRouter, Depends

    def dependency() -> int:
        return 1

    router = APIRouter()

    @router.get("/sync")
    def sync_route() -> dict[str, str]:
        return {}

    @router.get("/async-with-sync-dependency")
    async def async_route(value: int = Depends(dependency)) -> dict[str, int]:
        return {"value": value}

    found = [
        line
        for route in router.routes
        if isinstance(route, APIRoute)
        for line in _sync_calls(route.dependant, route.path)
    ]
    assert len(found) == 2
    assert "sync_route" in found[0] and "dependency" in found[1]


# --- acmi serve: the same routes, store calls on worker threads ------------------------------


class LoopWatchingStore:
    """A store that records, per call, whether it ran on a thread running an event loop."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.name = inner.name
        self.on_loop: list[bool] = []

    def _note(self) -> None:
        try:
            asyncio.get_running_loop()
            self.on_loop.append(True)
        except RuntimeError:
            self.on_loop.append(False)

    def execute(self, command: Command) -> Reply:
        self._note()
        return self.inner.execute(command)

    def pipeline(self, commands: Sequence[Command]) -> Any:
        self._note()
        return self.inner.pipeline(commands)

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        self._note()
        return self.inner.eval(script, keys, args)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("offload", [True, False], ids=["acmi-serve", "lambda"])
def test_store_calls_run_off_the_loop_only_when_offloaded(store: RedisStore, offload: bool) -> None:
    """``acmi serve`` (uvicorn, many requests at once: ``offload=True``) runs every store
    call on a worker thread, so a slow store never blocks the loop; the Lambda app
    (``offload=False``) runs them inline on the loop, starting no thread."""
    watched = LoopWatchingStore(store)
    acmi = Acmi(watched, Settings())
    headers = {"Authorization": f"Bearer {EXAMPLE_KEY}"}
    with TestClient(create_app(ApiContext(acmi, offload=offload))) as client:
        assert client.put("/v1/entities/user:a/profile", json={"a": 1}, headers=headers).is_success
        assert client.get("/v1/entities/user:a", headers=headers).is_success
        assert client.post(
            "/v1/locks/r1/claim", json={"owner": "agent:a", "ttl_ms": 5000}, headers=headers
        ).is_success
        assert client.get("/v1/agents/a/bootstrap", headers=headers).is_success
    assert watched.on_loop  # the store was called
    assert set(watched.on_loop) == {not offload}


def test_the_rendered_document_and_page_follow_the_root_path() -> None:
    """/openapi.json and /docs are rendered once per root path (a stage behind API
    Gateway), and answer as FastAPI's own routes would: the root path in ``servers``."""
    app = create_app(ApiContext(Acmi(NoStore(), Settings())))
    with TestClient(app, root_path="/prod") as staged, TestClient(app) as plain:
        for _ in range(2):  # the second answer comes from the rendered bytes
            assert staged.get("/openapi.json").json()["servers"] == [{"url": "/prod"}]
            assert "servers" not in plain.get("/openapi.json").json()
        assert "/prod/openapi.json" in staged.get("/docs").text
        page = plain.get("/docs").text
        assert "/openapi.json" in page and "/prod/" not in page
        assert plain.get("/openapi.json").json() == app.openapi()


# --- the bench measures every HTTP function -------------------------------------------------


def test_the_bench_section_has_a_case_for_every_http_function_and_samples_exist() -> None:
    cases = {case.function for case in lambda_path.CASES}
    assert cases == {spec.name for spec in HTTP_FUNCTIONS}
    names = set(event_names())
    for case in lambda_path.CASES:
        assert case.sample in names, case
        assert set(case.setup) <= names, case
        # a store function: a read and a write, at least; the dashboard only reads
        if case.function not in ("docs", "dashboard"):
            kinds = {c.kind for c in lambda_path.CASES if c.function == case.function}
            assert kinds == {"read", "write"} or case.function == "ingest", case


def test_the_bench_worker_answers_every_case_without_a_thread(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A few rounds of the section's worker, in this process: every case answered 2xx
    through our handler, the app and the floor, and no thread was started."""
    redis_server.flush(DB)
    try:
        result = lambda_path.worker(redis_server.url_for(DB), rounds=3, warmup=1)
    finally:
        for spec in HTTP_FUNCTIONS:
            handler_of(spec).configure()
    capsys.readouterr()  # the handlers' log lines
    assert result["threads_started"] == 0
    for case in result["cases"]:
        assert all(200 <= int(status) < 300 for status in case["statuses"]), case
        assert len(case["ours_ms"]) == len(case["app_ms"]) == len(case["floor_ms"]) == 3

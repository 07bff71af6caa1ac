"""8. The Lambda HTTP path: every HTTP function's handler, in process, next to its floor.

For each HTTP function of ``acmi_core.base.lambdas.FUNCTIONS``, a read and a write (API Gateway
v2 events: the function's ``events/`` samples, a write's idempotency field made unique per
call so that every call stores) go through the real handler (``functions.<name>.handler``:
Powertools Logger and Metrics, mangum, the app) on a real redis-server (``RedisStore``).
Next to each, the floor: a bare FastAPI + mangum app with the same route (method, path
template, path and query parameters), the same JSON body parsed, doing ONE command on the
same store (a write ``LPUSH``es the body, a read ``GET``s a value of a few hundred bytes).
The docs function's floor serves the same bytes with no command.

A third side, "app", is the function's own app behind mangum with no Powertools (no
decorator, log line or metric): the handler's time minus the app's is what Powertools
costs per invocation. The calls interleave (every case each round, the three sides in
rotating order), so machine noise hits all alike. Ratio: our p50 over the floor's; the
goal is at most 1.5. Each call's CPU time (this thread's) is kept too: steadier than wall
time on a busy machine.

Runs in a fresh interpreter (``python -m bench.lambda_path REDIS_URL ROUNDS OUT_JSON``)
whose stdout (the handlers' JSON log lines and EMF metrics, as a Lambda writes them) goes
nowhere.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from bench._infra import ROOT, Column, RedisServer, median, percentile, table_of

TITLE = "9. The Lambda HTTP path: each function's handler in process, next to FastAPI + mangum"
DB: Final = 11
GOAL: Final = 1.5
EXAMPLE_KEY: Final = "acmi_local_example_admin_key_0001"
WARMUP: Final = 30  # rounds before the clock starts (the first builds each app)

Event = dict[str, Any]
Handler = Callable[[Event, Any], dict[str, Any]]


class Context:
    """What Powertools' inject_lambda_context reads from the Lambda context."""

    function_name = "acmi-bench"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:acmi-bench"
    aws_request_id = "bench-0000"


@dataclass(frozen=True)
class Case:
    """One route of one function: the sample event, the JSON field made unique per call
    (a write that would otherwise be an idempotent replay or a repeat), the requests
    that set up what it reads."""

    function: str
    kind: str  # "read" | "write"
    sample: str  # events/<sample>.json
    unique: tuple[str, ...] = ()  # body path made unique per call
    unique_path: bool = False  # the last path parameter made unique per call
    method: str | None = None  # override the sample's method (a read built from a write)
    path: tuple[str, str] | None = None  # (routeKey path, rawPath) override
    query: dict[str, str] | None = None
    setup: tuple[str, ...] = ()  # samples sent once first


CASES: Final[tuple[Case, ...]] = (
    Case("ingest", "write", "ingest.n8n", unique=("seq",)),
    Case("ingest", "write", "ingest.events-single", unique=("correlationId",)),
    Case("entities", "read", "entities.get", setup=("entities.put-profile",)),
    Case("entities", "write", "entities.put-profile"),
    Case("locks", "write", "locks.claim", unique_path=True),
    Case(
        "locks",
        "read",
        "locks.claim",
        method="GET",
        path=("/v1/locks/{resource}", "/v1/locks/deploy:acme-web:prod"),
        setup=("locks.claim",),
    ),
    Case("work", "read", "work.get", setup=("work.create", "work.event")),
    Case("work", "write", "work.event", unique=("correlationId",), setup=("work.create",)),
    Case("agents", "write", "agents.heartbeat"),
    Case(
        "agents",
        "read",
        "agents.heartbeat",
        method="GET",
        path=("/v1/agents/{agent}/threads", "/v1/agents/claude/threads"),
        setup=("agents.heartbeat",),
    ),
    Case("hitl", "read", "hitl.list", setup=("hitl.create",)),
    Case("hitl", "write", "hitl.create", unique=("correlationId",)),
    Case("workflows", "read", "workflows.unassessed", setup=("workflows.execute",)),
    Case(
        "workflows",
        "write",
        "workflows.execute",
        # a new step per call: a step's next run waits for its assessment (the seed's rule)
        unique=("step",),
        # another workflow: the read above examines up to 500 events of its own
        path=("/v1/workflows/{workflow}/executions", "/v1/workflows/bench-writes/executions"),
    ),
    Case("bootstrap", "read", "bootstrap.read-markdown", setup=("bootstrap.spawn",)),
    Case("bootstrap", "write", "bootstrap.spawn", unique=("spawn", "session_id")),
    Case("dashboard", "read", "dashboard.read"),  # a read-only function: no write case
    Case("dashboard", "read", "dashboard.page"),
    Case("docs", "read", "docs.openapi"),
    Case("docs", "read", "docs.docs"),
    Case("memory", "read", "memory.status", setup=("memory.remember",)),
    # a new entity per call: one day's note would pass its 10 KB budget within the run
    Case("memory", "write", "memory.remember", unique_path=True),
)


def load_sample(name: str) -> Event:
    event: Event = json.loads((ROOT / "events" / f"{name}.json").read_text())
    return event


def case_event(case: Case) -> Event:
    """The case's event template (the sample with the case's overrides)."""
    event = load_sample(case.sample)
    if case.method is not None:
        event["requestContext"]["http"]["method"] = case.method
        if case.method == "GET":
            event.pop("body", None)
            event["headers"].pop("content-type", None)
    if case.path is not None:
        template, raw = case.path
        event["rawPath"] = event["requestContext"]["http"]["path"] = raw
        method = event["requestContext"]["http"]["method"]
        event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} {template}"
    if case.query is not None:
        event["queryStringParameters"] = dict(case.query)
        event["rawQueryString"] = "&".join(f"{k}={v}" for k, v in case.query.items())
    return event


def numbered(case: Case, template: Event, seq: int) -> Event:
    """The event made a new request: body field ``case.unique`` (a path) suffixed with
    ``seq`` (a new delivery), or the last path parameter (a new resource)."""
    if not case.unique and not case.unique_path:
        return template
    event = copy.deepcopy(template)
    event["requestContext"]["requestId"] = f"bench-{seq}"
    if case.unique:
        body = json.loads(event["body"])
        holder = body
        for part in case.unique[:-1]:
            holder = holder[part]
        last = case.unique[-1]
        holder[last] = f"{holder.get(last, 'bench')}-{seq}" if last != "seq" else seq
        event["body"] = json.dumps(body)
    if case.unique_path:
        name, value = list(event["pathParameters"].items())[-1]
        event["pathParameters"][name] = f"{value}-{seq}"
        raw = event["rawPath"].replace(value, f"{value}-{seq}", 1)
        event["rawPath"] = event["requestContext"]["http"]["path"] = raw
    return event


def route_key(event: Event) -> tuple[str, str]:
    method, template = str(event["routeKey"]).split(" ", 1)
    return method, template


# --- the floor: FastAPI + mangum, the same routes, one command each ---------------------------


def floor_handler(events: list[Event], store: Any) -> Handler:
    """A bare FastAPI + mangum app serving each event's route (method, path template, path
    and query parameters as declared ``str`` parameters, the JSON body parsed): a write
    LPUSHes the body, a read GETs one value; the docs routes serve the same bytes as ours."""
    from fastapi import FastAPI, Request
    from mangum import Mangum

    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    store.execute(("SET", "floor:read", json.dumps({"value": "x" * 200, "n": 1})))
    seen: set[tuple[str, str]] = set()
    for event in events:
        method, template = route_key(event)
        if (method, template) in seen:
            continue
        seen.add((method, template))
        names = re.findall(r"{(\w+)}", template)
        query = list((event.get("queryStringParameters") or {}).keys())
        endpoint = _floor_endpoint(store, DOCS_BYTES.get(template))
        parameters = [
            inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request)
        ]
        parameters += [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=str) for n in names
        ]
        parameters += [
            inspect.Parameter(
                q, inspect.Parameter.KEYWORD_ONLY, annotation=str | None, default=None
            )
            for q in query
            if re.fullmatch(r"\w+", q)
        ]
        endpoint.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        app.add_api_route(template, endpoint, methods=[method])
    asgi: Handler = Mangum(app, lifespan="off")
    return asgi


def _floor_endpoint(store: Any, docs_bytes: bytes | None) -> Callable[..., Any]:
    from fastapi import Request
    from fastapi.responses import JSONResponse, Response

    async def endpoint(request: Request, **params: str | None) -> Response:
        if docs_bytes is not None:
            return Response(docs_bytes, media_type="application/json")
        if request.method == "GET":
            value = store.execute(("GET", "floor:read"))
            return JSONResponse({"params": params, "value": json.loads(value)})
        raw = await request.body()
        json.loads(raw)
        count = store.execute(("LPUSH", "floor:list", raw))
        return JSONResponse({"params": params, "stored": count}, status_code=201)

    return endpoint


# The bytes each docs route of ours answers, filled in before the floor is built.
DOCS_BYTES: dict[str, bytes] = {}


# --- the worker: one fresh interpreter --------------------------------------------------------


SIDES: Final = ("ours", "app", "floor")


@dataclass
class Timings:
    """Seconds per call of each side, and the statuses our handler answered."""

    sides: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    # this thread's CPU seconds per call: steadier than wall time on a shared machine
    cpu: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    statuses: dict[str, int] = field(default_factory=dict)


class QuietObserver:
    """The app without Powertools: business metrics and correlation ids go nowhere."""

    def metric(self, name: str, value: float = 1) -> None:
        pass

    def correlate(self, correlation_id: str) -> None:
        pass


def app_handler(function: str, store: Any) -> Handler:
    """Function ``function``'s app behind mangum, with no Powertools decorator, log line
    or metric: what the handler costs without them."""
    from mangum import Mangum

    from acmi_core import Acmi, Settings
    from acmi_core.api.app import create_app
    from acmi_core.api.context import ApiContext
    from acmi_core.base.lambdas import function as function_row
    from acmi_core.base.lambdas import mounted_routers

    spec = function_row(function)
    acmi = Acmi(store, Settings.from_env({"ACMI_DEFAULT_TENANT": "default"}))
    ctx = ApiContext(acmi, observer=QuietObserver(), offload=False)
    asgi: Handler = Mangum(create_app(ctx, mounted_routers(spec), docs=spec.docs), lifespan="off")
    return asgi


def _setup(store: Any, context: Context) -> dict[str, Handler]:
    """Each function's handler on ``store``, and what the cases read, written once."""
    handlers: dict[str, Handler] = {}
    done: set[str] = set()
    for case in CASES:
        if case.function not in handlers:
            fn = importlib.import_module(f"functions.{case.function.replace('-', '_')}").handler
            fn.configure(env={"ACMI_DEFAULT_TENANT": "default"}, store=store)
            handlers[case.function] = fn
        for name in case.setup:
            if name in done:
                continue
            done.add(name)
            response = handlers[case.function](load_sample(name), context)
            if response["statusCode"] >= 300:
                raise RuntimeError(f"setup {name}: {response['statusCode']} {response['body']}")
    return handlers


def worker(url: str, rounds: int, warmup: int = WARMUP) -> dict[str, Any]:
    from acmi_core import Settings
    from acmi_core.auth.apikeys import register
    from acmi_core.store.redis import RedisStore

    settings = Settings.from_env({"ACMI_DEFAULT_TENANT": "default"})
    store = RedisStore.from_url(url, settings)
    register(store, EXAMPLE_KEY, tenant="default", scope="admin", name="bench", now_ms=0)
    context = Context()
    handlers = _setup(store, context)
    apps = {name: app_handler(name, store) for name in handlers}
    templates = [case_event(case) for case in CASES]
    for case, template in zip(CASES, templates, strict=True):
        if case.function == "docs":
            body = handlers["docs"](template, context)["body"]
            DOCS_BYTES[route_key(template)[1]] = body.encode()
    floor = floor_handler(templates, store)
    timings = [Timings() for _ in CASES]
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    threading.Thread.start = counted  # type: ignore[method-assign,assignment]
    try:
        _drive(handlers, apps, floor, templates, timings, (warmup, rounds), context)
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]
    return {
        "threads_started": len(started),
        "cases": [
            {
                "function": case.function,
                "kind": case.kind,
                "route": template["routeKey"],
                "sample": case.sample,
                **{f"{side}_ms": [t * 1000 for t in timing.sides[side]] for side in SIDES},
                **{f"{side}_cpu_ms": [t * 1000 for t in timing.cpu[side]] for side in SIDES},
                "statuses": timing.statuses,
            }
            for case, template, timing in zip(CASES, templates, timings, strict=True)
        ],
    }


def _drive(
    handlers: dict[str, Handler],
    apps: dict[str, Handler],
    floor: Handler,
    templates: list[Event],
    timings: list[Timings],
    rounds: tuple[int, int],
    context: Context,
) -> None:
    """Every case, every side, round after round: interleaved so noise hits all alike."""
    warmup, timed = rounds  # untimed rounds first
    for seq in range(warmup + timed):
        for index, (case, template) in enumerate(zip(CASES, templates, strict=True)):
            into = timings[index]
            # each side its own request (a write stores each time), in rotating order
            order = SIDES[(seq + index) % 3 :] + SIDES[: (seq + index) % 3]
            for side in order:
                handler = {"ours": handlers[case.function], "app": apps[case.function]}.get(
                    side, floor
                )
                event = numbered(case, template, seq * 3 + SIDES.index(side))
                t0, c0 = time.perf_counter(), time.thread_time()
                status = int(handler(event, context)["statusCode"])
                elapsed, cpu = time.perf_counter() - t0, time.thread_time() - c0
                if seq >= warmup:
                    into.sides[side].append(elapsed)
                    into.cpu[side].append(cpu)
                if side == "ours":
                    into.statuses[str(status)] = into.statuses.get(str(status), 0) + 1


# --- the section ------------------------------------------------------------------------------


def measure(server: RedisServer, rounds: int) -> dict[str, Any]:
    """One fresh worker interpreter: its cases' timings and the threads it started."""
    server.flush(DB)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACMI_", "UPSTASH_"))}
    env["PYTHONPATH"] = str(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        args = [sys.executable, "-m", "bench.lambda_path", server.url_for(DB), str(rounds)]
        result = subprocess.run(
            [*args, str(out)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,  # the handlers' log lines and EMF metrics
            stderr=subprocess.PIPE,
            text=True,
            timeout=900,
            check=False,
        )
        if result.returncode != 0 or not out.exists():
            raise RuntimeError(f"lambda path worker failed: {result.stderr[-3000:]}")
        data: dict[str, Any] = json.loads(out.read_text())
        return data


def rows_of(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for case in cases:
        ours, app, floor = case["ours_ms"], case["app_ms"], case["floor_ms"]
        ratio = median(ours) / median(floor)
        rows.append(
            {
                "function": case["function"],
                "route": case["route"],
                "kind": case["kind"],
                "calls": len(ours),
                "ours_p50_ms": median(ours),
                "ours_p99_ms": percentile(ours, 99),
                "app_p50_ms": median(app),
                "powertools_ms": median(ours) - median(app),
                "floor_p50_ms": median(floor),
                "floor_p99_ms": percentile(floor, 99),
                "ratio": ratio,
                "app_ratio": median(app) / median(floor),
                "cpu_ratio": median(case["ours_cpu_ms"]) / median(case["floor_cpu_ms"]),
                "app_cpu_ratio": median(case["app_cpu_ms"]) / median(case["floor_cpu_ms"]),
                "met": ratio <= GOAL,
                "statuses": ", ".join(f"{k}: {v}" for k, v in sorted(case["statuses"].items())),
            }
        )
    return rows


COLUMNS: Final[list[Column]] = [
    ("function", "function"),
    ("route", "route"),
    ("ours p50 ms", "ours_p50_ms"),
    ("ours p99 ms", "ours_p99_ms"),
    ("floor p50 ms", "floor_p50_ms"),
    ("floor p99 ms", "floor_p99_ms"),
    ("ratio (p50)", "ratio"),
    (f"<= {GOAL}x", "met"),
    ("app p50 ms", "app_p50_ms"),
    ("app / floor", "app_ratio"),
    ("Powertools ms", "powertools_ms"),
    ("CPU ratio: ours, app", lambda r: f"{r['cpu_ratio']:.2f}, {r['app_cpu_ratio']:.2f}"),
    ("statuses", "statuses"),
]


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    rounds = 40 if quick else 500
    result = measure(server, rounds)
    rows = rows_of(result["cases"])
    met = sum(1 for row in rows if row["met"])
    return {
        "rows": rows,
        "threads_started": result["threads_started"],
        "table": table_of(COLUMNS, rows),
        "note": (
            f"{len(rows)} routes of {len({r['function'] for r in rows})} HTTP functions, "
            f"{met} within {GOAL}x of the floor. Ours: functions.<name>.handler (Powertools "
            "Logger: the correlation id, one line per invocation; EMF metrics; mangum; the "
            "app; cached API-key auth; the core operation: one script or pipeline). App: "
            "the same app behind mangum without Powertools (Powertools ms = ours - app). "
            "CPU ratio: this thread's CPU time per call over the floor's (steadier than "
            "wall time on a busy machine; the store's own time is not in it). "
            "Floor: FastAPI + mangum, the same route and body, ONE command on the same "
            "store (docs: the same bytes, no command). Local redis-server, RedisStore. "
            f"Interleaved call by call, {rounds} timed rounds after {WARMUP} warm-up "
            f"rounds, one fresh interpreter; threads started during them: "
            f"{result['threads_started']}."
        ),
    }


def main() -> None:
    url, rounds, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    out.write_text(json.dumps(worker(url, rounds)))


if __name__ == "__main__":
    main()

"""Traces (``ACMI_TRACES=1``, ``acmi_core/client/tracing.py``): a span per HTTP request,
per operation on every surface (HTTP, MCP, the CLI's store backend) and per scheduled
job run, read from the OpenTelemetry SDK's in-memory exporter, on a real redis-server and
with two tenants; off (the default), no span and no import of opentelemetry."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.api.observe import RequestSpans
from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import Scope
from acmi_core.cli import main
from acmi_core.cli.state import CliState
from acmi_core.client.tracing import tracer
from acmi_core.jobs import rollup
from acmi_core.jobs.runner import JobRun
from acmi_core.jobs.tenants import run_tenants
from acmi_core.mcp.server import build_server
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS, run_fresh

DB = TEST_DBS["traces"]


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    """The process's tracer provider, once (OpenTelemetry allows one per process), with
    an in-memory exporter every test of this module reads."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    return memory


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    exporter.clear()
    yield exporter
    exporter.clear()


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisStore]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    yield store
    store.close()


def client(store: RedisStore, *, traces: bool, tenant: str = "default") -> Acmi:
    settings = Settings(ACMI_TRACES=traces)  # type: ignore[call-arg]
    return create_acmi(store, settings).for_tenant(tenant)


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_http_request_and_operation_spans_per_tenant(
    store: RedisStore, spans: InMemorySpanExporter
) -> None:
    acmi = client(store, traces=True)
    app = create_app(ApiContext(acmi))
    http = TestClient(app)
    keys = {}
    for tenant in ("default", "acme"):
        key, _ = apikeys.mint(store, tenant=tenant, scope="write", name="t", now_ms=0)
        keys[tenant] = {"Authorization": f"Bearer {key}"}
    event = {"source": "agent:a", "kind": "note", "correlationId": "c-1", "summary": "hello"}
    for tenant in ("default", "acme"):
        answer = http.post("/v1/entities/user:alice/events", json=event, headers=keys[tenant])
        assert answer.status_code == 201, answer.text
    acmi.get("user:warm")  # its script loaded first (a cold one takes a second trip)
    assert http.get("/v1/entities/user:alice", headers=keys["acme"]).status_code == 200
    assert http.get("/v1/entities/user:a/signals", headers={}).status_code == 401

    requests = named(spans, "POST ") + named(spans, "GET ")
    assert [s.name for s in requests] == [
        "POST /v1/entities/{entity}/events",
        "POST /v1/entities/{entity}/events",
        "GET /v1/entities/{entity}",
        "GET /v1/entities/{entity}/signals",
    ]
    assert [attrs(s)["http.response.status_code"] for s in requests] == [201, 201, 200, 401]
    assert all("user:alice" not in json.dumps(attrs(s)) for s in requests)  # no path, no id

    operations = named(spans, "acmi ")
    assert [(s.name, attrs(s)["acmi.tenant"]) for s in operations] == [
        ("acmi entities.events.append", "default"),
        ("acmi entities.events.append", "acme"),
        ("acmi entities.get", "acme"),
    ]  # the 401 never reached its operation
    append = attrs(operations[0])
    assert append["acmi.entities"] == 1
    assert append["acmi.round_trips"] == 1  # one script run
    assert append["acmi.bytes_sent"] > len("hello")
    assert append["acmi.bytes_received"] >= 1
    get = attrs(operations[2])
    assert get["acmi.round_trips"] == 1 and get["acmi.bytes_received"] > len("hello")
    # each operation span is a child of its request's span
    by_id = {s.context.span_id: s for s in requests}
    assert all(op.parent is not None and op.parent.span_id in by_id for op in operations)


def test_a_refused_operation_is_marked(store: RedisStore, spans: InMemorySpanExporter) -> None:
    acmi = client(store, traces=True)
    http = TestClient(create_app(ApiContext(acmi)))
    key, _ = apikeys.mint(store, tenant="default", scope="write", name="t", now_ms=0)
    answer = http.post(
        "/v1/entities/user:alice/events",
        json={
            "source": "agent:a",
            "kind": "note",
            "correlationId": "c",
            "summary": "x",
            "ts": "soon",
        },
        headers={"Authorization": f"Bearer {key}"},
    )
    assert answer.status_code == 400
    (op,) = named(spans, "acmi ")
    assert attrs(op)["acmi.error"] == "AcmiValidationError"
    assert attrs(op)["acmi.round_trips"] == 0  # refused before the store


def test_mcp_tool_spans(store: RedisStore, spans: InMemorySpanExporter) -> None:
    for tenant in ("default", "acme"):
        server = build_server(client(store, traces=True, tenant=tenant), Scope.WRITE)
        args = {"entity": "deal:d1", "signals": {"stage": "won"}, "merge": True}
        result = asyncio.run(server.call_tool("signal", args))
        assert not getattr(result, "isError", False), result
    ops = named(spans, "acmi ")
    assert [(s.name, attrs(s)["acmi.tenant"]) for s in ops] == [
        ("acmi entities.signals.put", "default"),
        ("acmi entities.signals.put", "acme"),
    ]
    # a merge, then the merged signals read back for the answer (mcp/shapes.py)
    assert [(attrs(s)["acmi.round_trips"], attrs(s)["acmi.entities"]) for s in ops] == [(2, 1)] * 2


def test_cli_command_spans(
    store: RedisStore, spans: InMemorySpanExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    acmi = client(store, traces=True, tenant="acme")
    acmi.get("user:warm")  # its script loaded first (a cold one takes a second trip)
    spans.clear()
    code = main(["--output", "json", "get", "user", "bob"], state=CliState(preset=acmi))
    capsys.readouterr()
    assert code == 0
    (op,) = named(spans, "acmi ")
    assert op.name == "acmi entities.get"
    assert attrs(op)["acmi.tenant"] == "acme" and attrs(op)["acmi.round_trips"] == 1


def test_job_spans_per_tenant(store: RedisStore, spans: InMemorySpanExporter) -> None:
    default = client(store, traces=True)
    for acmi in (default, client(store, traces=True, tenant="acme")):
        acmi.timeline.append(
            "user:alice",
            {"source": "agent:a", "kind": "note", "correlationId": "c", "summary": "one"},
        )
    run = JobRun("rollup-cron", f"exec-{time.monotonic_ns()}", default.clock(), {})
    result = run_tenants(default, run, rollup.run, clock=time.perf_counter)

    (whole,) = named(spans, "acmi jobs ")
    assert whole.name == "acmi jobs rollup-cron"
    assert attrs(whole)["acmi.tenants"] == 2 and attrs(whole)["acmi.deferred"] == 0
    runs = named(spans, "acmi job ")
    assert sorted(attrs(s)["acmi.tenant"] for s in runs) == ["acme", "default"]
    assert all(s.parent is not None and s.parent.span_id == whole.context.span_id for s in runs)
    mine = next(s for s in runs if attrs(s)["acmi.tenant"] == "default")
    # the run's own count, less the record written after the span
    assert attrs(mine)["acmi.round_trips"] == result["requests"] - 1
    assert attrs(mine)["acmi.bytes_sent"] > 0


def test_off_by_default_no_span(store: RedisStore, spans: InMemorySpanExporter) -> None:
    acmi = client(store, traces=False)
    http = TestClient(create_app(ApiContext(acmi)))
    key, _ = apikeys.mint(store, tenant="default", scope="read", name="t", now_ms=0)
    assert http.get("/v1/entities/user:x", headers={"Authorization": f"Bearer {key}"}).is_success
    server = build_server(acmi, Scope.READ)
    asyncio.run(server.call_tool("get", {"entity": "user:x"}))
    assert Settings().traces is False
    assert spans.get_finished_spans() == ()


def test_off_adds_nothing_to_the_request_path() -> None:
    """Traces off: no span middleware on the app, the tracer never looked up, FastAPI's
    own tracing off too (it would record ``?token=`` once a provider exists)."""
    tracer.cache_clear()
    app = create_app(ApiContext(create_acmi(MemoryStore(), Settings())))
    assert not any(m.cls is RequestSpans for m in app.user_middleware)
    with TestClient(app) as http:
        assert http.post("/v1/ingest/make?token=t0ken-SECRET", json={}).status_code == 401
    assert tracer.cache_info().currsize == 0


def test_fastapi_never_records_the_query(store: RedisStore, spans: InMemorySpanExporter) -> None:
    """Traces on, a push token in the query: no span carries it (nor the path)."""
    http = TestClient(create_app(ApiContext(client(store, traces=True))))
    assert http.post("/v1/ingest/make?token=t0ken-SECRET&entity=user:a", json={}).is_error
    finished = spans.get_finished_spans()
    assert [s.name for s in finished] == ["POST /v1/ingest/{source}"]
    assert all("t0ken" not in json.dumps(attrs(s)) for s in finished)


def test_on_without_the_extra_names_it() -> None:
    """ACMI_TRACES=1 where opentelemetry is not installed: the first traced call says
    which extra it needs, naming the setting."""
    code = (
        "import json, sys\n"
        "sys.modules['opentelemetry'] = None  # not installed\n"
        "from acmi_core import Settings, create_acmi\n"
        "from acmi_core.store.memory import MemoryStore\n"
        "from acmi_core.operations import operation\n"
        "from acmi_core.operations.bind import core_call\n"
        "acmi = create_acmi(MemoryStore(), Settings.from_env())\n"
        "try:\n"
        "    core_call(acmi, operation('entities.get'))('user:x')\n"
        "except Exception as exc:\n"
        "    print(json.dumps({'error': str(exc)}))\n"
    )
    answer = run_fresh(code, {"ACMI_TRACES": "1"})
    assert "ACMI_TRACES" in answer["error"] and "acmi[traces]" in answer["error"]

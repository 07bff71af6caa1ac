"""The Lambda functions' log lines: the runtime's formatter writes exactly the line
Powertools' own formatter writes (byte for byte, every kind of record), and an HTTP
invocation's one line carries the Lambda context's keys, the correlation id, the route
and the status, with its EMF metrics on a line of their own."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.logging import formatter as powertools_formatter
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from acmi_core.auth.apikeys import register
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from functions import runtime
from functions.runtime import RECORD_ATTRS, InvocationFormatter
from tests.kit import EXAMPLE_KEY, TEST_DBS, FakeLambdaContext, load_event

DB = TEST_DBS["log_lines"]


def test_the_record_attributes_are_powertools_own() -> None:
    assert frozenset(powertools_formatter.RESERVED_LOG_ATTRS) == RECORD_ATTRS


@pytest.fixture
def formatter() -> InvocationFormatter:
    made = InvocationFormatter()
    made.append_keys(service="acmi", sampling_rate=None)
    made.append_keys(
        cold_start=False,
        function_name="acmi-test",
        function_memory_size=512,
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:acmi-test",
        function_request_id="req-1",
        correlation_id="ZD-18342",
    )
    return made


def record(msg: Any, *args: Any, exc: bool = False, **extra: Any) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            exc_info = sys.exc_info()
    made = logging.LogRecord("acmi", logging.INFO, "runtime.py", 287, msg, args, exc_info, "invoke")
    made.__dict__.update(extra)
    return made


RECORDS = {
    "plain": lambda: record("handled", route="POST /v1/ingest/{source}", status=201),
    "nested extra": lambda: record("job done", result={"tenants": {"a": {"n": 1}}}, job="x"),
    "non-ascii": lambda: record("é handled", note="naïve ✓"),
    "a None extra": lambda: record("handled", route=None, status=201),
    "%-arguments": lambda: record("handled %s", "x"),
    "a dict message": lambda: record({"event": "x"}),
    "a JSON message": lambda: record('{"a": 1}'),
    "a JSON word": lambda: record("true "),
    "a number": lambda: record("42"),
    "empty": lambda: record(""),
    "an exception": lambda: record("failed", exc=True),
    "an unserializable extra": lambda: record("handled", when=object),
    "an extra named like a key": lambda: record("handled", correlation_id="over"),
}


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_each_line_is_powertools_own(name: str, formatter: InvocationFormatter) -> None:
    made = RECORDS[name]()
    ours = formatter.format(made)
    assert ours == LambdaPowertoolsFormatter.format(formatter, made)
    assert json.loads(ours)["location"] == "invoke:287"


def test_the_xray_trace_id_thread_keys_and_a_disabled_key(
    formatter: InvocationFormatter, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = "Root=1-6b0c71ff-5d3c0a1e2f4b6c8d;Parent=53995c;Sampled=0"
    monkeypatch.setenv("_X_AMZN_TRACE_ID", trace)
    formatter.thread_safe_append_keys(tenant="acme")
    same = LambdaPowertoolsFormatter.format
    made = record("handled", status=201)
    line = formatter.format(made)
    assert line == same(formatter, made)
    assert json.loads(line)["xray_trace_id"] == "1-6b0c71ff-5d3c0a1e2f4b6c8d"
    assert json.loads(line)["tenant"] == "acme"
    formatter.thread_safe_clear_keys()
    formatter.append_keys(xray_trace_id=None)  # Powertools' way to leave it out
    line = formatter.format(made)
    assert line == same(formatter, made)
    assert "xray_trace_id" not in json.loads(line)


def test_a_record_made_in_a_task(formatter: InvocationFormatter) -> None:
    """On 3.12 a record made in an asyncio task has a taskName: Powertools writes it."""

    async def make() -> logging.LogRecord:
        return logging.getLogger("acmi.test").makeRecord(
            "acmi", logging.WARNING, "x.py", 3, "in a task", (), None, "f"
        )

    made = asyncio.run(make())
    assert formatter.format(made) == LambdaPowertoolsFormatter.format(formatter, made)


def test_other_templates_go_through_powertools(formatter: InvocationFormatter) -> None:
    formatter.append_keys(process="%(process)d")
    made = record("handled")
    line = formatter.format(made)
    assert line == LambdaPowertoolsFormatter.format(formatter, made)
    assert int(json.loads(line)["process"]) > 0


# --- an HTTP invocation's lines ----------------------------------------------------------


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisStore]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    register(store, EXAMPLE_KEY, tenant="default", scope="admin", name="t", now_ms=0)
    yield store
    store.close()


def test_an_invocation_logs_one_line_with_its_keys_and_emf_metrics(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from functions import ingest

    log = io.StringIO()
    # Powertools' handler holds the stdout of the moment the logger was created
    monkeypatch.setattr(runtime.logger.registered_handler, "stream", log)
    ingest.handler.configure(env={"ACMI_DEFAULT_TENANT": "default"}, store=store)
    context = FakeLambdaContext("acmi-ingest")
    responses = [ingest.handler(load_event(name), context) for name in ("ingest.n8n",) * 2]
    assert [r["statusCode"] for r in responses] == [201, 201]
    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    handled = [line for line in lines if line["message"] == "handled"]
    assert len(handled) == 2  # one line per invocation
    for line in handled:
        assert list(line)[:4] == ["level", "location", "message", "timestamp"]
        assert line["level"] == "INFO"
        assert line["location"].startswith("invoke:")
        assert line["service"] == "acmi"
        assert line["function_name"] == "acmi-ingest"
        assert line["function_memory_size"] == 512
        assert line["function_arn"] == context.invoked_function_arn
        assert line["function_request_id"] == context.aws_request_id
        assert line["correlation_id"] == "ZD-18342"  # the events' correlationId
        assert line["route"] == "POST /v1/ingest/{source}"
        assert line["status"] == 201
    assert handled[1]["cold_start"] is False
    emf = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]
    assert len(emf) == 2  # one EMF line per invocation that recorded a metric
    assert all(e["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ACMI" for e in emf)
    assert all(e["service"] == "acmi" for e in emf)


def test_an_invocation_without_metrics_writes_no_emf_line(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from functions import ingest

    log = io.StringIO()
    monkeypatch.setattr(runtime.logger.registered_handler, "stream", log)
    ingest.handler.configure(env={"ACMI_DEFAULT_TENANT": "default"}, store=store)
    event = load_event("ingest.n8n")
    event["headers"]["authorization"] = "Bearer acmi_not_a_key"
    assert ingest.handler(event, FakeLambdaContext())["statusCode"] == 401
    (line,) = [json.loads(x) for x in log.getvalue().splitlines()]
    assert (line["message"], line["status"]) == ("handled", 401)
    assert line["correlation_id"] == event["requestContext"]["requestId"]
    assert '"_aws"' not in capsys.readouterr().out

"""Every events/ file through the real Lambda handler, as `sam local invoke -e` would.

Each function's handler is found by its row in ``acmi_core.base.lambdas`` (as SAM finds it by
the template's Handler) and configured with an environment of its own (a real
redis-server, the admin key the events carry): no process environment is changed.
"""

from __future__ import annotations

import importlib
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.auth.apikeys import register
from acmi_core.auth.authenticator import Authenticator
from acmi_core.base.keys import Keys
from acmi_core.base.lambdas import FUNCTIONS, FunctionSpec
from acmi_core.cli import local as local_commands
from acmi_core.ingest.config import put_config
from acmi_core.jobs.runner import JobRun
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from functions.runtime import LambdaFunction
from tests.kit import DB, EVENTS_DIR, EXAMPLE_KEY, FakeLambdaContext, event_names, load_event

FUNCTION_NAMES = tuple(spec.name for spec in FUNCTIONS)
# (the mcp function serves HTTP too: its samples are API Gateway events like the others)
HTTP_FUNCTIONS = tuple(spec for spec in FUNCTIONS if spec.kind in ("http", "mcp"))
JOB_FUNCTIONS = frozenset(spec.name for spec in FUNCTIONS if spec.kind == "job")
# A job's sample is a Scheduler Input, not an HTTP event: its own test runs it through
# the handler (tests/e2e/test_<job>_job.py); here only its shape is checked.
JOB_EVENTS = [n for n in event_names() if n.split(".", 1)[0] in JOB_FUNCTIONS]
HTTP_EVENTS = [n for n in event_names() if n not in JOB_EVENTS]


pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

# Status per event file, each fed to a fresh (flushed) store. A new events/ file without an
# entry here fails test_every_event_file_has_an_expectation.
EXPECTED: dict[str, int] = {
    "ingest.events-single": 201,
    "ingest.events-batch": 201,
    "ingest.events-missing-summary": 400,
    "ingest.events-malformed-json": 400,
    "ingest.non-utf8": 400,
    "ingest.make": 201,
    "ingest.make-raw-newline": 201,
    "ingest.make-broken-quote": 400,
    "ingest.n8n": 201,
    "ingest.generic": 201,
    "ingest.gmail-pubsub": 201,
    "ingest.slack": 201,
    "ingest.github": 201,
    "ingest.vapi": 201,
    "ingest.no-auth": 401,
    "ingest.unknown-source": 400,
    "entities.get": 200,
    "entities.put-profile": 200,
    "entities.put-profile-array": 400,
    "entities.patch-signals": 200,
    "entities.put-signal": 200,
    "entities.timeline": 200,
    "entities.invalid-entity": 400,
    "entities.list": 200,
    "entities.wrong-key": 401,
    "locks.claim": 200,
    "locks.claim-invalid-ttl": 400,
    "work.create": 201,
    "work.create-invalid": 400,
    "work.event": 404,  # fresh store: no item yet (test_work_handlers.py chains them)
    "work.get": 404,
    "bootstrap.read-markdown": 200,
    "bootstrap.spawn": 200,
    "bootstrap.invalid-budget": 400,
    "agents.heartbeat": 200,
    "agents.heartbeat-invalid": 400,
    "hitl.create": 201,
    "hitl.create-invalid": 400,
    "hitl.list": 200,
    "workflows.execute": 201,
    "workflows.assess": 201,
    "workflows.improve": 201,
    "workflows.assess-invalid": 400,
    "workflows.unassessed": 200,
    "workflows.agent-lessons": 200,
    "memory.remember": 201,
    "memory.remember-invalid": 400,
    "memory.status": 200,
    "dashboard.read": 200,
    "dashboard.no-auth": 401,
    "dashboard.invalid-events": 400,
    "dashboard.page": 200,
    "docs.openapi": 200,
    "docs.docs": 200,
    "mcp.tools-list": 200,  # JSON-RPC answers; tests/e2e/test_mcp_http.py checks them
    "mcp.tools-call": 200,
    "mcp.no-auth": 401,
}

# (field, rule) named by the error body; rule None: only the field is checked.
EXPECTED_ERRORS: dict[str, tuple[str, str | None]] = {
    "ingest.events-missing-summary": ("events[0].summary", "required"),
    "ingest.events-malformed-json": ("body", "json"),
    "ingest.non-utf8": ("body", "utf8"),
    "ingest.make-broken-quote": ("body", "json"),
    "ingest.no-auth": ("authorization", None),
    "ingest.unknown-source": ("source", "unknown"),
    "entities.put-profile-array": ("profile", "object"),
    "entities.invalid-entity": ("entity", None),
    "entities.wrong-key": ("authorization", None),
    "locks.claim-invalid-ttl": ("ttl_ms", "range"),
    "work.create-invalid": ("id", "id_format"),
    "work.event": ("id", "exists"),
    "work.get": ("id", "exists"),
    "bootstrap.invalid-budget": ("max_bytes", "min_budget"),
    "agents.heartbeat-invalid": ("status", "status"),
    "hitl.create-invalid": ("urgency", "enum"),
    "workflows.assess-invalid": ("score", "range"),
    "memory.remember-invalid": ("layer", "memory_layer"),
    "mcp.no-auth": ("authorization", "required"),
    "dashboard.no-auth": ("authorization", None),
    "dashboard.invalid-events": ("events", "range"),
}

# Events stored per successful ingest file: (entity, count).
STORED: dict[str, tuple[str, int]] = {
    "ingest.events-single": ("user:mikey", 1),
    "ingest.events-batch": ("user:mikey", 3),
    "ingest.make": ("deal:acme-42", 1),
    "ingest.make-raw-newline": ("deal:acme-42", 1),
    "ingest.n8n": ("ticket:zd-18342", 1),
    "ingest.generic": ("customer:cus_R8fT2nVbX1", 1),
    "ingest.gmail-pubsub": ("user:mikey", 1),
    "ingest.slack": ("slack-channel:C0LAN2Q65", 1),
    "ingest.github": ("github-repo:acme-corp_platform", 1),
    "ingest.vapi": ("vapi-customer:14155550123", 2),
}
# Deliveries whose events go to several entities: each event's entity, in order.
SPREAD: dict[str, tuple[str, ...]] = {
    "ingest.vapi": ("vapi-customer:14155550123", "vapi-call:4f1b5c7e-93a2-4b8e-9d61-0c2f7a9e5b13"),
}

# Files answered with Markdown: a line the body must contain.
MARKDOWN: dict[str, str] = {
    "bootstrap.read-markdown": "# Wake bundle for agent:claude-engineer",
}
WEBHOOK_RETRIES = (
    "ingest.n8n",
    "ingest.make",
    "ingest.gmail-pubsub",
    "ingest.slack",
    "ingest.github",
    "ingest.vapi",
)
# The signing secrets the slack and github samples are signed with, and the time the
# Slack sample was signed at (its X-Slack-Request-Timestamp; the auth clock is held there).
SAMPLE_SIGNING_SECRETS = local_commands.SAMPLE_SIGNING_SECRETS  # as `acmi invoke` gives them
SLACK_SAMPLE_SIGNED_AT = 1795977726


Invoke = Callable[[str], dict[str, Any]]


@dataclass
class Harness:
    invoke: Invoke
    client: redis.Redis
    acmi: Acmi

    def snapshot(self) -> dict[bytes, bytes | None]:
        """Every key of the database with its serialized value."""
        return {key: self.client.dump(key) for key in sorted(self.client.scan_iter(count=1000))}


@pytest.fixture
def harness(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    """Each function's real handler, configured with a Redis URL on a flushed database
    where the key the events/ samples carry is provisioned as an operator provisions a
    key (a real store refuses the public sample key as ACMI_API_KEY), and the slack and
    github sources have the signing secrets their samples are signed with."""
    # Signed timestamps are checked against this clock (5-minute window): the Slack sample's.
    monkeypatch.setitem(
        Authenticator.__init__.__kwdefaults__, "wall_clock", lambda: SLACK_SAMPLE_SIGNED_AT + 2.0
    )
    url = redis_server.url_for(DB["handlers"])
    client = redis.Redis.from_url(url)
    client.flushdb()
    provisioning = RedisStore.from_url(url)
    register(provisioning, EXAMPLE_KEY, tenant="default", scope="admin", name="samples", now_ms=0)
    for source, secret in SAMPLE_SIGNING_SECRETS.items():
        put_config(provisioning, Keys("default", "default"), source, hmac_secret=secret)
    provisioning.close()
    env = {"ACMI_REDIS_URL": url}
    handlers = {spec.name: handler_of(spec) for spec in HTTP_FUNCTIONS}
    for handler in handlers.values():
        handler.configure(env=env)
        handler.warm()  # builds the app before any snapshot

    def invoke(name: str) -> dict[str, Any]:
        function = name.split(".", 1)[0]
        context = FakeLambdaContext(f"acmi-{function}")
        response = handlers[function](load_event(name), context)
        assert isinstance(response, dict)
        return response

    store = RedisStore.from_url(url)
    try:
        yield Harness(invoke, client, create_acmi(store, Settings()))
    finally:
        for handler in handlers.values():
            handler.configure()  # back to the process environment, built lazily
        store.close()
        client.close()


def handler_of(spec: FunctionSpec) -> LambdaFunction:
    module_name, _, attribute = spec.handler.rpartition(".")
    handler = getattr(importlib.import_module(module_name), attribute)
    assert isinstance(handler, LambdaFunction)
    return handler


def header(response: dict[str, Any], name: str) -> str | None:
    headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
    value = headers.get(name.lower())
    return None if value is None else str(value)


def json_body(response: dict[str, Any]) -> Any:
    assert response.get("isBase64Encoded") is False, response
    assert (header(response, "content-type") or "").startswith("application/json"), response
    return json.loads(response["body"])


def test_every_event_file_has_an_expectation() -> None:
    names = HTTP_EVENTS
    assert names, f"no events in {EVENTS_DIR}"
    missing = sorted(set(names) - set(EXPECTED))
    assert not missing, f"events/ files without an expected status in EXPECTED: {missing}"
    stale = sorted(set(EXPECTED) - set(names))
    assert not stale, f"EXPECTED names events/ files that do not exist: {stale}"
    for name in names:
        assert name.split(".", 1)[0] in FUNCTION_NAMES, f"{name}: must be <function>.<case>.json"
    for function in (spec.name for spec in HTTP_FUNCTIONS):
        statuses = [EXPECTED[n] for n in names if n.startswith(f"{function}.")]
        assert any(s < 300 for s in statuses), f"{function}: needs a realistic (2xx) sample"
        if function != "docs":
            assert any(s >= 400 for s in statuses), f"{function}: needs an invalid variant"


def test_every_job_has_a_scheduler_input_sample() -> None:
    for job in JOB_FUNCTIONS:
        assert any(n.startswith(f"{job}.") for n in JOB_EVENTS), f"{job}: no events/ sample"
    for name in JOB_EVENTS:
        event = load_event(name)
        # the caps are the schedule's (tests/infra/test_job_inputs.py: equal to the template's)
        fields = {"execution_id", "scheduled_time", "max", "max_tenants"}
        assert set(event) == fields, f"{name}: exactly the Input"
        uuid.UUID(event["execution_id"])  # what <aws.scheduler.execution-id> becomes
        run = JobRun.parse(name.split(".", 1)[0], event, now_ms=0)
        assert run.scheduled_ms > 0 and set(run.params) == {"max", "max_tenants"}


@pytest.mark.parametrize("name", HTTP_EVENTS)
def test_event_has_the_http_api_v2_shape(name: str) -> None:
    event = load_event(name)
    assert event["version"] == "2.0"
    context = event["requestContext"]
    method, _, route = event["routeKey"].partition(" ")
    assert context["routeKey"] == event["routeKey"]
    assert context["http"]["method"] == method
    assert context["http"]["path"] == event["rawPath"]
    assert route.startswith("/") and event["rawPath"].startswith("/")
    assert context["stage"] == "$default"
    assert context["requestId"] and context["http"]["sourceIp"]
    assert isinstance(event["rawQueryString"], str)
    assert isinstance(event["isBase64Encoded"], bool)
    assert all(key == key.lower() for key in event["headers"]), "headers must be lower-case"
    assert "body" not in event or isinstance(event["body"], str)
    if "{" in route:
        assert set(event["pathParameters"]) == {
            part[1:-1] for part in route.split("/") if part.startswith("{")
        }


@pytest.mark.parametrize("name", HTTP_EVENTS)
def test_event_file_through_the_handler(name: str, harness: Harness) -> None:
    if name not in EXPECTED:
        pytest.fail(f"{name}: no expected status in EXPECTED")
    before = harness.snapshot()
    response = harness.invoke(name)
    status = response["statusCode"]
    assert status == EXPECTED[name], f"{name}: {status} {response.get('body')}"

    if name == "docs.docs":
        assert (header(response, "content-type") or "").startswith("text/html")
        assert "swagger" in response["body"].lower()
        return
    if name == "dashboard.page":  # the page asks for the key: none in it, no CDN
        assert (header(response, "content-type") or "").startswith("text/html")
        assert 'id="key" type="password"' in response["body"]
        assert "http" not in response["body"].replace("http-equiv", "")
        assert "script-src 'self'" in (header(response, "content-security-policy") or "")
        return
    if name in MARKDOWN:
        assert (header(response, "content-type") or "").startswith("text/markdown")
        assert MARKDOWN[name] in response["body"]
        return
    body = json_body(response)

    if status >= 400:
        assert isinstance(body, dict), body
        assert isinstance(body.get("error"), str) and body["error"], body
        assert isinstance(body.get("message"), str) and body["message"], body
        assert isinstance(body.get("field"), str) and body["field"], body
        if name in EXPECTED_ERRORS:
            field, rule = EXPECTED_ERRORS[name]
            assert body["field"] == field, body
            if rule is not None:
                assert body.get("rule") == rule, body
        if status == 401:
            assert header(response, "www-authenticate") == "Bearer"
        assert "acmi_local_example" not in response["body"], "a key was echoed"
        assert harness.snapshot() == before, f"{name}: a rejected request stored something"
        return

    if name in STORED:
        entity, count = STORED[name]
        assert harness.snapshot() != before, f"{name}: nothing was stored"
        assert body["stored"] == count, body
        entities = SPREAD.get(name, (entity,) * count)
        assert [e["entity"] for e in body["events"]] == list(entities)
        for one in set(entities):
            stored_ids = [e.correlationId for e in harness.acmi.timeline.read(one)]
            answered = [e["correlationId"] for e in body["events"] if e["entity"] == one]
            assert sorted(stored_ids) == sorted(answered)
    elif name == "docs.openapi":
        assert body["openapi"].startswith("3.")
        assert "/v1/entities/{entity}/events" in body["paths"]
        assert "/v1/entities/{entity}/profile" in body["paths"]


def test_make_keeps_the_raw_newline_and_the_mapped_fields(harness: Harness) -> None:
    body = json_body(harness.invoke("ingest.make-raw-newline"))
    (event,) = body["events"]
    assert event["summary"].startswith("Call with Acme: legal review done.\nOpen:")
    assert "\tSSO add-on" in event["payload"]["notes"]
    body = json_body(harness.invoke("ingest.make"))
    (event,) = body["events"]
    assert event["source"] == "make:hubspot-deals"
    assert event["kind"] == "deal-stage-changed"
    assert event["correlationId"] == "make-4415823-deal-acme-42-negotiation"
    assert event["payload"]["amount"] == 48000


def test_gmail_push_maps_the_numeric_history_id(harness: Harness) -> None:
    body = json_body(harness.invoke("ingest.gmail-pubsub"))
    (event,) = body["events"]
    assert event["kind"] == "gmail-notification"
    assert event["payload"]["historyId"] == 9876543  # a number, as Gmail sends it
    assert event["payload"]["messageId"] == "13512638495712305"
    assert event["ts"] == 1795977725871  # the push's publishTime


def test_n8n_item_maps_event_id_and_subject(harness: Harness) -> None:
    body = json_body(harness.invoke("ingest.n8n"))
    (event,) = body["events"]
    assert event["kind"] == "ticket.created"
    assert event["correlationId"] == "ZD-18342"
    assert event["summary"] == "SSO login loops back to the sign-in page"


def test_slack_and_github_samples_map_their_senders_fields(harness: Harness) -> None:
    (slack,) = json_body(harness.invoke("ingest.slack"))["events"]
    assert slack["kind"] == "message"
    assert slack["correlationId"] == "slack-Ev08MFMKH6"
    assert slack["summary"].startswith("Acme says SSO login loops back")
    assert slack["ts"] == 1795977725000  # event_time, in ms
    assert "token" not in slack["payload"]  # Slack's verification token is never stored
    (github,) = json_body(harness.invoke("ingest.github"))["events"]
    assert github["kind"] == "issues.opened"
    assert github["correlationId"] == "github-72d3162e-cc78-11e3-81ab-4c9367dc0958"
    assert github["summary"] == (
        "acme-corp/platform#1287 issue opened by dana-ruiz: "
        "SSO login loops back to the sign-in page"
    )


def test_vapi_sample_is_one_call_on_the_callers_and_the_calls_timelines(
    harness: Harness,
) -> None:
    customer, call = json_body(harness.invoke("ingest.vapi"))["events"]
    assert (customer["entity"], call["entity"]) == SPREAD["ingest.vapi"]
    assert (
        customer["correlationId"]
        == call["correlationId"]
        == ("vapi-4f1b5c7e-93a2-4b8e-9d61-0c2f7a9e5b13:end-of-call-report")
    )
    assert customer["kind"] == "vapi.end-of-call-report"
    assert customer["summary"].startswith("Call with +14155550123 (customer-ended-call)")
    assert "transcript" in customer["payload"] and "assistant" not in customer["payload"]


@pytest.mark.parametrize("name", WEBHOOK_RETRIES)
def test_webhook_retried_three_times_stores_one_event(name: str, harness: Harness) -> None:
    first, second, third = (harness.invoke(name) for _ in range(3))
    assert first["statusCode"] == 201, first.get("body")
    assert header(first, "idempotent-replayed") is None
    # a replay answers the count and each stored event's ids, never the event data
    minimal = {
        "stored": len(json_body(first)["events"]),
        "events": [
            {k: e[k] for k in ("entity", "ts", "correlationId")} for e in json_body(first)["events"]
        ],
    }
    for retry in (second, third):
        assert retry["statusCode"] == first["statusCode"]
        assert json_body(retry) == minimal
        assert header(retry, "idempotent-replayed") == "true"
    entity, _ = STORED[name]
    for one in SPREAD.get(name, (entity,)):
        assert len(harness.acmi.timeline.read(one)) == 1


def test_invalid_events_after_valid_ones_leave_the_data_alone(harness: Harness) -> None:
    for name in ("ingest.events-single", "ingest.events-batch", "entities.put-profile"):
        assert harness.invoke(name)["statusCode"] < 300
    timeline = len(harness.acmi.timeline.read("user:mikey"))
    before = harness.snapshot()
    for name in sorted(n for n, status in EXPECTED.items() if status >= 400):
        assert harness.invoke(name)["statusCode"] == EXPECTED[name], name
    assert harness.snapshot() == before
    assert len(harness.acmi.timeline.read("user:mikey")) == timeline == 4
    profile = harness.acmi.profile.get("user:mikey")
    assert profile is not None and profile["name"] == "Mikey"


def test_entities_read_back_what_was_written(harness: Harness) -> None:
    for name in ("entities.put-profile", "entities.patch-signals", "entities.put-signal"):
        assert harness.invoke(name)["statusCode"] == 200
    assert harness.invoke("ingest.events-batch")["statusCode"] == 201
    got = json_body(harness.invoke("entities.get"))
    assert got["profile"]["tz"] == "America/New_York"
    assert got["signals"]["mood"] == "focused"
    assert got["signals"]["waiting_on"] == ["audio pass"]
    assert len(got["timeline"]) == 3
    timeline = json_body(harness.invoke("entities.timeline"))
    assert [e["correlationId"] for e in timeline["events"]] == [
        "manifesto-004",
        "manifesto-003",
        "manifesto-002",
    ]  # reverse=true
    listed = json_body(harness.invoke("entities.list"))
    assert listed["entities"] == ["user:mikey"]


def test_no_thread_is_started_per_invocation(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under Lambda one request runs at a time: store calls run inline, so an invocation
    starts no worker thread (anyio would start and stop one per request otherwise)."""
    started: list[str] = []
    original = threading.Thread.start

    def counting_start(thread: threading.Thread) -> None:
        started.append(thread.name)
        original(thread)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    for name in ("ingest.events-single", "ingest.n8n", "entities.get", "entities.patch-signals"):
        assert harness.invoke(name)["statusCode"] < 300
    assert started == []


def test_bootstrap_spawn_sample_logs_the_spawn_and_reads_the_bundle(harness: Harness) -> None:
    response = harness.invoke("bootstrap.spawn")
    body = json_body(response)
    assert body["spawn"]["session_id"] == "sess_01JDQ7W3X9"
    assert body["sections"]["spawns"] == [body["spawn"]]
    assert harness.acmi.agents.spawns("gemini-cli") == [body["spawn"]]
    assert int(header(response, "x-acmi-bundle-bytes") or 0) == len(response["body"].encode())

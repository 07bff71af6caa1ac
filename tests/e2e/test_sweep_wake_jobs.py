"""The sweep and wake functions through their real handlers (functions.sweep, functions.wake)
fed their events/ samples: exactly the Scheduler's Input, once per execution id; the wake
handler's EventBridge delivery against moto (mock_aws), read back from an SQS queue a
rule on the bus feeds."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from acmi_core import Acmi, Settings
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import WAKE
from acmi_core.jobs.deliver import DELIVERERS
from acmi_core.store.memory import MemoryStore
from functions.runtime import LambdaFunction
from functions.sweep import handler as sweep_handler
from functions.wake import EventBridgeDeliverer
from functions.wake import handler as wake_handler
from tests.kit import FakeLambdaContext, configured, load_event

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

HOUR = 3600 * 1000
BUSES = "agents,no-such-bus,acmi-wake-{tenant}"  # ACMI_WAKE_ALLOWED_BUSES
ENV = {"ACMI_DEFAULT_TENANT": "default", "ACMI_WAKE_ALLOWED_BUSES": BUSES}


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def sweep(store: MemoryStore) -> Iterator[LambdaFunction]:
    yield from configured(sweep_handler, store, ENV)


@pytest.fixture
def wake(store: MemoryStore) -> Iterator[LambdaFunction]:
    yield from configured(wake_handler, store, ENV)


def test_the_sweep_sample_through_the_handler(sweep: LambdaFunction, store: MemoryStore) -> None:
    acmi = Acmi(store)
    now = acmi.clock()
    acmi.agents.heartbeat("claude", now=now - 49 * HOUR)
    acmi.agents.heartbeat("gpt", now=now - HOUR)
    event = load_event("sweep.scheduled")
    first = sweep(dict(event), FakeLambdaContext("acmi-sweep"))
    assert first["job"] == "sweep" and first["execution_id"] == event["execution_id"]
    assert (first["stalled"], first["escalated"]) == (1, 1)
    assert acmi.signals.all("agent:claude")["status"] == "STALLED"
    assert acmi.signals.all("agent:gpt")["status"] == "ACTIVE"
    again = sweep(dict(event), FakeLambdaContext("acmi-sweep"))
    assert again["replayed"] is True and again["stalled"] == 1
    assert len(acmi.hitl.list(acmi.settings.operator).items) == 1


def test_the_wake_sample_through_the_handler(wake: LambdaFunction, store: MemoryStore) -> None:
    acmi = Acmi(store)
    acmi.profile.merge("agent:claude", {"model_id": "opus-4"})
    acmi.wake.set("claude", minute=15)
    store.execute(("ZADD", acmi.keys.wake_due(), acmi.clock() - 60_000, "agent:claude"))
    event = load_event("wake.scheduled")
    first = wake(dict(event), FakeLambdaContext("acmi-wake"))
    assert (first["woken"], first["recorded"]) == (1, 1)
    (spawn,) = acmi.agents.spawns("claude")
    assert spawn["session_id"] == f"wake-{event['execution_id']}"
    assert spawn["model_id"] == "opus-4"
    store.execute(("ZADD", acmi.keys.wake_due(), acmi.clock() - 60_000, "agent:claude"))
    again = wake(dict(event), FakeLambdaContext("acmi-wake"))
    assert again["replayed"] is True
    assert len(acmi.agents.spawns("claude")) == 1


def test_the_wake_handler_registers_eventbridge() -> None:
    assert isinstance(DELIVERERS["eventbridge"], EventBridgeDeliverer)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        events = boto3.client("events")
        sqs = boto3.client("sqs")
        events.create_event_bus(Name="agents")
        queue = sqs.create_queue(QueueName="wakes")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
        events.put_rule(
            Name="all-wakes", EventBusName="agents", EventPattern='{"source": ["acmi.wake"]}'
        )
        events.put_targets(
            Rule="all-wakes",
            EventBusName="agents",
            Targets=[{"Id": "q", "Arn": arn["Attributes"]["QueueArn"]}],
        )
        # a fresh deliverer: its boto3 client is built inside the mock
        monkeypatch.setitem(DELIVERERS, "eventbridge", EventBridgeDeliverer())
        yield sqs, queue


def test_an_eventbridge_target_gets_the_bundle(
    wake: LambdaFunction, store: MemoryStore, aws: Any
) -> None:
    sqs, queue = aws
    acmi = Acmi(store, Settings(wake_allowed_buses=BUSES))
    acmi.signals.update("agent:claude", {"current_task": "PR 42"})
    acmi.wake.set("claude", minute=15, target={"type": "eventbridge", "bus": "agents"})
    store.execute(("ZADD", acmi.keys.wake_due(), acmi.clock() - 60_000, "agent:claude"))
    result = wake({"execution_id": "eb-1"}, FakeLambdaContext("acmi-wake"))
    assert (result["delivered"], result["failed"]) == (1, 0), result["wakes"]
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    (message,) = messages
    event = json.loads(message["Body"])
    assert event["source"] == "acmi.wake" and event["detail-type"] == "acmi.wake"
    assert event["detail"]["agent"] == "agent:claude"
    assert event["detail"]["session_id"] == "wake-eb-1"
    assert "PR 42" in event["detail"]["bundle"]


@pytest.fixture
def tenant_buses(aws: Any) -> Iterator[dict[str, str]]:
    """A bus per tenant (acmi-wake-acme, acmi-wake-beta), each feeding a queue of its own."""
    sqs = aws[0]
    events = boto3.client("events")
    queues: dict[str, str] = {}
    for tenant in ("acme", "beta"):
        bus = f"acmi-wake-{tenant}"
        events.create_event_bus(Name=bus)
        queue = sqs.create_queue(QueueName=bus)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
        events.put_rule(Name="w", EventBusName=bus, EventPattern='{"source": ["acmi.wake"]}')
        events.put_targets(
            Rule="w", EventBusName=bus, Targets=[{"Id": "q", "Arn": arn["Attributes"]["QueueArn"]}]
        )
        queues[tenant] = queue
    yield queues


def test_a_tenant_wakes_only_on_the_buses_the_operator_allows_it(
    wake: LambdaFunction, store: MemoryStore, aws: Any, tenant_buses: dict[str, str]
) -> None:
    """ACMI_WAKE_ALLOWED_BUSES=...,acmi-wake-{tenant}: acme wakes on its own bus; beta can
    neither set acme's bus (422 naming target.bus) nor, by writing its profile whole as a
    write key may, have a wake put on it (refused before delivery, wake-status failed).
    Before: beta's wake went onto acme's bus."""
    sqs = aws[0]
    settings = Settings(wake_allowed_buses=BUSES)
    acme, beta = (Acmi(store, settings, tenant=t) for t in ("acme", "beta"))
    acme.wake.set("claude", minute=15, target={"type": "eventbridge", "bus": "acmi-wake-acme"})
    with pytest.raises(AcmiValidationError) as refused:
        beta.wake.set("gpt", minute=15, target={"type": "eventbridge", "bus": "acmi-wake-acme"})
    assert (refused.value.field, refused.value.rule) == ("target.bus", "allowed_bus")
    assert beta.profile.get("agent:gpt") is None
    beta.wake.set("gpt", minute=15, target={"type": "eventbridge", "bus": "acmi-wake-beta"})
    hijack = {"type": "eventbridge", "bus": "acmi-wake-acme"}
    beta.profile.set("agent:gpt", {"name": "gpt", "wake": {"minute": 15, "target": hijack}})
    past = acme.clock() - 60_000
    for client, agent in ((acme, "agent:claude"), (beta, "agent:gpt")):  # both due now
        store.execute(("ZADD", client.keys.wake_due(), past, agent))
        store.execute(("ZADD", client.keys.tenants_with(WAKE), past, client.tenant))

    result = wake({"execution_id": "eb-tenants"}, FakeLambdaContext("acmi-wake"))
    served = result["tenants"]
    assert (served["acme"]["delivered"], served["acme"]["failed"]) == (1, 0), served
    assert (served["beta"]["delivered"], served["beta"]["failed"]) == (0, 1), served
    refusal = served["beta"]["wakes"][0]["delivery"]
    assert refusal == "refused: bus acmi-wake-acme is not within ACMI_WAKE_ALLOWED_BUSES"
    got = sqs.receive_message(QueueUrl=tenant_buses["acme"], MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["detail"]["tenant"] for m in got] == ["acme"]
    assert "Messages" not in sqs.receive_message(QueueUrl=tenant_buses["beta"])
    statuses = [e.payload for e in beta.timeline.read("thread:agent-coordination")]
    assert any(p.get("status") == "failed" and p.get("detail") == refusal for p in statuses)


def test_an_eventbridge_failure_is_a_failed_delivery(
    wake: LambdaFunction, store: MemoryStore, aws: Any
) -> None:
    acmi = Acmi(store, Settings(wake_allowed_buses=BUSES))
    acmi.wake.set("claude", minute=15, target={"type": "eventbridge", "bus": "no-such-bus"})
    store.execute(("ZADD", acmi.keys.wake_due(), acmi.clock() - 60_000, "agent:claude"))
    result = wake({"execution_id": "eb-2"}, FakeLambdaContext("acmi-wake"))
    assert (result["delivered"], result["failed"]) == (0, 1)
    assert result["wakes"][0]["delivery"].startswith("failed: EventBridge")


def test_the_cli_sets_and_clears_a_wake_slot(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from acmi_core.cli import main

    agent = f"cli-{uuid.uuid4().hex[:8]}"
    monkeypatch.delenv("ACMI_WAKE_ALLOWED_BUSES", raising=False)
    assert main(["agents", "wake", agent, "--minute", "15", "--target-eventbridge", "agents"]) == 2
    assert "ACMI_WAKE_ALLOWED_BUSES, which is empty" in capsys.readouterr().err
    monkeypatch.setenv("ACMI_WAKE_ALLOWED_BUSES", "agents")
    assert main(["agents", "wake", agent, "--minute", "15", "--target-eventbridge", "agents"]) == 0
    slot = json.loads(capsys.readouterr().out)
    assert slot["agent"] == f"agent:{agent}" and slot["minute"] == 15
    assert slot["target"] == {"type": "eventbridge", "bus": "agents"}
    assert main(["agents", "wake", agent, "--minute", "75"]) == 2
    assert "minute: must be an integer from 0 to 59" in capsys.readouterr().err
    assert (
        main(["agents", "wake", agent, "--minute", "15", "--target-url", "https://a.example/"]) == 2
    )
    assert "ACMI_WAKE_ALLOWED_URLS" in capsys.readouterr().err  # none allowed here
    with_secret_env = ["--target-url", "https://a.example/", "--secret-env", "X"]
    assert main(["agents", "wake", agent, "--minute", "15", *with_secret_env]) == 2
    assert "--secret-env: is no longer a target field" in capsys.readouterr().err
    assert main(["agents", "wake", agent, "--clear"]) == 0
    assert json.loads(capsys.readouterr().out) == {"agent": agent, "wake": None}

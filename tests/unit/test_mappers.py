"""The source mappers, directly: one signature (WebhookBody -> Mapped), pure, every
rejection naming its field. Realistic bodies; the HTTP path is tested in e2e and
integration."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from acmi_core import AcmiValidationError
from acmi_core.ingest.mappers import (
    map_automation,
    map_generic,
    map_gmail,
    map_vapi,
)
from acmi_core.ingest.sources import SOURCES, source_spec
from acmi_core.ingest.webhook import WebhookBody, body_digest


def webhook(body: Any, **fields: Any) -> WebhookBody:
    raw = json.dumps(body).encode()
    return WebhookBody(
        source=fields.pop("source", "n8n"),
        body=body,
        body_sha=body_digest(raw),
        max_items=fields.pop("max_items", 100),
        **fields,
    )


def test_automation_picks_up_well_known_fields_and_keeps_the_item() -> None:
    item = {"event": "ticket.created", "id": "ZD-1", "subject": "SSO loops", "priority": "high"}
    mapped = map_automation(webhook(item, entity="ticket:zd-1"))
    (delivery,) = mapped.deliveries
    assert delivery.entity == "ticket:zd-1"
    assert delivery.event == {
        "source": "n8n",
        "kind": "ticket.created",
        "correlationId": "ZD-1",
        "summary": "SSO loops",
        "payload": item,
    }
    assert mapped.sender_id is None


def test_automation_derives_what_the_body_lacks_from_its_digest() -> None:
    body = [{"entity": "deal:a"}, {"entity": "deal:b"}]
    first, second = map_automation(webhook(body, source="make")).deliveries
    assert first.event["kind"] == "make-webhook" and first.event["summary"] == "make webhook"
    assert first.event["correlationId"].endswith("-0") and second.event["correlationId"].endswith(
        "-1"
    )
    assert (first.entity, second.entity) == ("deal:a", "deal:b")


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ([], "body", "non_empty"),
        ([{"entity": "a:b"}, 3], "body[1]", "object"),
        ({"message": "no entity anywhere"}, "body.entity", "required"),
    ],
)
def test_automation_rejections_name_the_field(body: Any, field: str, rule: str) -> None:
    with pytest.raises(AcmiValidationError) as err:
        map_automation(webhook(body))
    assert (err.value.field, err.value.rule) == (field, rule)


def test_automation_caps_items() -> None:
    with pytest.raises(AcmiValidationError) as err:
        map_automation(webhook([{"entity": "a:b"}] * 3, max_items=2))
    assert err.value.rule == "max_items"


def pubsub(data: dict[str, Any], message_id: str = "2070443601311540") -> dict[str, Any]:
    encoded = base64.b64encode(json.dumps(data).encode()).decode()
    return {
        "message": {
            "data": encoded,
            "messageId": message_id,
            "publishTime": "2026-11-29T18:42:07.1Z",
        },
        "subscription": "projects/acme/subscriptions/gmail-push",
    }


def test_gmail_maps_the_notification_and_returns_the_message_id() -> None:
    body = pubsub({"emailAddress": "Ops@Acme.example", "historyId": 9876543})
    mapped = map_gmail(webhook(body, source="gmail"))
    (delivery,) = mapped.deliveries
    assert mapped.sender_id == "2070443601311540"
    assert delivery.entity == "mailbox:ops_acme.example"
    assert delivery.event["kind"] == "gmail-notification"
    assert delivery.event["payload"]["historyId"] == 9876543
    assert delivery.event["ts"] == 1795977727100


def test_generic_maps_with_the_query_over_the_stored_mapping() -> None:
    stripe = {
        "id": "evt_1",
        "type": "invoice.paid",
        "data": {"object": {"customer": "cus_9", "description": "Pro"}},
    }
    mapped = map_generic(
        webhook(
            stripe,
            source="generic-stripe",
            configured_mapping={
                "entity": "data.object.customer",
                "kind": "=ignored",
                "summary": "data.object.description",
            },
            query={"map.category": "=customer", "map.kind": "type", "map.correlationId": "id"},
        )
    )
    (delivery,) = mapped.deliveries
    assert delivery.entity == "customer:cus_9"
    assert delivery.event["kind"] == "invoice.paid"
    assert delivery.event["summary"] == "Pro"
    assert delivery.event["correlationId"] == "evt_1"
    assert delivery.event["payload"] == stripe


@pytest.mark.parametrize(
    ("query", "field", "rule"),
    [
        ({}, "mapping", "required"),
        ({"map.colour": "x"}, "mapping.colour", "unknown"),
        ({"map.entity": "customer.id", "map.kind": "type"}, "body.customer.id", "required"),
    ],
)
def test_generic_rejections_name_the_field(query: dict[str, str], field: str, rule: str) -> None:
    with pytest.raises(AcmiValidationError) as err:
        map_generic(webhook({"type": "x"}, source="generic", query=query))
    assert (err.value.field, err.value.rule) == (field, rule)


def test_a_generic_mapping_without_summary_is_named_by_validation_not_a_sentinel() -> None:
    mapped = map_generic(webhook({"c": "a:b"}, source="generic", query={"map.entity": "c"}))
    assert "summary" not in mapped.deliveries[0].event


def test_every_source_row_has_a_working_mapper_and_a_resolvable_name() -> None:
    for spec in SOURCES:
        assert source_spec(spec.name) is spec and callable(spec.mapper)
    with pytest.raises(AcmiValidationError) as err:
        source_spec("zapier")
    assert (err.value.field, err.value.rule) == ("source", "unknown")


VAPI = Path(__file__).resolve().parents[1] / "fixtures" / "vapi"
VAPI_CALL = "vapi-call:4f1b5c7e-93a2-4b8e-9d61-0c2f7a9e5b13"


def vapi(name: str) -> Any:
    return json.loads((VAPI / f"{name}.json").read_text())


def test_vapi_end_of_call_report_goes_to_the_caller_and_the_call() -> None:
    mapped = map_vapi(webhook(vapi("end-of-call-report"), source="vapi"))
    assert [d.entity for d in mapped.deliveries] == ["vapi-customer:14155550123", VAPI_CALL]
    first, second = (d.event for d in mapped.deliveries)
    assert first == second  # one event, the same correlationId on both timelines
    assert first["kind"] == "vapi.end-of-call-report"
    assert first["correlationId"] == f"vapi-{mapped.sender_id}"
    assert mapped.sender_id == "4f1b5c7e-93a2-4b8e-9d61-0c2f7a9e5b13:end-of-call-report"
    assert first["summary"].startswith("Call with +14155550123 (customer-ended-call): ")
    payload = first["payload"]
    assert payload["transcript"].startswith("AI: Hi, this is Acme support.")
    assert payload["recording_url"].endswith("-mono.wav")
    assert payload["duration_seconds"] == 107.773 and payload["cost"] == 0.1876
    assert "assistant" not in payload and "costs" not in payload  # config stays out


def test_vapi_status_updates_and_tool_calls_each_have_their_own_sender_id() -> None:
    status = map_vapi(webhook(vapi("status-update"), source="vapi"))
    assert status.deliveries[0].event["kind"] == "vapi.status-update"
    assert status.deliveries[0].event["summary"] == "Call with +14155550123: in-progress"
    assert status.sender_id == "4f1b5c7e-93a2-4b8e-9d61-0c2f7a9e5b13:status-update:in-progress"
    tools = map_vapi(webhook(vapi("tool-calls"), source="vapi", entity="customer:acme"))
    assert [d.entity for d in tools.deliveries] == ["customer:acme", VAPI_CALL]
    event = tools.deliveries[0].event
    assert event["summary"] == "Call with +14155550123 asked for: get_status_report"
    assert event["payload"]["tool_calls"][0]["function"]["name"] == "get_status_report"
    assert tools.sender_id is not None and tools.sender_id.endswith(
        ":tool-calls:call_Vq3hYx8k2LmN5pR7sT9uW1aB"
    )


def test_vapi_web_call_without_a_number_is_the_call_timeline_only() -> None:
    body = vapi("status-update")
    del body["message"]["customer"], body["message"]["call"]["customer"]
    mapped = map_vapi(webhook(body, source="vapi"))
    assert [d.entity for d in mapped.deliveries] == [VAPI_CALL]
    assert mapped.deliveries[0].event["summary"] == "Call with a caller: in-progress"


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ([], "body.message", "object"),
        ({"message": "hi"}, "body.message", "object"),
        ({"message": {"call": {"id": "c"}}}, "body.message.type", "required"),
        (
            {"message": {"type": "speech-update", "call": {"id": "c"}}},
            "body.message.type",
            "unsupported",
        ),
        ({"message": {"type": "status-update"}}, "body.message.call", "object"),
        ({"message": {"type": "status-update", "call": {}}}, "body.message.call.id", "required"),
    ],
)
def test_vapi_refuses_what_is_not_a_mapped_server_message(body: Any, field: str, rule: str) -> None:
    with pytest.raises(AcmiValidationError) as caught:
        map_vapi(webhook(body, source="vapi"))
    assert (caught.value.field, caught.value.rule) == (field, rule)

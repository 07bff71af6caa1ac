"""The source mappers, directly: one signature (WebhookBody -> Mapped), pure, every
rejection naming its field. Realistic bodies; the HTTP path is tested in e2e and
integration."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from acmi_core import AcmiValidationError
from acmi_core.ingest.mappers import (
    map_automation,
    map_generic,
    map_gmail,
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

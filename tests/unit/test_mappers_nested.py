"""The mappers on what real senders send: Make and n8n items with their fields nested
(Make's Gmail "Watch emails" and HubSpot deal bundles, n8n's Gmail trigger and Webhook
node items), mappings for make/n8n, generic's literal category, and the Slack and GitHub
mappers. Captured shapes, trimmed to the fields that matter plus some that must not."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from acmi_core import AcmiValidationError
from acmi_core.cli.operator import map_args
from acmi_core.ingest.mappers import (
    MAX_NESTED_DEPTH,
    find_nested,
    map_automation,
    map_generic,
    map_github,
    map_gmail,
    map_slack,
)
from acmi_core.ingest.mapping import check_mapping
from acmi_core.ingest.webhook import WebhookBody, body_digest

# Make: Gmail > Watch emails, the bundle mapped whole into the HTTP module's body, with
# the scenario's own variables beside it.
MAKE_GMAIL: dict[str, Any] = {
    "email": {
        "id": "18c2f9a7b4e3d1c0",
        "threadId": "18c2f9a7b4e3d1c0",
        "labelIds": ["INBOX", "UNREAD", "CATEGORY_PERSONAL"],
        "snippet": "Hi Dana, legal signed off on the renewal terms",
        "historyId": "9876543",
        "internalDate": "1795977700000",
        "sizeEstimate": 8123,
        "subject": "Re: Platform renewal - legal review",
        "from": {"name": "Priya Natarajan", "email": "priya@acme.example"},
        "to": [{"name": "Dana Ruiz", "email": "dana@vendor.example"}],
        "date": "2026-11-29T18:41:40.000Z",
        "fullTextBody": "Hi Dana,\nlegal signed off on the renewal terms.\nPriya",
        "attachments": [],
    },
    "scenario": {"id": 4415823, "executionId": "b3f1c2a9e7d84c5f9a0e6d2b1c3f4a5e"},
}

# Make: HubSpot CRM > Watch deals, one deal bundle.
MAKE_HUBSPOT_DEAL: dict[str, Any] = {
    "event": "deal.propertyChange",
    "deal": {
        "id": "15838794561",
        "properties": {
            "dealname": "Acme Corp - Platform renewal",
            "dealstage": "contractsent",
            "amount": "48000",
            "pipeline": "default",
            "closedate": "2026-12-18T00:00:00Z",
            "hs_object_id": "15838794561",
        },
        "createdAt": "2026-10-02T14:11:09.512Z",
        "updatedAt": "2026-11-29T18:41:55.870Z",
        "archived": False,
    },
    "scenarioId": 4415823,
    "executionId": "b3f1c2a9e7d84c5f9a0e6d2b1c3f4a5e",
}

# n8n: Gmail Trigger (simplified output), sent with the HTTP Request node's {{ $json }}.
N8N_GMAIL_ITEM: dict[str, Any] = {
    "id": "18c2fa01d2e4b7c9",
    "threadId": "18c2fa01d2e4b7c9",
    "snippet": "Customers on Okta SSO land back on /login after the IdP redirect",
    "payload": {"mimeType": "multipart/alternative"},
    "sizeEstimate": 10321,
    "historyId": "9876600",
    "internalDate": "1795977712000",
    "labels": [{"id": "INBOX", "name": "INBOX"}, {"id": "UNREAD", "name": "UNREAD"}],
    "From": "Priya Natarajan <priya@acme.example>",
    "To": "support@vendor.example",
    "Subject": "SSO login loops back to the sign-in page",
}

# n8n: a Webhook node's item (Zendesk calling n8n), forwarded with the run's ids.
N8N_WEBHOOK_ITEM: dict[str, Any] = {
    "headers": {
        "host": "n8n.acme.example",
        "user-agent": "Zendesk Webhook",
        "content-type": "application/json",
        "x-zendesk-webhook-id": "01HZX4Q9M2",
    },
    "params": {},
    "query": {},
    "body": {
        "event": "ticket.created",
        "ticket": {
            "id": 18342,
            "subject": "SSO login loops back to the sign-in page",
            "status": "new",
            "requester": {"id": 903112, "email": "priya@acme.example"},
        },
    },
    "webhookUrl": "https://n8n.acme.example/webhook/zendesk",
    "executionMode": "production",
    "$execution.id": "48213",
}


def webhook(body: Any, **fields: Any) -> WebhookBody:
    raw = json.dumps(body).encode()
    return WebhookBody(
        source=fields.pop("source", "make"),
        body=body,
        body_sha=body_digest(raw),
        max_items=fields.pop("max_items", 100),
        **fields,
    )


def one(body: Any, **fields: Any) -> tuple[str, dict[str, Any]]:
    (delivery,) = map_automation(webhook(body, **fields)).deliveries
    return delivery.entity, delivery.event


# --- make / n8n: nested fields ---------------------------------------------------------


def test_make_gmail_bundle_finds_the_nested_subject_and_message_id() -> None:
    _, event = one(MAKE_GMAIL, entity="deal:acme-42")
    assert event["summary"] == "Re: Platform renewal - legal review"  # email.subject
    assert event["correlationId"] == "18c2f9a7b4e3d1c0"  # email.id, not scenario.id
    assert event["kind"] == "make-webhook"  # nothing names a kind: no guess from labels
    assert event["payload"] == MAKE_GMAIL


def test_make_hubspot_deal_finds_kind_and_deal_id_and_the_mapping_adds_a_summary() -> None:
    _, event = one(MAKE_HUBSPOT_DEAL, entity="deal:acme-42")
    assert (event["kind"], event["correlationId"]) == ("deal.propertyChange", "15838794561")
    mapping = {"summary": "deal.properties.dealname", "kind": "=deal-stage-changed"}
    _, event = one(MAKE_HUBSPOT_DEAL, entity="deal:acme-42", configured_mapping=mapping)
    assert event["summary"] == "Acme Corp - Platform renewal"
    assert event["kind"] == "deal-stage-changed"  # mapped fields win over found ones


def test_n8n_gmail_trigger_item_is_kept_whole_and_its_subject_is_the_summary() -> None:
    _, event = one(N8N_GMAIL_ITEM, source="n8n", entity="ticket:zd-18342")
    assert event["summary"] == "SSO login loops back to the sign-in page"  # "Subject"
    assert event["correlationId"] == "18c2fa01d2e4b7c9"
    # its "payload" is Gmail's MIME tree, not an event payload: the item is kept whole
    assert event["payload"] == N8N_GMAIL_ITEM


def test_n8n_webhook_node_item_reads_the_body_breadth_first() -> None:
    _, event = one(N8N_WEBHOOK_ITEM, source="n8n", entity="ticket:zd-18342")
    assert event["kind"] == "ticket.created"  # body.event
    assert event["summary"] == "SSO login loops back to the sign-in page"  # body.ticket.subject
    assert event["correlationId"] == "18342"  # body.ticket.id (before requester.id: shallower)


def test_execution_ids_make_a_correlation_id_that_differs_per_item_of_a_run() -> None:
    rows = [
        {"$execution.id": "48213", "row": {"email": "a@acme.example"}},
        {"$execution.id": "48213", "row": {"email": "b@acme.example"}},
    ]
    first, second = (one(row, source="n8n", entity="sheet:leads")[1] for row in rows)
    assert first["correlationId"].startswith("n8n-48213-")
    assert first["correlationId"] != second["correlationId"]
    indexed = [{"executionId": "run-7", "itemIndex": index, "note": "row"} for index in (0, 1)]
    ids = [one(row, source="n8n", entity="sheet:leads")[1]["correlationId"] for row in indexed]
    assert ids == ["n8n-run-7-0-0", "n8n-run-7-1-0"]


def test_make_scenario_and_execution_ids_both_name_the_run() -> None:
    item = {"scenario": {"id": 4415823, "executionId": "b3f1"}, "note": "ping"}
    _, event = one(item, entity="deal:a")
    sha = body_digest(json.dumps(item).encode())
    assert event["correlationId"] == f"make-4415823-b3f1-{sha[:16]}-0"
    assert event["summary"] == "make webhook"  # "note" is no summary name


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        # the shallower level wins, whatever the name
        ({"message": "top", "email": {"subject": "nested"}}, "top"),
        # within a level, the earlier name wins: an email's subject before its text
        ({"email": {"text": "the whole body", "subject": "Hi"}}, "Hi"),
        # within a level and a name, the earlier object
        ({"a": {"title": "first"}, "b": {"title": "second"}}, "first"),
        # at the depth bound, found; one level below it, not
        ({"a": {"b": {"c": {"title": "depth 3"}}}}, "depth 3"),
        ({"a": {"b": {"c": {"d": {"title": "depth 4"}}}}}, None),
        # lists are not entered; run objects are not the item
        ({"labels": [{"title": "a label"}]}, None),
        ({"scenario": {"name": "x", "title": "my scenario"}}, None),
        # strings must hold text; numbers count (ids often are numbers), booleans do not
        ({"title": "  ", "email": {"title": 7}}, "7"),
        ({"title": True}, None),
    ],
)
def test_find_nested_order_and_bounds(item: dict[str, Any], expected: str | None) -> None:
    assert MAX_NESTED_DEPTH == 3
    assert find_nested(item, ("summary", "subject", "title", "message", "text")) == expected


def test_a_mapped_path_that_finds_nothing_names_it_for_make_too() -> None:
    with pytest.raises(AcmiValidationError) as err:
        one(MAKE_GMAIL, entity="deal:a", configured_mapping={"summary": "email.title"})
    assert (err.value.field, err.value.rule) == ("body.email.title", "required")


def test_the_url_mapping_is_over_the_stored_one_for_make() -> None:
    _, event = one(
        MAKE_GMAIL,
        entity="deal:a",
        configured_mapping={"kind": "=email-received", "summary": "email.snippet"},
        query={"map.summary": "email.subject"},
    )
    assert (event["kind"], event["summary"]) == (
        "email-received",
        "Re: Platform renewal - legal review",
    )


def test_the_cli_map_flags_are_the_whole_mapping() -> None:
    given = ["summary=email.subject", "kind=event"]
    assert map_args(given, None) == {"summary": "email.subject", "kind": "event"}
    assert map_args(None, '{"entity": "customer.id"}') == {"entity": "customer.id"}
    assert map_args(None, None) is None
    for bad in (["summary"], ["=x"], ["summary="]):
        with pytest.raises(Exception, match="FIELD=PATH"):
            map_args(bad, None)
    with pytest.raises(Exception, match="conflicts with --mapping"):
        map_args(["kind=event"], '{"kind": "event"}')


# --- generic: one literal syntax, missing paths named ------------------------------------


def test_the_readme_generic_example_works_as_written() -> None:
    query = {
        "map.entity": "customer.id",
        "map.category": "customer",
        "map.kind": "type",
        "map.summary": "title",
    }
    body = {"type": "customer.updated", "title": "Plan changed", "customer": {"id": "cus 9/x"}}
    (delivery,) = map_generic(webhook(body, source="generic", query=query)).deliveries
    assert delivery.entity == "customer:cus_9_x"  # each unsafe run becomes one '_'
    assert (delivery.event["kind"], delivery.event["summary"]) == (
        "customer.updated",
        "Plan changed",
    )
    # the '=customer' of mappings stored before means the same name
    older = {**query, "map.category": "=customer"}
    (again,) = map_generic(webhook(body, source="generic", query=older)).deliveries
    assert again.entity == "customer:cus_9_x"


@pytest.mark.parametrize(
    ("mapped", "field"),
    [
        ({"map.correlationId": "evt.id"}, "body.evt.id"),
        ({"map.ts": "created"}, "body.created"),
    ],
)
def test_generic_mapped_correlation_and_ts_must_be_found(
    mapped: dict[str, str], field: str
) -> None:
    query = {"map.entity": "c", "map.summary": "=s", **mapped}
    with pytest.raises(AcmiValidationError) as err:
        map_generic(webhook({"c": "a:b"}, source="generic", query=query))
    assert (err.value.field, err.value.rule) == (field, "required")


def test_generic_payload_and_parent_may_be_absent() -> None:
    query = {
        "map.entity": "c",
        "map.summary": "=s",
        "map.payload": "data",
        "map.parentCorrelationId": "thread",
    }
    (delivery,) = map_generic(webhook({"c": "a:b"}, source="generic", query=query)).deliveries
    assert delivery.event["payload"] == {"c": "a:b"}
    assert "parentCorrelationId" not in delivery.event


def test_a_category_must_be_a_category_name() -> None:
    with pytest.raises(AcmiValidationError) as err:
        check_mapping({"category": "Customer Accounts"})
    assert (err.value.field, err.value.rule) == ("mapping.category", "category_format")


def test_gmail_entity_is_the_lower_cased_address_with_unsafe_runs_as_underscores() -> None:
    data = base64.b64encode(
        json.dumps({"emailAddress": "Ops+Alerts@Acme.Example", "historyId": "1"}).encode()
    ).decode()
    body = {"message": {"data": data, "messageId": "1"}, "subscription": "s"}
    (delivery,) = map_gmail(webhook(body, source="gmail")).deliveries
    assert delivery.entity == "mailbox:ops_alerts_acme.example"


# --- slack ------------------------------------------------------------------------------

SLACK_MESSAGE: dict[str, Any] = {
    "token": "XXYYZZ0123456789abcdefAB",
    "team_id": "T061EG9R6",
    "api_app_id": "A0PNCHHK2",
    "event": {
        "type": "message",
        "user": "U061F7AUR",
        "text": "Acme says SSO loops again",
        "ts": "1795977725.000200",
        "channel": "C0LAN2Q65",
        "event_ts": "1795977725.000200",
        "channel_type": "channel",
    },
    "type": "event_callback",
    "event_id": "Ev08MFMKH6",
    "event_time": 1795977725,
}


def test_slack_event_callback_maps_to_its_channel_with_the_event_id() -> None:
    mapped = map_slack(webhook(SLACK_MESSAGE, source="slack"))
    (delivery,) = mapped.deliveries
    assert mapped.sender_id == "Ev08MFMKH6" and mapped.answer is None
    assert delivery.entity == "slack-channel:C0LAN2Q65"
    assert delivery.event["kind"] == "message"
    assert delivery.event["summary"] == "Acme says SSO loops again"
    assert delivery.event["correlationId"] == "slack-Ev08MFMKH6"
    assert delivery.event["ts"] == 1795977725000
    assert "token" not in delivery.event["payload"]
    assert delivery.event["payload"]["event"] == SLACK_MESSAGE["event"]


def test_slack_reaction_has_no_text_and_its_channel_in_the_item() -> None:
    body = {
        **SLACK_MESSAGE,
        "event": {
            "type": "reaction_added",
            "user": "U061F7AUR",
            "reaction": "eyes",
            "item": {"type": "message", "channel": "C0LAN2Q65", "ts": "1795977725.000200"},
            "item_user": "U0G9QF9C6",
            "event_ts": "1795977730.000300",
        },
    }
    (delivery,) = map_slack(webhook(body, source="slack")).deliveries
    assert delivery.entity == "slack-channel:C0LAN2Q65"
    assert delivery.event["summary"] == "Slack reaction_added by U061F7AUR in C0LAN2Q65"


def test_slack_url_verification_is_answered_and_maps_nothing() -> None:
    body = {
        "token": "t",
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        "type": "url_verification",
    }
    mapped = map_slack(webhook(body, source="slack"))
    assert mapped.deliveries == []
    assert mapped.answer == {"challenge": body["challenge"]}


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ([], "body", "object"),
        ({"type": "app_rate_limited"}, "body.type", "unsupported"),
        ({"type": "url_verification"}, "body.challenge", "required"),
        ({**SLACK_MESSAGE, "event_id": ""}, "body.event_id", "required"),
        ({**SLACK_MESSAGE, "event": "x"}, "body.event", "object"),
        ({**SLACK_MESSAGE, "event": {"type": "team_join"}}, "body.event.channel", "required"),
    ],
)
def test_slack_rejections_name_the_field(body: Any, field: str, rule: str) -> None:
    with pytest.raises(AcmiValidationError) as err:
        map_slack(webhook(body, source="slack"))
    assert (err.value.field, err.value.rule) == (field, rule)


# --- github -----------------------------------------------------------------------------

GITHUB_HEADERS = {
    "x-github-event": "pull_request",
    "x-github-delivery": "0b989ba4-242f-11e5-81e1-c7b6aee8dc37",
}
GITHUB_PR: dict[str, Any] = {
    "action": "closed",
    "number": 512,
    "pull_request": {
        "number": 512,
        "title": "Fix SSO redirect loop",
        "state": "closed",
        "merged": True,
        "user": {"login": "dana-ruiz"},
    },
    "repository": {"full_name": "Acme-Corp/platform", "name": "platform"},
    "organization": {"login": "Acme-Corp"},
    "sender": {"login": "dana-ruiz"},
}


def test_github_pull_request_maps_the_event_header_and_the_repository() -> None:
    mapped = map_github(webhook(GITHUB_PR, source="github", headers=GITHUB_HEADERS))
    (delivery,) = mapped.deliveries
    assert mapped.sender_id == "0b989ba4-242f-11e5-81e1-c7b6aee8dc37"
    assert delivery.entity == "github-repo:acme-corp_platform"
    assert delivery.event["kind"] == "pull_request.closed"
    assert delivery.event["correlationId"] == "github-0b989ba4-242f-11e5-81e1-c7b6aee8dc37"
    assert delivery.event["summary"] == (
        "Acme-Corp/platform#512 PR closed by dana-ruiz: Fix SSO redirect loop"
    )


def test_github_push_and_org_events() -> None:
    push = {
        "ref": "refs/heads/main",
        "commits": [{"id": "a"}, {"id": "b"}],
        "head_commit": {"message": "Fix SSO loop\n\nLong description"},
        "repository": {"full_name": "acme-corp/platform"},
        "sender": {"login": "dana-ruiz"},
    }
    headers = {**GITHUB_HEADERS, "x-github-event": "push"}
    (delivery,) = map_github(webhook(push, source="github", headers=headers)).deliveries
    assert delivery.event["kind"] == "push"
    assert delivery.event["summary"] == (
        "2 commits pushed to refs/heads/main in acme-corp/platform by dana-ruiz: Fix SSO loop"
    )
    member = {"action": "member_added", "organization": {"login": "acme-corp"}}
    headers = {**GITHUB_HEADERS, "x-github-event": "organization"}
    (delivery,) = map_github(webhook(member, source="github", headers=headers)).deliveries
    assert delivery.entity == "github-org:acme-corp"
    assert delivery.event["summary"] == "organization member_added in acme-corp"


@pytest.mark.parametrize(
    ("headers", "body", "field"),
    [
        ({"x-github-delivery": "d"}, GITHUB_PR, "X-GitHub-Event"),
        ({"x-github-event": "issues"}, GITHUB_PR, "X-GitHub-Delivery"),
        (GITHUB_HEADERS, [1], "body"),
        (GITHUB_HEADERS, {"action": "created"}, "body.repository"),
    ],
)
def test_github_rejections_name_the_field(headers: dict[str, str], body: Any, field: str) -> None:
    with pytest.raises(AcmiValidationError) as err:
        map_github(webhook(body, source="github", headers=headers))
    assert err.value.field == field


@pytest.mark.parametrize(
    ("item", "summary"),
    [
        # n8n's Webhook node, as a CRM posts it: the event's name and what it is about
        (
            {"event": "deal.updated", "deal": {"name": "Acme renewal", "stage": "won"}},
            "deal.updated: Acme renewal",
        ),
        (
            {"type": "contact.created", "contact": {"email": "priya@acme.example"}},
            "contact.created: priya@acme.example",
        ),
        (
            {"deal": {"properties": {"dealname": "Acme Corp - Platform renewal"}}},
            "Acme Corp - Platform renewal",
        ),
        ({"event": "ping"}, "ping"),
        ({"note": "row"}, "n8n webhook"),  # nothing says what: the sender's name, as before
        # a summary field still wins over a derived one
        (
            {"event": "deal.updated", "deal": {"name": "Acme"}, "title": "Renewal signed"},
            "Renewal signed",
        ),
    ],
)
def test_an_item_without_a_summary_field_is_summarised_by_its_event_and_name(
    item: dict[str, Any], summary: str
) -> None:
    _, event = one(item, source="n8n", entity="deal:acme")
    assert event["summary"] == summary

"""Source mappers: a webhook body in, Comms v1.1 events (each with its entity) out.

Every mapper has one signature, ``(WebhookBody) -> Mapped``, and is a pure function: no
store, no clock. The events it returns are validated by the timeline like any other
(``acmi_core.base.model.parse_event``). Which mapper serves which source is the source table's
business (``acmi_core.ingest.sources``). The types a mapper takes and gives, and the
helpers every mapper shares, are ``ingest/webhook.py``'s; the mapping language (make, n8n,
generic), ``ingest/mapping.py``'s.

- make / n8n: a JSON object (or a list of them) describing one thing that happened;
  a stored mapping wins, then well-known field names are picked up, breadth-first into
  nested objects (``find_nested``); the whole body is kept as payload.
- gmail: a Google Pub/Sub push envelope whose ``message.data`` is the base64 Gmail
  notification ``{"emailAddress", "historyId"}``.
- generic: any JSON object plus a mapping (field -> dotted path; ``category`` is a name;
  other constants are ``=literal``).
- slack: a Slack Events API ``event_callback`` (or the ``url_verification`` handshake).
- github: a GitHub webhook, with its ``X-GitHub-Event`` and ``X-GitHub-Delivery`` headers.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.ingest.mapping import MISSING, MappedItem, generic_mapping, merged_mapping
from acmi_core.ingest.webhook import (
    ENTITY_UNSAFE,
    Delivery,
    Mapped,
    WebhookBody,
    body_items,
    item_entity,
    sanitized,
    truncate,
)

# Field names senders commonly use, in order of preference. Subjects and titles come
# before message/text: in an email or a ticket, "text" is the whole body.
KIND_FIELDS: Final = ("kind", "event", "type", "action")
SUMMARY_FIELDS: Final = (
    "summary",
    "subject",
    "Subject",  # n8n's Gmail trigger, simplified output
    "title",
    "message",
    "text",
    "description",
    "snippet",
)
# When no summary field is given: what the item is about (a deal's or a contact's name),
# found the same way, joined to the event's name ("deal.updated: Acme renewal"), so a
# timeline line says something rather than "n8n webhook". An email address last: a contact
# with no name is still someone.
NAME_FIELDS: Final = (
    "name",
    "displayName",
    "display_name",
    "fullName",
    "full_name",
    "dealname",  # HubSpot's deal property
    "email",
)
# The item's own id. An execution id is no such id: n8n and Make share it across the
# items of one run (it only ever makes part of a correlationId, below).
CORRELATION_FIELDS: Final = ("correlationId", "correlation_id", "id")
EXECUTION_FIELDS: Final = ("executionId", "execution_id", "$execution.id")
SCENARIO_FIELDS: Final = ("scenarioId", "scenario_id")
ITEM_INDEX_FIELDS: Final = ("itemIndex", "$itemIndex", "item_index")
# Objects describing the run, not the item (Make's scenario, n8n's $execution and
# $workflow): their ids and names are never the item's kind, summary or id.
RUN_OBJECTS: Final = frozenset({"scenario", "execution", "$execution", "workflow", "$workflow"})
# How deep the well-known names are looked for: objects up to this many levels below
# the item (email.subject is 1, body.deal.properties.dealname is 3); lists are not
# entered (their items are other things: labels, attachments, line items).
MAX_NESTED_DEPTH: Final = 3


def _first_str(data: dict[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = data.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


Levels = list[list[dict[str, Any]]]


def nested_levels(item: dict[str, Any]) -> Levels:
    """The item, then the objects one level down, and so on to MAX_NESTED_DEPTH, each
    level in body order. Lists and RUN_OBJECTS are not entered. Built once per item for
    all the names looked for: the cost is one pass over the objects, bounded by the body."""
    levels = [[item]]
    while len(levels) <= MAX_NESTED_DEPTH:
        below = [
            value
            for data in levels[-1]
            for key, value in data.items()
            if isinstance(value, dict) and key not in RUN_OBJECTS
        ]
        if not below:
            break
        levels.append(below)
    return levels


def find_nested(
    item: dict[str, Any], names: tuple[str, ...], levels: Levels | None = None
) -> str | None:
    """The first of ``names`` holding a non-empty string (or an integer), breadth-first
    (``nested_levels``): the shallower level wins, within a level the earlier name, then
    the earlier object in the body."""
    rank = {name: position for position, name in enumerate(names)}
    for level in levels if levels is not None else nested_levels(item):
        best: tuple[int, str] | None = None
        for data in level:
            # Most objects hold none of the names: one C-level pass over their keys.
            for name in rank.keys() & data.keys():
                found = _first_str(data, (name,))
                if found is not None and (best is None or rank[name] < best[0]):
                    best = (rank[name], found)
        if best is not None:
            return best[1]
    return None


def _run_ids(item: dict[str, Any]) -> tuple[str | None, str | None]:
    """(scenario id, execution id) where the sender gives them: top-level fields
    (``scenarioId``, ``executionId``, ``$execution.id``), or Make's ``scenario`` object
    (``id``, ``executionId``) and n8n's ``execution`` / ``$execution`` object (``id``)."""
    scenario = _first_str(item, SCENARIO_FIELDS)
    execution = _first_str(item, EXECUTION_FIELDS)
    make = item.get("scenario")
    if isinstance(make, dict):
        scenario = scenario or _first_str(make, ("id",))
        execution = execution or _first_str(make, EXECUTION_FIELDS)
    for name in ("$execution", "execution"):
        n8n = item.get(name)
        if execution is None and isinstance(n8n, dict):
            execution = _first_str(n8n, ("id",))
    return scenario, execution


def derived_summary(item: dict[str, Any], levels: Levels, kind: str | None, source: str) -> str:
    """A summary for an item that has no summary field: its event name (``kind``, as
    given or found) and what it is about (``NAME_FIELDS``), each when there is one, else
    ``<source> webhook``."""
    parts = [part for part in (kind, find_nested(item, NAME_FIELDS, levels)) if part]
    return ": ".join(parts) or f"{source} webhook"


def _automation_correlation(
    item: dict[str, Any], levels: Levels, source: str, sha: str, index: int
) -> str:
    """The item's own id; else its run's ids plus what tells the run's items apart (the
    sender's item index, else the body's digest: the items of a run differ in body);
    else the body's digest alone."""
    own = find_nested(item, CORRELATION_FIELDS, levels)
    if own is not None:
        return own
    scenario, execution = _run_ids(item)
    if execution is not None:
        run = f"{scenario}-{execution}" if scenario else execution
        per_item = _first_str(item, ITEM_INDEX_FIELDS) or sha[:16]
        return f"{source}-{run}-{per_item}-{index}"
    return f"{source}-{sha[:16]}-{index}"


def _automation_payload(item: dict[str, Any]) -> Any:
    """An item written as an event (a ``kind`` or ``summary`` field) carries its payload
    in ``payload``; any other item is the payload whole: a ``payload`` field there is the
    sender's own (the MIME tree of n8n's Gmail trigger item), not ours."""
    if "payload" in item and ("kind" in item or "summary" in item):
        return item["payload"]
    return item


def map_automation(webhook: WebhookBody) -> Mapped:
    """Make and n8n: one request per item (a list is accepted too). A mapping (stored
    with the source, ``map.<field>=`` in the URL over it) wins; else well-known names
    are found by ``find_nested``; the whole item is kept as payload."""
    source, sha = webhook.source, webhook.body_sha
    mapping = merged_mapping(webhook)
    deliveries = []
    for index, (where, item) in enumerate(body_items(webhook)):
        mapped = MappedItem(mapping, item, where)
        levels = nested_levels(item)
        kind = mapped.text("kind") or find_nested(item, KIND_FIELDS, levels)
        summary = mapped.get("summary")
        if summary is MISSING:
            summary = find_nested(item, SUMMARY_FIELDS, levels) or derived_summary(
                item, levels, kind, source
            )
        payload = mapped.get("payload")
        event: dict[str, Any] = {
            "source": item["source"] if isinstance(item.get("source"), str) else source,
            "kind": kind or f"{source}-webhook",
            "correlationId": mapped.text("correlationId")
            or _automation_correlation(item, levels, source, sha, index),
            # not a string: kept, so validation names the rule
            "summary": truncate(summary) if isinstance(summary, str) else summary,
            "payload": _automation_payload(item) if payload is MISSING else payload,
        }
        parent = mapped.get("parentCorrelationId")
        parent = item.get("parentCorrelationId") if parent is MISSING else parent
        if isinstance(parent, str):
            event["parentCorrelationId"] = parent
        ts = mapped.get("ts")
        if ts is not MISSING:
            event["ts"] = ts
        elif "ts" in item:
            event["ts"] = item["ts"]  # validated (finite, ms) with the event
        explicit = webhook.entity or mapped.entity()
        entity = item_entity(explicit, item, webhook.default_entity, f"{where}.entity")
        deliveries.append(Delivery(entity, event))
    return Mapped(deliveries)


@dataclass(frozen=True)
class PubSubPush:
    message_id: str
    data: dict[str, Any]
    publish_time_ms: int | None
    subscription: str | None


def parse_pubsub_push(body: Any) -> PubSubPush:
    """A Google Pub/Sub push envelope: {"message": {"data", "messageId", ...}, "subscription"}."""
    if not isinstance(body, dict) or not isinstance(body.get("message"), dict):
        raise AcmiValidationError("body.message", "required", "must be a Pub/Sub push envelope")
    message = body["message"]
    message_id = message.get("messageId", message.get("message_id"))
    if not isinstance(message_id, str) or not message_id:
        raise AcmiValidationError("body.message.messageId", "required", "must be a string")
    raw = message.get("data")
    if not isinstance(raw, str):
        raise AcmiValidationError("body.message.data", "required", "must be base64 text")
    try:
        data = json.loads(base64.b64decode(raw, validate=True).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError, RecursionError):
        # RecursionError: data nested ~1,000 deep (the body's depth bound cannot see
        # inside base64); ValueError covers integers past Python's 4,300 digits too.
        raise AcmiValidationError(
            "body.message.data", "base64_json", "must be base64 of a UTF-8 JSON object"
        ) from None
    if not isinstance(data, dict):
        raise AcmiValidationError("body.message.data", "object", "must decode to a JSON object")
    publish_ms = None
    publish = message.get("publishTime", message.get("publish_time"))
    if isinstance(publish, str):
        try:
            publish_ms = int(
                datetime.fromisoformat(publish.replace("Z", "+00:00")).timestamp() * 1000
            )
        except ValueError:
            raise AcmiValidationError(
                "body.message.publishTime", "timestamp", "must be an RFC 3339 time"
            ) from None
    subscription = body.get("subscription")
    return PubSubPush(
        message_id, data, publish_ms, subscription if isinstance(subscription, str) else None
    )


def map_gmail(webhook: WebhookBody) -> Mapped:
    """A Gmail watch notification delivered by a Pub/Sub push: one event per push, for
    the mailbox (or the entity named in the URL or the source's config)."""
    push = parse_pubsub_push(webhook.body)
    email = push.data.get("emailAddress")
    history_id = push.data.get("historyId")
    if not isinstance(email, str) or "@" not in email:
        raise AcmiValidationError(
            "body.message.data.emailAddress", "required", "must be the mailbox's address"
        )
    if isinstance(history_id, bool) or not isinstance(history_id, int | str):
        raise AcmiValidationError(
            "body.message.data.historyId", "required", "must be a number or numeric string"
        )
    mailbox = ENTITY_UNSAFE.sub("_", email.lower())
    event: dict[str, Any] = {
        "source": webhook.source,
        "kind": "gmail-notification",
        "correlationId": f"gmail-{mailbox}-{history_id}",
        "summary": truncate(f"Gmail mailbox {email} changed (historyId {history_id})"),
        "payload": {
            "emailAddress": email,
            "historyId": history_id,
            "messageId": push.message_id,
            "subscription": push.subscription,
        },
    }
    if push.publish_time_ms is not None:
        event["ts"] = push.publish_time_ms
    entity = webhook.entity or webhook.default_entity or f"mailbox:{mailbox}"
    return Mapped([Delivery(entity, event)], sender_id=push.message_id)


def map_generic(webhook: WebhookBody) -> Mapped:
    """Any JSON object(s), with a mapping of event fields to dotted paths ('=literal' for
    a constant; ``category`` is always a name). ``entity`` may map to a bare id when
    ``category`` is mapped too."""
    mapping = generic_mapping(webhook)
    source, sha = webhook.source, webhook.body_sha
    deliveries = []
    for index, (where, item) in enumerate(body_items(webhook)):
        mapped = MappedItem(mapping, item, where)
        kind, summary, payload = mapped.get("kind"), mapped.get("summary"), mapped.get("payload")
        event: dict[str, Any] = {
            "source": source,
            "kind": kind if isinstance(kind, str) else f"{source}-webhook",
            "correlationId": mapped.text("correlationId") or f"{source}-{sha[:16]}-{index}",
            "payload": item if payload is MISSING else payload,
        }
        if summary is not MISSING:  # not a string: kept, so validation names the rule
            event["summary"] = truncate(summary) if isinstance(summary, str) else summary
        parent = mapped.get("parentCorrelationId")
        if isinstance(parent, str):
            event["parentCorrelationId"] = parent
        ts = mapped.get("ts")
        if ts is not MISSING:
            event["ts"] = ts
        explicit = webhook.entity or mapped.entity()
        entity = item_entity(explicit, {}, webhook.default_entity, f"{where}.entity")
        deliveries.append(Delivery(entity, event))
    return Mapped(deliveries)


def _one_event(
    webhook: WebhookBody,
    event: dict[str, Any],
    sender_id: str,
    named: tuple[tuple[str, str | None], ...],
    lacking: tuple[str, str],
    *,
    keep_case: bool = False,
) -> Mapped:
    """One event for the entity the URL or the source's config names, else the first of
    ``named`` (category, the id the body gives, if any) as ``<category>:<sanitized id>``
    (``sanitized``'s ``keep_case``); ``lacking``: the field and what the body lacks when
    it names none."""
    fallback = next(
        (f"{category}:{sanitized(id_, keep_case=keep_case)}" for category, id_ in named if id_),
        None,
    )
    entity = webhook.entity or webhook.default_entity or fallback
    if entity is None:
        field, lacks = lacking
        raise AcmiValidationError(
            field,
            "required",
            f"{lacks}: give ?entity=<category>:<id> or configure the source's entity",
        )
    return Mapped([Delivery(entity, event)], sender_id=sender_id)


# --- Slack Events API ---------------------------------------------------------------------


def _required_str(data: dict[str, Any], name: str, where: str, what: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise AcmiValidationError(f"{where}.{name}", "required", f"must be {what}")
    return value


def map_slack(webhook: WebhookBody) -> Mapped:
    """A Slack Events API request: ``url_verification`` is answered with its challenge;
    an ``event_callback`` is one event on its channel (``slack-channel:<channel id>``),
    its ``event_id`` the sender's id (Slack retries with the same one)."""
    body = webhook.body
    if not isinstance(body, dict):
        raise AcmiValidationError("body", "object", "must be a Slack Events API JSON object")
    kind = body.get("type")
    if kind == "url_verification":
        return Mapped([], answer={"challenge": _required_str(body, "challenge", "body", "text")})
    if kind != "event_callback":
        raise AcmiValidationError(
            "body.type", "unsupported", "must be event_callback or url_verification"
        )
    event_id = _required_str(body, "event_id", "body", "Slack's event id")
    event = body.get("event")
    if not isinstance(event, dict):
        raise AcmiValidationError("body.event", "object", "must be the Slack event object")
    event_type = _required_str(event, "type", "body.event", "the event's type")
    subtype, user = event.get("subtype"), event.get("user")
    item = event.get("item")
    channel = event.get("channel")
    if not isinstance(channel, str) and isinstance(item, dict):
        channel = item.get("channel")  # reaction_added / reaction_removed
    channel = channel if isinstance(channel, str) and channel else None
    user = user if isinstance(user, str) and user else None
    text = event.get("text")
    where = f" in {channel}" if channel else ""
    by = f" by {user}" if user else ""
    summary = text.strip() if isinstance(text, str) and text.strip() else ""
    out: dict[str, Any] = {
        "source": webhook.source,
        "kind": f"{event_type}.{subtype}" if isinstance(subtype, str) and subtype else event_type,
        "correlationId": f"slack-{event_id}",
        "summary": truncate(summary or f"Slack {event_type}{by}{where}"),
        # The deprecated verification token is a credential: never stored.
        "payload": {k: v for k, v in body.items() if k != "token"},
    }
    event_time = body.get("event_time")
    if isinstance(event_time, int) and not isinstance(event_time, bool):
        out["ts"] = event_time * 1000  # Slack sends unix seconds
    named = (("slack-channel", channel), ("slack-user", user))
    lacking = ("body.event.channel", "the event names no channel or user")
    # Slack's ids keep their case: `acmi get slack-channel C0LAN2Q65` is what a user types
    return _one_event(webhook, out, event_id, named, lacking, keep_case=True)


# --- GitHub webhooks ----------------------------------------------------------------------

GITHUB_EVENT_HEADER: Final = "X-GitHub-Event"
GITHUB_DELIVERY_HEADER: Final = "X-GitHub-Delivery"


def _login(data: Any) -> str | None:
    login = data.get("login") if isinstance(data, dict) else None
    return login if isinstance(login, str) and login else None


def _github_summary(event: str, action: str | None, body: dict[str, Any], repo: str) -> str:
    sender = _login(body.get("sender"))
    by = f" by {sender}" if sender else ""
    doing = f" {action}" if action else ""
    for name, label in (("pull_request", "PR"), ("issue", "issue")):
        thing = body.get(name)
        if isinstance(thing, dict) and isinstance(thing.get("number"), int):
            title = thing.get("title") if isinstance(thing.get("title"), str) else ""
            return f"{repo}#{thing['number']} {label}{doing}{by}: {title}".rstrip(": ")
    if event == "push":
        commits = body.get("commits")
        count = len(commits) if isinstance(commits, list) else 0
        ref = body.get("ref") if isinstance(body.get("ref"), str) else "?"
        head = body.get("head_commit")
        message = head.get("message") if isinstance(head, dict) else None
        first = message.splitlines()[0] if isinstance(message, str) and message else ""
        pushed = f"{count} commit{'s' if count != 1 else ''} pushed to {ref} in {repo}{by}"
        return f"{pushed}: {first}" if first else pushed
    return f"{event}{doing} in {repo}{by}"


def map_github(webhook: WebhookBody) -> Mapped:
    """A GitHub webhook: ``X-GitHub-Event`` (with the body's ``action``) is the kind, the
    ``X-GitHub-Delivery`` GUID the sender's id (a redelivery keeps it), the repository
    the entity (``github-repo:<owner>_<name>``, else the organization's
    ``github-org:<login>``)."""
    event = webhook.headers.get(GITHUB_EVENT_HEADER.lower())
    delivery = webhook.headers.get(GITHUB_DELIVERY_HEADER.lower())
    if not event:
        raise AcmiValidationError(GITHUB_EVENT_HEADER, "required", "GitHub's event name")
    if not delivery:
        raise AcmiValidationError(GITHUB_DELIVERY_HEADER, "required", "GitHub's delivery id")
    body = webhook.body
    if not isinstance(body, dict):
        raise AcmiValidationError("body", "object", "must be a GitHub webhook JSON object")
    action = body.get("action") if isinstance(body.get("action"), str) else None
    repository = body.get("repository")
    full_name = repository.get("full_name") if isinstance(repository, dict) else None
    full_name = full_name if isinstance(full_name, str) and full_name else None
    org = _login(body.get("organization"))
    out: dict[str, Any] = {
        "source": webhook.source,
        "kind": f"{event}.{action}" if action else event,
        "correlationId": f"github-{delivery}",
        "summary": truncate(_github_summary(event, action, body, full_name or org or "GitHub")),
        "payload": body,
    }
    named = (("github-repo", full_name), ("github-org", org))
    lacking = ("body.repository", "the delivery names no repository or organization")
    return _one_event(webhook, out, delivery, named, lacking)


# The Vapi server messages mapped (an assistant's serverMessages); a Vapi assistant sends
# others only if configured to, and each is refused by name rather than stored as noise.
VAPI_MESSAGES: Final = ("end-of-call-report", "status-update", "tool-calls")


def _vapi_text(data: Any, name: str) -> str | None:
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


def _vapi_summary(kind: str, message: dict[str, Any], who: str) -> str:
    if kind == "end-of-call-report":
        analysis = message.get("analysis")
        said = _vapi_text(analysis, "summary")
        reason = _vapi_text(message, "endedReason") or "ended"
        return f"Call with {who} ({reason}): {said}" if said else f"Call with {who}: {reason}"
    if kind == "status-update":
        status = _vapi_text(message, "status") or "unknown"
        ended = _vapi_text(message, "endedReason")
        return f"Call with {who}: {status}" + (f" ({ended})" if ended else "")
    calls = message.get("toolCallList")
    names = [
        name
        for call in (calls if isinstance(calls, list) else [])
        if (name := _vapi_text(call.get("function") if isinstance(call, dict) else None, "name"))
    ]
    return f"Call with {who} asked for: {', '.join(names) or 'a tool'}"


def map_vapi(webhook: WebhookBody) -> Mapped:
    """A Vapi server message (``{"message": {...}}``): an ``end-of-call-report``,
    ``status-update`` or ``tool-calls`` is one event, on the caller's timeline
    (``?entity=``, the source's entity, else ``vapi-customer:<number>``) and on the
    call's (``vapi-call:<call id>``), the same correlationId on both. The sender's id is
    the call id with the message type (and the status, or the first tool call's id): Vapi
    may deliver a message twice, and the second stores nothing. Only the call's own fields
    are kept (ids, customer number, status, ended reason, analysis, transcript, recording,
    cost, tool calls); the assistant's configuration that rides along is not."""
    body = webhook.body
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, dict):
        raise AcmiValidationError("body.message", "object", "must be a Vapi server message")
    kind = _required_str(message, "type", "body.message", "the server message's type")
    if kind not in VAPI_MESSAGES:
        raise AcmiValidationError(
            "body.message.type", "unsupported", f"must be one of {', '.join(VAPI_MESSAGES)}"
        )
    call = message.get("call")
    if not isinstance(call, dict):
        raise AcmiValidationError("body.message.call", "object", "must be the Vapi call object")
    call_id = _required_str(call, "id", "body.message.call", "the call's id")
    customer = message.get("customer") or call.get("customer")
    number = _vapi_text(customer, "number")
    caller: str | None = webhook.entity or webhook.default_entity
    if caller is None and number:
        caller = f"vapi-customer:{sanitized(number.lstrip('+'))}"
    given = message.get("artifact")
    artifact: dict[str, Any] = given if isinstance(given, dict) else {}
    tool_calls = message.get("toolCallList")
    detail: dict[str, Any] = {
        "call_id": call_id,
        "call_type": call.get("type"),
        "customer_number": number,
        "status": message.get("status"),
        "ended_reason": message.get("endedReason"),
        "analysis": message.get("analysis"),
        "transcript": artifact.get("transcript") or message.get("transcript"),
        "recording_url": artifact.get("recordingUrl") or message.get("recordingUrl"),
        "duration_seconds": message.get("durationSeconds"),
        "cost": message.get("cost"),
        "tool_calls": tool_calls if isinstance(tool_calls, list) else None,
    }
    discriminator = kind
    if kind == "status-update":
        discriminator += f":{_vapi_text(message, 'status') or ''}"
    elif kind == "tool-calls" and isinstance(tool_calls, list) and tool_calls:
        discriminator += f":{_vapi_text(tool_calls[0], 'id') or ''}"
    sender_id = f"{call_id}:{discriminator}"
    event = {
        "source": webhook.source,
        "kind": f"vapi.{kind}",
        "correlationId": f"vapi-{sender_id}",
        "summary": truncate(_vapi_summary(kind, message, number or "a caller")),
        "payload": {k: v for k, v in detail.items() if v is not None},
    }
    call_entity = f"vapi-call:{sanitized(call_id)}"
    entities = [caller, call_entity] if caller and caller != call_entity else [call_entity]
    return Mapped([Delivery(entity, event) for entity in entities], sender_id=sender_id)

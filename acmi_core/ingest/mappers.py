"""Source mappers: a webhook body in, Comms v1.1 events (each with its entity) out.

Pure functions: no store, no clock (``now_ms`` is passed in). The events they return are
validated by the timeline like any other (``acmi_core.model.parse_event``).

- make / n8n: a JSON object (or a list of them) describing one thing that happened;
  well-known field names are picked up (below), the whole body is kept as payload.
- gmail: a Google Pub/Sub push envelope whose ``message.data`` is the base64 Gmail
  notification ``{"emailAddress", "historyId"}``.
- generic: any JSON object plus a mapping (field -> dotted path, or ``=literal``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from acmi_core.errors import AcmiValidationError
from acmi_core.model import MAX_SUMMARY_LEN

# Field names senders commonly use, in order of preference.
KIND_FIELDS: Final = ("kind", "event", "type", "action")
SUMMARY_FIELDS: Final = ("summary", "message", "text", "subject", "title", "description")
CORRELATION_FIELDS: Final = ("correlationId", "correlation_id", "id", "executionId")
ENTITY_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Delivery:
    """One event for one entity, before validation."""

    entity: str
    event: dict[str, Any]


def truncate(text: str, limit: int = MAX_SUMMARY_LEN) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def _first_str(data: dict[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = data.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def _objects(body: Any, field: str, max_items: int) -> list[dict[str, Any]]:
    items = body if isinstance(body, list) else [body]
    if not items:
        raise AcmiValidationError(field, "non_empty", "must hold at least one object")
    if len(items) > max_items:
        raise AcmiValidationError(field, "max_items", f"at most {max_items} items per request")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            where = f"{field}[{index}]" if isinstance(body, list) else field
            raise AcmiValidationError(where, "object", "must be a JSON object")
    return items


def _entity(explicit: str | None, item: dict[str, Any], default: str | None, field: str) -> str:
    entity = explicit or (item.get("entity") if isinstance(item.get("entity"), str) else None)
    entity = entity or default
    if not entity:
        raise AcmiValidationError(
            field,
            "required",
            "name the entity: ?entity=<category>:<id>, an 'entity' field, or the source's "
            "configured entity",
        )
    return entity


def map_automation(
    source: str,
    body: Any,
    *,
    entity: str | None,
    default_entity: str | None,
    body_sha: str,
    max_items: int,
) -> list[Delivery]:
    """Make and n8n: one request per item (a list is accepted too)."""
    items = _objects(body, "body", max_items)
    deliveries = []
    for index, item in enumerate(items):
        where = f"body[{index}]" if isinstance(body, list) else "body"
        event: dict[str, Any] = {
            "source": item["source"] if isinstance(item.get("source"), str) else source,
            "kind": _first_str(item, KIND_FIELDS) or f"{source}-webhook",
            "correlationId": _first_str(item, CORRELATION_FIELDS)
            or f"{source}-{body_sha[:16]}-{index}",
            "summary": truncate(_first_str(item, SUMMARY_FIELDS) or f"{source} webhook"),
            "payload": item.get("payload", item),
        }
        if isinstance(item.get("parentCorrelationId"), str):
            event["parentCorrelationId"] = item["parentCorrelationId"]
        if "ts" in item:
            event["ts"] = item["ts"]  # validated (finite, ms) with the event
        deliveries.append(Delivery(_entity(entity, item, default_entity, f"{where}.entity"), event))
    return deliveries


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
    except (binascii.Error, UnicodeDecodeError, ValueError):
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


def map_gmail(
    push: PubSubPush, *, source: str, entity: str | None, default_entity: str | None
) -> list[Delivery]:
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
        "source": source,
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
    return [Delivery(entity or default_entity or f"mailbox:{mailbox}", event)]


_MISSING: Final = object()


def _lookup(data: Any, path: str) -> Any:
    if path.startswith("="):
        return path[1:]
    if path in ("$", "."):
        return data
    current = data
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def map_generic(
    source: str,
    body: Any,
    mapping: dict[str, str],
    *,
    entity: str | None,
    default_entity: str | None,
    body_sha: str,
    max_items: int,
) -> list[Delivery]:
    """Any JSON object(s), with a mapping of event fields to dotted paths ('=literal' for
    a constant). ``entity`` may map to a bare id when ``category`` is mapped too."""
    items = _objects(body, "body", max_items)
    deliveries = []
    for index, item in enumerate(items):
        where = f"body[{index}]" if isinstance(body, list) else "body"

        def get(name: str, item: dict[str, Any] = item, where: str = where) -> Any:
            path = mapping.get(name)
            if path is None:
                return _MISSING
            value = _lookup(item, path)
            if value is _MISSING and name in ("entity", "kind", "summary"):
                raise AcmiValidationError(
                    f"{where}.{path}", "required", f"mapped to {name} but not in the body"
                )
            return value

        mapped_entity = get("entity")
        category = get("category")
        if isinstance(mapped_entity, int) and not isinstance(mapped_entity, bool):
            mapped_entity = str(mapped_entity)
        if isinstance(mapped_entity, str) and isinstance(category, str):
            mapped_entity = f"{category}:{ENTITY_UNSAFE.sub('_', mapped_entity)}"
        kind, summary = get("kind"), get("summary")
        correlation = get("correlationId")
        event: dict[str, Any] = {
            "source": source,
            "kind": kind if isinstance(kind, str) else f"{source}-webhook",
            "correlationId": str(correlation)
            if isinstance(correlation, str | int) and not isinstance(correlation, bool)
            else f"{source}-{body_sha[:16]}-{index}",
            "summary": truncate(summary) if isinstance(summary, str) else summary,
            "payload": item if get("payload") is _MISSING else get("payload"),
        }
        parent = get("parentCorrelationId")
        if isinstance(parent, str):
            event["parentCorrelationId"] = parent
        ts = get("ts")
        if ts is not _MISSING:
            event["ts"] = ts
        explicit = entity or (mapped_entity if isinstance(mapped_entity, str) else None)
        deliveries.append(Delivery(_entity(explicit, {}, default_entity, f"{where}.entity"), event))
    return deliveries

"""Source mappers: a webhook body in, Comms v1.1 events (each with its entity) out.

Every mapper has one signature, ``(WebhookBody) -> Mapped``, and is a pure function: no
store, no clock. The events it returns are validated by the timeline like any other
(``acmi_core.model.parse_event``). Which mapper serves which source is the source table's
business (``acmi_core.ingest.sources``).

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from acmi_core.errors import AcmiValidationError
from acmi_core.model import MAX_SUMMARY_LEN

# Field names senders commonly use, in order of preference.
KIND_FIELDS: Final = ("kind", "event", "type", "action")
SUMMARY_FIELDS: Final = ("summary", "message", "text", "subject", "title", "description")
CORRELATION_FIELDS: Final = ("correlationId", "correlation_id", "id", "executionId")
ENTITY_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]+")
# Generic mappings: event field -> dotted path into the body, or '=literal'.
MAPPING_FIELDS: Final = (
    "entity",
    "category",
    "kind",
    "summary",
    "correlationId",
    "parentCorrelationId",
    "ts",
    "payload",
)
# A mapping path: at most this long (a '=literal' too: a mapped summary fits), and at
# most this many dotted segments (bodies nest at most 64 levels: deeper cannot match).
MAX_MAPPING_PATH_LEN: Final = 512
MAX_MAPPING_PATH_SEGMENTS: Final = 64
# A list index in a path: ASCII digits only ('²' is a digit to str.isdigit(), not to
# int()), and at most 9 of them (no body holds a billion items); anything else is only
# ever an object key.
LIST_INDEX_RE: Final = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True)
class Delivery:
    """One event for one entity, before validation."""

    entity: str
    event: dict[str, Any]


@dataclass(frozen=True)
class WebhookBody:
    """What a mapper is given: the parsed body and where its events should go."""

    source: str  # as named in the URL, e.g. n8n-billing
    body: Any
    body_sha: str  # SHA-256 of the raw body: derived correlation ids
    max_items: int
    entity: str | None = None  # ?entity=
    default_entity: str | None = None  # the source's configured entity
    query: Mapping[str, str] = field(default_factory=dict)
    configured_mapping: Mapping[str, str] | None = None  # generic: stored with the source


@dataclass(frozen=True)
class Mapped:
    """A mapper's answer: the deliveries, and the sender's own id for this delivery when
    it has one (Pub/Sub's messageId), which identifies a redelivery."""

    deliveries: list[Delivery]
    sender_id: str | None = None


Mapper = Callable[[WebhookBody], Mapped]


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


def _items(webhook: WebhookBody) -> list[tuple[str, dict[str, Any]]]:
    """The body's objects with the field path of each (``body`` or ``body[i]``)."""
    body = webhook.body
    items = body if isinstance(body, list) else [body]
    if not items:
        raise AcmiValidationError("body", "non_empty", "must hold at least one object")
    if len(items) > webhook.max_items:
        raise AcmiValidationError(
            "body", "max_items", f"at most {webhook.max_items} items per request"
        )
    located = []
    for index, item in enumerate(items):
        where = f"body[{index}]" if isinstance(body, list) else "body"
        if not isinstance(item, dict):
            raise AcmiValidationError(where, "object", "must be a JSON object")
        located.append((where, item))
    return located


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


def map_automation(webhook: WebhookBody) -> Mapped:
    """Make and n8n: one request per item (a list is accepted too); well-known field
    names are picked up, the whole item is kept as payload."""
    source, sha = webhook.source, webhook.body_sha
    deliveries = []
    for index, (where, item) in enumerate(_items(webhook)):
        event: dict[str, Any] = {
            "source": item["source"] if isinstance(item.get("source"), str) else source,
            "kind": _first_str(item, KIND_FIELDS) or f"{source}-webhook",
            "correlationId": _first_str(item, CORRELATION_FIELDS) or f"{source}-{sha[:16]}-{index}",
            "summary": truncate(_first_str(item, SUMMARY_FIELDS) or f"{source} webhook"),
            "payload": item.get("payload", item),
        }
        if isinstance(item.get("parentCorrelationId"), str):
            event["parentCorrelationId"] = item["parentCorrelationId"]
        if "ts" in item:
            event["ts"] = item["ts"]  # validated (finite, ms) with the event
        entity = _entity(webhook.entity, item, webhook.default_entity, f"{where}.entity")
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


_MISSING: Final = object()


def check_mapping(mapping: object, field: str = "mapping") -> dict[str, str]:
    """A mapping of event fields to dotted paths or '=literal's, checked once (stored
    mappings when set, URL mappings per request) so that lookups need no checks."""
    if not isinstance(mapping, dict):
        raise AcmiValidationError(field, "object", "must be an object of field -> path")
    for name, path in mapping.items():
        where = f"{field}.{name}"
        if name not in MAPPING_FIELDS:
            raise AcmiValidationError(
                where, "unknown", f"must be one of {', '.join(MAPPING_FIELDS)}"
            )
        if not isinstance(path, str) or not path:
            raise AcmiValidationError(where, "type", "must be a non-empty string")
        if len(path) > MAX_MAPPING_PATH_LEN:
            raise AcmiValidationError(
                where, "max_length", f"must be at most {MAX_MAPPING_PATH_LEN} characters"
            )
        if not path.startswith("=") and path.count(".") >= MAX_MAPPING_PATH_SEGMENTS:
            raise AcmiValidationError(
                where,
                "max_segments",
                f"must have at most {MAX_MAPPING_PATH_SEGMENTS} dotted segments",
            )
    return mapping


def generic_mapping(webhook: WebhookBody) -> dict[str, str]:
    """The stored mapping with the URL's ``map.<field>=<path>`` parameters over it."""
    from_query = {k[4:]: v for k, v in webhook.query.items() if k.startswith("map.")}
    mapping = {**(webhook.configured_mapping or {}), **from_query}
    if not mapping:
        raise AcmiValidationError(
            "mapping",
            "required",
            "generic sources need a mapping: query map.<field>=<dotted.path> "
            f"(fields: {', '.join(MAPPING_FIELDS)}) or one stored with `acmi sources set`",
        )
    return check_mapping(mapping, "mapping")


def _lookup(data: Any, path: str) -> Any:
    """The value at a dotted path (list items by index), ``=literal``, or _MISSING."""
    if path.startswith("="):
        return path[1:]
    if path in ("$", "."):
        return data
    current = data
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif (
            isinstance(current, list) and LIST_INDEX_RE.fullmatch(part) and int(part) < len(current)
        ):
            current = current[int(part)]
        else:
            return _MISSING
    return current


# Mapped fields an item must have: naming them in the mapping promises they are there.
_REQUIRED_WHEN_MAPPED: Final = frozenset({"entity", "kind", "summary"})


class _MappedItem:
    """One body item read through the mapping."""

    def __init__(self, mapping: Mapping[str, str], item: dict[str, Any], where: str) -> None:
        self.mapping, self.item, self.where = mapping, item, where

    def get(self, name: str) -> Any:
        path = self.mapping.get(name)
        if path is None:
            return _MISSING
        value = _lookup(self.item, path)
        if value is _MISSING and name in _REQUIRED_WHEN_MAPPED:
            raise AcmiValidationError(
                f"{self.where}.{path}", "required", f"mapped to {name} but not in the body"
            )
        return value

    def text(self, name: str) -> str | None:
        """A mapped string, or an integer as its digits (ids are often numbers)."""
        value = self.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value if isinstance(value, str) else None

    def entity(self) -> str | None:
        """The mapped entity; a bare id becomes ``<category>:<id>`` when category is mapped."""
        entity, category = self.text("entity"), self.get("category")
        if entity is not None and isinstance(category, str):
            return f"{category}:{ENTITY_UNSAFE.sub('_', entity)}"
        return entity


def map_generic(webhook: WebhookBody) -> Mapped:
    """Any JSON object(s), with a mapping of event fields to dotted paths ('=literal' for
    a constant). ``entity`` may map to a bare id when ``category`` is mapped too."""
    mapping = generic_mapping(webhook)
    source, sha = webhook.source, webhook.body_sha
    deliveries = []
    for index, (where, item) in enumerate(_items(webhook)):
        mapped = _MappedItem(mapping, item, where)
        kind, summary, payload = mapped.get("kind"), mapped.get("summary"), mapped.get("payload")
        event: dict[str, Any] = {
            "source": source,
            "kind": kind if isinstance(kind, str) else f"{source}-webhook",
            "correlationId": mapped.text("correlationId") or f"{source}-{sha[:16]}-{index}",
            "payload": item if payload is _MISSING else payload,
        }
        if summary is not _MISSING:  # not a string: kept, so validation names the rule
            event["summary"] = truncate(summary) if isinstance(summary, str) else summary
        parent = mapped.get("parentCorrelationId")
        if isinstance(parent, str):
            event["parentCorrelationId"] = parent
        ts = mapped.get("ts")
        if ts is not _MISSING:
            event["ts"] = ts
        explicit = webhook.entity or mapped.entity()
        entity = _entity(explicit, {}, webhook.default_entity, f"{where}.entity")
        deliveries.append(Delivery(entity, event))
    return Mapped(deliveries)

"""What a source mapper is given and gives back: the parsed webhook (:class:`WebhookBody`),
the events it maps to, each with its entity (:class:`Delivery`, :class:`Mapped`), and what
every mapper shares: the body's items, the entity an item names, a summary cut to size.
The mappers themselves are ``ingest/mappers.py``; the mapping language, ``ingest/mapping.py``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import MAX_SUMMARY_LEN, utf16_len
from acmi_core.ingest.results import Challenge

ENTITY_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]+")


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
    configured_mapping: Mapping[str, str] | None = None  # stored with the source
    # The request headers the source's row names (``SourceSpec.headers``), by lower-case
    # name: only those, so a mapper stays a function of what it is meant to read.
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Mapped:
    """A mapper's answer: the deliveries, and the sender's own id for this delivery when
    it has one (Pub/Sub's messageId), which identifies a redelivery."""

    deliveries: list[Delivery]
    sender_id: str | None = None
    # A handshake's reply (Slack's url_verification): answered as is, nothing stored.
    answer: Challenge | None = None


Mapper = Callable[[WebhookBody], Mapped]


def truncate(text: str, limit: int = MAX_SUMMARY_LEN) -> str:
    """At most ``limit`` UTF-16 code units (as the reference counts a summary), cut with
    an ellipsis; a surrogate pair is never split."""
    if utf16_len(text) <= limit:
        return text
    units, end = 0, 0
    for end, char in enumerate(text):  # noqa: B007 (end is used after the loop)
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit - 1:
            break
    return text[:end] + "…"


def body_digest(body: bytes) -> str:
    """The SHA-256 of a raw body, hex (``WebhookBody.body_sha``)."""
    return hashlib.sha256(body).hexdigest()


def body_items(webhook: WebhookBody) -> list[tuple[str, dict[str, Any]]]:
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


def item_entity(explicit: str | None, item: dict[str, Any], default: str | None, field: str) -> str:
    """The entity named in the URL (or by a mapping), else the item's ``entity`` field, else
    the source's configured one; refused when none names it."""
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


def sanitized(text: str, *, keep_case: bool = False) -> str:
    """An id as an entity's local id: each run of characters outside ``[A-Za-z0-9_.-]``
    replaced by one ``_``, lower-cased unless ``keep_case`` (a sender whose ids are
    case-sensitive: Slack's ``C0LAN2Q65`` is what its users type and paste)."""
    return ENTITY_UNSAFE.sub("_", text if keep_case else text.lower())

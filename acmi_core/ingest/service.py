"""The ingest operations the HTTP layer calls: events for one entity, and source webhooks.

Every delivery is one atomic step (one round trip): its events, their entities' index
entries and, when the delivery can be identified, its idempotency record holding the
response. A retried delivery finds the record, writes nothing and gets the first
response back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from acmi_core.client import Acmi
from acmi_core.errors import AcmiValidationError
from acmi_core.ingest.config import SourceConfig
from acmi_core.ingest.mappers import Delivery, WebhookBody, body_digest
from acmi_core.ingest.sources import source_spec
from acmi_core.model import EntityId, dumps, parse_event
from acmi_core.writes import Replayed, WritePlan

MAX_IDEMPOTENCY_KEY_LEN = 255


@dataclass(frozen=True)
class IngestResult:
    body: dict[str, Any]
    replayed: bool
    status: int = 201

    @property
    def count(self) -> int:
        return int(self.body.get("stored", 0))


@dataclass(frozen=True)
class Idempotency:
    """Identifies one delivery: where the id came from, the id, and how long to remember."""

    origin: str  # "header" | "pubsub" | "body"
    value: str
    ttl_s: int


def idempotency_from_header(raw: str | None, ttl_s: int) -> Idempotency | None:
    if raw is None:
        return None
    if not 1 <= len(raw) <= MAX_IDEMPOTENCY_KEY_LEN:
        raise AcmiValidationError(
            "Idempotency-Key", "length", f"must be 1-{MAX_IDEMPOTENCY_KEY_LEN} characters"
        )
    return Idempotency("header", raw, ttl_s)


def store_deliveries(
    acmi: Acmi, scope: str, deliveries: list[Delivery], idempotency: Idempotency | None
) -> IngestResult:
    """Validate every event, then store all of them (or, on a replay, none) in one step."""
    plan = WritePlan()
    now = acmi.clock()
    stored: list[dict[str, Any]] = []
    for index, delivery in enumerate(deliveries):
        field = f"events[{index}]"
        entity = EntityId.parse(delivery.entity, f"{field}.entity")
        event = parse_event(delivery.event, now_ms=now, tenant=acmi.tenant, field=field)
        acmi.timeline.stage(plan, entity, [event])
        stored.append({"entity": str(entity), **event.to_dict()})
    body = {"stored": len(stored), "events": stored}
    if idempotency is not None:
        digest = hashlib.sha256(idempotency.value.encode("utf-8")).hexdigest()
        key = acmi.keys.internal("idem", scope, digest)
        plan.once(key, idempotency.ttl_s * 1000, dumps(body))
    try:
        plan.apply(acmi.store)
    except Replayed as replay:
        return IngestResult(json.loads(replay.previous), replayed=True)
    return IngestResult(body, replayed=False)


def append_events(
    acmi: Acmi, entity: str, body: Any, *, idempotency_key: str | None, max_events: int
) -> IngestResult:
    """POST /v1/entities/{entity}/events: one event or a list of up to ``max_events``."""
    EntityId.parse(entity)
    items = body if isinstance(body, list) else [body]
    if not items:
        raise AcmiValidationError("body", "non_empty", "give one event or a list of events")
    if len(items) > max_events:
        raise AcmiValidationError("body", "max_items", f"at most {max_events} events per request")
    deliveries = [Delivery(entity, item) for item in items]
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise AcmiValidationError(f"events[{index}]", "object", "must be a JSON object")
    idempotency = idempotency_from_header(idempotency_key, acmi.settings.idempotency_ttl_s)
    return store_deliveries(acmi, f"events:{entity}", deliveries, idempotency)


def ingest_webhook(
    acmi: Acmi,
    source: str,
    raw_body: bytes,
    body: Any,
    *,
    query: Mapping[str, str],
    idempotency_key: str | None,
    config: SourceConfig | None,
) -> IngestResult:
    """POST /v1/ingest/{source}: map the sender's body to events and store them once."""
    spec = source_spec(source)
    settings = acmi.settings
    sha = body_digest(raw_body)
    mapped = spec.mapper(
        WebhookBody(
            source=source,
            body=body,
            body_sha=sha,
            max_items=settings.max_batch_events,
            entity=query.get("entity") or None,
            default_entity=config.entity if config else None,
            query=query,
            configured_mapping=config.mapping if config else None,
        )
    )
    idempotency = idempotency_from_header(idempotency_key, settings.idempotency_ttl_s)
    if idempotency is None and spec.idempotency == "pubsub" and mapped.sender_id:
        # Pub/Sub redelivers the identical message with the same messageId.
        idempotency = Idempotency("pubsub", mapped.sender_id, settings.idempotency_ttl_s)
    # n8n and Make send one request per item and share execution ids across a run: only
    # the exact body identifies a delivery (two items differ; a retry is identical).
    idempotency = idempotency or Idempotency("body", sha, settings.derived_idempotency_ttl_s)
    scope = f"ingest:{source}:{idempotency.origin}"
    return store_deliveries(acmi, scope, mapped.deliveries, idempotency)

"""Webhooks from the senders of ``acmi_core.ingest.sources``."""

from __future__ import annotations

from typing import Final

from acmi_core.operations.model import Access, Operation

OPERATIONS: Final[tuple[Operation, ...]] = (
    # Not a key's scope: the source's row says which credentials it takes (an API key of
    # write scope, a push token, Google's OIDC token for Gmail's Pub/Sub push), and its
    # config whether the body must be signed. Stored events are counted, not calls.
    Operation(
        "ingest.webhook",
        "Webhook from Make, n8n, Gmail (Pub/Sub push), Slack, GitHub or a generic sender",
        Access.WEBHOOK,
        "acmi_core.ingest.service:ingest_webhook",
        "POST",
        "/v1/ingest/{source}",
        "ingest",
        params="acmi_core.operations.params.entities:IngestWebhookParams",
        result="acmi_core.ingest.service:IngestResult",
    ),
)

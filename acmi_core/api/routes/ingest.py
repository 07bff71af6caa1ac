"""Writes that arrive as events: POST /v1/entities/{entity}/events and source webhooks."""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Header, Path
from fastapi.responses import JSONResponse

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.body import parse_json, read_raw
from acmi_core.auth.signatures import (
    GITHUB_SIGNATURE_HEADER,
    SIGNATURE_HEADER,
    SLACK_SIGNATURE_HEADER,
)
from acmi_core.auth.tiers import check_identity
from acmi_core.base.model import MAX_ENTITY_LEN, TENANT_RE
from acmi_core.ingest.mapping import MAPPING_FIELDS, MAX_MAPPING_PATH_LEN
from acmi_core.ingest.service import (
    MAX_WEBHOOK_TS_SKEW_MS,
    IngestResult,
    append_events,
    ingest_webhook,
)
from acmi_core.ingest.sources import SOURCES, Credential

router = APIRouter(tags=["ingest"])
route = registrar(router, "ingest")

EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["source", "kind", "correlationId", "summary"],
    "properties": {
        "ts": {"type": "number", "description": "ms since epoch; default now"},
        "source": {"type": "string", "minLength": 1},
        "kind": {"type": "string", "minLength": 1},
        "correlationId": {"type": "string", "minLength": 1},
        "summary": {"type": "string", "minLength": 1, "maxLength": 500},
        "parentCorrelationId": {"type": "string"},
        "payload": {},
        "speaker_type": {"enum": ["agent", "human", "system", "external"]},
        "tenant_id": {"type": "string"},
    },
    "additionalProperties": True,
}
STORED: dict[int | str, dict[str, Any]] = {
    201: {
        "description": "Stored: the events as stored. A retried delivery stores nothing and "
        "gets `Idempotent-Replayed: true` with a minimal body: `stored` and each event's "
        "`entity`, `ts` and `correlationId` (never the event data)."
    },
    422: {
        "description": "The `Idempotency-Key` was already used with a different request "
        "(another body, entity or URL): `rule: reused`; nothing stored."
    },
}


def _respond(result: IngestResult) -> JSONResponse:
    headers = {"Idempotent-Replayed": "true"} if result.replayed else {}
    return JSONResponse(result.body, status_code=result.status, headers=headers)


@route(
    "entities.events.append",
    status_code=201,
    responses=STORED,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "oneOf": [
                            EVENT_SCHEMA,
                            {"type": "array", "items": EVENT_SCHEMA, "maxItems": 100},
                        ]
                    }
                }
            },
        }
    },
)
async def post_events(
    req: Authorized,
    entity: Annotated[str, Path(max_length=256)],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> JSONResponse:
    acmi = req.acmi
    raw = await read_raw(req.request, acmi.settings.max_body_bytes)
    body = parse_json(raw)
    if req.principal.agent is not None:  # an event's source: a bound key's own (auth/tiers)
        check_identity(req.principal.agent, "entities.events.append", {"event": body})
    result = await req.call(
        append_events,
        acmi,
        entity,
        raw,
        body,
        idempotency_key=idempotency_key,
        max_events=acmi.settings.max_batch_events,
    )
    _observe(req, result, "EventsStored")
    return _respond(result)


CREDENTIAL_HELP: Final = {
    Credential.API_KEY: "`Authorization: Bearer <acmi key>`",
    Credential.PUSH_TOKEN: "`?token=<push token>` (`acmi sources set --push-token`)",
    Credential.GOOGLE_OIDC: "the push's Google OIDC token (`?tenant=` names the tenant)",
}


def _sources_description() -> str:
    """The source table, as the docs show it."""
    rows = [
        f"- `{spec.name}`: {spec.summary}. Authenticate with "
        + "; or ".join(CREDENTIAL_HELP[c] for c in Credential if spec.accepts(c))
        + "."
        for spec in SOURCES
    ]
    return (
        "Sources (also as `<source>-<name>`, e.g. `n8n-billing`):\n\n"
        + "\n".join(rows)
        + f"\n\nSources with an HMAC secret also need `{SIGNATURE_HEADER}: sha256=<hex>` "
        "over the raw body; `slack` and `github` always need their sender's own signature "
        f"(`{SLACK_SIGNATURE_HEADER}`, `{GITHUB_SIGNATURE_HEADER}`) with the secret stored "
        "as the source's HMAC secret, and Slack's `url_verification` is answered (200) with "
        "its `challenge`. Query `entity=<category>:<id>` names the entity when the body "
        "does not; generic, make and n8n sources take `map.<field>=<dotted.path>` "
        "(`map.category=<name>`). An event dated more "
        f"than {MAX_WEBHOOK_TS_SKEW_MS // 60_000} minutes ahead is stored at the time it "
        "arrives, with the sender's value as `sender_ts`."
    )


_MAPPED_BY: Final = ", ".join(spec.name for spec in SOURCES if spec.mapping)


def _query_parameters() -> list[dict[str, Any]]:
    """The query the webhook reads (``ingest/service.py`` ``DELIVERY_PARAMS``, ``map.*``,
    the push token), declared so a client generated from the document can send it: one
    ``map.<field>`` a mapping field (the fields are fixed)."""

    def query(name: str, description: str, **schema: Any) -> dict[str, Any]:
        return {
            "name": name,
            "in": "query",
            "required": False,
            "description": description,
            "schema": {"type": "string", **schema},
        }

    mapped = [
        query(
            f"map.{name}",
            f"{_MAPPED_BY}: where the event's `{name}` is in the body, a dotted path "
            "(`email.subject`, `items.0.id`) or `=<literal>`"
            + ("; a category name (`=deal`)" if name == "category" else ""),
            minLength=1,
            maxLength=MAX_MAPPING_PATH_LEN,
        )
        for name in MAPPING_FIELDS
    ]
    return [
        query(
            "entity",
            "`<category>:<id>`: the entity when the body names none (else the source's "
            "configured entity)",
            minLength=1,
            maxLength=MAX_ENTITY_LEN,
        ),
        query(
            "token",
            "the source's push token (`acmi sources set --push-token`), for senders that "
            "cannot send a header; never stored, never logged",
            minLength=1,
        ),
        query(
            "tenant",
            "with Google's OIDC token (Gmail's Pub/Sub push): the tenant; else the key or "
            "the token decides it",
            pattern=f"^{TENANT_RE.pattern}$",
        ),
        *mapped,
    ]


@route(
    "ingest.webhook",
    status_code=201,
    responses={
        **STORED,
        200: {"description": "A handshake (Slack's `url_verification`): its answer."},
    },
    description=_sources_description(),
    openapi_extra={
        "parameters": _query_parameters(),
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {}}},
        },
    },
)
async def post_ingest(
    req: Authorized,
    source: Annotated[str, Path(pattern=r"^[a-z][a-z0-9_-]{0,63}$")],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> JSONResponse:
    # The caller and the body's signature were checked by the source's credential policy
    # (the row's access, api/access.py): here is the verified raw body.
    delivery = req.webhook
    assert delivery is not None  # a webhook route's access always sets it
    body = parse_json(delivery.raw, lenient_strings=delivery.spec.lenient_json)
    result = await req.call(
        ingest_webhook,
        req.acmi,
        source,
        delivery.raw,
        body,
        query=delivery.query,
        idempotency_key=idempotency_key,
        config=delivery.config,
        headers=req.request.headers,
        gmail=req.gmail,
    )
    _observe(req, result, "WebhookEventsStored")
    return _respond(result)


def _observe(req: Authorized, result: IngestResult, metric: str) -> None:
    events = result.body["events"] if "events" in result.body else []  # noqa: SIM401 (narrows)
    if events and isinstance(events[0], dict) and "correlationId" in events[0]:
        req.observer.correlate(str(events[0]["correlationId"]))
    if result.replayed:
        req.observer.metric("DeliveriesReplayed", 1)
    else:
        req.observer.metric(metric, result.count)

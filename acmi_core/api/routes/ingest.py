"""Writes that arrive as events: POST /v1/entities/{entity}/events and source webhooks."""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Header, Path, Request
from fastapi.responses import JSONResponse

from acmi_core.api.app import ApiContext, api_context
from acmi_core.api.body import parse_json, read_raw
from acmi_core.auth.apikeys import Scope
from acmi_core.auth.signatures import (
    GITHUB_SIGNATURE_HEADER,
    SIGNATURE_HEADER,
    SLACK_SIGNATURE_HEADER,
)
from acmi_core.ingest.service import (
    MAX_WEBHOOK_TS_SKEW_MS,
    IngestResult,
    append_events,
    ingest_webhook,
)
from acmi_core.ingest.sources import SOURCES, Credential, source_spec

router = APIRouter(tags=["ingest"])

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


@router.post(
    "/v1/entities/{entity}/events",
    status_code=201,
    responses=STORED,
    summary="Append one Comms v1.1 event or a list of up to 100, atomically",
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
    request: Request,
    entity: Annotated[str, Path(max_length=256)],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> JSONResponse:
    ctx = api_context(request)
    _, acmi = await ctx.authorize(request, Scope.WRITE)
    raw = await read_raw(request, acmi.settings.max_body_bytes)
    body = parse_json(raw)
    result = await ctx.call(
        append_events,
        acmi,
        entity,
        raw,
        body,
        idempotency_key=idempotency_key,
        max_events=acmi.settings.max_batch_events,
    )
    _observe(ctx, result, "EventsStored")
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


@router.post(
    "/v1/ingest/{source}",
    status_code=201,
    responses={
        **STORED,
        200: {"description": "A handshake (Slack's `url_verification`): its answer."},
    },
    summary="Webhook from Make, n8n, Gmail (Pub/Sub push), Slack, GitHub or a generic sender",
    description=_sources_description(),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {}}},
        }
    },
)
async def post_ingest(
    request: Request,
    source: Annotated[str, Path(pattern=r"^[a-z][a-z0-9_-]{0,63}$")],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> JSONResponse:
    ctx = api_context(request)
    spec = source_spec(source)  # unknown sources are a 400 before anything else
    query = dict(request.query_params)
    caller = await ctx.call(ctx.auth.webhook, spec, source, request.headers, query)
    acmi = ctx.view(caller.principal.tenant)
    raw = await read_raw(request, acmi.settings.max_body_bytes)
    ctx.auth.verify_body(caller, raw, request.headers)
    body = parse_json(raw, lenient_strings=spec.lenient_json)
    result = await ctx.call(
        ingest_webhook,
        acmi,
        source,
        raw,
        body,
        query=query,
        idempotency_key=idempotency_key,
        config=caller.config,
        headers=request.headers,
        gmail=ctx.gmail,
    )
    _observe(ctx, result, "WebhookEventsStored")
    return _respond(result)


def _observe(ctx: ApiContext, result: IngestResult, metric: str) -> None:
    events = result.body.get("events") or []
    if events and isinstance(events[0], dict) and "correlationId" in events[0]:
        ctx.observer.correlate(str(events[0]["correlationId"]))
    if result.replayed:
        ctx.observer.metric("DeliveriesReplayed", 1)
    else:
        ctx.observer.metric(metric, result.count)

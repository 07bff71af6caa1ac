"""Writes that arrive as events: POST /v1/entities/{entity}/events and source webhooks."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from starlette.concurrency import run_in_threadpool

from acmi_core.api.app import TENANT_HEADER, ApiContext, context
from acmi_core.api.body import parse_json, read_raw
from acmi_core.api.security import (
    SIGNATURE_HEADER,
    Principal,
    bearer_token,
    looks_like_jwt,
    verify_signature,
)
from acmi_core.auth.apikeys import Scope
from acmi_core.errors import Forbidden, Unauthenticated
from acmi_core.ingest import sources
from acmi_core.ingest.service import IngestResult, append_events, ingest_webhook
from acmi_core.settings import check_tenant

router = APIRouter(tags=["ingest"], dependencies=[Depends(HTTPBearer(auto_error=False))])

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
    201: {"description": "Stored (or, for a retried delivery, the first response again)"},
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
    ctx: Annotated[ApiContext, Depends(context)],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> JSONResponse:
    _, acmi = await ctx.authorize(request, Scope.WRITE)
    body = parse_json(await read_raw(request, acmi.settings.max_body_bytes))
    result = await run_in_threadpool(
        append_events,
        acmi,
        entity,
        body,
        idempotency_key=idempotency_key,
        max_events=acmi.settings.max_batch_events,
    )
    _observe(ctx, result, "EventsStored")
    return _respond(result)


@router.post(
    "/v1/ingest/{source}",
    status_code=201,
    responses=STORED,
    summary="Webhook from Make, n8n, Gmail (Pub/Sub push) or a generic sender",
    description=(
        "Authenticate with `Authorization: Bearer <acmi key>`; or, for senders that cannot "
        "set headers, `?token=<push token>` (see `acmi sources set --push-token`); Gmail "
        "Pub/Sub pushes may use their OIDC token (`?tenant=` names the tenant). Sources with "
        f"an HMAC secret also need `{SIGNATURE_HEADER}: sha256=<hex>` over the raw body. "
        "Query `entity=<category>:<id>` names the entity when the body does not; generic "
        "sources take `map.<field>=<dotted.path>`."
    ),
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
    ctx: Annotated[ApiContext, Depends(context)],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> JSONResponse:
    sources.source_kind(source)  # unknown sources are a 400 before anything else
    principal = await _authenticate_source(request, ctx, source)
    acmi = ctx.acmi.for_tenant(principal.tenant)
    raw = await read_raw(request, acmi.settings.max_body_bytes)
    config = await run_in_threadpool(ctx.source_config, acmi, source)
    if config is not None and config.hmac_secret:
        verify_signature(config.hmac_secret, raw, request.headers.get(SIGNATURE_HEADER))
    body = parse_json(raw, lenient_strings=True)
    result = await run_in_threadpool(
        ingest_webhook,
        acmi,
        source,
        raw,
        body,
        query=dict(request.query_params),
        idempotency_key=idempotency_key,
        config=config,
    )
    _observe(ctx, result, "WebhookEventsStored")
    return _respond(result)


async def _authenticate_source(request: Request, ctx: ApiContext, source: str) -> Principal:
    """API key; else a push token in the URL; else (Gmail) Google's OIDC token."""
    header = request.headers.get("authorization")
    token = bearer_token(header)
    push_token = request.query_params.get("token")
    if token is not None and looks_like_jwt(token) and sources.source_kind(source) == "gmail":
        return await _google_principal(request, ctx, source, token)
    if token is None and push_token:
        found = await run_in_threadpool(sources.resolve_push_token, ctx.acmi.store, push_token)
        if found is None:
            raise Unauthenticated("token: unknown push token", field="token")
        tenant, allowed = found
        if allowed != source:
            raise Forbidden(f"token: this push token is for source {allowed!r}", field="token")
        return Principal(tenant, Scope.WRITE, f"push:{source}", source=source)
    principal, _ = await ctx.authorize(request, Scope.WRITE)
    return principal


async def _google_principal(
    request: Request, ctx: ApiContext, source: str, token: str
) -> Principal:
    tenant = check_tenant(request.query_params.get("tenant") or ctx.acmi.tenant, "tenant")
    if request.headers.get(TENANT_HEADER) not in (None, tenant):
        raise Forbidden(f"{TENANT_HEADER}: does not match ?tenant=", field=TENANT_HEADER)
    acmi = ctx.acmi.for_tenant(tenant)
    config = await run_in_threadpool(ctx.source_config, acmi, source)
    if config is None or not config.oidc_audience or not config.oidc_email:
        raise Unauthenticated(
            f"authorization: source {source!r} of tenant {tenant!r} has no OIDC audience and "
            "service account configured (acmi sources set --oidc-audience --oidc-email)",
            field="authorization",
        )
    identity = await run_in_threadpool(
        ctx.google_verifier().verify,
        token,
        audience=config.oidc_audience,
        email=config.oidc_email,
    )
    return Principal(tenant, Scope.WRITE, f"google:{identity.email}", source=source)


def _observe(ctx: ApiContext, result: IngestResult, metric: str) -> None:
    events = result.body.get("events") or []
    if events and isinstance(events[0], dict) and "correlationId" in events[0]:
        ctx.observer.correlate(str(events[0]["correlationId"]))
    if result.replayed:
        ctx.observer.metric("DeliveriesReplayed", 1)
    else:
        ctx.observer.metric(metric, result.count)

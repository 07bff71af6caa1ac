"""Human-in-the-loop queues (``acmi.hitl``): create, list, resolve.

Each route is one HITL operation, one request to the store (resolving an item another
tool wrote: two). Create is idempotent by correlationId: 201 when this call queued the
item, 200 with the stored item when it already existed. Resolving twice is a 409 naming
who resolved it and when; an unknown correlationId is a 404."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.security import HTTPBearer

from acmi_core.api.app import ApiContext, context
from acmi_core.api.body import read_json
from acmi_core.auth.apikeys import Scope
from acmi_core.client import Acmi
from acmi_core.errors import AcmiValidationError
from acmi_core.hitl import DEFAULT_LIST_SIZE
from acmi_core.pages import MAX_CURSOR_LEN, MAX_PAGE_SIZE
from acmi_core.stored import render_json

router = APIRouter(tags=["hitl"], dependencies=[Depends(HTTPBearer(auto_error=False))])

Json = dict[str, Any]
Cid = Annotated[str, Path(max_length=128, description="the item's correlationId")]
Ctx = Annotated[ApiContext, Depends(context)]

CREATE_FIELDS = (
    "topic",
    "request",
    "concrete_unblock_request",
    "urgency",
    "deadline",
    "asked_by",
    "addressee",
    "correlationId",
)
ENTITY = {"type": "string", "description": "entity id, e.g. user:mikey"}


def _json(content: Any, status: int = 200) -> Response:
    # render_json: stored numbers go back exactly as written (JsonNumber)
    return Response(render_json(content), status_code=status, media_type="application/json")


def _body(description: str, required: list[str], props: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "required": required, "properties": props}
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": schema}},
        }
    }


async def _object(request: Request, acmi: Acmi, allowed: tuple[str, ...]) -> dict[str, Any]:
    body = await read_json(request, acmi.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise AcmiValidationError("body", "object", "must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise AcmiValidationError(
            unknown[0], "unknown_field", f"is not a field here (fields: {', '.join(allowed)})"
        )
    return body


def _required(body: dict[str, Any], name: str) -> Any:
    if name not in body:
        raise AcmiValidationError(name, "required", "is required")
    return body[name]


@router.post(
    "/v1/hitl",
    summary="Queue an item for a human (idempotent by correlationId: 201 new, 200 existing)",
    openapi_extra=_body(
        "the item; addressee omitted or null: the shared queue",
        ["topic", "request", "asked_by"],
        {
            "topic": {"type": "string", "maxLength": 200},
            "request": {
                "type": "string",
                "maxLength": 4000,
                "description": "the concrete unblock request (also accepted as "
                "concrete_unblock_request)",
            },
            "urgency": {"type": "string", "enum": ["P0", "P1", "P2"], "default": "P1"},
            "deadline": {"type": "integer", "description": "ms; default now + 24 h"},
            "asked_by": ENTITY,
            "addressee": {**ENTITY, "nullable": True},
            "correlationId": {
                "type": "string",
                "pattern": "^[A-Za-z0-9_.:-]{1,128}$",
                "description": "pass one to make retries safe; generated otherwise",
            },
        },
    ),
    response_model=Json,
    status_code=201,
)
async def create(request: Request, ctx: Ctx) -> Response:
    _, acmi = await ctx.authorize(request, Scope.WRITE)
    ctx.observer.metric("HitlWrites")
    body = await _object(request, acmi, CREATE_FIELDS)
    if "request" in body and "concrete_unblock_request" in body:
        raise AcmiValidationError(
            "request", "one_of", "give request or concrete_unblock_request, not both"
        )
    alias = "concrete_unblock_request" if "concrete_unblock_request" in body else "request"
    created = await ctx.call(
        acmi.hitl.create,
        _required(body, "topic"),
        _required(body, alias),
        asked_by=_required(body, "asked_by"),
        urgency=body.get("urgency", "P1"),
        deadline=body.get("deadline"),
        addressee=body.get("addressee"),
        correlation_id=body.get("correlationId"),
    )
    return _json(
        {"item": created.item, "created": created.created}, 201 if created.created else 200
    )


@router.get(
    "/v1/hitl",
    summary="A queue, a page at a time: open by deadline (soonest first), closed newest first",
    response_model=Json,
)
async def list_queue(
    request: Request,
    ctx: Ctx,
    addressee: Annotated[
        str | None, Query(max_length=256, description="entity id; omitted: the shared queue")
    ] = None,
    state: Annotated[str, Query(description="open or closed")] = "open",
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_LIST_SIZE,
    cursor: Annotated[str | None, Query(min_length=1, max_length=MAX_CURSOR_LEN)] = None,
) -> Response:
    _, acmi = await ctx.authorize(request, Scope.READ)
    ctx.observer.metric("HitlReads")
    page = await ctx.call(acmi.hitl.list, addressee, state, limit, cursor)
    return _json(page.to_dict())


@router.post(
    "/v1/hitl/{correlationId}/resolve",
    summary="Resolve: move the item to closed and post hitl-resolved (409 if resolved)",
    openapi_extra=_body(
        "the resolution; addressee only to resolve an item another tool wrote",
        ["resolution", "by"],
        {
            "resolution": {"type": "string", "maxLength": 4000},
            "by": ENTITY,
            "addressee": {**ENTITY, "nullable": True},
        },
    ),
    response_model=Json,
)
async def resolve(
    request: Request, ctx: Ctx, correlation_id: Annotated[Cid, Path(alias="correlationId")]
) -> Response:
    _, acmi = await ctx.authorize(request, Scope.WRITE)
    ctx.observer.metric("HitlWrites")
    body = await _object(request, acmi, ("resolution", "by", "addressee"))
    resolved = await ctx.call(
        acmi.hitl.resolve,
        correlation_id,
        _required(body, "resolution"),
        by=_required(body, "by"),
        addressee=body.get("addressee"),
    )
    return _json(resolved.to_dict())

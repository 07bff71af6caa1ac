"""Work items (``acmi.work``): create, list, get, events with sessions, signals, owner.

Each route is one work operation: one round trip (``GET /v1/work?status=open`` with no
owner: two per page). Reads need the read scope, the rest the write scope. A create on
an existing id is a 409 naming it (field ``id``, rule ``unique``); an unknown id is a
404 (field ``id``, rule ``exists``). Responses render stored JSON exactly
(``render_json``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from acmi_core.api.app import api_context
from acmi_core.api.shapes import (
    Cursor,
    Json,
    Metered,
    PageLimit,
    StoredJSON,
    object_body,
    read_fields,
    request_body,
    require,
)
from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.coordination.work import MAX_ID_LEN

router = APIRouter(tags=["work"], default_response_class=StoredJSON)

WorkId = Annotated[
    str, Path(max_length=MAX_ID_LEN, description="the work id, [A-Za-z0-9_.-]+, e.g. acmi-launch")
]

OWNER = {"type": "string", "description": "entity id, or a bare name for agent:<name>"}


ACCESS = Metered(reads="WorkReads", writes="WorkWrites")
_read, _write = ACCESS.read, ACCESS.write


@router.post(
    "/v1/work",
    summary="Create a work item (409 if the id exists); owner and status optional",
    status_code=201,
    openapi_extra=request_body(
        "the id, its profile, and optionally its owner and status (default open)",
        ["id", "profile"],
        {
            "id": {"type": "string", "description": "[A-Za-z0-9_.-]+"},
            "profile": {"type": "object"},
            "owner": OWNER,
            "status": {"type": "string", "maxLength": 64},
        },
    ),
    response_model=Json,
)
async def create_work(request: Request) -> StoredJSON:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    body = await read_fields(request, acmi, ("id", "profile"), ("owner", "status"))
    item = await ctx.call(
        acmi.work.create,
        body["id"],
        body["profile"],
        owner=body.get("owner"),
        status=body.get("status", "open"),
    )
    return StoredJSON(item.to_dict(), status_code=201)


@router.get(
    "/v1/work",
    summary="List work items: an owner's open items (newest update first), or all",
    response_model=Json,
)
async def list_work(
    request: Request,
    owner: Annotated[str | None, Query(max_length=256, description=OWNER["description"])] = None,
    status: Annotated[
        str, Query(pattern="^(open|any)$", description="open (default) or any")
    ] = "open",
    cursor: Cursor = None,
    limit: PageLimit = DEFAULT_PAGE_SIZE,
) -> StoredJSON:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    page = await ctx.call(
        acmi.work.list,
        owner,
        "open" if status == "open" else None,
        cursor=cursor,
        limit=limit,
    )
    return StoredJSON(page.to_dict())


@router.get(
    "/v1/work/{id}",
    summary="The work item: profile, signals, newest events, sessions, owner (one read)",
    response_model=Json,
)
async def get_work(
    request: Request,
    id: WorkId,
    events: Annotated[int, Query(ge=0, le=1000, description="newest events to include")] = 50,
) -> StoredJSON:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    item = await ctx.call(acmi.work.get, id, events)
    return StoredJSON(item.to_dict())


@router.post(
    "/v1/work/{id}/events",
    summary="Append a Comms v1.1 event; its session_id joins the item's sessions",
    status_code=201,
    openapi_extra=request_body(
        "a Comms v1.1 event, optionally with session_id (1-256 characters)",
        ["source", "kind", "correlationId", "summary"],
        {
            "source": {"type": "string"},
            "kind": {"type": "string"},
            "correlationId": {"type": "string"},
            "summary": {"type": "string", "maxLength": 500},
            "session_id": {"type": "string", "maxLength": 256},
        },
    ),
    response_model=Json,
)
async def post_work_event(request: Request, id: WorkId) -> StoredJSON:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    body = await object_body(request, acmi, field="event")
    event = await ctx.call(acmi.work.event, id, body)
    return StoredJSON(event, status_code=201)


@router.patch(
    "/v1/work/{id}/signals",
    summary="Merge signals; a status change keeps the owner's open index exact",
    openapi_extra=request_body(
        "signals to set (a flat object)", [], {"status": {"type": "string"}}
    ),
    response_model=Json,
)
async def patch_work_signals(request: Request, id: WorkId) -> StoredJSON:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    body = await object_body(request, acmi, field="signals")
    signals = await ctx.call(acmi.work.signal, id, body)
    return StoredJSON({"id": id, "signals": signals})


@router.put(
    "/v1/work/{id}/owner",
    summary="Assign the item to an owner (moves it between owners' open indexes)",
    openapi_extra=request_body("the new owner", ["owner"], {"owner": OWNER}),
    response_model=Json,
)
async def put_work_owner(request: Request, id: WorkId) -> StoredJSON:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    (owner,) = require(await object_body(request, acmi), "owner")
    assigned = await ctx.call(acmi.work.assign, id, owner)
    return StoredJSON({"id": id, "owner": assigned})


@router.get(
    "/v1/work/{id}/sessions",
    summary="One page of the item's session ids",
    response_model=Json,
)
async def get_work_sessions(
    request: Request,
    id: WorkId,
    cursor: Cursor = None,
    limit: PageLimit = DEFAULT_PAGE_SIZE,
) -> StoredJSON:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    page = await ctx.call(acmi.work.sessions_page, id, cursor=cursor, limit=limit)
    return StoredJSON({"id": id, **page.to_dict()})

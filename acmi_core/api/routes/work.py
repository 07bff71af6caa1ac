"""Work items (``acmi.work``): create, list, get, events with sessions, signals, owner.

Each route is one work operation: one round trip (``GET /v1/work?status=open`` with no
owner: two per page). Reads need the read scope, the rest the write scope. A create on
an existing id is a 409 naming it (field ``id``, rule ``unique``); an unknown id is a
404 (field ``id``, rule ``exists``). Responses render stored JSON exactly
(``render_json``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer

from acmi_core.api.app import ApiContext, context
from acmi_core.api.body import read_json
from acmi_core.auth.apikeys import Scope
from acmi_core.client import Acmi
from acmi_core.errors import AcmiValidationError
from acmi_core.pages import DEFAULT_PAGE_SIZE, MAX_CURSOR_LEN, MAX_PAGE_SIZE
from acmi_core.stored import render_json
from acmi_core.work import MAX_ID_LEN


class StoredJSON(JSONResponse):
    """JSON rendered exactly from what a read returned (``render_json``)."""

    def render(self, content: Any) -> bytes:
        return render_json(content)


router = APIRouter(
    tags=["work"],
    dependencies=[Depends(HTTPBearer(auto_error=False))],
    default_response_class=StoredJSON,
)

Json = dict[str, Any]
WorkId = Annotated[
    str, Path(max_length=MAX_ID_LEN, description="the work id, [A-Za-z0-9_.-]+, e.g. acmi-launch")
]
Ctx = Annotated[ApiContext, Depends(context)]
Cursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_CURSOR_LEN,
        description="next_cursor of the previous page, unchanged; omit for the first page",
    ),
]
PageLimit = Annotated[
    int, Query(ge=1, le=MAX_PAGE_SIZE, description=f"page size, at most {MAX_PAGE_SIZE}")
]


def _body(description: str, required: list[str], props: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "required": required, "properties": props}
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": schema}},
        }
    }


OWNER = {"type": "string", "description": "entity id, or a bare name for agent:<name>"}


async def _object(request: Request, acmi: Acmi) -> dict[str, Any]:
    body = await read_json(request, acmi.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise AcmiValidationError("body", "object", "must be a JSON object")
    return body


async def _write(ctx: ApiContext, request: Request) -> Acmi:
    _, acmi = await ctx.authorize(request, Scope.WRITE)
    ctx.observer.metric("WorkWrites")
    return acmi


async def _read(ctx: ApiContext, request: Request) -> Acmi:
    _, acmi = await ctx.authorize(request, Scope.READ)
    ctx.observer.metric("WorkReads")
    return acmi


@router.post(
    "/v1/work",
    summary="Create a work item (409 if the id exists); owner and status optional",
    status_code=201,
    openapi_extra=_body(
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
async def create_work(request: Request, ctx: Ctx) -> StoredJSON:
    acmi = await _write(ctx, request)
    body = await _object(request, acmi)
    for name in ("id", "profile"):
        if name not in body:
            raise AcmiValidationError(name, "required", "is required")
    unknown = sorted(set(body) - {"id", "profile", "owner", "status"})
    if unknown:
        raise AcmiValidationError(unknown[0], "unknown", "is not a field of a work item create")
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
    ctx: Ctx,
    owner: Annotated[str | None, Query(max_length=256, description=OWNER["description"])] = None,
    status: Annotated[
        str, Query(pattern="^(open|any)$", description="open (default) or any")
    ] = "open",
    cursor: Cursor = None,
    limit: PageLimit = DEFAULT_PAGE_SIZE,
) -> StoredJSON:
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
    ctx: Ctx,
    events: Annotated[int, Query(ge=0, le=1000, description="newest events to include")] = 50,
) -> StoredJSON:
    acmi = await _read(ctx, request)
    item = await ctx.call(acmi.work.get, id, events)
    return StoredJSON(item.to_dict())


@router.post(
    "/v1/work/{id}/events",
    summary="Append a Comms v1.1 event; its session_id joins the item's sessions",
    status_code=201,
    openapi_extra=_body(
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
async def post_work_event(request: Request, id: WorkId, ctx: Ctx) -> StoredJSON:
    acmi = await _write(ctx, request)
    body = await read_json(request, acmi.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise AcmiValidationError("event", "object", "event must be a JSON object")
    event = await ctx.call(acmi.work.event, id, body)
    return StoredJSON(event, status_code=201)


@router.patch(
    "/v1/work/{id}/signals",
    summary="Merge signals; a status change keeps the owner's open index exact",
    openapi_extra=_body("signals to set (a flat object)", [], {"status": {"type": "string"}}),
    response_model=Json,
)
async def patch_work_signals(request: Request, id: WorkId, ctx: Ctx) -> StoredJSON:
    acmi = await _write(ctx, request)
    body = await read_json(request, acmi.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise AcmiValidationError("signals", "object", "must be a JSON object")
    signals = await ctx.call(acmi.work.signal, id, body)
    return StoredJSON({"id": id, "signals": signals})


@router.put(
    "/v1/work/{id}/owner",
    summary="Assign the item to an owner (moves it between owners' open indexes)",
    openapi_extra=_body("the new owner", ["owner"], {"owner": OWNER}),
    response_model=Json,
)
async def put_work_owner(request: Request, id: WorkId, ctx: Ctx) -> StoredJSON:
    acmi = await _write(ctx, request)
    body = await _object(request, acmi)
    if "owner" not in body:
        raise AcmiValidationError("owner", "required", "is required")
    owner = await ctx.call(acmi.work.assign, id, body["owner"])
    return StoredJSON({"id": id, "owner": owner})


@router.get(
    "/v1/work/{id}/sessions",
    summary="One page of the item's session ids",
    response_model=Json,
)
async def get_work_sessions(
    request: Request,
    id: WorkId,
    ctx: Ctx,
    cursor: Cursor = None,
    limit: PageLimit = DEFAULT_PAGE_SIZE,
) -> StoredJSON:
    acmi = await _read(ctx, request)
    page = await ctx.call(acmi.work.sessions_page, id, cursor=cursor, limit=limit)
    return StoredJSON({"id": id, **page.to_dict()})

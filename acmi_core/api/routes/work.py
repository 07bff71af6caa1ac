"""Work items (``acmi.work``): create, list, get, events with sessions, signals, owner.

Each route is one work operation, its input its row's params model (but where a route
says otherwise): one round trip (``GET /v1/work?status=open`` with no owner: two per
page). Reads need the read scope, the rest the write scope. A create on
an existing id is a 409 naming it (field ``id``, rule ``unique``); an unknown id is a
404 (field ``id``, rule ``exists``). Responses render stored JSON exactly
(``render_json``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import (
    Cursor,
    Json,
    PageLimit,
    StoredJSON,
    object_body,
    request_body,
)
from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.coordination.results import OwnerBody, SessionsBody
from acmi_core.coordination.work import SessionPage
from acmi_core.operations.params.work import (
    WorkCreateParams,
    WorkEventParams,
    WorkGetParams,
    WorkOwnerParams,
    WorkSessionsParams,
    WorkSignalsParams,
)

router = APIRouter(tags=["work"], default_response_class=StoredJSON)
route = registrar(router, "work")

OWNER = {"type": "string", "description": "entity id, or a bare name for agent:<name>"}


# HTTP requires the profile object and takes no title (the MCP tool's: a title or a
# profile, which its shape turns into a profile).
@route(
    "work.create",
    exclude=("title",),
    required=("profile",),
    about="the id, its profile, and optionally its owner and status (default open)",
    status_code=201,
    response_model=Json,
)
async def create_work(req: Authorized) -> StoredJSON:
    item = await req.run(await req.params(WorkCreateParams))
    return StoredJSON(item.to_dict(), status_code=201)


# Its own query: status is open or any here, open or null in the params model.
@route("work.list", response_model=Json)
async def list_work(
    req: Authorized,
    owner: Annotated[str | None, Query(max_length=256, description=OWNER["description"])] = None,
    status: Annotated[
        str, Query(pattern="^(open|any)$", description="open (default) or any")
    ] = "open",
    cursor: Cursor = None,
    limit: PageLimit = DEFAULT_PAGE_SIZE,
) -> StoredJSON:
    acmi = req.acmi
    page = await req.call(
        acmi.work.list,
        owner,
        "open" if status == "open" else None,
        cursor=cursor,
        limit=limit,
    )
    return StoredJSON(page.to_dict())


@route("work.get", response_model=Json)
async def get_work(req: Authorized) -> StoredJSON:
    item = await req.run(await req.params(WorkGetParams))
    return StoredJSON(item.to_dict())


# Its own reader: the body is the event itself (its session_id, the reference's field, in
# it), checked by the core as every event is.
@route(
    "work.event",
    exclude=("session_id",),
    reader=True,
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
async def post_work_event(req: Authorized) -> StoredJSON:
    body = await object_body(req.request, req.acmi, field="event")
    event = await req.run(await req.params(WorkEventParams, event=body))
    return StoredJSON(event, status_code=201)


# Its own reader: the body is the signals map itself (its keys are the caller's).
@route(
    "work.signals",
    reader=True,
    openapi_extra=request_body(
        "signals to set (a flat object)", [], {"status": {"type": "string"}}
    ),
    response_model=Json,
)
async def patch_work_signals(req: Authorized) -> StoredJSON:
    body = await object_body(req.request, req.acmi, field="signals")
    params = await req.params(WorkSignalsParams, signals=body)
    signals = await req.run(params)
    return StoredJSON({"id": params.id, "signals": signals})


@route("work.owner", about="the new owner", response_model=Json)
async def put_work_owner(req: Authorized) -> StoredJSON:
    params = await req.params(WorkOwnerParams)
    assigned = await req.run(params)
    body: OwnerBody = {"id": params.id, "owner": assigned}
    return StoredJSON(body)


@route("work.sessions", response_model=Json)
async def get_work_sessions(req: Authorized) -> StoredJSON:
    params = await req.params(WorkSessionsParams)
    page: SessionPage = await req.run(params)
    body: SessionsBody = {"id": params.id, **page.to_dict()}
    return StoredJSON(body)

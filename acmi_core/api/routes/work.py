"""Work items (``acmi.work``): create, list, get, events with sessions, signals, owner.

Each route is one work operation: one round trip (``GET /v1/work?status=open`` with no
owner: two per page). Reads need the read scope, the rest the write scope. A create on
an existing id is a 409 naming it (field ``id``, rule ``unique``); an unknown id is a
404 (field ``id``, rule ``exists``). Responses render stored JSON exactly
(``render_json``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import (
    Cursor,
    Json,
    PageLimit,
    StoredJSON,
    object_body,
    read_fields,
    request_body,
    require,
)
from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.coordination.results import OwnerBody, SessionsBody
from acmi_core.coordination.work import MAX_ID_LEN

router = APIRouter(tags=["work"], default_response_class=StoredJSON)
route = registrar(router, "work")

WorkId = Annotated[
    str, Path(max_length=MAX_ID_LEN, description="the work id, [A-Za-z0-9_.-]+, e.g. acmi-launch")
]

OWNER = {"type": "string", "description": "entity id, or a bare name for agent:<name>"}


@route(
    "work.create",
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
async def create_work(req: Authorized) -> StoredJSON:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, ("id", "profile"), ("owner", "status"))
    item = await req.call(
        acmi.work.create,
        body["id"],
        body["profile"],
        owner=body.get("owner"),
        status=body.get("status", "open"),
    )
    return StoredJSON(item.to_dict(), status_code=201)


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
async def get_work(
    req: Authorized,
    id: WorkId,
    events: Annotated[int, Query(ge=0, le=1000, description="newest events to include")] = 50,
) -> StoredJSON:
    acmi = req.acmi
    item = await req.call(acmi.work.get, id, events)
    return StoredJSON(item.to_dict())


@route(
    "work.event",
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
async def post_work_event(req: Authorized, id: WorkId) -> StoredJSON:
    acmi = req.acmi
    body = await object_body(req.request, acmi, field="event")
    event = await req.call(acmi.work.event, id, body)
    return StoredJSON(event, status_code=201)


@route(
    "work.signals",
    openapi_extra=request_body(
        "signals to set (a flat object)", [], {"status": {"type": "string"}}
    ),
    response_model=Json,
)
async def patch_work_signals(req: Authorized, id: WorkId) -> StoredJSON:
    acmi = req.acmi
    body = await object_body(req.request, acmi, field="signals")
    signals = await req.call(acmi.work.signal, id, body)
    return StoredJSON({"id": id, "signals": signals})


@route(
    "work.owner",
    openapi_extra=request_body("the new owner", ["owner"], {"owner": OWNER}),
    response_model=Json,
)
async def put_work_owner(req: Authorized, id: WorkId) -> StoredJSON:
    acmi = req.acmi
    (owner,) = require(await object_body(req.request, acmi), "owner")
    assigned = await req.call(acmi.work.assign, id, owner)
    body: OwnerBody = {"id": id, "owner": assigned}
    return StoredJSON(body)


@route("work.sessions", response_model=Json)
async def get_work_sessions(
    req: Authorized,
    id: WorkId,
    cursor: Cursor = None,
    limit: PageLimit = DEFAULT_PAGE_SIZE,
) -> StoredJSON:
    acmi = req.acmi
    page = await req.call(acmi.work.sessions_page, id, cursor=cursor, limit=limit)
    body: SessionsBody = {"id": id, **page.to_dict()}
    return StoredJSON(body)

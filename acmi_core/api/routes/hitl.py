"""Human-in-the-loop queues (``acmi.hitl``): create, list, resolve.

Each route is one HITL operation, one request to the store (resolving an item another
tool wrote: two). Create is idempotent by correlationId: 201 when this call queued the
item, 200 with the stored item when it already existed. Resolving twice is a 409 naming
who resolved it and when; an unknown correlationId is a 404."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import (
    Json,
    StoredJSON,
    object_body,
    read_fields,
    refuse_unknown,
    request_body,
    require,
)
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.pages import MAX_CURSOR_LEN, MAX_PAGE_SIZE
from acmi_core.coordination.hitl import DEFAULT_LIST_SIZE
from acmi_core.coordination.results import CreatedBody

router = APIRouter(tags=["hitl"], default_response_class=StoredJSON)
route = registrar(router, "hitl")


Cid = Annotated[str, Path(max_length=128, description="the item's correlationId")]

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


@route(
    "hitl.create",
    openapi_extra=request_body(
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
async def create(req: Authorized) -> StoredJSON:
    acmi = req.acmi
    body = await object_body(req.request, acmi)
    refuse_unknown(body, CREATE_FIELDS)
    if "request" in body and "concrete_unblock_request" in body:
        raise AcmiValidationError(
            "request", "one_of", "give request or concrete_unblock_request, not both"
        )
    alias = "concrete_unblock_request" if "concrete_unblock_request" in body else "request"
    topic, text, asked_by = require(body, "topic", alias, "asked_by")
    created = await req.call(
        acmi.hitl.create,
        topic,
        text,
        asked_by=asked_by,
        urgency=body.get("urgency", "P1"),
        deadline=body.get("deadline"),
        addressee=body.get("addressee"),
        correlation_id=body.get("correlationId"),
    )
    answer: CreatedBody = {"item": created.item, "created": created.created}
    return StoredJSON(answer, 201 if created.created else 200)


@route("hitl.list", response_model=Json)
async def list_queue(
    req: Authorized,
    addressee: Annotated[
        str | None, Query(max_length=256, description="entity id; omitted: the shared queue")
    ] = None,
    state: Annotated[str, Query(description="open or closed")] = "open",
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_LIST_SIZE,
    cursor: Annotated[str | None, Query(min_length=1, max_length=MAX_CURSOR_LEN)] = None,
) -> StoredJSON:
    acmi = req.acmi
    page = await req.call(acmi.hitl.list, addressee, state, limit, cursor)
    return StoredJSON(page.to_dict())


@route(
    "hitl.resolve",
    openapi_extra=request_body(
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
    req: Authorized, correlation_id: Annotated[Cid, Path(alias="correlationId")]
) -> StoredJSON:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, ("resolution", "by"), ("addressee",))
    resolved = await req.call(
        acmi.hitl.resolve,
        correlation_id,
        body["resolution"],
        by=body["by"],
        addressee=body.get("addressee"),
    )
    return StoredJSON(resolved.to_dict())

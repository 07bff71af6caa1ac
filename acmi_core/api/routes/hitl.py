"""Human-in-the-loop queues (``acmi.hitl``): create, list, resolve.

Each route is one HITL operation, its input its row's params model; one request to the
store (resolving an item another tool wrote: two). Create is idempotent by
correlationId: 201 when this call queued the item, 200 with the stored item when it
already existed. Resolving twice is a 409 naming who resolved it and when; an unknown
correlationId is a 404."""

from __future__ import annotations

from fastapi import APIRouter

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import Json, StoredJSON
from acmi_core.coordination.hitl import DEFAULT_LIST_SIZE, Created
from acmi_core.coordination.results import CreatedBody
from acmi_core.operations.params.hitl import HitlCreateParams, HitlListParams, HitlResolveParams

router = APIRouter(tags=["hitl"], default_response_class=StoredJSON)
route = registrar(router, "hitl")


@route(
    "hitl.create",
    wire={"correlation_id": "correlationId"},
    aliases={"concrete_unblock_request": "request"},
    about="the item; addressee omitted or null: the shared queue",
    response_model=Json,
    status_code=201,
)
async def create(req: Authorized) -> StoredJSON:
    created: Created = await req.run(await req.params(HitlCreateParams))
    answer: CreatedBody = {"item": created.item, "created": created.created}
    return StoredJSON(answer, 201 if created.created else 200)


@route("hitl.list", defaults={"limit": DEFAULT_LIST_SIZE}, response_model=Json)
async def list_queue(req: Authorized) -> StoredJSON:
    page = await req.run(await req.params(HitlListParams))
    return StoredJSON(page.to_dict())


@route(
    "hitl.resolve",
    wire={"correlation_id": "correlationId"},
    about="the resolution; addressee only to resolve an item another tool wrote",
    response_model=Json,
)
async def resolve(req: Authorized) -> StoredJSON:
    resolved = await req.run(await req.params(HitlResolveParams))
    return StoredJSON(resolved.to_dict())

"""Entity reads and writes: profile, signals, timeline, full context, list, delete.

Every route answers with :class:`StoredJSON`: what is stored is already plain JSON, so it
is rendered by the stdlib encoder as read (``render_json``), with no jsonable_encoder or
pydantic pass, whose depth limit (255) turned deep stored values into 500s. The response
models below only describe the routes in the OpenAPI document."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.body import read_json
from acmi_core.api.shapes import Cursor, Json, PageLimit, StoredJSON, request_body
from acmi_core.base.errors import NotFound
from acmi_core.base.model import MAX_SIGNAL_KEY_LEN, check_json_object
from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.client import Acmi
from acmi_core.entities.results import Deleted, EntityListBody

router = APIRouter(tags=["entities"], default_response_class=StoredJSON)
route = registrar(router, "entities")

Entity = Annotated[str, Path(max_length=256, description="<category>:<id>, e.g. user:mikey")]
SignalKey = Annotated[str, Path(min_length=1, max_length=MAX_SIGNAL_KEY_LEN)]


async def _object(request: Request, acmi: Acmi, field: str) -> Json:
    body = await read_json(request, acmi.settings.max_body_bytes)
    return check_json_object(body, field)


# --- whole entity ---------------------------------------------------------------------------


@route("entities.get", response_model=Json)
async def get_entity(
    req: Authorized,
    entity: Entity,
    events: Annotated[int, Query(ge=0, le=1000)] = 50,
) -> Response:
    acmi = req.acmi
    result = await req.call(acmi.get, entity, events)
    return StoredJSON(result.to_dict())


@route("entities.delete", response_model=Json)
async def delete_entity(req: Authorized, entity: Entity) -> Response:
    acmi = req.acmi
    await req.call(acmi.delete, entity)
    deleted: Deleted = {"deleted": entity}
    return StoredJSON(deleted)


@route("entities.list", response_model=Json)
async def list_entities(
    req: Authorized,
    category: Annotated[str, Path(max_length=128)],
    cursor: Cursor = None,
    limit: PageLimit = DEFAULT_PAGE_SIZE,
) -> Response:
    acmi = req.acmi
    page = await req.call(acmi.list_page, category, cursor=cursor, limit=limit)
    listed: EntityListBody = {
        "category": category,
        "entities": page.entities,
        "next_cursor": page.next_cursor,
    }
    return StoredJSON(listed)


# --- profile --------------------------------------------------------------------------------


@route("entities.profile.get", response_model=Json)
async def get_profile(req: Authorized, entity: Entity) -> Response:
    acmi = req.acmi
    profile = await req.call(acmi.profile.get, entity)
    if profile is None:
        raise NotFound(f"profile: {entity} has no profile", field="profile")
    return StoredJSON(profile)


@route("entities.profile.put", openapi_extra=request_body("the new profile"), response_model=Json)
async def put_profile(req: Authorized, entity: Entity) -> Response:
    acmi = req.acmi
    doc = await _object(req.request, acmi, "profile")
    stored = await req.call(acmi.profile.set, entity, doc)
    return StoredJSON(stored or {})


@route("entities.profile.patch", openapi_extra=request_body("fields to merge"), response_model=Json)
async def patch_profile(req: Authorized, entity: Entity) -> Response:
    acmi = req.acmi
    partial = await _object(req.request, acmi, "profile")
    merged = await req.call(acmi.profile.merge, entity, partial)
    return StoredJSON(merged or {})


@route("entities.profile.delete", response_model=Json)
async def delete_profile(req: Authorized, entity: Entity) -> Response:
    acmi = req.acmi
    await req.call(acmi.profile.delete, entity)
    deleted: Deleted = {"deleted": f"{entity}/profile"}
    return StoredJSON(deleted)


# --- signals --------------------------------------------------------------------------------


@route("entities.signals.get", response_model=Json)
async def get_signals(req: Authorized, entity: Entity) -> Response:
    acmi = req.acmi
    return StoredJSON(await req.call(acmi.signals.all, entity))


@route(
    "entities.signals.put", openapi_extra=request_body("the whole signals map"), response_model=Json
)
async def put_signals(req: Authorized, entity: Entity) -> Response:
    acmi = req.acmi
    values = await _object(req.request, acmi, "signals")
    # what was stored, not the request: a tenant whose policy redacts sees the markers
    stored = await req.call(acmi.signals.replace, entity, values)
    return StoredJSON(stored)


@route("entities.signals.patch", openapi_extra=request_body("signals to set"), response_model=Json)
async def patch_signals(req: Authorized, entity: Entity) -> Response:
    acmi = req.acmi
    values = await _object(req.request, acmi, "signals")
    await req.call(acmi.signals.update, entity, values)
    return StoredJSON(await req.call(acmi.signals.all, entity))


@route("entities.signals.delete", response_model=Json)
async def delete_signals(req: Authorized, entity: Entity) -> Response:
    acmi = req.acmi
    await req.call(acmi.signals.clear, entity)
    deleted: Deleted = {"deleted": f"{entity}/signals"}
    return StoredJSON(deleted)


_MISSING = object()


@route("entities.signal.get", response_model=Json)
async def get_signal(req: Authorized, entity: Entity, key: SignalKey) -> Response:
    acmi = req.acmi
    value = await req.call(acmi.signals.get, entity, key, _MISSING)
    if value is _MISSING:
        raise NotFound(f"signal: {entity} has no signal {key!r}", field="key")
    return StoredJSON({"key": key, "value": value})


@route(
    "entities.signal.put",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}}
    },
    response_model=Json,
)
async def put_signal(req: Authorized, entity: Entity, key: SignalKey) -> Response:
    acmi = req.acmi
    value = await read_json(req.request, acmi.settings.max_body_bytes)
    stored = await req.call(acmi.signals.set, entity, key, value)  # redacted, if the policy says
    return StoredJSON({"key": key, "value": stored})


@route("entities.signal.delete", response_model=Json)
async def delete_signal(req: Authorized, entity: Entity, key: SignalKey) -> Response:
    acmi = req.acmi
    await req.call(acmi.signals.delete, entity, key)
    deleted: Deleted = {"deleted": f"{entity}/signals/{key}"}
    return StoredJSON(deleted)


# --- timeline -------------------------------------------------------------------------------


@route("entities.timeline", response_model=Json)
async def get_timeline(
    req: Authorized,
    entity: Entity,
    since_ms: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    until_ms: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    limit: PageLimit = DEFAULT_PAGE_SIZE,
    reverse: bool = False,
    cursor: Cursor = None,
) -> Response:
    acmi = req.acmi
    page = await req.call(
        acmi.timeline.page,
        entity,
        cursor=cursor,
        limit=limit,
        reverse=reverse,
        since_ms=since_ms,
        until_ms=until_ms,
    )
    return StoredJSON(page.to_dict())

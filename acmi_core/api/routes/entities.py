"""Entity reads and writes: profile, signals, timeline, full context, list, delete.

Each route's path and query are its row's params model's fields; the bodies of the
profile and signal writes are the stored JSON itself, read by :func:`_object` (see
there). Every route answers with :class:`StoredJSON`: what is stored is already plain
JSON, so it is rendered by the stdlib encoder as read (``render_json``), with no
jsonable_encoder or pydantic pass, whose depth limit (255) turned deep stored values into
500s. The response models below only describe the routes in the OpenAPI document."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.body import read_json
from acmi_core.api.shapes import Json, StoredJSON, request_body
from acmi_core.base.errors import NotFound
from acmi_core.base.model import check_json_object
from acmi_core.client import Acmi
from acmi_core.entities.results import Deleted, EntityListBody
from acmi_core.operations.params.entities import (
    DeleteParams,
    EventDeleteParams,
    GetParams,
    ListParams,
    ProfileDeleteParams,
    ProfileGetParams,
    ProfilePatchParams,
    ProfilePutParams,
    SignalDeleteParams,
    SignalGetParams,
    SignalPutParams,
    SignalsDeleteParams,
    SignalsGetParams,
    SignalsPatchParams,
    SignalsPutParams,
    TimelineParams,
)

router = APIRouter(tags=["entities"], default_response_class=StoredJSON)
route = registrar(router, "entities")


async def _object(request: Request, acmi: Acmi, field: str) -> Json:
    """The body of a profile or signals write: the JSON object stored as written (its
    keys are the caller's, not fields of a params model; rule ``object`` otherwise)."""
    body = await read_json(request, acmi.settings.max_body_bytes)
    return check_json_object(body, field)


# --- whole entity ---------------------------------------------------------------------------


# The route's default stays 50 newest events (the MCP tool's and the core's: 20).
@route("entities.get", defaults={"events": 50}, response_model=Json)
async def get_entity(req: Authorized) -> Response:
    result = await req.run(await req.params(GetParams))
    return StoredJSON(result.to_dict())


# DELETE deletes: the MCP tool's dry run is not this route's.
@route("entities.delete", exclude=("dry_run",), response_model=Json)
async def delete_entity(req: Authorized) -> Response:
    params = await req.params(DeleteParams)
    await req.run(params)
    deleted: Deleted = {"deleted": params.entity}
    return StoredJSON(deleted)


@route("entities.list", response_model=Json)
async def list_entities(req: Authorized) -> Response:
    params = await req.params(ListParams)
    page = await req.run(params)
    listed: EntityListBody = {
        "category": params.category,
        "entities": page.entities,
        "next_cursor": page.next_cursor,
    }
    return StoredJSON(listed)


# --- profile --------------------------------------------------------------------------------


@route("entities.profile.get", response_model=Json)
async def get_profile(req: Authorized) -> Response:
    params = await req.params(ProfileGetParams)
    profile = await req.run(params)
    if profile is None:
        raise NotFound(f"profile: {params.entity} has no profile", field="profile")
    return StoredJSON(profile)


@route(
    "entities.profile.put",
    exclude=("merge",),
    reader=True,
    openapi_extra=request_body("the new profile"),
    response_model=Json,
)
async def put_profile(req: Authorized) -> Response:
    doc = await _object(req.request, req.acmi, "profile")
    params = await req.params(ProfilePutParams, profile=doc)
    stored = await req.call(req.acmi.profile.set, params.entity, params.profile)
    return StoredJSON(stored or {})


@route(
    "entities.profile.patch",
    reader=True,
    openapi_extra=request_body("fields to merge"),
    response_model=Json,
)
async def patch_profile(req: Authorized) -> Response:
    partial = await _object(req.request, req.acmi, "profile")
    merged = await req.run(await req.params(ProfilePatchParams, partial=partial))
    return StoredJSON(merged or {})


@route("entities.profile.delete", response_model=Json)
async def delete_profile(req: Authorized) -> Response:
    params = await req.params(ProfileDeleteParams)
    await req.run(params)
    deleted: Deleted = {"deleted": f"{params.entity}/profile"}
    return StoredJSON(deleted)


# --- signals --------------------------------------------------------------------------------


# The whole map; one signal is GET .../signals/{key} (the MCP tool's key).
@route("entities.signals.get", exclude=("key",), response_model=Json)
async def get_signals(req: Authorized) -> Response:
    return StoredJSON(await req.run(await req.params(SignalsGetParams)))


@route(
    "entities.signals.put",
    exclude=("merge",),
    reader=True,
    openapi_extra=request_body("the whole signals map"),
    response_model=Json,
)
async def put_signals(req: Authorized) -> Response:
    values = await _object(req.request, req.acmi, "signals")
    params = await req.params(SignalsPutParams, signals=values)
    # what was stored, not the request: a tenant whose policy redacts sees the markers
    stored = await req.call(req.acmi.signals.replace, params.entity, params.signals)
    return StoredJSON(stored)


@route(
    "entities.signals.patch",
    reader=True,
    openapi_extra=request_body("signals to set"),
    response_model=Json,
)
async def patch_signals(req: Authorized) -> Response:
    values = await _object(req.request, req.acmi, "signals")
    params = await req.params(SignalsPatchParams, values=values)
    await req.run(params)
    return StoredJSON(await req.call(req.acmi.signals.all, params.entity))


@route("entities.signals.delete", response_model=Json)
async def delete_signals(req: Authorized) -> Response:
    params = await req.params(SignalsDeleteParams)
    await req.run(params)
    deleted: Deleted = {"deleted": f"{params.entity}/signals"}
    return StoredJSON(deleted)


_MISSING: Any = object()


@route("entities.signal.get", response_model=Json)
async def get_signal(req: Authorized) -> Response:
    params = await req.params(SignalGetParams)
    value = await req.call(req.acmi.signals.get, params.entity, params.key, _MISSING)
    if value is _MISSING:
        message = f"signal: {params.entity} has no signal {params.key!r}"
        raise NotFound(message, field="key")
    return StoredJSON({"key": params.key, "value": value})


# Its own reader: the body is the value itself, any JSON.
@route(
    "entities.signal.put",
    reader=True,
    query=("ttl",),
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}}
    },
    response_model=Json,
)
async def put_signal(req: Authorized) -> Response:
    value = await read_json(req.request, req.acmi.settings.max_body_bytes)
    params = await req.params(SignalPutParams, value=value)
    stored = await req.run(params)  # redacted, if the policy says
    return StoredJSON({"key": params.key, "value": stored})


@route("entities.signal.delete", response_model=Json)
async def delete_signal(req: Authorized) -> Response:
    params = await req.params(SignalDeleteParams)
    await req.run(params)
    deleted: Deleted = {"deleted": f"{params.entity}/signals/{params.key}"}
    return StoredJSON(deleted)


# --- timeline -------------------------------------------------------------------------------


@route("entities.timeline", response_model=Json)
async def get_timeline(req: Authorized) -> Response:
    page = await req.run(await req.params(TimelineParams))
    return StoredJSON(page.to_dict())


@route("entities.timeline.delete", about="the event: ts and id, or member", response_model=Json)
async def delete_event(req: Authorized) -> Response:
    return StoredJSON(await req.run(await req.params(EventDeleteParams)))

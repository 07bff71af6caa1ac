"""Entity reads and writes: profile, signals, timeline, full context, list, delete.

Every route answers with :class:`StoredJSON`: what is stored is already plain JSON, so it
is rendered by the stdlib encoder as read (``render_json``), with no jsonable_encoder or
pydantic pass, whose depth limit (255) turned deep stored values into 500s. The response
models below only describe the routes in the OpenAPI document."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from acmi_core.api.app import api_context
from acmi_core.api.body import read_json
from acmi_core.api.shapes import Cursor, Json, Metered, PageLimit, StoredJSON, request_body
from acmi_core.base.errors import NotFound
from acmi_core.base.model import MAX_SIGNAL_KEY_LEN, check_json_object
from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.client import Acmi

router = APIRouter(tags=["entities"], default_response_class=StoredJSON)

Entity = Annotated[str, Path(max_length=256, description="<category>:<id>, e.g. user:mikey")]
SignalKey = Annotated[str, Path(min_length=1, max_length=MAX_SIGNAL_KEY_LEN)]


ACCESS = Metered(reads="EntityReads", writes="EntityWrites")
_read, _write = ACCESS.read, ACCESS.write


async def _object(request: Request, acmi: Acmi, field: str) -> Json:
    body = await read_json(request, acmi.settings.max_body_bytes)
    return check_json_object(body, field)


# --- whole entity ---------------------------------------------------------------------------


@router.get(
    "/v1/entities/{entity}",
    summary="Profile, signals and newest events: one round trip",
    response_model=Json,
)
async def get_entity(
    request: Request,
    entity: Entity,
    events: Annotated[int, Query(ge=0, le=1000)] = 50,
) -> Response:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    result = await ctx.call(acmi.get, entity, events)
    return StoredJSON(result.to_dict())


@router.delete(
    "/v1/entities/{entity}",
    summary="Delete every key of the entity and its index entry",
    response_model=Json,
)
async def delete_entity(request: Request, entity: Entity) -> Response:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    await ctx.call(acmi.delete, entity)
    return StoredJSON({"deleted": entity})


@router.get(
    "/v1/namespaces/{category}/entities",
    summary="Entities of a category, a page at a time (follow next_cursor until null)",
    response_model=Json,
)
async def list_entities(
    request: Request,
    category: Annotated[str, Path(max_length=128)],
    cursor: Cursor = None,
    limit: PageLimit = DEFAULT_PAGE_SIZE,
) -> Response:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    page = await ctx.call(acmi.list_page, category, cursor=cursor, limit=limit)
    return StoredJSON(
        {"category": category, "entities": page.entities, "next_cursor": page.next_cursor}
    )


# --- profile --------------------------------------------------------------------------------


@router.get(
    "/v1/entities/{entity}/profile", summary="The profile (404 when none)", response_model=Json
)
async def get_profile(request: Request, entity: Entity) -> Response:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    profile = await ctx.call(acmi.profile.get, entity)
    if profile is None:
        raise NotFound(f"profile: {entity} has no profile", field="profile")
    return StoredJSON(profile)


@router.put(
    "/v1/entities/{entity}/profile",
    summary="Replace the profile (a JSON object)",
    openapi_extra=request_body("the new profile"),
    response_model=Json,
)
async def put_profile(request: Request, entity: Entity) -> Response:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    doc = await _object(request, acmi, "profile")
    stored = await ctx.call(acmi.profile.set, entity, doc)
    return StoredJSON(stored or {})


@router.patch(
    "/v1/entities/{entity}/profile",
    summary="Shallow-merge into the profile, atomically; returns the merged profile",
    openapi_extra=request_body("fields to merge"),
    response_model=Json,
)
async def patch_profile(request: Request, entity: Entity) -> Response:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    partial = await _object(request, acmi, "profile")
    merged = await ctx.call(acmi.profile.merge, entity, partial)
    return StoredJSON(merged or {})


@router.delete("/v1/entities/{entity}/profile", summary="Delete the profile", response_model=Json)
async def delete_profile(request: Request, entity: Entity) -> Response:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    await ctx.call(acmi.profile.delete, entity)
    return StoredJSON({"deleted": f"{entity}/profile"})


# --- signals --------------------------------------------------------------------------------


@router.get(
    "/v1/entities/{entity}/signals", summary="All signals ({} when none)", response_model=Json
)
async def get_signals(request: Request, entity: Entity) -> Response:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    return StoredJSON(await ctx.call(acmi.signals.all, entity))


@router.put(
    "/v1/entities/{entity}/signals",
    summary="Replace all signals",
    openapi_extra=request_body("the whole signals map"),
    response_model=Json,
)
async def put_signals(request: Request, entity: Entity) -> Response:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    values = await _object(request, acmi, "signals")
    # what was stored, not the request: a tenant whose policy redacts sees the markers
    stored = await ctx.call(acmi.signals.replace, entity, values)
    return StoredJSON(stored)


@router.patch(
    "/v1/entities/{entity}/signals",
    summary="Set the given signals, keep the others (atomic)",
    openapi_extra=request_body("signals to set"),
    response_model=Json,
)
async def patch_signals(request: Request, entity: Entity) -> Response:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    values = await _object(request, acmi, "signals")
    await ctx.call(acmi.signals.update, entity, values)
    return StoredJSON(await ctx.call(acmi.signals.all, entity))


@router.delete("/v1/entities/{entity}/signals", summary="Delete all signals", response_model=Json)
async def delete_signals(request: Request, entity: Entity) -> Response:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    await ctx.call(acmi.signals.clear, entity)
    return StoredJSON({"deleted": f"{entity}/signals"})


_MISSING = object()


@router.get(
    "/v1/entities/{entity}/signals/{key}",
    summary="One signal (404 when missing)",
    response_model=Json,
)
async def get_signal(request: Request, entity: Entity, key: SignalKey) -> Response:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    value = await ctx.call(acmi.signals.get, entity, key, _MISSING)
    if value is _MISSING:
        raise NotFound(f"signal: {entity} has no signal {key!r}", field="key")
    return StoredJSON({"key": key, "value": value})


@router.put(
    "/v1/entities/{entity}/signals/{key}",
    summary="Set one signal (the body is its JSON value)",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}}
    },
    response_model=Json,
)
async def put_signal(request: Request, entity: Entity, key: SignalKey) -> Response:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    value = await read_json(request, acmi.settings.max_body_bytes)
    stored = await ctx.call(acmi.signals.set, entity, key, value)  # redacted, if the policy says
    return StoredJSON({"key": key, "value": stored})


@router.delete(
    "/v1/entities/{entity}/signals/{key}", summary="Delete one signal", response_model=Json
)
async def delete_signal(request: Request, entity: Entity, key: SignalKey) -> Response:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    await ctx.call(acmi.signals.delete, entity, key)
    return StoredJSON({"deleted": f"{entity}/signals/{key}"})


# --- timeline -------------------------------------------------------------------------------


@router.get(
    "/v1/entities/{entity}/timeline",
    summary="Events, oldest first, a page at a time (follow next_cursor until null); "
    "bounds inclusive",
    response_model=Json,
)
async def get_timeline(
    request: Request,
    entity: Entity,
    since_ms: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    until_ms: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    limit: PageLimit = DEFAULT_PAGE_SIZE,
    reverse: bool = False,
    cursor: Cursor = None,
) -> Response:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    page = await ctx.call(
        acmi.timeline.page,
        entity,
        cursor=cursor,
        limit=limit,
        reverse=reverse,
        since_ms=since_ms,
        until_ms=until_ms,
    )
    return StoredJSON(page.to_dict())

"""Entity reads and writes: profile, signals, timeline, full context, list, delete."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.security import HTTPBearer

from acmi_core.api.app import ApiContext, context
from acmi_core.api.body import read_json
from acmi_core.auth.apikeys import Scope
from acmi_core.client import Acmi
from acmi_core.errors import NotFound
from acmi_core.model import MAX_SIGNAL_KEY_LEN, check_json_object

router = APIRouter(tags=["entities"], dependencies=[Depends(HTTPBearer(auto_error=False))])

Entity = Annotated[str, Path(max_length=256, description="<category>:<id>, e.g. user:mikey")]
SignalKey = Annotated[str, Path(min_length=1, max_length=MAX_SIGNAL_KEY_LEN)]
Ctx = Annotated[ApiContext, Depends(context)]


def _object_body(description: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    }


async def _read(ctx: ApiContext, request: Request) -> Acmi:
    _, acmi = await ctx.authorize(request, Scope.READ)
    ctx.observer.metric("EntityReads")
    return acmi


async def _write(ctx: ApiContext, request: Request) -> Acmi:
    _, acmi = await ctx.authorize(request, Scope.WRITE)
    ctx.observer.metric("EntityWrites")
    return acmi


async def _object(request: Request, acmi: Acmi, field: str) -> dict[str, Any]:
    body = await read_json(request, acmi.settings.max_body_bytes)
    return check_json_object(body, field)


# --- whole entity ---------------------------------------------------------------------------


@router.get("/v1/entities/{entity}", summary="Profile, signals and newest events: one round trip")
async def get_entity(
    request: Request,
    entity: Entity,
    ctx: Ctx,
    events: Annotated[int, Query(ge=0, le=1000)] = 50,
) -> dict[str, Any]:
    acmi = await _read(ctx, request)
    result = await ctx.call(acmi.get, entity, events)
    return result.to_dict()


@router.delete(
    "/v1/entities/{entity}", summary="Delete every key of the entity and its index entry"
)
async def delete_entity(request: Request, entity: Entity, ctx: Ctx) -> dict[str, Any]:
    acmi = await _write(ctx, request)
    await ctx.call(acmi.delete, entity)
    return {"deleted": entity}


@router.get("/v1/namespaces/{category}/entities", summary="Entities of a category")
async def list_entities(
    request: Request,
    category: Annotated[str, Path(max_length=128)],
    ctx: Ctx,
) -> dict[str, Any]:
    acmi = await _read(ctx, request)
    return {"category": category, "entities": await ctx.call(acmi.list, category)}


# --- profile --------------------------------------------------------------------------------


@router.get("/v1/entities/{entity}/profile", summary="The profile (404 when none)")
async def get_profile(request: Request, entity: Entity, ctx: Ctx) -> dict[str, Any]:
    acmi = await _read(ctx, request)
    profile = await ctx.call(acmi.profile.get, entity)
    if profile is None:
        raise NotFound(f"profile: {entity} has no profile", field="profile")
    return profile


@router.put(
    "/v1/entities/{entity}/profile",
    summary="Replace the profile (a JSON object)",
    openapi_extra=_object_body("the new profile"),
)
async def put_profile(request: Request, entity: Entity, ctx: Ctx) -> dict[str, Any]:
    acmi = await _write(ctx, request)
    doc = await _object(request, acmi, "profile")
    stored = await ctx.call(acmi.profile.set, entity, doc)
    return stored or {}


@router.patch(
    "/v1/entities/{entity}/profile",
    summary="Shallow-merge into the profile, atomically; returns the merged profile",
    openapi_extra=_object_body("fields to merge"),
)
async def patch_profile(request: Request, entity: Entity, ctx: Ctx) -> dict[str, Any]:
    acmi = await _write(ctx, request)
    partial = await _object(request, acmi, "profile")
    merged = await ctx.call(acmi.profile.merge, entity, partial)
    return merged or {}


@router.delete("/v1/entities/{entity}/profile", summary="Delete the profile")
async def delete_profile(request: Request, entity: Entity, ctx: Ctx) -> dict[str, Any]:
    acmi = await _write(ctx, request)
    await ctx.call(acmi.profile.delete, entity)
    return {"deleted": f"{entity}/profile"}


# --- signals --------------------------------------------------------------------------------


@router.get("/v1/entities/{entity}/signals", summary="All signals ({} when none)")
async def get_signals(request: Request, entity: Entity, ctx: Ctx) -> dict[str, Any]:
    acmi = await _read(ctx, request)
    return await ctx.call(acmi.signals.all, entity)


@router.put(
    "/v1/entities/{entity}/signals",
    summary="Replace all signals",
    openapi_extra=_object_body("the whole signals map"),
)
async def put_signals(request: Request, entity: Entity, ctx: Ctx) -> dict[str, Any]:
    acmi = await _write(ctx, request)
    values = await _object(request, acmi, "signals")
    await ctx.call(acmi.signals.replace, entity, values)
    return values


@router.patch(
    "/v1/entities/{entity}/signals",
    summary="Set the given signals, keep the others (atomic)",
    openapi_extra=_object_body("signals to set"),
)
async def patch_signals(request: Request, entity: Entity, ctx: Ctx) -> dict[str, Any]:
    acmi = await _write(ctx, request)
    values = await _object(request, acmi, "signals")
    await ctx.call(acmi.signals.update, entity, values)
    return await ctx.call(acmi.signals.all, entity)


@router.delete("/v1/entities/{entity}/signals", summary="Delete all signals")
async def delete_signals(request: Request, entity: Entity, ctx: Ctx) -> dict[str, Any]:
    acmi = await _write(ctx, request)
    await ctx.call(acmi.signals.clear, entity)
    return {"deleted": f"{entity}/signals"}


_MISSING = object()


@router.get("/v1/entities/{entity}/signals/{key}", summary="One signal (404 when missing)")
async def get_signal(request: Request, entity: Entity, key: SignalKey, ctx: Ctx) -> dict[str, Any]:
    acmi = await _read(ctx, request)
    value = await ctx.call(acmi.signals.get, entity, key, _MISSING)
    if value is _MISSING:
        raise NotFound(f"signal: {entity} has no signal {key!r}", field="key")
    return {"key": key, "value": value}


@router.put(
    "/v1/entities/{entity}/signals/{key}",
    summary="Set one signal (the body is its JSON value)",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}}
    },
)
async def put_signal(request: Request, entity: Entity, key: SignalKey, ctx: Ctx) -> dict[str, Any]:
    acmi = await _write(ctx, request)
    value = await read_json(request, acmi.settings.max_body_bytes)
    await ctx.call(acmi.signals.set, entity, key, value)
    return {"key": key, "value": value}


@router.delete("/v1/entities/{entity}/signals/{key}", summary="Delete one signal")
async def delete_signal(
    request: Request, entity: Entity, key: SignalKey, ctx: Ctx
) -> dict[str, Any]:
    acmi = await _write(ctx, request)
    await ctx.call(acmi.signals.delete, entity, key)
    return {"deleted": f"{entity}/signals/{key}"}


# --- timeline -------------------------------------------------------------------------------


@router.get("/v1/entities/{entity}/timeline", summary="Events, oldest first; bounds inclusive")
async def get_timeline(
    request: Request,
    entity: Entity,
    ctx: Ctx,
    since_ms: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    until_ms: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
    reverse: bool = False,
) -> dict[str, Any]:
    acmi = await _read(ctx, request)
    events = await ctx.call(
        lambda: acmi.timeline.read(
            entity, limit=limit, reverse=reverse, since_ms=since_ms, until_ms=until_ms
        )
    )
    return {
        "events": [e.to_dict() for e in events],
        "skipped": [s.__dict__ for s in events.skipped],
    }

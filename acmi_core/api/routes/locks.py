"""Leases with fencing tokens (the Lock-Protocol): claim, renew, release, get.

Each route is one lock operation, one round trip. A losing claim is a 409 whose
message names the holder and the expiry (field ``resource``, rule ``held``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from acmi_core.api.app import api_context
from acmi_core.api.shapes import Json, Metered, object_body, request_body, require

router = APIRouter(tags=["locks"])

Resource = Annotated[str, Path(description="the locked thing, [A-Za-z0-9_.:-]{1,200}")]

TTL = {"type": "integer", "minimum": 1000, "maximum": 86_400_000, "description": "lease, ms"}
TOKEN = {"type": "string", "description": "the owner_token the claim returned"}


ACCESS = Metered(reads="LockReads", writes="LockOperations")
_read, _write = ACCESS.read, ACCESS.write


@router.post(
    "/v1/locks/{resource}/claim",
    summary="Claim the lease (409 names the holder and its expiry); returns the owner token",
    openapi_extra=request_body(
        "who claims, for how long",
        ["owner", "ttl_ms"],
        {"owner": {"type": "string", "description": "entity id, e.g. agent:claude"}, "ttl_ms": TTL},
    ),
    response_model=Json,
)
async def claim(request: Request, resource: Resource) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    owner, ttl_ms = require(await object_body(request, acmi), "owner", "ttl_ms")
    lease = await ctx.call(acmi.locks.claim, resource, owner, ttl_ms)
    return JSONResponse(lease.to_dict())


@router.post(
    "/v1/locks/{resource}/renew",
    summary="Extend the lease to now + ttl_ms (owner token only)",
    openapi_extra=request_body(
        "the owner token and the new ttl",
        ["owner_token", "ttl_ms"],
        {"owner_token": TOKEN, "ttl_ms": TTL},
    ),
    response_model=Json,
)
async def renew(request: Request, resource: Resource) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    token, ttl_ms = require(await object_body(request, acmi), "owner_token", "ttl_ms")
    lease = await ctx.call(acmi.locks.renew, resource, token, ttl_ms)
    return JSONResponse(lease.to_dict())


@router.post(
    "/v1/locks/{resource}/release",
    summary="Release the lease (owner token only)",
    openapi_extra=request_body("the owner token", ["owner_token"], {"owner_token": TOKEN}),
    response_model=Json,
)
async def release(request: Request, resource: Resource) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    (token,) = require(await object_body(request, acmi), "owner_token")
    lease = await ctx.call(acmi.locks.release, resource, token)
    return JSONResponse({**lease.to_dict(), "released": True})


@router.get(
    "/v1/locks/{resource}",
    summary="The lease now: holder and expiry (never the token), and the last fence",
    response_model=Json,
)
async def get_lock(request: Request, resource: Resource) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    state = await ctx.call(acmi.locks.get, resource)
    return JSONResponse(state.to_dict())

"""Leases with fencing tokens (the Lock-Protocol): claim, renew, release, get.

Each route is one lock operation, one round trip. A losing claim is a 409 whose
message names the holder and the expiry (field ``resource``, rule ``held``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer

from acmi_core.api.app import ApiContext, context
from acmi_core.api.body import read_json
from acmi_core.auth.apikeys import Scope
from acmi_core.client import Acmi
from acmi_core.errors import AcmiValidationError

router = APIRouter(tags=["locks"], dependencies=[Depends(HTTPBearer(auto_error=False))])

Json = dict[str, Any]
Resource = Annotated[str, Path(description="the locked thing, [A-Za-z0-9_.:-]{1,200}")]
Ctx = Annotated[ApiContext, Depends(context)]


def _body(description: str, required: list[str], props: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "required": required, "properties": props}
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": schema}},
        }
    }


TTL = {"type": "integer", "minimum": 1000, "maximum": 86_400_000, "description": "lease, ms"}
TOKEN = {"type": "string", "description": "the owner_token the claim returned"}


async def _fields(request: Request, acmi: Acmi, *names: str) -> list[Any]:
    body = await read_json(request, acmi.settings.max_body_bytes)
    if not isinstance(body, dict):
        raise AcmiValidationError("body", "object", "must be a JSON object")
    for name in names:
        if name not in body:
            raise AcmiValidationError(name, "required", "is required")
    return [body[name] for name in names]


async def _write(ctx: ApiContext, request: Request) -> Acmi:
    _, acmi = await ctx.authorize(request, Scope.WRITE)
    ctx.observer.metric("LockOperations")
    return acmi


@router.post(
    "/v1/locks/{resource}/claim",
    summary="Claim the lease (409 names the holder and its expiry); returns the owner token",
    openapi_extra=_body(
        "who claims, for how long",
        ["owner", "ttl_ms"],
        {"owner": {"type": "string", "description": "entity id, e.g. agent:claude"}, "ttl_ms": TTL},
    ),
    response_model=Json,
)
async def claim(request: Request, resource: Resource, ctx: Ctx) -> JSONResponse:
    acmi = await _write(ctx, request)
    owner, ttl_ms = await _fields(request, acmi, "owner", "ttl_ms")
    lease = await ctx.call(acmi.locks.claim, resource, owner, ttl_ms)
    return JSONResponse(lease.to_dict())


@router.post(
    "/v1/locks/{resource}/renew",
    summary="Extend the lease to now + ttl_ms (owner token only)",
    openapi_extra=_body(
        "the owner token and the new ttl",
        ["owner_token", "ttl_ms"],
        {"owner_token": TOKEN, "ttl_ms": TTL},
    ),
    response_model=Json,
)
async def renew(request: Request, resource: Resource, ctx: Ctx) -> JSONResponse:
    acmi = await _write(ctx, request)
    token, ttl_ms = await _fields(request, acmi, "owner_token", "ttl_ms")
    lease = await ctx.call(acmi.locks.renew, resource, token, ttl_ms)
    return JSONResponse(lease.to_dict())


@router.post(
    "/v1/locks/{resource}/release",
    summary="Release the lease (owner token only)",
    openapi_extra=_body("the owner token", ["owner_token"], {"owner_token": TOKEN}),
    response_model=Json,
)
async def release(request: Request, resource: Resource, ctx: Ctx) -> JSONResponse:
    acmi = await _write(ctx, request)
    (token,) = await _fields(request, acmi, "owner_token")
    lease = await ctx.call(acmi.locks.release, resource, token)
    return JSONResponse({**lease.to_dict(), "released": True})


@router.get(
    "/v1/locks/{resource}",
    summary="The lease now: holder and expiry (never the token), and the last fence",
    response_model=Json,
)
async def get_lock(request: Request, resource: Resource, ctx: Ctx) -> JSONResponse:
    _, acmi = await ctx.authorize(request, Scope.READ)
    ctx.observer.metric("LockReads")
    state = await ctx.call(acmi.locks.get, resource)
    return JSONResponse(state.to_dict())

"""Leases with fencing tokens (the Lock-Protocol): claim, renew, release, get.

Each route is one lock operation, one round trip. A losing claim is a 409 whose
message names the holder and the expiry (field ``resource``, rule ``held``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import Json, object_body, request_body, require
from acmi_core.coordination.results import ReleasedBody

router = APIRouter(tags=["locks"])
route = registrar(router, "locks")

Resource = Annotated[str, Path(description="the locked thing, [A-Za-z0-9_.:-]{1,200}")]

TTL = {"type": "integer", "minimum": 1000, "maximum": 86_400_000, "description": "lease, ms"}
TOKEN = {"type": "string", "description": "the owner_token the claim returned"}


@route(
    "locks.claim",
    openapi_extra=request_body(
        "who claims, for how long",
        ["owner", "ttl_ms"],
        {"owner": {"type": "string", "description": "entity id, e.g. agent:claude"}, "ttl_ms": TTL},
    ),
    response_model=Json,
)
async def claim(req: Authorized, resource: Resource) -> JSONResponse:
    acmi = req.acmi
    owner, ttl_ms = require(await object_body(req.request, acmi), "owner", "ttl_ms")
    lease = await req.call(acmi.locks.claim, resource, owner, ttl_ms)
    return JSONResponse(lease.to_dict())


@route(
    "locks.renew",
    openapi_extra=request_body(
        "the owner token and the new ttl",
        ["owner_token", "ttl_ms"],
        {"owner_token": TOKEN, "ttl_ms": TTL},
    ),
    response_model=Json,
)
async def renew(req: Authorized, resource: Resource) -> JSONResponse:
    acmi = req.acmi
    token, ttl_ms = require(await object_body(req.request, acmi), "owner_token", "ttl_ms")
    lease = await req.call(acmi.locks.renew, resource, token, ttl_ms)
    return JSONResponse(lease.to_dict())


@route(
    "locks.release",
    openapi_extra=request_body("the owner token", ["owner_token"], {"owner_token": TOKEN}),
    response_model=Json,
)
async def release(req: Authorized, resource: Resource) -> JSONResponse:
    acmi = req.acmi
    (token,) = require(await object_body(req.request, acmi), "owner_token")
    lease = await req.call(acmi.locks.release, resource, token)
    released: ReleasedBody = {**lease.to_dict(), "released": True}
    return JSONResponse(released)


@route("locks.get", response_model=Json)
async def get_lock(req: Authorized, resource: Resource) -> JSONResponse:
    acmi = req.acmi
    state = await req.call(acmi.locks.get, resource)
    return JSONResponse(state.to_dict())

"""Leases with fencing tokens (the Lock-Protocol): claim, renew, release, get.

Each route is one lock operation, one round trip; its input is its row's params model.
A losing claim is a 409 whose message names the holder and the expiry (field
``resource``, rule ``held``)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import Json
from acmi_core.coordination.locks import Lease
from acmi_core.coordination.results import ReleasedBody
from acmi_core.operations.params.locks import (
    LocksClaimParams,
    LocksGetParams,
    LocksReleaseParams,
    LocksRenewParams,
)

router = APIRouter(tags=["locks"])
route = registrar(router, "locks")


@route("locks.claim", about="who claims, for how long", response_model=Json)
async def claim(req: Authorized) -> JSONResponse:
    lease = await req.run(await req.params(LocksClaimParams))
    return JSONResponse(lease.to_dict())


@route("locks.renew", about="the owner token and the new ttl", response_model=Json)
async def renew(req: Authorized) -> JSONResponse:
    lease = await req.run(await req.params(LocksRenewParams))
    return JSONResponse(lease.to_dict())


@route("locks.release", about="the owner token", response_model=Json)
async def release(req: Authorized) -> JSONResponse:
    lease: Lease = await req.run(await req.params(LocksReleaseParams))
    released: ReleasedBody = {**lease.to_dict(), "released": True}
    return JSONResponse(released)


@route("locks.get", response_model=Json)
async def get_lock(req: Authorized) -> JSONResponse:
    state = await req.run(await req.params(LocksGetParams))
    return JSONResponse(state.to_dict())

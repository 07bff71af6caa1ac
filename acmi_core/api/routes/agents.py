"""An agent's heartbeat, spawns, active threads and latest rollup (``acmi.agents``).

``{agent}`` is ``claude`` or ``agent:claude``. Each route is one core call, one round
trip; its input is its row's params model (the rollup's body excepted, see there). The
bootstrap bundle (``GET /v1/agents/{agent}/bootstrap``) is another function's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import Json, StoredJSON, object_body, request_body, require
from acmi_core.base.errors import NotFound
from acmi_core.coordination.results import JoinedBody, LeftBody, SpawnsBody, ThreadEntry
from acmi_core.operations.params.agents import (
    AgentsHeartbeatParams,
    AgentsJoinParams,
    AgentsLeaveParams,
    AgentsRollupGetParams,
    AgentsSpawnParams,
    AgentsSpawnsParams,
    AgentsThreadsParams,
)

router = APIRouter(tags=["agents"])
route = registrar(router, "agents")

Agent = Annotated[str, Path(max_length=256, description="claude or agent:claude")]


@route(
    "agents.heartbeat",
    about="status (default ACTIVE) and an optional note; the body may be empty",
    optional_body=True,
    response_model=Json,
)
async def heartbeat(req: Authorized) -> StoredJSON:
    return StoredJSON(await req.run(await req.params(AgentsHeartbeatParams)))


@route("agents.spawn", about="the session", response_model=Json, status_code=201)
async def spawn(req: Authorized) -> StoredJSON:
    return StoredJSON(await req.run(await req.params(AgentsSpawnParams)), status_code=201)


@route("agents.spawns", response_model=Json)
async def spawns(req: Authorized) -> StoredJSON:
    body: SpawnsBody = {"spawns": await req.run(await req.params(AgentsSpawnsParams))}
    return StoredJSON(body)


@route(
    "agents.join", about="the role; the body may be empty", optional_body=True, response_model=Json
)
async def join(req: Authorized) -> StoredJSON:
    params = await req.params(AgentsJoinParams)
    entry: ThreadEntry = await req.run(params)
    joined: JoinedBody = {"thread": params.thread, **entry}
    return StoredJSON(joined)


@route("agents.leave", response_model=Json)
async def leave(req: Authorized) -> StoredJSON:
    params = await req.params(AgentsLeaveParams)
    await req.run(params)
    left: LeftBody = {"thread": params.thread, "left": True}
    return StoredJSON(left)


# GET lists the threads; the MCP tool's action, thread and role (add, remove) are the
# join and leave routes here.
@route("agents.threads", exclude=("action", "thread", "role"), response_model=Json)
async def threads(req: Authorized) -> StoredJSON:
    return StoredJSON({"threads": await req.run(await req.params(AgentsThreadsParams))})


# Its own reader: the body's fields beyond the summary are stored as written (the
# params model, the MCP tool's, takes the summary only).
@route(
    "agents.rollup.put",
    openapi_extra=request_body(
        "the summary and any other fields", ["summary"], {"summary": {"type": "string"}}
    ),
    response_model=Json,
)
async def set_rollup(req: Authorized, agent: Agent) -> StoredJSON:
    acmi = req.acmi
    body = await object_body(req.request, acmi)
    (summary,) = require(body, "summary")
    extra = {k: v for k, v in body.items() if k not in ("summary", "ts")}
    doc = await req.call(acmi.agents.set_rollup, agent, summary, **extra)
    return StoredJSON(doc)


@route("agents.rollup.get", response_model=Json)
async def rollup(req: Authorized) -> StoredJSON:
    params = await req.params(AgentsRollupGetParams)
    doc = await req.run(params)
    if doc is None:
        message = f"rollup: {params.agent} has no rollup yet"
        raise NotFound(message, field="agent", rule="has_rollup")
    return StoredJSON(doc)

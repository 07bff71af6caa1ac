"""An agent's heartbeat, spawns, active threads and latest rollup (``acmi.agents``).

``{agent}`` is ``claude`` or ``agent:claude``. Each route is one core call, one round
trip. The bootstrap bundle (``GET /v1/agents/{agent}/bootstrap``) is another function's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import (
    Json,
    StoredJSON,
    object_body,
    read_fields,
    request_body,
    require,
)
from acmi_core.base.errors import NotFound
from acmi_core.coordination.results import JoinedBody, LeftBody, SpawnsBody

router = APIRouter(tags=["agents"])
route = registrar(router, "agents")

Agent = Annotated[str, Path(max_length=256, description="claude or agent:claude")]
Thread = Annotated[str, Path(min_length=1, max_length=256, description="the thread's key or id")]


STATUS = {
    "type": "string",
    "pattern": "^[A-Za-z0-9_ -]{1,64}$",
    "description": "default ACTIVE",
}


@route(
    "agents.heartbeat",
    openapi_extra=request_body(
        "status (default ACTIVE) and an optional note; the body may be empty",
        [],
        {"status": STATUS, "note": {"type": "string", "maxLength": 500}},
        optional=True,
    ),
    response_model=Json,
)
async def heartbeat(req: Authorized, agent: Agent) -> StoredJSON:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, (), ("status", "note"), empty_ok=True)
    beat = await req.call(
        acmi.agents.heartbeat, agent, body.get("status", "ACTIVE"), body.get("note")
    )
    return StoredJSON(beat)


@route(
    "agents.spawn",
    openapi_extra=request_body(
        "the session",
        ["session_id", "model_id"],
        {
            "session_id": {"type": "string", "maxLength": 256},
            "model_id": {"type": "string", "maxLength": 256},
            "host": {"type": "string", "maxLength": 256},
        },
    ),
    response_model=Json,
    status_code=201,
)
async def spawn(req: Authorized, agent: Agent) -> StoredJSON:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, ("session_id", "model_id"), ("host",))
    record = await req.call(
        acmi.agents.spawn, agent, body["session_id"], body["model_id"], body.get("host")
    )
    return StoredJSON(record, status_code=201)


@route("agents.spawns", response_model=Json)
async def spawns(
    req: Authorized,
    agent: Agent,
    limit: Annotated[int, Query(ge=1, le=1000)] = 5,
) -> StoredJSON:
    acmi = req.acmi
    records = await req.call(acmi.agents.spawns, agent, limit)
    body: SpawnsBody = {"spawns": records}
    return StoredJSON(body)


@route(
    "agents.join",
    openapi_extra=request_body(
        "the role; the body may be empty",
        [],
        {"role": {"type": "string", "maxLength": 256}},
        optional=True,
    ),
    response_model=Json,
)
async def join(req: Authorized, agent: Agent, thread: Thread) -> StoredJSON:
    acmi = req.acmi
    body = await read_fields(req.request, acmi, (), ("role",), empty_ok=True)
    entry = await req.call(acmi.agents.join, agent, thread, body.get("role", "participant"))
    joined: JoinedBody = {"thread": thread, **entry}
    return StoredJSON(joined)


@route("agents.leave", response_model=Json)
async def leave(req: Authorized, agent: Agent, thread: Thread) -> StoredJSON:
    acmi = req.acmi
    await req.call(acmi.agents.leave, agent, thread)
    left: LeftBody = {"thread": thread, "left": True}
    return StoredJSON(left)


@route("agents.threads", response_model=Json)
async def threads(req: Authorized, agent: Agent) -> StoredJSON:
    acmi = req.acmi
    active = await req.call(acmi.agents.active, agent)
    return StoredJSON({"threads": active})


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
async def rollup(req: Authorized, agent: Agent) -> StoredJSON:
    acmi = req.acmi
    doc = await req.call(acmi.agents.rollup, agent)
    if doc is None:
        raise NotFound(f"rollup: {agent} has no rollup yet", field="agent", rule="has_rollup")
    return StoredJSON(doc)

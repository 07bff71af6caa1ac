"""An agent's heartbeat, spawns, active threads and latest rollup (``acmi.agents``).

``{agent}`` is ``claude`` or ``agent:claude``. Each route is one core call, one round
trip. The bootstrap bundle (``GET /v1/agents/{agent}/bootstrap``) is another function's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from acmi_core.api.app import api_context
from acmi_core.api.shapes import Json, Metered, object_body, read_fields, request_body, require
from acmi_core.base.errors import NotFound

router = APIRouter(tags=["agents"])

Agent = Annotated[str, Path(max_length=256, description="claude or agent:claude")]
Thread = Annotated[str, Path(min_length=1, max_length=256, description="the thread's key or id")]


ACCESS = Metered(reads="AgentReads", writes="AgentWrites")
_read, _write = ACCESS.read, ACCESS.write


STATUS = {
    "type": "string",
    "pattern": "^[A-Za-z0-9_ -]{1,64}$",
    "description": "default ACTIVE",
}


@router.post(
    "/v1/agents/{agent}/heartbeat",
    summary="I am alive: last_heartbeat_ts, status and status_note signals + activity index",
    openapi_extra=request_body(
        "status (default ACTIVE) and an optional note; the body may be empty",
        [],
        {"status": STATUS, "note": {"type": "string", "maxLength": 500}},
        optional=True,
    ),
    response_model=Json,
)
async def heartbeat(request: Request, agent: Agent) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    body = await read_fields(request, acmi, (), ("status", "note"), empty_ok=True)
    beat = await ctx.call(
        acmi.agents.heartbeat, agent, body.get("status", "ACTIVE"), body.get("note")
    )
    return JSONResponse(beat)


@router.post(
    "/v1/agents/{agent}/spawns",
    summary="Log a session start (the spawns log, never the timeline)",
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
async def spawn(request: Request, agent: Agent) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    body = await read_fields(request, acmi, ("session_id", "model_id"), ("host",))
    record = await ctx.call(
        acmi.agents.spawn, agent, body["session_id"], body["model_id"], body.get("host")
    )
    return JSONResponse(record, status_code=201)


@router.get(
    "/v1/agents/{agent}/spawns",
    summary="The newest spawns, newest first",
    response_model=Json,
)
async def spawns(
    request: Request,
    agent: Agent,
    limit: Annotated[int, Query(ge=1, le=1000)] = 5,
) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    records = await ctx.call(acmi.agents.spawns, agent, limit)
    return JSONResponse({"spawns": records})


@router.put(
    "/v1/agents/{agent}/threads/{thread:path}",
    summary="Join a thread (active context), with a role (default participant)",
    openapi_extra=request_body(
        "the role; the body may be empty",
        [],
        {"role": {"type": "string", "maxLength": 256}},
        optional=True,
    ),
    response_model=Json,
)
async def join(request: Request, agent: Agent, thread: Thread) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    body = await read_fields(request, acmi, (), ("role",), empty_ok=True)
    entry = await ctx.call(acmi.agents.join, agent, thread, body.get("role", "participant"))
    return JSONResponse({"thread": thread, **entry})


@router.delete(
    "/v1/agents/{agent}/threads/{thread:path}",
    summary="Leave a thread",
    response_model=Json,
)
async def leave(request: Request, agent: Agent, thread: Thread) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    await ctx.call(acmi.agents.leave, agent, thread)
    return JSONResponse({"thread": thread, "left": True})


@router.get(
    "/v1/agents/{agent}/threads",
    summary="The threads the agent is active in: thread -> {role, joined_at}",
    response_model=Json,
)
async def threads(request: Request, agent: Agent) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    active = await ctx.call(acmi.agents.active, agent)
    return JSONResponse({"threads": active})


@router.put(
    "/v1/agents/{agent}/rollup",
    summary="Replace the latest rollup: {summary, ...any other fields}",
    openapi_extra=request_body(
        "the summary and any other fields", ["summary"], {"summary": {"type": "string"}}
    ),
    response_model=Json,
)
async def set_rollup(request: Request, agent: Agent) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _write(ctx, request)
    body = await object_body(request, acmi)
    (summary,) = require(body, "summary")
    extra = {k: v for k, v in body.items() if k not in ("summary", "ts")}
    doc = await ctx.call(acmi.agents.set_rollup, agent, summary, **extra)
    return JSONResponse(doc)


@router.get(
    "/v1/agents/{agent}/rollup",
    summary="The latest rollup (404 when there is none)",
    response_model=Json,
)
async def rollup(request: Request, agent: Agent) -> JSONResponse:
    ctx = api_context(request)
    acmi = await _read(ctx, request)
    doc = await ctx.call(acmi.agents.rollup, agent)
    if doc is None:
        raise NotFound(f"rollup: {agent} has no rollup yet", field="agent", rule="has_rollup")
    return JSONResponse(doc)

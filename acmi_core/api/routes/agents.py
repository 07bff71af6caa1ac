"""An agent's heartbeat, spawns, active threads and latest rollup (``acmi.agents``).

``{agent}`` is ``claude`` or ``agent:claude``. Each route is one core call, one round
trip. The bootstrap bundle (``GET /v1/agents/{agent}/bootstrap``) is another function's."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer

from acmi_core.api.app import ApiContext, context
from acmi_core.api.body import parse_json, read_raw
from acmi_core.auth.apikeys import Scope
from acmi_core.client import Acmi
from acmi_core.errors import AcmiValidationError, NotFound

router = APIRouter(tags=["agents"], dependencies=[Depends(HTTPBearer(auto_error=False))])

Json = dict[str, Any]
Agent = Annotated[str, Path(max_length=256, description="claude or agent:claude")]
Thread = Annotated[str, Path(min_length=1, max_length=256, description="the thread's key or id")]
Ctx = Annotated[ApiContext, Depends(context)]


def _body(description: str, required: list[str], props: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "required": required, "properties": props}
    return {
        "requestBody": {
            "required": bool(required),
            "description": description,
            "content": {"application/json": {"schema": schema}},
        }
    }


async def _object(request: Request, acmi: Acmi, *, optional: bool = False) -> dict[str, Any]:
    """The JSON object body; with ``optional`` an empty body means ``{}``."""
    raw = await read_raw(request, acmi.settings.max_body_bytes)
    if optional and not raw.strip():
        return {}
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise AcmiValidationError("body", "object", "must be a JSON object")
    return body


def _required(body: dict[str, Any], *names: str) -> list[Any]:
    for name in names:
        if name not in body:
            raise AcmiValidationError(name, "required", "is required")
    return [body[name] for name in names]


def _only(body: dict[str, Any], *names: str) -> None:
    unknown = sorted(set(body) - set(names))
    if unknown:
        raise AcmiValidationError(
            unknown[0], "unknown_field", f"is not a field here (fields: {', '.join(names)})"
        )


async def _write(ctx: ApiContext, request: Request) -> Acmi:
    _, acmi = await ctx.authorize(request, Scope.WRITE)
    ctx.observer.metric("AgentWrites")
    return acmi


async def _read(ctx: ApiContext, request: Request) -> Acmi:
    _, acmi = await ctx.authorize(request, Scope.READ)
    ctx.observer.metric("AgentReads")
    return acmi


STATUS = {
    "type": "string",
    "pattern": "^[A-Za-z0-9_ -]{1,64}$",
    "description": "default ACTIVE",
}


@router.post(
    "/v1/agents/{agent}/heartbeat",
    summary="I am alive: last_heartbeat_ts, status and status_note signals + activity index",
    openapi_extra=_body(
        "status (default ACTIVE) and an optional note; the body may be empty",
        [],
        {"status": STATUS, "note": {"type": "string", "maxLength": 500}},
    ),
    response_model=Json,
)
async def heartbeat(request: Request, agent: Agent, ctx: Ctx) -> JSONResponse:
    acmi = await _write(ctx, request)
    body = await _object(request, acmi, optional=True)
    _only(body, "status", "note")
    beat = await ctx.call(
        acmi.agents.heartbeat, agent, body.get("status", "ACTIVE"), body.get("note")
    )
    return JSONResponse(beat)


@router.post(
    "/v1/agents/{agent}/spawns",
    summary="Log a session start (the spawns log, never the timeline)",
    openapi_extra=_body(
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
async def spawn(request: Request, agent: Agent, ctx: Ctx) -> JSONResponse:
    acmi = await _write(ctx, request)
    body = await _object(request, acmi)
    _only(body, "session_id", "model_id", "host")
    session_id, model_id = _required(body, "session_id", "model_id")
    record = await ctx.call(acmi.agents.spawn, agent, session_id, model_id, body.get("host"))
    return JSONResponse(record, status_code=201)


@router.get(
    "/v1/agents/{agent}/spawns",
    summary="The newest spawns, newest first",
    response_model=Json,
)
async def spawns(
    request: Request,
    agent: Agent,
    ctx: Ctx,
    limit: Annotated[int, Query(ge=1, le=1000)] = 5,
) -> JSONResponse:
    acmi = await _read(ctx, request)
    records = await ctx.call(acmi.agents.spawns, agent, limit)
    return JSONResponse({"spawns": records})


@router.put(
    "/v1/agents/{agent}/threads/{thread}",
    summary="Join a thread (active context), with a role (default participant)",
    openapi_extra=_body(
        "the role; the body may be empty", [], {"role": {"type": "string", "maxLength": 256}}
    ),
    response_model=Json,
)
async def join(request: Request, agent: Agent, thread: Thread, ctx: Ctx) -> JSONResponse:
    acmi = await _write(ctx, request)
    body = await _object(request, acmi, optional=True)
    _only(body, "role")
    entry = await ctx.call(acmi.agents.join, agent, thread, body.get("role", "participant"))
    return JSONResponse({"thread": thread, **entry})


@router.delete(
    "/v1/agents/{agent}/threads/{thread}",
    summary="Leave a thread",
    response_model=Json,
)
async def leave(request: Request, agent: Agent, thread: Thread, ctx: Ctx) -> JSONResponse:
    acmi = await _write(ctx, request)
    await ctx.call(acmi.agents.leave, agent, thread)
    return JSONResponse({"thread": thread, "left": True})


@router.get(
    "/v1/agents/{agent}/threads",
    summary="The threads the agent is active in: thread -> {role, joined_at}",
    response_model=Json,
)
async def threads(request: Request, agent: Agent, ctx: Ctx) -> JSONResponse:
    acmi = await _read(ctx, request)
    active = await ctx.call(acmi.agents.active, agent)
    return JSONResponse({"threads": active})


@router.put(
    "/v1/agents/{agent}/rollup",
    summary="Replace the latest rollup: {summary, ...any other fields}",
    openapi_extra=_body(
        "the summary and any other fields", ["summary"], {"summary": {"type": "string"}}
    ),
    response_model=Json,
)
async def set_rollup(request: Request, agent: Agent, ctx: Ctx) -> JSONResponse:
    acmi = await _write(ctx, request)
    body = await _object(request, acmi)
    (summary,) = _required(body, "summary")
    extra = {k: v for k, v in body.items() if k not in ("summary", "ts")}
    doc = await ctx.call(acmi.agents.set_rollup, agent, summary, **extra)
    return JSONResponse(doc)


@router.get(
    "/v1/agents/{agent}/rollup",
    summary="The latest rollup (404 when there is none)",
    response_model=Json,
)
async def rollup(request: Request, agent: Agent, ctx: Ctx) -> JSONResponse:
    acmi = await _read(ctx, request)
    doc = await ctx.call(acmi.agents.rollup, agent)
    if doc is None:
        raise NotFound(f"rollup: {agent} has no rollup yet", field="agent", rule="has_rollup")
    return JSONResponse(doc)

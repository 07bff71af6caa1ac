"""The wake bundle: ``GET /v1/agents/{agent}/bootstrap`` reads it, ``POST`` logs a spawn
and reads it in the same step. One round trip either way (``store/lua/bootstrap.lua``).

The body is the bundle's text exactly as the budget measured it: JSON, or Markdown
(``format=markdown``) for a prompt. Its size and estimated tokens are in the
``X-Acmi-Bundle-Bytes`` and ``X-Acmi-Bundle-Tokens`` headers; what a budget cut is
listed in the bundle itself."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import object_body, refuse_unknown, request_body
from acmi_core.base.errors import AcmiValidationError
from acmi_core.bootstrap.budget import MIN_BUDGET_BYTES, MIN_BUDGET_TOKENS
from acmi_core.bootstrap.bundle import (
    DEFAULT_EVENTS,
    FORMATS,
    MAX_EVENTS,
    ON_DEMAND,
    SCOPES,
    Bundle,
)

router = APIRouter(tags=["bootstrap"])
route = registrar(router, "bootstrap")


Agent = Annotated[str, Path(max_length=256, description="claude or agent:claude")]
SCOPE_DOC = (
    "main (everything; takes the handoff with a spawn) | group (hot memory and today, "
    "nothing private) | subagent (task context, one topic, hot memory)"
)
INCLUDE_DOC = (
    f"level-3 memory to load, comma-separated: {', '.join(ON_DEMAND)} (group: yesterday only)"
)
TOPIC_DOC = "the one topic file to load: <slug> or topic:<slug> (main, subagent)"
OPTIONS: dict[str, Any] = {
    "scope": {"type": "string", "enum": list(SCOPES), "default": "main"},
    "format": {"type": "string", "enum": list(FORMATS), "default": "json"},
    "events": {"type": "integer", "minimum": 0, "maximum": MAX_EVENTS},
    "max_bytes": {"type": "integer", "minimum": MIN_BUDGET_BYTES},
    "max_tokens": {"type": "integer", "minimum": MIN_BUDGET_TOKENS},
    "include": {"type": "string", "description": INCLUDE_DOC},
    "topic": {"type": "string", "maxLength": 134, "description": TOPIC_DOC},
}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the bundle: JSON, or text/markdown with format=markdown",
        "content": {"application/json": {}, "text/markdown": {}},
    }
}


def _answer(bundle: Bundle) -> Response:
    media = "application/json" if bundle.format == "json" else "text/markdown; charset=utf-8"
    return Response(
        bundle.text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
        media_type=media,
        headers={
            "X-Acmi-Bundle-Bytes": str(bundle.size_bytes),
            "X-Acmi-Bundle-Tokens": str(bundle.tokens),
        },
    )


@route("bootstrap.read", responses=RESPONSES)
async def read_bundle(
    req: Authorized,
    agent: Agent,
    scope: Annotated[str, Query(description=SCOPE_DOC)] = "main",
    format: Annotated[str, Query(description="json | markdown")] = "json",
    events: Annotated[int, Query(description=f"newest events, 0-{MAX_EVENTS}")] = DEFAULT_EVENTS,
    max_bytes: Annotated[int | None, Query(description="budget in bytes")] = None,
    max_tokens: Annotated[int | None, Query(description="budget in estimated tokens")] = None,
    include: Annotated[str | None, Query(max_length=100, description=INCLUDE_DOC)] = None,
    topic: Annotated[str | None, Query(max_length=134, description=TOPIC_DOC)] = None,
) -> Response:
    acmi = req.acmi
    bundle = await req.call(
        acmi.bootstrap,
        agent,
        scope=scope,
        format=format,
        events=events,
        max_bytes=max_bytes,
        max_tokens=max_tokens,
        include=include,
        topic=topic,
    )
    return _answer(bundle)


@route(
    "bootstrap.spawn",
    openapi_extra=request_body(
        "the spawn to log and the bundle's options",
        ["spawn"],
        {
            "spawn": {
                "type": "object",
                "required": ["session_id", "model_id"],
                "properties": {
                    "session_id": {"type": "string", "maxLength": 256},
                    "model_id": {"type": "string", "maxLength": 256},
                    "host": {"type": "string", "maxLength": 256},
                },
            },
            **OPTIONS,
        },
    ),
    responses=RESPONSES,
)
async def spawn_and_read(req: Authorized, agent: Agent) -> Response:
    acmi = req.acmi
    body = await object_body(req.request, acmi)
    refuse_unknown(body, ("spawn", *OPTIONS))
    if "spawn" not in body:
        raise AcmiValidationError("spawn", "required", "is required: {session_id, model_id}")
    options = {name: body[name] for name in OPTIONS if name in body}
    bundle = await req.call(acmi.bootstrap, agent, spawn=body["spawn"], **options)
    return _answer(bundle)

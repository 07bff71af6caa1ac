"""The RL cycle over HTTP: executions, assessments, improvements, lessons, unassessed.

Each route calls one ``acmi.workflows`` operation: one round trip. ``{workflow}`` is
``workflow:<id>`` or a bare ``<id>``. The lessons of an agent's workflows are at
``GET /v1/lessons?agent=<id>`` (not under ``/v1/agents``, which is the agents function's):
what the agent's next bootstrap starts from. Bad input is a 400 naming the field and the
rule (``score`` ``range``, ``step`` ``step_id``, ``lesson`` ``string``), nothing stored.

Responses are rendered exactly as stored (``render_json``): timeline members another tool
wrote may hold JSON pydantic would not round-trip."""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Query, Request

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import (
    Json,
    StoredJSON,
    check_fields,
    object_body,
    request_body,
)
from acmi_core.base.errors import AcmiValidationError
from acmi_core.client import Acmi
from acmi_core.coordination.workflows import (
    BOOTSTRAP_LESSONS_WINDOW,
    MAX_CORRELATION_LEN,
    MAX_LESSON_LEN,
    MAX_LIMIT,
    actor_id,
    workflow_id,
)

router = APIRouter(tags=["workflows"], default_response_class=StoredJSON)
route = registrar(router, "workflows")

Workflow = Annotated[
    str, Path(max_length=256, description="workflow:<id> or <id>, e.g. deploy-web")
]

STEP: Final = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,128}$", "description": "step id"}
AGENT: Final = {"type": "string", "description": "who acts: entity id (bare id: agent:<id>)"}
CORRELATION: Final = {
    "type": "string",
    "maxLength": MAX_CORRELATION_LEN,
    "description": "the run id (also accepted as correlationId); default <workflow>/<step>",
}


def _body(description: str, required: list[str], props: dict[str, Any]) -> dict[str, Any]:
    """Every workflow body takes ``correlation_id`` and nothing undeclared."""
    return request_body(
        description, required, {**props, "correlation_id": CORRELATION}, closed=True
    )


async def _fields(
    request: Request, acmi: Acmi, required: tuple[str, ...], optional: tuple[str, ...]
) -> dict[str, Any]:
    """The body's fields (:func:`check_fields`); ``correlationId`` is read as
    ``correlation_id``."""
    body = await object_body(request, acmi)
    if "correlationId" in body:
        if "correlation_id" in body:
            raise AcmiValidationError(
                "correlation_id", "one_of", "give correlation_id or correlationId, not both"
            )
        body["correlation_id"] = body.pop("correlationId")
    check_fields(body, required, (*optional, "correlation_id"))
    return body


@route(
    "workflows.execute",
    status_code=201,
    openapi_extra=_body(
        "the step, who ran it, and optionally a summary and payload",
        ["step", "agent"],
        {
            "step": STEP,
            "agent": AGENT,
            "summary": {"type": "string", "maxLength": 500},
            "payload": {"type": "object", "description": "extra fields (not workflow/step)"},
        },
    ),
    response_model=Json,
)
async def execute(req: Authorized, workflow: Workflow) -> StoredJSON:
    acmi = req.acmi
    body = await _fields(req.request, acmi, ("step", "agent"), ("summary", "payload"))
    event = await req.call(
        acmi.workflows.execute,
        workflow,
        body["step"],
        body["agent"],
        summary=body.get("summary"),
        correlation_id=body.get("correlation_id"),
        payload=body.get("payload"),
    )
    return StoredJSON(event.to_dict(), status_code=201)


@route(
    "workflows.assess",
    status_code=201,
    openapi_extra=_body(
        "the step, its score and criteria, who assessed it",
        ["step", "score", "criteria", "agent"],
        {
            "step": STEP,
            "score": {"type": "integer", "minimum": 0, "maximum": 100},
            "criteria": {
                "oneOf": [
                    {
                        "type": "object",
                        "additionalProperties": {"type": ["number", "string"]},
                        "maxProperties": 32,
                    },
                    {"type": "array", "items": {"type": "string"}, "maxItems": 32},
                ]
            },
            "agent": AGENT,
            "note": {"type": "string", "maxLength": 500},
        },
    ),
    response_model=Json,
)
async def assess(req: Authorized, workflow: Workflow) -> StoredJSON:
    acmi = req.acmi
    body = await _fields(req.request, acmi, ("step", "score", "criteria", "agent"), ("note",))
    event = await req.call(
        acmi.workflows.assess,
        workflow,
        body["step"],
        body["score"],
        body["criteria"],
        body["agent"],
        correlation_id=body.get("correlation_id"),
        note=body.get("note"),
    )
    return StoredJSON(event.to_dict(), status_code=201)


@route(
    "workflows.improve",
    status_code=201,
    openapi_extra=_body(
        "the step, the lesson, who learned it",
        ["step", "lesson", "agent"],
        {"step": STEP, "lesson": {"type": "string", "maxLength": MAX_LESSON_LEN}, "agent": AGENT},
    ),
    response_model=Json,
)
async def improve(req: Authorized, workflow: Workflow) -> StoredJSON:
    acmi = req.acmi
    body = await _fields(req.request, acmi, ("step", "lesson", "agent"), ())
    event = await req.call(
        acmi.workflows.improve,
        workflow,
        body["step"],
        body["lesson"],
        body["agent"],
        correlation_id=body.get("correlation_id"),
    )
    return StoredJSON(event.to_dict(), status_code=201)


@route("workflows.lessons", response_model=Json)
async def workflow_lessons(
    req: Authorized,
    workflow: Workflow,
    limit: Annotated[int, Query(ge=1, le=BOOTSTRAP_LESSONS_WINDOW)] = 10,
) -> StoredJSON:
    acmi = req.acmi
    lessons = await req.call(acmi.workflows.lessons, workflow=workflow, limit=limit)
    return StoredJSON({"workflow": str(workflow_id(workflow)), "lessons": lessons})


@route("workflows.unassessed", response_model=Json)
async def unassessed(
    req: Authorized,
    workflow: Workflow,
    since_ms: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
) -> StoredJSON:
    acmi = req.acmi
    found = await req.call(acmi.workflows.unassessed, workflow, since_ms=since_ms, limit=limit)
    return StoredJSON(found.to_dict())


@route("workflows.assessments", response_model=Json)
async def assessments(
    req: Authorized,
    workflow: Workflow,
    step: Annotated[str | None, Query(max_length=128)] = None,
    since_ms: Annotated[float | None, Query(allow_inf_nan=False)] = None,
) -> StoredJSON:
    acmi = req.acmi
    found = await req.call(acmi.workflows.assessments, workflow, step=step, since_ms=since_ms)
    return StoredJSON(found.to_dict())


@route("workflows.agent_lessons", response_model=Json)
async def agent_lessons(
    req: Authorized,
    agent: Annotated[str, Query(min_length=1, max_length=256, description="agent:<id> or <id>")],
    limit: Annotated[int, Query(ge=1, le=BOOTSTRAP_LESSONS_WINDOW)] = 10,
) -> StoredJSON:
    acmi = req.acmi
    lessons = await req.call(acmi.workflows.lessons, agent=agent, limit=limit)
    return StoredJSON({"agent": str(actor_id(agent)), "lessons": lessons})

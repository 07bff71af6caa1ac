"""The RL cycle over HTTP: executions, assessments, improvements, lessons, unassessed.

Each route calls one ``acmi.workflows`` operation, its input its row's params model: one
round trip. ``{workflow}`` is
``workflow:<id>`` or a bare ``<id>``. The lessons of an agent's workflows are at
``GET /v1/lessons?agent=<id>`` (not under ``/v1/agents``, which is the agents function's):
what the agent's next bootstrap starts from. Bad input is a 400 naming the field and the
rule (``score`` ``range``, ``step`` ``step_id``, ``lesson`` ``string``), nothing stored.

Responses are rendered exactly as stored (``render_json``): timeline members another tool
wrote may hold JSON pydantic would not round-trip."""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Path

from acmi_core.api.access import Authorized, registrar
from acmi_core.api.shapes import Json, StoredJSON, check_fields, object_body, request_body
from acmi_core.auth.tiers import check_identity
from acmi_core.base.errors import AcmiValidationError
from acmi_core.coordination.workflows import actor_id, workflow_id
from acmi_core.operations.params.workflows import (
    WorkflowsAssessmentsParams,
    WorkflowsExecuteParams,
    WorkflowsImproveParams,
    WorkflowsLessonsParams,
    WorkflowsUnassessedParams,
)

router = APIRouter(tags=["workflows"], default_response_class=StoredJSON)
route = registrar(router, "workflows")

Workflow = Annotated[
    str, Path(max_length=256, description="workflow:<id> or <id>, e.g. deploy-web")
]
STEP: Final = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,128}$", "description": "step id"}


@route(
    "workflows.execute",
    aliases={"correlationId": "correlation_id"},
    about="the step, who ran it, and optionally a summary and payload",
    status_code=201,
    response_model=Json,
)
async def execute(req: Authorized) -> StoredJSON:
    event = await req.run(await req.params(WorkflowsExecuteParams))
    return StoredJSON(event.to_dict(), status_code=201)


# Its own reader: a score of another JSON type is the core's rule ``integer`` (the params
# model's int would answer ``type``).
@route(
    "workflows.assess",
    status_code=201,
    openapi_extra=request_body(
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
            "agent": {"type": "string", "description": "who acts: entity id (bare id: agent:<id>)"},
            "note": {"type": "string", "maxLength": 500},
            "correlation_id": {
                "type": "string",
                "maxLength": 256,
                "description": "the run id (also accepted as correlationId); default "
                "<workflow>/<step>",
            },
        },
        closed=True,
    ),
    response_model=Json,
)
async def assess(req: Authorized, workflow: Workflow) -> StoredJSON:
    acmi = req.acmi
    body = await object_body(req.request, acmi)
    if "correlationId" in body:
        if "correlation_id" in body:
            raise AcmiValidationError(
                "correlation_id", "one_of", "give correlation_id or correlationId, not both"
            )
        body["correlation_id"] = body.pop("correlationId")
    check_fields(body, ("step", "score", "criteria", "agent"), ("note", "correlation_id"))
    if req.principal.agent is not None:  # who assessed: a bound key's own (auth/tiers)
        check_identity(req.principal.agent, "workflows.assess", body)
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
    aliases={"correlationId": "correlation_id"},
    about="the step, the lesson, who learned it",
    status_code=201,
    response_model=Json,
)
async def improve(req: Authorized) -> StoredJSON:
    event = await req.run(await req.params(WorkflowsImproveParams))
    return StoredJSON(event.to_dict(), status_code=201)


@route("workflows.lessons", exclude=("agent",), response_model=Json)
async def workflow_lessons(req: Authorized) -> StoredJSON:
    params = await req.params(WorkflowsLessonsParams)
    lessons = await req.run(params)
    return StoredJSON({"workflow": str(workflow_id(str(params.workflow))), "lessons": lessons})


@route("workflows.unassessed", response_model=Json)
async def unassessed(req: Authorized) -> StoredJSON:
    found = await req.run(await req.params(WorkflowsUnassessedParams))
    return StoredJSON(found.to_dict())


@route("workflows.assessments", response_model=Json)
async def assessments(req: Authorized) -> StoredJSON:
    found = await req.run(await req.params(WorkflowsAssessmentsParams))
    return StoredJSON(found.to_dict())


# The agent is this route's query and required here (the model's is optional: the
# workflow's route gives the workflow instead).
@route("workflows.agent_lessons", exclude=("workflow",), required=("agent",), response_model=Json)
async def agent_lessons(req: Authorized) -> StoredJSON:
    params = await req.params(WorkflowsLessonsParams)
    lessons = await req.run(params)
    return StoredJSON({"agent": str(actor_id(str(params.agent))), "lessons": lessons})

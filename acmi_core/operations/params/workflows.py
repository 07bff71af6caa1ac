"""The workflows' params: executions, assessments, lessons."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final

from pydantic import Field

from acmi_core.operations.params.base import Ms, Params, bounded

# What the core checks (acmi_core.coordination.workflows), shown in the OpenAPI document.
Workflow = Annotated[
    str, bounded(description="workflow:<id> or <id>, e.g. deploy-web", maxLength=256)
]
Step = Annotated[str, bounded(description="step id, [A-Za-z0-9_.:-]{1,128}", maxLength=128)]
Agent = Annotated[str, Field(description="who acts: entity id (bare id: agent:<id>)")]
Correlation = Annotated[
    str | None,
    bounded(
        description="the run id (also accepted as correlationId); default <workflow>/<step>",
        maxLength=256,
    ),
]
# the HTTP bodies' (the MCP tools' arguments are a contract older than it)
_HTTP_ONLY: Final = frozenset({"correlation_id"})


class WorkflowsAssessParams(Params):
    """Score an executed workflow step 0-100 against criteria (a list of names, or name ->
    result); returns the assessment event."""

    not_tool_arguments: ClassVar[frozenset[str]] = _HTTP_ONLY
    workflow: Workflow
    step: Step
    score: int = bounded(minimum=0, maximum=100)
    criteria: list[str] | dict[str, Any]
    agent: Agent
    correlation_id: Correlation = None
    note: str | None = bounded(None, maxLength=500)


class WorkflowsImproveParams(Params):
    """Record a lesson for a workflow step (it seeds the next bootstrap)."""

    not_tool_arguments: ClassVar[frozenset[str]] = _HTTP_ONLY
    workflow: Workflow
    step: Step
    lesson: str = bounded(maxLength=2000)
    agent: Agent
    correlation_id: Correlation = None


class WorkflowsExecuteParams(Params):
    """Log that an agent executed a workflow step."""

    workflow: Workflow
    step: Step
    agent: Agent
    summary: str | None = bounded(None, maxLength=500)
    correlation_id: Correlation = None
    payload: dict[str, Any] | None = Field(None, description="extra fields (not workflow/step)")


class WorkflowsLessonsParams(Params):
    """The newest lessons of a workflow (or of an agent's workflows), newest first."""

    workflow: Workflow | None = None
    agent: str | None = bounded(None, description="agent:<id> or <id>", maxLength=256)
    limit: int = bounded(10, minimum=1, maximum=200)


class WorkflowsUnassessedParams(Params):
    """Executed steps of a workflow no assessment covers, newest first."""

    workflow: Workflow
    since_ms: Ms = None
    limit: int = bounded(50, minimum=1, maximum=500)


class WorkflowsAssessmentsParams(Params):
    """Scores per step of a workflow: count, mean, last."""

    workflow: Workflow
    step: str | None = bounded(None, maxLength=128)
    since_ms: Ms = None

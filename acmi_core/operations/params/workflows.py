"""The workflows' params: executions, assessments, lessons."""

from __future__ import annotations

from typing import Any

from acmi_core.operations.params.base import Params


class WorkflowsAssessParams(Params):
    """Score an executed workflow step 0-100 against criteria (a list of names, or name ->
    result); returns the assessment event."""

    workflow: str
    step: str
    score: int
    criteria: list[str] | dict[str, Any]
    agent: str
    note: str | None = None


class WorkflowsImproveParams(Params):
    """Record a lesson for a workflow step (it seeds the next bootstrap)."""

    workflow: str
    step: str
    lesson: str
    agent: str


class WorkflowsExecuteParams(Params):
    """Log that an agent executed a workflow step."""

    workflow: str
    step: str
    agent: str
    summary: str | None = None
    correlation_id: str | None = None
    payload: dict[str, Any] | None = None


class WorkflowsLessonsParams(Params):
    """The newest lessons of a workflow (or of an agent's workflows), newest first."""

    workflow: str | None = None
    agent: str | None = None
    limit: int = 10


class WorkflowsUnassessedParams(Params):
    """Executed steps of a workflow no assessment covers, newest first."""

    workflow: str
    since_ms: float | None = None
    limit: int = 50


class WorkflowsAssessmentsParams(Params):
    """Scores per step of a workflow: count, mean, last."""

    workflow: str
    step: str | None = None
    since_ms: float | None = None

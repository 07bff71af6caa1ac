"""``acmi workflow``: the RL cycle (execute, assess, improve, lessons), each command one
row of ``acmi_core/operations/coordination.py`` (``workflows.*``) on the store or, with
``--api``, the deployment. An execute while an earlier run of the step has no assessment
exits 4 (``ACMI_WORKFLOW_REQUIRE_ASSESSMENT``, the seed's rule)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from acmi_core.base.errors import AcmiValidationError
from acmi_core.cli.entities import json_arg, json_object
from acmi_core.cli.output import emit, pairs, table
from acmi_core.cli.state import state

app = typer.Typer(
    help="the RL cycle: execute a workflow step, assess it, learn from it",
    no_args_is_help=True,
)

Workflow = Annotated[str, typer.Argument(help="workflow:<id> or <id>, e.g. deploy-web")]
Step = Annotated[str, typer.Argument(help="the step id, e.g. build")]
Agent = Annotated[str, typer.Argument(help="who acts, e.g. agent:claude (bare id: agent:<id>)")]
Run = Annotated[
    str | None,
    typer.Option(help="the run id (the events' correlationId; default <workflow>/<step>)"),
]


@app.command()
def execute(
    workflow: Workflow,
    step: Step,
    agent: Agent,
    summary: Annotated[str | None, typer.Option(help="one line (default: generated)")] = None,
    correlation_id: Run = None,
    payload: Annotated[str | None, typer.Option(help="JSON object (- for stdin)")] = None,
) -> None:
    """Log that AGENT executed STEP (kind step-executed); exits 4 while an earlier run of
    the step has no assessment."""
    fields: dict[str, Any] = {"summary": summary, "correlation_id": correlation_id}
    if payload is not None:
        fields["payload"] = json_object(payload, "--payload")
    event = (
        state()
        .backend()
        .call("workflows.execute", workflow=workflow, step=step, agent=agent, **fields)
    )
    emit(event, state().output, pairs)


@app.command()
def assess(
    workflow: Workflow,
    step: Step,
    score: Annotated[int, typer.Argument(help="0-100")],
    agent: Agent,
    criteria: Annotated[
        str, typer.Option(help='JSON: {"name": number|text} or ["text", ...] (- for stdin)')
    ] = "[]",
    correlation_id: Run = None,
    note: Annotated[str | None, typer.Option(help="one line, at most 500 characters")] = None,
) -> None:
    """Score an executed STEP 0-100 (kind assessment): it covers the run's executions."""
    given = json_arg(criteria, "--criteria")
    if not isinstance(given, dict | list):
        raise AcmiValidationError("--criteria", "type", "must be a JSON object or array")
    event = (
        state()
        .backend()
        .call(
            "workflows.assess",
            workflow=workflow,
            step=step,
            score=score,
            criteria=given,
            agent=agent,
            correlation_id=correlation_id,
            note=note,
        )
    )
    emit(event, state().output, pairs)


@app.command()
def improve(
    workflow: Workflow,
    step: Step,
    lesson: Annotated[str, typer.Argument(help="what to do differently, 1-2,000 characters")],
    agent: Agent,
    correlation_id: Run = None,
) -> None:
    """Record a lesson on STEP (kind improvement); it seeds the agent's next bootstrap."""
    event = (
        state()
        .backend()
        .call(
            "workflows.improve",
            workflow=workflow,
            step=step,
            lesson=lesson,
            agent=agent,
            correlation_id=correlation_id,
        )
    )
    emit(event, state().output, pairs)


@app.command()
def lessons(
    workflow: Workflow,
    limit: Annotated[int, typer.Option(help="the newest lessons to show (1-200)")] = 10,
) -> None:
    """The newest lessons of a workflow, newest first."""
    found = state().backend().call("workflows.lessons", workflow=workflow, limit=limit)
    emit(found, state().output, _lesson_rows)


def _lesson_rows(found: dict[str, Any]) -> Any:
    rows = []
    for event in found["lessons"]:
        payload = event.get("payload")
        payload = payload if isinstance(payload, dict) else {}  # another tool's member
        rows.append(
            {"ts": event.get("ts"), "step": payload.get("step"), "lesson": payload.get("lesson")}
        )
    return table(rows, ("ts", "step", "lesson"), f"lessons of {found['workflow']} (newest first)")

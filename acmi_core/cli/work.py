"""``acmi work``: cross-session work items (the reference's work commands)."""

from __future__ import annotations

import sys
import uuid
from typing import Annotated, Any

import typer

from acmi_core.cli.entities import json_arg, json_object, render_context
from acmi_core.cli.output import Output, emit, pairs, table
from acmi_core.cli.reference import work_view
from acmi_core.cli.state import state

app = typer.Typer(
    help="work items: projects, ideas and tasks across sessions", no_args_is_help=True
)

Id = Annotated[str, typer.Argument(help="the work item's id")]
Cursor = Annotated[str | None, typer.Option(help="the next_cursor of the previous page")]
Limit = Annotated[int, typer.Option(help="items a page (1-1000)")]
Page = Annotated[
    bool,
    typer.Option(
        "--page",
        help="JSON: one page as an object with next_cursor (default: the reference's bare "
        "array of every id)",
    ),
]


@app.command()
def create(
    id: Id,
    profile: Annotated[str, typer.Argument(metavar="JSON", help="its profile (- for stdin)")],
    owner: Annotated[str | None, typer.Option(help="the owning agent")] = None,
) -> None:
    """Create a work item from a JSON profile."""
    doc = json_object(profile, "json")
    item = state().backend().call("work.create", id=id, profile=doc, owner=owner)
    emit(item, state().output, render_context)


@app.command()
def get(
    id: Id,
    events: Annotated[
        int, typer.Option(min=0, max=1000, help="the newest events to show (0-1000)")
    ] = 50,
) -> None:
    """A work item: profile, signals, newest events (newest first) and sessions."""
    item = state().backend().call("work.get", id=id, events=events)
    emit(work_view(item), state().output, render_context)


@app.command()
def event(
    id: Id,
    source: Annotated[str, typer.Argument(help="who speaks, e.g. agent:bentley")],
    summary: Annotated[str, typer.Argument(help="one line, at most 500 characters")],
    session: Annotated[str | None, typer.Argument(help="the session it happened in")] = None,
    kind: Annotated[str, typer.Option(help="what happened")] = "progress",
    correlation_id: Annotated[str | None, typer.Option(help="default: a new one")] = None,
    payload: Annotated[str | None, typer.Option(help="JSON (- for stdin)")] = None,
) -> None:
    """Append an event to a work item (a session id also joins the item's sessions)."""
    record: dict[str, Any] = {
        "source": source,
        "kind": kind,
        "correlationId": correlation_id or f"cli-{uuid.uuid4().hex[:12]}",
        "summary": summary,
    }
    if payload is not None:
        record["payload"] = json_arg(payload, "--payload")
    stored = state().backend().call("work.event", id=id, event=record, session_id=session)
    emit(stored, state().output, pairs)


@app.command()
def signal(
    id: Id, values: Annotated[str, typer.Argument(metavar="JSON", help="signals (- for stdin)")]
) -> None:
    """Merge signals into a work item (a status opens or closes it)."""
    signals = state().backend().call("work.signals", id=id, signals=json_object(values, "json"))
    emit(signals, state().output, pairs)


@app.command()
def sessions(id: Id, cursor: Cursor = None, limit: Limit = 100, page: Page = False) -> None:
    """The sessions that worked on an item (JSON: the reference's array of every one;
    --page: a page at a time)."""
    fields = {"id": id, "limit": limit}
    if page or cursor is not None or not _json():
        shown = state().backend().call("work.sessions", cursor=cursor, **fields)
        emit(
            shown,
            state().output,
            lambda p: table(({"session": s} for s in p["sessions"]), ("session",)),
        )
        return
    emit(_every("work.sessions", "sessions", fields, lambda s: s), Output.JSON)


@app.command("list")
def list_(
    owner: Annotated[str | None, typer.Option(help="only this owner's items")] = None,
    status: Annotated[str, typer.Option(help="open | all")] = "open",
    cursor: Cursor = None,
    limit: Limit = 100,
    page: Page = False,
) -> None:
    """Work items, open ones by default, most recently updated first (JSON: the
    reference's array of their ids; --page: a page of items at a time)."""
    fields = {"owner": owner, "status": None if status == "all" else status, "limit": limit}
    if page or cursor is not None or not _json():
        shown = state().backend().call("work.list", cursor=cursor, **fields)
        columns = ("id", "owner", "status", "updated_at")
        emit(shown, state().output, lambda p: table(p["items"], columns))
        return
    emit(_every("work.list", "items", fields, lambda item: item["id"]), Output.JSON)


def _json() -> bool:
    """Whether this run prints JSON (a table is for people: it keeps its pages)."""
    mode = state().output
    return mode is Output.JSON or (mode is Output.AUTO and not sys.stdout.isatty())


def _every(name: str, field: str, fields: dict[str, Any], pick: Any) -> list[Any]:
    """Every page of a paged read, followed (a round trip a page), as one array."""
    backend, cursor = state().backend(), None
    shown: list[Any] = []
    while True:
        answer = backend.call(name, cursor=cursor, **fields)
        shown.extend(pick(entry) for entry in answer[field])
        cursor = answer["next_cursor"]
        if cursor is None:
            return shown

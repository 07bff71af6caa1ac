"""The reference's entity commands: profile, signal, event, get, list, delete, cat.

``profile`` and ``signal`` replace the stored object, as the reference's do; ``--merge``
merges instead. Each runs on the store or, with ``--api``, on a deployed API.
"""

from __future__ import annotations

import datetime
import json
import sys
import uuid
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from acmi_core.base.durations import window
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import EntityId, check_category
from acmi_core.cli.output import Output, emit, note, pairs, table
from acmi_core.cli.reference import entity_view
from acmi_core.cli.state import state
from acmi_core.entities.api import MAX_CAT_ENTITIES, MAX_CAT_LIMIT

app = typer.Typer()


Ns = Annotated[
    str, typer.Argument(metavar="NS", help="namespace (category), e.g. user, deal, agent")
]
Id = Annotated[str, typer.Argument(metavar="ID", help="the entity's id within the namespace")]
Merge = Annotated[bool, typer.Option("--merge", help="merge into the stored object instead")]


def json_arg(raw: str, name: str) -> Any:
    """A JSON argument; ``-`` reads it from stdin (large documents stay out of argv)."""
    text = sys.stdin.read() if raw == "-" else raw
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AcmiValidationError(name, "json", f"is not valid JSON ({exc.msg})") from None


def json_object(raw: str, name: str) -> dict[str, Any]:
    value = json_arg(raw, name)
    if not isinstance(value, dict):
        raise AcmiValidationError(name, "object", "must be a JSON object")
    return value


def entity_of(ns: str, id: str) -> str:
    return f"{ns}:{id}"


@app.command()
def profile(
    ns: Ns,
    id: Id,
    doc: Annotated[
        str | None,
        typer.Argument(metavar="[JSON]", help="the profile (- for stdin); none: show it"),
    ] = None,
    merge: Merge = False,
) -> None:
    """Replace an entity's profile with a JSON object (--merge to merge); without JSON, show it."""
    backend = state().backend()
    entity = entity_of(ns, id)
    if doc is None:
        value = backend.call("entities.profile.get", entity=entity)
    else:
        given = json_object(doc, "json")
        value = backend.call("entities.profile.put", entity=entity, profile=given, merge=merge)
    emit(value, state().output, lambda v: pairs(v or {}, entity))


@app.command()
def signal(
    ns: Ns,
    id: Id,
    values: Annotated[str, typer.Argument(metavar="JSON", help="the signals (- for stdin)")],
    merge: Merge = False,
) -> None:
    """Replace an entity's signals with a JSON object (--merge to set only these keys)."""
    entity = entity_of(ns, id)
    given = json_object(values, "json")
    shown = (
        state().backend().call("entities.signals.put", entity=entity, signals=given, merge=merge)
    )
    emit(shown, state().output, lambda v: pairs(v, entity))


@app.command("signal-set")
def signal_set(
    entity: Annotated[str, typer.Argument(help="ns:id, e.g. user:mikey")],
    key: Annotated[str, typer.Argument(help="the signal's key")],
    value: Annotated[str, typer.Argument(metavar="JSON", help="its value, any JSON")],
    ttl: Annotated[
        str | None, typer.Option(help="time to live: 30m, 24h, 7d; reads stop showing it")
    ] = None,
) -> None:
    """Set one signal (the others kept), with --ttl for how long reads show it."""
    stored = (
        state()
        .backend()
        .call("entities.signal.put", entity=entity, key=key, value=json_arg(value, "json"), ttl=ttl)
    )
    emit({"entity": entity, "key": key, "value": stored}, state().output)


@app.command()
def event(
    ns: Ns,
    id: Id,
    source: Annotated[str, typer.Argument(help="who speaks, e.g. agent:claude, gmail")],
    summary: Annotated[str | None, typer.Argument(help="one line, at most 500 characters")] = None,
    kind: Annotated[str, typer.Option(help="what happened, e.g. email-sent")] = "note",
    correlation_id: Annotated[
        str | None, typer.Option(help="ties related events together (default: a new one)")
    ] = None,
    parent: Annotated[str | None, typer.Option(help="the parentCorrelationId")] = None,
    payload: Annotated[str | None, typer.Option(help="JSON object (- for stdin)")] = None,
    ts: Annotated[
        int | None, typer.Option(help="when, in ms since the epoch (default: now)")
    ] = None,
) -> None:
    """Append a Comms v1.1 event (the reference's form NS:ID SOURCE SUMMARY works too)."""
    if summary is None:
        # the reference's colon form: `event thread:pm agent:x "summary"` (one fewer argument)
        if ":" not in ns:
            raise AcmiValidationError("summary", "required", "give NS ID SOURCE SUMMARY")
        ns, id, source, summary = *ns.split(":", 1), id, source
    record: dict[str, Any] = {
        "source": source,
        "kind": kind,
        "correlationId": correlation_id or f"cli-{uuid.uuid4().hex[:12]}",
        "summary": summary,
    }
    if ts is not None:  # first, as the stored order has it; the core checks it (seconds: 4xx)
        record = {"ts": ts, **record}
    if parent:
        record["parentCorrelationId"] = parent
    if payload is not None:
        record["payload"] = json_arg(payload, "--payload")
    stored = (
        state().backend().call("entities.events.append", entity=entity_of(ns, id), event=record)
    )
    emit(stored, state().output, pairs)


@app.command()
def get(
    ns: Annotated[
        str,
        typer.Argument(metavar="NS", help="namespace (category), e.g. user; or the whole ns:id"),
    ],
    id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="the entity's id (none: NS is ns:id)")
    ] = None,
    events: Annotated[
        int, typer.Option(min=0, max=1000, help="the newest events to show (0-1000)")
    ] = 50,
) -> None:
    """An entity's profile, signals and newest events: one round trip (JSON: the
    reference's timeline_recent, the newest 10 first, then ours: timeline oldest first)."""
    if id is None:  # `get user:mikey`, as `cat` and `bootstrap` take it
        ns, colon, id = ns.partition(":")  # the id may hold ':' (another tool's, listed)
        if not colon:
            raise AcmiValidationError("ID", "required", "give NS ID, or ns:id")
    context = state().backend().call("entities.get", entity=entity_of(ns, id), events=events)
    emit(entity_view(context), state().output, render_context)


@app.command("list")
def list_(ns: Ns) -> None:
    """The ids of a namespace, streamed a page (one round trip) at a time."""
    check_category(ns)  # before any output: a bad namespace is a usage error, not `[]`
    backend = state().backend()
    mode = state().output
    people = mode is Output.TABLE or (mode is Output.AUTO and sys.stdout.isatty())
    count, cursor = 0, None
    while True:
        page = backend.call("entities.list", category=ns, cursor=cursor, limit=1000)
        for entity in page["entities"]:
            if not _readable(entity):
                continue
            if people:
                print(entity)
            else:
                print("[\n  " if count == 0 else ",\n  ", json.dumps(entity), sep="", end="")
            count += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    if not people:
        print("\n]" if count else "[]")


def _readable(entity: str) -> bool:
    """Whether ``get`` takes this id (every read takes another tool's ids, e.g.
    ``user:mikey@example.com``: ``EntityId.parse_listed``); one it does not is left out
    of the list and named on stderr: printing it would hand a script an id no command
    accepts."""
    try:
        EntityId.parse_listed(entity, "entity")
    except AcmiValidationError as exc:
        note(f"left out {entity!r}: {exc.message} (`acmi doctor` reports it as bad_id)")
        return False
    return True


@app.command()
def delete(ns: Ns, id: Id) -> None:
    """Delete an entity: all its keys and its index entries, atomically."""
    state().backend().call("entities.delete", entity=entity_of(ns, id), dry_run=False)
    emit({"deleted": entity_of(ns, id)}, state().output)


@app.command("event-delete")
def event_delete(
    entity: Annotated[str, typer.Argument(help="ns:id, e.g. user:mikey")],
    ts: Annotated[int | None, typer.Option(help="the event's ts (epoch ms)")] = None,
    id: Annotated[str | None, typer.Option("--id", help="the event's correlationId")] = None,
    member: Annotated[str | None, typer.Option(help="the stored event's JSON, exactly")] = None,
) -> None:
    """Delete one event of a timeline (--ts and --id, or --member), recorded on the same
    timeline as an audit event."""
    gone = (
        state()
        .backend()
        .call("entities.timeline.delete", entity=entity, ts=ts, id=id, member=member)
    )
    emit(gone, state().output)


@app.command()
def cat(
    entities: Annotated[
        list[str],
        typer.Argument(
            metavar="ENTITY...",
            help="ns:id (the reference's acmi:ns:id:timeline and ns:id:timeline work too)",
        ),
    ],
    since: Annotated[str | None, typer.Option(help="only events newer than this, e.g. 24h")] = None,
    until: Annotated[str | None, typer.Option(help="only events older than this, e.g. 1h")] = None,
    limit: Annotated[int, typer.Option(help=f"at most this many (1-{MAX_CAT_LIMIT})")] = 50,
) -> None:
    """Several timelines merged newest first, one line an event (--json: the events)."""
    since_ms, until_ms = window(
        _now_ms(), since, until, since_field="--since", until_field="--until"
    )
    if len(entities) > MAX_CAT_ENTITIES:
        raise AcmiValidationError("ENTITY", "count", f"give at most {MAX_CAT_ENTITIES}")
    names = [timeline_entity(raw) for raw in entities]
    merged = state().backend().cat(names, limit=limit, since_ms=since_ms, until_ms=until_ms)
    if state().output is Output.JSON:
        emit(merged, Output.JSON)
        return
    for item in merged:
        print(cat_line(item))


def timeline_entity(raw: str) -> str:
    """``acmi:user:x:timeline``, ``user:x:timeline`` or ``user:x`` -> ``user:x``."""
    name = raw.removeprefix("acmi:").removesuffix(":timeline")
    if ":" not in name:  # the id may hold ':' (another tool's, as `list` prints it)
        raise AcmiValidationError("ENTITY", "entity", f"{raw!r} must be ns:id")
    return name


def cat_line(item: Mapping[str, Any]) -> str:
    """The reference's line: ``2026-11-30 16:05Z [user:x / kind] summary``."""
    from acmi_core.bootstrap.render import event_ms, event_text

    ts = event_ms(item.get("ts"))  # a 17-digit ts: its first 13 digits, as the reference
    when = (
        datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%MZ")
        if ts is not None and 0 <= ts < 253_402_300_800_000
        else str(item.get("ts"))
    )
    kind = item.get("kind") or item.get("source") or "?"
    # summary || message || the record, as the reference's cat
    shown = {k: v for k, v in item.items() if k != "entity"}
    summary = event_text(shown)[:160]
    return f"{when} [{item.get('entity')} / {kind}] {summary}"


def render_context(context: Mapping[str, Any]) -> Any:
    from rich.console import Group

    events = context.get("timeline") or []
    return Group(
        pairs(context.get("profile") or {}, f"{context.get('entity')} profile"),
        pairs(context.get("signals") or {}, "signals"),
        table(events, ("ts", "source", "kind", "summary"), "timeline (oldest first)"),
    )


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)

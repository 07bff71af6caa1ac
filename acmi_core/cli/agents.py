"""Agent commands: bootstrap, spawn, active, rollup-set, heartbeat (the reference's),
and ``agents wake`` (the wake slot, store only).

``acmi bootstrap AGENT --format markdown --hook`` is a session-start hook: it reads
the hook's JSON from stdin (``session_id``, ``model``), logs the spawn and prints
the budgeted bundle, in one round trip.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Annotated, Any

import typer

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.stored import load_stored
from acmi_core.cli.output import Output, emit, pairs, table
from acmi_core.cli.reference import bootstrap_view
from acmi_core.cli.state import state
from acmi_core.coordination.agents import DEFAULT_TIER, INVITER, TIERS
from acmi_core.coordination.wake import SECRET_ENV_REMOVED

app = typer.Typer()
agents = typer.Typer(help="agent slots kept on the store (the wake slot)", no_args_is_help=True)

Agent = Annotated[str, typer.Argument(help="agent:<id> or <id>")]


@app.command()
def bootstrap(
    agent: Agent,
    format: Annotated[str, typer.Option(help="json | markdown")] = "json",
    scope: Annotated[
        str, typer.Option(help="main | group | subagent (what memory shows)")
    ] = "main",
    events: Annotated[int, typer.Option(help="the newest events to include")] = 20,
    include: Annotated[
        str | None, typer.Option(help="extra sections: topics,yesterday,archive")
    ] = None,
    topic: Annotated[str | None, typer.Option(help="a memory topic to include")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="budget in estimated tokens")] = None,
    session: Annotated[str | None, typer.Option(help="log a spawn with this session id")] = None,
    model: Annotated[str | None, typer.Option(help="the spawn's model id")] = None,
    host: Annotated[str | None, typer.Option(help="the spawn's host (where it runs)")] = None,
    hook: Annotated[
        bool, typer.Option(help="read a session-start hook's JSON from stdin and log the spawn")
    ] = False,
) -> None:
    """An agent's wake bundle: profile, signals, threads, rollup, events, spawns, memory."""
    spawn = _spawn(session, model, host, _hook_input() if hook else None)
    text = (
        state()
        .backend()
        .call(
            "bootstrap.read",
            agent=agent,
            format=format,
            scope=scope,
            events=events,
            include=include,
            topic=topic,
            max_tokens=max_tokens,
            spawn=spawn,
        )
    )
    if format == "json":
        # the reference's object first, then our bundle's keys (stored values exactly)
        emit(bootstrap_view(load_stored(text.encode("utf-8"))), Output.JSON)
        return
    # the markdown is already rendered: print it as is
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _hook_input() -> dict[str, Any]:
    """The JSON agent CLIs give a session-start hook on stdin (session_id, model...);
    nothing when stdin is a terminal (run by hand: never wait for typing)."""
    if sys.stdin.isatty():
        return {}
    raw = sys.stdin.read()
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise AcmiValidationError("--hook", "json", f"stdin is not JSON ({exc.msg})") from None
    return value if isinstance(value, dict) else {}


def _spawn(
    session: str | None, model: str | None, host: str | None, hook: dict[str, Any] | None
) -> dict[str, Any] | None:
    if hook is None and session is None:
        return None
    hook = hook or {}
    hooked_model = hook.get("model")
    if isinstance(hooked_model, dict):  # some clients send {"id": ..., "display_name": ...}
        hooked_model = hooked_model.get("id")
    spawn = {
        "session_id": session or str(hook.get("session_id") or f"cli-{uuid.uuid4().hex[:12]}"),
        "model_id": model or str(hooked_model or "unknown"),
    }
    if host is not None:
        spawn["host"] = host
    return spawn


@app.command()
def spawn(
    agent: Agent,
    session: Annotated[str, typer.Argument(help="the session id")] = "unknown",
    model: Annotated[str, typer.Argument(help="the model id")] = "unknown",
    host: Annotated[str | None, typer.Option(help="where it runs")] = None,
) -> None:
    """Log an agent session start (kept with the spawns, never in the timeline)."""
    spawned = (
        state()
        .backend()
        .call("agents.spawn", agent=agent, session_id=session, model_id=model, host=host)
    )
    emit(spawned, state().output, pairs)


@app.command()
def active(
    agent: Agent,
    action: Annotated[str, typer.Argument(help="add | remove | list")] = "list",
    thread: Annotated[str | None, typer.Argument(help="the thread, e.g. thread:launch")] = None,
    role: Annotated[str, typer.Argument(help="the agent's role in it")] = "participant",
) -> None:
    """An agent's active threads: add, remove or list."""
    backend = state().backend()
    if action == "list":
        threads = backend.call("agents.threads", agent=agent)
        emit(threads, state().output, _threads)
        return
    if action not in ("add", "remove"):
        raise AcmiValidationError("ACTION", "enum", "must be add, remove or list")
    if not thread:
        raise AcmiValidationError("THREAD", "required", f"is needed to {action}")
    if action == "add":
        joined = backend.call("agents.join", agent=agent, thread=thread, role=role)
        emit(joined, state().output, pairs)
    else:
        backend.call("agents.leave", agent=agent, thread=thread)
        emit({"removed": thread}, state().output)


def _threads(threads: dict[str, Any]) -> Any:
    rows = [
        {"thread": k, **(v if isinstance(v, dict) else {"value": v})} for k, v in threads.items()
    ]
    return table(rows, ("thread", "role", "joined_at"), "active threads")


@app.command("rollup-set")
def rollup_set(
    agent: Agent, text: Annotated[str, typer.Argument(help="the summary (- for stdin)")]
) -> None:
    """Set an agent's rollup summary (what the next wake reads first)."""
    summary = sys.stdin.read() if text == "-" else text
    rollup = state().backend().call("agents.rollup.put", agent=agent, summary=summary)
    emit(rollup, state().output, pairs)


@app.command()
def heartbeat(
    agent: Agent,
    status: Annotated[
        str, typer.Option(help="e.g. ACTIVE, IDLE, BLOCKED (1-64 of A-Za-z0-9_ -)")
    ] = "ACTIVE",
    note: Annotated[str | None, typer.Option(help="one line on what it is doing")] = None,
) -> None:
    """Record that an agent is alive (the silence check reads it)."""
    beat = state().backend().call("agents.heartbeat", agent=agent, status=status, note=note)
    emit(beat, state().output, pairs)


@agents.command("wake")
def wake(
    agent: Agent,
    minute: Annotated[int | None, typer.Option(help="minute of the hour, 0-59 (UTC)")] = None,
    every_hours: Annotated[int, typer.Option(help="1, 2, 3, 4, 6, 8, 12 or 24")] = 1,
    target_url: Annotated[
        str | None, typer.Option(help="https:// webhook the bundle is POSTed to")
    ] = None,
    target_eventbridge: Annotated[
        str | None, typer.Option(metavar="BUS", help="EventBridge bus name/ARN")
    ] = None,
    secret_env: Annotated[  # gone: kept only to say so to a script that still passes it
        str | None, typer.Option(hidden=True)
    ] = None,
    clear: Annotated[bool, typer.Option(help="remove the slot")] = False,
) -> None:
    """Set (or --clear) an agent's wake slot: the wake tick wakes it at that minute."""
    acmi = state().acmi()
    if clear:
        acmi.wake.clear(agent)
        emit({"agent": agent, "wake": None}, state().output)
        return
    if minute is None:
        raise AcmiValidationError("--minute", "required", "is required (or --clear)")
    if target_url and target_eventbridge:
        raise AcmiValidationError(
            "--target-url", "one_target", "conflicts with --target-eventbridge: give one"
        )
    target: dict[str, Any] | None = None
    if secret_env is not None:
        raise AcmiValidationError("--secret-env", "removed", SECRET_ENV_REMOVED)
    if target_url:
        target = {"type": "webhook", "url": target_url}
    elif target_eventbridge:
        target = {"type": "eventbridge", "bus": target_eventbridge}
    emit(acmi.wake.set(agent, minute, every_hours=every_hours, target=target), state().output)


@app.command("invite-agent")
def invite_agent(
    agent: Agent,
    tier: Annotated[str, typer.Option(help=" | ".join(TIERS))] = DEFAULT_TIER,
    name: Annotated[str | None, typer.Option(help="its display name")] = None,
    model: Annotated[str | None, typer.Option(help="the model it runs on")] = None,
    role: Annotated[str | None, typer.Option(help="what it does")] = None,
    lane: Annotated[str | None, typer.Option(help="its lane of work")] = None,
    invited_by: Annotated[str, typer.Option(help="who invites it")] = INVITER,
) -> None:
    """Onboard an agent: tier and permissions, signals, `agent-onboarded` (idempotent).

    The same invite again writes nothing; another tier is applied and announced."""
    invited = (
        state()
        .acmi()
        .agents.invite(
            agent, tier, name=name, model=model, role=role, lane=lane, invited_by=invited_by
        )
    )
    emit(invited, state().output, lambda v: pairs({k: v[k] for k in ("agent", "tier", "action")}))

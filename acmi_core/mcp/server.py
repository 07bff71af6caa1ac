"""An MCP server over stdio (the official SDK's FastMCP). The caller is the server's own
process: its tenant and scope come from ``ACMI_API_KEY`` looked up like the HTTP API
does, never from a tool argument. Without a key: the default tenant, full access (the
embedded local store is one person's). Each server is built around one bound client:
no module globals, so two servers never share a tenant."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError

from acmi_core import Acmi, AcmiError
from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import Scope
from acmi_core.errors import AcmiValidationError

P = ParamSpec("P")
R = TypeVar("R")

_DURATION = re.compile(r"^(\d{1,9})([smhdw])$")
_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
MAX_CAT_ENTITIES = 20
TENANCY = " Tenant: the server's ACMI_API_KEY (without one, the default tenant)."


def parse_duration(value: str, field: str = "since") -> int:
    """``30m``, ``24h``, ``7d`` -> milliseconds (the reference took a timestamp: a bug)."""
    match = _DURATION.match(value.strip())
    if match is None:
        raise AcmiValidationError(field, "duration", "must be a duration like 30m, 24h or 7d")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def resolve_scope(acmi: Acmi, api_key: str | None) -> tuple[Acmi, Scope]:
    """The client bound to the key's tenant and the key's scope; the default tenant with
    admin scope without a key. An unknown or revoked key is refused outright."""
    if not api_key:
        return acmi, Scope.ADMIN
    record = apikeys.lookup(acmi.store, api_key)
    if record is None:
        raise AcmiValidationError("ACMI_API_KEY", "unknown_key", "is unknown or revoked")
    return acmi.for_tenant(record.tenant), record.scope


def _tool_errors(func: Callable[P, R]) -> Callable[P, R]:
    """An ACMI error becomes an MCP tool error (isError) naming its field and rule."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except AcmiError as exc:
            text = (
                exc.message if exc.message.startswith(exc.field) else f"{exc.field}: {exc.message}"
            )
            raise ToolError(f"{text} (rule: {exc.rule})") from exc

    return wrapper


class _Tools:
    """Registers tools: ACMI errors become tool errors, write tools check the scope."""

    def __init__(self, mcp: FastMCP, scope: Scope) -> None:
        self.mcp, self.scope = mcp, scope

    def __call__(
        self, write: bool, doc: str, name: str | None = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            checked = _tool_errors(func)

            @functools.wraps(func)
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                if write and not self.scope.allows(Scope.WRITE):
                    raise ToolError("scope: this key is read-only (rule: write_scope)")
                return checked(*args, **kwargs)

            self.mcp.add_tool(wrapped, name=name or func.__name__, description=doc + TENANCY)
            return func

        return register


def build_server(acmi: Acmi, scope: Scope) -> FastMCP:
    """The server for one principal: ``acmi`` is already bound to its tenant."""
    mcp = FastMCP("acmi", instructions="ACMI: profiles, signals and timelines." + TENANCY)
    tool = _Tools(mcp, scope)
    bootstrap = _entity_tools(tool, acmi)
    _agent_tools(tool, acmi)
    _coordination_tools(tool, acmi)
    _memory_tools(tool, acmi)

    @mcp.prompt(name="bootstrap", description="An agent's bootstrap, markdown." + TENANCY)
    def bootstrap_prompt(agent: str) -> str:
        return bootstrap(agent)

    @mcp.resource("acmi://agents/{agent}/bootstrap", name="bootstrap", mime_type="text/markdown")
    def bootstrap_resource(agent: str) -> str:
        return bootstrap(agent)

    return mcp


def _entity_tools(tool: _Tools, acmi: Acmi) -> Callable[[str], str]:
    """Profiles, signals, timelines, listing, bootstrap; returns the bootstrap renderer."""

    @tool(False, "Read an entity's profile (entity: ns:id): {profile: object or null}.")
    def profile_get(entity: str) -> dict[str, Any]:
        return {"entity": entity, "profile": acmi.profile.get(entity)}

    @tool(True, "Merge a JSON object into an entity's profile; returns the profile.")
    def profile_merge(entity: str, partial: dict[str, Any]) -> dict[str, Any] | None:
        return acmi.profile.merge(entity, partial)

    @tool(False, "Read an entity's signals (all of them, or one key).")
    def signal_get(entity: str, key: str | None = None) -> Any:
        return acmi.signals.all(entity) if key is None else acmi.signals.get(entity, key)

    @tool(True, "Set one signal of an entity.")
    def signal_set(entity: str, key: str, value: Any) -> Any:
        return acmi.signals.set(entity, key, value)

    @tool(True, "Append a Comms v1.1 event (source, summary, kind...) to a timeline.")
    def event(entity: str, event: dict[str, Any]) -> dict[str, Any]:
        return acmi.timeline.append(entity, event).to_dict()

    @tool(False, "An entity's context: profile, signals and newest events.")
    def get(entity: str, events: int = 20) -> dict[str, Any]:
        return acmi.get(entity, events=events).to_dict()

    @tool(False, "The ids of a category (namespace).", name="list")
    def list_ids(category: str) -> dict[str, Any]:
        return {"category": category, "ids": acmi.list(category)}

    @tool(False, "Several timelines merged newest first; since is a duration (30m, 24h, 7d).")
    def cat(entities: list[str], since: str = "24h", limit: int = 50) -> dict[str, Any]:
        if not entities or len(entities) > MAX_CAT_ENTITIES:
            raise AcmiValidationError("entities", "count", f"must name 1-{MAX_CAT_ENTITIES}")
        if not 1 <= limit <= 1000:
            raise AcmiValidationError("limit", "range", "must be 1-1000")
        start = acmi.clock() - parse_duration(since)
        merged: list[dict[str, Any]] = []
        for entity in entities:
            for item in acmi.timeline.read(entity, reverse=True, limit=limit, since_ms=start):
                merged.append({"entity": entity, **item.to_dict()})
        merged.sort(key=lambda e: e.get("ts", 0), reverse=True)
        return {"since": since, "events": merged[:limit]}

    @tool(False, "An agent's bootstrap bundle, markdown.")
    def bootstrap(agent: str, scope: str = "main") -> str:
        return acmi.bootstrap(agent, scope=scope, format="markdown").render()

    def render(agent: str) -> str:
        return str(_tool_errors(bootstrap)(agent))

    return render


def _agent_tools(tool: _Tools, acmi: Acmi) -> None:
    """Agent slots: spawns, active threads, rollups, heartbeats."""

    @tool(True, "Log an agent session start.")
    def spawn(agent: str, session_id: str, model_id: str, host: str | None = None) -> Any:
        return acmi.agents.spawn(agent, session_id, model_id, host)

    @tool(True, "An agent's active threads: action add, remove or list.")
    def active(agent: str, action: str = "list", thread: str | None = None) -> Any:
        if action == "list":
            return acmi.agents.active(agent)
        if action not in ("add", "remove"):
            raise AcmiValidationError("action", "enum", "must be one of add, remove, list")
        if not thread:
            raise AcmiValidationError("thread", "required", f"is needed to {action}")
        if action == "add":
            return acmi.agents.join(agent, thread)
        acmi.agents.leave(agent, thread)
        return {"removed": thread}

    @tool(True, "Set an agent's rollup summary.")
    def rollup_set(agent: str, summary: str) -> Any:
        return acmi.agents.set_rollup(agent, summary)

    @tool(True, "Record that an agent is alive.")
    def heartbeat(agent: str, status: str = "ACTIVE", note: str | None = None) -> Any:
        return acmi.agents.heartbeat(agent, status, note)


def _coordination_tools(tool: _Tools, acmi: Acmi) -> None:
    """Work items, deletion, leases, human-in-the-loop, workflow assessments."""

    @tool(True, "Create a work item.")
    def work_create(id: str, profile: dict[str, Any], owner: str | None = None) -> Any:
        return acmi.work.create(id, profile, owner=owner).to_dict()

    @tool(True, "Append an event to a work item.")
    def work_event(id: str, event: dict[str, Any], session_id: str | None = None) -> Any:
        return acmi.work.event(id, event, session_id)

    @tool(True, "Set a work item's signals.")
    def work_signal(id: str, signals: dict[str, Any]) -> Any:
        return acmi.work.signal(id, signals)

    @tool(False, "A work item with its newest events.")
    def work_get(id: str, events: int = 50) -> Any:
        return acmi.work.get(id, events).to_dict()

    @tool(False, "One page of work items.")
    def work_list(owner: str | None = None, status: str | None = "open") -> Any:
        return acmi.work.list(owner, status).to_dict()

    @tool(True, "Delete an entity of the caller's tenant: a dry run unless dry_run is false.")
    def delete(entity: str, dry_run: bool = True) -> dict[str, Any]:
        found = acmi.get(entity, events=0).to_dict()
        if not dry_run:
            acmi.delete(entity)
        return {"entity": entity, "dry_run": dry_run, "deleted": not dry_run, "found": found}

    @tool(False, "The caller's tenant (only its own).")
    def tenant_list() -> dict[str, Any]:
        return {"tenants": [acmi.tenant]}

    @tool(True, "Claim a lease on a resource for ttl_ms.")
    def lock_claim(resource: str, owner: str, ttl_ms: int) -> Any:
        return acmi.locks.claim(resource, owner, ttl_ms).to_dict()

    @tool(True, "Renew a lease with its owner token.")
    def lock_renew(resource: str, owner_token: str, ttl_ms: int) -> Any:
        return acmi.locks.renew(resource, owner_token, ttl_ms).to_dict()

    @tool(True, "Release a lease with its owner token.")
    def lock_release(resource: str, owner_token: str) -> Any:
        return acmi.locks.release(resource, owner_token).to_dict()

    @tool(True, "Queue a human-in-the-loop request.")
    def hitl_create(topic: str, request: str, asked_by: str, urgency: str = "P1") -> Any:
        created = acmi.hitl.create(topic, request, asked_by=asked_by, urgency=urgency)
        return {"item": created.item, "created": created.created}

    @tool(False, "One page of a human-in-the-loop queue.")
    def hitl_list(addressee: str | None = None, state: str = "open") -> Any:
        return acmi.hitl.list(addressee, state).to_dict()

    @tool(True, "Resolve a human-in-the-loop request.")
    def hitl_resolve(correlation_id: str, resolution: str, by: str) -> Any:
        return acmi.hitl.resolve(correlation_id, resolution, by=by).to_dict()

    @tool(True, "Score an executed workflow step 0-100.")
    def assess(workflow: str, step: str, score: int, criteria: list[str], agent: str) -> Any:
        return acmi.workflows.assess(workflow, step, score, criteria, agent).to_dict()

    @tool(True, "Record a lesson for a workflow step.")
    def improve(workflow: str, step: str, lesson: str, agent: str) -> Any:
        return acmi.workflows.improve(workflow, step, lesson, agent).to_dict()


def _memory_tools(tool: _Tools, acmi: Acmi) -> None:
    """The memory layers of an entity."""

    @tool(True, "Remember a line in an entity's memory (layer warm, hot, daily, topic).")
    def memory_remember(entity: str, text: str, layer: str = "warm") -> Any:
        return acmi.memory.remember(entity, text, layer=layer)

    @tool(False, "Search an entity's memory layers.")
    def memory_search(entity: str, query: str, limit: int = 20) -> Any:
        return acmi.memory.search(entity, query, limit=limit)

    @tool(False, "An entity's memory status.")
    def memory_status(entity: str) -> Any:
        return acmi.memory.status(entity)

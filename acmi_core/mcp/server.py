"""The MCP server (the official SDK's FastMCP) for one caller: its tenant and scope come
from its API key, looked up like the HTTP API does (over stdio ``ACMI_API_KEY``; without
one, the default tenant with full access: the embedded local store is one person's;
over HTTP the bearer key of each request, ``mcp/http.py``), never from a tool argument.
Each server is built around one bound client: no module globals, so two servers never
share a tenant.

One module: it is the MCP server's whole surface, built by one function (build_server)
around one bound client, every tool registered through the same _Tools wrapper (the
write-scope check, errors as tool errors); ARCHITECTURE.md names it as where a tool
goes.

The reference's 17 tools (``REFERENCE_TOOLS``; it served them as ``acmi_<name>``) are all
here under their plain names, beside the tools for what the reference lacked (leases,
HITL, workflows, memory). Every failure is a tool error (``isError``) naming the field
and the rule: ACMI errors, bad arguments (the SDK's pydantic check) and arguments a tool
does not take (``tenant`` among them: it is never an argument)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, Final, ParamSpec, TypeVar

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.lowlevel import Server
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from acmi_core import Acmi, AcmiError
from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import Scope
from acmi_core.base.durations import window
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import EntityId, pydantic_rule
from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.base.stored import LONE_SURROGATE, render_json
from acmi_core.bootstrap.bundle import DEFAULT_EVENTS
from acmi_core.memory.service import DEFAULT_PRUNE_DAYS
from acmi_core.memory.tree import parse_texts, tree_texts

P = ParamSpec("P")
R = TypeVar("R")

MAX_GET_EVENTS = 1000  # as GET /v1/entities/{entity}
TENANCY = " Tenant: the caller's API key (ACMI_API_KEY over stdio, the bearer key over HTTP)."
# The reference MCP server's tools (mcp/mcp-server.mjs v2.0, names without its `acmi_`
# prefix): each is served here under this name (tests/e2e/test_mcp_stdio.py holds it).
REFERENCE_TOOLS: Final = (
    *("profile", "signal", "event", "get", "list", "cat", "bootstrap", "spawn", "active"),
    *("rollup_set", "work_create", "work_event", "work_signal", "work_get", "work_list"),
    *("delete", "tenant_list"),
)
_WILDCARDS = frozenset("*?[]")


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


def _argument_errors(exc: ValidationError) -> str:
    """The SDK's pydantic failure as ``field: message (rule: type)``, one per problem."""
    parts = []
    for error in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        parts.append(f"{where}: {error['msg']} (rule: {pydantic_rule(error['type'])})")
    return "; ".join(parts)


# pydantic, which carries the SDK's messages, stops at depth 255: leave it room
STRUCTURED_DEPTH: Final = 200


def tool_result(value: Any) -> CallToolResult:
    """A tool's answer: its JSON as the HTTP API renders it (``render_json``: every stored
    value exactly, as deep as reads allow, numbers as written, lone surrogates escaped),
    indented as the SDK would; also as structured content when pydantic can carry it
    as it is (not deeper than ``STRUCTURED_DEPTH``, no lone surrogate, no number beyond
    the double range, which it would turn into a string): otherwise the answer is text
    only. A text answer (a markdown bundle) is the text, and ``{"result": text}``
    structured, as the SDK gives a ``str``."""
    if isinstance(value, str):
        return CallToolResult(
            content=[TextContent(type="text", text=value)], structuredContent={"result": value}
        )
    text = render_json(value, indent=2).decode("utf-8")
    structured = value if isinstance(value, dict) and _carried(value, 0) else None
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structuredContent=structured
    )


def _carried(value: Any, depth: int) -> bool:
    """Whether pydantic serializes ``value`` as the same JSON (see ``tool_result``)."""
    if isinstance(value, str):
        return LONE_SURROGATE.search(value) is None
    if isinstance(value, dict):
        return depth < STRUCTURED_DEPTH and all(
            _carried(k, depth) and _carried(v, depth + 1) for k, v in value.items()
        )
    if isinstance(value, list):
        return depth < STRUCTURED_DEPTH and all(_carried(v, depth + 1) for v in value)
    return not isinstance(value, Decimal)  # a JsonNumber: pydantic writes a string


class _Server(FastMCP):
    """FastMCP whose tool calls refuse arguments the tool does not take and report the
    SDK's argument validation like an ACMI error (field and rule), both as isError."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any]
    ) -> Sequence[Any] | dict[str, Any]:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            # Without this an extra argument (``tenant`` above all) is silently dropped,
            # and the caller believes it chose what it did not.
            known = set(tool.parameters.get("properties", {}))
            for given in sorted(set(arguments or {}) - known):
                why = (
                    "the tenant comes from the caller's API key, never an argument"
                    if given == "tenant"
                    else f"is not an argument of {name} (it takes {', '.join(sorted(known))})"
                )
                raise ToolError(f"{given}: {why} (rule: unknown_argument)")
        try:
            return await super().call_tool(name, arguments)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(_argument_errors(cause)) from cause
            if isinstance(cause, ToolError):  # ours (field and rule): without the SDK's prefix
                raise cause from cause.__cause__
            raise


class _Tools:
    """Registers tools: ACMI errors become tool errors, write tools check the scope."""

    def __init__(self, mcp: FastMCP, scope: Scope) -> None:
        self.mcp, self.scope = mcp, scope

    def check_write(self) -> None:
        if not self.scope.allows(Scope.WRITE):
            raise ToolError("scope: this key is read-only (rule: write_scope)")

    def __call__(
        self, write: bool, doc: str, name: str | None = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            checked = _tool_errors(func)

            @functools.wraps(func)
            def wrapped(*args: Any, **kwargs: Any) -> CallToolResult:
                if write:
                    self.check_write()
                return tool_result(checked(*args, **kwargs))

            self.mcp.add_tool(
                wrapped,
                name=name or func.__name__,
                description=doc + TENANCY,
                structured_output=False,  # tool_result gives it where it can be carried
            )
            return func

        return register


def protocol_server(server: FastMCP) -> Server[Any, Any]:
    """The SDK's low-level server inside ``server``: what a stateless HTTP transport runs
    per request (FastMCP's own app keeps a session manager that runs once per app). The
    one place that reaches into FastMCP's private attribute."""
    return server._mcp_server


def build_server(acmi: Acmi, scope: Scope) -> FastMCP:
    """The server for one principal: ``acmi`` is already bound to its tenant."""
    mcp = _Server("acmi", instructions="ACMI: profiles, signals and timelines." + TENANCY)
    tool = _Tools(mcp, scope)
    bootstrap = _entity_tools(tool, acmi)
    _agent_tools(tool, acmi)
    _work_tools(tool, acmi)
    _coordination_tools(tool, acmi)
    _memory_tools(tool, acmi)

    @mcp.prompt(name="bootstrap", description="An agent's bootstrap, markdown." + TENANCY)
    def bootstrap_prompt(agent: str) -> str:
        return bootstrap(agent)

    @mcp.resource("acmi://agents/{agent}/bootstrap", name="bootstrap", mime_type="text/markdown")
    def bootstrap_resource(agent: str) -> str:
        return bootstrap(agent)

    return mcp


def _events_bound(events: int, high: int) -> int:
    if not 0 <= events <= high:
        raise AcmiValidationError("events", "range", f"must be an integer from 0 to {high}")
    return events


def _delete_target(entity: str) -> EntityId:
    """The one entity a delete may name: never a key, a pattern or another tenant's."""
    if _WILDCARDS & set(entity):
        raise AcmiValidationError(
            "entity", "no_wildcard", "names one entity '<category>:<id>'; patterns are refused"
        )
    if entity.startswith("tenant:"):
        raise AcmiValidationError(
            "entity", "own_tenant", "names another tenant's data; delete reaches only this one"
        )
    if entity.startswith("acmi:") and entity.count(":") > 1:
        raise AcmiValidationError(
            "entity", "entity_not_key", "is a Redis key; give the entity '<category>:<id>'"
        )
    return EntityId.parse(entity)


def _entity_tools(tool: _Tools, acmi: Acmi) -> Callable[[str], str]:
    """Profiles, signals, timelines, listing, bootstrap; returns the bootstrap renderer."""

    @tool(
        True,
        "Replace an entity's profile (entity: ns:id) with a JSON object, or merge into it "
        "with merge=true: {entity, profile (as stored), merged}.",
        name="profile",
    )
    def profile_write(entity: str, profile: dict[str, Any], merge: bool = False) -> dict[str, Any]:
        stored = acmi.profile.merge(entity, profile) if merge else acmi.profile.set(entity, profile)
        return {"entity": str(EntityId.parse(entity)), "profile": stored, "merged": merge}

    @tool(False, "Read an entity's profile: {entity, profile: object or null}.")
    def profile_get(entity: str) -> dict[str, Any]:
        return {"entity": entity, "profile": acmi.profile.get(entity)}

    @tool(True, "Merge a JSON object into an entity's profile: {entity, profile (merged)}.")
    def profile_merge(entity: str, partial: dict[str, Any]) -> dict[str, Any]:
        return {
            "entity": str(EntityId.parse(entity)),
            "profile": acmi.profile.merge(entity, partial),
        }

    @tool(
        True,
        "Replace an entity's signals with a JSON object (merge=true: set only these keys, "
        "keep the others): {entity, signals (all of them now), merged}.",
        name="signal",
    )
    def signal_write(entity: str, signals: dict[str, Any], merge: bool = False) -> dict[str, Any]:
        if merge:
            acmi.signals.update(entity, signals)
            stored: Any = acmi.signals.all(entity)
        else:
            stored = dict(acmi.signals.replace(entity, signals))
        return {"entity": str(EntityId.parse(entity)), "signals": stored, "merged": merge}

    @tool(
        False,
        "Read an entity's signals: {entity, signals}; with key, {entity, key, value} "
        "(null if unset).",
    )
    def signal_get(entity: str, key: str | None = None) -> dict[str, Any]:
        if key is None:
            return {"entity": entity, "signals": acmi.signals.all(entity)}
        return {"entity": entity, "key": key, "value": acmi.signals.get(entity, key)}

    @tool(True, "Set one signal of an entity (others kept): {entity, key, value as stored}.")
    def signal_set(entity: str, key: str, value: Any) -> dict[str, Any]:
        return {"entity": entity, "key": key, "value": acmi.signals.set(entity, key, value)}

    @tool(
        True,
        "Append a Comms v1.1 event to an entity's timeline (event: {source, summary, kind, "
        "correlationId, ...}; ts defaults to now); returns the event as stored.",
    )
    def event(entity: str, event: dict[str, Any]) -> dict[str, Any]:
        return acmi.timeline.append(entity, event).to_dict()

    @tool(
        False,
        f"An entity's context in one read: {{profile, signals, timeline: the newest events "
        f"(0-{MAX_GET_EVENTS}, oldest first)}}.",
    )
    def get(entity: str, events: int = 20) -> dict[str, Any]:
        return acmi.get(entity, events=_events_bound(events, MAX_GET_EVENTS)).to_dict()

    @tool(
        False,
        "One page of a category's entities: {category, entities: [ns:id], next_cursor}; "
        "pass next_cursor back as cursor until it is null.",
        name="list",
    )
    def list_ids(
        category: str, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> dict[str, Any]:
        page = acmi.list_page(category, cursor=cursor, limit=limit)
        return {"category": category, "entities": page.entities, "next_cursor": page.next_cursor}

    @tool(
        False,
        "Several timelines merged, newest first: {since, until, events: [{entity, ...}]}. "
        "since/until are durations ago (30m, 24h, 7d); until absent means now.",
    )
    def cat(
        entities: list[str], since: str = "24h", until: str | None = None, limit: int = 50
    ) -> dict[str, Any]:
        names = [str(EntityId.parse(e, f"entities[{i}]")) for i, e in enumerate(entities)]
        start, end = window(acmi.clock(), since, until)
        merged = acmi.timeline.cat(names, limit=limit, since_ms=start, until_ms=end)
        events = [{"entity": entity, **event.to_dict()} for entity, event in merged]
        return {"since": since, "until": until, "events": events}

    @tool(
        False,
        "An agent's wake bundle as text (markdown, or format=json). scope: main | group | "
        "subagent; include: topics,yesterday,archive; topic: one topic file; events: 0-200; "
        "max_tokens/max_bytes: a budget. spawn {session_id, model_id} logs a session start "
        "(a write; a main bundle then takes the handoff).",
    )
    def bootstrap(
        agent: str,
        scope: str = "main",
        format: str = "markdown",
        events: int = DEFAULT_EVENTS,
        include: str | None = None,
        topic: str | None = None,
        max_tokens: int | None = None,
        max_bytes: int | None = None,
        spawn: dict[str, Any] | None = None,
    ) -> str:
        if spawn is not None:
            tool.check_write()
        bundle = acmi.bootstrap(
            agent,
            scope=scope,
            format=format,
            events=events,
            include=include,
            topic=topic,
            max_tokens=max_tokens,
            max_bytes=max_bytes,
            spawn=spawn,
        )
        return bundle.text

    def render(agent: str) -> str:
        return str(_tool_errors(bootstrap)(agent))

    @tool(
        True,
        "Delete an entity of this tenant (entity: ns:id; never a key, pattern or other "
        "tenant): a dry run unless dry_run=false. {entity, dry_run, deleted, found}.",
    )
    def delete(entity: str, dry_run: bool = True) -> dict[str, Any]:
        eid = _delete_target(entity)
        context = acmi.get(eid, events=0)
        found = {
            "profile": context.profile,
            "signals": context.signals,
            "events": acmi.timeline.size(eid),
        }
        if not dry_run:
            acmi.delete(eid)
        return {"entity": str(eid), "dry_run": dry_run, "deleted": not dry_run, "found": found}

    @tool(False, "This server's tenant (only its own) and its key's scope: {tenants, scope}.")
    def tenant_list() -> dict[str, Any]:
        return {"tenants": [acmi.tenant], "scope": tool.scope.value}

    return render


def _agent_tools(tool: _Tools, acmi: Acmi) -> None:
    """Agent slots: spawns, active threads, rollups, heartbeats."""

    @tool(True, "Log an agent session start (kept apart from the timeline); returns the record.")
    def spawn(
        agent: str, session_id: str, model_id: str, host: str | None = None
    ) -> dict[str, Any]:
        return acmi.agents.spawn(agent, session_id, model_id, host)

    @tool(
        True,
        "An agent's active threads. action list (default): {thread: {role, joined_at}}; "
        "add (thread, role) or remove (thread) change them.",
    )
    def active(
        agent: str, action: str = "list", thread: str | None = None, role: str = "participant"
    ) -> dict[str, Any]:
        if action == "list":
            return acmi.agents.active(agent)
        if action not in ("add", "remove"):
            raise AcmiValidationError("action", "enum", "must be one of add, remove, list")
        if not thread:
            raise AcmiValidationError("thread", "required", f"is needed to {action}")
        if action == "add":
            return acmi.agents.join(agent, thread, role)
        acmi.agents.leave(agent, thread)
        return {"removed": thread}

    @tool(True, "Set an agent's latest rollup summary (read by bootstrap); returns it.")
    def rollup_set(agent: str, summary: str) -> dict[str, Any]:
        return acmi.agents.set_rollup(agent, summary)

    @tool(False, "An agent's latest rollup: {agent, rollup: {ts, summary, ...} or null}.")
    def rollup_get(agent: str) -> dict[str, Any]:
        return {"agent": agent, "rollup": acmi.agents.rollup(agent)}

    @tool(
        True, "Record that an agent is alive (status: free text, default ACTIVE); returns the beat."
    )
    def heartbeat(agent: str, status: str = "ACTIVE", note: str | None = None) -> dict[str, Any]:
        return acmi.agents.heartbeat(agent, status, note)


def _work_tools(tool: _Tools, acmi: Acmi) -> None:
    """Work items: a profile, signals (status), a timeline and sessions each."""

    @tool(
        True,
        "Create a work item (id; title and/or a profile object; owner ns:id; status, "
        "default open); returns the item. Refused if it exists.",
    )
    def work_create(
        id: str,
        title: str | None = None,
        profile: dict[str, Any] | None = None,
        owner: str | None = None,
        status: str = "open",
    ) -> dict[str, Any]:
        doc = dict(profile or {})
        if title is not None:
            doc["title"] = title
        return acmi.work.create(id, doc, owner=owner, status=status).to_dict()

    @tool(
        True,
        "Append a Comms v1.1 event to a work item (session_id joins its sessions); returns "
        "the event as stored.",
    )
    def work_event(id: str, event: dict[str, Any], session_id: str | None = None) -> dict[str, Any]:
        return acmi.work.event(id, event, session_id)

    @tool(True, "Merge signals into a work item's (status closes or reopens it); returns them.")
    def work_signal(id: str, signals: dict[str, Any]) -> dict[str, Any]:
        return acmi.work.signal(id, signals)

    @tool(
        False,
        "A work item: {profile, signals, owner, status, timeline (newest events 0-1000, "
        "oldest first), sessions}.",
    )
    def work_get(id: str, events: int = 50) -> dict[str, Any]:
        return acmi.work.get(id, events).to_dict()

    @tool(
        False,
        "One page of work items: {items: [{id, ...}], next_cursor}. owner: ns:id; status "
        "open (default) or null for any; pass next_cursor back as cursor.",
    )
    def work_list(
        owner: str | None = None,
        status: str | None = "open",
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> dict[str, Any]:
        return acmi.work.list(owner, status, cursor=cursor, limit=limit).to_dict()

    @tool(False, "One page of a work item's session ids: {sessions, next_cursor}.")
    def work_sessions(
        id: str, cursor: str | None = None, limit: int = DEFAULT_PAGE_SIZE
    ) -> dict[str, Any]:
        return acmi.work.sessions_page(id, cursor=cursor, limit=limit).to_dict()


def _coordination_tools(tool: _Tools, acmi: Acmi) -> None:
    """Leases, human-in-the-loop, workflow assessments."""

    @tool(
        True,
        "Claim a lease on a resource for ttl_ms (owner: ns:id); returns it with the "
        "owner_token that renews and releases it. Refused while another holds it.",
    )
    def lock_claim(resource: str, owner: str, ttl_ms: int) -> dict[str, Any]:
        return acmi.locks.claim(resource, owner, ttl_ms).to_dict()

    @tool(True, "Renew a lease with its owner_token for ttl_ms more; returns the lease.")
    def lock_renew(resource: str, owner_token: str, ttl_ms: int) -> dict[str, Any]:
        return acmi.locks.renew(resource, owner_token, ttl_ms).to_dict()

    @tool(True, "Release a lease with its owner_token; returns the lease released.")
    def lock_release(resource: str, owner_token: str) -> dict[str, Any]:
        return acmi.locks.release(resource, owner_token).to_dict()

    @tool(False, "A lease's state now: {resource, held, owner, expires_at, fence}.")
    def lock_get(resource: str) -> dict[str, Any]:
        return acmi.locks.get(resource).to_dict()

    @tool(
        True,
        "Queue a human-in-the-loop request (urgency P0-P2; addressee ns:id, else the shared "
        "queue): {item, created}.",
    )
    def hitl_create(
        topic: str,
        request: str,
        asked_by: str,
        urgency: str = "P1",
        addressee: str | None = None,
    ) -> dict[str, Any]:
        created = acmi.hitl.create(
            topic, request, asked_by=asked_by, urgency=urgency, addressee=addressee
        )
        return {"item": created.item, "created": created.created}

    @tool(
        False,
        "One page of a human-in-the-loop queue (addressee, else the shared one; state open "
        "or closed): {items, next_cursor}.",
    )
    def hitl_list(
        addressee: str | None = None,
        state: str = "open",
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> dict[str, Any]:
        return acmi.hitl.list(addressee, state, limit=limit, cursor=cursor).to_dict()

    @tool(True, "Resolve a human-in-the-loop request by its correlation id; returns it.")
    def hitl_resolve(correlation_id: str, resolution: str, by: str) -> dict[str, Any]:
        return acmi.hitl.resolve(correlation_id, resolution, by=by).to_dict()

    @tool(
        True,
        "Score an executed workflow step 0-100 against criteria (a list of names, or "
        "name -> result); returns the assessment event.",
    )
    def assess(
        workflow: str,
        step: str,
        score: int,
        criteria: list[str] | dict[str, Any],
        agent: str,
        note: str | None = None,
    ) -> dict[str, Any]:
        return acmi.workflows.assess(workflow, step, score, criteria, agent, note=note).to_dict()

    @tool(True, "Record a lesson for a workflow step (it seeds the next bootstrap).")
    def improve(workflow: str, step: str, lesson: str, agent: str) -> dict[str, Any]:
        return acmi.workflows.improve(workflow, step, lesson, agent).to_dict()


def _memory_tools(tool: _Tools, acmi: Acmi) -> None:
    """The memory layers of an entity."""

    @tool(
        True,
        "Remember a line in an entity's memory: layer warm (MEMORY.md), hot "
        "(ACTIVE-CONTEXT.md), daily (today's note) or topic (topic: slug); section optional.",
    )
    def memory_remember(
        entity: str,
        text: str,
        layer: str = "warm",
        section: str | None = None,
        topic: str | None = None,
    ) -> dict[str, Any]:
        return acmi.memory.remember(entity, text, layer=layer, section=section, topic=topic)

    @tool(False, "Search an entity's memory layers, fast layers first: {hits, ...}.")
    def memory_search(entity: str, query: str, limit: int = 20) -> dict[str, Any]:
        return acmi.memory.search(entity, query, limit=limit)

    @tool(False, "An entity's memory status: layers, budgets, handoff_pending.")
    def memory_status(entity: str) -> dict[str, Any]:
        return acmi.memory.status(entity)

    @tool(
        False,
        "The hot layer: {entity, path, text: ACTIVE-CONTEXT.md or null, sections, budget}; "
        "with text, replace ACTIVE-CONTEXT.md first (needs a write key).",
    )
    def memory_active(entity: str, text: str | None = None) -> dict[str, Any]:
        if text is not None:
            tool.check_write()
            acmi.memory.set_active(entity, text)
        return acmi.memory.active(entity)

    @tool(
        True,
        "The weekly review: promote the last 7 days' lessons and decisions to MEMORY.md and "
        "prune the hot layer.",
    )
    def memory_review(entity: str) -> dict[str, Any]:
        return acmi.memory.review(entity)

    @tool(
        True,
        "Prune the hot layer: completed tasks, items older than days (0-365) and yesterday's "
        "decisions move to today's note. Idempotent.",
    )
    def memory_prune(entity: str, days: int = DEFAULT_PRUNE_DAYS) -> dict[str, Any]:
        return acmi.memory.prune(entity, days)

    @tool(
        False,
        "A day's note (date YYYY-MM-DD, default today in the entity's tz): entries, "
        "decisions, lessons, takeaways, open tasks for tomorrow, the text.",
    )
    def memory_daily_summary(entity: str, date: str | None = None) -> dict[str, Any]:
        return acmi.memory.daily_summary(entity, date)

    @tool(True, "Create the topic:<slug> file from the seed's template, linked from MEMORY.md.")
    def memory_topic_create(entity: str, slug: str, name: str) -> dict[str, Any]:
        return acmi.memory.topic_create(entity, slug, name)

    @tool(False, "Missing pieces, hot-vs-warm conflicts and stale items: {ok, problems, ...}.")
    def memory_debug(entity: str) -> dict[str, Any]:
        return acmi.memory.debug(entity)

    @tool(False, "The seed's file tree of an entity's memory: {entity, files: {path: text}}.")
    def memory_export(entity: str) -> dict[str, Any]:
        return {"entity": entity, "files": tree_texts(acmi.memory.export_snapshot(entity))}

    @tool(
        True,
        "Import a seed file tree ({path: text}; strict: refuse files over budget) into an "
        "entity's memory. Idempotent: a second import writes nothing.",
    )
    def memory_import(entity: str, files: dict[str, str], strict: bool = False) -> dict[str, Any]:
        return acmi.memory.import_snapshot(entity, parse_texts(files), strict=strict)

    @tool(
        True,
        "With text: leave a handoff (HANDOFF.md) for the next session; returns it. Without: "
        "take the pending handoff (read and cleared at once): {entity, handoff or null}.",
    )
    def memory_handoff(entity: str, text: str | None = None) -> dict[str, Any]:
        if text is not None:
            return acmi.memory.handoff(entity, text)
        return {"entity": str(EntityId.parse(entity)), "handoff": acmi.memory.take_handoff(entity)}

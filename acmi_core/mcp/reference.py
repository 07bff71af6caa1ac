"""The reference MCP server's tool set (madezmedia/acmi ``mcp/mcp-server.mjs`` v2.0,
commit ``REFERENCE_COMMIT``), served when ``ACMI_MCP_TOOLS`` is ``reference`` or ``all``,
so an agent whose prompts or skills name those tools works with nothing changed but the
server's command.

Exactly as the reference lists them: the 17 names, descriptions and input schemas
(``REFERENCE``; the golden file ``tests/e2e/snapshots/reference_mcp.json`` was recorded
from the reference server itself), and answers of the same shape: one text block of
compact JSON (``JSON.stringify``), with the reference's keys in its order.

Underneath, ours: each tool validates and calls the operation table's rows on the
caller's client (``_call``: the row's params model, its core callable), so the tenant is
the key's (the ``tenant`` argument is accepted, as the reference's schema declares it,
and ignored: a caller never picks a tenant), the secret guard and the limits hold, a
read-only key gets a tool error from a write, and ``acmi_delete`` reaches only the
profile or signals of one entity of the caller's tenant (``_delete_target``). A failure
is the reference's ``{"ok": false, "tool", "error"}`` text, flagged ``isError`` (the
reference answered it as a success). The README's migration note lists every difference
from the reference and from our own tools.

One module: the 17 tools' listing and their answers are one contract, read side by side
with mcp-server.mjs (``REFERENCE`` in its order); split, each half would be checked
against the reference without the other."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from acmi_core import Acmi, AcmiError
from acmi_core.base.durations import window
from acmi_core.base.errors import AcmiValidationError, NotFound
from acmi_core.base.model import EntityId
from acmi_core.base.stored import render_json
from acmi_core.entities.api import MAX_CAT_LIMIT
from acmi_core.operations import operation
from acmi_core.operations.bind import call_core, core_call, validated

REFERENCE_COMMIT: Final = "886dfc083c0614fde86fb95301caefb0a37110e4"
SCHEMA_DIALECT: Final = "http://json-schema.org/draft-07/schema#"

# An argument: (name, JSON type, required, description or None); ("keys", "array") is
# an array of strings, the only array the reference takes.
Arg = tuple[str, str, bool, str | None]

TENANT_DEFAULT: Final[Arg] = (
    "tenant",
    "string",
    False,
    "Tenant override (defaults to ACMI_DEFAULT_TENANT)",
)
TENANT: Final[Arg] = ("tenant", "string", False, "Tenant override")
TENANT_BARE: Final[Arg] = ("tenant", "string", False, None)

# Defaults where the reference stored less than our events and spawns require.
DEFAULT_KIND: Final = "event"  # the reference's documented default kind
UNSPECIFIED: Final = "unspecified"  # a spawn's session or model the caller did not give
LIST_PAGE: Final = 1000
MAX_LIST_IDS: Final = 10_000  # acmi_list / acmi_work_list: ids counted, at most
CAT_READ: Final = 500  # events merged per key for acmi_cat's total, as the reference

Answer = dict[str, Any]
Run = Callable[[Acmi, Mapping[str, Any]], Answer]


@dataclass(frozen=True)
class RefTool:
    """One reference tool: what tools/list shows, whether it writes, what it does."""

    name: str
    description: str
    args: tuple[Arg, ...]
    writes: bool
    run: Run

    def input_schema(self) -> dict[str, Any]:
        """The schema as the reference's SDK lists it (zod -> JSON Schema draft 7)."""
        if not self.args:  # the SDK's own shape for a tool with no arguments
            return {"$schema": SCHEMA_DIALECT, "type": "object", "properties": {}}
        properties: dict[str, Any] = {}
        for name, kind, _, description in self.args:
            prop: dict[str, Any] = {"type": kind}
            if kind == "array":
                prop["items"] = {"type": "string"}
            if description is not None:
                prop["description"] = description
            properties[name] = prop
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        required = [name for name, _, needed, _ in self.args if needed]
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        schema["$schema"] = SCHEMA_DIALECT
        return schema


def text(value: Any) -> str:
    """``JSON.stringify(value)``: compact, stored values exactly as written."""
    return render_json(value).decode("utf-8")


def failure(tool: str, exc: AcmiError) -> str:
    """The reference's error answer, ours inside: the field, the message, the rule."""
    message = exc.message if exc.message.startswith(exc.field) else f"{exc.field}: {exc.message}"
    return text({"ok": False, "tool": tool, "error": f"{message} (rule: {exc.rule})"})


# --- helpers --------------------------------------------------------------------------


def _call(acmi: Acmi, name: str, **values: Any) -> Any:
    """The row ``name``: its params model checks ``values``, its core callable runs."""
    row = operation(name)
    return call_core(acmi, row, validated(row, values))


def _core(acmi: Acmi, name: str) -> Callable[..., Any]:
    """The row ``name``'s core callable on the caller's client, for a row whose params
    name its arguments otherwise (the reference's arguments are checked here)."""
    return core_call(acmi, operation(name))


def _entity(namespace: str, id: str) -> EntityId:
    """``<namespace>:<id>`` as our entity id; the namespace is one segment."""
    if ":" in namespace:
        raise AcmiValidationError("namespace", "segment", "must not contain ':'")
    return EntityId.parse(f"{namespace}:{id}", "namespace:id")


def _agent(agent_id: str) -> EntityId:
    return _entity("agent", agent_id)


def _json(raw: str, field: str) -> Any:
    """A JSON-string argument (the reference took objects as JSON text)."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise AcmiValidationError(field, "json", f"is not valid JSON: {exc.msg}") from None


def _object(raw: str, field: str) -> dict[str, Any]:
    value = _json(raw, field)
    if not isinstance(value, dict):
        raise AcmiValidationError(field, "object", "must be a JSON object")
    return value


def _event(args: Mapping[str, Any]) -> dict[str, Any]:
    """The reference's event arguments as one of ours (kind and correlationId required)."""
    return {
        "source": args["source"],
        "kind": args.get("kind") or DEFAULT_KIND,
        "correlationId": args.get("correlationId") or f"mcp-{uuid.uuid4().hex[:16]}",
        "summary": args["summary"],
    }


def _count(value: Any, default: int, field: str, least: int) -> int:
    """A ``number`` argument that counts (the reference's ``limit || default``)."""
    if not value:
        return default
    if float(value) != int(value) or value < least:
        raise AcmiValidationError(field, "range", f"must be a whole number >= {least}")
    return int(value)


def _newest(events: list[Any]) -> list[Any]:
    """Our timelines read oldest first; the reference's answers are newest first."""
    return list(reversed(events))


def _ids(acmi: Acmi, category: str) -> list[str]:
    """The local ids of ``category``'s entities, page by page, at most MAX_LIST_IDS."""
    ids: list[str] = []
    cursor: str | None = None
    while len(ids) < MAX_LIST_IDS:
        page = _core(acmi, "entities.list")(category, cursor=cursor, limit=LIST_PAGE)
        ids.extend(e.partition(":")[2] for e in page.entities)
        cursor = page.next_cursor
        if cursor is None:
            break
    return ids[:MAX_LIST_IDS]


# --- the tools ------------------------------------------------------------------------


def profile(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    eid = _entity(a["namespace"], a["id"])
    _core(acmi, "entities.profile.put")(eid, _object(a["profile"], "profile"))
    return {"ok": True, "tenant": acmi.tenant, "key": acmi.keys.profile(eid)}


def signal(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    eid = _entity(a["namespace"], a["id"])
    _core(acmi, "entities.signals.put")(eid, _object(a["signals"], "signals"))
    return {"ok": True, "tenant": acmi.tenant, "key": acmi.keys.signals(eid)}


def event(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    eid = _entity(a["namespace"], a["id"])
    # one event appended as our `event` tool does (the events row takes an HTTP body)
    appended = acmi.timeline.append(eid, _event(a)).to_dict()
    key = acmi.keys.timeline(eid)
    return {"ok": True, "tenant": acmi.tenant, "key": key, "event": appended}


def get(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    eid = _entity(a["namespace"], a["id"])
    body = _call(acmi, "entities.get", entity=str(eid), events=10)
    return {
        "namespace": a["namespace"],
        "id": a["id"],
        "tenant": acmi.tenant,
        "profile": body["profile"],
        "signals": body["signals"] or None,
        "timeline_recent": _newest(body["timeline"]),
    }


def list_ids(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    namespace = a["namespace"]
    limit = _count(a.get("limit"), 100, "limit", 0)
    ids = _ids(acmi, namespace)
    return {"namespace": namespace, "tenant": acmi.tenant, "count": len(ids), "ids": ids[:limit]}


def cat(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    limit = _count(a.get("limit"), 50, "limit", 1)
    # since: a window back from now (the reference compared it to the epoch)
    since = a.get("since")
    start = window(acmi.clock(), since, None)[0] if since else None
    entities = [str(EntityId.parse(k, f"keys[{i}]")) for i, k in enumerate(a["keys"])]
    row = operation("entities.cat")
    params = validated(row, {"entities": entities})  # the row's own checks of the names
    read = min(CAT_READ * len(entities), MAX_CAT_LIMIT) if entities else 1
    merged = core_call(acmi, row)(params.entities, limit=read, since_ms=start)  # type: ignore[attr-defined]
    top = [e.to_dict() for _, e in merged[:limit]]
    return {"count": len(top), "total": len(merged), "events": top}


def bootstrap(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    eid = _agent(a["agentId"])
    body = _call(acmi, "entities.get", entity=str(eid), events=10)
    active = _core(acmi, "agents.threads")(str(eid))
    rollup = _call(acmi, "agents.rollup.get", agent=str(eid))
    spawns = _call(acmi, "agents.spawns", agent=str(eid), limit=5)
    return {
        "agent_id": a["agentId"],
        "tenant": acmi.tenant,
        "profile": body["profile"],
        "signals": body["signals"] or None,
        "active_context": active,
        "rollup_latest": rollup,
        "timeline_recent": _newest(body["timeline"]),
        "recent_spawns": [_spawn_data(record) for record in spawns],
    }


def _spawn_data(record: Mapping[str, Any]) -> dict[str, Any]:
    """A spawn record in the reference's names (``acmi_spawn``'s ``data``): ts,
    sessionId and modelId when they were given, host when there is one."""
    data: dict[str, Any] = {"ts": record.get("ts")}
    for ours, theirs in (("session_id", "sessionId"), ("model_id", "modelId"), ("host", "host")):
        value = record.get(ours)
        if value is not None and value != UNSPECIFIED:
            data[theirs] = value
    return data


def spawn(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    eid = _agent(a["agentId"])
    record = _call(
        acmi,
        "agents.spawn",
        agent=str(eid),
        session_id=a.get("sessionId") or UNSPECIFIED,
        model_id=a.get("modelId") or UNSPECIFIED,
    )
    data = _spawn_data(record)
    return {"ok": True, "tenant": acmi.tenant, "key": acmi.keys.slot(eid, "spawns"), "data": data}


def active(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    eid = _agent(a["agentId"])
    if ":" in a["threadKey"]:
        raise AcmiValidationError("threadKey", "segment", "must not contain ':'")
    row = operation("agents.join")
    role = a.get("role") or "participant"
    call_core(
        acmi, row, validated(row, {"agent": str(eid), "thread": a["threadKey"], "role": role})
    )
    return {"ok": True, "tenant": acmi.tenant}


def rollup_set(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    eid = _agent(a["agentId"])
    value = _json(a["rollup"], "rollup")
    if isinstance(value, str):
        value = {"summary": value}
    if not isinstance(value, dict) or not isinstance(value.get("summary"), str):
        raise AcmiValidationError(
            "rollup", "summary", 'must be a JSON object with a "summary" string (or a string)'
        )
    extra = {k: v for k, v in value.items() if k not in ("summary", "ts")}
    row = operation("agents.rollup.put")
    params = validated(row, {"agent": str(eid), "summary": value["summary"]})
    core_call(acmi, row)(params.agent, params.summary, **extra)  # type: ignore[attr-defined]
    return {"ok": True, "tenant": acmi.tenant, "key": acmi.keys.slot(eid, "rollup:latest")}


def work_create(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    row = operation("work.create")
    params = validated(row, {"id": a["id"], "title": a["title"]})
    # the profile the reference writes (its status: the item's status when created)
    doc = {"id": params.id, "title": params.title, "status": "open", "created_at": acmi.clock()}  # type: ignore[attr-defined]
    item = core_call(acmi, row)(params.id, doc)  # type: ignore[attr-defined]
    work = {name: item.profile[name] for name in ("id", "title", "status", "created_at")}
    return {"ok": True, "tenant": acmi.tenant, "work": work}


def work_event(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    stored = _call(acmi, "work.event", id=a["id"], event=_event(a))
    return {"ok": True, "tenant": acmi.tenant, "event": stored}


def work_signal(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    values = _object(a["signals"], "signals")
    _call(acmi, "work.signals", id=a["id"], signals=values)
    key = acmi.keys.signals(EntityId.parse(f"work:{a['id']}", "id"))
    return {"ok": True, "tenant": acmi.tenant, "key": key}


def work_get(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    try:
        item = _call(acmi, "work.get", id=a["id"], events=20)
    except NotFound:  # the reference answers nulls for an item that does not exist
        EntityId.parse(f"work:{a['id']}", "id")
        return {
            "id": a["id"],
            "tenant": acmi.tenant,
            "profile": None,
            "signals": None,
            "timeline": [],
        }
    return {
        "id": a["id"],
        "tenant": acmi.tenant,
        "profile": item["profile"],
        "signals": item["signals"] or None,
        "timeline": _newest(item["timeline"]),
    }


def work_list(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    ids = _ids(acmi, "work")
    return {"tenant": acmi.tenant, "count": len(ids), "ids": ids}


class Refused(Exception):
    """acmi_delete's refusal, answered in the reference's own refusal shape."""


def _delete_target(acmi: Acmi, key: str) -> tuple[EntityId, str]:
    """The (entity, slot) ``key`` names: the profile or signals of one entity of the
    caller's tenant, in our key layout or the reference MCP server's
    (``acmi:<tenant>:<ns>:<id>:<slot>``, the caller's tenant only). Anything else
    (another tenant's, a timeline, an index, an API key, a registry, a pattern) is
    refused."""
    if set("*?[]") & set(key):
        raise Refused("patterns are refused: name one key")
    head, _, slot = key.rpartition(":")
    probe = acmi.keys.slot(EntityId.parse("a:b"), "s")
    ours = probe.removesuffix("a:b:s")  # this tenant's prefix in our layout
    theirs = f"acmi:{acmi.tenant}:"
    for prefix in (ours, theirs):
        if not head.startswith(prefix):
            continue
        try:
            eid = EntityId.parse(head.removeprefix(prefix))
        except AcmiError:
            continue
        if prefix == theirs or acmi.keys.slot(eid, slot) == key:
            if slot in ("profile", "signals"):
                return eid, slot
            if slot == "timeline":
                raise Refused(
                    "a timeline is deleted only with its whole entity (the delete tool of "
                    "ACMI_MCP_TOOLS=ours or all, or `acmi delete`)"
                )
    raise Refused(
        f"only the profile or signals of an entity of this tenant ({acmi.tenant}) can be "
        "deleted: give the key acmi_profile or acmi_signal reported"
    )


def delete(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    key = a["key"]
    try:
        eid, slot = _delete_target(acmi, key)
    except Refused as why:
        raise RefusedAnswer({"ok": False, "error": f"Refusing to delete {key}: {why}"}) from None
    if not a.get("confirm"):
        return {"ok": True, "dry_run": True, "key": key, "action": "would delete"}
    _call(acmi, f"entities.{slot}.delete", entity=str(eid))
    return {"ok": True, "key": key, "action": "deleted"}


class RefusedAnswer(Exception):
    """A refusal whose answer is given whole (the reference's shape, flagged isError)."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer["error"])
        self.answer = answer


def tenant_list(acmi: Acmi, a: Mapping[str, Any]) -> Answer:
    return {"allowed_tenants": [acmi.tenant], "default_tenant": acmi.tenant}


NS: Final[Arg] = ("namespace", "string", True, "ACMI namespace")
ID: Final[Arg] = ("id", "string", True, "Entity ID")

REFERENCE: Final[tuple[RefTool, ...]] = (
    RefTool(
        "acmi_profile",
        "Create or update an entity profile in ACMI. Stores arbitrary JSON profile data for "
        "an entity (agent, thread, project, etc.).",
        (
            ("namespace", "string", True, "ACMI namespace (e.g. 'agent', 'thread', 'work')"),
            ("id", "string", True, "Entity ID within the namespace"),
            ("profile", "string", True, "JSON string of profile data to store"),
            TENANT_DEFAULT,
        ),
        True,
        profile,
    ),
    RefTool(
        "acmi_signal",
        "Update AI signals for an entity. Signals are mutable KV state (mood, priorities, "
        "scores, etc.) that changes frequently.",
        (NS, ID, ("signals", "string", True, "JSON string of signal data to store"), TENANT),
        True,
        signal,
    ),
    RefTool(
        "acmi_event",
        "Log a timeline event for an entity. The workhorse tool — records timestamped events "
        "with source, kind, correlationId, and summary. Follows ACMI Communication Standard "
        "v1.1.",
        (
            NS,
            ID,
            ("source", "string", True, "Event source (e.g. 'agent:bentley')"),
            ("summary", "string", True, "Human-readable event summary"),
            ("kind", "string", False, "Event kind (default: 'event')"),
            ("correlationId", "string", False, "Correlation ID for chain tracking"),
            TENANT,
        ),
        True,
        event,
    ),
    RefTool(
        "acmi_get",
        "Fetch complete entity context: profile + signals + recent timeline events (last 10).",
        (NS, ID, TENANT),
        False,
        get,
    ),
    RefTool(
        "acmi_list",
        "List all entity IDs within a namespace (and optional tenant).",
        (
            ("namespace", "string", True, "ACMI namespace to list"),
            TENANT,
            ("limit", "number", False, "Max entities to return (default 100)"),
        ),
        False,
        list_ids,
    ),
    RefTool(
        "acmi_cat",
        "Multi-stream event merge view. Combines timeline events from multiple entities, "
        "sorted by timestamp. Supports --since filtering.",
        (
            (
                "keys",
                "array",
                True,
                "ACMI stream keys (e.g. ['thread:agent-coordination', 'work:item-123'])",
            ),
            ("since", "string", False, "Time window: e.g. '24h', '7d', '30m'"),
            ("limit", "number", False, "Max events to return (default 50)"),
        ),
        False,
        cat,
    ),
    RefTool(
        "acmi_bootstrap",
        "One-shot agent context bundle. Fetches everything a fresh agent session needs: "
        "profile, signals, active threads, rollup, recent timeline, and spawns.",
        (("agentId", "string", True, "Agent ID to bootstrap"), TENANT),
        False,
        bootstrap,
    ),
    RefTool(
        "acmi_spawn",
        "Log an agent session spawn event.",
        (
            ("agentId", "string", True, "Agent ID being spawned"),
            ("sessionId", "string", False, "Session identifier"),
            ("modelId", "string", False, "Model ID for this session"),
            TENANT,
        ),
        True,
        spawn,
    ),
    RefTool(
        "acmi_active",
        "Track thread engagement for an agent.",
        (
            ("agentId", "string", True, "Agent ID"),
            ("threadKey", "string", True, "Thread key (e.g. 'agent-coordination')"),
            (
                "role",
                "string",
                False,
                "Role in thread: 'participant' or 'lead' (default 'participant')",
            ),
            TENANT,
        ),
        True,
        active,
    ),
    RefTool(
        "acmi_rollup_set",
        "Write the latest session rollup for an agent (read by acmi_bootstrap).",
        (
            ("agentId", "string", True, "Agent ID"),
            ("rollup", "string", True, "JSON string of rollup data"),
            TENANT,
        ),
        True,
        rollup_set,
    ),
    RefTool(
        "acmi_work_create",
        "Create a new work item.",
        (("id", "string", True, None), ("title", "string", True, None), TENANT_BARE),
        True,
        work_create,
    ),
    RefTool(
        "acmi_work_event",
        "Add an event to a work item timeline.",
        (
            ("id", "string", True, None),
            ("source", "string", True, None),
            ("summary", "string", True, None),
            ("kind", "string", False, None),
            TENANT_BARE,
        ),
        True,
        work_event,
    ),
    RefTool(
        "acmi_work_signal",
        "Update work item signals.",
        (("id", "string", True, None), ("signals", "string", True, None), TENANT_BARE),
        True,
        work_signal,
    ),
    RefTool(
        "acmi_work_get",
        "Fetch work item profile + signals + recent events.",
        (("id", "string", True, None), TENANT_BARE),
        False,
        work_get,
    ),
    RefTool("acmi_work_list", "List all work item IDs.", (TENANT_BARE,), False, work_list),
    RefTool(
        "acmi_delete",
        "Delete an ACMI key. Supports dry-run mode and refuses to delete protected paths "
        "(acmi:registry:*, acmi:notion-sync:*).",
        (
            (
                "key",
                "string",
                True,
                "Full ACMI key to delete (e.g. 'acmi:agent:foo:profile')",
            ),
            (
                "confirm",
                "boolean",
                False,
                "Set to true to actually delete (default is dry-run)",
            ),
        ),
        True,
        delete,
    ),
    RefTool(
        "acmi_tenant_list",
        "List all tenants visible to this MCP client (from ACMI_ALLOWED_TENANTS env).",
        (),
        False,
        tenant_list,
    ),
)

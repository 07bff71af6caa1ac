"""The MCP tools whose answer is not their core callable's return value as it is: the
reference's shapes (``{entity, profile, merged}``), one tool covering two calls (a
replace or a merge, a list or an add), and the checks only a tool makes (a delete that
names one entity). Every other tool calls its row's core callable with its params'
fields (``acmi_core.mcp.server``), so a new operation needs no entry here unless its tool
answers differently from its core function.

Each entry takes the tenant's client and the tool's validated params, keyed by the
operation's name; ``tests/integration/test_operations.py`` checks every key is a row with
a tool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from acmi_core import Acmi
from acmi_core.auth.apikeys import Scope
from acmi_core.base.durations import window
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import EntityId
from acmi_core.entities.api import deletable
from acmi_core.entities.results import EntityBody, EntityListBody
from acmi_core.memory.results import ActiveRead, Exported, Handoff, HandoffTakenTool, Imported
from acmi_core.memory.tree import parse_texts, tree_texts
from acmi_core.operations import bind
from acmi_core.operations import params as p

MAX_GET_EVENTS: Final = 1000  # as GET /v1/entities/{entity}
_WILDCARDS: Final = frozenset("*?[]")

Shaped = Callable[[Acmi, Scope, Any], Any]


def _entity(entity: str) -> str:
    return str(EntityId.parse(entity))


def profile_put(acmi: Acmi, scope: Scope, q: p.ProfilePutParams) -> dict[str, Any]:
    stored = (
        acmi.profile.merge(q.entity, q.profile)
        if q.merge
        else acmi.profile.set(q.entity, q.profile)
    )
    return {"entity": _entity(q.entity), "profile": stored, "merged": q.merge}


def profile_get(acmi: Acmi, scope: Scope, q: p.ProfileGetParams) -> dict[str, Any]:
    return {"entity": q.entity, "profile": acmi.profile.get(q.entity)}


def profile_patch(acmi: Acmi, scope: Scope, q: p.ProfilePatchParams) -> dict[str, Any]:
    return {"entity": _entity(q.entity), "profile": acmi.profile.merge(q.entity, q.partial)}


def signals_put(acmi: Acmi, scope: Scope, q: p.SignalsPutParams) -> dict[str, Any]:
    if q.merge:
        acmi.signals.update(q.entity, q.signals)
        stored: Any = acmi.signals.all(q.entity)
    else:
        stored = dict(acmi.signals.replace(q.entity, q.signals))
    return {"entity": _entity(q.entity), "signals": stored, "merged": q.merge}


def signals_get(acmi: Acmi, scope: Scope, q: p.SignalsGetParams) -> dict[str, Any]:
    if q.key is None:
        return {"entity": q.entity, "signals": acmi.signals.all(q.entity)}
    return {"entity": q.entity, "key": q.key, "value": acmi.signals.get(q.entity, q.key)}


def signal_put(acmi: Acmi, scope: Scope, q: p.SignalPutParams) -> dict[str, Any]:
    stored = acmi.signals.set(q.entity, q.key, q.value, ttl=q.ttl)
    return {"entity": q.entity, "key": q.key, "value": stored}


def events_append(acmi: Acmi, scope: Scope, q: p.EventsAppendParams) -> dict[str, Any]:
    return acmi.timeline.append(q.entity, q.event).to_dict()


def get(acmi: Acmi, scope: Scope, q: p.GetParams) -> EntityBody:
    if not 0 <= q.events <= MAX_GET_EVENTS:
        raise AcmiValidationError(
            "events", "range", f"must be an integer from 0 to {MAX_GET_EVENTS}"
        )
    return acmi.get(q.entity, events=q.events).to_dict()


def list_page(acmi: Acmi, scope: Scope, q: p.ListParams) -> EntityListBody:
    page = acmi.list_page(q.category, cursor=q.cursor, limit=q.limit)
    return {"category": q.category, "entities": page.entities, "next_cursor": page.next_cursor}


def cat(acmi: Acmi, scope: Scope, q: p.CatParams) -> dict[str, Any]:
    names = [str(EntityId.parse(e, f"entities[{i}]")) for i, e in enumerate(q.entities)]
    start, end = window(acmi.clock(), q.since, q.until)
    # one page of the merge: an answer of at most MAX_PAGE_BYTES of events (next_cursor,
    # only when the cap cut it, continues; an until past the cursor restarts there)
    page = acmi.timeline.cat_page(
        names, cursor=q.cursor, limit=q.limit, since_ms=start, until_ms=end
    )
    events = [{"entity": entity, **event.to_dict()} for entity, event in page.events]
    body: dict[str, Any] = {"since": q.since, "until": q.until, "events": events}
    if page.next_cursor is not None:
        body["next_cursor"] = page.next_cursor
    return body


def bootstrap(acmi: Acmi, scope: Scope, q: p.BootstrapReadParams) -> str:
    return acmi.bootstrap(**bind.fields(q)).text  # the bundle's text, in its format


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
    return deletable(entity)  # another writer's id too, unless it holds ':' (a key's name)


def delete(acmi: Acmi, scope: Scope, q: p.DeleteParams) -> dict[str, Any]:
    eid = _delete_target(q.entity)
    context = acmi.get(eid, events=0)
    found = {
        "profile": context.profile,
        "signals": context.signals,
        "events": acmi.timeline.size(eid),
    }
    if not q.dry_run:
        acmi.delete(eid)
    return {"entity": str(eid), "dry_run": q.dry_run, "deleted": not q.dry_run, "found": found}


def tenants_list(acmi: Acmi, scope: Scope, q: p.TenantsListParams) -> dict[str, Any]:
    return {"tenants": [acmi.tenant], "scope": scope.value}


def threads(acmi: Acmi, scope: Scope, q: p.AgentsThreadsParams) -> dict[str, Any]:
    if q.action == "list":
        return acmi.agents.active(q.agent)
    if q.action not in ("add", "remove"):
        raise AcmiValidationError("action", "enum", "must be one of add, remove, list")
    if not q.thread:
        raise AcmiValidationError("thread", "required", f"is needed to {q.action}")
    if q.action == "add":
        return dict(acmi.agents.join(q.agent, q.thread, q.role))
    acmi.agents.leave(q.agent, q.thread)
    return {"removed": q.thread}


def rollup_get(acmi: Acmi, scope: Scope, q: p.AgentsRollupGetParams) -> dict[str, Any]:
    return {"agent": q.agent, "rollup": acmi.agents.rollup(q.agent)}


def work_create(acmi: Acmi, scope: Scope, q: p.WorkCreateParams) -> dict[str, Any]:
    doc = dict(q.profile or {})
    if q.title is not None:
        doc["title"] = q.title
    return dict(acmi.work.create(q.id, doc, owner=q.owner, status=q.status).to_dict())


def hitl_create(acmi: Acmi, scope: Scope, q: p.HitlCreateParams) -> dict[str, Any]:
    created = acmi.hitl.create(
        q.topic, q.request, asked_by=q.asked_by, urgency=q.urgency, addressee=q.addressee
    )
    return {"item": created.item, "created": created.created}


def memory_active(acmi: Acmi, scope: Scope, q: p.MemoryActiveGetParams) -> ActiveRead:
    if q.text is not None:
        acmi.memory.set_active(q.entity, q.text)
    return acmi.memory.active(q.entity)


def memory_export(acmi: Acmi, scope: Scope, q: p.MemoryExportParams) -> Exported:
    return {"entity": q.entity, "files": tree_texts(acmi.memory.export_snapshot(q.entity))}


def memory_import(acmi: Acmi, scope: Scope, q: p.MemoryImportParams) -> Imported:
    return acmi.memory.import_snapshot(q.entity, parse_texts(q.files), strict=q.strict)


def memory_handoff(
    acmi: Acmi, scope: Scope, q: p.MemoryHandoffParams
) -> Handoff | HandoffTakenTool:
    parts = (q.done, q.in_progress, q.next_steps, q.decisions, q.gotchas)
    if q.text is not None or any(v is not None for v in parts):
        return acmi.memory.handoff(
            q.entity,
            q.text,
            done=q.done,
            in_progress=q.in_progress,
            next_steps=q.next_steps,
            decisions=q.decisions,
            gotchas=q.gotchas,
        )
    return {"entity": _entity(q.entity), "handoff": acmi.memory.take_handoff(q.entity)}


SHAPES: Final[dict[str, Shaped]] = {
    "entities.profile.put": profile_put,
    "entities.profile.get": profile_get,
    "entities.profile.patch": profile_patch,
    "entities.signals.put": signals_put,
    "entities.signals.get": signals_get,
    "entities.signal.put": signal_put,
    "entities.events.append": events_append,
    "entities.get": get,
    "entities.list": list_page,
    "entities.cat": cat,
    "entities.delete": delete,
    "tenants.list": tenants_list,
    "bootstrap.read": bootstrap,
    "agents.threads": threads,
    "agents.rollup.get": rollup_get,
    "work.create": work_create,
    "hitl.create": hitl_create,
    "memory.active.get": memory_active,
    "memory.export": memory_export,
    "memory.import": memory_import,
    "memory.handoff": memory_handoff,
}

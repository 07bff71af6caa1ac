"""Entity reads and writes: the whole entity, profile, signals, timeline; and appending
events (the ingest function's)."""

from __future__ import annotations

from typing import Final

from acmi_core.operations.model import NONE, STORED, STORED_VALUE, Access, Capability, Operation

ENTITIES: Final = Capability("entities", reads="EntityReads", writes="EntityWrites")
# Appends count what they store (EventsStored), not the call.
INGEST: Final = Capability("ingest")

_ACMI: Final = "acmi_core.client.facade:Acmi"
_PROFILE: Final = "acmi_core.entities.api:ProfileAPI"
_SIGNALS: Final = "acmi_core.entities.api:SignalsAPI"
_TIMELINE: Final = "acmi_core.entities.api:TimelineAPI"

_ENTITY: Final = "/v1/entities/{entity}"
# what a write that answers nothing returns

OPERATIONS: Final[tuple[Operation, ...]] = (
    INGEST.write(
        "entities.events.append",
        "POST",
        f"{_ENTITY}/events",
        "Append one Comms v1.1 event or a list of up to 100, atomically",
        "acmi_core.ingest.service:append_events",
        mcp="event",
        params="acmi_core.operations.params.entities:EventsAppendParams",
        cli="event",
        result="acmi_core.ingest.service:IngestResult",
    ),
    ENTITIES.read(
        "entities.get",
        "GET",
        _ENTITY,
        "Profile, signals and newest events: one round trip",
        f"{_ACMI}.get",
        mcp="get",
        params="acmi_core.operations.params.entities:GetParams",
        cli="get",
        result="acmi_core.entities.api:EntityContext",
    ),
    ENTITIES.write(
        "entities.delete",
        "DELETE",
        _ENTITY,
        "Delete every key of the entity and its index entry",
        f"{_ACMI}.delete",
        mcp="delete",
        params="acmi_core.operations.params.entities:DeleteParams",
        cli="delete",
        result=NONE,
    ),
    ENTITIES.read(
        "entities.list",
        "GET",
        "/v1/namespaces/{category}/entities",
        "Entities of a category, a page at a time (follow next_cursor until null)",
        f"{_ACMI}.list_page",
        mcp="list",
        params="acmi_core.operations.params.entities:ListParams",
        cli="list",
        result="acmi_core.entities.api:EntityPage",
    ),
    ENTITIES.read(
        "entities.profile.get",
        "GET",
        f"{_ENTITY}/profile",
        "The profile (404 when none)",
        f"{_PROFILE}.get",
        mcp="profile_get",
        params="acmi_core.operations.params.entities:ProfileGetParams",
        result=STORED,
    ),
    ENTITIES.write(
        "entities.profile.put",
        "PUT",
        f"{_ENTITY}/profile",
        "Replace the profile (a JSON object)",
        f"{_PROFILE}.set",
        mcp="profile",
        params="acmi_core.operations.params.entities:ProfilePutParams",
        cli="profile",
        result=STORED,
    ),
    ENTITIES.write(
        "entities.profile.patch",
        "PATCH",
        f"{_ENTITY}/profile",
        "Shallow-merge into the profile, atomically; returns the merged profile",
        f"{_PROFILE}.merge",
        mcp="profile_merge",
        params="acmi_core.operations.params.entities:ProfilePatchParams",
        result=STORED,
    ),
    ENTITIES.write(
        "entities.profile.delete",
        "DELETE",
        f"{_ENTITY}/profile",
        "Delete the profile",
        f"{_PROFILE}.delete",
        params="acmi_core.operations.params.entities:ProfileDeleteParams",
        result=NONE,
    ),
    ENTITIES.read(
        "entities.signals.get",
        "GET",
        f"{_ENTITY}/signals",
        "All signals ({} when none)",
        f"{_SIGNALS}.all",
        mcp="signal_get",
        params="acmi_core.operations.params.entities:SignalsGetParams",
        result=STORED,
    ),
    ENTITIES.write(
        "entities.signals.put",
        "PUT",
        f"{_ENTITY}/signals",
        "Replace all signals",
        f"{_SIGNALS}.replace",
        mcp="signal",
        params="acmi_core.operations.params.entities:SignalsPutParams",
        cli="signal",
        result=STORED,
    ),
    ENTITIES.write(
        "entities.signals.patch",
        "PATCH",
        f"{_ENTITY}/signals",
        "Set the given signals, keep the others (atomic)",
        f"{_SIGNALS}.update",
        params="acmi_core.operations.params.entities:SignalsPatchParams",
        result=NONE,
    ),
    ENTITIES.write(
        "entities.signals.delete",
        "DELETE",
        f"{_ENTITY}/signals",
        "Delete all signals",
        f"{_SIGNALS}.clear",
        params="acmi_core.operations.params.entities:SignalsDeleteParams",
        result=NONE,
    ),
    ENTITIES.read(
        "entities.signal.get",
        "GET",
        f"{_ENTITY}/signals/{{key}}",
        "One signal (404 when missing)",
        f"{_SIGNALS}.get",
        params="acmi_core.operations.params.entities:SignalGetParams",
        result=STORED_VALUE,
    ),
    ENTITIES.write(
        "entities.signal.put",
        "PUT",
        f"{_ENTITY}/signals/{{key}}",
        "Set one signal (the body is its JSON value)",
        f"{_SIGNALS}.set",
        mcp="signal_set",
        params="acmi_core.operations.params.entities:SignalPutParams",
        cli="signal-set",
        result=STORED_VALUE,
    ),
    ENTITIES.write(
        "entities.signal.delete",
        "DELETE",
        f"{_ENTITY}/signals/{{key}}",
        "Delete one signal",
        f"{_SIGNALS}.delete",
        params="acmi_core.operations.params.entities:SignalDeleteParams",
        result=NONE,
    ),
    ENTITIES.read(
        "entities.timeline",
        "GET",
        f"{_ENTITY}/timeline",
        "Events, oldest first, a page at a time (follow next_cursor until null); bounds inclusive",
        f"{_TIMELINE}.page",
        params="acmi_core.operations.params.entities:TimelineParams",
        result="acmi_core.entities.api:EventPage",
    ),
    ENTITIES.write(
        "entities.timeline.delete",
        "POST",
        f"{_ENTITY}/timeline/delete",
        "Delete one event (by ts and id, or its member), audited on the same timeline",
        f"{_TIMELINE}.delete_event",
        mcp="event_delete",
        params="acmi_core.operations.params.entities:EventDeleteParams",
        cli="event-delete",
        result="acmi_core.entities.results:EventDeleted",
    ),
    Operation(
        "entities.cat",
        "Several timelines merged, newest first",
        Access.READ,
        f"{_TIMELINE}.cat",
        mcp="cat",
        params="acmi_core.operations.params.entities:CatParams",
        cli="cat",
        result="acmi_core.entities.results:CatEvents",
    ),
    Operation(
        "tenants.list",
        "The caller's tenant (only its own) and its key's scope",
        Access.READ,
        mcp="tenant_list",
        params="acmi_core.operations.params.entities:TenantsListParams",
    ),
)

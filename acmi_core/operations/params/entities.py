"""The entity operations' params (and the webhook's, the tenant list's)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from acmi_core.base.model import MAX_SIGNAL_KEY_LEN
from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.operations.params.base import Cursor, Entity, Ms, PageLimit, Params, bounded

# checked here: a write's core names the key inside the map (signals.<key>), not the key
SignalKey = Annotated[str, Field(min_length=1, max_length=MAX_SIGNAL_KEY_LEN)]


class ProfilePutParams(Params):
    """Replace an entity's profile (entity: ns:id) with a JSON object, or merge into it
    with merge=true: {entity, profile (as stored), merged}."""

    tool_function: ClassVar[str] = "profile_write"
    entity: Entity
    profile: dict[str, Any]
    merge: bool = False


class ProfileGetParams(Params):
    """Read an entity's profile: {entity, profile: object or null}."""

    entity: Entity


class ProfilePatchParams(Params):
    """Merge a JSON object into an entity's profile: {entity, profile (merged)}."""

    entity: Entity
    partial: dict[str, Any]


class SignalsPutParams(Params):
    """Replace an entity's signals with a JSON object (merge=true: set only these keys,
    keep the others): {entity, signals (all of them now), merged}."""

    tool_function: ClassVar[str] = "signal_write"
    entity: Entity
    signals: dict[str, Any]
    merge: bool = False


class SignalsGetParams(Params):
    """Read an entity's signals: {entity, signals}; with key, {entity, key, value} (null if
    unset)."""

    entity: Entity
    key: str | None = None


class SignalPutParams(Params):
    """Set one signal of an entity (others kept): {entity, key, value as stored}. ttl
    (30m, 24h, 7d; at most 366d): reads stop showing it after that; without one, an
    earlier ttl of the signal is dropped."""

    entity: Entity
    key: SignalKey
    value: Any
    ttl: str | None = Field(None, description="time to live: 30m, 24h, 7d (at most 366d)")


class EventsAppendParams(Params):
    """Append a Comms v1.1 event to an entity's timeline (event: {source, summary, kind,
    correlationId, ...}; ts defaults to now); returns the event as stored."""

    entity: Entity
    event: dict[str, Any]


class GetParams(Params):
    """An entity's context in one read: {profile, signals, timeline: the newest events
    (0-1000, oldest first)}."""

    entity: Entity
    events: int = bounded(20, minimum=0, maximum=1000)


class ListParams(Params):
    """One page of a category's entities: {category, entities: [ns:id], next_cursor}; pass
    next_cursor back as cursor until it is null."""

    tool_function: ClassVar[str] = "list_ids"
    # checked here: the core took any length (HTTP refused past 128)
    category: str = Field(max_length=128)
    cursor: Cursor = None
    limit: PageLimit = DEFAULT_PAGE_SIZE


class CatParams(Params):
    """Several timelines merged, newest first: {since, until, events: [{entity, ...}]}.
    since/until are durations ago (30m, 24h, 7d); until absent means now. At most 1 MiB
    of events: when cut, next_cursor; pass it as cursor with the same entities."""

    entities: list[str]
    since: str = "24h"
    until: str | None = None
    limit: int = 50
    cursor: str | None = None


class DeleteParams(Params):
    """Delete an entity of this tenant (entity: ns:id; never a key, pattern or other
    tenant): a dry run unless dry_run=false. {entity, dry_run, deleted, found}."""

    entity: Entity
    dry_run: bool = True


class TenantsListParams(Params):
    """This server's tenant (only its own) and its key's scope: {tenants, scope}."""


class IngestWebhookParams(Params):
    """A webhook as the route received it: the source's name, the raw body and its JSON,
    the query, the idempotency key and the headers (the route loads the source's config)."""

    source: str
    raw_body: bytes
    body: Any
    query: dict[str, str]
    idempotency_key: str | None
    headers: dict[str, str] | None = None


class ProfileDeleteParams(Params):
    """Delete an entity's profile."""

    entity: Entity


class SignalsPatchParams(Params):
    """Set the given signals of an entity, keep the others."""

    entity: Entity
    values: dict[str, Any]


class SignalsDeleteParams(Params):
    """Delete all signals of an entity."""

    entity: Entity


class SignalGetParams(Params):
    """One signal of an entity."""

    entity: Entity
    key: SignalKey


class SignalDeleteParams(Params):
    """Delete one signal of an entity."""

    entity: Entity
    key: SignalKey


class EventDeleteParams(Params):
    """Delete one event of an entity's timeline, by ts and id (its correlationId) or by
    member (the stored event's JSON, exactly), with an audit event (kind event-delete,
    naming the ts and id, never the event's text) on the same timeline; copies in the
    coordination thread's mentions index go too."""

    entity: Entity
    ts: Ms = Field(None, description="the event's ts (epoch ms)")
    id: str | None = Field(None, description="the event's correlationId")
    member: str | None = Field(None, description="the stored event's JSON, exactly")


class TimelineParams(Params):
    """One page of an entity's timeline, oldest first (reverse: newest first)."""

    entity: Entity
    cursor: Cursor = None
    limit: PageLimit = DEFAULT_PAGE_SIZE
    reverse: bool = False
    since_ms: Ms = None
    until_ms: Ms = None

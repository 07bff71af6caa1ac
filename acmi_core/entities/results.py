"""What the entity reads answer as JSON: the bodies of ``EntityContext.to_dict`` and
``EventPage.to_dict`` (the core answers those dataclasses; every surface prints these
dicts), and the list page the surfaces build from an ``EntityPage``. ``Json`` marks a
stored value as it is: a profile, the signals and each event are the caller's JSON."""

# No `from __future__ import annotations`: on Python 3.11 a TypedDict's NotRequired
# written as a string is taken for a required key at run time.
from typing import NotRequired, TypedDict

from pydantic import JsonValue

from acmi_core.base.model import Event

Json = JsonValue


class SkippedMember(TypedDict):
    """A stored timeline member that could not be read (its content is not echoed)."""

    key: str
    position: int
    reason: str


class LegacyEvent(TypedDict):
    """An event returned although it breaks a rule, by its index in the events."""

    index: int
    reasons: list[str]


class EntityBody(TypedDict):
    entity: str
    profile: dict[str, Json] | None
    signals: dict[str, Json]
    timeline: list[dict[str, Json]]
    legacy: list[LegacyEvent]
    skipped: list[SkippedMember]
    problems: list[str]
    # only when the newest events stopped at the page byte cap: the older ones' cursor
    next_cursor: NotRequired[str]


class EventPageBody(TypedDict):
    events: list[dict[str, Json]]
    legacy: list[LegacyEvent]
    skipped: list[SkippedMember]
    next_cursor: str | None


class EntityListBody(TypedDict):
    """``GET /v1/namespaces/{category}/entities`` and the ``list`` tool."""

    category: str
    entities: list[str]
    next_cursor: str | None


class DeleteAudit(TypedDict):
    ts: int
    correlationId: str
    kind: str


class EventDeleted(TypedDict):
    """``TimelineAPI.delete_event``: the event gone, and the audit event that says so."""

    entity: str
    deleted: bool
    ts: float
    correlationId: str
    bytes: int  # the deleted member's size
    audit: DeleteAudit


class Deleted(TypedDict):
    """The API's answer to a delete (the core answers None): what was deleted, as a path."""

    deleted: str


# ``TimelineAPI.cat``: each merged event with the entity whose timeline it is, newest first
CatEvents = list[tuple[str, Event]]

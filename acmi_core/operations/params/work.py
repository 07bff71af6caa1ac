"""The work items' params."""

from __future__ import annotations

from typing import Annotated, Any

from acmi_core.base.model import MAX_ENTITY_LEN
from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.operations.params.base import Cursor, PageLimit, Params, bounded

# work:<id> is an entity id (held equal to coordination.work.MAX_ID_LEN by a test)
MAX_WORK_ID_LEN = MAX_ENTITY_LEN - len("work:")
WorkId = Annotated[
    str,
    bounded(
        description="the work id, [A-Za-z0-9_.-]+, e.g. acmi-launch", maxLength=MAX_WORK_ID_LEN
    ),
]
OWNER = "entity id, or a bare name for agent:<name>"


class WorkCreateParams(Params):
    """Create a work item (id; title and/or a profile object; owner ns:id; status, default
    open); returns the item. Refused if it exists."""

    id: str = bounded(description="[A-Za-z0-9_.-]+")
    title: str | None = None
    profile: dict[str, Any] | None = None
    owner: str | None = bounded(None, description=OWNER)
    status: str = bounded("open", maxLength=64)


class WorkEventParams(Params):
    """Append a Comms v1.1 event to a work item (session_id joins its sessions); returns
    the event as stored."""

    id: WorkId
    event: dict[str, Any]
    session_id: str | None = None


class WorkSignalsParams(Params):
    """Merge signals into a work item's (status closes or reopens it); returns them."""

    id: WorkId
    signals: dict[str, Any]


class WorkGetParams(Params):
    """A work item: {profile, signals, owner, status, timeline (newest events 0-1000,
    oldest first), sessions}."""

    id: WorkId
    events: int = bounded(50, description="newest events to include", minimum=0, maximum=1000)


class WorkListParams(Params):
    """One page of work items: {items: [{id, ...}], next_cursor}. owner: ns:id; status open
    (default) or null for any; pass next_cursor back as cursor."""

    owner: str | None = None
    status: str | None = "open"
    cursor: str | None = None
    limit: int = DEFAULT_PAGE_SIZE


class WorkSessionsParams(Params):
    """One page of a work item's session ids: {sessions, next_cursor}."""

    id: WorkId
    cursor: Cursor = None
    limit: PageLimit = DEFAULT_PAGE_SIZE


class WorkOwnerParams(Params):
    """Assign a work item to an owner."""

    id: WorkId
    owner: str = bounded(description=OWNER)

"""The human-in-the-loop queues' params."""

from __future__ import annotations

from typing import ClassVar

from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.operations.params.base import Cursor, PageLimit, Params, bounded

ENTITY = "entity id, e.g. user:mikey"


class HitlCreateParams(Params):
    """Queue a human-in-the-loop request (urgency P0-P2; addressee ns:id, else the shared
    queue): {item, created}."""

    topic: str = bounded(maxLength=200)
    request: str = bounded(
        description="the concrete unblock request (also accepted as concrete_unblock_request)",
        maxLength=4000,
    )
    # the HTTP body's (the MCP tool's arguments are a contract older than them)
    not_tool_arguments: ClassVar[frozenset[str]] = frozenset({"correlation_id", "deadline"})
    asked_by: str = bounded(description=ENTITY)
    urgency: str = bounded("P1", description="P0, P1 or P2")
    deadline: int | None = bounded(None, description="ms; default now + 24 h")
    addressee: str | None = bounded(
        None, description=ENTITY + "; omitted or null: the shared queue"
    )
    correlation_id: str | None = bounded(
        None, description="pass one to make retries safe; generated otherwise", maxLength=128
    )


class HitlListParams(Params):
    """One page of a human-in-the-loop queue (addressee, else the shared one; state open or
    closed): {items, next_cursor}."""

    addressee: str | None = bounded(
        None, description="entity id; omitted: the shared queue", maxLength=256
    )
    state: str = bounded("open", description="open or closed")
    cursor: Cursor = None
    # the MCP tool's default (its schema is a contract); the route's and the core's is 50
    limit: PageLimit = DEFAULT_PAGE_SIZE


class HitlResolveParams(Params):
    """Resolve a human-in-the-loop request by its correlation id; returns it."""

    not_tool_arguments: ClassVar[frozenset[str]] = frozenset({"addressee"})
    correlation_id: str = bounded(description="the item's correlationId", maxLength=128)
    resolution: str = bounded(maxLength=4000)
    by: str = bounded(description=ENTITY)
    addressee: str | None = bounded(
        None, description="only to resolve an item another tool wrote", maxLength=256
    )

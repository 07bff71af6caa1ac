"""The human-in-the-loop queues' params."""

from __future__ import annotations

from typing import ClassVar

from acmi_core.base.pages import DEFAULT_PAGE_SIZE
from acmi_core.operations.params.base import Params


class HitlCreateParams(Params):
    """Queue a human-in-the-loop request (urgency P0-P2; addressee ns:id, else the shared
    queue): {item, created}."""

    topic: str
    request: str
    not_tool_arguments: ClassVar[frozenset[str]] = frozenset({"correlation_id"})
    asked_by: str
    urgency: str = "P1"
    addressee: str | None = None
    correlation_id: str | None = None


class HitlListParams(Params):
    """One page of a human-in-the-loop queue (addressee, else the shared one; state open or
    closed): {items, next_cursor}."""

    addressee: str | None = None
    state: str = "open"
    cursor: str | None = None
    limit: int = DEFAULT_PAGE_SIZE


class HitlResolveParams(Params):
    """Resolve a human-in-the-loop request by its correlation id; returns it."""

    correlation_id: str
    resolution: str
    by: str

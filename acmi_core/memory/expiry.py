"""A memory line with a time to live (``remember(..., ttl="7d")``, issue 24): the line is
stored as any line, and its expiry beside it in the same slot and the same edit, in the
field ``<prefix>ttl`` (``hot.ttl``, ``warm.ttl``, ``topic.ttl``: ``{line: expiry ms}``),
which no template knows, so no file renders it and export leaves it out.

Expiry is checked at read: every read of the memory slots (``MemoryCommands._memory_of``,
so load, status, get, search, export and the writes' own reads; a topic's profile; the
wake bundle's memory sections) goes through :func:`unexpired`, which drops each expired
line from its section. A write that rewrites a section (a remember, a prune, a forget)
writes it without the expired line: that is the cleanup, no scan. The daily layer is a
log of events and takes no ttl (forget a line of it instead)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from acmi_core.entities.expiry import ttl_ms

TTL_KEY: Final = "ttl"  # <prefix>ttl: the layer's expiries


def item_text(item: Any) -> str | None:
    """The text a section item holds (as ``remember`` wrote it), None for another shape."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for name in ("task", "text", "line", "decision"):
            value = item.get(name)
            if isinstance(value, str):
                return value
    return None


def _without(value: Any, gone: frozenset[str]) -> Any:
    if isinstance(value, list):
        return [x for x in value if item_text(x) not in gone]
    if isinstance(value, str):
        return "\n".join(x for x in value.split("\n") if x not in gone)
    if isinstance(value, dict) and "body" in value:
        return {**value, "body": _without(value["body"], gone)}
    return value


def unexpired(
    fields: Mapping[str, Any], prefix: str, now: int | Callable[[], int]
) -> dict[str, Any]:
    """``fields`` (a memory slot's, or a topic's profile) without the lines of ``prefix``'s
    layer whose ttl ran out, and without their expiries. The same mapping when none did
    (the common case: no copy, and ``now``, a clock, not read when no line has a ttl)."""
    expiries = fields.get(prefix + TTL_KEY)
    if not isinstance(expiries, dict):
        return fields if isinstance(fields, dict) else dict(fields)
    now_ms = now if isinstance(now, int) else now()
    gone = frozenset(
        text
        for text, at in expiries.items()
        if isinstance(at, int | float) and not isinstance(at, bool) and at <= now_ms
    )
    if not gone:
        return fields if isinstance(fields, dict) else dict(fields)
    # the expiries stay as stored: a write compares against them and prunes (``ttl_edit``)
    return {
        name: _without(value, gone)
        if name.startswith(prefix) and name != prefix + TTL_KEY
        else value
        for name, value in fields.items()
    }


def _live(expiries: Any, now_ms: int) -> dict[str, Any]:
    if not isinstance(expiries, dict):
        return {}
    return {t: at for t, at in expiries.items() if isinstance(at, int | float) and at > now_ms}


def ttl_edit(
    fields: Mapping[str, Any],
    prefix: str,
    now_ms: int,
    line: str | None = None,
    ttl: object = None,
) -> dict[str, Any]:
    """What a write of ``prefix``'s layer sets in ``<prefix>ttl``: the expiries still to
    come (the run-out ones pruned, with their lines, which the write's section no longer
    holds), plus ``line`` expiring ``ttl`` from now when given (400 ``ttl``). Nothing when
    the layer has no expiries and none is added."""
    current = fields.get(prefix + TTL_KEY)
    if ttl is None and current is None:
        return {}
    expiries = _live(current, now_ms)
    if line is not None and ttl is not None:
        expiries[line] = now_ms + ttl_ms(ttl)
    return {prefix + TTL_KEY: expiries}


__all__ = ["TTL_KEY", "item_text", "ttl_edit", "unexpired"]

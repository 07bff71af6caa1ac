"""An OpenAI Agents SDK session on an ACMI timeline: ``AcmiSession`` (extra
``acmi[openai-agents]``), the SDK's ``Session`` protocol (``get_items``, ``add_items``,
``pop_item``, ``clear_session``) over the public client, so a conversation an agent runs
with ``Runner.run(agent, text, session=AcmiSession("support-42"))`` is on the same store
as everything else the agent knows, per tenant.

How items are kept:
- A session is an entity, ``session:<session_id>`` unless another is given (an agent's
  own timeline, say); each item is one Comms v1.1 event on its timeline: ``kind``
  ``session-item``, ``source`` the session's (``openai-agents``), ``correlationId`` the
  session id, a one-line ``summary`` (``user: <the text>``, cut at the summary cap) and the
  item itself, exactly, as ``payload.item``. Other events on the same timeline (a note an
  agent appends) are not items and are left alone.
- Order: a timeline orders by ``ts`` and, for equal ones, by the stored bytes, not by
  arrival; so ``add_items`` gives its items consecutive milliseconds after the newest one
  (read first: two round trips a call, the items' write one of them, atomic). Concurrent
  ``add_items`` on one session (the SDK never does it: a turn runs after the last) could
  interleave.
- ``pop_item`` removes the newest item (``timeline.delete_event``: one script run that also
  records the removal on the timeline as an audit event); ``clear_session`` deletes the
  session's entity (its every key and index entry); neither touches another session.
- Limits: an item is at most what one event may hold (``MAX_EVENT_BYTES`` of JSON: a
  larger tool output is refused with the field named, nothing stored); ``get_items`` reads
  a page at a time (``MAX_PAGE_SIZE`` events, ``MAX_PAGE_BYTES``), newest first when it has a
  limit.

The blocking client runs on a worker thread (``asyncio.to_thread``); nothing here reaches
below the client's public API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import MAX_SUMMARY_LEN, EntityId
from acmi_core.base.pages import MAX_PAGE_SIZE

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

    from acmi_core.base.model import Event
    from acmi_core.client.facade import Acmi

KIND: Final = "session-item"
SOURCE: Final = "openai-agents"
CATEGORY: Final = "session"


class AcmiSession:
    """The OpenAI Agents SDK's session protocol on an ACMI timeline (module docstring)."""

    def __init__(
        self,
        session_id: str,
        acmi: Acmi | None = None,
        *,
        entity: str | None = None,
        source: str = SOURCE,
        session_settings: SessionSettings | None = None,
    ) -> None:
        if acmi is None:
            from acmi_core import create_acmi

            acmi = create_acmi()
        self.session_id = session_id
        self.session_settings = session_settings
        self.acmi = acmi
        self.source = source
        self.entity = str(EntityId.parse(entity or _session_entity(session_id)))

    # --- the protocol -----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items, oldest first; with ``limit`` (or the session settings' limit) the
        newest ``limit`` of them, oldest first."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None and (isinstance(limit, bool) or limit < 0):
            raise AcmiValidationError("limit", "range", "must be an integer >= 0 or None")
        return await asyncio.to_thread(self._items, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if items:
            await asyncio.to_thread(self._add, list(items))

    async def pop_item(self) -> TResponseInputItem | None:
        return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self.acmi.entities.delete, self.entity)

    # --- on the client ----------------------------------------------------------------

    def _items(self, limit: int | None) -> list[TResponseInputItem]:
        if limit == 0:
            return []
        newest_first = limit is not None
        found: list[TResponseInputItem] = []
        size = MAX_PAGE_SIZE if limit is None else min(limit, MAX_PAGE_SIZE)
        for page in self.acmi.timeline.pages(self.entity, limit=size, reverse=newest_first):
            for event in page.events:
                item = self._item(event)
                if item is not None:
                    found.append(item)
                    if limit is not None and len(found) == limit:
                        return found[::-1]
        return found[::-1] if newest_first else found

    def _add(self, items: list[TResponseInputItem]) -> None:
        newest = self.acmi.timeline.read(self.entity, limit=1, reverse=True)
        start = max(int(self.acmi.clock()), int(newest[0].ts) + 1 if newest else 0)
        events = [
            {
                "ts": start + i,
                "source": self.source,
                "kind": KIND,
                "correlationId": self.session_id,
                "summary": _summary(item),
                "payload": {"item": item},
            }
            for i, item in enumerate(items)
        ]
        self.acmi.timeline.extend(self.entity, events)

    def _pop(self) -> TResponseInputItem | None:
        for page in self.acmi.timeline.pages(self.entity, limit=20, reverse=True):
            for event in page.events:
                item = self._item(event)
                if item is not None:
                    timeline = self.acmi.timeline
                    timeline.delete_event(self.entity, ts=event.ts, id=event.correlationId)
                    return item
        return None

    def _item(self, event: Event) -> TResponseInputItem | None:
        """The item an event holds: one of this session's ``session-item`` events."""
        if event.kind != KIND or event.correlationId != self.session_id:
            return None
        payload = event.payload
        if not isinstance(payload, Mapping) or not isinstance(payload.get("item"), Mapping):
            return None
        item: TResponseInputItem = dict(payload["item"])  # type: ignore[assignment]
        return item


def _session_entity(session_id: str) -> str:
    """``session:<session_id>``; a session id the entity rules refuse is named as such."""
    if not isinstance(session_id, str) or not session_id:
        raise AcmiValidationError("session_id", "required", "must be a non-empty string")
    try:
        return str(EntityId.parse(f"{CATEGORY}:{session_id}"))
    except AcmiValidationError as exc:
        raise AcmiValidationError(
            "session_id", exc.rule, f"{exc.message} (or pass entity=...)"
        ) from None


def _summary(item: Mapping[str, Any]) -> str:
    """One line for the timeline: ``<role or type>: <its text>``, within the summary cap."""
    label = str(item.get("role") or item.get("type") or "item")
    text = _text(item.get("content"))
    if not text:
        for name in ("output", "arguments", "name", "summary"):
            if item.get(name):
                text = _text(item[name])
                break
    line = " ".join(f"{label}: {text}".split()) if text else label
    # the cap counts UTF-16 code units, as the reference's JavaScript does
    units = 0
    for i, char in enumerate(line):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > MAX_SUMMARY_LEN - 1 and i < len(line) - 1:
            return line[:i] + "\u2026"
    return line


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(part.get("text") or part.get("refusal") or "")
            for part in content
            if isinstance(part, Mapping)
        ]
        return " ".join(p for p in parts if p)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False)[:MAX_SUMMARY_LEN]


__all__ = ["CATEGORY", "KIND", "SOURCE", "AcmiSession"]

"""Forgetting one memory line (``MemoryAPI.forget``, issue 24): line N of a memory file,
numbered as ``get`` and ``search`` number it, or the first line holding an exact text,
removed from where it is stored, with an audit event on the entity's timeline in the same
write.

Where a line lives: a line of ACTIVE-CONTEXT.md, MEMORY.md or a topic file is part of
its slot's fields (``memory:hot``, ``memory:warm``, the topic's profile), so the file is
parsed again without the line and only the fields that differ are written, as a
check-and-set on the slot as read (``WritePlan.expect``: a concurrent write fails the
forget with nothing written, 409, and the caller reads again); a daily-note line is an
event of the timeline, removed (ZREM) by its stored member. Headings, blank lines and a
daily note's own skeleton are structure, not lines to forget: refused. Archives and
heartbeat-state are not forgettable here (the archive job owns them).

The audit event (``kind: memory-forget``) says which path, line and layer, and how long
the line was: never its text (a line can hold what a key should not have logged). Its
``correlationId`` is drawn once per call; the plan records its reply under the request's
id, so a resend of the same request (a lost reply) answers the first run's and writes
nothing again. A second call naming the same line number is a new request and forgets
the line that is there now: give ``text`` with ``line`` to forget only that text.

2 round trips: one pipeline reading the slot (a daily note: the day's raw events), one
write."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

from acmi_core.base.errors import AcmiValidationError, Conflict, NotFound
from acmi_core.base.keys import MEMORY_HOT, MEMORY_WARM
from acmi_core.base.model import EntityId, Event
from acmi_core.base.stored import decode_events
from acmi_core.memory.daily import DAILY, HEADER_KIND, daily_from_events
from acmi_core.memory.expiry import unexpired
from acmi_core.memory.layers import ActiveContext, LongTermMemory, MarkdownFile, TopicFile
from acmi_core.memory.reads import MemoryPath
from acmi_core.memory.results import Forgot
from acmi_core.memory.slots import (
    TOPIC_LINKS,
    TOPIC_PREFIX,
    from_profile,
    from_signals,
    to_profile_sections,
    to_signals,
    topic_entity,
    topic_from_profile,
    topic_to_profile,
)
from acmi_core.memory.state import (
    HOT_KEYS,
    TOPIC_KEYS,
    WARM_KEYS,
    WINDOW_EVENTS,
    MemoryCommands,
    object_edits,
    pipeline_reply,
    signals_zone,
    stored_object,
)
from acmi_core.memory.writes import MAX_TEXT_LEN, holds
from acmi_core.store import scripts
from acmi_core.store.writes import WritePlan

FORGET_KIND: Final = "memory-forget"
FORGETTABLE: Final = ("hot", "warm", "daily", "topic")


def _line_of(lines: list[str], line: object, text: object, path: str) -> int:
    """The 1-based number of the line to forget: ``line`` (holding ``text`` when both are
    given), else the first line holding ``text``."""
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise AcmiValidationError("text", "required", "must be a non-empty string")
    if isinstance(text, str) and len(text) > MAX_TEXT_LEN:
        raise AcmiValidationError("text", "max_length", f"at most {MAX_TEXT_LEN} characters")
    if line is None:
        if text is None:
            raise AcmiValidationError("line", "required", "give the line's number or its text")
        assert isinstance(text, str)
        found = next((n for n, x in enumerate(lines, 1) if holds(x, text)), None)
        if found is None:
            raise NotFound(f"text: no line of {path} holds it", field="text", rule="exists")
        return found
    if isinstance(line, bool) or not isinstance(line, int) or line < 1:
        raise AcmiValidationError("line", "range", "must be a line number >= 1")
    if line > len(lines):
        raise AcmiValidationError("line", "range", f"{path} has {len(lines)} lines")
    if isinstance(text, str) and not holds(lines[line - 1], text):
        raise Conflict(
            f"text: line {line} of {path} does not hold it (changed since read?)",
            field="text",
            rule="same",
        )
    return line


def _content(lines: list[str], n: int) -> str:
    target = lines[n - 1]
    if not target.strip() or target.lstrip().startswith("#"):
        raise AcmiValidationError(
            "line", "memory_line", f"line {n} is a heading or blank: only content is forgotten"
        )
    return target


class MemoryForget(MemoryCommands):
    """One line forgotten, audited."""

    def forget(
        self,
        entity: str | EntityId,
        path: object,
        line: object = None,
        text: object = None,
    ) -> Forgot:
        """Forget line ``line`` of ``path`` (or the first line holding ``text``; both:
        that line, only if it holds that text, else 409): module docstring. 2 round
        trips."""
        eid = EntityId.parse(entity)
        where = MemoryPath.parse(path)
        if where.layer not in FORGETTABLE:
            raise AcmiValidationError(
                "path", "forgettable", f"a line of {where.layer} is not forgotten here"
            )
        keys = self._keys
        memory_keys = self._memory_keys(eid)
        commands: list[tuple[str | int, ...]] = [("GET", k) for k in memory_keys]
        topic_key = None if where.slug is None else keys.profile(topic_entity(where.slug))
        timeline = keys.timeline(eid)
        if topic_key is not None:
            commands.append(("GET", topic_key))
        if where.layer == "daily":
            since, until = where.window()
            commands.append(
                ("ZRANGE", timeline, since, until, "BYSCORE", "LIMIT", 0, WINDOW_EVENTS)
            )
        replies = self._ctx.store.pipeline(commands)
        memory = self._memory_of(replies[: len(memory_keys)], memory_keys)
        raw = dict(zip(memory_keys, replies[: len(memory_keys)], strict=True))
        plan = WritePlan(record=keys.request(scripts.new_request_id()))
        if where.layer == "daily":
            number, forgotten = self._forget_event(
                plan, eid, where, memory, replies[-1], line, text
            )
        else:
            number, forgotten = self._forget_field(
                plan, eid, where, memory, raw, replies[-1] if topic_key else None, line, text
            )
        now = self._ctx.clock()
        audit = Event(
            ts=now,
            source="acmi",
            kind=FORGET_KIND,
            correlationId=f"forget-{uuid.uuid4().hex}",
            summary=f"forgot line {number} of {where.path}",
            payload={
                "audit": "memory.forget",
                "path": where.path,
                "layer": where.layer,
                "line": number,
                "chars": len(forgotten),
            },
        )
        self._timeline.stage(plan, eid, [audit])
        plan.apply(self._ctx.store)
        return {
            "entity": str(eid),
            "path": where.path,
            "layer": where.layer,
            "line": number,
            "text": forgotten,
            "forgotten": True,
            "audit": {"ts": now, "correlationId": audit.correlationId, "kind": FORGET_KIND},
        }

    def _forget_field(
        self,
        plan: WritePlan,
        eid: EntityId,
        where: MemoryPath,
        memory: Mapping[str, Any],
        raw: Mapping[str, object],
        topic_raw: object,
        line: object,
        text: object,
    ) -> tuple[int, str]:
        """A line of a file held in fields: the file parsed again without it, the fields
        that differ written, on the slot as read."""
        file: MarkdownFile | None
        if where.layer == "hot":
            slot_key, file, known = self._keys.slot(eid, MEMORY_HOT), from_signals(memory), HOT_KEYS
            current: Mapping[str, Any] = memory
        elif where.layer == "warm":
            slot_key, file = self._keys.slot(eid, MEMORY_WARM), from_profile(memory)
            known, current = WARM_KEYS - {TOPIC_LINKS}, memory
        else:
            assert where.slug is not None
            slot_key = self._keys.profile(topic_entity(where.slug))
            current = stored_object(pipeline_reply(topic_raw, slot_key), slot_key)
            current = unexpired(current, TOPIC_PREFIX, self._ctx.clock)  # as reads show it
            file, known = topic_from_profile(where.slug, current), TOPIC_KEYS
        if file is None:
            raise NotFound(f"{eid} has no {where.path}", field="path", rule="exists")
        lines = file.render().split("\n")
        n = _line_of(lines, line, text, where.path)
        forgotten = _content(lines, n)
        rest = "\n".join(lines[: n - 1] + lines[n:])
        again: MarkdownFile
        new: dict[str, Any]
        if where.layer == "hot":
            hot = ActiveContext.parse(rest, where.path)
            again, new = hot, to_signals(hot)
        elif where.layer == "warm":
            warm = LongTermMemory.parse(rest, where.path)
            again, new = warm, to_profile_sections(warm)
        else:
            assert where.slug is not None
            topic = TopicFile.parse(rest, where.slug)
            again, new = topic, topic_to_profile(topic)
        if again.render() != rest:  # the line is part of a structure the fields hold whole
            raise AcmiValidationError(
                "line", "memory_line", f"line {n} of {where.path} cannot be forgotten alone"
            )
        reply = topic_raw if where.layer == "topic" else raw[slot_key]
        stored = pipeline_reply(reply, slot_key)
        plan.expect(slot_key, stored if isinstance(stored, bytes) else None)
        edits = object_edits(current, new, known)
        if where.layer == "topic":
            assert where.slug is not None
            self._edit(topic_entity(where.slug), "profile", edits)(plan)
        else:
            self._memory_edit(eid, edits)(plan)
        return n, forgotten

    def _forget_event(
        self,
        plan: WritePlan,
        eid: EntityId,
        where: MemoryPath,
        memory: Mapping[str, Any],
        members: object,
        line: object,
        text: object,
    ) -> tuple[int, str]:
        """A daily-note line: the memory event whose line it is, removed by its stored
        member (the note without that event must be the note without the line). Another
        tool's event, shown as a line of the day, is a timeline event: not forgotten here."""
        assert where.date is not None
        tz = signals_zone(memory)
        stored: list[tuple[bytes, Event]] = []
        raw = pipeline_reply(members, "timeline")
        for member in raw if isinstance(raw, list) else []:
            if isinstance(member, bytes):
                decoded, _ = decode_events([member])
                if decoded:
                    stored.append((member, decoded[0][0]))
        events = [e for _, e in stored]

        def note(of: list[Event]) -> str | None:
            days = daily_from_events(of, tz=tz, include_foreign=True)
            found = next((d for d in days if d.date == where.date), None)
            return None if found is None else found.render()

        whole = note(events)
        if whole is None:
            raise NotFound(f"{eid} has no {where.path}", field="path", rule="exists")
        lines = whole.split("\n")
        n = _line_of(lines, line, text, where.path)
        forgotten = _content(lines, n)
        rest = "\n".join(lines[: n - 1] + lines[n:])
        for i, (member, event) in enumerate(stored):
            if not _line_event(event, forgotten):
                continue
            left = note(events[:i] + events[i + 1 :])
            if left is None or _body(left) == _body(rest):
                if not _is_memory(event):
                    raise AcmiValidationError(
                        "line",
                        "memory_line",
                        f"line {n} of {where.path} is a timeline event ({event.kind}), not a"
                        " memory line: delete the event instead",
                    )
                plan.zrem(self._keys.timeline(eid), _member(member))
                return n, forgotten
        raise AcmiValidationError(
            "line", "memory_line", f"line {n} of {where.path} is the note's own, no event's"
        )


def _body(text: str) -> list[str]:
    """A note's lines but blank ones and headings left with nothing under them (a section
    the API's lines made goes with its last line)."""
    lines = [x for x in text.split("\n") if x.strip()]
    return [
        x
        for i, x in enumerate(lines)
        if not (x.startswith("## ") and (i + 1 == len(lines) or lines[i + 1].startswith("#")))
    ]


def _is_memory(event: Event) -> bool:
    payload = event.payload
    return (
        isinstance(payload, dict) and payload.get("memory") == DAILY and event.kind != HEADER_KIND
    )


def _line_event(event: Event, line: str) -> bool:
    """Whether ``event`` may be the one ``line`` renders: its text (or cells) in it."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    if event.kind == HEADER_KIND:
        return False
    cells = payload.get("cells")
    if isinstance(cells, list) and cells:
        return all(str(c) in line for c in cells)
    text = payload.get("text", event.summary)
    return isinstance(text, str) and text in line


def _member(member: bytes) -> str | bytes:
    try:  # as text where it is (a REST transport carries text)
        return member.decode("utf-8")
    except UnicodeDecodeError:
        return member


__all__ = ["FORGETTABLE", "FORGET_KIND", "MemoryForget"]

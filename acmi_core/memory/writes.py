"""The memory writes (``MemoryAPI`` composes them): ``remember`` (a line into the hot,
warm, daily or topic layer, write-ahead), ``set_active`` (the hot layer replaced),
``topic_create`` and the handoff (``handoff`` kept until ``take_handoff`` reads and clears
it, atomically). Each checks the file it produces against its layer's budget before
anything is sent, then writes one plan: 1 or 2 round trips."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, cast

from acmi_core.base.errors import AcmiValidationError, Conflict, NotFound
from acmi_core.base.keys import MEMORY_HEARTBEAT, MEMORY_WARM
from acmi_core.base.model import EntityId, Event, dumps
from acmi_core.entities.expiry import ttl_ms
from acmi_core.memory.budgets import BudgetReport, check
from acmi_core.memory.daily import entry_event
from acmi_core.memory.embeddings import file_lines, texts_of
from acmi_core.memory.expiry import TTL_KEY, ttl_edit, unexpired
from acmi_core.memory.layers import (
    ACTIVE_CONTEXT,
    LONG_TERM_MEMORY,
    SLUG_RE,
    TOPIC,
    ActiveContext,
    Layer,
)
from acmi_core.memory.results import ActiveSet, Handoff, Remembered, StoredHandoff, TopicCreated
from acmi_core.memory.slots import (
    HOT,
    TOPIC_LINKS,
    TOPIC_PREFIX,
    WARM,
    from_profile,
    from_signals,
    new_topic,
    to_signals,
    topic_entity,
    topic_from_profile,
    topic_to_profile,
)
from acmi_core.memory.state import (
    DAY_MS,
    HOT_KEYS,
    TOPIC_KEYS,
    MemoryCommands,
    MemoryOverBudget,
    append_item,
    day_note,
    local_time,
    object_edits,
    pipeline_reply,
    signals_zone,
    stored_object,
)
from acmi_core.store import scripts
from acmi_core.store.writes import Replayed, WritePlan

if TYPE_CHECKING:
    from acmi_core.entities.context import Context

MAX_TEXT_LEN: Final = 2_000  # one remembered line (a daily note is 10 KB in all)
MAX_HANDOFF_BYTES: Final = 16 * 1024
REMEMBER_LAYERS: Final = ("daily", "hot", "warm", "topic")
DEFAULT_SECTION: Final[Mapping[str, str]] = {
    "hot": "in_progress",
    "warm": "lessons",
    "topic": "key_facts",
}
DAILY_SECTIONS: Final = {
    "morning": "Morning",
    "afternoon": "Afternoon",
    "takeaways": "Key Takeaways",
    "tomorrow": "Tomorrow",
}

# Seed §12 "Context Overflow Protocol": HANDOFF.md holds "what was done, in progress,
# next steps, key decisions, gotchas": the parts, with their headings, in that order
HANDOFF_PARTS: Final = {
    "done": "What Was Done",
    "in_progress": "In Progress",
    "next_steps": "Next Steps",
    "decisions": "Key Decisions",
    "gotchas": "Gotchas",
}


def handoff_text(parts: Mapping[str, object]) -> str:
    """HANDOFF.md from its parts: every part's heading (``- none`` when it is not given,
    so the next session sees that nothing is pending there, not a forgotten part)."""
    unknown = sorted(set(parts) - set(HANDOFF_PARTS))
    if unknown:
        raise AcmiValidationError(
            unknown[0], "unknown", f"is not a handoff part ({', '.join(HANDOFF_PARTS)})"
        )
    lines = ["# HANDOFF.md", ""]
    for name, heading in HANDOFF_PARTS.items():
        value = parts.get(name)
        items = [value] if isinstance(value, str) else value if value is not None else []
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise AcmiValidationError(name, "type", "must be a list of lines or one line")
        # one bullet a line: a part's own line breaks would break the template's shape
        bullets = [" ".join(x.split()) for x in items if x.strip()]
        lines += [f"## {heading}", *(f"- {b}" for b in bullets or ["none"]), ""]
    return "\n".join(lines)


# how long a session's start stays marked as logged: the daily notes' retention (seed §4,
# 30 days), past which its note is archived anyway
SESSION_MARK_TTL_MS: Final = 30 * 86_400_000


# A rendered line's item text: past a list marker, a task box and a [HH:MM] stamp.
_ITEM: Final = re.compile(r"(?:[-*+]|\d+\.)\s+(?:\[[ xX]\]\s+)?(?:\[\d{1,2}:\d{2}\]\s+)?(.*)")


def _words(text: str) -> str:
    return " ".join(text.split())


def holds(rendered: str | None, line: str) -> bool:
    """Whether a file's text already holds ``line``: as a line of prose, a list item (a
    task or a [HH:MM] entry) or a table cell, whitespace aside. A fresh ``remember`` of
    it would store a second copy."""
    if rendered is None:
        return False
    want = _words(line)
    for raw in rendered.split("\n"):
        text = raw.strip()
        if not text:
            continue
        item = _ITEM.fullmatch(text)
        if _words(text) == want or (item is not None and _words(item[1]) == want):
            return True
        if text.startswith("|") and want in (_words(c) for c in text.strip("|").split("|")):
            return True
    return False


def _one_line(value: object, name: str, max_len: int = MAX_TEXT_LEN) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AcmiValidationError(name, "required", "must be a non-empty string")
    if "\n" in value or "\r" in value:
        raise AcmiValidationError(name, "one_line", "must be one line (no line break)")
    if len(value) > max_len:
        raise AcmiValidationError(name, "max_length", f"must be at most {max_len} characters")
    return value.strip()


def _stamp(now: dt.datetime) -> str:
    """The seed's ``Last updated: 2026-01-15 14:30 GMT``."""
    return f"{now:%Y-%m-%d %H:%M} {now.tzname() or 'UTC'}"


def _heading_key(event: Event) -> str:
    payload = event.payload if isinstance(event.payload, dict) else {}
    heading = str(payload.get("section", ""))
    return next((k for k, h in DAILY_SECTIONS.items() if h == heading), heading.lower())


def _remembered(
    eid: EntityId, layer: Layer, section: str, report: BudgetReport, *, held: bool = False
) -> Remembered:
    return {
        "entity": str(eid),
        "layer": layer,
        "section": section,
        "path": report.path,
        "stored": True,
        "budget": report.to_dict(),
        "already_held": held,
    }


def _topic_slug(value: object, name: str = "topic") -> str:
    slug = value.removeprefix("topic:") if isinstance(value, str) else value
    if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug) or len(slug) > 128:
        raise AcmiValidationError(name, "topic_slug", "must match [A-Za-z0-9_.-]{1,128}")
    return slug


class MemoryWrites(MemoryCommands):
    """Remember, the hot layer replaced, topics and the handoff."""

    def set_active(self, entity: str | EntityId, text: object) -> ActiveSet:
        """Replace the hot layer with an ACTIVE-CONTEXT.md text (checked against its
        budget first). 1 round trip."""
        eid = EntityId.parse(entity)
        if not isinstance(text, str) or not text.strip():
            raise AcmiValidationError("text", "required", "must be the ACTIVE-CONTEXT.md text")
        text = self._ctx.guard(text, "text")
        active = ActiveContext.parse(text, "text")
        report = check("hot", active.render(), "ACTIVE-CONTEXT.md")
        if not report.ok:
            raise MemoryOverBudget(report, "text")
        edit = [(m, k, v) for m, k, v in object_edits({}, to_signals(active))]
        edit += [("del", k, "null") for k in sorted(HOT_KEYS - {k for _, k, _ in edit})]
        # a replaced file's lines are new: no earlier line's expiry applies to them
        edit.append(("del", HOT + TTL_KEY, "null"))
        plan = WritePlan()
        self._memory_edit(eid, edit, [active.render()])(plan)
        plan.apply(self._ctx.store)
        return {"entity": str(eid), "path": "ACTIVE-CONTEXT.md", "budget": report.to_dict()}

    def remember(
        self,
        entity: str | EntityId,
        text: object,
        *,
        layer: str = "warm",
        section: str | None = None,
        topic: str | None = None,
        now_ms: int | None = None,
        ttl: str | None = None,
    ) -> Remembered:
        """``/remember``, write-ahead: stored (one script) before it returns. ``layer``:
        ``warm`` (MEMORY.md, default section ``lessons``), ``hot`` (ACTIVE-CONTEXT.md,
        default ``in_progress``: an open task), ``daily`` (today's note, ``- [HH:MM]
        text`` under Morning/Afternoon by the hour, or ``section``), ``topic`` (the topic
        file ``topic`` names, default ``key_facts``). A line the layer's file already
        holds (``holds``) is not stored again: ``already_held`` says so and nothing is
        written, so a retry stores nothing twice (two writers racing with the same line
        can both store it: a read, then a write, as the budget check). 2 round trips:
        read, write (1 when held). ``ttl`` (``30m``, ``24h``, ``7d``): reads stop showing
        the line after that (``memory/expiry.py``; not the daily layer, a log)."""
        eid = EntityId.parse(entity)
        line = _one_line(self._ctx.guard(text, "text"), "text")
        if layer not in REMEMBER_LAYERS:
            raise AcmiValidationError(
                "layer", "memory_layer", f"must be one of {', '.join(REMEMBER_LAYERS)}"
            )
        now = self._now(now_ms)
        if ttl is not None:
            ttl_ms(ttl)  # checked before anything is read
            if layer == "daily":
                raise AcmiValidationError(
                    "ttl", "layer", "the daily layer is a log: no ttl (forget a line instead)"
                )
        if layer == "daily":
            return self._remember_daily(eid, line, section, now)
        template = {"hot": ACTIVE_CONTEXT, "warm": LONG_TERM_MEMORY, "topic": TOPIC}[layer]
        key = section or DEFAULT_SECTION[layer]
        if not any(s.key == key for s in template.sections):
            known = ", ".join(s.key for s in template.sections)
            raise AcmiValidationError("section", "memory_section", f"{layer}: one of {known}")
        if layer == "hot":
            return self._remember_hot(eid, key, line, now, ttl)
        if layer == "warm":
            return self._remember_warm(eid, key, line, now, ttl)
        return self._remember_topic(eid, key, line, topic, now, ttl)

    def _remember_hot(
        self, eid: EntityId, key: str, line: str, now: int, ttl: str | None = None
    ) -> Remembered:
        signals = self._memory_fields(eid)
        local = local_time(now, signals_zone(signals))
        current = signals.get(HOT + key)
        before = from_signals(signals)
        if before is not None and holds(before.render(), line):
            report = check("hot", before.render(), "ACTIVE-CONTEXT.md")
            return _remembered(eid, "hot", key, report, held=True)
        value: Any
        if key == "current_priority":
            value = line  # the seed: one priority
        elif key == "next_session":
            value = f"{current}\n{line}" if isinstance(current, str) and current else line
        elif key == "in_progress":
            value = append_item(current, {"task": line, "done": False})
        else:
            value = append_item(current, line)
        new = {HOT + key: value, HOT + "updated": _stamp(local)}
        new.update(ttl_edit(signals, HOT, now, line, ttl))
        active = from_signals({**signals, **new})
        assert active is not None
        report = check("hot", active.render(), "ACTIVE-CONTEXT.md")
        if not report.ok:
            raise MemoryOverBudget(report, "text")
        plan = WritePlan()
        self._memory_edit(eid, object_edits(signals, new), [active.render()], before=signals)(plan)
        plan.apply(self._ctx.store)
        return _remembered(eid, "hot", key, report)

    def _remember_warm(
        self, eid: EntityId, key: str, line: str, now: int, ttl: str | None = None
    ) -> Remembered:
        profile = self._memory_fields(eid)
        before = from_profile(profile)
        if before is not None and holds(before.render(), line):
            return _remembered(
                eid, "warm", key, check("warm", before.render(), "MEMORY.md"), held=True
            )
        new = {WARM + key: append_item(profile.get(WARM + key), line)}
        new.update(ttl_edit(profile, WARM, now, line, ttl))
        memory = from_profile({**profile, **new})
        assert memory is not None
        report = check("warm", memory.render(), "MEMORY.md")
        if not report.ok:
            raise MemoryOverBudget(report, "text")
        plan = WritePlan()
        self._memory_edit(eid, object_edits(profile, new), [memory.render()], before=profile)(plan)
        plan.apply(self._ctx.store)
        return _remembered(eid, "warm", key, report)

    def _remember_topic(
        self,
        eid: EntityId,
        key: str,
        line: str,
        topic: str | None,
        now: int,
        ttl: str | None = None,
    ) -> Remembered:
        if topic is None:
            raise AcmiValidationError("topic", "required", "the topic's slug is required")
        slug = _topic_slug(topic)
        tid = topic_entity(slug)
        beat = self._keys.slot(eid, MEMORY_HEARTBEAT)
        replies = self._ctx.store.pipeline([("GET", self._keys.profile(tid)), ("GET", beat)])
        profile = stored_object(pipeline_reply(replies[0], "topic"), self._keys.profile(tid))
        profile = unexpired(profile, TOPIC_PREFIX, now)  # what has expired is not kept
        tz = signals_zone(stored_object(pipeline_reply(replies[1], beat), beat))
        if not any(k in TOPIC_KEYS for k in profile):
            raise NotFound(
                f"topic: {tid} does not exist; create it with topic-create",
                field="topic",
                rule="exists",
            )
        today = local_time(now, tz).date().isoformat()
        before = topic_from_profile(slug, profile)
        if before is not None and holds(before.render(), line):
            report = check("topic", before.render(), before.path)
            return _remembered(eid, "topic", key, report, held=True)
        item: Any = line
        if key == "decision_log":
            item = {"date": today, "decision": line, "reasoning": "", "outcome": ""}
        new = {TOPIC_PREFIX + key: append_item(profile.get(TOPIC_PREFIX + key), item)}
        new.update(ttl_edit(profile, TOPIC_PREFIX, now, line, ttl))
        if TOPIC_PREFIX + "updated" in profile:
            new[TOPIC_PREFIX + "updated"] = today
        topic_file = topic_from_profile(slug, {**profile, **new})
        assert topic_file is not None
        report = check("topic", topic_file.render(), topic_file.path)
        if not report.ok:
            raise MemoryOverBudget(report, "text")
        plan = WritePlan()
        self._edit(tid, "profile", object_edits(profile, new))(plan)
        # the line's vector in the owner's index, which its search reads (with each linked
        # topic's) and its prune pass keeps (the pass reads the linked topics' lines); the
        # section's other lines too when this process does not know them stored (written
        # before a model was installed, or by another owner), as a warm remember does
        # (the file's lines, not the field's values: a decision's row joins its cells)
        lines = file_lines(topic_file.render())
        kept = set(file_lines(before.render())) if before is not None else set()
        self._vectors(eid, lines, [topic_file.render()], new=set(lines) - kept)(plan)
        plan.apply(self._ctx.store)
        return _remembered(eid, "topic", key, report)

    def _remember_daily(
        self, eid: EntityId, line: str, section: str | None, now: int
    ) -> Remembered:
        heading = None
        if section is not None:
            heading = DAILY_SECTIONS.get(section)
            if heading is None:
                raise AcmiValidationError(
                    "section", "memory_section", f"daily: one of {', '.join(DAILY_SECTIONS)}"
                )
        # the zone is in the signals: read the day's events around now, filter after
        state = self.load(
            eid, since_ms=now - DAY_MS, until_ms=now + DAY_MS, events=True, topics=False
        )
        tz = state.tz
        local = local_time(now, tz)
        day = local.date()
        event = entry_event(day, f"{local:%H:%M}", line, source=str(eid), tz=tz, section=heading)
        held = day_note(state.events, day, tz, [])
        if holds(held.render(), line):
            report = check("daily", held.render(), held.path)
            return _remembered(eid, "daily", section or _heading_key(event), report, held=True)
        note = day_note(state.events, day, tz, [event])
        report = check("daily", note.render(), note.path)
        if not report.ok:
            raise MemoryOverBudget(report, "text")
        plan = WritePlan()
        self._zadd(eid, event, event.to_json())(plan)
        self._vectors(eid, texts_of(line), [note.render()])(plan)
        plan.apply(self._ctx.store)
        return _remembered(eid, "daily", section or _heading_key(event), report)

    def log_session_start(
        self, entity: str | EntityId, session_id: str, model_id: str, ts: int, tz_name: str
    ) -> bool:
        """Seed §8 "Session starts -> log start time -> daily notes": ``- [HH:MM] Started
        session <id> (<model>)`` appended to the day of ``ts`` in ``tz_name``, once per
        session id (a ONCE mark in the same write, so a repeat or a retry writes nothing:
        False). One round trip. Not held to the note's budget: one line a session, and a
        refused start would lose it; ``memory status`` reports the budget. The bootstrap's
        script writes the same line itself when it can (``session_start_event``)."""
        return self._session_start(EntityId.parse(entity), session_id, model_id, ts, tz_name)

    def _session_start(
        self,
        eid: EntityId,
        session_id: str,
        model_id: str,
        ts: int,
        tz_name: str,
        replacing: str | None = None,
    ) -> bool:
        """``log_session_start``; with ``replacing`` (the line as the bootstrap's script
        wrote it in another zone, its mark set), that member removed in the same write
        and the line written in ``tz_name`` instead."""
        event = session_start_event(eid, session_id, model_id, ts, tz_name)
        plan = WritePlan()
        if replacing is None:
            plan.once(self._keys.session_logged(eid, session_id), SESSION_MARK_TTL_MS, str(ts))
        else:
            plan.zrem(self._keys.timeline(eid), replacing)
        self._zadd(eid, event, event.to_json())(plan)
        try:
            plan.apply(self._ctx.store)
        except Replayed:
            return False
        return True

    def topic_create(
        self, entity: str | EntityId, slug: object, name: object, now_ms: int | None = None
    ) -> TopicCreated:
        """``/topic-create``: the ``topic:<slug>`` entity from the seed's template, linked
        from the owner's profile (``warm.topics``). An existing topic not yet linked is
        linked; one already linked is a Conflict (409). 2 round trips."""
        eid = EntityId.parse(entity)
        slug = _topic_slug(slug, "slug")
        title = _one_line(self._ctx.guard(name, "name"), "name", 200)
        tid = topic_entity(slug)
        now = self._now(now_ms)
        warm, beat = self._keys.slot(eid, MEMORY_WARM), self._keys.slot(eid, MEMORY_HEARTBEAT)
        replies = self._ctx.store.pipeline(
            [("GET", warm), ("GET", self._keys.profile(tid)), ("GET", beat)]
        )
        profile = stored_object(pipeline_reply(replies[0], warm), warm)
        existing = stored_object(pipeline_reply(replies[1], "topic"), self._keys.profile(tid))
        tz = signals_zone(stored_object(pipeline_reply(replies[2], beat), beat))
        links = profile.get(TOPIC_LINKS)
        links = [x for x in links if isinstance(x, str)] if isinstance(links, list) else []
        exists = any(k in TOPIC_KEYS for k in existing)
        if exists and str(tid) in links:
            raise Conflict(f"slug: {tid} exists and is linked already", field="slug", rule="unique")
        plan = WritePlan()
        if exists:
            topic_file = topic_from_profile(slug, existing)
        else:
            topic_file = new_topic(slug, title, local_time(now, tz).date())
            self._edit(tid, "profile", object_edits({}, topic_to_profile(topic_file)))(plan)
        new_links = sorted({*links, str(tid)})
        self._memory_edit(eid, [("set", TOPIC_LINKS, dumps(new_links))])(plan)
        plan.apply(self._ctx.store)
        assert topic_file is not None
        return {
            "entity": str(eid),
            "topic": str(tid),
            "created": not exists,
            "path": topic_file.path,
            "text": topic_file.render(),
        }

    def handoff(
        self,
        entity: str | EntityId,
        text: object = None,
        now_ms: int | None = None,
        *,
        done: object = None,
        in_progress: object = None,
        next_steps: object = None,
        decisions: object = None,
        gotchas: object = None,
    ) -> Handoff:
        """``/handoff``: the seed's HANDOFF.md (what was done, in progress, next steps,
        decisions, gotchas), kept until the next session takes it: ``text`` as written, or
        the template filled from ``parts`` (``HANDOFF_PARTS``: each a list of lines or
        one line). 1 round trip."""
        eid = EntityId.parse(entity)
        parts = {
            "done": done,
            "in_progress": in_progress,
            "next_steps": next_steps,
            "decisions": decisions,
            "gotchas": gotchas,
        }
        given = {name: value for name, value in parts.items() if value is not None}
        if given:
            if text is not None:
                raise AcmiValidationError(
                    "text", "exclusive", "give the text or the template's parts, not both"
                )
            text = handoff_text(given)
        if not isinstance(text, str) or not text.strip():
            raise AcmiValidationError("text", "required", "must be a non-empty string")
        text = self._ctx.guard(text, "text")
        if len(text.encode("utf-8", "surrogatepass")) > MAX_HANDOFF_BYTES:
            raise AcmiValidationError(
                "text", "max_bytes", f"must be at most {MAX_HANDOFF_BYTES} bytes"
            )
        ts = self._now(now_ms)
        plan = WritePlan()
        _, key = self._slots(eid)
        plan.set(key, dumps({"text": text, "ts": ts}, "text"))
        plan.apply(self._ctx.store)
        return {"entity": str(eid), "text": text, "ts": ts}

    def take_handoff(self, entity: str | EntityId) -> StoredHandoff | None:
        """The pending handoff, read and cleared in one atomic step (GETDEL): two
        sessions starting at once cannot both take it. None when there is none. The
        request's record keeps what it took, so a retry after a lost reply gets the
        handoff again instead of None."""
        eid = EntityId.parse(entity)
        _, key = self._slots(eid)
        # the record in the entity's bucket: the plan's one slot
        plan = WritePlan(record=self._ctx.keys.of(eid).request(scripts.new_request_id()))
        taken = plan.take(key)
        stored = stored_object(plan.apply(self._ctx.store)[taken], key)
        # decoded JSON: the object ``handoff`` wrote ({text, ts}), or another writer's,
        # answered as it is
        return cast(StoredHandoff, stored) if stored else None


def rewrite_session_start(
    ctx: Context, eid: EntityId, session_id: str, model_id: str, ts: int, tz_name: str, line: str
) -> None:
    """The session-start ``line`` the bootstrap's script wrote (its mark set) replaced by
    the one in ``tz_name``, the zone the bundle found: one write."""
    MemoryWrites(ctx)._session_start(eid, session_id, model_id, ts, tz_name, replacing=line)


def session_start_event(
    eid: EntityId, session_id: str, model_id: str, ts: int, tz_name: str
) -> Event:
    """The session-start line of ``log_session_start`` (the bootstrap's script writes the
    same event when it can: byte for byte this one)."""
    from acmi_core.memory.daily import zone

    tz = zone(tz_name)
    local = local_time(ts, tz)
    # one line whatever the ids hold (they are 1-256 characters of any text)
    text = " ".join(f"Started session {session_id} ({model_id})".split())
    return entry_event(local.date(), f"{local:%H:%M}", text, source=str(eid), tz=tz)

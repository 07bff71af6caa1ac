"""The seed's maintenance of the memory layers (``MemoryAPI`` composes it): ``prune``
(done and stale items of the hot layer moved to today's note), ``review`` (the weekly
review: the week's lessons and decisions promoted to MEMORY.md, the hot layer pruned,
heartbeat-state's schedule moved on) and ``daily_summary`` (one day's note and what it
holds). Idempotent: a second run the same day writes nothing."""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import EntityId, Event
from acmi_core.memory.budgets import check, count_lines
from acmi_core.memory.daily import DAILY, entry_event
from acmi_core.memory.embeddings import texts_of
from acmi_core.memory.layers import ACTIVE_CONTEXT
from acmi_core.memory.results import DailySummary, Moved, Pruned, Reviewed
from acmi_core.memory.slots import HEARTBEAT, HOT, WARM, from_profile, heartbeat_from_signals
from acmi_core.memory.state import (
    DAY_MS,
    DEFAULT_PRUNE_DAYS,
    REVIEW_DAYS,
    MemoryCommands,
    MemoryOverBudget,
    MemoryState,
    append_item,
    day_note,
    first_date,
    local_time,
    midnight_ms,
    next_month,
    object_edits,
    quarter_end,
    text_of,
)
from acmi_core.memory.vectors import MemoryVectors
from acmi_core.store.writes import WritePlan


def _item_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for name in ("task", "text", "line", "decision"):
            if isinstance(item.get(name), str):
                return str(item[name])
    return ""


def _promotions(state: MemoryState, lessons: Any, first: dt.date, today: dt.date) -> list[str]:
    """The review's new Lessons Learned bullets: memory lessons, decisions and takeaways
    (and other events of kind lesson or decision) dated ``first``..``today``, as
    ``YYYY-MM-DD — text``, leaving out those ``lessons`` holds already."""
    tz = state.tz
    have = {_item_text(i) for i in lessons} if isinstance(lessons, list) else set()
    if isinstance(lessons, str):
        have = set(lessons.split("\n"))
    promoted: list[str] = []
    for event in sorted(state.events, key=lambda e: e.ts):
        day = local_time(event.ts, tz).date()
        if not first <= day <= today:
            continue
        payload = event.payload if isinstance(event.payload, dict) else {}
        memory = payload.get("memory") == DAILY
        if event.kind not in ("lesson", "decision", "takeaway"):
            continue
        if not memory and event.kind == "takeaway":
            continue
        # a bullet is one line: an event's text may hold newlines (any sender's lesson)
        bullet = f"{day.isoformat()} — {' '.join(text_of(event).split())}"
        if bullet not in have and bullet not in promoted:
            promoted.append(bullet)
    return promoted


class MemoryUpkeep(MemoryCommands):
    """Prune, the weekly review and the daily summary."""

    def _prune_plan(
        self, state: MemoryState, now: int, days: int, plan: WritePlan, extra: Sequence[Event] = ()
    ) -> tuple[list[Moved], dict[str, Any]]:
        """What a prune moves: completed tasks, items dated more than ``days`` ago, and
        yesterday's "Key Decisions Made Today". Adds the moves to ``plan`` (the entries
        to today's note; the new hot sections are returned, with the prune date)."""
        tz = state.tz
        local = local_time(now, tz)
        today = local.date()
        cutoff = today - dt.timedelta(days=days)
        updated = first_date(str(state.memory.get(HOT + "updated", "")))
        moved: list[Moved] = []
        new: dict[str, Any] = {}
        for key in ("in_progress", "waiting_on", "decisions_today"):
            value = state.memory.get(HOT + key)
            if not isinstance(value, list):
                continue
            keep = []
            for item in value:
                text = _item_text(item)
                dated = first_date(text)
                done = isinstance(item, dict) and item.get("done") is True
                old = dated is not None and dated < cutoff
                stale_decision = (
                    key == "decisions_today" and updated is not None and updated < today
                )
                if text and (done or old or stale_decision):
                    moved.append({"section": key, "item": text})
                else:
                    keep.append(item)
            if len(keep) != len(value):
                new[HOT + key] = keep
        events = []
        for move in moved:
            heading = ACTIVE_CONTEXT.by_key(move["section"]).heading
            prefix = "Done" if move["section"] == "in_progress" else f"From {heading}"
            events.append(
                entry_event(
                    today,
                    f"{local:%H:%M}",
                    f"{prefix}: {move['item']}",
                    source=str(state.entity),
                    tz=tz,
                )
            )
        if events:
            note = day_note(state.events, today, tz, [*extra, *events])
            report = check("daily", note.render(), note.path)
            if not report.ok:
                raise MemoryOverBudget(report, "hot")
            for event in events:
                self._zadd(state.entity, event, event.to_json())(plan)
            # the moved lines, under their heading in today's note
            moved_lines = texts_of([text_of(e) for e in events])
            self._vectors(state.entity, moved_lines, [note.render()])(plan)
        new[HEARTBEAT + "last_active_context_prune"] = today.isoformat()
        return moved, new

    def prune(
        self, entity: str | EntityId, days: int = DEFAULT_PRUNE_DAYS, now_ms: int | None = None
    ) -> Pruned:
        """``/memory-prune`` of the hot layer (seed §2 "Move completed items to daily
        notes", §10 "Prune ACTIVE-CONTEXT.md (remove stale items)"): completed tasks,
        items whose date is more than ``days`` ago and yesterday's decisions move to
        today's note as entries. Idempotent. 2 round trips."""
        if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= 365:
            raise AcmiValidationError("days", "range", "must be an integer from 0 to 365")
        now = self._now(now_ms)
        state = self.load(
            entity, since_ms=now - DAY_MS - DAY_MS, until_ms=now + DAY_MS, topics=False
        )
        plan = WritePlan()
        moved, new = self._prune_plan(state, now, days, plan)
        edit = object_edits(state.memory, new)
        if edit:
            self._memory_edit(state.entity, edit)(plan)
        if len(plan):
            plan.apply(self._ctx.store)
        # then the vectors no line needs any more (the moved lines keep theirs: same words)
        vectors = MemoryVectors(self._ctx).prune_vectors(state.entity)
        return {
            "entity": str(state.entity),
            "moved": moved,
            "written": bool(len(plan)),
            "vectors": vectors,
        }

    def review(self, entity: str | EntityId, now_ms: int | None = None) -> Reviewed:
        """``/memory-review``, the weekly review (seed §10): the last 7 days' lessons,
        decisions and takeaways promoted to MEMORY.md's Lessons Learned as ``YYYY-MM-DD —
        text`` (once: a bullet already there is not added again), the hot layer pruned,
        heartbeat-state updated. Idempotent: a second run the same day writes nothing.
        2 round trips (read, one write); over the warm budget: MemoryOverBudget."""
        now = self._now(now_ms)
        state = self.load(
            entity, since_ms=now - (REVIEW_DAYS + 1) * DAY_MS, until_ms=now + DAY_MS, topics=False
        )
        tz = state.tz
        today = local_time(now, tz).date()
        first = today - dt.timedelta(days=REVIEW_DAYS - 1)
        lessons = state.memory.get(WARM + "lessons")
        promoted = _promotions(state, lessons, first, today)
        plan = WritePlan()
        profile_edit: list[tuple[Any, str, str]] = []
        warm_lines = None
        if promoted:
            value = lessons
            for bullet in promoted:
                value = append_item(value, bullet)
            new_profile = {**state.memory, WARM + "lessons": value}
            memory_file = from_profile(new_profile)
            assert memory_file is not None
            report = check("warm", memory_file.render(), "MEMORY.md")
            if not report.ok:
                raise MemoryOverBudget(report, "warm.lessons")
            warm_lines = report.lines
            profile_edit = object_edits(state.memory, {WARM + "lessons": value})
        else:
            memory_file = from_profile(state.memory)
            warm_lines = None if memory_file is None else count_lines(memory_file.render())
        moved, signals_new = self._prune_plan(state, now, DEFAULT_PRUNE_DAYS, plan)
        heartbeat = heartbeat_from_signals(state.memory)
        schedule = dict((heartbeat.data if heartbeat else {}).get("next_scheduled") or {})
        schedule["weekly_review"] = (today + dt.timedelta(days=REVIEW_DAYS)).isoformat()
        schedule.setdefault("monthly_audit", next_month(today).isoformat())
        schedule.setdefault("quarterly_archive", quarter_end(today).isoformat())
        signals_new[HEARTBEAT + "last_memory_review"] = today.isoformat()
        signals_new[HEARTBEAT + "next_scheduled"] = schedule
        if warm_lines is not None:
            signals_new[HEARTBEAT + "memory_md_lines"] = warm_lines
        if profile_edit:
            files = [] if memory_file is None else [memory_file.render()]
            self._memory_edit(state.entity, profile_edit, files)(plan)
        signals_edit = object_edits(state.memory, signals_new)
        if signals_edit:
            self._memory_edit(state.entity, signals_edit)(plan)
        if len(plan):
            plan.apply(self._ctx.store)
        return {
            "entity": str(state.entity),
            "since": first.isoformat(),
            "promoted": promoted,
            "moved": moved,
            "next_review": schedule["weekly_review"],
            "written": bool(len(plan)),
            "truncated": state.truncated,
        }

    def daily_summary(
        self, entity: str | EntityId, date: str | None = None, now_ms: int | None = None
    ) -> DailySummary:
        """``/daily-summary``: a day's note (default today) and what it holds: entries,
        decisions, lessons, takeaways, open tasks for tomorrow. Other events of that day
        (webhooks, agents) are in it as entries. 1 round trip."""
        now = self._now(now_ms)
        eid = EntityId.parse(entity)
        if date is not None:
            if not isinstance(date, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
                raise AcmiValidationError("date", "date", "must be a date YYYY-MM-DD")
            try:
                day: dt.date | None = dt.date.fromisoformat(date)
            except ValueError:
                raise AcmiValidationError("date", "date", "is not a real date") from None
        else:
            day = None
        centre = now if day is None else midnight_ms(day, dt.UTC)
        state = self.load(
            eid, since_ms=centre - 2 * DAY_MS, until_ms=centre + 2 * DAY_MS, topics=False
        )
        tz = state.tz
        day = day or local_time(now, tz).date()
        note = day_note(state.events, day, tz, [], include_foreign=True)
        kinds: dict[str, list[str]] = defaultdict(list)
        for event in state.events:
            if local_time(event.ts, tz).date() == day and event.kind in ("decision", "lesson"):
                kinds[event.kind].append(text_of(event))
        text = note.render()
        entries = [f"[{e.at}] {e.text}" for _, e in note.entries]
        open_tasks = [t.text for t in note.tomorrow if not t.done]
        summary = (
            f"{day.isoformat()}: {len(entries)} entries, {len(kinds['decision'])} decisions, "
            f"{len(kinds['lesson'])} lessons, {len(note.takeaways)} takeaways, "
            f"{len(open_tasks)} open for tomorrow"
        )
        return {
            "entity": str(eid),
            "date": day.isoformat(),
            "path": note.path,
            "summary": summary,
            "entries": entries,
            "decisions": kinds["decision"],
            "lessons": kinds["lesson"],
            "takeaways": list(note.takeaways),
            "tomorrow": open_tasks,
            "text": text,
            "budget": check("daily", text, note.path).to_dict(),
        }

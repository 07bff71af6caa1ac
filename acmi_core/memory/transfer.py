"""The memory tree in and out of the store (``MemoryAPI`` composes it):
``export_snapshot`` (the whole tree, a page of timeline at a time), ``import_snapshot``
(a tree, idempotently: only what differs is written, in chunks of ``IMPORT_CHUNK_OPS``
ops, every file through the secret guard before anything is written) and ``migrate`` (the
seed's directory tree imported)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from acmi_core.base.model import EntityId, Event, dumps, encode_event, parse_event
from acmi_core.base.pages import MAX_PAGE_SIZE
from acmi_core.base.stored import decode_events
from acmi_core.memory.budgets import check_snapshot
from acmi_core.memory.daily import DAILY, HEADER_KIND, zone
from acmi_core.memory.layers import MemorySnapshot
from acmi_core.memory.slots import (
    HEARTBEAT,
    TOPIC_LINKS,
    SlotImage,
    snapshot_to_slots,
    topic_entity,
)
from acmi_core.memory.state import (
    HOT_KEYS,
    TOPIC_KEYS,
    WARM_KEYS,
    MemoryCommands,
    MemoryOverBudget,
    differs,
    midnight_ms,
    object_edits,
)
from acmi_core.memory.tree import read_tree
from acmi_core.store.writes import WritePlan

IMPORT_CHUNK_OPS: Final = 500  # ops per write script during an import

Progress = Callable[[int, int], None]
"""Called with (ops written so far, ops in all) as an import writes."""


def _numbered(event: Event) -> object:
    payload = event.payload if isinstance(event.payload, dict) else {}
    return payload.get("n")


def _hset(key: str, name: str, text: str) -> Callable[[WritePlan], object]:
    return lambda plan: plan.hset(key, name, text)


def _zrem(key: str, member: bytes) -> Callable[[WritePlan], object]:
    text = member.decode("utf-8", "surrogatepass")
    return lambda plan: plan.zrem(key, text)


class MemoryTransfer(MemoryCommands):
    """The tree exported, imported and migrated."""

    def export_snapshot(self, entity: str | EntityId) -> MemorySnapshot:
        """The entity's memory tree: 2 round trips + one per timeline page."""
        state = self.load(entity, events=False)
        for page in self._timeline.pages(state.entity, limit=MAX_PAGE_SIZE):
            state.events.extend(page.events)
        return state.snapshot()

    def _raw_window(self, eid: EntityId, low: int, high: int) -> list[tuple[bytes, Event]]:
        """Every stored member with ts in [low, high], with its event: one round trip per
        ``MAX_PAGE_SIZE`` members (an import's days, so bounded by the tree)."""
        key = self._keys.timeline(eid)
        out: list[tuple[bytes, Event]] = []
        offset = 0
        while True:
            raw = self._ctx.store.execute(
                ("ZRANGE", key, low, high, "BYSCORE", "LIMIT", offset, MAX_PAGE_SIZE)
            )
            members = [m for m in (raw if isinstance(raw, list) else []) if isinstance(m, bytes)]
            for member in members:
                decoded, _ = decode_events([member])
                if decoded:
                    out.append((member, decoded[0][0]))
            if len(members) < MAX_PAGE_SIZE:
                return out
            offset += MAX_PAGE_SIZE

    def import_snapshot(
        self,
        entity: str | EntityId,
        snapshot: MemorySnapshot,
        *,
        progress: Progress | None = None,
        strict: bool = False,
    ) -> dict[str, Any]:
        """Migrate a tree into ACMI, idempotently: what the store already holds is not
        written again (a re-run sends no write at all). A day's note replaces what an
        earlier import stored for that day (its header, lines edited or removed since);
        lines written through the API that the tree does not hold are kept. A layer the
        tree has replaces the stored one (its sections absent from the tree are deleted);
        a layer it lacks is left alone. Files over budget are imported whole and listed in
        ``over_budget`` (a migration must not lose what the tree holds; the seed reports,
        never cuts); ``strict`` refuses them instead (MemoryOverBudget, nothing stored).

        Round trips: 2 reads, one per 1,000 events of the tree's days, one per
        ``IMPORT_CHUNK_OPS`` writes."""
        eid = EntityId.parse(entity)
        over = [r for r in check_snapshot(snapshot) if not r.ok]
        if over and strict:
            raise MemoryOverBudget(over[0], f"files.{over[0].path}")
        image = self._guarded(snapshot_to_slots(snapshot, source=str(eid)))
        state = self.load(eid, events=False, topics=False)
        linked = sorted({*state.topic_links, *image.profile.get(TOPIC_LINKS, [])})
        state.topics = self._topics(linked) if image.topics else {}
        counts: dict[str, int] = defaultdict(int)
        ops: list[Callable[[WritePlan], object]] = []

        self._daily_ops(eid, snapshot, image, counts, ops)

        # hot + heartbeat: signals
        signal_delete: set[str] = set()
        if snapshot.active_context is not None:
            signal_delete |= HOT_KEYS
        if snapshot.heartbeat is not None:
            signal_delete |= {k for k in state.memory if k.startswith(HEARTBEAT)}
        edit = object_edits(state.memory, image.signals, signal_delete)
        if edit:
            ops.append(self._memory_edit(eid, edit))
            counts["signals_written"] = len(edit)

        # warm: profile (topic links are added to, never dropped)
        profile_new = {**image.profile}
        if linked:
            profile_new[TOPIC_LINKS] = linked
        edit = object_edits(
            state.memory, profile_new, WARM_KEYS if snapshot.memory is not None else ()
        )
        if edit:
            ops.append(self._memory_edit(eid, edit))
            counts["profile_written"] = len(edit)

        for slug, fields in image.topics.items():
            edit = object_edits(state.topics.get(slug, {}), fields, TOPIC_KEYS)
            if edit:
                ops.append(self._edit(topic_entity(slug), "profile", edit))
                counts["topics_written"] += 1

        archive_key, _ = self._slots(eid)
        for quarter, doc in image.archives.items():
            if differs(state.archives, quarter, doc):
                text = dumps(doc, f"archives.{quarter}")
                ops.append(_hset(archive_key, quarter, text))
                counts["archives_written"] += 1

        written = self._apply_chunks(ops, progress)
        return {
            "entity": str(eid),
            "files": len(snapshot.daily)
            + len(snapshot.topics)
            + len(snapshot.archives)
            + sum(x is not None for x in (snapshot.active_context, snapshot.memory))
            + (snapshot.heartbeat is not None),
            "ignored": list(snapshot.ignored),
            "over_budget": [r.to_dict() for r in over],
            "writes": written,
            **{
                k: counts[k]
                for k in (
                    "events_added",
                    "events_removed",
                    "events_unchanged",
                    "signals_written",
                    "profile_written",
                    "topics_written",
                    "archives_written",
                )
            },
        }

    def _guarded(self, image: SlotImage) -> SlotImage:
        """An import's slots through the secret guard, file by file (paths name the file:
        ``files["MEMORY.md"]["warm.lessons"][0]``), all before anything is written."""
        guard = self._ctx.guard
        tenant, now = self._keys.tenant, self._ctx.clock()
        signals = guard(image.signals, 'files["ACTIVE-CONTEXT.md"]')
        profile = guard(image.profile, 'files["MEMORY.md"]')
        topics = {
            slug: guard(doc, f'files["memory/topics/{slug}.md"]')
            for slug, doc in image.topics.items()
        }
        archives = {
            quarter: guard(doc, f'files["memory/archive/{quarter}.md"]')
            for quarter, doc in image.archives.items()
        }
        events: list[Event] = []
        for n, event in enumerate(image.events):
            payload = event.payload if isinstance(event.payload, dict) else {}
            day = payload.get("date")
            where = f'files["memory/{day}.md"]' if isinstance(day, str) else f"events[{n}]"
            data = event.to_dict()
            clean = guard(data, where)
            # redacted: validated again (the size limits too); its ts is kept
            events.append(
                event
                if clean is data
                else parse_event(clean, now_ms=now, tenant=tenant, field=where)
            )
        return SlotImage(signals, profile, events, topics, archives)

    def _daily_ops(
        self,
        eid: EntityId,
        snapshot: MemorySnapshot,
        image: SlotImage,
        counts: dict[str, int],
        ops: list[Callable[[WritePlan], object]],
    ) -> None:
        """An import's timeline writes: the tree's days replace what an earlier import
        stored for them (see ``import_snapshot``)."""
        now = self._ctx.clock()
        tz = zone(snapshot.timezone)
        timeline = self._keys.timeline(eid)
        if not snapshot.daily:
            return
        low = midnight_ms(snapshot.daily[0].date, tz)
        high = midnight_ms(snapshot.daily[-1].date + dt.timedelta(days=1), tz) - 1
        stored = self._raw_window(eid, low, high)
        days = {note.date.isoformat() for note in snapshot.daily}
        members = {m for m, _ in stored}
        by_cid: dict[str, list[tuple[bytes, Event]]] = defaultdict(list)
        for member, event in stored:
            payload = event.payload if isinstance(event.payload, dict) else {}
            if payload.get("memory") == DAILY and payload.get("date") in days:
                by_cid[event.correlationId].append((member, event))
        new_cids = set()
        for n, raw_event in enumerate(image.events):
            event, text = encode_event(
                raw_event, now_ms=now, tenant=self._keys.tenant, field=f"events[{n}]"
            )
            new_cids.add(event.correlationId)
            if text.encode("utf-8") in members:
                counts["events_unchanged"] += 1
                continue
            olds = by_cid.get(event.correlationId, [])
            by_api = [o for o in olds if not isinstance(_numbered(o[1]), int)]
            if by_api and event.kind != HEADER_KIND:
                counts["events_unchanged"] += 1  # the line was written through the API
                continue
            for member, _ in olds:  # the same line or header, moved or regrown
                ops.append(_zrem(timeline, member))
                counts["events_removed"] += 1
            ops.append(self._zadd(eid, event, text))
            counts["events_added"] += 1
        for cid, olds in by_cid.items():
            if cid in new_cids:
                continue
            for member, event in olds:
                if event.kind == HEADER_KIND or isinstance(_numbered(event), int):
                    ops.append(_zrem(timeline, member))  # a line the tree no longer has
                    counts["events_removed"] += 1

    def _apply_chunks(
        self, ops: list[Callable[[WritePlan], object]], progress: Progress | None
    ) -> int:
        total = len(ops)
        if progress is not None:
            progress(0, total)
        done = 0
        for start in range(0, total, IMPORT_CHUNK_OPS):
            plan = WritePlan()
            for op in ops[start : start + IMPORT_CHUNK_OPS]:
                op(plan)
            plan.apply(self._ctx.store)
            done = min(total, start + IMPORT_CHUNK_OPS)
            if progress is not None:
                progress(done, total)
        return total

    def migrate(
        self,
        entity: str | EntityId,
        root: str | Path,
        *,
        progress: Progress | None = None,
        strict: bool = False,
    ) -> dict[str, Any]:
        """``/memory-migrate``: the seed's tree under ``root`` imported into ACMI."""
        return self.import_snapshot(entity, read_tree(root), progress=progress, strict=strict)

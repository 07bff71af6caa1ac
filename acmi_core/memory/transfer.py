"""The memory tree in and out of the store (``MemoryAPI`` composes it):
``export_snapshot`` (the whole tree, a page of timeline at a time), ``import_snapshot``
(a tree, idempotently: only what differs is written, every file through the secret guard
before anything is written) and ``migrate`` (the seed's directory tree imported).

An import's writes are chunked across round trips, each chunk one write script of at most
``IMPORT_CHUNK_OPS`` ops and ``IMPORT_CHUNK_BYTES`` of work (an op's arguments plus the
stored object it edits): a script blocks all of Redis while it runs, and one script of a
whole tree (500 topic files near the 64 KiB object limit) ran 7.6 s, every other client
answered BUSY and the caller timed out although the write committed. A chunk holds whole
files where it can (a file larger than a chunk spans several, in order). The result names
the files written (``files_written``); a failure part-way says which files landed and
which did not (the error's message), and a retry writes only what still differs."""

from __future__ import annotations

import datetime as dt
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from acmi_core.base.errors import AcmiError
from acmi_core.base.model import (
    EntityId,
    Event,
    dumps,
    encode_event,
    json_object_text,
    parse_event,
)
from acmi_core.base.pages import MAX_PAGE_SIZE
from acmi_core.base.stored import decode_events
from acmi_core.memory.budgets import check_snapshot
from acmi_core.memory.daily import DAILY, HEADER_KIND, daily_from_events, zone
from acmi_core.memory.embedding_calls import EMBED_BUDGET_S
from acmi_core.memory.embeddings import file_lines, texts_of
from acmi_core.memory.layers import MemorySnapshot, Quarter
from acmi_core.memory.results import Imported
from acmi_core.memory.slots import (
    HEARTBEAT,
    TOPIC_LINKS,
    SlotImage,
    archive_from_document,
    from_profile,
    from_signals,
    snapshot_to_slots,
    topic_entity,
    topic_from_profile,
)
from acmi_core.memory.state import (
    HOT_KEYS,
    STARTUP_SLOTS,
    STARTUP_TEXT,
    TOPIC_KEYS,
    WARM_KEYS,
    MemoryCommands,
    MemoryOverBudget,
    differs,
    midnight_ms,
    object_edits,
    text_of,
)
from acmi_core.memory.tree import read_tree
from acmi_core.store.base import MAX_REQUEST_ARGS
from acmi_core.store.writes import WritePlan

IMPORT_CHUNK_OPS: Final = 500  # ops per write script during an import
# Work per write script (bytes of op arguments + stored objects edited): measured on
# redis-server, an object edit costs ~0.25 ms of Redis time per KiB, so 128 KiB keeps a
# chunk near 30 ms, under the 50 ms a script may take (test_memory_import_chunks.py)
IMPORT_CHUNK_BYTES: Final = 128 * 1024
# a chunk's request arguments (its ops' and keys), under store.base.MAX_REQUEST_ARGS with
# room for the request's head (EVALSHA, SHA, counts)
IMPORT_CHUNK_ARGS: Final = MAX_REQUEST_ARGS - 16
MAX_NAMED_FILES: Final = 50  # files an incomplete import's error names (then a count)

Progress = Callable[[int, int], None]
"""Called with (ops written so far, ops in all) as an import writes."""


@dataclass(frozen=True)
class _Op:
    """One staged write of an import: the file it belongs to, what it stages, and the
    bytes of stored object it makes the script read (beside its own arguments)."""

    file: str
    stage: Callable[[WritePlan], object]
    stored: int = 0


def _cost(op: _Op) -> int:
    return _measure(op)[0]


def _measure(op: _Op) -> tuple[int, int]:
    """The op's work (bytes of arguments and stored object) and its request arguments
    (its ops' and at most as many keys)."""
    scratch = WritePlan()
    op.stage(scratch)
    size = op.stored + sum(len(a) for a in scratch.args if isinstance(a, str | bytes))
    return size, len(scratch.args) + len(scratch.keys)


def _files_left(
    current: Mapping[str, Any], new: Mapping[str, Any], gone: Collection[str]
) -> list[str]:
    """The hot and warm files an import's edit leaves, rendered from the guarded image
    (what its lines' vectors are placed in: a redacted line embedded redacted, under its
    heading)."""
    after = {**{k: v for k, v in current.items() if k not in gone}, **new}
    return [f.render() for f in (from_signals(after), from_profile(after)) if f is not None]


def _day_file(event: Event) -> str:
    payload = event.payload if isinstance(event.payload, dict) else {}
    day = payload.get("date")
    return f"memory/{day}.md" if isinstance(day, str) else "memory/"


# the file each memory field comes from, by prefix
_FIELD_FILES: Final = (
    (HEARTBEAT, "memory/heartbeat-state.json"),
    ("hot.", "ACTIVE-CONTEXT.md"),
    ("warm.", "MEMORY.md"),
)


def _by_file(edit: list[tuple[Any, str, str]]) -> dict[str, list[tuple[Any, str, str]]]:
    out: dict[str, list[tuple[Any, str, str]]] = {}
    for one in edit:
        file = next((f for prefix, f in _FIELD_FILES if one[1].startswith(prefix)), "MEMORY.md")
        out.setdefault(file, []).append(one)
    return out


def _stored(memory: dict[str, Any], file: str) -> int:
    """The bytes of the memory slot ``file``'s fields live in, as stored now."""
    prefix = next(p for p, f in _FIELD_FILES if f == file)
    return len(dumps({k: v for k, v in memory.items() if k.startswith(prefix)}))


def _numbered(event: Event) -> object:
    payload = event.payload if isinstance(event.payload, dict) else {}
    return payload.get("n")


def _hset(key: str, name: str, text: str) -> Callable[[WritePlan], object]:
    return lambda plan: plan.hset(key, name, text)


def _set(key: str, text: str) -> Callable[[WritePlan], object]:
    return lambda plan: plan.set(key, text)


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
        embed_budget_s: float = EMBED_BUDGET_S,
    ) -> Imported:
        """Migrate a tree into ACMI, idempotently: what the store already holds is not
        written again (a re-run sends no write at all). A day's note replaces what an
        earlier import stored for that day (its header, lines edited or removed since);
        lines written through the API that the tree does not hold are kept. A layer the
        tree has replaces the stored one (its sections absent from the tree are deleted);
        a layer it lacks is left alone. Files over budget are imported whole and listed in
        ``over_budget`` (a migration must not lose what the tree holds; the seed reports,
        never cuts); ``strict`` refuses them instead (MemoryOverBudget, nothing stored).
        ``embed_budget_s``: how long its lines are embedded for, in all (a request's
        ``EMBED_BUDGET_S``; the local ``acmi memory import`` waits longer: the lines past
        it stay unindexed until a write of their field or a search embeds them).

        Round trips: 2 reads, one per 1,000 events of the tree's days, one per chunk of
        writes (``IMPORT_CHUNK_OPS`` ops, ``IMPORT_CHUNK_BYTES`` of work: module
        docstring)."""
        eid = EntityId.parse(entity)
        over = [r for r in check_snapshot(snapshot) if not r.ok]
        if over and strict:
            raise MemoryOverBudget(over[0], f"files.{over[0].path}")
        image = self._guarded(snapshot_to_slots(snapshot, source=str(eid)))
        state = self.load(eid, events=False, topics=False)
        linked = sorted({*state.topic_links, *image.profile.get(TOPIC_LINKS, [])})
        state.topics = self._topics(linked) if image.topics else {}
        counts: dict[str, int] = defaultdict(int)
        ops: list[_Op] = []
        # one embedding budget for the whole tree (each file its own would let an import
        # of many files embed for minutes with a local model): the lines past it stay
        # unindexed until a write of their field or a search embeds them
        until = time.monotonic() + embed_budget_s

        self._daily_ops(eid, snapshot, image, counts, ops, until)

        # hot + heartbeat: signals
        signal_delete: set[str] = set()
        if snapshot.active_context is not None:
            signal_delete |= HOT_KEYS
        if snapshot.heartbeat is not None:
            signal_delete |= {k for k in state.memory if k.startswith(HEARTBEAT)}
        edit = object_edits(state.memory, image.signals, signal_delete)
        if edit:
            for file, part in _by_file(edit).items():
                stored = _stored(state.memory, file)
                ops.append(
                    _Op(
                        file,
                        self._memory_edit(
                            eid,
                            part,
                            _files_left(state.memory, image.signals, signal_delete),
                            ask=False,
                            until=until,
                        ),
                        stored,
                    )
                )
            counts["signals_written"] = len(edit)

        # warm: profile (topic links are added to, never dropped)
        profile_new = {**image.profile}
        if linked:
            profile_new[TOPIC_LINKS] = linked
        warm = WARM_KEYS if snapshot.memory is not None else ()
        edit = object_edits(state.memory, profile_new, warm)
        if edit:
            left = _files_left(state.memory, profile_new, warm)
            ops.append(
                _Op(
                    "MEMORY.md",
                    self._memory_edit(eid, edit, left, ask=False, until=until),
                    _stored(state.memory, "MEMORY.md"),
                )
            )
            counts["profile_written"] = len(edit)

        self._topic_ops(eid, state.topics, image, counts, ops, until)

        # the startup files: each replaces its slot when its text differs (a file the tree
        # lacks is left alone, as a layer is)
        for path, text in self._startup_guarded(snapshot):
            if state.startup.get(path) != text:
                slot = dict(STARTUP_SLOTS)[path]
                # a slot like the others: at most MAX_OBJECT_BYTES of JSON (413 naming it)
                value = json_object_text({STARTUP_TEXT: text}, f'files["{path}"]')
                ops.append(_Op(path, _set(self._keys.slot(eid, slot), value)))
                counts["startup_written"] += 1

        archive_key, _ = self._slots(eid)
        for quarter, doc in image.archives.items():
            if differs(state.archives, quarter, doc):
                path = f"memory/archive/{quarter}.md"
                # its lines' vectors first, as a topic's (the doc went through the guard)
                shown = archive_from_document(Quarter.parse(quarter, path), doc).render()
                stages = self._vector_ops(eid, file_lines(shown), [shown], ask=False, until=until)
                ops += [_Op(path, each) for each in stages]
                text = dumps(doc, f"archives.{quarter}")
                ops.append(_Op(path, _hset(archive_key, quarter, text)))
                counts["archives_written"] += 1

        files_written = self._apply_chunks(ops, progress)
        written = len(ops)
        return {
            "entity": str(eid),
            "files": len(snapshot.daily)
            + len(snapshot.topics)
            + len(snapshot.archives)
            + sum(x is not None for x in (snapshot.active_context, snapshot.memory))
            + (snapshot.heartbeat is not None)
            + len(snapshot.startup),
            "ignored": list(snapshot.ignored),
            "over_budget": [r.to_dict() for r in over],
            "writes": written,
            "events_added": counts["events_added"],
            "events_removed": counts["events_removed"],
            "events_unchanged": counts["events_unchanged"],
            "signals_written": counts["signals_written"],
            "profile_written": counts["profile_written"],
            "topics_written": counts["topics_written"],
            "archives_written": counts["archives_written"],
            "files_written": files_written,
            "startup_written": counts["startup_written"],
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

    def _startup_guarded(self, snapshot: MemorySnapshot) -> list[tuple[str, str]]:
        """The tree's startup files through the secret guard (a redacted file is stored
        redacted: a secret is never kept, whatever file it is in)."""
        out = []
        for path, text in snapshot.startup:
            clean = self._ctx.guard({STARTUP_TEXT: text}, f'files["{path}"]')
            out.append((path, clean[STARTUP_TEXT]))
        return out

    def _topic_ops(
        self,
        eid: EntityId,
        topics: dict[str, dict[str, Any]],
        image: SlotImage,
        counts: dict[str, int],
        ops: list[_Op],
        until: float,
    ) -> None:
        """Each topic file of the tree that differs from ``topics`` (the stored ones)
        replaces it, its lines' vectors in the owner's index (as a remember on it)."""
        for slug, fields in image.topics.items():
            current = topics.get(slug, {})
            edit = object_edits(current, fields, TOPIC_KEYS)
            if not edit:
                continue
            path = f"memory/topics/{slug}.md"
            shown = topic_from_profile(slug, fields)
            lines = file_lines(shown.render()) if shown is not None else []
            if shown is not None and lines:
                # before the file itself: a file that spans scripts is stored by its last,
                # so an import that stops part-way leaves no topic without its vectors
                stages = self._vector_ops(eid, lines, [shown.render()], ask=False, until=until)
                ops += [_Op(path, each) for each in stages]
            stored = len(dumps(current)) if current else 0
            ops.append(_Op(path, self._edit(topic_entity(slug), "profile", edit), stored))
            counts["topics_written"] += 1

    def _daily_ops(
        self,
        eid: EntityId,
        snapshot: MemorySnapshot,
        image: SlotImage,
        counts: dict[str, int],
        ops: list[_Op],
        until: float,
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
        indexed: list[tuple[str, str]] = []
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
            file = _day_file(event)
            for member, _ in olds:  # the same line or header, moved or regrown
                ops.append(_Op(file, _zrem(timeline, member)))
                counts["events_removed"] += 1
            ops.append(_Op(file, self._zadd(eid, event, text)))
            counts["events_added"] += 1
            indexed.append((file, text_of(event)))
        # the added lines' vectors, a batch a file (the events went through the guard)
        by_file: dict[str, list[str]] = defaultdict(list)
        for file, line in indexed:
            by_file[file].append(line)
        # each under its heading in the day's note as the import leaves it (the tree's
        # days replace the stored ones: the guarded events render it)
        notes = (
            {n.path: n.render() for n in daily_from_events(image.events, tz=tz)} if by_file else {}
        )
        for file, lines in by_file.items():
            shown = [notes[file]] if file in notes else list(notes.values())
            ops += [
                _Op(file, stage)
                for stage in self._vector_ops(eid, texts_of(lines), shown, ask=False, until=until)
            ]
        for cid, olds in by_cid.items():
            if cid in new_cids:
                continue
            for member, event in olds:
                if event.kind == HEADER_KIND or isinstance(_numbered(event), int):
                    # a line the tree no longer has
                    ops.append(_Op(_day_file(event), _zrem(timeline, member)))
                    counts["events_removed"] += 1

    def _apply_chunks(self, ops: list[_Op], progress: Progress | None) -> list[str]:
        """The ops in chunks (module docstring), in order; the files written, in the
        order they completed. A chunk that fails raises its error, its message saying
        which files landed before it and which did not."""
        total = len(ops)
        if progress is not None:
            progress(0, total)
        left = {op.file: 0 for op in ops}
        for op in ops:
            left[op.file] += 1
        landed: list[str] = []
        done = 0
        for chunk in _chunks(ops):
            plan = WritePlan()
            for op in chunk:
                op.stage(plan)
            try:
                plan.apply(self._ctx.store)
            except AcmiError as exc:
                _incomplete(exc, landed, [f for f, n in left.items() if n], done, total)
                raise
            done += len(chunk)
            for op in chunk:
                left[op.file] -= 1
                if not left[op.file]:
                    landed.append(op.file)
            if progress is not None:
                progress(done, total)
        return landed

    def migrate(
        self,
        entity: str | EntityId,
        root: str | Path,
        *,
        progress: Progress | None = None,
        strict: bool = False,
        embed_budget_s: float = EMBED_BUDGET_S,
    ) -> Imported:
        """``/memory-migrate``: the seed's tree under ``root`` imported into ACMI."""
        return self.import_snapshot(
            entity,
            read_tree(root),
            progress=progress,
            strict=strict,
            embed_budget_s=embed_budget_s,
        )


def _chunks(ops: list[_Op]) -> list[list[_Op]]:
    """Consecutive ops, at most IMPORT_CHUNK_OPS and IMPORT_CHUNK_BYTES of work a chunk (an
    op over the budget alone); a chunk ends at a file's end when the next file would not
    fit whole, so a file lands in one script where it can."""
    measured = [_measure(op) for op in ops]
    costs = [cost for cost, _ in measured]
    chunks: list[list[_Op]] = []
    chunk: list[_Op] = []
    size = args = 0
    for n, (op, (cost, op_args)) in enumerate(zip(ops, measured, strict=True)):
        starts_file = n == 0 or ops[n - 1].file != op.file
        file_cost = cost
        if starts_file:  # the whole file's cost, to keep it in one chunk where it fits
            m = n + 1
            while m < len(ops) and ops[m].file == op.file:
                file_cost += costs[m]
                m += 1
        over = (
            len(chunk) >= IMPORT_CHUNK_OPS
            or size + cost > IMPORT_CHUNK_BYTES
            or args + op_args > IMPORT_CHUNK_ARGS
        )
        if chunk and (over or (starts_file and size + file_cost > IMPORT_CHUNK_BYTES)):
            chunks.append(chunk)
            chunk, size, args = [], 0, 0
        chunk.append(op)
        size += cost
        args += op_args
    if chunk:
        chunks.append(chunk)
    return chunks


def _names(files: list[str]) -> str:
    shown = ", ".join(files[:MAX_NAMED_FILES])
    more = len(files) - MAX_NAMED_FILES
    return (shown + (f" and {more} more" if more > 0 else "")) or "none"


def _incomplete(
    exc: AcmiError, landed: list[str], pending: list[str], done: int, total: int
) -> None:
    """What an import that failed part-way committed, said in its error (which keeps its
    class, so its status): the files that landed whole, those not (or not wholly)
    written; a retry writes only what still differs."""
    note = (
        f" (import incomplete: {done} of {total} writes committed; files written: "
        f"{_names(landed)}; not written: {_names(pending)}; retrying the import writes only "
        "what still differs)"
    )
    exc.message += note
    exc.args = (exc.message, *exc.args[1:])

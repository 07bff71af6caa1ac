"""The cold layer on demand (issue 13): archive one entity now, and read its archived
events back for memory search. Shared by ``acmi memory archive`` and
``POST /v1/memory/{entity}/archive``; the scheduled hygiene job does the same per due
entity (``acmi_core.jobs.hygiene``).

:func:`archive_now` runs :func:`acmi_core.jobs.quarterly.archive_entity` for one entity: its
events older than ``retention_days`` are summarized into their quarter's archive document
and, with a destination (a sink registered for the URL's scheme), written to the quarter's
JSONL object, read back and verified, then trimmed from the live timeline. It takes the
hygiene job's archive lease first (``SET NX PX``, released by ``store/lua/hygiene.lua``): two
writers of one quarter's object would lose the lines of the first (S3 has no append), so
a run that finds the lease held is a 409 and archives nothing. Without a destination the
documents are written from Redis and nothing is trimmed; the entity's
``heartbeat.archived_through`` moves as the job moves it.

Round trips: with a destination, 1 (lease) + 1 (the oldest events) + 2 per quarter
touched (its trim script, the daily-note stamps below it; more scripts past
``quarterly.TRIM_BYTES``) + 1 (release), and the sink's 3 requests per quarter (GET, PUT,
GET): measured, 71 events over 2 quarters in 7 and 6 sink requests. Without one, 1
(heartbeat) + 3 per quarter documented (at most 4) + 1 (backlog) + 1 when
``archived_through`` moved.

:func:`archived_reader` is what ``MemoryAPI.search(archived=...)`` calls to reach the raw
archived events (one sink GET per quarter it searches, ``service.ARCHIVED_QUARTERS`` at
most); a sink that fails gives None and the search reports the quarter unread.
"""

# No `from __future__ import annotations`: on Python 3.11 a TypedDict's NotRequired
# written as a string is taken for a required key at run time.
import uuid
from collections.abc import Callable, Sequence
from typing import Final, NotRequired, TypedDict

from acmi_core.base.errors import AcmiValidationError, Conflict
from acmi_core.base.keys import MEMORY_HEARTBEAT
from acmi_core.base.model import EntityId, Event, dumps
from acmi_core.base.stored import load_object
from acmi_core.client import Acmi  # at run time: a test resolves the row's signature
from acmi_core.jobs import quarterly
from acmi_core.jobs.quarters import DAY_MS
from acmi_core.jobs.sink import Destination, SinkError, archived_events
from acmi_core.jobs.summarizers import Summarizer, build
from acmi_core.memory.slots import HEARTBEAT
from acmi_core.store.writes import FieldMode, WritePlan

LEASE_MS: Final = 5 * 60_000  # longer than an archive of MAX_EVENTS_MAX events takes
ARCHIVED_THROUGH: Final = HEARTBEAT + "archived_through"


def _int(value: object, name: str, default: int, high: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise AcmiValidationError(name, "range", f"must be an integer in 1..{high}")
    return value


class ArchivedNow(TypedDict):
    """What ``archive_now`` did (module docstring); ``notes``: why there is no sink."""

    entity: str
    archive: str | None
    retention_days: int
    cutoff_ms: int
    read: int
    archived: int
    trimmed: int
    kept: int
    documents: list[str]
    objects: list[quarterly.ArchivedObject]
    backlog: bool
    why: str
    problems: list[str]
    notes: NotRequired[list[str]]


def archive_now(
    acmi: Acmi,
    entity: str | EntityId,
    *,
    retention_days: object = None,
    max_events: object = None,
    dest: Destination | None = None,
    no_sink: str | None = None,
    summarizer: Summarizer | None = None,
) -> ArchivedNow:
    """Archive ``entity``'s events older than ``retention_days`` (default 30) now, at
    most ``max_events`` (default 1,000) of them; ``no_sink`` is why there is no
    destination when a URL was given. Returns what was done (module docstring)."""
    eid = EntityId.parse(entity)
    days = _int(
        retention_days,
        "retention_days",
        quarterly.DEFAULT_RETENTION_DAYS,
        quarterly.MAX_RETENTION_DAYS,
    )
    limit = _int(
        max_events, "max_events", quarterly.MAX_EVENTS_PER_ENTITY, quarterly.MAX_EVENTS_MAX
    )
    if summarizer is None:
        summarizer, _ = build(acmi.settings.summarizer, acmi.settings)
    cutoff = acmi.clock() - days * DAY_MS
    notes = [no_sink] if no_sink else []
    if dest is not None:
        token = f"archive-now:{uuid.uuid4().hex}"
        lease = acmi.keys.hygiene_lease()
        taken = acmi.store.execute(("SET", lease, token, "NX", "PX", LEASE_MS)) is not None
        # a retry of our own SET whose reply was lost finds the lease holding our token
        if not taken and acmi.store.execute(("GET", lease)) != token.encode():
            raise Conflict(
                "another archive (the hygiene job or a manual run) holds the archive "
                "lease: nothing archived, try again later",
                field="entity",
                rule="archive_lease",
            )
        try:
            out = quarterly.archive_entity(
                acmi, eid, cutoff_ms=cutoff, limit=limit, dest=dest, summarizer=summarizer
            )
        finally:
            quarterly.run_script(acmi, {"lease": lease}, {"mode": "release", "execution_id": token})
    else:
        beat_key = acmi.keys.slot(eid, MEMORY_HEARTBEAT)
        beat = load_object(acmi.store.execute(("GET", beat_key))) or {}
        through = beat.get(ARCHIVED_THROUGH)
        through = through if isinstance(through, int) and not isinstance(through, bool) else None
        out = quarterly.archive_entity(
            acmi,
            eid,
            cutoff_ms=cutoff,
            limit=limit,
            summarizer=summarizer,
            archived_through=through,
        )
        if out.archived_through is not None and out.archived_through != through:
            # the memory's own heartbeat-state, never the entity's signals
            plan = WritePlan()
            edit: list[tuple[FieldMode, str, str]] = [
                ("set", ARCHIVED_THROUGH, dumps(out.archived_through))
            ]
            plan.edit_object(beat_key, edit, field=MEMORY_HEARTBEAT)
            plan.apply(acmi.store)
    done: ArchivedNow = {
        "entity": str(eid),
        "archive": dest.url if dest else None,
        "retention_days": days,
        "cutoff_ms": cutoff,
        "read": out.read,
        "archived": out.archived,
        "trimmed": out.trimmed,
        "kept": out.kept,
        "documents": out.documents,
        "objects": out.objects,
        "backlog": out.backlog,
        "why": _why(out, dest, notes),
        "problems": out.problems,
    }
    if notes:
        done["notes"] = notes
    return done


def _why(out: quarterly.ArchiveOutcome, dest: Destination | None, notes: Sequence[str]) -> str:
    """Trimmed or not, and why, in one line."""
    if not out.read and not out.documents:
        return "no events older than the cutoff: nothing to archive"
    if dest is None:
        reason = notes[0] if notes else "no archive URL (--archive or ACMI_ARCHIVE_URL)"
        return f"{reason}: documents written from Redis, nothing trimmed"
    if out.problems:
        return "some quarters were not verified or changed meanwhile: those kept in Redis"
    if out.kept:
        return f"trimmed once verified; {out.kept} members that cannot be archived kept"
    more = " (more older events left: run again)" if out.backlog else ""
    return f"trimmed once each object was read back and verified{more}"


ArchivedReader = Callable[[EntityId, str], Sequence[Event] | None]


def archived_reader(acmi: Acmi, dest: Destination) -> ArchivedReader:
    """The reader ``MemoryAPI.search(archived=...)`` calls per quarter: the events archived
    in its object, oldest first, or None when the sink failed (the search goes on)."""

    def read(entity: EntityId, quarter: str) -> Sequence[Event] | None:
        try:
            return archived_events(acmi, dest, entity, quarter)
        except (
            SinkError,
            AcmiValidationError,
        ):  # the sink failed; a foreign field name
            return None

    return read


__all__ = ["LEASE_MS", "ArchivedNow", "ArchivedReader", "archive_now", "archived_reader"]

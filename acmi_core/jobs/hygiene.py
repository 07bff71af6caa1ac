"""hygiene: the seed's memory hygiene schedule (seed 002 §10, §11; DESIGN §6) as one job.

    acmi jobs run hygiene                       # by hand
    acmi invoke hygiene --event events/hygiene.scheduled.json

Per entity it runs what its heartbeat-state says is due (the signals ``heartbeat.*``,
the seed's ``heartbeat-state.json``: ``next_scheduled.weekly_review`` /
``monthly_audit`` / ``quarterly_archive``; a missing date is due), on the day of the
run's ``scheduled_time`` (UTC):

- **weekly review**: ``acmi_core.memory.service.MemoryAPI(acmi).review(entity, now_ms)``
  when that module exists in this build (imported lazily); else the review is reported
  ``pending`` and looked at again in a week.
- **monthly audit**: the seed's budgets (``acmi_core.memory.budgets``) over the entity's
  layers (hot signals, warm profile, the last 30 days of daily notes, its topics); the
  findings are recorded as one ``memory-audit`` event on its timeline when it has any
  memory file (correlationId ``memory-audit-<date>``, ts the scheduled time: a retried
  run stores the same bytes, once) and the seed's counts (``daily_notes_count`` of the
  last 30 days, ``memory_md_lines``) in its heartbeat-state. A review or audit that
  fails is reported in ``problems`` and never blocks the archive.
- **quarterly archive** (:func:`archive_entity`): events older than the retention
  (default 30 days) are summarized into the quarter's archive document (the seed's
  ``memory/archive/YYYY-QN.md``, :class:`~acmi_core.memory.ArchiveFile` as
  ``archive_to_document`` stores it) in the entity's ``keys.MEMORY_ARCHIVE`` HASH (field
  ``YYYY-QN``), and, when an archive sink is configured (``archive``: ``s3://b/prefix``),
  written raw to ``<prefix>/<tenant>/<entity>/<YYYY>-Q<N>.jsonl`` (one stored member per
  line, byte for byte) and trimmed from the live timeline once the object is verified.
  No sink: the document is written and nothing is trimmed.

Which entities: an index of when each is next due (``keys.hygiene_due``, ZSET entity -> ms),
fed from the change index (``keys.changed``, from the job's watermark, ``ZADD NX``) and
rescheduled by the job after each visit (the earliest of its three next dates). A run
reads at most ``max`` due entities: never a scan, and an idle entity costs nothing
between its due dates. An entity with no timeline, signals or profile left (deleted) is
dropped from the index, never written back to life.

Nothing is lost (the archive's order of steps, each crash point tested): read the oldest
``events`` members older than the cutoff -> per quarter, the object is read, the new
members appended (a member already in it is not added again), written, and read back:
its line count and sha256 must equal what was written -> one script
(``lua/hygiene.lua``) writes the quarter's document and ZREMs exactly those members,
only if each is still in the timeline at the score read. A crash anywhere leaves every
event in Redis, in the object, or in both; the next run appends nothing twice and trims
what is left. Concurrent runs: the archive step takes a lease (``SET NX PX``, the
execution id, released by the script) so two runs never rewrite one object at once; a
run that finds it held leaves archiving to the next run.

Round trips, for an entity archived with q quarters touched: 1 (its oldest events) + q
(trim scripts; more when a quarter's members exceed ``TRIM_BYTES``) + 1 (the signals,
the audit event and the due-index entry in one WritePlan), plus its share of one
pipeline per ``BATCH`` due entities (signals and existence); an audit adds 1-2 (profile
and recent timeline, then topics), the review what ``MemoryAPI.review`` takes (2); the
sink does 3 requests per quarter (GET, PUT, GET; 1 when nothing is new). A run adds 4-6
(job state, change page, feed, due page, lease, backlog); ``run_job`` adds 2. Measured:
1,000 events over 2 quarters archived in 3 requests; 10 entities reviewed, audited and
archived in 79; the next day's run, nothing due, 5 (whatever the number of entities).

Limits (documented, not hidden): a quarter's object is rewritten whole when a run adds to
it (S3 has no append), so a run costs O(that quarter's archived bytes) in the sink; a
member that cannot be one JSONL line or restored exactly (a raw newline, not an event,
ts not its score) is kept in Redis and counted ``events_kept``; without a sink, the
documents follow ``heartbeat.archived_through``, so an event backdated below it is not
in a document until a sink archives it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from acmi_core.base.errors import AcmiError, AcmiValidationError, StoreCommandError
from acmi_core.base.keys import MEMORY_ARCHIVE, MEMORY_STAMPS
from acmi_core.base.model import EntityId, Event, dumps
from acmi_core.base.settings import ARCHIVE_URL, ARCHIVE_URL_RULE, SUMMARIZER, SUMMARIZER_RULE
from acmi_core.base.stored import decode_event, load_object, scored
from acmi_core.entities.api import SignalsAPI, TimelineAPI
from acmi_core.jobs.runner import MAX_PER_RUN, JobRun, int_param, job_state
from acmi_core.jobs.summarizers import (
    Digest,
    Extractive,
    Summarizer,
    SummarizerError,
    Window,
    build,
    digest,
    iso,
)
from acmi_core.memory.budgets import check_snapshot
from acmi_core.memory.layers import MemorySnapshot, Quarter
from acmi_core.memory.markdown import MemoryFormatError
from acmi_core.memory.slots import (
    HEARTBEAT,
    TOPIC_LINKS,
    archive_from_document,
    daily_from_events,
    from_profile,
    from_signals,
    topic_from_profile,
)
from acmi_core.store import scripts
from acmi_core.store.base import Arg, Reply, Script
from acmi_core.store.writes import WritePlan, script_error

if TYPE_CHECKING:
    from acmi_core.client import Acmi

DAY_MS: Final = 24 * 3600 * 1000
DEFAULT_RETENTION_DAYS: Final = 30  # seed §4: "Keep 30 days of daily notes"
MAX_RETENTION_DAYS: Final = 3650
MAX_EVENTS_PER_ENTITY: Final = 1_000  # archived per entity and run; the rest next run
MAX_EVENTS_MAX: Final = 10_000
MAX_MAX: Final = 5_000  # the largest `max` (entities a run) accepted
BATCH: Final = 100  # due entities per read pipeline
TRIM_BYTES: Final = 512 * 1024  # members per trim script (Upstash takes 1 MB a request)
DOC_EVENTS: Final = 2_000  # the newest events of a quarter its document is written from
AUDIT_EVENTS: Final = 2_000  # the newest events of the last 30 days an audit renders
MAX_TOPICS: Final = 50  # topics an audit measures
MAX_QUARTERS: Final = 4  # quarters documented per entity and run without a sink
SETTLE_MS: Final = 5_000  # the newest changes wait for the next run (as rollup-cron)
DEFAULT_BUDGET_S: Final = 120.0
LEASE_MARGIN_MS: Final = 60_000
RETRY_MS: Final = 3600 * 1000  # an entity that failed is looked at again an hour later
SOURCE: Final = "system:acmi-hygiene"
TASKS: Final = ("review", "audit", "archive")

HYGIENE: Script = scripts.HYGIENE.script


# --- the archive sink -------------------------------------------------------------------------


class SinkError(Exception):
    """The sink could not read or write an object; the message names the operation and
    the error code, never data."""


class ArchiveSink(Protocol):
    """Where raw archived events go (S3 in Lambda: ``functions/hygiene.py``). ``get``
    returns the object's bytes, None when there is none; ``put`` replaces it (``sha256``
    and ``count`` describe ``body``: a sink may have its store check them on upload).
    Both raise :class:`SinkError`."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, body: bytes, *, sha256: str, count: int) -> None: ...


SinkFactory = Callable[[str], ArchiveSink]
"""Builds the sink of a location (the bucket of ``s3://bucket/prefix``); builds no
client until the first call."""

# Sinks of schemes whose SDK acmi_core does not import; functions/hygiene.py registers "s3".
SINKS: dict[str, SinkFactory] = {}


def register_sink(scheme: str, factory: SinkFactory) -> None:
    """``<scheme>://<location>/<prefix>`` archives through ``factory`` from now on."""
    SINKS[scheme] = factory


@dataclass(frozen=True)
class Destination:
    """An archive sink and the key prefix its objects go under; ``url`` for reports."""

    sink: ArchiveSink
    prefix: str
    url: str


def open_destination(url: str | None) -> tuple[Destination | None, str | None]:
    """The destination of ``url`` (None or "": no archive sink) and, when its scheme has
    no sink in this process, why not (the run then writes documents and trims nothing)."""
    if not url:
        return None, None
    match = ARCHIVE_URL.fullmatch(url)
    if match is None:
        raise AcmiValidationError("archive", "archive_url", ARCHIVE_URL_RULE)
    scheme, location, prefix = match[1], match[2], (match[3] or "").strip("/")
    factory = SINKS.get(scheme)
    if factory is None:
        return None, (
            f"{scheme}: no archive sink in this process (the hygiene Lambda function "
            "registers s3): documents written, nothing trimmed"
        )
    return Destination(factory(location), prefix, url.rstrip("/")), None


def object_key(prefix: str, tenant: str, entity: EntityId, quarter: Quarter) -> str:
    """``<prefix>/<tenant>/<entity>/<YYYY>-Q<N>.jsonl``."""
    tail = f"{tenant}/{entity}/{quarter}.jsonl"
    return f"{prefix}/{tail}" if prefix else tail


def jsonl(lines: Sequence[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def split_jsonl(body: bytes) -> list[bytes]:
    """An object's lines (the members), in order."""
    lines = body.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def archived_events(
    acmi: Acmi, dest: Destination, entity: str | EntityId, quarter: Quarter | str
) -> list[Event]:
    """The events of ``entity`` archived for ``quarter``, read back from the sink, oldest
    first (memory search reaches the cold layer through this). A line that is not an
    event (another tool's member) is left out."""
    eid = EntityId.parse(entity)
    q = quarter if isinstance(quarter, Quarter) else Quarter.parse(quarter, "quarter")
    body = dest.sink.get(object_key(dest.prefix, acmi.tenant, eid, q))
    events = []
    for line in split_jsonl(body or b""):
        decoded = decode_event(line)
        if not isinstance(decoded, str):
            events.append(decoded[0])
    events.sort(key=lambda e: e.ts)
    return events


# --- quarters and dates -----------------------------------------------------------------------


def _date(ms: int) -> dt.date:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).date()


def _ms(day: dt.date) -> int:
    return int(dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp() * 1000)


def quarter_of(ms: float) -> Quarter:
    return Quarter.of(_date(int(ms)))


def quarter_start(q: Quarter) -> dt.date:
    return dt.date(q.year, 3 * (q.number - 1) + 1, 1)


def quarter_end_ms(q: Quarter) -> int:
    """The first ms after the quarter."""
    nxt = Quarter(q.year + 1, 1) if q.number == 4 else Quarter(q.year, q.number + 1)
    return _ms(quarter_start(nxt))


def next_quarterly(today: dt.date) -> dt.date:
    """The last day of the quarter tomorrow is in (the seed's ``2026-03-31``)."""
    q = Quarter.of(today + dt.timedelta(days=1))
    return _date(quarter_end_ms(q) - DAY_MS)


def next_monthly(today: dt.date) -> dt.date:
    """The first day of next month (the seed's ``2026-02-01``)."""
    return dt.date(today.year + today.month // 12, today.month % 12 + 1, 1)


def _due(raw: object, today: dt.date) -> bool:
    if not isinstance(raw, str):
        return True
    try:
        return dt.date.fromisoformat(raw) <= today
    except ValueError:
        return True


# --- parameters -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Params:
    max: int = MAX_PER_RUN
    events: int = MAX_EVENTS_PER_ENTITY
    retention_days: int = DEFAULT_RETENTION_DAYS
    summarizer: str = "extractive"
    archive: str | None = None
    budget_s: float = DEFAULT_BUDGET_S
    tasks: tuple[str, ...] = TASKS
    force: bool = False  # every scheduled entity (at most max), every task: a run by hand


def parse_params(params: Mapping[str, Any], settings: Any) -> Params:
    """The job's parameters (the schedule's Input beside the execution id). ``archive``
    defaults to the settings' ``archive_url`` (ACMI_ARCHIVE_URL) once that exists."""
    summarizer = params.get("summarizer", settings.summarizer)
    if not isinstance(summarizer, str) or not SUMMARIZER.fullmatch(summarizer):
        raise AcmiValidationError("summarizer", "summarizer", SUMMARIZER_RULE)
    budget = params.get("budget_s", DEFAULT_BUDGET_S)
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not 0 < budget <= 900:
        raise AcmiValidationError("budget_s", "range", "must be a number in (0, 900]")
    archive = params.get("archive", settings.archive_url)
    if archive is not None and not (
        isinstance(archive, str) and (archive == "" or ARCHIVE_URL.fullmatch(archive))
    ):
        raise AcmiValidationError("archive", "archive_url", ARCHIVE_URL_RULE)
    tasks = params.get("tasks", list(TASKS))
    if (
        not isinstance(tasks, list)
        or not tasks
        or any(t not in TASKS for t in tasks)
        or len(set(tasks)) != len(tasks)
    ):
        raise AcmiValidationError("tasks", "tasks", f"must be a non-empty list of {TASKS}")
    force = params.get("force", False)
    if not isinstance(force, bool):
        raise AcmiValidationError("force", "boolean", "must be true or false")
    return Params(
        max=int_param(params, "max", MAX_PER_RUN, MAX_MAX),
        events=int_param(params, "events", MAX_EVENTS_PER_ENTITY, MAX_EVENTS_MAX),
        retention_days=int_param(
            params, "retention_days", DEFAULT_RETENTION_DAYS, MAX_RETENTION_DAYS
        ),
        summarizer=summarizer,
        archive=archive or None,
        budget_s=float(budget),
        tasks=tuple(tasks),
        force=force,
    )


# --- the archive document ---------------------------------------------------------------------


def _line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split()).lstrip("#").strip()
    return flat if len(flat) <= limit else f"{flat[: limit - 1]}…"


def _sentence(facts: Digest, total: int) -> str:
    """The extractive summary: what the quarter held, in one paragraph."""
    kinds = ", ".join(f"{n} {kind}" for kind, n in facts.kinds.items())
    who = ", ".join(facts.actors)
    text = f"{total} events from {iso(facts.first_ts)} to {iso(facts.last_ts)}: {kinds}."
    if who:
        text += f" Most active: {who}."
    if facts.closed:
        text += f" {facts.closed} items closed."
    text += f" {len(facts.open)} still open at the end." if facts.open else " Nothing left open."
    return text


def archive_document(
    entity: EntityId,
    quarter: Quarter,
    events: Sequence[Mapping[str, Any]],
    total: int,
    summarizer: Summarizer,
    *,
    until_ms: int,
    raw: str | None = None,
) -> tuple[dict[str, Any], str | None]:
    """The quarter's archive (the seed's template: Summary, Major Events, Metrics,
    Lessons Carried Forward) as ``archive_to_document`` stores it, written from the
    quarter's newest ``events`` (oldest first) of ``total``; and the summarizer's
    failure, if it failed (the extractive summary stands in)."""
    window = Window(str(entity), float(_ms(quarter_start(quarter))), until_ms, events, total)
    facts = digest(window)
    failure = None
    if isinstance(summarizer, Extractive):  # its rollup text is a list: one sentence here
        text = _sentence(facts, total)
    else:
        try:
            text = summarizer.summarize(window, facts)
        except SummarizerError as exc:
            failure = str(exc)
            text = _sentence(facts, total)
    major = [
        _line(f"{iso(item.get('ts'))} {kind} by {item['source']}: {item['summary']}")
        for kind, item in facts.latest.items()
    ]
    major += [
        _line(f"still open: {i['kind']} {i['correlationId']} by {i['source']}: {i['summary']}")
        for i in facts.open
    ]
    lessons = [
        _line(f"{iso(e.get('ts'))[:10]} — {e.get('summary', '')}")
        for e in events
        if e.get("kind") in ("lesson", "improvement", "takeaway")
    ][-20:]
    metrics = [
        f"Events: {total}"
        + (f" (the newest {len(events)} summarized)" if total > len(events) else ""),
        f"First: {iso(facts.first_ts)}; last: {iso(facts.last_ts)}",
        "Kinds: " + (", ".join(f"{k} {n}" for k, n in facts.kinds.items()) or "none"),
        "Sources: " + (", ".join(f"{s} {a['events']}" for s, a in facts.actors.items()) or "none"),
        f"Summarizer: {summarizer.name if failure is None else 'extractive'}",
    ]
    if raw is not None:
        metrics.append(_line(f"Raw events: {raw}", 1000))
    doc: dict[str, Any] = {
        "archive.summary": _line(text, 2000) or "(no events)",
        "archive.major_events": major,
        "archive.metrics": metrics,
        "archive.lessons": lessons or ["(none recorded)"],
    }
    archive_from_document(quarter, doc)  # it renders and reads back: never a broken file
    return doc, failure


# --- archiving one entity ---------------------------------------------------------------------


@dataclass
class ArchiveOutcome:
    """What :func:`archive_entity` did for one entity."""

    read: int = 0  # members older than the cutoff read
    archived: int = 0  # of them, in a verified object
    trimmed: int = 0  # removed from the live timeline
    kept: int = 0  # members that are not archivable events (a newline, not an event): kept
    documents: list[str] = field(default_factory=list)  # quarters whose document was written
    objects: list[dict[str, Any]] = field(default_factory=list)
    backlog: bool = False
    archived_through: int | None = None  # without a sink: documented up to here (ms)
    problems: list[str] = field(default_factory=list)
    llm_failures: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [], 0)}


def _pairs(reply: Reply) -> list[tuple[bytes, bytes]]:
    items = reply if isinstance(reply, list) else []
    return [
        (m, s)
        for m, s in zip(items[::2], items[1::2], strict=False)
        if isinstance(m, bytes) and isinstance(s, bytes)
    ]


def _archivable(member: bytes, score: bytes) -> dict[str, Any] | None:
    """The member's stored event when it can be a JSONL line and restored exactly (one
    line, an event whose ts is its score); else None (kept in Redis)."""
    if b"\n" in member or b"\r" in member:
        return None
    decoded = decode_event(member)
    if isinstance(decoded, str):
        return None
    event, stored = decoded
    try:
        same = float(event.ts) == float(score)
    except (TypeError, ValueError):
        return None
    return stored if same else None


def _run_script(
    acmi: Acmi, keys: dict[str, str], args: dict[str, Arg | list[Arg]]
) -> scripts.Slots:
    try:
        return scripts.HYGIENE.eval(acmi.store, keys, args, script=HYGIENE)
    except StoreCommandError as exc:
        error = script_error(exc)
        if error is exc:
            raise
        raise error from None


def _trim(
    acmi: Acmi,
    entity: EntityId,
    quarter: Quarter,
    doc: dict[str, Any],
    members: Sequence[tuple[bytes, bytes]],
) -> tuple[int, int]:
    """The document written and exactly ``members`` removed, in scripts of at most
    ``TRIM_BYTES`` of members (the document with the first). (removed, differing)."""
    keys = {
        "timeline": acmi.keys.timeline(entity),
        "archive": acmi.keys.slot(entity, MEMORY_ARCHIVE),
    }
    removed = differ = 0
    chunks: list[list[tuple[bytes, bytes]]] = [[]]
    size = 0
    for member, score in members:
        if chunks[-1] and size + len(member) > TRIM_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append((member, score))
        size += len(member)
    for n, chunk in enumerate(chunks):
        pairs: list[Arg] = []
        for member, score in chunk:
            pairs += [member, score]
        args: dict[str, Arg | list[Arg]] = {
            "mode": "trim",
            "quarter": str(quarter) if n == 0 else "",
            "doc": dumps(doc) if n == 0 else "",
            "member_count": len(chunk),
            "members": pairs,
        }
        reply = _run_script(acmi, keys, args)
        ok, count = reply["trimmed"], reply["count"]
        if ok == 1 and isinstance(count, int):
            removed += count
        elif isinstance(count, int):
            differ += count
    if removed and not differ and members:
        # the daily-note stamps (the bootstrap's index) below the newest trimmed event go
        # too. Not atomic with the trim, and need not be: the bootstrap reads only the
        # stamps of the days around now, and a stamp whose line is gone reads nothing
        newest = max(float(score) for _, score in members)
        stamps = acmi.keys.slot(entity, MEMORY_STAMPS)
        acmi.store.execute(("ZREMRANGEBYSCORE", stamps, "-inf", f"({newest!r}"))
    return removed, differ


def _stored_ts(event: Mapping[str, Any]) -> float:
    ts = event.get("ts")
    return float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else 0.0


def _object_events(lines: Sequence[bytes]) -> list[dict[str, Any]]:
    """The newest ``DOC_EVENTS`` lines' events, oldest first."""
    out = []
    for line in lines[-DOC_EVENTS:]:
        decoded = decode_event(line)
        if not isinstance(decoded, str):
            out.append(decoded[1])
    out.sort(key=_stored_ts)
    return out


def archive_entity(
    acmi: Acmi,
    entity: str | EntityId,
    *,
    cutoff_ms: int,
    limit: int = MAX_EVENTS_PER_ENTITY,
    dest: Destination | None = None,
    summarizer: Summarizer | None = None,
    archived_through: int | None = None,
) -> ArchiveOutcome:
    """Archive ``entity``'s events older than ``cutoff_ms`` (module docstring): with
    ``dest``, the oldest ``limit`` of them go to the sink and, once verified, leave the
    timeline; without, the quarters after ``archived_through`` (ms, from the last run)
    get their documents and nothing is trimmed."""
    eid = EntityId.parse(entity)
    summarizer = summarizer or Extractive()
    if dest is None:
        return _document_only(acmi, eid, cutoff_ms, limit, summarizer, archived_through)
    out = ArchiveOutcome()
    timeline = acmi.keys.timeline(eid)
    reply = acmi.store.execute(
        ("ZRANGE", timeline, "-inf", f"({cutoff_ms}", "BYSCORE", "LIMIT", 0, limit, "WITHSCORES")
    )
    page = _pairs(reply)
    out.read = len(page)
    out.backlog = len(page) >= limit
    by_quarter: dict[Quarter, list[tuple[bytes, bytes]]] = {}
    for member, score in page:
        if _archivable(member, score) is None:
            out.kept += 1
            continue
        by_quarter.setdefault(quarter_of(float(score)), []).append((member, score))
    for quarter in sorted(by_quarter):
        members = by_quarter[quarter]
        key = object_key(dest.prefix, acmi.tenant, eid, quarter)
        try:
            existing = split_jsonl(dest.sink.get(key) or b"")
            have = set(existing)
            new = [m for m, _ in members if m not in have]
            lines = existing + new  # append-only: what an earlier run wrote stays in place
            body = jsonl(lines)
            sha = hashlib.sha256(body).hexdigest()
            if new:
                dest.sink.put(key, body, sha256=sha, count=len(lines))
                back = dest.sink.get(key)
            else:  # already there (a run that stopped before its trim): read just now
                back = jsonl(existing)
        except SinkError as exc:
            out.problems.append(f"{quarter}: {exc}: nothing trimmed")
            continue
        got = split_jsonl(back or b"")
        if back is None or len(got) != len(lines) or hashlib.sha256(back).hexdigest() != sha:
            out.problems.append(
                f"{quarter}: the object read back holds {len(got)} lines "
                f"(sha256 {hashlib.sha256(back or b'').hexdigest()[:12]}), expected "
                f"{len(lines)} ({sha[:12]}): nothing trimmed"
            )
            continue
        out.archived += len(members)
        out.objects.append(
            {"quarter": str(quarter), "key": key, "count": len(lines), "sha256": sha}
        )
        doc, failure = archive_document(
            eid,
            quarter,
            _object_events(lines),
            len(lines),
            summarizer,
            until_ms=min(quarter_end_ms(quarter), cutoff_ms),
            raw=f"{dest.url}/{key.removeprefix(dest.prefix).lstrip('/')} "
            f"({len(lines)} lines, sha256 {sha})",
        )
        if failure:
            out.llm_failures += 1
        removed, differ = _trim(acmi, eid, quarter, doc, members)
        out.documents.append(str(quarter))
        out.trimmed += removed
        if differ:
            out.backlog = True
            out.problems.append(
                f"{quarter}: {differ} members changed since they were read: nothing trimmed"
            )
    return out


def _document_only(
    acmi: Acmi,
    eid: EntityId,
    cutoff_ms: int,
    limit: int,
    summarizer: Summarizer,
    archived_through: int | None,
) -> ArchiveOutcome:
    """No sink: each quarter from ``archived_through`` up to the cutoff gets its document
    from Redis (its newest ``DOC_EVENTS``, with the count); nothing is trimmed."""
    out = ArchiveOutcome(archived_through=archived_through)
    timeline = acmi.keys.timeline(eid)
    key = acmi.keys.slot(eid, MEMORY_ARCHIVE)
    low = "-inf" if archived_through is None else str(archived_through)
    for _ in range(MAX_QUARTERS):
        first = _pairs(
            acmi.store.execute(
                ("ZRANGE", timeline, low, f"({cutoff_ms}", "BYSCORE", "LIMIT", 0, 1, "WITHSCORES")
            )
        )
        if not first:
            return out
        quarter = quarter_of(float(first[0][1]))
        start, upper = _ms(quarter_start(quarter)), min(quarter_end_ms(quarter), cutoff_ms)
        newest, total = acmi.store.pipeline(
            [
                ("ZRANGE", timeline, f"({upper}", start, "BYSCORE", "REV", "LIMIT", 0, DOC_EVENTS),
                ("ZCOUNT", timeline, start, f"({upper}"),
            ]
        )
        events = []
        for member in reversed(newest if isinstance(newest, list) else []):
            decoded = decode_event(member)
            if not isinstance(decoded, str):
                events.append(decoded[1])
        doc, failure = archive_document(
            eid,
            quarter,
            events,
            total if isinstance(total, int) else len(events),
            summarizer,
            until_ms=upper,
        )
        if failure:
            out.llm_failures += 1
        acmi.store.execute(("HSET", key, str(quarter), dumps(doc)))
        out.read += len(events)
        out.documents.append(str(quarter))
        out.archived_through = upper
        low = str(upper)
        if out.read >= limit:
            break
    more = acmi.store.execute(("ZCOUNT", timeline, low, f"({cutoff_ms}"))
    out.backlog = isinstance(more, int) and more > 0
    return out


def archive_documents(acmi: Acmi, entity: str | EntityId) -> dict[str, dict[str, Any]]:
    """The entity's archive documents by quarter (what an export writes as
    ``memory/archive/YYYY-QN.md``): one HGETALL."""
    reply = acmi.store.execute(("HGETALL", acmi.keys.slot(EntityId.parse(entity), MEMORY_ARCHIVE)))
    items = reply if isinstance(reply, list) else []
    docs = {}
    for name, raw in zip(items[::2], items[1::2], strict=False):
        doc = load_object(raw)
        if isinstance(name, bytes) and doc is not None:
            docs[name.decode("utf-8", "replace")] = doc
    return dict(sorted(docs.items()))


# --- the audit and the review -----------------------------------------------------------------


def audit(acmi: Acmi, entity: EntityId, signals: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
    """The seed's budgets over the entity's layers: hot (its signals), warm (profile),
    the daily notes of the last 30 days, its topics. Returns the findings: ``files``
    measured, ``over`` (each with the seed's fix), ``unreadable`` layers,
    ``memory_md_lines``, ``daily_notes_count``."""
    profile_raw, recent = acmi.store.pipeline(
        [
            ("GET", acmi.keys.profile(entity)),
            (
                "ZRANGE",
                acmi.keys.timeline(entity),
                now_ms,
                now_ms - 30 * DAY_MS,
                "BYSCORE",
                "REV",
                "LIMIT",
                0,
                AUDIT_EVENTS,
            ),
        ]
    )
    profile = load_object(profile_raw) or {}
    unreadable: list[str] = []
    hot = warm = None
    try:
        hot = from_signals(signals)
    except (MemoryFormatError, AcmiValidationError) as exc:
        unreadable.append(f"hot: {str(exc)[:160]}")
    try:
        warm = from_profile(profile)
    except (MemoryFormatError, AcmiValidationError) as exc:
        unreadable.append(f"warm: {str(exc)[:160]}")
    events = []
    for member in reversed(recent if isinstance(recent, list) else []):
        decoded = decode_event(member)
        if not isinstance(decoded, str):
            events.append(decoded[0])
    try:
        daily = tuple(daily_from_events(events))
    except (MemoryFormatError, AcmiValidationError) as exc:
        unreadable.append(f"daily: {str(exc)[:160]}")
        daily = ()
    links = profile.get(TOPIC_LINKS)
    slugs = [
        str(link).split(":", 1)[1]
        for link in (links if isinstance(links, list) else [])[:MAX_TOPICS]
        if isinstance(link, str) and link.startswith("topic:")
    ]
    topics = []
    if slugs:
        replies = acmi.store.pipeline(
            [("GET", acmi.keys.profile(EntityId.parse(f"topic:{s}"))) for s in slugs]
        )
        for slug, raw in zip(slugs, replies, strict=True):
            try:
                topic = topic_from_profile(slug, load_object(raw) or {})
            except (MemoryFormatError, AcmiValidationError) as exc:
                unreadable.append(f"topic:{slug}: {str(exc)[:160]}")
                continue
            if topic is not None:
                topics.append(topic)
    snapshot = MemorySnapshot(active_context=hot, memory=warm, daily=daily, topics=tuple(topics))
    reports = check_snapshot(snapshot)
    warm_report = next((r for r in reports if r.layer == "warm"), None)
    return {
        "files": len(reports),
        "over": [r.to_dict() for r in reports if not r.ok][:20],
        "unreadable": unreadable,
        "memory_md_lines": warm_report.lines if warm_report else 0,
        "daily_notes_count": len(daily),
    }


def review(acmi: Acmi, entity: EntityId, now_ms: int) -> tuple[str, Any]:
    """The weekly review through ``acmi_core.memory.service`` when this build has it:
    ("done", its result) or ("pending", why)."""
    try:
        service = importlib.import_module("acmi_core.memory.service")
    except ImportError:
        return "pending", "acmi_core.memory.service is not in this build"
    api = getattr(service, "MemoryAPI", None)
    if api is None:
        return "pending", "acmi_core.memory.service has no MemoryAPI"
    return "done", api(acmi).review(str(entity), now_ms)


# --- the job ----------------------------------------------------------------------------------


@dataclass
class _Tally:
    visited: int = 0
    dropped: int = 0
    reviewed: int = 0
    review_pending: int = 0
    audited: int = 0
    over_budget: int = 0
    archived_entities: int = 0
    events_read: int = 0
    events_archived: int = 0
    events_trimmed: int = 0
    events_kept: int = 0
    documents: int = 0
    llm_failures: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _heartbeat(signals: Mapping[str, Any]) -> dict[str, Any]:
    return {k[len(HEARTBEAT) :]: v for k, v in signals.items() if k.startswith(HEARTBEAT)}


def run(acmi: Acmi, run: JobRun) -> dict[str, Any]:
    """The scheduled job (module docstring)."""
    params = parse_params(run.params, acmi.settings)
    summarizer, unavailable = build(params.summarizer, acmi.settings)
    dest, no_sink = open_destination(params.archive)
    result = hygiene(acmi, run, params, summarizer=summarizer, dest=dest)
    notes = [n for n in (unavailable, no_sink) if n]
    if notes:
        result["notes"] = notes + result.get("notes", [])
    return result


def _changed_page(
    acmi: Acmi, low: int | None, skip: int, until: int, limit: int
) -> list[tuple[str, int]]:
    reply = acmi.store.execute(
        (
            "ZRANGE",
            acmi.keys.changed(),
            "-inf" if low is None else low,
            until,
            "BYSCORE",
            "LIMIT",
            skip,
            limit,
            "WITHSCORES",
        )
    )
    return scored(reply, keep_unreadable=True)


@dataclass
class _Ctx:
    """What every entity of one run shares."""

    acmi: Acmi
    run: JobRun
    params: Params
    summarizer: Summarizer
    dest: Destination | None
    today: dt.date
    cutoff: int
    started: float
    tally: _Tally = field(default_factory=_Tally)
    lease: bool | None = None  # None: not tried yet this run

    def out_of_time(self) -> bool:
        return time.monotonic() - self.started > self.params.budget_s


def hygiene(
    acmi: Acmi,
    run: JobRun,
    params: Params,
    *,
    summarizer: Summarizer | None = None,
    dest: Destination | None = None,
) -> dict[str, Any]:
    """One run with ``summarizer`` and ``dest`` (module docstring)."""
    scheduled = run.scheduled_ms
    ctx = _Ctx(
        acmi,
        run,
        params,
        summarizer or Extractive(),
        dest,
        _date(scheduled),
        scheduled - params.retention_days * DAY_MS,
        time.monotonic(),
    )
    tally = ctx.tally
    state = job_state(acmi, run.job)
    mark, skip = state.get("watermark"), state.get("skip", 0)
    low = mark if isinstance(mark, int) and not isinstance(mark, bool) else None
    skip = skip if isinstance(skip, int) and skip >= 0 and low is not None else 0
    until = acmi.clock() - SETTLE_MS

    # 1. entities whose timeline changed since the watermark join the due index (NX: one
    # already scheduled keeps its date)
    page = _changed_page(acmi, low, skip, until, params.max)
    fresh = [m for m, _ in page if m]
    if fresh:
        feed: list[Arg] = ["ZADD", acmi.keys.hygiene_due(), "NX"]
        for member in fresh:
            feed += [scheduled, member]
        acmi.store.execute(feed)
    if len(page) < params.max:
        watermark, skip = until, 0
        changed_backlog = 0
    else:
        last = page[-1][1]
        ties = sum(1 for _, score in page if score == last)
        skip = skip + ties if last == low else ties
        watermark = last
        counted = acmi.store.execute(("ZCOUNT", acmi.keys.changed(), watermark, until))
        changed_backlog = max(0, (counted if isinstance(counted, int) else 0) - skip)

    # 2. the entities due by the scheduled time, the longest due first
    due = entities_due(acmi, "+inf" if params.force else scheduled, params.max)
    try:
        for start in range(0, len(due), BATCH):
            if ctx.out_of_time():
                tally.notes.append(f"stopped after {params.budget_s:g} s: the rest is backlog")
                break
            _batch(ctx, due[start : start + BATCH])
    finally:
        if ctx.lease:
            _run_script(
                acmi,
                {"lease": acmi.keys.hygiene_lease()},
                {"mode": "release", "execution_id": run.execution_id},
            )
    left = acmi.store.execute(("ZCOUNT", acmi.keys.hygiene_due(), "-inf", scheduled))
    result: dict[str, Any] = {
        **{k: v for k, v in tally.__dict__.items() if k not in ("problems", "notes")},
        "summarizer": ctx.summarizer.name,
        "archive": dest.url if dest else None,
        "cutoff_ms": ctx.cutoff,
        "watermark": watermark,
        "skip": skip,
        "backlog": changed_backlog + (left if isinstance(left, int) else 0),
        "problems": tally.problems[:20],
    }
    if tally.notes:
        result["notes"] = tally.notes
    return result


def _batch(ctx: _Ctx, due: Sequence[tuple[str, int]]) -> None:
    """One batch of due entities: their signals and existence in one pipeline, then each
    entity's tasks."""
    acmi, tally = ctx.acmi, ctx.tally
    entities: list[EntityId] = []
    for member, _ in due:
        try:
            entities.append(EntityId.parse(member))
        except AcmiValidationError:
            acmi.store.execute(("ZREM", acmi.keys.hygiene_due(), member))
            tally.problems.append(f"{member[:80]!r}: not an entity id, dropped from the index")
    commands: list[Sequence[Arg]] = []
    for eid in entities:
        commands += [
            ("GET", acmi.keys.signals(eid)),
            ("EXISTS", acmi.keys.timeline(eid), acmi.keys.profile(eid)),
        ]
    replies = acmi.store.pipeline(commands) if commands else []
    retry_at = ctx.run.scheduled_ms + RETRY_MS
    for n, eid in enumerate(entities):
        if ctx.out_of_time():
            break
        raw, exists = replies[2 * n], replies[2 * n + 1]
        if raw is None and exists == 0:  # deleted: never written back to life
            acmi.store.execute(("ZREM", acmi.keys.hygiene_due(), str(eid)))
            tally.dropped += 1
            continue
        signals = load_object(raw) if isinstance(raw, bytes) else {}
        if signals is None:
            tally.problems.append(f"{eid}: signals are not a JSON object: skipped")
            acmi.store.execute(("ZADD", acmi.keys.hygiene_due(), retry_at, str(eid)))
            continue
        try:
            _entity(ctx, eid, signals)
        except (AcmiError, SinkError, MemoryFormatError) as exc:
            tally.problems.append(f"{eid}: {str(exc)[:200]}")
            acmi.store.execute(("ZADD", acmi.keys.hygiene_due(), retry_at, str(eid)))


def _lease(ctx: _Ctx) -> bool:
    """The archive lease for this run (once a run): SET NX PX, as long as the run may take."""
    acmi, run = ctx.acmi, ctx.run
    ttl = int(ctx.params.budget_s * 1000) + LEASE_MARGIN_MS
    reply = acmi.store.execute(
        ("SET", acmi.keys.hygiene_lease(), run.execution_id, "NX", "PX", ttl)
    )
    if reply is not None:
        return True
    held = acmi.store.execute(("GET", acmi.keys.hygiene_lease()))
    return held == run.execution_id.encode()  # a retry of the run that holds it


def _entity(ctx: _Ctx, eid: EntityId, signals: Mapping[str, Any]) -> None:
    """One entity's due tasks, then its heartbeat-state, audit event and next due date
    in one WritePlan."""
    params, today = ctx.params, ctx.today
    ctx.tally.visited += 1
    beat = _heartbeat(signals)
    raw_next = beat.get("next_scheduled")
    schedule = dict(raw_next) if isinstance(raw_next, dict) else {}
    updates: dict[str, Any] = {}
    plan = WritePlan()
    again = False  # due again next run (an archive backlog, the lease held elsewhere)
    if "review" in params.tasks and (params.force or _due(schedule.get("weekly_review"), today)):
        _review_step(ctx, eid, updates)
        schedule["weekly_review"] = (today + dt.timedelta(days=7)).isoformat()
    if "audit" in params.tasks and (params.force or _due(schedule.get("monthly_audit"), today)):
        _audit_step(ctx, eid, signals, updates, plan)
        schedule["monthly_audit"] = next_monthly(today).isoformat()
    archive_due = params.force or beat.get("archive_backlog") is True
    if "archive" in params.tasks and (
        archive_due or _due(schedule.get("quarterly_archive"), today)
    ):
        if _archive_step(ctx, eid, beat, updates):
            schedule["quarterly_archive"] = next_quarterly(today).isoformat()
        else:
            again = True
    updates["next_scheduled"] = schedule
    SignalsAPI(ctx.acmi.context, plan).update(eid, {HEARTBEAT + k: v for k, v in updates.items()})
    scheduled = ctx.run.scheduled_ms
    dates = [_ms(dt.date.fromisoformat(v)) for v in schedule.values() if _is_iso(v)]
    next_due = scheduled + 1 if again else min(dates, default=scheduled + DAY_MS)
    plan.zset(ctx.acmi.keys.hygiene_due(), max(next_due, scheduled + 1), str(eid))
    plan.apply(ctx.acmi.store)


def _note(ctx: _Ctx, note: str) -> None:
    if note not in ctx.tally.notes:
        ctx.tally.notes.append(note)


def _review_step(ctx: _Ctx, eid: EntityId, updates: dict[str, Any]) -> None:
    try:
        status, detail = review(ctx.acmi, eid, ctx.run.scheduled_ms)
    except AcmiError as exc:  # e.g. warm memory over budget: it must not block the archive
        ctx.tally.problems.append(f"{eid}: review: {exc.message[:160]}")
        return
    if status == "done":
        ctx.tally.reviewed += 1
        updates["last_memory_review"] = ctx.today.isoformat()
    else:  # looked at again in a week, not claimed as done
        ctx.tally.review_pending += 1
        _note(ctx, f"weekly review pending: {detail}")


def _audit_step(
    ctx: _Ctx,
    eid: EntityId,
    signals: Mapping[str, Any],
    updates: dict[str, Any],
    plan: WritePlan,
) -> None:
    """The findings as one ``memory-audit`` event (an exact duplicate is stored once, so
    a retried run records it once) and the seed's counts."""
    findings = audit(ctx.acmi, eid, signals, ctx.run.scheduled_ms)
    ctx.tally.audited += 1
    ctx.tally.over_budget += 1 if findings["over"] else 0
    day = ctx.today.isoformat()
    summary = (
        f"Memory audit {day}: {len(findings['over'])} of {findings['files']} files over budget"
    )
    if findings["unreadable"]:
        summary += f", {len(findings['unreadable'])} unreadable"
    event = {
        "ts": ctx.run.scheduled_ms,
        "source": SOURCE,
        "kind": "memory-audit",
        "correlationId": f"memory-audit-{day}",
        "summary": summary,
        "payload": findings,
    }
    if findings["files"] or findings["unreadable"]:  # an entity with no memory: no noise
        TimelineAPI(ctx.acmi.context, plan).extend(eid, [event])
    updates["last_audit"] = day
    updates["memory_md_lines"] = findings["memory_md_lines"]
    updates["daily_notes_count"] = findings["daily_notes_count"]


def _archive_step(
    ctx: _Ctx, eid: EntityId, beat: Mapping[str, Any], updates: dict[str, Any]
) -> bool:
    """The archive of one entity; True when it is complete (no backlog, no problem)."""
    if ctx.dest is not None and ctx.lease is None:
        ctx.lease = _lease(ctx)
    if ctx.dest is not None and not ctx.lease:
        _note(ctx, "archive: another run holds the lease; the next run archives")
        return False
    through = beat.get("archived_through")
    out = archive_entity(
        ctx.acmi,
        eid,
        cutoff_ms=ctx.cutoff,
        limit=ctx.params.events,
        dest=ctx.dest,
        summarizer=ctx.summarizer,
        archived_through=through if isinstance(through, int) else None,
    )
    tally = ctx.tally
    tally.archived_entities += 1
    tally.events_read += out.read
    tally.events_archived += out.archived
    tally.events_trimmed += out.trimmed
    tally.events_kept += out.kept
    tally.documents += len(out.documents)
    tally.llm_failures += out.llm_failures
    tally.problems += [f"{eid}: {p}" for p in out.problems]
    if out.archived_through is not None:
        updates["archived_through"] = out.archived_through
    done = not (out.backlog or out.problems)
    updates["archive_backlog"] = not done
    if done:
        updates["last_archive"] = ctx.today.isoformat()
    return done


def _is_iso(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def entities_due(acmi: Acmi, until_ms: int | str, limit: int = 100) -> list[tuple[str, int]]:
    """The entities whose hygiene is due by ``until_ms`` (``"+inf"``: every one, what a
    ``force`` run visits), soonest first, with when (for ``acmi jobs status`` and
    ``memory status``): one ZRANGE."""
    reply = acmi.store.execute(
        (
            "ZRANGE",
            acmi.keys.hygiene_due(),
            "-inf",
            until_ms,
            "BYSCORE",
            "LIMIT",
            0,
            limit,
            "WITHSCORES",
        )
    )
    return scored(reply)


__all__ = [
    "SINKS",
    "ArchiveOutcome",
    "ArchiveSink",
    "Destination",
    "Params",
    "SinkError",
    "SinkFactory",
    "archive_document",
    "archive_documents",
    "archive_entity",
    "archived_events",
    "audit",
    "entities_due",
    "hygiene",
    "object_key",
    "open_destination",
    "parse_params",
    "register_sink",
    "review",
    "run",
]

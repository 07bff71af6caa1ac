"""hygiene: the seed's memory hygiene schedule (seed 002 §10, §11; DESIGN §6) as one job.

    acmi jobs run hygiene                       # by hand
    acmi invoke hygiene --event events/hygiene.scheduled.json

Per entity it runs what its heartbeat-state says is due (its ``memory:heartbeat`` slot,
the seed's ``heartbeat-state.json``: ``next_scheduled.weekly_review`` /
``monthly_audit`` / ``quarterly_archive``; a missing date is due), on the day of the
run's ``scheduled_time`` (UTC):

- **weekly review**: ``acmi_core.memory.service.MemoryAPI(acmi.context).review(entity, now_ms)``
  when that module exists in this build (imported lazily); else the review is reported
  ``pending`` and looked at again in a week.
- **monthly audit** (:func:`acmi_core.jobs.audit.audit`): the seed's budgets
  (``acmi_core.memory.budgets``) over the entity's layers (its hot and warm slots, the
  last 30 days of daily notes, its topics); the findings are recorded as one
  ``memory-audit`` event on its timeline when it has any memory file (correlationId
  ``memory-audit-<date>``, ts the scheduled time: a retried run stores the same bytes,
  once) and the seed's counts (``daily_notes_count`` of the last 30 days,
  ``memory_md_lines``) in its heartbeat-state. A review or audit that fails is reported
  in ``problems`` and never blocks the archive.
- **quarterly archive** (:func:`acmi_core.jobs.quarterly.archive_entity`): events older
  than the retention (default 30 days) are summarized into the quarter's archive
  document (the seed's ``memory/archive/YYYY-QN.md``,
  :class:`~acmi_core.memory.ArchiveFile` as ``archive_to_document`` stores it) in the
  entity's ``keys.MEMORY_ARCHIVE`` HASH (field ``YYYY-QN``), and, when an archive sink
  is configured (``archive``: ``s3://b/prefix``; :mod:`acmi_core.jobs.sink`), written
  raw to ``<prefix>/<tenant>/<entity>/<YYYY>-Q<N>.jsonl`` (one stored member per line,
  byte for byte) and trimmed from the live timeline once the object is verified. No
  sink: the document is written and nothing is trimmed.
- **vectors** (every visit, after the others: :mod:`acmi_core.memory.vectors`): the
  vectors of ``memory:vectors`` that no current line of the entity needs (a line
  forgotten, replaced, pruned or archived; another provider's) deleted in bounded chunks;
  ``vectors_dropped`` counts them, ``vectors_busy`` the entities left for the next visit
  (a vector written meanwhile, or the chunk cap).

Then, once per tenant and run, **retention** (:mod:`acmi_core.jobs.retention`): the
coordination thread and the closed HITL records trimmed by the settings' policy, the thread
archived to the sink first when there is one.

Which entities: an index of when each is next due (``keys.hygiene_due``, ZSET entity -> ms),
fed from the memory index (``keys.memory_index``: the entities whose memory changed, kept
by the memory writes; from the job's watermark, ``ZADD NX``) and rescheduled by the job
after each visit (the earliest of its three next dates). So only entities that have
memory are visited: a webhook entity (``inbox:sales``, ``deal:...``) never is, and gets
nothing written. A run reads at most ``max`` due entities: never a scan, and an idle
entity costs nothing between its due dates. An entity with no timeline and no memory
slot left (deleted) is dropped from the index, never written back to life. Its
bookkeeping (``next_scheduled``, ``last_audit``, ``archived_through``, ...) goes into its
own ``memory:heartbeat`` slot, never into the entity's signals.

Nothing is lost, and two runs never rewrite one object at once: the archive's order of
steps and its lease are :mod:`acmi_core.jobs.quarterly`'s.

Round trips, for an entity archived with q quarters touched: 1 (its oldest events) + q
(trim scripts; more when a quarter's members exceed ``TRIM_BYTES``) + 1 (the heartbeat,
the audit event and the due-index entry in one WritePlan), plus its share of one
pipeline per ``BATCH`` due entities (heartbeat and existence); an audit adds 1-2 (hot,
warm and recent timeline, then topics), the review what ``MemoryAPI.review`` takes (2); the
sink does 3 requests per quarter (GET, PUT, GET; 1 when nothing is new). A run adds 4-6
(job state, change page, feed, due page, lease, backlog) and 1 for retention when there is
nothing to trim (one pipeline); ``run_job`` adds 2. Measured:
1,000 events over 2 quarters archived in 3 requests; 10 entities reviewed, audited and
archived in 79; the next day's run, nothing due, 5 (whatever the number of entities).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiError, AcmiValidationError
from acmi_core.base.keys import MEMORY_HEARTBEAT, MEMORY_HOT, MEMORY_WARM
from acmi_core.base.model import EntityId, dumps
from acmi_core.base.settings import ARCHIVE_URL, ARCHIVE_URL_RULE, SUMMARIZER, SUMMARIZER_RULE
from acmi_core.base.stored import load_object, scored
from acmi_core.entities.api import TimelineAPI
from acmi_core.jobs.audit import audit, review
from acmi_core.jobs.quarterly import (
    DEFAULT_RETENTION_DAYS,
    MAX_EVENTS_MAX,
    MAX_EVENTS_PER_ENTITY,
    MAX_RETENTION_DAYS,
    archive_entity,
    run_script,
)
from acmi_core.jobs.quarters import DAY_MS, day_of, day_start_ms, next_monthly, next_quarterly
from acmi_core.jobs.retention import Policy, Retained, retain
from acmi_core.jobs.runner import MAX_PER_RUN, JobRun, int_param, job_state
from acmi_core.jobs.sink import Destination, SinkError, open_destination
from acmi_core.jobs.summarizers import Extractive, Summarizer, build
from acmi_core.memory.markdown import MemoryFormatError
from acmi_core.memory.slots import HEARTBEAT
from acmi_core.store.base import Arg, Reply
from acmi_core.store.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.client import Acmi

MAX_MAX: Final = 5_000  # the largest `max` (entities a run) accepted
BATCH: Final = 100  # due entities per read pipeline
SETTLE_MS: Final = 5_000  # the newest changes wait for the next run (as rollup-cron)
DEFAULT_BUDGET_S: Final = 120.0
LEASE_MARGIN_MS: Final = 60_000
RETRY_MS: Final = 3600 * 1000  # an entity that failed is looked at again an hour later
SOURCE: Final = "system:acmi-hygiene"
FEED_MEMBERS: Final = 1_000  # entities one ZADD of the due index adds
TASKS: Final = ("review", "audit", "archive", "vectors")


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
    vectors_dropped: int = 0
    vectors_busy: int = 0
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


def _by_score(
    acmi: Acmi, key: str, low: int | str, high: int | str, skip: int, limit: int
) -> Reply:
    """One page of a ZSET index by score, with the scores."""
    command = ("ZRANGE", key, low, high, "BYSCORE", "LIMIT", skip, limit, "WITHSCORES")
    return acmi.store.execute(command)


def _changed_page(
    acmi: Acmi, low: int | None, skip: int, until: int, limit: int
) -> list[tuple[str, int]]:
    reply = _by_score(
        acmi, acmi.keys.memory_index(), "-inf" if low is None else low, until, skip, limit
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
        day_of(scheduled),
        scheduled - params.retention_days * DAY_MS,
        time.monotonic(),
    )
    tally = ctx.tally
    state = job_state(acmi, run.job)
    mark, skip = state.get("watermark"), state.get("skip", 0)
    low = mark if isinstance(mark, int) and not isinstance(mark, bool) else None
    skip = skip if isinstance(skip, int) and skip >= 0 and low is not None else 0
    until = acmi.clock() - SETTLE_MS

    # 1. entities whose memory changed since the watermark join the due index (NX: one
    # already scheduled keeps its date)
    page = _changed_page(acmi, low, skip, until, params.max)
    fresh = [m for m, _ in page if m]
    # a ZADD of FEED_MEMBERS at most: two arguments a member, so max=5,000 would send
    # 10,003 arguments, over a request's MAX_REQUEST_ARGS
    for start in range(0, len(fresh), FEED_MEMBERS):
        feed: list[Arg] = ["ZADD", acmi.keys.hygiene_due(), "NX"]
        for member in fresh[start : start + FEED_MEMBERS]:
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
        counted = acmi.store.execute(("ZCOUNT", acmi.keys.memory_index(), watermark, until))
        changed_backlog = max(0, (counted if isinstance(counted, int) else 0) - skip)

    # 2. the entities due by the scheduled time, the longest due first
    due = entities_due(acmi, "+inf" if params.force else scheduled, params.max)
    try:
        for start in range(0, len(due), BATCH):
            if ctx.out_of_time():
                tally.notes.append(f"stopped after {params.budget_s:g} s: the rest is backlog")
                break
            _batch(ctx, due[start : start + BATCH])
        # 3. the tenant's keys that grow without bound, by the retention policy

        def take_lease() -> bool:
            if ctx.lease is None:
                ctx.lease = _lease(ctx)
            return ctx.lease

        # the coordination thread and HITL records are bucket 0's: its run trims them
        retained = (
            retain(
                acmi,
                Policy.of(acmi.settings),
                scheduled,
                dest=dest,
                hitl_cursor=state.get("hitl_cursor"),
                take_lease=take_lease,
            )
            if acmi.keys.bucket == 0
            else Retained()
        )
    finally:
        if ctx.lease:
            run_script(
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
        "problems": (tally.problems + retained.problems)[:20],
        "retention": {k: v for k, v in retained.to_dict().items() if k != "problems"},
        "hitl_cursor": retained.hitl_cursor,
    }
    if tally.notes:
        result["notes"] = tally.notes
    return result


def _batch(ctx: _Ctx, due: Sequence[tuple[str, int]]) -> None:
    """One batch of due entities: their heartbeat-state and existence in one pipeline, then
    each entity's tasks."""
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
            ("GET", acmi.keys.slot(eid, MEMORY_HEARTBEAT)),
            (
                "EXISTS",
                acmi.keys.timeline(eid),
                acmi.keys.slot(eid, MEMORY_HOT),
                acmi.keys.slot(eid, MEMORY_WARM),
            ),
            ("ZSCORE", acmi.keys.memory_index(), str(eid)),
        ]
    replies = acmi.store.pipeline(commands) if commands else []
    retry_at = ctx.run.scheduled_ms + RETRY_MS
    for n, eid in enumerate(entities):
        if ctx.out_of_time():
            break
        raw, exists, has_memory = replies[3 * n], replies[3 * n + 1], replies[3 * n + 2]
        # deleted: never written back to life; or no memory at all (scheduled by an older
        # job, which visited every changed entity: a webhook entity gets nothing written)
        if (raw is None and exists == 0) or has_memory is None:
            acmi.store.execute(("ZREM", acmi.keys.hygiene_due(), str(eid)))
            tally.dropped += 1
            continue
        signals = load_object(raw) if isinstance(raw, bytes) else {}
        if signals is None:
            tally.problems.append(f"{eid}: memory:heartbeat is not a JSON object: skipped")
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
    if "vectors" in params.tasks:  # after the steps that remove lines
        _vectors_step(ctx, eid)
    updates["next_scheduled"] = schedule
    # the memory's own slot, not the memory index: the job's bookkeeping is no change of
    # the entity's memory (it would feed the entity back to the job every run)
    fields: list[tuple[Any, str, str]] = [
        ("set", HEARTBEAT + k, dumps(v, HEARTBEAT + k)) for k, v in updates.items()
    ]
    plan.edit_object(ctx.acmi.keys.slot(eid, MEMORY_HEARTBEAT), fields, field=MEMORY_HEARTBEAT)
    scheduled = ctx.run.scheduled_ms
    dates = [day_start_ms(dt.date.fromisoformat(v)) for v in schedule.values() if _is_iso(v)]
    next_due = scheduled + 1 if again else min(dates, default=scheduled + DAY_MS)
    plan.zset(ctx.acmi.keys.hygiene_due(), max(next_due, scheduled + 1), str(eid))
    plan.apply(ctx.acmi.store)


def _note(ctx: _Ctx, note: str) -> None:
    if note not in ctx.tally.notes:
        ctx.tally.notes.append(note)


def _vectors_step(ctx: _Ctx, eid: EntityId) -> None:
    """The vectors no current line of the entity needs, deleted (memory/vectors.py);
    a vector written meanwhile keeps the rest for the next visit."""
    try:
        done = ctx.acmi.memory.prune_vectors(eid)
    except AcmiError as exc:
        ctx.tally.problems.append(f"{eid}: vectors: {exc.message[:160]}")
        return
    ctx.tally.vectors_dropped += done["dropped"]
    if done.get("busy") or done["more"]:
        ctx.tally.vectors_busy += 1


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
    findings = audit(ctx.acmi, eid, ctx.run.scheduled_ms)
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
    reply = _by_score(acmi, acmi.keys.hygiene_due(), "-inf", until_ms, 0, limit)
    return scored(reply)

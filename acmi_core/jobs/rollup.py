"""rollup-cron: each entity whose timeline changed gets a fresh ``rollup:latest``.

    acmi jobs run rollup-cron                  # by hand
    acmi invoke rollup-cron --event events/rollup-cron.scheduled.json

A run visits the entities of the tenant's change index (``keys.changed``) changed after
the watermark of the last run, oldest change first, at most ``max`` of them
(``MAX_PER_RUN``); the rest is the ``backlog`` of the next run. For each it reads the
events in (its last rollup's ``until_ts``, now] (the newest ``events`` of them, at most
``MAX_EVENTS_PER_ENTITY``) and writes, under ``<entity>:rollup:latest`` (any category;
the reference reads it for agents)::

    {"ts", "summary", "since_ts", "until_ts", "event_count", "window_events",
     "summarizer", "kinds": {kind: n}, "open": [...], "closed", "actors": {...},
     "latest": {kind: {...}}, "execution_id"}

``ts`` and ``summary`` are the reference's fields (its CLI shows them). An empty window
writes nothing (a good rollup is never replaced by nothing), so an entity whose timeline
is gone (deleted) gets no key. A rollup another tool wrote without ``until_ts`` is taken
to cover up to its ``ts``.

Round trips, for ``n`` entities visited: 1 (the job state) + 1 (the change index) +
3 per batch of ``BATCH`` entities (the rollups read in one pipeline, then the windows
they start from in a second, then one WritePlan of the batch's rollups, none when no
window had events; a plan is also cut at ``MAX_PLAN_BYTES``) + 1 when a backlog is
left (ZCOUNT) + 1 when the last run stopped inside a group of changes of the same
millisecond (ZRANK). ``run_job`` adds 2 (the execution record read and written). So
at most ``4 + 3 * ceil(n / BATCH)`` requests, and ``4 + 3n + plans`` Redis commands:
they grow with ``n``, never with the tenant's entities. Each entity costs O(log N +
events read) in Redis; the write is one run of apply.lua per plan (<= BATCH SETs).

The watermark moves only over what was done: with a backlog it stops at the last change
visited; when the next change has the same score (millisecond) it also keeps that
entity id (``after``), so the next run resumes inside the group (Redis orders equal
scores by member): nothing is skipped, and an entity visited twice is rewritten the
same way. Changes and events of the last ``SETTLE_MS`` wait for the next run (a writer
whose clock runs behind ours is not missed). The work also stops, between batches, when
the run has taken ``budget_s``.

Limits (documented, not hidden): a window is chosen by event ``ts``. An event appended
later with a ``ts`` at or before its entity's last ``until_ts`` (a backdated webhook) is
in the timeline but in no rollup window; an entity deleted while a run is between its
read and its write can get a rollup key (the next ``delete`` removes it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError, StoreCommandError
from acmi_core.base.keys import ROLLUP_LATEST
from acmi_core.base.model import EntityId, dumps
from acmi_core.base.settings import SUMMARIZER, SUMMARIZER_RULE
from acmi_core.base.stored import decode_event, load_object
from acmi_core.jobs.foreign import NewestRead, read_pipeline
from acmi_core.jobs.runner import MAX_PER_RUN, JobRun, changed_since, int_param, job_state
from acmi_core.jobs.summarizers import (
    Digest,
    Extractive,
    Summarizer,
    SummarizerError,
    Window,
    build,
    digest,
)
from acmi_core.store.base import Command, Reply
from acmi_core.store.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.client import Acmi

BATCH: Final = 50  # entities per read pipeline and per WritePlan
MAX_PLAN_BYTES: Final = 512 * 1024  # a plan is applied early beyond this (Upstash: 1 MB)
MAX_EVENTS_PER_ENTITY: Final = 500  # events read per entity and run (the newest)
MAX_MAX: Final = 5_000  # the largest `max` a run accepts
SETTLE_MS: Final = 5_000  # the newest changes wait for the next run
DEFAULT_BUDGET_S: Final = 120.0  # no new batch is started after this
MAX_LLM_FAILURES: Final = 3  # then the rest of the run is extractive


@dataclass(frozen=True)
class Params:
    max: int
    events: int
    summarizer: str
    budget_s: float


def parse_params(params: Mapping[str, Any], default_summarizer: str) -> Params:
    """The job's parameters (the schedule's Input beside the execution id)."""
    summarizer = params.get("summarizer", default_summarizer)
    if not isinstance(summarizer, str) or not SUMMARIZER.fullmatch(summarizer):
        raise AcmiValidationError("summarizer", "summarizer", SUMMARIZER_RULE)
    budget = params.get("budget_s", DEFAULT_BUDGET_S)
    if (
        isinstance(budget, bool)
        or not isinstance(budget, int | float)
        or not 0 < budget <= 900  # Lambda's longest timeout
    ):
        raise AcmiValidationError("budget_s", "range", "must be a number in (0, 900]")
    return Params(
        max=int_param(params, "max", MAX_PER_RUN, MAX_MAX),
        events=int_param(params, "events", MAX_EVENTS_PER_ENTITY, MAX_EVENTS_PER_ENTITY),
        summarizer=summarizer,
        budget_s=float(budget),
    )


def run(acmi: Acmi, run: JobRun) -> dict[str, Any]:
    """The scheduled job: the summarizer from the ``summarizer`` parameter or
    ``ACMI_SUMMARIZER`` (extractive when its API key is not set, or no factory of its
    provider is registered here: the result says so)."""
    params = parse_params(run.params, acmi.settings.summarizer)
    summarizer, unavailable = build(params.summarizer, acmi.settings)
    return roll(acmi, run, summarizer, params, unavailable=unavailable)


@dataclass
class _Tally:
    written: int = 0
    empty: int = 0
    events: int = 0
    problems: int = 0
    llm_calls: int = 0
    llm_failures: int = 0
    fallback: str | None = None


def roll(
    acmi: Acmi,
    run: JobRun,
    summarizer: Summarizer,
    params: Params,
    *,
    unavailable: str | None = None,
) -> dict[str, Any]:
    """One run with ``summarizer`` (module docstring)."""
    started = acmi.clock()
    until = started - SETTLE_MS
    state = job_state(acmi, run.job)
    watermark = _int(state.get("watermark"), 0)
    stated = state.get("after")
    after = stated if isinstance(stated, str) else None
    tally = _Tally(fallback=unavailable)
    items: list[tuple[str, int]] = []
    if watermark < until:
        if after is None:
            items = changed_since(acmi, watermark, until, params.max + 1)
        else:
            items = _resume(acmi, watermark, after, until, params.max + 1)
    todo = items[: params.max]
    done = 0
    for start in range(0, len(todo), BATCH):
        if start and acmi.clock() - started >= params.budget_s * 1000:
            break
        batch = todo[start : start + BATCH]
        _roll_batch(acmi, run, [entity for entity, _ in batch], until, summarizer, params, tally)
        done += len(batch)

    if done == len(items):  # everything changed up to `until` was visited
        new_mark, new_after = max(watermark, until), None
    elif done == 0:
        new_mark, new_after = watermark, after
    else:
        (last, last_score), (_, next_score) = items[done - 1], items[done]
        new_mark = last_score
        new_after = last if next_score == last_score else None
    backlog = 0
    if done < len(items):
        # inside a group of equal scores: count the group, less what this run visited
        # of it (exact unless earlier runs visited some of the same group too)
        low = str(new_mark) if new_after is not None else f"({new_mark}"
        count = acmi.store.execute(("ZCOUNT", acmi.keys.changed(), low, until))
        at_mark = sum(1 for _, score in items[:done] if score == new_mark) if new_after else 0
        backlog = max(0, (count if isinstance(count, int) else 0) - at_mark)
    result: dict[str, Any] = {
        "summarizer": summarizer.name,
        "visited": done,
        "written": tally.written,
        "empty": tally.empty,
        "events": tally.events,
        "problems": tally.problems,
        "watermark": new_mark,
        "after": new_after,
        "backlog": backlog,
    }
    if tally.llm_calls:
        result["llm_calls"] = tally.llm_calls
        result["llm_failures"] = tally.llm_failures
    if tally.fallback is not None:
        result["fallback"] = f"extractive used instead: {tally.fallback}"
    return result


def _int(value: object, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def _resume(acmi: Acmi, mark: int, after: str, until: int, limit: int) -> list[tuple[str, int]]:
    """The changes after (``mark``, ``after``): inside the group of changes at score
    ``mark``, past the entity id ``after`` (Redis orders equal scores by member). Two
    requests: where ``after`` stands, then the range from there. If ``after`` moved
    since (changed again), the group is visited from its start: a revisit is harmless."""
    key = acmi.keys.changed()
    score, rank, below = acmi.store.pipeline(
        [("ZSCORE", key, after), ("ZRANK", key, after), ("ZCOUNT", key, "-inf", f"({mark}")]
    )
    offset = 0
    if isinstance(score, bytes) and isinstance(rank, int) and isinstance(below, int):
        try:
            if float(score) == mark:
                offset = rank - below + 1
        except ValueError:
            pass
    reply = acmi.store.execute(
        ("ZRANGE", key, mark, until, "BYSCORE", "LIMIT", offset, limit, "WITHSCORES")
    )
    items = reply if isinstance(reply, list) else []
    out: list[tuple[str, int]] = []
    for member, value in zip(items[::2], items[1::2], strict=False):
        if isinstance(member, bytes) and isinstance(value, bytes):
            try:
                out.append((member.decode("utf-8"), int(float(value))))
            except (UnicodeDecodeError, ValueError, OverflowError):
                continue
    return out


def _since(previous: object) -> float | None:
    """Where the next window starts: the previous rollup's ``until_ts`` (or ``ts`` for a
    rollup another tool wrote), None when there is none."""
    if not isinstance(previous, dict):
        return None
    for name in ("until_ts", "ts"):
        value = previous.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return value
    return None


def _bound(value: float) -> str:
    return f"({int(value)}" if float(value).is_integer() else f"({value!r}"


def _roll_batch(
    acmi: Acmi,
    run: JobRun,
    members: list[str],
    until: int,
    summarizer: Summarizer,
    params: Params,
    tally: _Tally,
) -> None:
    keys = acmi.keys
    entities: list[EntityId] = []
    for member in members:
        try:
            entities.append(EntityId.parse(member))
        except AcmiValidationError:
            tally.problems += 1  # another tool's member: no entity of ours
    if not entities:
        return
    rollup_keys = [keys.slot(eid, ROLLUP_LATEST) for eid in entities]
    previous_raw = acmi.store.pipeline([("GET", key) for key in rollup_keys])
    previous: list[dict[str, Any] | None] = []
    reads: list[Command] = []
    newest: list[NewestRead] = []
    for eid, raw in zip(entities, previous_raw, strict=True):
        doc = _previous(raw)
        previous.append(doc)
        low = "-inf" if (since := _since(doc)) is None else _bound(since)
        timeline = keys.timeline(eid)
        # the newest events read stop at JOB_READ_BYTES inside Redis (page.lua)
        newest.append(NewestRead(timeline, params.events, until, since))
        reads += [("ZCOUNT", timeline, low, until), newest[-1].command()]
    windows = read_pipeline(acmi.store, reads)
    plan = WritePlan()
    plan_bytes = 0
    for index, eid in enumerate(entities):
        total, members_raw = windows[2 * index], windows[2 * index + 1]
        read, _ = newest[index].members(acmi.store, members_raw)
        if isinstance(previous_raw[index], StoreCommandError) or read is None:
            tally.problems += 1  # a key of another type (another tool's): left alone
            continue
        events = _events(read)
        if not events:
            tally.empty += 1  # nothing new (or nothing readable): the old rollup stands
            continue
        doc = previous[index]
        window = Window(
            entity=str(eid),
            since_ts=_since(doc),
            until_ts=until,
            events=events,
            total=max(total if isinstance(total, int) else 0, len(events)),
            carried=_open_items(doc),
        )
        text = dumps(_rollup(acmi, run, window, summarizer, tally), "rollup")
        plan.set(rollup_keys[index], text)
        plan_bytes += len(text)
        tally.written += 1
        tally.events += len(events)
        if plan_bytes >= MAX_PLAN_BYTES:
            plan.apply(acmi.store)
            plan, plan_bytes = WritePlan(), 0
    plan.apply(acmi.store)


_previous = load_object


def _open_items(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    items = doc.get("open") if doc else None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _events(raw: Reply | StoreCommandError) -> list[dict[str, Any]]:
    """The window's stored events, oldest first (read newest first); members that are
    not events are left out."""
    out: list[dict[str, Any]] = []
    for member in reversed(raw if isinstance(raw, list) else []):
        decoded = decode_event(member)
        if not isinstance(decoded, str):
            out.append(decoded[1])
    return out


def _rollup(
    acmi: Acmi, run: JobRun, window: Window, summarizer: Summarizer, tally: _Tally
) -> dict[str, Any]:
    facts = digest(window)
    text, name = _summary(window, facts, summarizer, tally)
    doc: dict[str, Any] = {
        "ts": acmi.clock(),
        "summary": text,
        "since_ts": window.since_ts,
        "until_ts": window.until_ts,
        "event_count": facts.event_count,
        "window_events": window.total,
        "summarizer": name,
        "kinds": facts.kinds,
        "open": facts.open,
        "closed": facts.closed,
        "actors": facts.actors,
        "latest": facts.latest,
        "execution_id": run.execution_id,
    }
    if name != summarizer.name:
        doc["fallback_from"] = summarizer.name  # the LLM failed: the extractive text stands
    return doc


def _summary(
    window: Window, facts: Digest, summarizer: Summarizer, tally: _Tally
) -> tuple[str, str]:
    """The summarizer's text, or the extractive text when it fails (or has failed
    ``MAX_LLM_FAILURES`` times in this run)."""
    extractive = Extractive()
    if isinstance(summarizer, Extractive) or tally.llm_failures >= MAX_LLM_FAILURES:
        return extractive.summarize(window, facts), extractive.name
    tally.llm_calls += 1
    try:
        return summarizer.summarize(window, facts), summarizer.name
    except SummarizerError as exc:
        tally.llm_failures += 1
        tally.fallback = tally.fallback or str(exc)
        return extractive.summarize(window, facts), extractive.name


__all__ = ["BATCH", "MAX_EVENTS_PER_ENTITY", "Params", "parse_params", "roll", "run"]

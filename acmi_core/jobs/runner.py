"""The contract of a scheduled job: what a job function receives and returns.

A job is ``def run(acmi: Acmi, run: JobRun) -> dict[str, Any]`` in some acmi_core module,
named in its row of ``acmi_core.base.lambdas`` as ``"<module>:<function>"``. It is run by the
Lambda kit (``functions.runtime.job_handler``) on EventBridge Scheduler's ``Input``, and
by hand with ``acmi invoke <function> --event events/<function>.<case>.json``.

The template gives every schedule this ``Input`` (Scheduler fills the placeholders)::

    {"execution_id": "<aws.scheduler.execution-id>",
     "scheduled_time": "<aws.scheduler.scheduled-time>", "max": 500, "max_tenants": 100,
     ...job parameters}

``max`` is the job's cap per tenant and run, ``max_tenants`` the tenants a run serves
(:mod:`acmi_core.jobs.tenants`, which runs the job through :func:`run_job` once per
tenant with work, each on a client of its own tenant).

Scheduler retries a failed invocation with the same ``execution_id``. :func:`run_job`
makes that safe: a finished execution leaves a record (``WritePlan.once`` on
``keys.job_run``), and a retry of it returns the recorded result with ``replayed: true``
and does nothing (a store retry of the record's own write, after a lost reply, is no
such retry: it reports the run it finished, not ``replayed``); a retry of an execution
that failed half way runs again, so each job's own writes are idempotent (a rollup or
a STALLED mark written twice is the same).

Every job's cost grows with what changed, never with all entities: it reads indexes the
writes keep (``keys.changed``, ``keys.activity``, the wake due-time index) from the
watermark of its last run (``keys.job_state``), at most ``max_per_run`` items a run
(the rest is the next run's backlog). :func:`run_job` runs it on a
:class:`~acmi_core.store.counting.CountingStore` and records the run (watermark,
counts, requests, commands, duration) for ``acmi jobs status``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import dumps
from acmi_core.base.stored import StoredObject, Unreadable, load_stored, scored
from acmi_core.client import Acmi
from acmi_core.client.tracing import MeasuringStore, job_span
from acmi_core.store.counting import CountingStore
from acmi_core.store.scripts import new_request_id
from acmi_core.store.writes import Replayed, WritePlan

MAX_EXECUTION_ID_LEN = 256


def int_param(params: Mapping[str, Any], name: str, default: int, high: int) -> int:
    """A job's integer parameter in 1..``high`` (``default`` when absent), or a 400 naming it."""
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise AcmiValidationError(name, "range", f"must be an integer in 1..{high}")
    return value


RESERVED_FIELDS = ("execution_id", "scheduled_time")


@dataclass(frozen=True)
class JobRun:
    """One execution of a scheduled job."""

    job: str
    execution_id: str
    scheduled_ms: int  # when Scheduler meant it to run (ms since epoch)
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, job: str, event: object, *, now_ms: int) -> JobRun:
        """Scheduler's ``Input``; ``scheduled_time`` defaults to now for a run by hand."""
        if not isinstance(event, dict):
            raise AcmiValidationError("event", "object", "must be a JSON object")
        execution_id = event.get("execution_id")
        if not isinstance(execution_id, str) or not (
            1 <= len(execution_id) <= MAX_EXECUTION_ID_LEN
        ):
            raise AcmiValidationError(
                "execution_id",
                "required",
                f"must be a string of 1-{MAX_EXECUTION_ID_LEN} characters "
                "(the schedule's Input: <aws.scheduler.execution-id>)",
            )
        scheduled = event.get("scheduled_time")
        scheduled_ms = now_ms if scheduled is None else _parse_time(scheduled)
        params = {k: v for k, v in event.items() if k not in RESERVED_FIELDS}
        return cls(job, execution_id, scheduled_ms, params)


def _parse_time(raw: object) -> int:
    if isinstance(raw, str):
        try:
            moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is not None:
                return int(moment.timestamp() * 1000)
    raise AcmiValidationError(
        "scheduled_time", "timestamp", "must be an ISO 8601 time with a zone (2026-11-30T08:00:00Z)"
    )


Job = Callable[[Acmi, JobRun], dict[str, Any]]

# The jobs whose work is indexed per bucket (the change index, the memory and hygiene
# indexes): run once per bucket of a tenant, each on its own watermark, cap and run
# record. The others read bucket 0 only, where all they look at lives: sweep and wake
# (heartbeats, wake schedules: agents), standup-brief (the threads and HITL queues);
# drift-diff reads every bucket's change index itself (one report per tenant).
BUCKETED_JOBS: Final = frozenset({"rollup-cron", "hygiene"})

RUN_RECORD_TTL_MS = 7 * 24 * 3600 * 1000  # longer than Scheduler retries an execution
MAX_PER_RUN = 500  # items a run handles at most by default; the rest is the backlog


def job_state(acmi: Acmi, job: str) -> StoredObject:
    """The last run's record (``{}`` before the first run): ``watermark`` (ms: what
    changed up to then was handled), ``last_run_ms``, ``execution_id``, the job's own
    counts, ``requests``, ``commands``, ``duration_ms``, ``backlog``."""
    raw = acmi.store.execute(("GET", acmi.keys.job_state(job)))
    if not isinstance(raw, bytes):
        return {}
    try:
        state = load_stored(raw)
    except Unreadable:
        return {}
    return state if isinstance(state, dict) else {}


def changed_since(acmi: Acmi, since_ms: int, until_ms: int, limit: int) -> list[tuple[str, int]]:
    """``(entity id, changed ms)`` of the entities whose timeline changed in
    (``since_ms``, ``until_ms``], oldest change first, at most ``limit``: one ZRANGE on
    ``keys.changed`` (O(log N + limit)), never a scan."""
    reply = acmi.store.execute(
        (
            "ZRANGE",
            acmi.keys.changed(),
            f"({since_ms}",
            until_ms,
            "BYSCORE",
            "LIMIT",
            0,
            limit,
            "WITHSCORES",
        )
    )
    return scored(reply)  # another tool's unreadable member: no entity we wrote


def pending(acmi: Acmi, job: str, state: Mapping[str, Any]) -> dict[str, Any]:
    """What waits for ``job``'s next run, from the indexes it reads (one or two reads):
    ``wake`` the next agent due; ``sweep`` the next heartbeat to cross the 48 h line;
    the others the entities whose timeline changed since their watermark."""
    keys, now = acmi.keys, acmi.clock()
    mark = state.get("watermark")
    low = f"({int(mark)}" if isinstance(mark, int | float) else "-inf"
    if job == "wake":
        due_now = acmi.store.execute(("ZCOUNT", keys.wake_due(), "-inf", now))
        reply = acmi.store.execute(("ZRANGE", keys.wake_due(), 0, 0, "WITHSCORES"))
        nxt = next(iter(scored(reply)), None)
        return {"due_now": due_now, "next": {"agent": nxt[0], "due_ms": nxt[1]} if nxt else None}
    if job == "sweep":
        reply = acmi.store.execute(
            ("ZRANGE", keys.activity(), low, "+inf", "BYSCORE", "LIMIT", 0, 1, "WITHSCORES")
        )
        nxt = next(iter(scored(reply)), None)
        stall_ms = 48 * 3600 * 1000
        return {"next_stall": {"agent": nxt[0], "at_ms": nxt[1] + stall_ms} if nxt else None}
    if keys.buckets == 1 or job not in (*BUCKETED_JOBS, "drift-diff"):
        changed = acmi.store.execute(("ZCOUNT", keys.changed(), low, "+inf"))
        return {"changed_since_watermark": changed}
    # B > 1: every bucket's change index, from its own watermark (a bucketed job's) or the
    # job's one (drift-diff reads them all from one)
    views = keys.every_bucket()
    lows = [low] * len(views)
    if job in BUCKETED_JOBS:
        states = acmi.store.pipeline([("GET", view.job_state(job)) for view in views])
        lows = [_low(reply) for reply in states]
    counts = acmi.store.pipeline(
        [("ZCOUNT", view.changed(), at, "+inf") for view, at in zip(views, lows, strict=True)]
    )
    return {"changed_since_watermark": sum(c for c in counts if isinstance(c, int))}


def _low(raw: object) -> str:
    """The exclusive ZCOUNT bound after a stored job state's watermark (-inf: none)."""
    try:
        state = load_stored(raw) if isinstance(raw, bytes) else {}
    except Unreadable:
        state = {}
    mark = state.get("watermark") if isinstance(state, dict) else None
    return (
        f"({int(mark)}" if isinstance(mark, int | float) and not isinstance(mark, bool) else "-inf"
    )


def run_job(acmi: Acmi, run: JobRun, job: Job, *, clock: Callable[[], float]) -> StoredObject:
    """Run ``job`` once per execution id, counting its store traffic, and record the run.

    ``job`` gets a client whose store counts requests and commands, and returns its
    result dict; ``watermark`` and ``backlog`` in it are kept in the job's state."""
    record_key = acmi.keys.job_run(run.job, run.execution_id)
    previous = acmi.store.execute(("GET", record_key))
    if isinstance(previous, bytes):
        return _replayed(previous)
    # traces on: the run's span also gets its bytes (a measuring store costs a walk of
    # every reply, so only then)
    counting = MeasuringStore(acmi.store) if acmi.settings.traces else CountingStore(acmi.store)
    counted = acmi.__class__(
        counting, acmi.settings, tenant=acmi.tenant, clock=acmi.clock, bucket=acmi.keys.bucket
    )
    started = clock()
    with job_span(acmi, run.job, counting) as span:
        result = job(counted, run)
        if span is not None:
            span.set_attributes(_result_attributes(result))
    summary = {
        "job": run.job,
        "execution_id": run.execution_id,
        "scheduled_ms": run.scheduled_ms,
        "last_run_ms": acmi.clock(),
        **result,
        "requests": counting.requests + 1,  # + the record and state written below
        "commands": counting.commands + 1,
        "duration_ms": round((clock() - started) * 1000, 3),
    }
    # RECORD: the transport's retry of this write (its reply lost) answers this run's
    # results, so only another run's record reads as a replay
    plan = WritePlan(record=acmi.keys.request(new_request_id()))
    plan.once(record_key, RUN_RECORD_TTL_MS, dumps(summary))
    plan.set(acmi.keys.job_state(run.job), dumps(summary))
    try:
        plan.apply(acmi.store)
    except Replayed as replay:  # a concurrent retry finished first: its record stands
        return _replayed(replay.previous)
    return summary


def _result_attributes(result: Mapping[str, Any]) -> dict[str, int | float]:
    """A run's counts for its span: each number at the top of its result (``stalled``,
    ``rolled_up``, ``backlog``, ...) as ``acmi.result.<name>``."""
    return {
        f"acmi.result.{name}": value
        for name, value in result.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


def _replayed(raw: bytes) -> StoredObject:
    try:
        data = load_stored(raw)
    except Unreadable:
        data = {}
    return {**(data if isinstance(data, dict) else {}), "replayed": True}


def load_job(path: str) -> Job:
    """The job named ``"<module>:<function>"``."""
    module_name, _, attribute = path.partition(":")
    job: Job = getattr(importlib.import_module(module_name), attribute)
    if not callable(job):
        raise TypeError(f"job {path!r} is not callable")
    return job

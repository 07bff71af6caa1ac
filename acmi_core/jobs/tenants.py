"""Every scheduled job serves every tenant that has work, each with its own watermark,
cap and record; one tenant's failure does not stop the others.

What a run serves, never a scan of the keyspace: the default tenant (always, as before
tenants were indexed), the tenants the last run left waiting (a backlog past the cap,
a failure, or more tenants than ``max_tenants``), and the tenants the job's sources name
(``SOURCES``), read from the indexes of tenants with work (``Keys.tenants_with``: ZSET
tenant -> ms, kept by the writes in the same script run as the index they summarize):

- ``since``: the tenants whose latest change (or heartbeat) is after the job's floor:
  the lowest watermark a served tenant reached last run. A tenant whose changes were all
  handled is out of the read; a write landing while a job drains has a later score than
  that floor, so the next run finds its tenant. Five jobs with their own floors share
  ``changed`` (two share ``activity``: ``readers``; the sweep's floor is 48 h back, where a
  work item's silence starts to count, so a tenant stays that long), so a tenant leaves
  such an index only when all of them have passed it: each run records ``keep_after``
  (its floor; for a ``window`` job the window's start) and then removes the entries at or
  below the lowest ``keep_after`` of the jobs reading that index (``_prune``; none until
  each has run once).
- ``due``: the tenants whose earliest due time (wake, hygiene) has come. After serving a
  tenant, one ``ZHEAD`` per tenant resets its score to the earliest due left in its own
  index, or removes it when that is empty: read and written in one script run, so a
  schedule written meanwhile keeps the tenant indexed.
- ``window``: the tenants changed in the last ``window_ms`` before the scheduled time
  (standup-brief's day).
- ``held``: the tenants with anything in their own index, whatever its scores (the open
  HITL queues standup-brief reads: a tenant whose only work is an open item is briefed
  every day until it is resolved), re-synced by ``ZHEAD`` after serving as ``due`` is.

In the cluster layout (``Keys.tenants_with``) each tenant's mark lives in its own slot, so
a run first reads the registry of tenants that ever marked work (``Keys.tenant_registry``,
one SMEMBERS) and then each registered tenant's marks (the same pipeline, now
O(registered tenants x indexes), each command on the tenant's node); the ZHEAD re-sync is
one script run per served tenant, and the state one of its own (``_record``).

Each tenant runs through :func:`~acmi_core.jobs.runner.run_job` on a client of its own:
its watermark and record under its own keys, the schedule's ``max`` per tenant, a
retried execution replaying the tenants that finished. Cost: O(tenants with work +
their changes): one pipeline of index reads, one run of the job per tenant served, one
write of this state (``Keys.job_tenants``), one script run of ``ZHEAD`` for a job
with ``due`` sources, and one pipeline of the prune for a job with ``since`` sources.

The result is the default tenant's summary, unchanged, plus ``tenants`` (each other
tenant's summary, or ``{"error": ...}``) and ``waiting`` (tenant -> why it waits) when
there are any. A default tenant's exception is raised after the others ran (so
Scheduler retries the execution, and the others replay).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import (
    ACTIVITY,
    BUCKETED_INDEXES,
    CHANGED,
    HITL_OPERATOR,
    HITL_SHARED,
    HYGIENE,
    WAKE,
    Keys,
    Layout,
)
from acmi_core.base.model import EntityId, check_tenant, dumps
from acmi_core.base.settings import Settings
from acmi_core.base.stored import Unreadable, load_stored, scored
from acmi_core.client.tracing import job_span
from acmi_core.jobs.runner import (
    BUCKETED_JOBS,
    Job,
    JobRun,
    int_param,
    job_state,
    pending,
    run_job,
)
from acmi_core.store.writes import WritePlan

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from acmi_core.client import Acmi

DAY_MS: Final = 24 * 3600 * 1000
DEFAULT_MAX_TENANTS: Final = 100  # tenants one run serves (the schedule's max_tenants)
MAX_MAX_TENANTS: Final = 1000
MAX_ERROR_CHARS: Final = 300  # of a tenant's failure, in the result and the state


@dataclass(frozen=True)
class Sources:
    """Where a job finds the tenants with work (module docstring)."""

    since: tuple[str, ...] = ()
    due: tuple[tuple[str, Callable[[Keys], str]], ...] = ()  # (tenant index, its own index)
    window_ms: int | None = None  # ``since`` read from scheduled_ms - window_ms instead
    held: tuple[tuple[str, Callable[[Keys, Settings], str]], ...] = ()  # read whole


def _shared_hitl(keys: Keys, settings: Settings) -> str:
    return keys.hitl_queue(None, "open")


def _operator_hitl(keys: Keys, settings: Settings) -> str:
    return keys.hitl_queue(EntityId.parse(settings.operator, "operator"), "open")


SOURCES: Final[dict[str, Sources]] = {
    "rollup-cron": Sources(since=(CHANGED,)),
    "drift-diff": Sources(since=(CHANGED, ACTIVITY)),
    "hygiene": Sources(since=(CHANGED,), due=((HYGIENE, Keys.hygiene_due),)),
    "standup-brief": Sources(
        since=(CHANGED,),
        window_ms=DAY_MS,
        held=((HITL_SHARED, _shared_hitl), (HITL_OPERATOR, _operator_hitl)),
    ),
    "sweep": Sources(since=(ACTIVITY, CHANGED)),  # agents; work items and projects
    "wake": Sources(due=((WAKE, Keys.wake_due),)),
}
DEFAULT_SOURCES: Final = Sources(since=(CHANGED,))  # a job that names none reads changes


def sources(job: str) -> Sources:
    return SOURCES.get(job, DEFAULT_SOURCES)


def readers(kind: str) -> tuple[str, ...]:
    """The jobs that read the index of tenants ``kind`` from a floor (``Sources.since``)."""
    return tuple(job for job, spec in SOURCES.items() if kind in spec.since)


def _ms(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _decode_state(raw: object) -> dict[str, Any]:
    try:
        state = load_stored(raw) if isinstance(raw, bytes) else {}
    except Unreadable:
        state = {}
    if not isinstance(state, dict):
        state = {}
    waiting = state.get("waiting")
    return {
        "floor": _ms(state.get("floor")),
        "waiting": {str(t): str(w) for t, w in waiting.items()}
        if isinstance(waiting, dict)
        else {},
        "keep_after": _ms(state.get("keep_after")),
    }


def tenants_state(acmi: Acmi, job: str) -> dict[str, Any]:
    """``{"floor": ms | None, "waiting": {tenant: why}, "keep_after": ms | None}`` after
    the job's last run (``keep_after``: its next run reads no index entry at or below)."""
    return _decode_state(acmi.store.execute(("GET", acmi.keys.job_tenants(job))))


def _states(acmi: Acmi, jobs: list[str]) -> dict[str, dict[str, Any]]:
    """``tenants_state`` of each of ``jobs``: one pipeline."""
    replies = acmi.store.pipeline([("GET", acmi.keys.job_tenants(job)) for job in jobs])
    return {job: _decode_state(reply) for job, reply in zip(jobs, replies, strict=True)}


def _prune_through(kind: str, states: dict[str, dict[str, Any]]) -> int | None:
    """The score at or below which no job reading ``kind`` reads an entry again: the
    lowest ``keep_after`` of them, None while any has none (it never ran here)."""
    marks = [_ms(states.get(job, {}).get("keep_after")) for job in readers(kind)]
    known = [mark for mark in marks if mark is not None]
    return min(known) if known and len(known) == len(marks) else None


def pruned_through(acmi: Acmi, kind: str) -> int | None:
    """Up to which score the jobs may have pruned the index of tenants ``kind`` (a tenant
    whose latest work is at or below it is out of the index by design: ``acmi doctor``
    finds no gap there); None: nothing is pruned."""
    return _prune_through(kind, _states(acmi, list(readers(kind))))


def _tenant_keys(acmi: Acmi, tenant: str) -> Keys:
    settings = acmi.settings
    return Keys(tenant, settings.default_tenant, acmi.keys.layout, settings.buckets_for(tenant))


def _index_keys(acmi: Acmi) -> Callable[[str], list[str]]:
    """Where the index of tenants ``kind`` lives: the one deployment-wide ZSET, or in the
    cluster layout each registered tenant's mark (the registry read once, here)."""
    if acmi.keys.layout is not Layout.CLUSTER:
        return lambda kind: [acmi.keys.tenants_with(kind)]
    reply = acmi.store.execute(("SMEMBERS", acmi.keys.tenant_registry()))
    members = reply if isinstance(reply, list) else []
    tenants = sorted(
        t for m in members if isinstance(m, bytes) and _valid(t := m.decode("utf-8", "replace"))
    )
    return lambda kind: [
        view.tenants_with(kind) for t in tenants for view in _views(_tenant_keys(acmi, t), kind)
    ]


def _views(keys: Keys, kind: str) -> list[Keys]:
    """The buckets whose mark of ``kind`` a run reads: every bucket's for the indexes
    kept per bucket (``BUCKETED_INDEXES``), else bucket 0's."""
    return keys.every_bucket() if kind in BUCKETED_INDEXES else [keys]


def indexed(acmi: Acmi, job: str, *, limit: int = MAX_MAX_TENANTS) -> list[str]:
    """Every tenant the job's indexes name (at most ``limit`` each): for
    ``acmi jobs status``, not for a run."""
    spec = sources(job)
    kinds = (*spec.since, *(kind for kind, _ in (*spec.due, *spec.held)))
    where = _index_keys(acmi)
    commands: list[tuple[str | int, ...]] = [
        ("ZRANGE", key, 0, limit - 1) for kind in kinds for key in where(kind)
    ]
    replies = acmi.store.pipeline(commands) if commands else []
    found: dict[str, None] = {}
    for reply in replies:
        for member in reply if isinstance(reply, list) else []:
            if isinstance(member, bytes):
                found[member.decode("utf-8", "replace")] = None
    return list(found)


def _candidates(acmi: Acmi, spec: Sources, floor: int | None, run: JobRun, now: int) -> list[str]:
    low = floor
    if spec.window_ms is not None:
        low = run.scheduled_ms - spec.window_ms
    where = _index_keys(acmi)
    commands: list[tuple[str | int, ...]] = [
        (
            "ZRANGE",
            key,
            "-inf" if low is None else f"({low}",
            "+inf",
            "BYSCORE",
            "WITHSCORES",
        )
        for kind in spec.since
        for key in where(kind)
    ]
    commands += [
        ("ZRANGE", key, "-inf", now, "BYSCORE", "WITHSCORES")
        for kind, _ in spec.due
        for key in where(kind)
    ]
    commands += [
        ("ZRANGE", key, "-inf", "+inf", "BYSCORE", "WITHSCORES")
        for kind, _ in spec.held
        for key in where(kind)
    ]
    scored_tenants: dict[str, int] = {}
    for reply in acmi.store.pipeline(commands) if commands else []:
        if isinstance(reply, Exception):
            raise reply
        for tenant, score in scored(reply):
            if _valid(tenant):  # another tool's member names no tenant of ours
                scored_tenants[tenant] = min(score, scored_tenants.get(tenant, score))
    return sorted(scored_tenants, key=lambda t: (scored_tenants[t], t))  # oldest work first


def _valid(tenant: str) -> bool:
    try:
        check_tenant(tenant)
    except (AcmiValidationError, ValueError):
        return False
    return True


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]


def run_tenants(acmi: Acmi, run: JobRun, job: Job, *, clock: Callable[[], float]) -> dict[str, Any]:
    """Run ``job`` for every tenant with work (module docstring). ``acmi`` is a client of
    the deployment's default tenant. Traces on: in a span over the invocation, each
    tenant's run a span inside it (``run_job``)."""
    with job_span(acmi, run.job) as span:
        return _run_tenants(acmi, run, job, clock, span)


def _run_tenants(
    acmi: Acmi, run: JobRun, job: Job, clock: Callable[[], float], span: Span | None
) -> dict[str, Any]:
    spec = sources(run.job)
    max_tenants = int_param(run.params, "max_tenants", DEFAULT_MAX_TENANTS, MAX_MAX_TENANTS)
    tenant_run = replace(run, params={k: v for k, v in run.params.items() if k != "max_tenants"})
    # this job's state and those of the jobs sharing its indexes (for the prune), one read
    sharing = [run.job, *(j for k in spec.since for j in readers(k) if j != run.job)]
    states = _states(acmi, list(dict.fromkeys(sharing)))
    state = states[run.job]
    default = acmi.tenant
    # those left waiting first (a cap's deferred tenants get their turn), then the default
    order: dict[str, None] = dict.fromkeys(t for t in state["waiting"] if _valid(t))
    order.setdefault(default, None)
    for tenant in _candidates(acmi, spec, state["floor"], run, acmi.clock()):
        order.setdefault(tenant, None)
    tenants = list(order)
    served, deferred = tenants[:max_tenants], tenants[max_tenants:]
    if span is not None:
        span.set_attributes({"acmi.tenants": len(served), "acmi.deferred": len(deferred)})

    results: dict[str, dict[str, Any]] = {}
    waiting: dict[str, str] = {tenant: "more tenants than max_tenants" for tenant in deferred}
    failure: Exception | None = None
    marks: list[int] = []
    for tenant in served:
        try:
            client = (
                acmi
                if tenant == default
                else acmi.__class__(acmi.store, acmi.settings, tenant=tenant, clock=acmi.clock)
            )
            result = run_buckets(client, tenant_run, job, clock=clock)
        except Exception as exc:  # one tenant's failure must not stop the others
            if tenant == default:
                failure = exc
            results[tenant] = {"error": _error(exc)}
            waiting[tenant] = f"failed: {_error(exc)}"
            continue
        results[tenant] = result
        backlog = result.get("backlog")
        if isinstance(backlog, int) and backlog > 0:
            waiting[tenant] = f"backlog: {backlog}"
            continue
        mark = result.get("watermark")
        if isinstance(mark, int | float) and not isinstance(mark, bool):
            marks.append(int(mark))

    floor = min(marks) if marks else state["floor"]
    _record(acmi, run, spec, served, {"floor": floor, "waiting": waiting}, states)
    if failure is not None:
        raise failure

    summary = dict(results.get(default, {}))  # {} when max_tenants deferred the default
    others = {tenant: results[tenant] for tenant in served if tenant != default}
    if others:
        summary["tenants"] = others
    if waiting:
        summary["waiting"] = waiting
    return summary


# a bucket's result fields that are no counts: kept as bucket 0's (the watermark: lowest)
_PER_BUCKET: Final = frozenset({"watermark", "skip", "scheduled_ms", "last_run_ms", "after"})


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def run_buckets(acmi: Acmi, run: JobRun, job: Job, *, clock: Callable[[], float]) -> dict[str, Any]:
    """``run_job`` for the tenant: once, or for a bucketed job on B > 1 once per bucket.
    Then the result is bucket 0's with every count summed over the buckets (requests,
    commands, visited, backlog, ...), the lowest watermark (the tenant's floor covers
    every bucket) and ``buckets`` (bucket -> its own result) beside."""
    buckets = acmi.keys.buckets
    if buckets == 1 or run.job not in BUCKETED_JOBS:
        return run_job(acmi, run, job, clock=clock)
    results = [
        run_job(
            acmi.__class__(
                acmi.store, acmi.settings, tenant=acmi.tenant, clock=acmi.clock, bucket=b
            )
            if b
            else acmi,
            run,
            job,
            clock=clock,
        )
        for b in range(buckets)
    ]
    summary: dict[str, Any] = dict(results[0])
    for name, value in results[0].items():  # the counts over every bucket
        if name not in _PER_BUCKET and _count(value):
            summary[name] = sum(r[name] for r in results if _count(r.get(name)))
    marks = [r.get("watermark") for r in results]
    if all(_count(m) for m in marks):  # the tenant's floor covers every bucket
        summary["watermark"] = min(m for m in marks if isinstance(m, int))
    summary["buckets"] = {str(b): r for b, r in enumerate(results)}
    return summary


def _record(
    acmi: Acmi,
    run: JobRun,
    spec: Sources,
    served: list[str],
    record: dict[str, Any],
    states: dict[str, dict[str, Any]],
) -> None:
    """The due indexes re-synced for the served tenants and the job's state, one
    WritePlan (cluster layout: one per served tenant, in its slot, and one for the state);
    then the prune of its ``since`` indexes."""
    cluster = acmi.keys.layout is Layout.CLUSTER
    plans: dict[str, WritePlan] = {}
    for kind, own in spec.due:  # each served tenant's earliest due left, or none
        for tenant in served:
            for keys in _views(_tenant_keys(acmi, tenant), kind):  # a plan per slot
                plan = plans.setdefault(keys.tag if cluster else "", WritePlan())
                plan.zhead(keys.tenants_with(kind), tenant, own(keys))
    for kind, held in spec.held:  # each served tenant's earliest open item, or none
        for tenant in served:
            keys = _tenant_keys(acmi, tenant)
            plan = plans.setdefault(keys.tag if cluster else "", WritePlan())
            plan.zhead(keys.tenants_with(kind), tenant, held(keys, acmi.settings))
    # what the next run reads from: its floor, or for a window its start, which only moves
    # on with the schedule
    keep = record["floor"] if spec.window_ms is None else run.scheduled_ms - spec.window_ms
    state = plans.setdefault("", WritePlan())
    state.set(acmi.keys.job_tenants(run.job), dumps({**record, "keep_after": keep}))
    for plan in plans.values():
        plan.apply(acmi.store)
    states[run.job] = {**states[run.job], "keep_after": keep}
    _prune(acmi, spec, states)


def _prune(acmi: Acmi, spec: Sources, states: dict[str, dict[str, Any]]) -> None:
    """Each ``since`` index loses the tenants whose latest work is at or below what every
    job reading it has passed (``_prune_through``): one pipeline, O(log N + removed).
    ZREMRANGEBYSCORE decides in Redis, so a write landing meanwhile (ZMAX: a later score)
    keeps its tenant; a tenant that works again is added back by that write. A tenant
    left waiting (backlog, failure) is carried by its job's ``waiting``, not the index."""
    commands: list[tuple[str | int, ...]] = []
    where = _index_keys(acmi) if spec.since else None
    for kind in spec.since:
        through = _prune_through(kind, states)
        if through is not None and where is not None:
            commands += [("ZREMRANGEBYSCORE", key, "-inf", through) for key in where(kind)]
    if commands:
        for reply in acmi.store.pipeline(commands):
            if isinstance(reply, Exception):
                raise reply


def tenant_status(acmi: Acmi, job: str) -> dict[str, Any]:
    """Per tenant other than the default that the job's indexes name or that waits: its
    last run's ``backlog``, what waits now (``runner.pending``) and why it waits, for
    ``acmi jobs status``. O(tenants indexed)."""
    waiting = tenants_state(acmi, job)["waiting"]
    out: dict[str, Any] = {}
    for tenant in dict.fromkeys([*waiting, *indexed(acmi, job)]):
        if tenant == acmi.tenant or not _valid(tenant):
            continue
        client = acmi.__class__(acmi.store, acmi.settings, tenant=tenant, clock=acmi.clock)
        last = job_state(client, job)
        info: dict[str, Any] = {
            "backlog": last.get("backlog"),
            "last_run_ms": last.get("last_run_ms"),
            "pending": pending(client, job, last),
        }
        if tenant in waiting:
            info["waiting"] = waiting[tenant]
        out[tenant] = info
    return out

"""The liveness sweep (scheduled job ``sweep``, every 15 minutes): agents silent for
``STALL_AFTER_MS`` (48 h) become ``status: STALLED`` and are escalated to the operator once.

What it reads: the activity index ``keys.activity()`` (ZSET agent -> last heartbeat ms,
kept by every heartbeat). An agent stalls when the cutoff ``now - 48 h`` passes its
heartbeat score, and that happens once per heartbeat: so the sweep keeps a watermark on
the heartbeat scores (``watermark``, plus ``skip``: how many members AT the watermark
score it already handled, for a page cut among equal scores) and each run reads only
the scores in ``[watermark, cutoff)``: the agents that crossed the line since the last
run. Agents stalled earlier stay below the watermark and cost nothing; a heartbeat moves
its agent above the cutoff (its status set by the heartbeat), and only if it goes silent
again for 48 h does the sweep see it again, as a new stall episode. No marker index, no
per-agent "already marked" read: cost O(agents that crossed the line) a run, never
O(stalled agents) or O(agents). The first run (no watermark) reads from -inf: a one-time
catch-up, ``max`` a run.

For each agent that crossed the line:

- its signals get ``status: "STALLED"`` and a ``status_note`` saying since when (every
  other signal kept; the agent's next heartbeat replaces both). The marks of a page are
  one script (``store/lua/sweep.lua`` + ``store/lua/apply.lua``, at most ``MARK_BATCH``
  agents and ``MARK_BYTES`` of their stored signals a run: the agents past that go in the
  next run, and the reply says which were done) that first checks each agent's activity
  score is still the heartbeat the sweep read, so a heartbeat that lands between the read
  and the write is never overwritten; such an agent is counted ``revived`` and not
  escalated. A batch refused because one agent's signals are not a JSON object (another
  tool wrote them) is retried agent by agent, and the unreadable ones are reported in
  ``problems``.
- one HITL item for ``settings.operator`` (``acmi.hitl.create``), correlationId
  ``stalled-<agent>-<heartbeat ms>``: idempotent, so a retried run, or a run that
  re-reads the same page after a failure, escalates a stall episode once.

Round trips a run: 1 (the job state) + 1 (the page of the activity index) + 1 per
``MARK_BATCH`` agents marked, or per ``MARK_BYTES`` of their stored signals, whichever
comes first (``mark_runs``; +1 per agent only when a batch is refused, see above) + 1
per agent escalated + 1 ZCOUNT when the page was full (the backlog), and the work items'
(below). With nothing new: 4, whatever the number of agents, items or stalled ones.

A heartbeat written with a timestamp already below the watermark (``heartbeat(now=...)``
backdated by more than 48 h) is not a live heartbeat and is never swept.

Work items and projects (the seed's "projects silent for more than 48 hours are
auto-marked STALLED"): an entity of a ``STALL_CATEGORIES`` category (``work:<id>``,
``project:<id>``) whose timeline has not changed for 48 h is handled the same way, read
from the change index ``keys.changed()`` (entity -> last timeline change, kept by every
timeline write) on a cursor of its own (``work_watermark``, ``work_skip``): O(entities that
crossed the line), other categories crossing it read and passed over. An item whose
``status`` is closed (``work.CLOSED_STATUSES``; one pipeline of GETs of the candidates'
signals) is not stalled. The mark is ``liveness: "STALLED"`` and a ``liveness_note``
beside the item's own ``status``, which is the item's lifecycle (its writers' value, kept),
in the same guarded script run (``sweep.lua`` on the change index: a timeline write between
the read and the mark wins); the item goes into ``keys.stalled()`` (entity -> the change it
was marked at) and one HITL item is raised for the operator, ``stalled-<entity>-<change
ms>``: one per stall episode. Activity clears it: each run also reads the change index from
where its last run stopped (``active_watermark``, ``active_skip``: the entities changed
since, O(what changed)), and those in ``keys.stalled()`` with a later change lose both
fields and their entry (the same guarded script run), so a mark lasts at most one sweep
interval past the activity. A first run starts that read at its own time.

Round trips with nothing new: 4 (the job state, the two pages of the change index, the
page of the activity index), whatever the number of entities; ``run_job`` adds its record.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiError, AcmiValidationError, StoreCommandError
from acmi_core.base.model import EntityId, dumps
from acmi_core.base.stored import Unreadable, load_stored, scored
from acmi_core.coordination.agents import agent_id
from acmi_core.coordination.work import is_open
from acmi_core.jobs.runner import MAX_PER_RUN, JobRun, job_state
from acmi_core.store import scripts
from acmi_core.store.base import Arg
from acmi_core.store.writes import WritePlan, script_error

if TYPE_CHECKING:
    from acmi_core.client import Acmi

STALL_AFTER_MS: Final = 48 * 3600 * 1000
STALLED: Final = "STALLED"
MARK_BATCH: Final = 100  # agents sent to one script run (each edit <= MAX_OBJECT_BYTES)
# stored signals one run reads at most (sweep.lua holds the same number; one object always
# goes): 100 agents of 64 KiB signals were one run of 1.2 s, Redis blocked for every tenant;
# one object at MAX_OBJECT_BYTES is what one edit may cost (tests/integration/test_script_bounds.py)
MARK_BYTES: Final = 64 * 1024
ASKER: Final = "system:acmi-sweep"
STALL_CATEGORIES: Final = frozenset({"work", "project"})
LIVENESS: Final = ("liveness", "liveness_note")  # the mark's fields on a work item's signals
MAX_CID: Final = 128  # hitl.check_cid

# One script: the prologue keeps the marks of agents still silent, apply.lua writes them.
SWEEP: Final = scripts.SWEEP.script


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stall_cid(agent: str, heartbeat_ms: int) -> str:
    """The escalation's correlationId: one per agent and stall episode (its last
    heartbeat). An agent id too long for a correlationId is replaced by its digest."""
    cid = f"stalled-{agent}-{heartbeat_ms}"
    if len(cid) <= MAX_CID:
        return cid
    return f"stalled-{hashlib.sha256(agent.encode()).hexdigest()[:32]}-{heartbeat_ms}"


def _limit(run: JobRun) -> int:
    limit = run.params.get("max", MAX_PER_RUN)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise AcmiValidationError("max", "range", "must be an integer from 1 to 10000")
    return limit


def _cursor(state: dict[str, Any], prefix: str = "") -> tuple[int | None, int]:
    watermark, skip = state.get(f"{prefix}watermark"), state.get(f"{prefix}skip", 0)
    if isinstance(watermark, bool) or not isinstance(watermark, int):
        return None, 0
    return watermark, skip if isinstance(skip, int) and skip >= 0 else 0


def _page(
    acmi: Acmi, low: int | None, skip: int, cutoff: int, limit: int, key: str | None = None
) -> list[tuple[str, int]]:
    """Members of ``key`` (default: the activity index) scored in [low, cutoff), from the
    cursor (low, skip)."""
    reply = acmi.store.execute(
        (
            "ZRANGE",
            acmi.keys.activity() if key is None else key,
            "-inf" if low is None else low,
            f"({cutoff}",
            "BYSCORE",
            "LIMIT",
            skip,
            limit,
            "WITHSCORES",
        )
    )
    # keeps the page's length: the cursor counts members
    return scored(reply, keep_unreadable=True)


def _fields(heartbeat_ms: int) -> list[tuple[Any, str, str]]:
    note = f"no heartbeat since {_iso(heartbeat_ms)} (over 48 h): marked by the sweep"
    return [("set", "status", dumps(STALLED)), ("set", "status_note", dumps(note))]


def _work_fields(changed_ms: int) -> list[tuple[Any, str, str]]:
    note = f"no activity since {_iso(changed_ms)} (over 48 h): marked by the sweep"
    return [("set", LIVENESS[0], dumps(STALLED)), ("set", LIVENESS[1], dumps(note))]


CLEAR: Final[list[tuple[Any, str, str]]] = [("del", name, "null") for name in LIVENESS]


def _mark(acmi: Acmi, agents: list[tuple[str, int]], work: str | None = None) -> list[bool]:
    """One script run: STALLED on each agent still at the heartbeat read. True per mark.
    ``work``: "mark" or "clear" entities of the change index still at the change read."""
    plan = WritePlan()
    header: list[Arg] = []
    before = 0
    spans: list[int] = []
    for agent, heartbeat in agents:
        if work is None:
            key, fields = acmi.keys.signals(agent_id(agent)), _fields(heartbeat)
        else:
            key = acmi.keys.signals(EntityId.parse(agent))
            fields = _work_fields(heartbeat) if work == "mark" else CLEAR
        plan.edit_object(key, fields, field="signals")
        spans.append(len(plan.args) - before)
        before = len(plan.args)
    for (agent, heartbeat), span in zip(agents, spans, strict=True):
        header.extend((agent, heartbeat, span))
    index = acmi.keys.activity() if work is None else acmi.keys.changed()
    try:
        reply = scripts.SWEEP.eval(
            acmi.store,
            {"activity": index, "plan_keys": plan.keys},
            {"agent_count": len(agents), "agents": header, "ops": plan.args},
            script=SWEEP,
        )
    except StoreCommandError as exc:
        error = script_error(exc)
        if error is exc:
            raise
        raise error from None
    # apply.lua's: one per agent handled (a sweep plan has no ONCE op), the first ones of
    # ``agents``: the rest did not fit the run's MARK_BYTES and nothing was done to them
    marks = reply["results"]
    assert isinstance(marks, list) and 1 <= len(marks) <= len(agents), "sweep.lua reply shape"
    return [isinstance(r, bytes) for r in marks]


def _mark_all(
    acmi: Acmi, agents: list[tuple[str, int]], work: str | None = None
) -> tuple[list[bool], int]:
    """``_mark`` over every agent, in as many runs as their signals' bytes need: True per
    mark, and the number of runs."""
    kept: list[bool] = []
    runs = 0
    while len(kept) < len(agents):
        kept += _mark(acmi, agents[len(kept) :], work)
        runs += 1
    return kept, runs


def _mark_batches(
    acmi: Acmi, items: list[tuple[str, int]], problems: list[str], work: str | None = None
) -> tuple[list[tuple[str, int]], int, int]:
    """Every item marked (or cleared) in batches of MARK_BATCH: the ones done, how many were
    not (a write since the read), and the script runs."""
    done: list[tuple[str, int]] = []
    missed = runs = 0
    for start in range(0, len(items), MARK_BATCH):
        batch = items[start : start + MARK_BATCH]
        try:
            kept, batch_runs = _mark_all(acmi, batch, work)
            runs += batch_runs
        except AcmiError:  # one item's signals refused (not JSON, too large): one by one
            kept = []
            for one in batch:
                try:
                    kept += _mark(acmi, [one], work)
                    runs += 1
                except AcmiError as exc:
                    kept.append(False)
                    problems.append(f"{one[0]}: signals not marked ({exc.message[:120]})")
        for item, ok in zip(batch, kept, strict=True):
            if ok:
                done.append(item)
            else:
                missed += 1
    return done, missed, runs


def _advance(
    acmi: Acmi,
    key: str,
    page: list[tuple[str, int]],
    low: int | None,
    skip: int,
    end: int,
    limit: int,
) -> tuple[int, int, int]:
    """The cursor after ``page`` of [low, end): (watermark, skip, backlog)."""
    if len(page) < limit:  # everything below the end is handled
        return end, 0, 0
    last = page[-1][1]
    ties = sum(1 for _, score in page if score == last)
    skip = skip + ties if last == low else ties
    counted = acmi.store.execute(("ZCOUNT", key, last, f"({end}"))
    return last, skip, max(0, (counted if isinstance(counted, int) else 0) - skip)


def _escalate(acmi: Acmi, entity: str, since: int, what: str, advice: str) -> bool:
    created = acmi.hitl.create(
        f"{entity[:180]} stalled",  # a topic is at most 200 characters
        f"No {what} from {entity} since {_iso(since)} (over 48 h). {advice}",
        asked_by=ASKER,
        urgency="P1",
        addressee=acmi.settings.operator,
        correlation_id=stall_cid(entity, since),
    )
    return created.created


def _stall_category(member: str) -> bool:
    category, _, local = member.partition(":")
    return category in STALL_CATEGORIES and bool(local)


def _still_open(
    acmi: Acmi, items: list[tuple[str, int]], problems: list[str]
) -> list[tuple[str, int]]:
    """The items whose signals' status is not closed (one pipeline of GETs)."""
    keys: list[str] = []
    kept: list[tuple[str, int]] = []
    for member, changed in items:
        try:
            keys.append(acmi.keys.signals(EntityId.parse(member)))
            kept.append((member, changed))
        except AcmiValidationError:
            problems.append(f"{member[:80]!r}: not an entity id, skipped")
    if not keys:
        return []
    replies = acmi.store.pipeline([("GET", key) for key in keys])
    found: list[tuple[str, int]] = []
    for item, raw in zip(kept, replies, strict=True):
        try:
            signals = load_stored(raw) if isinstance(raw, bytes) else {}
        except Unreadable:
            signals = {}  # marked anyway: the mark's edit reports what it cannot edit
        status = signals.get("status") if isinstance(signals, dict) else None
        if is_open(status):
            found.append(item)
    return found


def _sweep_work(
    acmi: Acmi, state: dict[str, Any], now: int, cutoff: int, limit: int, problems: list[str]
) -> dict[str, Any]:
    """Work items and projects (module docstring): clear the marks of the ones active since
    the last run, then mark the open ones silent past the cutoff and escalate each once."""
    changed, stalled = acmi.keys.changed(), acmi.keys.stalled()
    low, skip = _cursor(state, "active_")
    low = now if low is None else low
    active = _page(acmi, low, skip, now + 1, limit, changed)
    ours = [(m, s) for m, s in active if _stall_category(m)]
    cleared: list[tuple[str, int]] = []
    if ours:
        marks = acmi.store.pipeline([("ZSCORE", stalled, member) for member, _ in ours])
        again = [
            (member, score)
            for (member, score), mark in zip(ours, marks, strict=True)
            if isinstance(mark, bytes) and float(mark) < score
        ]
        cleared = _mark_batches(acmi, again, problems, "clear")[0]
    active_mark, active_skip, active_backlog = _advance(
        acmi, changed, active, low, skip, now + 1, limit
    )

    low, skip = _cursor(state, "work_")
    if low is not None and low >= cutoff:  # the clock went back: nothing can have crossed
        page: list[tuple[str, int]] = []
        work_mark, work_skip, backlog = low, skip, 0
    else:
        page = _page(acmi, low, skip, cutoff, limit, changed)
        work_mark, work_skip, backlog = _advance(acmi, changed, page, low, skip, cutoff, limit)
    candidates = _still_open(acmi, [(m, s) for m, s in page if _stall_category(m)], problems)
    marked, revived, _ = _mark_batches(acmi, candidates, problems, "mark")
    if marked or cleared:  # the stalled index: what a later run clears
        plan = WritePlan()
        for member, score in marked:
            plan.zset(stalled, score, member)
        for member, _ in cleared:
            plan.zrem(stalled, member)
        plan.apply(acmi.store)
    escalated = sum(
        _escalate(
            acmi,
            member,
            score,
            "activity",
            "Check on it, or close it; its next event clears STALLED.",
        )
        for member, score in marked
    )
    return {
        "work_stalled": len(marked),
        "work_revived": revived,
        "work_escalated": escalated,
        "work_cleared": len(cleared),
        "work_watermark": work_mark,
        "work_skip": work_skip,
        "active_watermark": active_mark,
        "active_skip": active_skip,
        "work_backlog": backlog + active_backlog,
    }


def run(acmi: Acmi, run: JobRun) -> dict[str, Any]:
    """The sweep (module docstring). Returns counts: ``stalled`` (marked), ``revived``
    (heartbeated before the mark), ``escalated`` (HITL items created; a re-run finds
    them and counts ``already_escalated``), ``skipped`` (index members that are not
    agent ids), the same of work items and projects (``work_stalled``, ``work_revived``,
    ``work_escalated``, ``work_cleared``), the cursors, ``backlog`` and ``problems``."""
    limit = _limit(run)
    now = acmi.clock()
    cutoff = now - STALL_AFTER_MS
    state = job_state(acmi, run.job)
    problems: list[str] = []
    work = _sweep_work(acmi, state, now, cutoff, limit, problems)
    low, skip = _cursor(state)
    if low is not None and low >= cutoff:  # the clock went back: nothing can have crossed
        return {
            **work,
            "stalled": 0,
            "watermark": low,
            "skip": skip,
            "backlog": work["work_backlog"],
            "problems": problems[:10],
        }
    page = _page(acmi, low, skip, cutoff, limit)

    agents: list[tuple[str, int]] = []
    for member, heartbeat in page:
        try:
            agents.append((str(agent_id(member)), heartbeat))
        except AcmiValidationError:
            problems.append(f"{member[:80]!r}: not an agent id, skipped")
    marked, revived, runs = _mark_batches(acmi, agents, problems)

    escalated = already = 0
    for agent, heartbeat in marked:
        advice = "Check on it, restart it or reassign its work; its next heartbeat clears STALLED."
        if _escalate(acmi, agent, heartbeat, "heartbeat", advice):
            escalated += 1
        else:
            already += 1

    key = acmi.keys.activity()
    watermark, skip, backlog = _advance(acmi, key, page, low, skip, cutoff, limit)
    return {
        "stalled": len(marked),
        "revived": revived,
        "escalated": escalated,
        "already_escalated": already,
        "skipped": len(page) - len(agents),
        "mark_runs": runs,
        "cutoff": cutoff,
        "watermark": watermark,
        "skip": skip,
        **work,
        "backlog": backlog + work["work_backlog"],
        "problems": problems[:10],
    }


sweep = run  # the job's name in the issue

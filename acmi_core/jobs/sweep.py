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
per agent escalated + 1 ZCOUNT when the page was full (the backlog). With nothing new:
2, whatever the number of agents or stalled agents. ``run_job`` adds its own record.

A heartbeat written with a timestamp already below the watermark (``heartbeat(now=...)``
backdated by more than 48 h) is not a live heartbeat and is never swept.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiError, AcmiValidationError, StoreCommandError
from acmi_core.base.model import dumps
from acmi_core.base.stored import scored
from acmi_core.coordination.agents import agent_id
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


def _cursor(state: dict[str, Any]) -> tuple[int | None, int]:
    watermark, skip = state.get("watermark"), state.get("skip", 0)
    if isinstance(watermark, bool) or not isinstance(watermark, int):
        return None, 0
    return watermark, skip if isinstance(skip, int) and skip >= 0 else 0


def _page(acmi: Acmi, low: int | None, skip: int, cutoff: int, limit: int) -> list[tuple[str, int]]:
    reply = acmi.store.execute(
        (
            "ZRANGE",
            acmi.keys.activity(),
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


def _mark(acmi: Acmi, agents: list[tuple[str, int]]) -> list[bool]:
    """One script run: STALLED on each agent still at the heartbeat read. True per mark."""
    plan = WritePlan()
    header: list[Arg] = []
    before = 0
    spans: list[int] = []
    for agent, heartbeat in agents:
        plan.edit_object(acmi.keys.signals(agent_id(agent)), _fields(heartbeat), field="signals")
        spans.append(len(plan.args) - before)
        before = len(plan.args)
    for (agent, heartbeat), span in zip(agents, spans, strict=True):
        header.extend((agent, heartbeat, span))
    try:
        reply = scripts.SWEEP.eval(
            acmi.store,
            {"activity": acmi.keys.activity(), "plan_keys": plan.keys},
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


def _mark_all(acmi: Acmi, agents: list[tuple[str, int]]) -> tuple[list[bool], int]:
    """``_mark`` over every agent, in as many runs as their signals' bytes need: True per
    mark, and the number of runs."""
    kept: list[bool] = []
    runs = 0
    while len(kept) < len(agents):
        kept += _mark(acmi, agents[len(kept) :])
        runs += 1
    return kept, runs


def run(acmi: Acmi, run: JobRun) -> dict[str, Any]:
    """The sweep (module docstring). Returns counts: ``stalled`` (marked), ``revived``
    (heartbeated before the mark), ``escalated`` (HITL items created; a re-run finds
    them and counts ``already_escalated``), ``skipped`` (index members that are not
    agent ids), ``watermark``, ``skip``, ``backlog`` and ``problems``."""
    limit = _limit(run)
    now = acmi.clock()
    cutoff = now - STALL_AFTER_MS
    low, skip = _cursor(job_state(acmi, run.job))
    if low is not None and low >= cutoff:  # the clock went back: nothing can have crossed
        return {"stalled": 0, "watermark": low, "skip": skip, "backlog": 0}
    page = _page(acmi, low, skip, cutoff, limit)

    agents: list[tuple[str, int]] = []
    problems: list[str] = []
    for member, heartbeat in page:
        try:
            agents.append((str(agent_id(member)), heartbeat))
        except AcmiValidationError:
            problems.append(f"{member[:80]!r}: not an agent id, skipped")
    marked: list[tuple[str, int]] = []
    revived = runs = 0
    for start in range(0, len(agents), MARK_BATCH):
        batch = agents[start : start + MARK_BATCH]
        try:
            kept, batch_runs = _mark_all(acmi, batch)
            runs += batch_runs
        except AcmiError:  # one agent's signals refused (not JSON, too large): one by one
            kept = []
            for one in batch:
                try:
                    kept += _mark(acmi, [one])
                    runs += 1
                except AcmiError as exc:
                    kept.append(False)
                    problems.append(f"{one[0]}: signals not marked ({exc.message[:120]})")
        for item, ok in zip(batch, kept, strict=True):
            if ok:
                marked.append(item)
            else:
                revived += 1

    escalated = already = 0
    for agent, heartbeat in marked:
        created = acmi.hitl.create(
            f"{agent[:180]} stalled",  # a topic is at most 200 characters
            f"No heartbeat from {agent} since {_iso(heartbeat)} (over 48 h). Check on it, "
            "restart it or reassign its work; its next heartbeat clears STALLED.",
            asked_by=ASKER,
            urgency="P1",
            addressee=acmi.settings.operator,
            correlation_id=stall_cid(agent, heartbeat),
        )
        if created.created:
            escalated += 1
        else:
            already += 1

    if len(page) < limit:  # everything below the cutoff is handled
        watermark, skip, backlog = cutoff, 0, 0
    else:
        last = page[-1][1]
        ties = sum(1 for _, score in page if score == last)
        skip = skip + ties if last == low else ties
        watermark = last
        counted = acmi.store.execute(("ZCOUNT", acmi.keys.activity(), watermark, f"({cutoff}"))
        backlog = max(0, (counted if isinstance(counted, int) else 0) - skip)
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
        "backlog": backlog,
        "problems": problems[:10],
    }


sweep = run  # the job's name in the issue

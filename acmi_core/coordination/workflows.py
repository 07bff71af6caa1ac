"""The RL cycle (``acmi.workflows``): execute a workflow step, assess it, learn from it.

    run = acmi.workflows.execute("deploy-web", "build", "agent:claude", correlation_id="run-42")
    acmi.workflows.assess("deploy-web", "build", 85, {"tests": "green", "minutes": 4},
                          "agent:claude", correlation_id="run-42")
    acmi.workflows.improve("deploy-web", "build", "cache the wheel dir", "agent:claude")
    acmi.workflows.unassessed("deploy-web")     # executions nobody scored yet
    acmi.workflows.lessons(agent="agent:claude")  # what the next run starts from

A workflow is the entity ``workflow:<id>`` (a bare ``<id>`` means the same). Its events go
to its timeline as Comms v1.1 events: ``source`` is the agent (any entity id; a bare id
means ``agent:<id>``), ``correlationId`` is the *run* id: every event of one run of the
workflow (each step's execution, assessment and lesson) carries it. Without one, an
operation uses ``<workflow>/<step>`` (``workflow:deploy-web/build``): then one assessment
covers every earlier execution of that step that had none either, which is the
reference's ``logAssessment(stepId, ...)``; pass the run id to score runs one by one.

Kinds and payloads:

- ``step-executed``: ``{workflow, step, ...payload}`` (``workflow`` and ``step`` are ours)
- ``assessment``: ``{workflow, step, score, criteria[, note]}``, score an integer 0-100,
  criteria ``{name: number|text}`` or ``[text, ...]``
- ``improvement``: ``{workflow, step, lesson}``, lesson 1-2,000 characters

Every write is ONE WritePlan (one round trip, atomic): the timeline event, the namespace
index (``acmi:workflow:list``), ``agent_workflows(agent)`` (ZSET: workflow entity id ->
ts of the agent's last event on it), for an execution or an assessment the step's
pending runs (``keys.workflow_pending``) and, for an improvement, the tenant's lessons feed.

The seed's "no execution without an assessment entry" (``ACMI_WORKFLOW_REQUIRE_ASSESSMENT``,
default on): an execute is a 409 ``assessment_required`` naming the step and the run while
an earlier run of the step has no assessment. It checks the step's pending runs (ZSET run id
-> ts of its earliest unassessed execution; execute adds, the run's assessment removes) with
apply.lua's ``ONLY`` op first in its plan: one script run. A retry meets only its own run at
its own ts and passes (so does the same run again in the same ms). Runs executed before this
index existed are reported by ``unassessed`` but block nothing.

Index contract (read directly by the bootstrap bundle, ``store/lua/bootstrap.lua``; keep it):

- ``keys.agent_workflows(agent)``: ZSET, member = the workflow's full entity id
  (``workflow:deploy-web``), score = ts (ms) of the agent's newest execute/assess/improve.
- ``keys.lessons()``: ZSET, member = the ``improvement`` event JSON exactly as stored in
  the workflow's timeline, score = its ts; capped at :data:`LESSONS_CAP` (1,000) newest by
  the same step that adds one. Its ``payload.workflow`` is the same full entity id as the
  ``agent_workflows`` member, so the bootstrap reads the newest
  :data:`BOOTSTRAP_LESSONS_WINDOW` (200) members and keeps those whose
  ``payload.workflow`` is in the agent's set: the prior lessons that seed the next run.
  (``store/lua/bootstrap.lua`` compares ids with any ``workflow:`` prefix stripped, so a bare
  id another writer put in either place matches too.)

Reads are one request each and bounded: ``unassessed`` and ``assessments`` examine at most
the newest :data:`SCAN_EVENTS` (500) events of the workflow's timeline (in the
``since_ms`` range) and say when older ones were left unexamined; ``lessons(workflow=)``
looks at the same window; ``lessons(agent=)`` reads the newest
:data:`MAX_AGENT_WORKFLOWS` (1,000) workflows of the agent and the newest
:data:`BOOTSTRAP_LESSONS_WINDOW` lessons of the feed (the feed window the bootstrap reads;
the bootstrap matches it against fewer workflows, its newest 50), in one pipeline.
Stored members another tool wrote (legacy events, other kinds, not JSON) are tolerated:
examined, never matched, never raised on.

Limits: step ``[A-Za-z0-9_.:-]{1,128}``, correlation id 1-256 characters, summary 1-500,
at most 32 criteria (names 1-128 characters, texts 1-500, numbers finite), note 1-500.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import (
    AcmiValidationError,
    Conflict,
    CorruptData,
    Pending,
    StoreCommandError,
)
from acmi_core.base.model import (
    MAX_SUMMARY_LEN,
    EntityId,
    Event,
    check_json_object,
    parse_event,
    summary_too_long,
)
from acmi_core.base.stored import Unreadable, load_stored
from acmi_core.coordination.results import (
    AssessmentsBody,
    Lessons,
    StepScoresBody,
    UnassessedBody,
    WindowBody,
)
from acmi_core.entities.api import TimelineAPI
from acmi_core.store.base import Reply
from acmi_core.store.writes import WritePlan

if TYPE_CHECKING:
    from acmi_core.entities.context import Context

STEP_RE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
MAX_CORRELATION_LEN: Final = 256
MAX_LESSON_LEN: Final = 2_000
MAX_CRITERIA: Final = 32
MAX_CRITERION_NAME: Final = 128
MAX_TEXT: Final = 500
LESSONS_CAP: Final = 1_000
"""The tenant's lessons feed keeps this many newest improvements."""
BOOTSTRAP_LESSONS_WINDOW: Final = 200
"""Newest feed members the bootstrap (and ``lessons(agent=)``) filters."""
MAX_AGENT_WORKFLOWS: Final = 1_000
"""Newest workflows of an agent ``lessons(agent=)`` matches lessons against."""
SCAN_EVENTS: Final = 500
"""Newest timeline events ``unassessed``, ``assessments`` and ``lessons(workflow=)`` read."""
MAX_LIMIT: Final = SCAN_EVENTS

EXECUTED: Final = "step-executed"
ASSESSMENT: Final = "assessment"
IMPROVEMENT: Final = "improvement"
RESERVED_PAYLOAD: Final = ("workflow", "step")


# --- input checks ---------------------------------------------------------------------------


def workflow_id(raw: object, field: str = "workflow") -> EntityId:
    if isinstance(raw, str) and ":" not in raw:
        raw = f"workflow:{raw}"
    eid = EntityId.parse(raw, field)
    if eid.category != "workflow":
        raise AcmiValidationError(field, "category", "must be a workflow:<id> entity (or <id>)")
    return eid


def actor_id(raw: object, field: str = "agent") -> EntityId:
    """Who acts: any entity id (a person may assess too); a bare id means agent:<id>."""
    if isinstance(raw, str) and ":" not in raw:
        raw = f"agent:{raw}"
    return EntityId.parse(raw, field)


def check_step(step: object) -> str:
    if not isinstance(step, str) or not STEP_RE.fullmatch(step):
        raise AcmiValidationError("step", "step_id", "must match [A-Za-z0-9_.:-]{1,128}")
    return step


def _text(value: object, name: str, max_len: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > max_len:
        raise AcmiValidationError(
            name, "string", f"must be a non-blank string of at most {max_len} characters"
        )
    return value


def check_correlation(value: object, wf: EntityId, step: str) -> str:
    if value is None:
        return f"{wf}/{step}"
    return _text(value, "correlation_id", MAX_CORRELATION_LEN)


def check_score(score: object) -> int:
    if isinstance(score, bool) or not isinstance(score, int):
        raise AcmiValidationError("score", "integer", "must be an integer 0-100")
    if not 0 <= score <= 100:
        raise AcmiValidationError("score", "range", "must be an integer 0-100")
    return score


def check_criteria(criteria: object) -> dict[str, Any] | list[str]:
    if isinstance(criteria, dict):
        if len(criteria) > MAX_CRITERIA:
            raise AcmiValidationError("criteria", "max_items", f"at most {MAX_CRITERIA} criteria")
        checked: dict[str, Any] = {}
        for name, value in criteria.items():
            _text(name, "criteria", MAX_CRITERION_NAME)
            where = f"criteria.{name}"
            if isinstance(value, str):
                checked[name] = _text(value, where, MAX_TEXT)
            elif (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                checked[name] = value
            else:
                raise AcmiValidationError(where, "type", "must be a finite number or a text")
        return checked
    if isinstance(criteria, list):
        if len(criteria) > MAX_CRITERIA:
            raise AcmiValidationError("criteria", "max_items", f"at most {MAX_CRITERIA} criteria")
        return [_text(item, f"criteria[{i}]", MAX_TEXT) for i, item in enumerate(criteria)]
    raise AcmiValidationError(
        "criteria", "type", "must be an object {name: number|text} or a list of texts"
    )


def check_limit(limit: object, max_limit: int = MAX_LIMIT) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= max_limit:
        raise AcmiValidationError("limit", "range", f"must be an integer 1-{max_limit}")
    return limit


def _summary(text: str) -> str:
    """A generated summary cut to the Comms limit (500 UTF-16 units) with an ellipsis."""
    if not summary_too_long(text):
        return text
    text = text[: MAX_SUMMARY_LEN - 1]
    while summary_too_long(text + "…"):  # characters beyond U+FFFF count 2
        text = text[:-1]
    return text + "…"


# --- stored events, read tolerantly ---------------------------------------------------------


@dataclass(frozen=True)
class _Stored:
    data: dict[str, Any]
    ts: int | float
    kind: str
    cid: str
    step: str | None
    workflow: str | None
    payload: dict[str, Any]


def _stored(member: Reply) -> _Stored | None:
    """What matching needs from a member; None for what cannot take part (not JSON, a
    legacy event without a usable ts): such members are examined but never match."""
    if not isinstance(member, bytes):
        return None
    try:
        data = load_stored(member)
    except Unreadable:
        return None
    if not isinstance(data, dict):
        return None
    ts = data.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        return None
    payload = data.get("payload")
    payload = payload if isinstance(payload, dict) else {}
    step, workflow = payload.get("step"), payload.get("workflow")
    kind, cid = data.get("kind"), data.get("correlationId")
    return _Stored(
        data,
        ts,
        kind if isinstance(kind, str) else "",
        cid if isinstance(cid, str) else "",
        step if isinstance(step, str) else None,
        workflow if isinstance(workflow, str) else None,
        payload,
    )


def _bare(workflow: str) -> str:
    return workflow.removeprefix("workflow:")


def _members(reply: Reply | StoreCommandError, key: str) -> list[Reply]:
    if isinstance(reply, StoreCommandError):  # the key holds another type (another tool)
        raise CorruptData(f"{key}: {reply}", field=key)
    return reply if isinstance(reply, list) else []


# --- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """How much of a timeline a bounded read examined. ``complete`` False: events older
    than ``oldest_examined_ts`` (ms) were not examined (at most ``SCAN_EVENTS`` are)."""

    examined: int
    complete: bool
    oldest_examined_ts: int | float | None

    def to_dict(self) -> WindowBody:
        return {
            "examined": self.examined,
            "complete": self.complete,
            "oldest_examined_ts": self.oldest_examined_ts,
            "scan_limit": SCAN_EVENTS,
        }


@dataclass(frozen=True)
class Unassessed:
    """Executions without an assessment, newest first (as stored), within ``window``."""

    workflow: str
    executions: list[dict[str, Any]]
    window: Window

    def to_dict(self) -> UnassessedBody:
        return {
            "workflow": self.workflow,
            "unassessed": self.executions,
            **self.window.to_dict(),
        }


@dataclass
class StepScores:
    count: int = 0
    total: float = 0
    last: int | None = None
    last_ts: int | float | None = None

    def to_dict(self) -> StepScoresBody:
        mean = round(self.total / self.count, 2) if self.count else None
        return {"count": self.count, "mean": mean, "last": self.last, "last_ts": self.last_ts}


@dataclass(frozen=True)
class Assessments:
    workflow: str
    steps: dict[str, StepScores] = field(default_factory=dict)
    window: Window = Window(0, True, None)

    def to_dict(self) -> AssessmentsBody:
        return {
            "workflow": self.workflow,
            "steps": {name: s.to_dict() for name, s in sorted(self.steps.items())},
            **self.window.to_dict(),
        }


# --- the API --------------------------------------------------------------------------------


class WorkflowAPI:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._keys = ctx.keys
        self._timeline = TimelineAPI(ctx)

    # writes: one WritePlan each ------------------------------------------------------------

    def _write(
        self,
        wf: EntityId,
        agent: EntityId,
        kind: str,
        cid: str,
        summary: str,
        payload: dict[str, Any],
        *,
        lesson: bool = False,
        step: str | None = None,
    ) -> Event:
        now = self._ctx.clock()
        event = parse_event(
            {
                "source": str(agent),
                "kind": kind,
                "correlationId": cid,
                "summary": summary,
                "payload": payload,
            },
            now_ms=now,
            tenant=self._keys.tenant,
        )
        plan = WritePlan()
        pending = None if step is None else self._keys.workflow_pending(wf, step)
        if kind == EXECUTED and pending and self._ctx.settings.workflow_require_assessment:
            plan.only(pending, cid, event.ts)  # first: it reads the ZSET as stored
        self._timeline.stage(plan, wf, [event])
        plan.zset(self._keys.agent_workflows(agent), event.ts, str(wf))
        if pending is not None and kind == EXECUTED:
            plan.zmin(pending, event.ts, cid)  # the run's earliest unassessed execution
        elif pending is not None:
            plan.zrem(pending, cid)  # an assessment covers the run's executions before it
        if lesson:
            plan.zadd(self._keys.lessons(), event.ts, event.to_json())
            plan.zkeep(self._keys.lessons(), LESSONS_CAP)
        try:
            plan.apply(self._ctx.store)
        except Pending as exc:
            raise Conflict(
                f"step {step} of {wf}: run {exc.member} has no assessment entry (executed at "
                f"{exc.score}); assess it before the next execution "
                "(ACMI_WORKFLOW_REQUIRE_ASSESSMENT)",
                field="step",
                rule="assessment_required",
            ) from None
        return event

    def execute(
        self,
        workflow: str,
        step: str,
        agent: str,
        summary: str | None = None,
        correlation_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> Event:
        """Log that ``agent`` executed ``step`` (kind ``step-executed``); a Conflict while
        an earlier run of ``step`` has no assessment (above). One round trip, checked."""
        wf, step, who = workflow_id(workflow), check_step(step), actor_id(agent)
        cid = check_correlation(correlation_id, wf, step)
        self._ids(wf, step, who, cid)
        summary = self._ctx.guard(summary, "summary")
        payload = self._ctx.guard(payload, "payload")
        body: dict[str, Any] = {"workflow": str(wf), "step": step}
        if payload is not None:
            extra = check_json_object(payload, "payload")
            for name in RESERVED_PAYLOAD:
                if name in extra:
                    raise AcmiValidationError(
                        f"payload.{name}", "reserved", "is set from the route; leave it out"
                    )
            body.update(extra)
        if summary is None:
            text = _summary(f"{who} executed step {step} of {wf}")
        else:
            text = _text(summary, "summary", MAX_SUMMARY_LEN)
            if summary_too_long(text):
                raise AcmiValidationError("summary", "max_length", "at most 500 UTF-16 units")
        return self._write(wf, who, EXECUTED, cid, text, body, step=step)

    def assess(
        self,
        workflow: str,
        step: str,
        score: int,
        criteria: dict[str, Any] | list[str],
        agent: str,
        correlation_id: str | None = None,
        note: str | None = None,
    ) -> Event:
        """Score an executed step 0-100 (kind ``assessment``). One round trip. It covers
        the executions of ``step`` with the same correlation id at or before it."""
        wf, step = workflow_id(workflow), check_step(step)
        criteria = self._ctx.guard(criteria, "criteria")
        note = self._ctx.guard(note, "note")
        score, checked = check_score(score), check_criteria(criteria)
        who = actor_id(agent)
        cid = check_correlation(correlation_id, wf, step)
        self._ids(wf, step, who, cid)
        body: dict[str, Any] = {"workflow": str(wf), "step": step, "score": score}
        body["criteria"] = checked
        text = f"{who} assessed step {step} of {wf}: {score}/100"
        if note is not None:
            body["note"] = _text(note, "note", MAX_TEXT)
            text += f" ({note})"
        return self._write(wf, who, ASSESSMENT, cid, _summary(text), body, step=step)

    def improve(
        self,
        workflow: str,
        step: str,
        lesson: str,
        agent: str,
        correlation_id: str | None = None,
    ) -> Event:
        """Record a lesson (kind ``improvement``), in the workflow's timeline and the
        tenant's lessons feed (trimmed to the newest 1,000 in the same step). One round
        trip."""
        wf, step = workflow_id(workflow), check_step(step)
        lesson = _text(self._ctx.guard(lesson, "lesson"), "lesson", MAX_LESSON_LEN)
        who = actor_id(agent)
        cid = check_correlation(correlation_id, wf, step)
        self._ids(wf, step, who, cid)
        body = {"workflow": str(wf), "step": step, "lesson": lesson}
        text = _summary(f"{who} lesson on {wf} step {step}: {lesson}")
        return self._write(wf, who, IMPROVEMENT, cid, text, body, lesson=True)

    def _ids(self, wf: EntityId, step: str, who: EntityId, cid: str) -> None:
        """The ids a workflow write names: refused with a secret in them, under any policy
        (they name keys and are echoed in events and logs)."""
        self._ctx.guard_ids(
            (wf, "workflow"), (step, "step"), (who, "agent"), (cid, "correlation_id")
        )

    # reads: one request each ---------------------------------------------------------------

    def _window(self, wf: EntityId, since_ms: float | None) -> tuple[list[_Stored], Window]:
        """The newest SCAN_EVENTS events at or after ``since_ms``, newest first."""
        key = self._keys.timeline(wf)
        low = "-inf"
        if since_ms is not None:
            if (
                isinstance(since_ms, bool)
                or not isinstance(since_ms, int | float)
                or not math.isfinite(since_ms)
            ):
                raise AcmiValidationError("since_ms", "type", "must be a number of milliseconds")
            low = repr(since_ms)
        command = ("ZRANGE", key, "+inf", low, "BYSCORE", "REV", "LIMIT", 0, SCAN_EVENTS + 1)
        try:
            reply = self._ctx.store.execute(command)
        except StoreCommandError as exc:
            raise CorruptData(f"{key}: {exc}", field=key) from None
        members = _members(reply, key)
        complete = len(members) <= SCAN_EVENTS
        members = members[:SCAN_EVENTS]
        events = [s for s in map(_stored, members) if s is not None]
        oldest = None if complete or not events else min(s.ts for s in events)
        return events, Window(len(members), complete, oldest)

    def unassessed(
        self, workflow: str, since_ms: float | None = None, limit: int = 50
    ) -> Unassessed:
        """Executions (kind ``step-executed``) no assessment covers, newest first.

        An assessment covers an execution with the same ``payload.step`` and
        ``correlationId`` and a ts at or after it (equal ts counts: same millisecond).
        Examines at most the newest ``SCAN_EVENTS`` (500) events at or after
        ``since_ms``; when there were more, ``window.complete`` is False and executions
        older than ``window.oldest_examined_ts`` were not examined (every execution in
        the window is judged exactly: its assessments are newer, so inside it). One
        round trip; ``limit`` 1-500."""
        wf, limit = workflow_id(workflow), check_limit(limit)
        events, window = self._window(wf, since_ms)
        newest_assessment: dict[tuple[str, str], float] = {}
        for ev in events:
            if ev.kind == ASSESSMENT and ev.step is not None:
                pair = (ev.step, ev.cid)
                newest_assessment[pair] = max(ev.ts, newest_assessment.get(pair, -math.inf))
        found = [
            ev.data
            for ev in events
            if ev.kind == EXECUTED
            and ev.step is not None
            and newest_assessment.get((ev.step, ev.cid), -math.inf) < ev.ts
        ]
        return Unassessed(str(wf), found[:limit], window)

    def assessments(
        self, workflow: str, step: str | None = None, since_ms: float | None = None
    ) -> Assessments:
        """Scores per step (count, mean, last) over the newest ``SCAN_EVENTS`` events
        (the same window as ``unassessed``). One round trip."""
        wf = workflow_id(workflow)
        only = None if step is None else check_step(step)
        events, window = self._window(wf, since_ms)
        steps: dict[str, StepScores] = {}
        for ev in events:  # newest first: the first seen is the last given
            score = ev.payload.get("score") if ev.kind == ASSESSMENT else None
            if ev.step is None or isinstance(score, bool) or not isinstance(score, int | float):
                continue
            if only is not None and ev.step != only:
                continue
            scores = steps.setdefault(ev.step, StepScores())
            scores.count += 1
            scores.total += score
            if scores.last is None:
                scores.last, scores.last_ts = int(score), ev.ts
        return Assessments(str(wf), steps, window)

    def lessons(
        self, workflow: str | None = None, agent: str | None = None, limit: int = 10
    ) -> Lessons:
        """The newest ``limit`` (1-200) lessons (``improvement`` events as stored),
        newest first: of one workflow (among its newest ``SCAN_EVENTS`` events), or of
        the workflows ``agent`` works on (its newest ``MAX_AGENT_WORKFLOWS`` workflows,
        matched against the newest ``BOOTSTRAP_LESSONS_WINDOW`` lessons of the feed, the
        window the bootstrap reads). Give exactly one of the two. One round trip."""
        limit = check_limit(limit, BOOTSTRAP_LESSONS_WINDOW)
        if (workflow is None) == (agent is None):
            raise AcmiValidationError("workflow", "one_of", "give exactly one of workflow, agent")
        if workflow is not None:
            wf = workflow_id(workflow)
            events, _ = self._window(wf, None)
            found = [ev.data for ev in events if ev.kind == IMPROVEMENT]
            return found[:limit]
        who = actor_id(agent)
        mine, feed = self._keys.agent_workflows(who), self._keys.lessons()
        replies = self._ctx.store.pipeline(
            [
                ("ZRANGE", mine, 0, MAX_AGENT_WORKFLOWS - 1, "REV"),
                ("ZRANGE", feed, 0, BOOTSTRAP_LESSONS_WINDOW - 1, "REV"),
            ]
        )
        # compared without the category, as lua/bootstrap.lua does: a bare id another
        # writer left in either place still matches
        workflows = {
            _bare(m.decode("utf-8", "replace"))
            for m in _members(replies[0], mine)
            if isinstance(m, bytes)
        }
        lessons = [s for s in map(_stored, _members(replies[1], feed)) if s is not None]
        return [s.data for s in lessons if s.workflow and _bare(s.workflow) in workflows][:limit]


__all__ = [
    "BOOTSTRAP_LESSONS_WINDOW",
    "LESSONS_CAP",
    "SCAN_EVENTS",
    "Assessments",
    "Unassessed",
    "Window",
    "WorkflowAPI",
]

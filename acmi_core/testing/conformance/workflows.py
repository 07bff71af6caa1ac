"""``workflows``: the RL cycle (``acmi.workflows``): execute, assess, improve, the lessons
feed and its cap, unassessed steps.

Each check works in the context's own tenant (the lessons feed is one per tenant) on a
clock it moves by hand, and deletes the bookkeeping keys it wrote (the workflow entities
are tracked, so cleanup deletes them)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from acmi_core.base.errors import Conflict
from acmi_core.base.model import EntityId
from acmi_core.base.stored import StoredObject, StoredValue
from acmi_core.client import Acmi
from acmi_core.coordination.workflows import LESSONS_CAP
from acmi_core.testing.conformance.harness import (
    Context,
    check,
    expect,
    expect_equal,
    expect_raises,
    expect_rejected,
)
from acmi_core.testing.conformance.helpers import BASE_TS, exists

AGENT = "agent:conf-rl"


class _Clock:
    def __init__(self) -> None:
        self.now = BASE_TS

    def __call__(self) -> int:
        return self.now


STEPS = ("build", "test", "deploy", "s")


@contextmanager
def _tenant(ctx: Context, *workflows: str, require: bool = True) -> Iterator[tuple[Acmi, _Clock]]:
    """The context's tenant on a hand-moved clock, with ACMI_WORKFLOW_REQUIRE_ASSESSMENT
    ``require``; its feed, agent sets and the ``workflows``' pending runs deleted after."""
    base = ctx.tenant()
    clock = _Clock()
    settings = base.settings.model_copy(update={"workflow_require_assessment": require})
    acmi = Acmi(base.store, settings, tenant=base.tenant, clock=clock)
    try:
        yield acmi, clock
    finally:
        acmi.store.execute(("DEL", acmi.keys.lessons()))
        for agent in (AGENT, "agent:conf-other"):
            acmi.store.execute(("DEL", acmi.keys.agent_workflows(EntityId.parse(agent))))
        for wf in workflows:
            for step in STEPS:
                key = acmi.keys.workflow_pending(EntityId.parse(wf), step)
                acmi.store.execute(("DEL", key))


def _members(acmi: Acmi, key: str) -> list[bytes]:
    reply = acmi.store.execute(("ZRANGE", key, 0, -1))
    return [m for m in reply if isinstance(m, bytes)] if isinstance(reply, list) else []


def _lesson(event: StoredObject) -> StoredValue:
    payload = event["payload"]
    return payload.get("lesson") if isinstance(payload, dict) else None


def _steps(events: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [(e["payload"]["step"], e["correlationId"]) for e in events]


@check("workflows", "execute, assess and improve store Comms events and the indexes")
def workflows_write(ctx: Context) -> None:
    wf = ctx.entity("workflow", "w")
    with _tenant(ctx, wf) as (acmi, clock):
        ran = acmi.workflows.execute(wf, "build", AGENT, correlation_id="run-1")
        clock.now += 1
        scored = acmi.workflows.assess(
            wf, "build", 85, {"tests": "green", "minutes": 4}, AGENT, correlation_id="run-1"
        )
        clock.now += 1
        learned = acmi.workflows.improve(wf, "build", "warm the cache", AGENT)
        stored = acmi.timeline.read(wf).to_dicts()
        expect_equal(stored, [e.to_dict() for e in (ran, scored, learned)], "timeline")
        expect_equal(
            [e["kind"] for e in stored], ["step-executed", "assessment", "improvement"], "kinds"
        )
        expect_equal(stored[1]["payload"]["score"], 85, "assessment score")
        expect_equal(stored[1]["payload"]["criteria"], {"tests": "green", "minutes": 4}, "criteria")
        expect_equal(
            stored[2]["payload"],
            {"workflow": wf, "step": "build", "lesson": "warm the cache"},
            "improvement payload",
        )
        expect(all(e["source"] == AGENT for e in stored), "source is the agent")
        expect_equal(acmi.list("workflow"), [wf], "the namespace index")
        workflows = acmi.keys.agent_workflows(EntityId.parse(AGENT))
        expect_equal(_members(acmi, workflows), [wf.encode()], "the agent's workflow set")
        expect_equal(
            _members(acmi, acmi.keys.lessons()), [learned.to_json().encode()], "lessons feed"
        )


@check("workflows", "unassessed: by step and correlationId, assessed at or after")
def workflows_unassessed(ctx: Context) -> None:
    wf = ctx.entity("workflow", "u")
    with _tenant(ctx, wf, require=False) as (acmi, clock):  # executions only reported
        w = acmi.workflows
        w.execute(wf, "build", AGENT, correlation_id="r1")
        clock.now += 1
        w.execute(wf, "test", AGENT, correlation_id="r1")
        w.assess(wf, "deploy", 50, [], AGENT, correlation_id="r2")  # before its execution
        clock.now += 1
        w.execute(wf, "deploy", AGENT, correlation_id="r2")
        w.execute(wf, "build", AGENT, correlation_id="r2")
        w.assess(wf, "build", 70, [], AGENT, correlation_id="r2")  # the same ms: covers
        clock.now += 1
        w.assess(wf, "build", 90, [], AGENT, correlation_id="r1")
        w.assess(wf, "test", 90, [], AGENT, correlation_id="r9")  # another run
        found = w.unassessed(wf)
        expect_equal(_steps(found.executions), [("deploy", "r2"), ("test", "r1")], "unassessed")
        expect(found.window.complete, "a short timeline is examined completely")
        scores = w.assessments(wf).to_dict()["steps"]
        expect_equal(scores["build"]["count"], 2, "build assessments")
        expect_equal(scores["build"]["last"], 90, "last build score")


@check("workflows", "execute: refused while an earlier run of the step has no assessment")
def workflows_require_assessment(ctx: Context) -> None:
    wf = ctx.entity("workflow", "r")
    with _tenant(ctx, wf) as (acmi, clock):
        w = acmi.workflows
        ran = w.execute(wf, "build", AGENT, correlation_id="r1")
        clock.now += 1
        exc = expect_raises(
            Conflict, lambda: w.execute(wf, "build", AGENT, correlation_id="r2"), "unassessed run"
        )
        expect_equal((exc.field, exc.rule), ("step", "assessment_required"), "field and rule")
        expect("run r1" in exc.message, f"the message names the run: {exc.message}")
        expect_equal(acmi.timeline.read(wf).to_dicts(), [ran.to_dict()], "nothing written")
        w.execute(wf, "test", AGENT, correlation_id="r2")  # another step: its own cycle
        w.assess(wf, "build", 80, [], AGENT, correlation_id="r1")
        clock.now += 1
        w.execute(wf, "build", AGENT, correlation_id="r2")
        expect_equal(
            _steps(w.unassessed(wf).executions), [("build", "r2"), ("test", "r2")], "unassessed"
        )


@check("workflows", "lessons: of a workflow, of an agent's workflows; the feed keeps 1,000")
def workflows_lessons(ctx: Context) -> None:
    mine, theirs = ctx.entity("workflow", "m"), ctx.entity("workflow", "t")
    with _tenant(ctx, mine, theirs) as (acmi, clock):
        feed = acmi.keys.lessons()
        filler: list[Any] = []
        for i in range(LESSONS_CAP):
            filler += [BASE_TS - LESSONS_CAP + i, json.dumps({"filler": i})]
        acmi.store.execute(("ZADD", feed, *filler))
        for i in range(2):
            clock.now += 1
            acmi.workflows.improve(mine, "s", f"mine {i}", AGENT)
        clock.now += 1
        acmi.workflows.improve(theirs, "s", "theirs", "agent:conf-other")
        of_agent = acmi.workflows.lessons(agent=AGENT)
        expect_equal([_lesson(e) for e in of_agent], ["mine 1", "mine 0"], "agent lessons")
        of_wf = acmi.workflows.lessons(workflow=theirs)
        expect_equal([_lesson(e) for e in of_wf], ["theirs"], "workflow lessons")
        members = _members(acmi, feed)
        expect_equal(len(members), LESSONS_CAP, "feed size after three more lessons")
        expect_equal(json.loads(members[0]), {"filler": 3}, "the oldest left in the feed")


@check("workflows", "bad step, score, criteria or lesson is rejected, nothing stored")
def workflows_rejected(ctx: Context) -> None:
    wf = ctx.entity("workflow", "bad")
    with _tenant(ctx, wf) as (acmi, _):
        w = acmi.workflows
        cases: list[tuple[Callable[[], object], str, str]] = [
            (lambda: w.assess(wf, "s", 101, [], AGENT), "score", "range"),
            (lambda: w.assess(wf, "s", True, [], AGENT), "score", "integer"),
            (lambda: w.assess(wf, "s", 5, {"x": None}, AGENT), "criteria.x", "type"),
            (lambda: w.execute(wf, "a b", AGENT), "step", "step_id"),
            (lambda: w.improve(wf, "s", "x" * 2001, AGENT), "lesson", "string"),
            (lambda: w.execute("user:x", "s", AGENT), "workflow", "category"),
        ]
        for action, field, rule in cases:
            exc = expect_rejected(action, f"{field} {rule}")
            expect_equal((exc.field, exc.rule), (field, rule), "field and rule")
        keys = [
            acmi.keys.timeline(EntityId.parse(wf)),
            acmi.keys.lessons(),
            acmi.keys.agent_workflows(EntityId.parse(AGENT)),
        ]
        expect_equal([k for k in keys if exists(acmi, k)], [], "keys written")

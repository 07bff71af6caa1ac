"""The RL cycle (acmi.workflows and /v1/workflows) on every backend: execute, assess,
improve, the lessons feed and its cap, unassessed steps, scores, one round trip each.

Each test works in a tenant of its own (the lessons feed is per tenant), on a clock it
moves by hand, so equal and out-of-order timestamps are exact."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base.errors import AcmiValidationError, Conflict
from acmi_core.base.model import EntityId, tenant_id_fill
from acmi_core.coordination.workflows import (
    BOOTSTRAP_LESSONS_WINDOW,
    LESSONS_CAP,
    SCAN_EVENTS,
)
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import START as T0
from tests.kit import FakeClock, RouteClient, fresh_tenant, requests_per_step

AGENT = "agent:claude"


@pytest.fixture
def wf_acmi(acmi: Acmi, clock: FakeClock) -> Acmi:
    """A tenant of this test's own, on the fake clock."""
    return fresh_tenant(acmi, clock)


def _wf() -> str:
    return f"workflow:deploy-{uuid.uuid4().hex[:10]}"


def _timeline(acmi: Acmi, wf: str) -> list[dict[str, Any]]:
    return acmi.timeline.read(wf).to_dicts()


def _zset(acmi: Acmi, key: str) -> list[tuple[bytes, float]]:
    reply = acmi.store.execute(("ZRANGE", key, 0, -1, "WITHSCORES"))
    assert isinstance(reply, list)
    return [(m, float(s)) for m, s in zip(reply[::2], reply[1::2], strict=True)]


def _steps(events: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return [(e["payload"]["step"], e["correlationId"], e["ts"]) for e in events]


# --- each operation -------------------------------------------------------------------------


def test_execute_assess_improve_store_comms_events_and_indexes(
    wf_acmi: Acmi, clock: FakeClock
) -> None:
    acmi, wf = wf_acmi, _wf()
    ran = acmi.workflows.execute(
        wf, "build", AGENT, correlation_id="run-1", payload={"commit": "9f3c2ab"}
    )
    clock.now += 10
    scored = acmi.workflows.assess(
        wf, "build", 85, {"tests": "green", "minutes": 4}, AGENT, correlation_id="run-1"
    )
    clock.now += 10
    learned = acmi.workflows.improve(
        wf, "build", "restore the wheel cache first", "claude", correlation_id="run-1"
    )
    stored = _timeline(acmi, wf)
    assert stored == [ran.to_dict(), scored.to_dict(), learned.to_dict()]
    assert [e["kind"] for e in stored] == ["step-executed", "assessment", "improvement"]
    assert all(e["source"] == AGENT and e["correlationId"] == "run-1" for e in stored)
    assert all(
        e["speaker_type"] == "agent" and e["tenant_id"] == tenant_id_fill(acmi.tenant)
        for e in stored
    )
    assert stored[0]["payload"] == {"workflow": wf, "step": "build", "commit": "9f3c2ab"}
    assert stored[1]["payload"] == {
        "workflow": wf,
        "step": "build",
        "score": 85,
        "criteria": {"tests": "green", "minutes": 4},
    }
    assert stored[2]["payload"] == {
        "workflow": wf,
        "step": "build",
        "lesson": "restore the wheel cache first",
    }
    assert "85/100" in stored[1]["summary"] and "build" in stored[0]["summary"]
    # the indexes the bootstrap reads
    local = EntityId.parse(wf).local_id
    assert acmi.store.execute(("SISMEMBER", acmi.keys.index("workflow"), local)) == 1
    assert _zset(acmi, acmi.keys.agent_workflows(EntityId.parse(AGENT))) == [
        (wf.encode(), float(clock.now))
    ]
    feed = _zset(acmi, acmi.keys.lessons())
    assert [json.loads(m) for m, _ in feed] == [learned.to_dict()]
    assert feed[0][1] == clock.now
    # the feed member is the timeline member, byte for byte
    assert feed[0][0] == learned.to_json().encode()


def test_defaults_bare_ids_and_criteria_as_a_list(wf_acmi: Acmi) -> None:
    acmi = wf_acmi
    local = f"deploy-{uuid.uuid4().hex[:8]}"
    ran = acmi.workflows.execute(local, "test.unit", "gemini")
    scored = acmi.workflows.assess(local, "test.unit", 0, ["flaky", "slow"], "user:mikey")
    assert ran.source == "agent:gemini" and scored.source == "user:mikey"
    assert ran.correlationId == scored.correlationId == f"workflow:{local}/test.unit"
    assert isinstance(ran.payload, dict) and ran.payload["workflow"] == f"workflow:{local}"
    assert isinstance(scored.payload, dict) and scored.payload["criteria"] == ["flaky", "slow"]
    # a person who assesses has a workflow set too
    mikey = acmi.keys.agent_workflows(EntityId.parse("user:mikey"))
    assert [m for m, _ in _zset(acmi, mikey)] == [f"workflow:{local}".encode()]


def test_generated_summaries_fit_comms(wf_acmi: Acmi) -> None:
    wf = _wf()
    lesson = "😀" * 1_000  # 2,000 characters, 4,000 UTF-16 units
    learned = wf_acmi.workflows.improve(wf, "s", lesson, AGENT)
    assert learned.summary.endswith("…") and len(learned.summary.encode("utf-16-le")) <= 1000
    assert isinstance(learned.payload, dict) and learned.payload["lesson"] == lesson
    noted = wf_acmi.workflows.assess(wf, "s", 50, {}, AGENT, note="n" * 500)
    assert len(noted.summary) == 500 and noted.summary.endswith("…")


def test_agent_workflows_move_to_the_newest_activity(wf_acmi: Acmi, clock: FakeClock) -> None:
    acmi, first, second = wf_acmi, _wf(), _wf()
    acmi.workflows.execute(first, "a", AGENT)
    clock.now += 5
    acmi.workflows.execute(second, "a", AGENT)
    clock.now += 5
    acmi.workflows.assess(first, "a", 70, [], AGENT)
    key = acmi.keys.agent_workflows(EntityId.parse(AGENT))
    assert _zset(acmi, key) == [(second.encode(), T0 + 5.0), (first.encode(), T0 + 10.0)]


# --- lessons --------------------------------------------------------------------------------


def test_lessons_of_a_workflow_and_of_an_agents_workflows(wf_acmi: Acmi, clock: FakeClock) -> None:
    acmi, mine, also_mine, theirs = wf_acmi, _wf(), _wf(), _wf()
    acmi.workflows.execute(also_mine, "deploy", AGENT)
    for i in range(4):
        clock.now += 1
        acmi.workflows.improve(mine, "build", f"lesson {i}", AGENT)
    clock.now += 1
    acmi.workflows.improve(theirs, "build", "not claude's", "agent:gemini")
    clock.now += 1
    acmi.workflows.improve(also_mine, "deploy", "someone else's lesson", "agent:gemini")
    clock.now += 1
    acmi.workflows.execute(mine, "build", AGENT)  # not a lesson
    of_mine = acmi.workflows.lessons(workflow=mine, limit=3)
    assert [e["payload"]["lesson"] for e in of_mine] == ["lesson 3", "lesson 2", "lesson 1"]
    assert all(e["kind"] == "improvement" for e in of_mine)
    of_claude = acmi.workflows.lessons(agent=AGENT, limit=10)
    # every lesson on a workflow claude works on, whoever wrote it; none of the others
    assert [e["payload"]["lesson"] for e in of_claude] == [
        "someone else's lesson",
        "lesson 3",
        "lesson 2",
        "lesson 1",
        "lesson 0",
    ]
    assert [e["payload"]["lesson"] for e in acmi.workflows.lessons(agent="gemini")] == [
        "someone else's lesson",
        "not claude's",
    ]
    assert acmi.workflows.lessons(agent="agent:nobody") == []
    assert acmi.workflows.lessons(workflow=_wf()) == []


def test_agent_lessons_see_the_newest_window_of_the_feed(wf_acmi: Acmi, clock: FakeClock) -> None:
    acmi, mine, busy = wf_acmi, _wf(), _wf()
    acmi.workflows.improve(mine, "a", "old but mine", AGENT)
    # the window the bootstrap reads fills with another agent's lessons
    for i in range(BOOTSTRAP_LESSONS_WINDOW):
        clock.now += 1
        acmi.workflows.improve(busy, "a", f"busy {i}", "agent:other")
    assert acmi.workflows.lessons(agent=AGENT) == []
    assert len(acmi.workflows.lessons(workflow=mine)) == 1  # still in its timeline


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({}, "workflow"),
        ({"workflow": "workflow:a", "agent": AGENT}, "workflow"),
        ({"workflow": "workflow:a", "limit": 0}, "limit"),
        ({"agent": AGENT, "limit": BOOTSTRAP_LESSONS_WINDOW + 1}, "limit"),
        ({"workflow": "agent:claude"}, "workflow"),
        ({"agent": "Not An Id"}, "agent"),
    ],
)
def test_lessons_bad_arguments(wf_acmi: Acmi, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(AcmiValidationError) as refused:
        wf_acmi.workflows.lessons(**kwargs)
    assert refused.value.field == field


def test_the_lessons_feed_is_capped_in_the_same_step(
    upstash_store: UpstashStore, upstash_double: UpstashDouble, clock: FakeClock
) -> None:
    acmi = Acmi(upstash_store, Settings(), tenant="feedcap", clock=clock)
    feed = acmi.keys.lessons()
    # a full feed of older lessons (written in one command: 1,000 calls would be slow)
    args: list[str | int] = []
    for i in range(LESSONS_CAP):
        args += [T0 - LESSONS_CAP + i, json.dumps({"filler": i})]
    acmi.store.execute(("ZADD", feed, *args))
    acmi.workflows.improve(_wf(), "warm", "loads the script", AGENT)  # EVALSHA cached
    assert acmi.store.execute(("ZCARD", feed)) == LESSONS_CAP
    clock.now += 1
    upstash_double.reset_counts()
    learned = acmi.workflows.improve(_wf(), "build", "newest", AGENT)
    assert upstash_double.requests == 1  # event, indexes, feed and its trim: one step
    members = [m for m, _ in _zset(acmi, feed)]
    assert len(members) == LESSONS_CAP
    assert members[-1] == learned.to_json().encode()
    assert json.dumps({"filler": 0}).encode() not in members
    assert json.dumps({"filler": 1}).encode() not in members  # the warm-up pushed one out
    assert json.dumps({"filler": 2}).encode() in members


def test_the_lessons_feed_keeps_the_newest_thousand(wf_acmi: Acmi, clock: FakeClock) -> None:
    acmi = wf_acmi
    feed = acmi.keys.lessons()
    args: list[str | int] = []
    for i in range(LESSONS_CAP):
        args += [T0 - LESSONS_CAP + i, json.dumps({"filler": i})]
    acmi.store.execute(("ZADD", feed, *args))
    for i in range(3):
        clock.now += 1
        acmi.workflows.improve(_wf(), "build", f"newest {i}", AGENT)
    members = [m for m, _ in _zset(acmi, feed)]
    assert len(members) == LESSONS_CAP
    assert [json.loads(m)["payload"]["lesson"] for m in members[-3:]] == [
        "newest 0",
        "newest 1",
        "newest 2",
    ]
    assert json.loads(members[0]) == {"filler": 3}  # the three oldest went, nothing else


# --- unassessed and scores ------------------------------------------------------------------


def _reporting(acmi: Acmi) -> Acmi:
    """The same tenant with ACMI_WORKFLOW_REQUIRE_ASSESSMENT off: executions only reported."""
    settings = acmi.settings.model_copy(update={"workflow_require_assessment": False})
    return Acmi(acmi.store, settings, tenant=acmi.tenant, clock=acmi.context.clock)


def test_unassessed_matches_by_step_and_run_at_or_after(wf_acmi: Acmi, clock: FakeClock) -> None:
    acmi, wf = _reporting(wf_acmi), _wf()
    w = acmi.workflows

    def at(ms: int) -> None:
        clock.now = T0 + ms

    at(0)
    w.execute(wf, "build", AGENT, correlation_id="run-1")  # assessed later: covered
    at(1)
    w.execute(wf, "test", AGENT, correlation_id="run-1")  # assessed for another step only
    at(2)
    w.assess(wf, "deploy", 90, [], AGENT, correlation_id="run-2")  # BEFORE its execution
    at(3)
    w.execute(wf, "deploy", AGENT, correlation_id="run-2")  # so: not covered
    at(4)
    w.execute(wf, "build", AGENT, correlation_id="run-2")  # equal ts below: covered
    w.assess(wf, "build", 60, {"ok": 1}, AGENT, correlation_id="run-2")
    at(5)
    w.assess(wf, "build", 80, [], AGENT, correlation_id="run-1")
    w.assess(wf, "build", 80, [], AGENT, correlation_id="run-3")  # no such execution
    at(6)
    w.execute(wf, "lint", AGENT, correlation_id="run-1")  # another run's assessment: no
    w.assess(wf, "lint", 10, [], AGENT, correlation_id="run-9")
    result = w.unassessed(wf)
    assert _steps(result.executions) == [
        ("lint", "run-1", T0 + 6),
        ("deploy", "run-2", T0 + 3),
        ("test", "run-1", T0 + 1),
    ]
    assert result.window.complete and result.window.examined == 10
    assert result.to_dict()["unassessed"] == result.executions
    assert _steps(w.unassessed(wf, since_ms=T0 + 2).executions) == [
        ("lint", "run-1", T0 + 6),
        ("deploy", "run-2", T0 + 3),
    ]
    assert len(w.unassessed(wf, limit=1).executions) == 1
    # scores per step, newest last
    scores = w.assessments(wf).to_dict()["steps"]
    assert scores["build"] == {"count": 3, "mean": 73.33, "last": 80, "last_ts": T0 + 5}
    assert scores["deploy"]["count"] == 1 and scores["lint"]["last"] == 10
    assert set(w.assessments(wf, step="build").steps) == {"build"}


def test_default_correlation_covers_every_earlier_execution_of_the_step(
    wf_acmi: Acmi, clock: FakeClock
) -> None:
    acmi, wf = _reporting(wf_acmi), _wf()
    acmi.workflows.execute(wf, "build", AGENT)
    clock.now += 1
    acmi.workflows.execute(wf, "build", AGENT)
    clock.now += 1
    acmi.workflows.assess(wf, "build", 75, [], AGENT)
    clock.now += 1
    acmi.workflows.execute(wf, "build", AGENT)
    assert _steps(acmi.workflows.unassessed(wf).executions) == [("build", f"{wf}/build", T0 + 3)]


def test_unassessed_reads_a_bounded_window_and_says_so(wf_acmi: Acmi) -> None:
    acmi, wf = wf_acmi, _wf()
    key = acmi.keys.timeline(EntityId.parse(wf))
    args: list[str | int] = []
    for i in range(SCAN_EVENTS + 5):
        event = {
            "ts": T0 + i,
            "source": AGENT,
            "kind": "step-executed",
            "correlationId": f"run-{i}",
            "summary": "ran",
            "payload": {"step": "s"},
        }
        args += [T0 + i, json.dumps(event)]
    acmi.store.execute(("ZADD", key, *args))
    result = acmi.workflows.unassessed(wf, limit=SCAN_EVENTS)
    assert result.window.examined == SCAN_EVENTS and not result.window.complete
    assert result.window.oldest_examined_ts == T0 + 5
    assert len(result.executions) == SCAN_EVENTS
    assert result.executions[0]["ts"] == T0 + SCAN_EVENTS + 4
    complete = acmi.workflows.unassessed(wf, since_ms=T0 + 100)
    assert complete.window.complete and complete.window.examined == SCAN_EVENTS - 95


def test_legacy_and_foreign_members_are_tolerated(wf_acmi: Acmi, clock: FakeClock) -> None:
    acmi, wf = wf_acmi, _wf()
    key = acmi.keys.timeline(EntityId.parse(wf))
    foreign = [
        "not json",
        "[1, 2]",
        json.dumps({"ts": T0 - 5, "source": "cli", "summary": "legacy: no kind"}),
        json.dumps({"ts": "soon", "kind": "step-executed", "payload": {"step": "a"}}),
        json.dumps({"ts": T0 - 4, "kind": "step-executed", "payload": ["a"]}),
        json.dumps({"ts": T0 - 3, "kind": "step-executed", "payload": {"step": 7}}),
        json.dumps({"ts": T0 - 2, "kind": "assessment", "payload": {"step": "a", "score": "x"}}),
        json.dumps({"ts": T0 - 1, "kind": "improvement", "summary": "old tool lesson"}),
    ]
    for i, member in enumerate(foreign):
        acmi.store.execute(("ZADD", key, T0 - 10 + i, member))
    acmi.store.execute(("ZADD", acmi.keys.lessons(), T0 - 1, "not json either"))
    acmi.workflows.execute(wf, "a", AGENT, correlation_id="r")
    acmi.workflows.improve(wf, "a", "real lesson", AGENT)
    result = acmi.workflows.unassessed(wf)
    assert _steps(result.executions) == [("a", "r", T0)]
    assert result.window.examined == len(foreign) + 2
    assert acmi.workflows.assessments(wf).steps == {}
    lessons = acmi.workflows.lessons(workflow=wf)
    assert [e.get("summary") for e in lessons][1] == "old tool lesson"  # kept, as stored
    assert [e["payload"]["lesson"] for e in acmi.workflows.lessons(agent=AGENT)] == ["real lesson"]
    # a bare workflow id another writer left in an agent's set still matches its lessons
    # (lua/bootstrap.lua compares them the same way)
    old_agent = acmi.keys.agent_workflows(EntityId.parse("agent:old"))
    acmi.store.execute(("ZADD", old_agent, 1, "bare-x1"))
    clock.now += 1
    acmi.workflows.improve("bare-x1", "a", "bare id", "agent:someone")
    got = acmi.workflows.lessons(agent="agent:old")
    assert [e["payload"]["lesson"] for e in got] == ["bare id"]


# --- bad input ------------------------------------------------------------------------------

W = "workflow:bad-input"
BAD: list[tuple[str, Callable[[Acmi], object], str, str]] = [
    ("step", lambda a: a.workflows.execute(W, "bad step!", AGENT), "step", "step_id"),
    ("step-long", lambda a: a.workflows.assess(W, "s" * 129, 5, [], AGENT), "step", "step_id"),
    ("workflow", lambda a: a.workflows.execute("user:x", "s", AGENT), "workflow", "category"),
    ("workflow-id", lambda a: a.workflows.execute("wf x", "s", AGENT), "workflow", "id_format"),
    ("agent", lambda a: a.workflows.execute(W, "s", "Not An Id"), "agent", "id_format"),
    ("score-high", lambda a: a.workflows.assess(W, "s", 101, [], AGENT), "score", "range"),
    ("score-low", lambda a: a.workflows.assess(W, "s", -1, [], AGENT), "score", "range"),
    ("score-float", lambda a: a.workflows.assess(W, "s", 5.5, [], AGENT), "score", "integer"),  # type: ignore[arg-type]
    ("score-bool", lambda a: a.workflows.assess(W, "s", True, [], AGENT), "score", "integer"),
    ("criteria", lambda a: a.workflows.assess(W, "s", 5, "good", AGENT), "criteria", "type"),  # type: ignore[arg-type]
    (
        "criteria-value",
        lambda a: a.workflows.assess(W, "s", 5, {"x": [1]}, AGENT),
        "criteria.x",
        "type",
    ),
    (
        "criteria-nan",
        lambda a: a.workflows.assess(W, "s", 5, {"x": float("nan")}, AGENT),
        "criteria.x",
        "type",
    ),
    (
        "criteria-item",
        lambda a: a.workflows.assess(W, "s", 5, ["ok", 3], AGENT),  # type: ignore[list-item]
        "criteria[1]",
        "string",
    ),
    (
        "criteria-many",
        lambda a: a.workflows.assess(W, "s", 5, [str(i) for i in range(33)], AGENT),
        "criteria",
        "max_items",
    ),
    ("note", lambda a: a.workflows.assess(W, "s", 5, [], AGENT, note=""), "note", "string"),
    ("lesson-empty", lambda a: a.workflows.improve(W, "s", " ", AGENT), "lesson", "string"),
    ("lesson-long", lambda a: a.workflows.improve(W, "s", "x" * 2001, AGENT), "lesson", "string"),
    (
        "correlation",
        lambda a: a.workflows.improve(W, "s", "l", AGENT, correlation_id="c" * 257),
        "correlation_id",
        "string",
    ),
    (
        "summary",
        lambda a: a.workflows.execute(W, "s", AGENT, summary="x" * 501),
        "summary",
        "string",
    ),
    (
        "payload-reserved",
        lambda a: a.workflows.execute(W, "s", AGENT, payload={"step": "other"}),
        "payload.step",
        "reserved",
    ),
    (
        "payload-type",
        lambda a: a.workflows.execute(W, "s", AGENT, payload=[1]),  # type: ignore[arg-type]
        "payload",
        "object",
    ),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_refused_with_nothing_stored(
    wf_acmi: Acmi, case: tuple[str, Callable[[Acmi], object], str, str]
) -> None:
    _, call, field, rule = case
    with pytest.raises(AcmiValidationError) as refused:
        call(wf_acmi)
    assert (refused.value.field, refused.value.rule) == (field, rule)
    keys = wf_acmi.keys
    assert wf_acmi.store.execute(("EXISTS", keys.timeline(EntityId.parse(W)))) == 0
    assert wf_acmi.store.execute(("EXISTS", keys.index("workflow"))) == 0
    assert wf_acmi.store.execute(("EXISTS", keys.agent_workflows(EntityId.parse(AGENT)))) == 0
    assert wf_acmi.store.execute(("EXISTS", keys.lessons())) == 0


def test_tenants_do_not_see_each_others_workflows(wf_acmi: Acmi) -> None:
    acme, other, wf = wf_acmi, wf_acmi.for_tenant(f"o-{uuid.uuid4().hex[:8]}"), _wf()
    acme.workflows.execute(wf, "build", AGENT)
    acme.workflows.improve(wf, "build", "acme's lesson", AGENT)
    assert acme.keys.lessons() != other.keys.lessons()
    assert acme.keys.timeline(EntityId.parse(wf)).startswith(f"acmi:tenant:{acme.tenant}:")
    assert other.workflows.lessons(agent=AGENT) == []
    assert other.workflows.lessons(workflow=wf) == []
    assert other.workflows.unassessed(wf).executions == []
    assert len(acme.workflows.unassessed(wf).executions) == 1
    assert len(acme.workflows.lessons(agent=AGENT)) == 1
    # the default tenant keeps its keys where the reference keeps them
    default = create_acmi(acme.store, Settings())
    assert default.keys.timeline(EntityId.parse(wf)) == f"acmi:{wf}:timeline"


# --- the seed's rule: no execution without an assessment entry --------------------------------


def test_an_execute_is_refused_while_an_earlier_run_of_the_step_is_unassessed(
    wf_acmi: Acmi, clock: FakeClock
) -> None:
    acmi, wf = wf_acmi, _wf()
    w = acmi.workflows
    first = w.execute(wf, "build", AGENT, correlation_id="run-1")
    clock.now += 1
    for run in ("run-2", "run-1"):  # another run, and the same run again
        with pytest.raises(Conflict) as caught:
            w.execute(wf, "build", AGENT, correlation_id=run)
        assert (caught.value.field, caught.value.rule) == ("step", "assessment_required")
        assert "step build" in caught.value.message and "run run-1" in caught.value.message
    assert _timeline(acmi, wf) == [first.to_dict()]  # nothing written by the refusals
    assert _zset(acmi, acmi.keys.workflow_pending(EntityId.parse(wf), "build")) == [
        (b"run-1", float(first.ts))
    ]
    w.execute(wf, "test", AGENT, correlation_id="run-2")  # another step is its own cycle
    w.assess(wf, "build", 70, ["ok"], AGENT, correlation_id="run-2")  # another run: no
    with pytest.raises(Conflict):
        w.execute(wf, "build", AGENT, correlation_id="run-2")
    clock.now += 1
    w.assess(wf, "build", 80, ["ok"], AGENT, correlation_id="run-1")
    assert _zset(acmi, acmi.keys.workflow_pending(EntityId.parse(wf), "build")) == []
    again = w.execute(wf, "build", AGENT, correlation_id="run-2")
    assert _steps(w.unassessed(wf).executions) == [
        ("build", "run-2", again.ts),
        ("test", "run-2", first.ts + 1),
    ]


def test_the_default_run_id_cycles_execute_assess_execute(wf_acmi: Acmi, clock: FakeClock) -> None:
    """The reference's logAssessment(stepId, ...): one run per step, scored in turn."""
    acmi, wf = wf_acmi, _wf()
    w = acmi.workflows
    for n in range(3):
        w.execute(wf, "build", AGENT)
        clock.now += 1  # (the same run in the same ms is what a retry of it sends)
        with pytest.raises(Conflict, match=f"run {wf}/build has no assessment entry"):
            w.execute(wf, "build", AGENT)
        clock.now += 1
        w.assess(wf, "build", 50 + n, [], AGENT)
        clock.now += 1
    kinds = [e["kind"] for e in _timeline(acmi, wf)]
    assert kinds == ["step-executed", "assessment"] * 3


def test_with_the_rule_off_executions_are_only_reported_and_still_tracked(
    wf_acmi: Acmi, clock: FakeClock
) -> None:
    acmi, wf = wf_acmi, _wf()
    off = _reporting(acmi)
    off.workflows.execute(wf, "build", AGENT, correlation_id="run-1")
    clock.now += 1
    off.workflows.execute(wf, "build", AGENT, correlation_id="run-2")  # not refused
    assert len(off.workflows.unassessed(wf).executions) == 2
    # the rule turned on later: the runs executed meanwhile count
    with pytest.raises(Conflict, match="run run-1 has no assessment entry"):
        acmi.workflows.execute(wf, "build", AGENT, correlation_id="run-3")
    acmi.workflows.assess(wf, "build", 80, [], AGENT, correlation_id="run-1")
    with pytest.raises(Conflict, match="run run-2 has no assessment entry"):
        acmi.workflows.execute(wf, "build", AGENT, correlation_id="run-3")


def test_a_tenants_unassessed_run_blocks_only_that_tenant(acmi: Acmi, clock: FakeClock) -> None:
    one, two = fresh_tenant(acmi, clock), fresh_tenant(acmi, clock)
    wf = _wf()
    one.workflows.execute(wf, "build", AGENT, correlation_id="run-1")
    two.workflows.execute(wf, "build", AGENT, correlation_id="run-1")  # not one's run
    with pytest.raises(Conflict):
        one.workflows.execute(wf, "build", AGENT, correlation_id="run-2")
    two.workflows.assess(wf, "build", 90, [], AGENT, correlation_id="run-1")
    two.workflows.execute(wf, "build", AGENT, correlation_id="run-2")
    with pytest.raises(Conflict, match="run run-1"):  # one's run is still unscored
        one.workflows.execute(wf, "build", AGENT, correlation_id="run-2")


def test_http_an_execute_while_a_run_is_unassessed_is_a_409_naming_step_and_run(
    http: tuple[TestClient, dict[str, str]], wf_acmi: Acmi
) -> None:
    client, auth = http
    base = f"/v1/workflows/deploy-{uuid.uuid4().hex[:8]}"
    body = {"step": "build", "agent": "claude", "correlation_id": "run-1"}
    assert client.post(f"{base}/executions", json=body, headers=auth).status_code == 201
    refused = client.post(
        f"{base}/executions", json={**body, "correlation_id": "run-2"}, headers=auth
    )
    assert refused.status_code == 409, refused.text
    error = refused.json()
    assert (error["error"], error["field"], error["rule"]) == (
        "conflict",
        "step",
        "assessment_required",
    )
    assert "step build" in error["message"] and "run run-1" in error["message"]
    assert len(client.get(f"{base}/unassessed", headers=auth).json()["unassessed"]) == 1
    scored = {"step": "build", "score": 60, "criteria": [], "agent": "claude"}
    assert (
        client.post(
            f"{base}/assessments", json={**scored, "correlation_id": "run-1"}, headers=auth
        ).status_code
        == 201
    )
    again = client.post(
        f"{base}/executions", json={**body, "correlation_id": "run-2"}, headers=auth
    )
    assert again.status_code == 201, again.text


# --- round trips (the Upstash double counts HTTP requests) -----------------------------------


def test_one_round_trip_per_workflow_operation(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    acmi = create_acmi(upstash_store, Settings())
    wf = _wf()
    acmi.workflows.execute(wf, "warm", AGENT)  # loads apply.lua (EVALSHA afterwards)
    steps: dict[str, Callable[[], object]] = {
        "execute": lambda: acmi.workflows.execute(wf, "build", AGENT, correlation_id="r"),
        "assess": lambda: acmi.workflows.assess(wf, "build", 80, [], AGENT, correlation_id="r"),
        "improve (+ feed + trim)": lambda: acmi.workflows.improve(wf, "build", "l", AGENT),
        "unassessed": lambda: acmi.workflows.unassessed(wf),
        "assessments": lambda: acmi.workflows.assessments(wf),
        "lessons(workflow)": lambda: acmi.workflows.lessons(workflow=wf),
        "lessons(agent)": lambda: acmi.workflows.lessons(agent=AGENT),
    }
    assert requests_per_step(upstash_double, steps) == dict.fromkeys(steps, 1)


# --- HTTP -------------------------------------------------------------------------------------


@pytest.fixture
def http(wf_acmi: Acmi) -> tuple[TestClient, dict[str, str]]:
    routes = RouteClient(wf_acmi, "workflows")
    return routes.client, routes.auth["write"]


def test_http_the_rl_cycle(
    http: tuple[TestClient, dict[str, str]], wf_acmi: Acmi, clock: FakeClock
) -> None:
    client, auth = http
    local = f"deploy-{uuid.uuid4().hex[:8]}"
    base = f"/v1/workflows/{local}"
    ran = client.post(
        f"{base}/executions",
        json={"step": "build", "agent": "claude", "correlationId": "run-7", "payload": {"n": 1}},
        headers=auth,
    )
    assert ran.status_code == 201, ran.text
    assert ran.json()["kind"] == "step-executed" and ran.json()["correlationId"] == "run-7"
    open_ = client.get(f"{base}/unassessed", headers=auth).json()
    assert [e["correlationId"] for e in open_["unassessed"]] == ["run-7"]
    assert open_["complete"] is True and open_["scan_limit"] == SCAN_EVENTS
    clock.now += 1
    scored = client.post(
        f"{base}/assessments",
        json={
            "step": "build",
            "score": 92,
            "criteria": {"tests": 1.0},
            "agent": "agent:claude",
            "correlation_id": "run-7",
            "note": "fast",
        },
        headers=auth,
    )
    assert scored.status_code == 201, scored.text
    assert scored.json()["payload"]["score"] == 92
    assert client.get(f"{base}/unassessed", headers=auth).json()["unassessed"] == []
    learned = client.post(
        f"{base}/improvements",
        json={"step": "build", "lesson": "warm the cache", "agent": "claude"},
        headers=auth,
    )
    assert learned.status_code == 201, learned.text
    lessons = client.get(f"{base}/lessons?limit=5", headers=auth).json()
    assert [e["payload"]["lesson"] for e in lessons["lessons"]] == ["warm the cache"]
    mine = client.get("/v1/lessons?agent=claude", headers=auth).json()
    assert (lessons["workflow"], mine["agent"]) == (f"workflow:{local}", "agent:claude")
    assert mine["lessons"] == lessons["lessons"]
    scores = client.get(f"{base}/assessments?step=build", headers=auth).json()
    assert scores["steps"]["build"]["last"] == 92


@pytest.mark.parametrize(
    ("path", "body", "field", "rule"),
    [
        (
            "assessments",
            {"step": "b", "score": 101, "criteria": [], "agent": AGENT},
            "score",
            "range",
        ),
        ("assessments", {"step": "b", "score": 50, "agent": AGENT}, "criteria", "required"),
        (
            "assessments",
            {"step": "b", "score": "9", "criteria": [], "agent": AGENT},
            "score",
            "integer",
        ),
        ("executions", {"step": "b c", "agent": AGENT}, "step", "step_id"),
        ("executions", {"step": "b", "agent": AGENT, "correlation": "x"}, "correlation", "unknown"),
        (
            "executions",
            {"step": "b", "agent": AGENT, "correlationId": "x", "correlation_id": "y"},
            "correlation_id",
            "one_of",
        ),
        ("improvements", {"step": "b", "agent": AGENT, "lesson": ""}, "lesson", "string"),
        ("improvements", ["b"], "body", "object"),
    ],
)
def test_http_bad_input_is_a_400_naming_field_and_rule(
    http: tuple[TestClient, dict[str, str]],
    wf_acmi: Acmi,
    path: str,
    body: Any,
    field: str,
    rule: str,
) -> None:
    client, auth = http
    wf = _wf()
    response = client.post(f"/v1/workflows/{wf}/{path}", json=body, headers=auth)
    assert response.status_code == 400, response.text
    assert (response.json()["field"], response.json()["rule"]) == (field, rule)
    assert wf_acmi.store.execute(("EXISTS", wf_acmi.keys.timeline(EntityId.parse(wf)))) == 0
    assert wf_acmi.store.execute(("EXISTS", wf_acmi.keys.lessons())) == 0


def test_http_reads_need_read_scope_and_check_limits(
    http: tuple[TestClient, dict[str, str]],
) -> None:
    client, auth = http
    assert client.get("/v1/lessons?agent=claude").status_code == 401
    assert client.get("/v1/lessons", headers=auth).status_code == 400
    too_many = client.get(f"/v1/workflows/{_wf()}/unassessed?limit=0", headers=auth)
    assert too_many.status_code == 400 and too_many.json()["field"] == "limit"
    wrong = client.get("/v1/workflows/user:x/lessons", headers=auth)
    assert wrong.status_code == 400 and wrong.json()["field"] == "workflow"

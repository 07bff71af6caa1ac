"""Fixture agents for the wake bundle's size: what its budget and its density are measured
on (the tests of the token estimate, the bench's density section).

Four agents, written through the public API, deterministic for a given clock:

- ``idle``: a profile, two signals, three events;
- ``busy``: a profile, signals, 50 events (ours with payloads, and the reference CLI's
  ``{ts, source, summary}``), spawns, two open work items;
- ``coordinating``: threads, locks, HITL items (addressed and shared), work, lessons and
  coordination-thread traffic that mentions it;
- ``memory``: the realistic agent of issue 26: a profile, 10 signals, 3 threads, a rollup,
  25 events, 5 spawns, 2 locks, 2 HITL items, a work item, hot and warm memory.

``facts`` counts what a bundle says, the numerator of "facts per 1,000 tokens".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from acmi_core.base.model import EntityId
from acmi_core.client import Acmi

HOT: Final = """# ACTIVE-CONTEXT.md — What's Hot

## 🔥 Current Priority
Ship the bootstrap budget fix before the Thursday release.

## In Progress
- [ ] Calibrate the token estimate against cl100k
- [ ] Rewrite the markdown renderer: one line per item
- [x] Fixture agents for the bench

## Waiting On
- Waiting for Mikey to approve the release window — asked 2026-11-30

## Context for Next Session
Rerun the density bench after the renderer lands; the README quotes its figures.
"""

WARM_LINES: Final = (
    "Keep every Redis script bounded by bytes, not counts",
    "Contracts are byte-compatible: add keys, never rename",
    "A retry returns the first run's result",
    "Mikey prefers short commit messages that say why",
)


def _reference_event(acmi: Acmi, agent: str, summary: str) -> None:
    """An event as the reference CLI writes it, ``{ts, source, summary}`` (our writes
    refuse it: no kind), straight into the timeline."""
    ts = acmi.clock()
    member = json.dumps({"ts": ts, "source": "cli", "summary": summary}, separators=(",", ":"))
    acmi.store.execute(("ZADD", acmi.keys.timeline(EntityId.parse(agent)), str(ts), member))


def _event(agent: str, n: int, kind: str, summary: str, **extra: Any) -> dict[str, Any]:
    return {"source": agent, "kind": kind, "correlationId": f"task-{n // 3}", "summary": summary}


def idle(acmi: Acmi, agent: str) -> None:
    acmi.profile.set(agent, {"name": "Idle", "role": "standby reviewer"})
    acmi.signals.update(agent, {"status": "IDLE", "last_seen": "standup"})
    acmi.timeline.extend(
        agent,
        [
            _event(agent, n, "note", s)
            for n, s in enumerate(("woke for standup", "nothing assigned", "went idle"))
        ],
    )


def busy(acmi: Acmi, agent: str) -> None:
    acmi.profile.set(
        agent,
        {"name": "Busy", "role": "backend engineer", "model_id": "claude-opus-4"},
    )
    acmi.signals.update(
        agent,
        {"status": "ACTIVE", "current_priority": "ship the parser", "branch": "parser-v2"},
    )
    kinds = ("task-start", "note", "test-run", "task-end", "deployment-shipped")
    for n in range(50):
        kind = kinds[n % len(kinds)]
        if n % 5 == 4:  # the reference CLI's shape: no kind, no correlationId
            _reference_event(acmi, agent, f"manual note {n}: checked the logs")
            continue
        summary = f"{kind}: parser module {n % 7}, {n % 11 + 1} files touched"
        event = {**_event(agent, n, kind, summary), "payload": {"files": n % 11 + 1}}
        acmi.timeline.append(agent, event)
    for n in range(5):
        acmi.agents.spawn(agent, f"sess-{n}", "claude-opus-4", host="ci-runner-3")
    for n in range(2):
        acmi.work.create(f"busy-task-{n}", {"title": f"Parser step {n}"}, owner=agent)


def coordinating(acmi: Acmi, agent: str) -> None:
    acmi.profile.set(agent, {"name": "Coord", "role": "release coordinator"})
    acmi.signals.update(agent, {"status": "ACTIVE", "current_priority": "the Thursday release"})
    for thread, role in (("thread:release", "lead"), ("thread:ops", "observer")):
        acmi.agents.join(agent, thread, role)
    for n in range(3):
        acmi.locks.claim(f"deploy:service-{n}", agent, 3_600_000)
    now = acmi.clock()
    for n in range(3):
        acmi.hitl.create(
            f"release gate {n}",
            f"approve the release gate #{n}",
            asked_by="agent:bentley",
            urgency=("P0", "P1", "P2")[n],
            deadline=now + (n + 1) * 3_600_000,
            addressee=agent,
        )
    acmi.hitl.create("dns", "anyone: confirm the DNS cutover", asked_by="agent:gemini")
    for n in range(3):
        acmi.work.create(f"release-{n}", {"title": f"Release checklist {n}"}, owner=agent)
    acmi.workflows.improve("workflow:release", "ship", "tag before the changelog", agent)
    for n in range(6):
        acmi.timeline.append(
            "thread:agent-coordination",
            {
                "source": "agent:bentley",
                "kind": "handoff-request",
                "correlationId": f"handoff-{n}",
                "summary": f"[handoff] {agent} please take review #{n}",
            },
        )
    acmi.timeline.extend(
        agent, [_event(agent, n, "note", f"release step {n} checked") for n in range(10)]
    )


def memory(acmi: Acmi, agent: str) -> None:
    acmi.profile.set(
        agent,
        {
            "name": "Atlas",
            "role": "RL engine and coding",
            "model_id": "claude-opus-4",
            "lane": "engineering",
            "escalation": "user:mikey",
        },
    )
    acmi.signals.update(
        agent,
        {
            "status": "ACTIVE",
            "current_priority": "ship the bootstrap budget fix",
            "in_progress": ["bench rows", "README wake routine"],
            "waiting_on": "HITL: production deploy window",
            "next_session_context": "rerun the bench on main after the merge",
            "branch": "density",
            "blocked": False,
            "tests": "green",
            "open_prs": 2,
            "mood": "focused",
        },
    )
    for thread, role in (
        ("thread:acmi-launch", "lead"),
        ("thread:code-review", "reviewer"),
        ("thread:ops-oncall", "observer"),
    ):
        acmi.agents.join(agent, thread, role)
    acmi.agents.set_rollup(
        agent,
        "Since yesterday: locks shipped (fencing, coord events); bootstrap in review; "
        "2 HITL items open; deploy waits on the operator.",
        since_ts=acmi.clock() - 86_400_000,
        until_ts=acmi.clock(),
        event_count=25,
        summarizer="extractive",
    )
    kinds = ("note", "task-start", "task-end", "email", "deployment-shipped")
    for n in range(25):
        kind = kinds[n % len(kinds)]
        if n % 6 == 5:
            _reference_event(acmi, agent, f"checked the deploy logs, run {n}")
            continue
        summary = f"{kind} #{n}: rollup work, {n % 9 + 1} files touched"
        event = {**_event(agent, n, kind, summary), "payload": {"files": n % 9 + 1}}
        acmi.timeline.append(agent, event)
    for n in range(5):
        acmi.agents.spawn(agent, f"sess-{n}", "claude-opus-4", host="ci-runner-3")
    for n in range(2):
        acmi.locks.claim(f"deploy:atlas-{n}", agent, 3_600_000)
    now = acmi.clock()
    for n in range(2):
        acmi.hitl.create(
            f"deploy window {n}",
            f"approve the production deploy window #{n}",
            asked_by="agent:bentley",
            urgency=("P0", "P1")[n],
            deadline=now + (n + 1) * 3_600_000,
            addressee=agent,
        )
    acmi.work.create("atlas-budget", {"title": "Bundle budget fix"}, owner=agent)
    acmi.memory.set_active(agent, HOT)
    for line in WARM_LINES:
        acmi.memory.remember(agent, line)


AGENTS: Final[dict[str, Callable[[Acmi, str], None]]] = {
    "idle": idle,
    "busy": busy,
    "coordinating": coordinating,
    "memory": memory,
}


def facts(sections: dict[str, Any]) -> int:
    """What a bundle says, counted from its JSON sections: one per profile or signal
    field, list item (event, thread, spawn, lock, HITL item, work item, lesson), line of a
    memory file (its title and blank lines aside) and the rollup."""
    count = 0
    for value in sections.values():
        if isinstance(value, list):
            count += len(value)
        elif isinstance(value, dict) and isinstance(value.get("text"), str):
            lines = value["text"].split("\n")[1:]
            count += sum(1 for line in lines if line.strip() and not line.startswith("#"))
        elif isinstance(value, dict) and "summary" in value:
            count += 1
        elif isinstance(value, dict):
            count += len(value)
    return count


def build(acmi: Acmi, name: str, agent: str | None = None) -> str:
    """Write fixture agent ``name`` (``AGENTS``) and return its id."""
    agent = agent or f"agent:{name}"
    AGENTS[name](acmi, agent)
    return agent


__all__ = ["AGENTS", "build", "facts"]

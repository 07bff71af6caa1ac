"""A realistic agent, written through the public API: what the bootstrap is measured and
tested on (tests, the conformance suite, the bench).

``build_agent(acmi, "agent:claude-engineer")`` gives the agent a profile, signals,
hundreds of timeline events with payloads, several active threads, a rollup, spawns,
work items it owns, leases it holds, HITL items addressed to it and in the shared queue,
workflows with lessons, and coordination traffic that mentions it among traffic that
does not. Deterministic for a given ``seed``; times come from ``acmi.clock``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from acmi_core.base.model import EntityId
from acmi_core.client import Acmi

KINDS = ("note", "task-start", "task-end", "handoff-request", "deployment-shipped", "email")


@dataclass
class Fleet:
    """What ``build_agent`` wrote, for assertions."""

    agent: str
    events: int
    threads: list[str] = field(default_factory=list)
    work: list[str] = field(default_factory=list)
    locks: list[str] = field(default_factory=list)
    hitl: list[str] = field(default_factory=list)
    hitl_shared: list[str] = field(default_factory=list)
    workflows: list[str] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)

    def keys(self, acmi: Acmi) -> list[str]:
        """The keys a reference-style bootstrap would read (its 6 requests) plus ours."""
        eid = EntityId.parse(self.agent)
        k = acmi.keys
        return [
            k.profile(eid),
            k.signals(eid),
            k.timeline(eid),
            k.slot(eid, "spawns"),
            k.slot(eid, "active_context"),
            k.slot(eid, "rollup:latest"),
        ]


def build_agent(
    acmi: Acmi,
    agent: str = "agent:claude-engineer",
    *,
    events: int = 300,
    seed: int = 7,
    tag: str = "",
) -> Fleet:
    """Write a realistic agent (about 40 requests plus one per 100 events)."""
    rng = random.Random(seed)
    eid = EntityId.parse(agent)
    name = eid.local_id
    fleet = Fleet(agent, events)
    acmi.profile.set(
        agent,
        {
            "name": name,
            "role": "RL engine and coding",
            "model_id": "claude-opus-4",
            "lane": "engineering",
            "best_used_for": ["deep coding tasks", "RL infrastructure"],
            "escalation": "user:mikey",
            "workflows": ["workflow:deploy", "workflow:code-review"],
        },
    )
    acmi.signals.update(
        agent,
        {
            "status": "ACTIVE",
            "current_priority": "ship the bootstrap function",
            "in_progress": ["bench rows", "README wake routine"],
            "waiting_on": "HITL: production deploy window",
            "next_session_context": "rerun the bench on main after the merge",
        },
    )
    batch: list[dict[str, Any]] = []
    for n in range(events):
        kind = KINDS[n % len(KINDS)]
        batch.append(
            {
                "source": agent if n % 3 else "user:mikey",
                "kind": kind,
                "correlationId": f"{tag}task-{n // 4}",
                "summary": f"{kind} #{n}: {rng.choice(['parser', 'locks', 'rollup', 'ingest'])} "
                f"work, {rng.randint(1, 40)} files touched",
                "payload": {"n": n, "files": rng.randint(1, 40), "ok": bool(n % 5)},
            }
        )
        if len(batch) == 100:
            acmi.timeline.extend(agent, batch)
            batch = []
    if batch:
        acmi.timeline.extend(agent, batch)
    for thread, role in (
        ("thread:acmi-launch", "lead"),
        ("thread:agent-coordination", "participant"),
        ("thread:code-review", "reviewer"),
        ("thread:ops-oncall", "observer"),
    ):
        acmi.agents.join(agent, thread, role)
        fleet.threads.append(thread)
    acmi.agents.set_rollup(
        agent,
        "Since yesterday: locks shipped (fencing, coord events); bootstrap in review; "
        "2 HITL items open; deploy waits on the operator.",
        since_ts=acmi.clock() - 86_400_000,
        until_ts=acmi.clock(),
        event_count=events,
        summarizer="extractive",
    )
    for n in range(8):
        acmi.agents.spawn(agent, f"{tag}sess-{n}", "claude-opus-4", host="ci-runner-3")
    for n in range(6):
        work_id = f"{tag}{name}-task-{n}"
        acmi.work.create(
            work_id, {"title": f"Task {n}: {rng.choice(['parser', 'bench'])}"}, owner=agent
        )
        acmi.work.event(
            work_id,
            {"source": agent, "kind": "progress", "correlationId": work_id, "summary": "started"},
            session_id=f"{tag}sess-{n}",
        )
        if n >= 4:
            acmi.work.signal(work_id, {"status": "done"})
        else:
            fleet.work.append(work_id)
    for n in range(3):
        resource = f"{tag}deploy:{name}-{n}"
        acmi.locks.claim(resource, agent, 3_600_000)
        fleet.locks.append(resource)
    acmi.locks.claim(f"{tag}deploy:someone-else", "agent:gemini-cli", 3_600_000)
    now = acmi.clock()
    for n, urgency in enumerate(("P0", "P1", "P2")):
        acmi.hitl.create(
            f"deploy window {n}",
            f"approve the production deploy window #{n}",
            asked_by="agent:bentley",
            urgency=urgency,
            deadline=now + (n + 1) * 3_600_000,
            addressee=agent,
            correlation_id=f"{tag}hitl-{name}-{n}",
        )
        fleet.hitl.append(f"{tag}hitl-{name}-{n}")
    for n in range(2):
        acmi.hitl.create(
            f"shared question {n}",
            "anyone: confirm the DNS cutover",
            asked_by="agent:gemini-cli",
            correlation_id=f"{tag}hitl-shared-{n}",
        )
        fleet.hitl_shared.append(f"{tag}hitl-shared-{n}")
    for workflow in ("workflow:deploy", "workflow:code-review"):
        for step in ("build", "test", "ship"):
            acmi.workflows.execute(workflow, step, agent)
            acmi.workflows.assess(workflow, step, rng.randint(60, 100), {"speed": 4}, agent)
        lesson = acmi.workflows.improve(
            workflow, "ship", f"{workflow}: pin the runtime first", agent
        )
        fleet.workflows.append(workflow)
        fleet.lessons.append(lesson.correlationId)
    acmi.workflows.improve("workflow:unrelated", "x", "not this agent's lesson", "agent:gemini-cli")
    for n in range(12):
        mention = agent if n % 3 == 0 else "agent:gemini-cli"
        acmi.timeline.append(
            "thread:agent-coordination",
            {
                "source": "agent:bentley",
                "kind": "handoff-request",
                "correlationId": f"{tag}handoff-{n}",
                "summary": f"[handoff] {mention} please take review #{n}",
            },
        )
    return fleet


__all__ = ["Fleet", "build_agent"]

"""``bootstrap``: the wake bundle. One call returns every section, labelled, with what the
agent has (and logs the spawn it is given); a budget is kept and what it cut is named;
a group bundle never carries the private profile. Runs in the context's own tenant."""

from __future__ import annotations

from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.model import EntityId
from acmi_core.bootstrap.bundle import TITLES
from acmi_core.client import Acmi
from acmi_core.testing.conformance.harness import Context, check, expect, expect_equal


def _agent(ctx: Context) -> tuple[Acmi, str]:
    """A client of the context's tenant and a fresh agent, with the tenant's bookkeeping
    keys tracked for cleanup."""
    acmi = ctx.tenant()
    agent = ctx.entity("agent", "boot")
    eid = EntityId.parse(agent)
    keys = acmi.keys
    for key in (
        keys.leases(),
        keys.work_owners(),
        keys.work_open(eid),
        keys.hitl_items(),
        keys.hitl_queue(eid, "open"),
        keys.hitl_queue(None, "open"),
        keys.lessons(),
        keys.agent_workflows(eid),
        keys.mentions(eid.local_id),
        keys.index("thread"),
        keys.index("work"),
        keys.index("workflow"),
    ):
        ctx.track_key(key)
    ctx.track(COORDINATION_THREAD)
    return acmi, agent


@check("bootstrap", "one call returns every section with what the agent has, and logs the spawn")
def bootstrap_complete(ctx: Context) -> None:
    acmi, agent = _agent(ctx)
    token = ctx.token
    acmi.profile.set(agent, {"name": "boot"})
    acmi.signals.set(agent, "status", "ACTIVE")
    acmi.timeline.append(
        agent, {"source": agent, "kind": "note", "correlationId": "c-1", "summary": "hello"}
    )
    acmi.agents.join(agent, "thread:conf", "lead")
    acmi.agents.set_rollup(agent, "all quiet")
    resource = f"conf-{token}-boot"
    ctx.track_key(acmi.keys.lock(resource))
    lease = acmi.locks.claim(resource, agent, 60_000)
    work = ctx.track(f"work:conf-{token}-w")
    acmi.work.create(work.split(":", 1)[1], {"title": "conformance work"}, owner=agent)
    acmi.hitl.create("topic", "unblock me", asked_by="agent:asker", addressee=agent)
    acmi.hitl.create("shared", "anyone", asked_by="agent:asker")
    workflow = ctx.track(f"workflow:conf-{token}")
    acmi.workflows.improve(workflow, "step-1", "pin versions", agent)
    # the new session's start goes in today's note: its once-mark and the memory index
    ctx.track_key(acmi.keys.session_logged(EntityId.parse(agent), "s-1"))
    ctx.track_key(acmi.keys.memory_index())
    bundle = acmi.bootstrap(agent, spawn={"session_id": "s-1", "model_id": "m-1"})
    sections = bundle.to_dict()["sections"]
    expect_equal(list(sections), list(TITLES), "sections, in order")
    expect_equal(sections["profile"]["name"], "boot", "profile")
    expect_equal(sections["signals"], {"status": "ACTIVE"}, "signals")
    expect_equal([e["correlationId"] for e in sections["timeline"]], ["c-1"], "timeline")
    expect_equal([t["thread"] for t in sections["active_threads"]], ["thread:conf"], "threads")
    expect_equal(sections["rollup"]["summary"], "all quiet", "rollup")
    expect_equal([x["resource"] for x in sections["locks"]], [resource], "locks")
    expect_equal([w["id"] for w in sections["work"]], [work.split(":", 1)[1]], "work")
    expect_equal([h["payload"]["topic"] for h in sections["hitl"]], ["topic"], "hitl")
    expect("shared" in [h["payload"]["topic"] for h in sections["hitl_shared"]], "shared queue")
    expect_equal([x["payload"]["lesson"] for x in sections["lessons"]], ["pin versions"], "lessons")
    expect(
        lease.correlationId in [e["correlationId"] for e in sections["coordination"]],
        "the agent's coord-claim among its coordination events",
    )
    expect_equal([s["session_id"] for s in sections["spawns"]], ["s-1"], "the spawn, logged")
    expect_equal(bundle.problems, [], "problems")


@check("bootstrap", "a budget is kept, and what it cut is named")
def bootstrap_budget(ctx: Context) -> None:
    acmi, agent = _agent(ctx)
    acmi.timeline.extend(
        agent,
        [
            {"source": agent, "kind": "note", "correlationId": f"c-{n}", "summary": "x" * 200}
            for n in range(60)
        ],
    )
    for fmt in ("json", "markdown"):
        bundle = acmi.bootstrap(agent, format=fmt, events=60, max_bytes=4_000)
        expect(bundle.size_bytes <= 4_000, f"{fmt}: {bundle.size_bytes} bytes > 4000")
        expect(bundle.cut.get("timeline", 0) > 0, f"{fmt}: the timeline cut is named")


@check("bootstrap", "a group bundle never carries the profile")
def bootstrap_group(ctx: Context) -> None:
    acmi, agent = _agent(ctx)
    acmi.profile.set(agent, {"diary": "private-warm-memory"})
    bundle = acmi.bootstrap(agent, scope="group", format="markdown")
    expect("private-warm-memory" not in bundle.text, "the profile reached a group bundle")
    expect("profile" not in bundle.to_dict()["sections"], "a profile section in a group bundle")


@check("bootstrap", "SOUL.md and USER.md come first (AGENTS.md too in main), as written")
def bootstrap_startup_files(ctx: Context) -> None:
    from acmi_core.base.keys import MEMORY_AGENTS, MEMORY_SOUL, MEMORY_USER
    from acmi_core.memory.tree import parse_tree

    acmi, agent = _agent(ctx)
    eid = EntityId.parse(agent)
    for slot in (MEMORY_SOUL, MEMORY_USER, MEMORY_AGENTS):
        ctx.track_key(acmi.keys.slot(eid, slot))
    files = {"SOUL.md": "I am boot.\r\n", "USER.md": "# USER.md\nPriya", "AGENTS.md": "- how\n"}
    acmi.memory.import_snapshot(agent, parse_tree({p: t.encode() for p, t in files.items()}))
    main = acmi.bootstrap(agent).to_dict()["sections"]
    expect_equal(list(main)[:3], ["soul", "user", "agents"], "main: the startup files first")
    for name, path in (("soul", "SOUL.md"), ("user", "USER.md"), ("agents", "AGENTS.md")):
        expect_equal(main[name], {"path": path, "text": files[path]}, f"main: {path}")
    group = acmi.bootstrap(agent, scope="group").to_dict()["sections"]
    expect_equal(list(group)[:2], ["soul", "user"], "group: SOUL.md and USER.md first")
    expect("agents" not in group, "group: no AGENTS.md")
    sub = acmi.bootstrap(agent, scope="subagent").to_dict()["sections"]
    expect(not {"soul", "user", "agents"} & set(sub), "subagent: task context only")

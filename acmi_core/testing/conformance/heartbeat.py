"""``heartbeat``: heartbeats set their signals and keep the activity index the sweep reads.

Every check runs on the context's own tenant (``ctx.tenant()``), whose activity index it
deletes afterwards: the index is per tenant, not per entity."""

from __future__ import annotations

from collections.abc import Callable

from acmi_core.client import Acmi
from acmi_core.testing.conformance.harness import Context, check, expect_equal, expect_rejected
from acmi_core.testing.conformance.helpers import BASE_TS


def _on_tenant(ctx: Context, body: Callable[[Acmi], None]) -> None:
    acmi = ctx.tenant()
    try:
        body(acmi)
    finally:
        acmi.store.execute(("DEL", acmi.keys.activity()))


@check("heartbeat", "a heartbeat sets last_heartbeat_ts, status and status_note, keeping others")
def heartbeat_signals(ctx: Context) -> None:
    agent = ctx.entity("agent")

    def body(acmi: Acmi) -> None:
        acmi.signals.set(agent, "current_task", [1, {}])
        beat = acmi.agents.heartbeat(agent, "BLOCKED", "waiting", now=BASE_TS)
        expect_equal(
            beat, {"agent": agent, "ts": BASE_TS, "status": "BLOCKED", "note": "waiting"}, "reply"
        )
        expect_equal(
            acmi.signals.all(agent),
            {
                "current_task": [1, {}],
                "last_heartbeat_ts": BASE_TS,
                "status": "BLOCKED",
                "status_note": "waiting",
            },
            "signals after a heartbeat",
        )
        acmi.agents.heartbeat(agent, now=BASE_TS + 1)
        expect_equal(
            acmi.signals.all(agent),
            {"current_task": [1, {}], "last_heartbeat_ts": BASE_TS + 1, "status": "ACTIVE"},
            "signals after a heartbeat without a note",
        )

    _on_tenant(ctx, body)


@check("heartbeat", "silent_since lists agents by last heartbeat, oldest first, cutoff exclusive")
def heartbeat_silent(ctx: Context) -> None:
    old, older, fresh = ctx.entity("agent"), ctx.entity("agent"), ctx.entity("agent")

    def body(acmi: Acmi) -> None:
        acmi.agents.heartbeat(old, now=BASE_TS + 20)
        acmi.agents.heartbeat(older, now=BASE_TS + 10)
        acmi.agents.heartbeat(fresh, now=BASE_TS + 30)
        expect_equal(
            acmi.agents.silent_since(BASE_TS + 30),
            [(older, BASE_TS + 10), (old, BASE_TS + 20)],
            "silent_since(cutoff)",
        )
        acmi.agents.heartbeat(older, now=BASE_TS + 40)  # moves, never duplicates
        expect_equal(
            acmi.agents.silent_since(BASE_TS + 100, limit=10),
            [(old, BASE_TS + 20), (fresh, BASE_TS + 30), (older, BASE_TS + 40)],
            "silent_since after a new heartbeat",
        )
        expect_equal(
            acmi.agents.silent_since(BASE_TS + 100, limit=1, offset=1),
            [(fresh, BASE_TS + 30)],
            "limit and offset",
        )
        expect_equal(ctx.acmi.agents.silent_since(BASE_TS + 100), [], "another tenant's index")

    _on_tenant(ctx, body)


@check("heartbeat", "a bad status, agent or note is rejected")
def heartbeat_rejected(ctx: Context) -> None:
    agents = ctx.acmi.agents
    for what, action, field in (
        ("status over 64", lambda: agents.heartbeat("claude", "S" * 65), "status"),
        ("status with ;", lambda: agents.heartbeat("claude", "ok;"), "status"),
        ("not an agent", lambda: agents.heartbeat("user:mikey"), "agent"),
        ("note over 500", lambda: agents.heartbeat("claude", note="n" * 501), "note"),
    ):
        exc = expect_rejected(action, what)
        expect_equal(exc.field, field, f"{what}: field")

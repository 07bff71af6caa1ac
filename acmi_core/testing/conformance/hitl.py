"""``hitl``: HITL queues: idempotent create, deadline order, atomic resolve.

Every check runs on the context's own tenant (``ctx.tenant()``) and deletes what HITL
kept there afterwards (the record HASH, the queues it used, the tenant's coordination
thread): those keys are per tenant, not per entity."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from acmi_core.base.errors import Conflict, NotFound
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.model import EntityId
from acmi_core.client import Acmi
from acmi_core.testing.conformance.harness import (
    Context,
    check,
    expect,
    expect_equal,
    expect_raises,
    expect_rejected,
)
from acmi_core.testing.conformance.helpers import BASE_TS


def _on_tenant(ctx: Context, addressee: str, body: Callable[[Acmi], None]) -> None:
    acmi = ctx.tenant()
    eid = EntityId.parse(addressee)
    try:
        body(acmi)
    finally:
        keys = [acmi.keys.hitl_items(), acmi.keys.coordination_timeline()]
        for to in (None, eid):
            keys += [acmi.keys.hitl_queue(to, "open"), acmi.keys.hitl_queue(to, "closed")]
        for key in keys:
            acmi.store.execute(("DEL", key))
        acmi.store.execute(("SREM", acmi.keys.index("thread"), "agent-coordination"))


def _queue(acmi: Acmi, addressee: str, state: str) -> list[object]:
    reply = acmi.store.execute(
        ("ZRANGE", acmi.keys.hitl_queue(EntityId.parse(addressee), state), 0, -1)
    )
    return [json.loads(m) for m in reply if isinstance(m, bytes)] if isinstance(reply, list) else []


@check("hitl", "create is idempotent by correlationId and queues by deadline")
def hitl_create(ctx: Context) -> None:
    to = ctx.entity("user")

    def body(acmi: Acmi) -> None:
        late = acmi.hitl.create(
            "t", "r", asked_by="agent:a", addressee=to, deadline=BASE_TS + 9, correlation_id="late"
        )
        soon = acmi.hitl.create(
            "t", "r", asked_by="agent:a", addressee=to, deadline=BASE_TS + 1, correlation_id="soon"
        )
        again = acmi.hitl.create(
            "other", "r", asked_by="agent:b", addressee=to, deadline=BASE_TS, correlation_id="late"
        )
        expect(late.created and soon.created and not again.created, "created flags")
        expect_equal(again.item, late.item, "re-create returns the stored item")
        expect_equal(_queue(acmi, to, "open"), [soon.item, late.item], "open queue, raw ZRANGE")
        expect_equal(acmi.hitl.list(to).items, [soon.item, late.item], "list")
        expect_equal(late.item["kind"], "hitl-required", "kind")
        expect_equal(late.item["payload"]["addressee"], to, "payload.addressee")

    _on_tenant(ctx, to, body)


@check("hitl", "resolve moves the item to closed and posts hitl-resolved; twice is a 409")
def hitl_resolve(ctx: Context) -> None:
    to = ctx.entity("user")

    def body(acmi: Acmi) -> None:
        item = acmi.hitl.create("t", "r", asked_by="agent:a", addressee=to, correlation_id="c").item
        acmi.hitl.resolve("c", "done", by=to)
        expect_equal(_queue(acmi, to, "open"), [], "open queue after resolve")
        members = _queue(acmi, to, "closed")
        expect(len(members) == 1 and isinstance(members[0], dict), "one closed member, an object")
        closed: dict[str, Any] = members[0] if isinstance(members[0], dict) else {}
        expect_equal(closed["correlationId"], "c", "closed correlationId")
        expect_equal(closed["payload"]["resolution"]["text"], "done", "payload.resolution.text")
        expect_equal(
            {k: v for k, v in closed.items() if k != "payload"},
            {k: v for k, v in item.items() if k != "payload"},
            "closed member keeps the item",
        )
        events = acmi.timeline.read(COORDINATION_THREAD).to_dicts()
        expect_equal(
            [(e["kind"], e["correlationId"]) for e in events],
            [("hitl-resolved", "c")],
            "coordination thread",
        )
        expect_raises(Conflict, lambda: acmi.hitl.resolve("c", "x", by=to), "second resolve")
        expect_raises(NotFound, lambda: acmi.hitl.resolve("nope", "x", by=to), "unknown id")
        expect_equal(len(acmi.timeline.read(COORDINATION_THREAD)), 1, "events after refusals")

    _on_tenant(ctx, to, body)


@check("hitl", "a bad urgency, topic, id or state is rejected")
def hitl_rejected(ctx: Context) -> None:
    hitl = ctx.acmi.hitl
    for what, action, field in (
        ("urgency P7", lambda: hitl.create("t", "r", asked_by="agent:a", urgency="P7"), "urgency"),
        ("empty topic", lambda: hitl.create("", "r", asked_by="agent:a"), "topic"),
        ("bad asker", lambda: hitl.create("t", "r", asked_by="nobody"), "asked_by"),
        (
            "bad correlationId",
            lambda: hitl.create("t", "r", asked_by="agent:a", correlation_id="a b"),
            "correlationId",
        ),
        ("state", lambda: hitl.list(state="pending"), "state"),
        ("resolver", lambda: hitl.resolve("c", "x", by="nobody"), "by"),
    ):
        exc = expect_rejected(action, what)
        expect_equal(exc.field, field, f"{what}: field")

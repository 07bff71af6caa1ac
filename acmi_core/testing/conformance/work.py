"""``work``: work items (``acmi.work``): create, get in one read, an event with a session
id, and the owner's open index following status changes.

Every check deletes its items through ``acmi.work.delete`` (which also removes their
index entries, which the context's own cleanup does not know about)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from acmi_core.base.errors import Conflict
from acmi_core.base.model import EntityId, tenant_id_fill
from acmi_core.client import Acmi
from acmi_core.testing.conformance.harness import (
    Context,
    check,
    expect,
    expect_equal,
    expect_raises,
    expect_rejected,
)
from acmi_core.testing.conformance.helpers import make_event, raw_json


@contextmanager
def _items(ctx: Context, *names: str) -> Iterator[list[str]]:
    """Fresh work ids, deleted (index entries included) however the check ends."""
    ids = [EntityId.parse(ctx.entity("work", name)).local_id for name in names]
    try:
        yield ids
    finally:
        for work_id in ids:
            ctx.acmi.work.delete(work_id)


def _open(acmi: Acmi, owner: str) -> list[str]:
    key = acmi.keys.work_open(EntityId.parse(owner))
    reply = acmi.store.execute(("ZRANGE", key, 0, -1))
    members = reply if isinstance(reply, list) else []
    return sorted(m.decode() for m in members if isinstance(m, bytes))


@check("work", "create stores the reference layout and refuses an existing id")
def work_create(ctx: Context) -> None:
    acmi = ctx.acmi
    owner = ctx.entity("agent", "owner")
    with _items(ctx, "launch") as (wid,):
        item = acmi.work.create(wid, {"title": "launch"}, owner=owner)
        eid = EntityId.parse(f"work:{wid}")
        expect_equal(item.owner, owner, "owner")
        expect_equal(
            raw_json(acmi, acmi.keys.profile(eid)),
            {"title": "launch", "owner": owner, "tenant_id": tenant_id_fill(acmi.tenant)},
            "stored profile",
        )
        expect_equal(raw_json(acmi, acmi.keys.signals(eid)), {"status": "open"}, "signals")
        expect(f"work:{wid}" in acmi.list("work"), "the item is in acmi:work:list")
        expect_equal(_open(acmi, owner), [wid], "the owner's open index")
        conflict = expect_raises(
            Conflict, lambda: acmi.work.create(wid, {"title": "again"}), "a second create"
        )
        expect_equal((conflict.field, conflict.rule), ("id", "unique"), "the conflict")
        expect_equal(acmi.profile.get(f"work:{wid}"), item.profile, "profile after the 409")


@check("work", "get returns profile, signals, newest events and sessions")
def work_get(ctx: Context) -> None:
    acmi = ctx.acmi
    with _items(ctx, "get") as (wid,):
        acmi.work.create(wid, {"title": "t"})
        for n in range(4):
            acmi.work.event(wid, make_event(n, ts=1_700_000_000_000 + n), session_id=f"s-{n % 2}")
        item = acmi.work.get(wid, events=2)
        expect_equal(
            [e["correlationId"] for e in item.timeline], ["conf-c-2", "conf-c-3"], "events"
        )
        expect_equal(item.signals, {"status": "open"}, "signals")
        expect_equal((item.sessions, item.sessions_total), (["s-0", "s-1"], 2), "sessions")
        expect_equal(item.problems, [], "problems")


@check("work", "an event with a session id carries it and joins the sessions")
def work_event_session(ctx: Context) -> None:
    acmi = ctx.acmi
    with _items(ctx, "event") as (wid,):
        acmi.work.create(wid, {"title": "t"})
        stored = acmi.work.event(wid, make_event(1), session_id="sess-1")
        expect_equal(stored.get("session_id"), "sess-1", "the event's session_id")
        timeline = acmi.timeline.read(f"work:{wid}").to_dicts()
        expect_equal([e.get("session_id") for e in timeline], ["sess-1"], "stored session_id")
        expect_equal(acmi.work.sessions(wid), ["sess-1"], "sessions")
        key = acmi.keys.slot(EntityId.parse(f"work:{wid}"), "sessions")
        expect_equal(acmi.store.execute(("SMEMBERS", key)), [b"sess-1"], "the sessions SET")


@check("work", "status changes and reassignment keep the open index exact")
def work_status_index(ctx: Context) -> None:
    acmi = ctx.acmi
    first, second = ctx.entity("agent", "first"), ctx.entity("agent", "second")
    with _items(ctx, "a", "b") as (a, b):
        acmi.work.create(a, {"title": "a"}, owner=first)
        acmi.work.create(b, {"title": "b"}, owner=first, status="done")
        expect_equal(_open(acmi, first), [a], "after create (b is done)")
        steps: list[tuple[Callable[[], Any], list[str], list[str]]] = [
            (lambda: acmi.work.signal(a, {"status": "closed"}), [], []),
            (lambda: acmi.work.signal(b, {"status": "in-progress"}), [b], []),
            (lambda: acmi.work.assign(b, second), [], [b]),
            (lambda: acmi.work.signal(a, {"status": "open"}), [a], [b]),
            (lambda: acmi.work.assign(a, second), [], sorted([a, b])),
            (lambda: acmi.work.signal(b, {"status": "Cancelled"}), [], [a]),
        ]
        for n, (step, in_first, in_second) in enumerate(steps):
            step()
            expect_equal(_open(acmi, first), sorted(in_first), f"step {n}: first owner")
            expect_equal(_open(acmi, second), sorted(in_second), f"step {n}: second owner")
        owners = acmi.store.execute(("HMGET", acmi.keys.work_owners(), a, b))
        expect_equal(owners, [second.encode(), second.encode()], "the owners HASH")


@check("work", "bad ids, owners, statuses and session ids are rejected")
def work_rejects(ctx: Context) -> None:
    acmi = ctx.acmi
    bad: dict[str, Callable[[], object]] = {
        "id": lambda: acmi.work.create("no spaces", {}),
        "id category": lambda: acmi.work.create("user:x", {}),
        "owner": lambda: acmi.work.create("x", {}, owner="Not An Id"),
        "status": lambda: acmi.work.create("x", {}, status=""),
        "profile": lambda: acmi.work.create("x", json.loads("[]")),
        "session": lambda: acmi.work.event("x", make_event(), session_id="s" * 257),
        "signal status": lambda: acmi.work.signal("x", {"status": 1}),
    }
    for what, action in bad.items():
        expect_rejected(action, what)

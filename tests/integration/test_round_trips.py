"""Round trips per operation, counted by the Upstash double (each one an HTTP request:
on Upstash, latency is round trips x RTT). The reference's counts are in REFERENCE.md."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from acmi_core import Acmi, Conflict, Settings, create_acmi
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble

EVENT = {"source": "agent:a", "kind": "note", "correlationId": "c-1", "summary": "hello"}


@pytest.fixture
def acmi_up(upstash_store: UpstashStore) -> Iterator[Acmi]:
    acmi = create_acmi(upstash_store, Settings())
    acmi.signals.set("user:warm", "k", 1)  # load the write script once (EVALSHA cache)
    acmi.timeline.page("user:warm")  # and the page script, flagged no-writes (EVALSHA_RO)
    acmi.get("user:warm")  # and its plain form, which a read's pipeline sends (EVALSHA)
    acmi.timeline.cat(["user:warm"])  # and the merge script (a cat runs it)
    acmi.profile.set("user:rt", {"name": "rt"})
    acmi.timeline.append("user:rt", EVENT)
    yield acmi


def _batch(acmi: Acmi) -> None:
    with acmi.batch() as b:
        b.profile.set("user:rt", {"a": 1})
        b.signals.set("user:rt", "s", 1)
        b.timeline.append("user:rt", {**EVENT, "summary": "batched"})


OPERATIONS: dict[str, tuple[Callable[[Acmi], Any], int]] = {
    # operation: (call, round trips)
    "get (profile+signals+50 events)": (lambda a: a.get("user:rt"), 1),
    "timeline.append (+ index)": (lambda a: a.timeline.append("user:rt", EVENT), 1),
    "timeline.extend (3 events)": (lambda a: a.timeline.extend("user:rt", [EVENT] * 3), 1),
    "batch (profile+signal+event)": (_batch, 1),
    "signals.set": (lambda a: a.signals.set("user:rt", "k", "v"), 1),
    "signals.delete": (lambda a: a.signals.delete("user:rt", "k"), 1),
    "profile.merge": (lambda a: a.profile.merge("user:rt", {"x": 1}), 1),
    "profile.set": (lambda a: a.profile.set("user:rt", {"x": 1}), 1),
    "profile.get": (lambda a: a.profile.get("user:rt"), 1),
    "signals.all": (lambda a: a.signals.all("user:rt"), 1),
    "timeline.read": (lambda a: a.timeline.read("user:rt", limit=10, reverse=True), 1),
    "timeline.size": (lambda a: a.timeline.size("user:rt"), 1),
    # the reference's `cat`: one ZRANGEBYSCORE per timeline, in turn
    "timeline.cat (3 timelines)": (
        lambda a: a.timeline.cat(["user:rt", "user:warm", "thread:x"], since_ms=0),
        1,
    ),
    "list": (lambda a: a.list("user"), 1),  # one per 1,000 ids (SSCAN steps)
    "list_page": (lambda a: a.list_page("user", limit=10), 1),
    "timeline.page": (lambda a: a.timeline.page("user:rt", limit=10, reverse=True), 1),
    "delete (all slots + index)": (lambda a: a.delete("user:rt"), 1),
}


@pytest.mark.parametrize("name", OPERATIONS)
def test_round_trips(acmi_up: Acmi, upstash_double: UpstashDouble, name: str) -> None:
    call, expected = OPERATIONS[name]
    # the same call in a tenant of its own first: a script's first run on a server may
    # load it (a second request), which depends on what ran before, not on the operation
    call(acmi_up.for_tenant("rt-warm"))
    upstash_double.reset_counts()
    call(acmi_up)
    assert upstash_double.requests == expected, name


def test_a_workflow_execute_checks_for_an_unassessed_run_in_its_one_round_trip(
    acmi_up: Acmi, upstash_double: UpstashDouble
) -> None:
    """ACMI_WORKFLOW_REQUIRE_ASSESSMENT (on): the check is the execute's own script run."""
    w = acmi_up.workflows
    steps: list[tuple[str, Callable[[], object]]] = [
        ("execute", lambda: w.execute("deploy", "build", "agent:a", correlation_id="r1")),
        ("execute refused", lambda: w.execute("deploy", "build", "agent:a", correlation_id="r2")),
        ("assess", lambda: w.assess("deploy", "build", 90, [], "agent:a", correlation_id="r1")),
        ("execute again", lambda: w.execute("deploy", "build", "agent:a", correlation_id="r2")),
    ]
    counts: dict[str, int] = {}
    for name, step in steps:
        upstash_double.reset_counts()
        try:
            step()
        except Conflict as exc:
            assert name == "execute refused" and exc.rule == "assessment_required"
        counts[name] = upstash_double.requests
    assert counts == dict.fromkeys(counts, 1)


def test_a_bootstrap_is_one_round_trip_and_two_with_open_work(
    acmi_up: Acmi, upstash_double: UpstashDouble
) -> None:
    """The script names every key before it runs, so the open work items (whose keys come
    from the ids in the agent's index) are read in a second round trip, only when there
    are any. Before: 1 either way (the script built their key names)."""
    acmi_up.bootstrap("agent:rt")  # loads the script
    upstash_double.reset_counts()
    acmi_up.bootstrap("agent:rt")
    assert upstash_double.requests == 1
    acmi_up.work.create("w-rt", {"title": "open"}, owner="agent:rt")
    upstash_double.reset_counts()
    work = acmi_up.bootstrap("agent:rt").to_dict()["sections"]["work"]
    assert upstash_double.requests == 2
    assert [(w["id"], w["profile"]["title"]) for w in work] == [("w-rt", "open")]


def test_every_page_is_one_round_trip(acmi_up: Acmi, upstash_double: UpstashDouble) -> None:
    """Following next_cursor costs one round trip per page, also inside a run of equal
    timestamps; a streamed listing reads one page per step."""
    acmi_up.timeline.extend(
        "user:pages", [{**EVENT, "ts": 7, "summary": f"{n}"} for n in range(25)]
    )
    for n in range(25):
        acmi_up.signals.set(f"user:p{n}", "k", 1)
    first = acmi_up.timeline.page("user:pages", limit=10)  # a cursor page runs lua/page.lua:
    acmi_up.timeline.page("user:pages", cursor=first.next_cursor)  # load it (EVALSHA cache)
    for read in (
        lambda cursor: acmi_up.timeline.page("user:pages", cursor=cursor, limit=10),
        lambda cursor: acmi_up.list_page("user", cursor=cursor, limit=10),
    ):
        cursor, counts = None, []
        while True:
            upstash_double.reset_counts()
            page = read(cursor)
            counts.append(upstash_double.requests)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert len(counts) >= 3 and set(counts) == {1}
    upstash_double.reset_counts()
    listing = acmi_up.iter_list("user", limit=10)
    assert upstash_double.requests == 0  # nothing read until iterated
    for _ in range(10):
        next(listing)
    assert upstash_double.requests == 1


def test_first_write_of_a_process_loads_the_script_once(
    upstash_double: UpstashDouble, upstash_store: UpstashStore
) -> None:
    """EVALSHA misses once per server script cache (NOSCRIPT), then EVAL loads it. The
    first EVAL of a process also learns whether the server takes allow-key-locking: the
    double's redis-server (OSS 7.0) refuses it, so that EVAL is sent again without it
    (3; on Upstash, which takes it: 2). Once per process, never again."""
    upstash_store.execute(("SCRIPT", "FLUSH"))  # as on a fresh server
    upstash_double.reset_counts()
    acmi = create_acmi(upstash_store, Settings())
    acmi.signals.set("user:cold", "k", 1)
    assert upstash_double.requests == 3
    assert upstash_store.script_dialect.key_locking is False
    upstash_double.reset_counts()
    acmi.signals.set("user:cold", "k", 2)
    assert upstash_double.requests == 1


def test_a_warm_webhook_is_one_round_trip(
    upstash_double: UpstashDouble, upstash_store: UpstashStore
) -> None:
    """Key record and source config are cached per process; the delivery itself (events,
    index, idempotency record) is one script."""
    from fastapi.testclient import TestClient

    from acmi_core.api.app import create_app
    from acmi_core.api.context import ApiContext
    from acmi_core.auth import apikeys

    acmi = create_acmi(upstash_store, Settings())
    key, _ = apikeys.mint(upstash_store, tenant="default", scope="write", name="rt", now_ms=1)
    client = TestClient(create_app(ApiContext(acmi)))
    headers = {"authorization": f"Bearer {key}"}
    counts = []
    for n in range(3):
        upstash_double.reset_counts()
        response = client.post(
            "/v1/ingest/n8n?entity=deal:rt", json={"message": f"item {n}"}, headers=headers
        )
        assert response.status_code == 201
        counts.append(upstash_double.requests)
    assert counts[1:] == [1, 1]  # the first also looked up the key and the source config


def _mentions(acmi: Acmi, agent: str) -> list[str]:
    reply = acmi.store.execute(("ZRANGE", acmi.keys.mentions(agent), 0, -1))
    assert isinstance(reply, list)
    return [json.loads(m)["kind"] for m in reply if isinstance(m, bytes)]


def test_a_write_whose_keys_come_from_stored_data_costs_one_more_in_another_process(
    acmi_up: Acmi, upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    """A lease's holder, a HITL record's addressee and a work item's owner are read by the
    script, and the keys they lead to (their mentions index, their queues, their open
    index) must be declared before it runs: a process that wrote the item knows them (1
    round trip, as before); another is told them, nothing written, and sends the run
    again (2). The results, and the mentions indexed, are the same either way."""
    other = create_acmi(upstash_store, Settings())  # another process: it saw nothing
    lease = acmi_up.locks.claim("deploy", "agent:holder", 60_000)
    acmi_up.hitl.create("key", "paste it", asked_by="agent:a", addressee="agent:asked")
    cid = acmi_up.hitl.create("k2", "again", asked_by="agent:a", addressee="agent:asked")
    acmi_up.work.create("w-own", {"title": "t"}, owner="agent:owner")
    other.signals.set("user:warm", "k", 2)  # the scripts are loaded: count writes only
    counts = {}
    for name, call in {
        "locks.release": lambda a: a.locks.release("deploy", lease.owner_token or ""),
        "hitl.resolve (no addressee named)": lambda a: a.hitl.resolve(
            cid.item["correlationId"], "done", by="user:op"
        ),
        "work.event (item of another process)": lambda a: a.work.event(
            "w-own", {**EVENT, "source": "agent:owner"}
        ),
        "work.event (the owner seen)": lambda a: a.work.event(
            "w-own", {**EVENT, "source": "agent:owner"}
        ),
    }.items():
        upstash_double.reset_counts()
        call(other)
        counts[name] = upstash_double.requests
    assert counts == {
        "locks.release": 2,
        "hitl.resolve (no addressee named)": 2,
        "work.event (item of another process)": 2,
        "work.event (the owner seen)": 1,
    }
    assert "coord-release" in _mentions(acmi_up, "holder")
    assert "hitl-resolved" in _mentions(acmi_up, "asked")
    # the same in the process that saw them: one round trip each
    again = acmi_up.locks.claim("deploy", "agent:holder", 60_000)
    upstash_double.reset_counts()
    acmi_up.locks.release("deploy", again.owner_token or "")
    assert upstash_double.requests == 1


def test_the_langgraph_stores_round_trips(acmi_up: Acmi, upstash_double: UpstashDouble) -> None:
    """AcmiStore: a batch of puts and deletes is one script run; its gets one pipeline; a
    search of one namespace two (the index range, one HSCAN), plus one a namespace more;
    a read that refreshes TTLs one more; a listing one per 1,000 namespaces."""
    from langgraph.store.base import GetOp, PutOp

    from acmi_core.integrations.langgraph import AcmiStore

    store = AcmiStore(acmi_up.for_tenant("rt-langgraph"))

    def counted(call: Callable[[], Any]) -> int:
        upstash_double.reset_counts()
        call()
        return upstash_double.requests

    puts = [PutOp(("users", str(n)), f"k{k}", {"n": n}) for n in range(5) for k in range(4)]
    # a script's first run on a server may load it (a second request): not what is counted
    store.batch([PutOp(("warm",), "k", {"n": 0}), PutOp(("warm",), "j", None)])
    store.put(("warm",), "k", {"v": 1})
    assert counted(lambda: store.batch([*puts, PutOp(("users", "0"), "k0", None)])) == 1
    assert counted(lambda: store.put(("users", "9"), "k", {"v": 1})) == 1
    assert counted(lambda: store.delete(("users", "9"), "k")) == 1
    gets = [GetOp(("users", str(n)), "k1") for n in range(5)]
    assert counted(lambda: store.batch(gets)) == 1
    assert counted(lambda: store.search(("users", "1"), limit=10)) == 2
    assert counted(lambda: store.search(("users",), limit=100)) == 1 + 5
    assert counted(lambda: store.search(("users",), limit=2)) == 1 + 1  # stops early
    assert counted(lambda: store.list_namespaces(prefix=("users",))) == 1
    store.put(("t",), "k", {"v": 1}, ttl=5)
    assert counted(lambda: store.get(("t",), "k")) == 2  # the read, then the refresh
    assert counted(lambda: store.get(("t",), "k", refresh_ttl=False)) == 1
    assert counted(lambda: store.search(("t",), refresh_ttl=False)) == 3  # + ZMSCORE

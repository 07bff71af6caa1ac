"""HITL queues (acmi.hitl and /v1/hitl) on every backend: idempotent create, deadline
order, atomic resolve (queue move + hitl-resolved together), one request per operation,
bad input storing nothing, tenants, and items another tool wrote into a queue."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base.errors import AcmiValidationError, Conflict, NotFound
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.model import EntityId, tenant_id_fill
from acmi_core.coordination.hitl import ADOPT_WINDOW, DEFAULT_DEADLINE_MS
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import (
    START,
    FakeClock,
    RouteClient,
    assert_error,
    fresh_tenant,
    requests_per_step,
    run_together,
)


@pytest.fixture
def hitl(acmi: Acmi, clock: FakeClock) -> Acmi:
    """A tenant of its own per test: the redis backend's database is shared by the
    session, and queue order is only checkable on queues nobody else writes."""
    return fresh_tenant(acmi, clock)


def _cid() -> str:
    return f"c-{uuid.uuid4().hex[:12]}"


def _members(acmi: Acmi, key: str) -> list[dict[str, Any]]:
    reply = acmi.store.execute(("ZRANGE", key, 0, -1))
    assert isinstance(reply, list)
    return [json.loads(m) for m in reply]


def _coord(acmi: Acmi, cid: str | None = None) -> list[dict[str, Any]]:
    events = acmi.timeline.read(COORDINATION_THREAD).to_dicts()
    return [e for e in events if cid is None or e["correlationId"] == cid]


def _state(acmi: Acmi, *addressees: str | None) -> dict[str, Any]:
    """Everything HITL keeps for these queues, to compare before and after a refusal."""
    state: dict[str, Any] = {
        "items": acmi.store.execute(("HGETALL", acmi.keys.hitl_items())),
        "coord": acmi.store.execute(("ZRANGE", acmi.keys.coordination_timeline(), 0, -1)),
        "threads": acmi.store.execute(("SMEMBERS", acmi.keys.index("thread"))),
    }
    for to in addressees:
        eid = None if to is None else EntityId.parse(to)
        for s in ("open", "closed"):
            key = acmi.keys.hitl_queue(eid, s)
            state[key] = acmi.store.execute(("ZRANGE", key, 0, -1, "WITHSCORES"))
    return state


def _create(acmi: Acmi, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "topic": "prod deploy",
        "request": "approve the migration in PR 42",
        "asked_by": "agent:claude",
    }
    args.update(kw)
    return acmi.hitl.create(args.pop("topic"), args.pop("request"), **args)


# --- create, list, resolve --------------------------------------------------------------------


def test_create_list_resolve_round_trip(hitl: Acmi, clock: FakeClock) -> None:
    cid = _cid()
    due = START + 3_600_000
    made = _create(hitl, urgency="P0", deadline=due, addressee="agent:gemini", correlation_id=cid)
    assert made.created is True
    item = made.item
    assert item == {
        "ts": START,
        "source": "agent:claude",
        "kind": "hitl-required",
        "correlationId": cid,
        "summary": "[HITL] prod deploy (P0, due 2026-09-21T15:13:20+00:00)",
        "payload": {
            "topic": "prod deploy",
            "concrete_unblock_request": "approve the migration in PR 42",
            "urgency": "P0",
            "deadline": due,
            "addressee": "agent:gemini",
        },
        "speaker_type": "agent",
        "tenant_id": tenant_id_fill(hitl.tenant),
    }
    gemini = EntityId.parse("agent:gemini")
    # the bootstrap's contract: ZRANGE 0..N of the addressee's open queue, score = deadline
    reply = hitl.store.execute(("ZRANGE", hitl.keys.hitl_queue(gemini, "open"), 0, 9, "WITHSCORES"))
    assert isinstance(reply, list) and json.loads(reply[0]) == item and float(reply[1]) == due
    assert hitl.hitl.list("agent:gemini").items == [item]
    assert hitl.hitl.list().items == []  # not in the shared queue

    clock.now += 5_000
    done = hitl.hitl.resolve(cid, "approved, go", by="user:mikey")
    assert done.to_dict() == {
        "correlationId": cid,
        "addressee": "agent:gemini",
        "by": "user:mikey",
        "resolved_at": clock.now,
        "deadline": due,
        "resolved": True,
    }
    assert hitl.hitl.list("agent:gemini").items == []
    closed = hitl.hitl.list("agent:gemini", "closed").items
    resolution = {"by": "user:mikey", "ts": clock.now, "text": "approved, go"}
    assert closed == [{**item, "payload": {**item["payload"], "resolution": resolution}}]
    reply = hitl.store.execute(
        (
            "ZSCORE",
            hitl.keys.hitl_queue(gemini, "closed"),
            json.dumps(closed[0], separators=(",", ":"), ensure_ascii=False),
        )
    )
    assert reply is not None and float(reply) == clock.now  # closed score = resolution ms
    (event,) = _coord(hitl, cid)
    assert event["kind"] == "hitl-resolved" and event["source"] == "user:mikey"
    assert event["ts"] == clock.now
    assert event["payload"] == {
        "resolution": "approved, go",
        "by": "user:mikey",
        "addressee": "agent:gemini",
    }
    assert hitl.list("thread") == [COORDINATION_THREAD]


def test_defaults_shared_queue_and_generated_id(hitl: Acmi, clock: FakeClock) -> None:
    made = _create(hitl)
    item = made.item
    assert item["correlationId"].startswith("hitl-") and len(item["correlationId"]) == 37
    assert item["payload"]["urgency"] == "P1"
    assert item["payload"]["deadline"] == START + DEFAULT_DEADLINE_MS
    assert item["payload"]["addressee"] is None
    assert hitl.keys.hitl_queue(None, "open").endswith(":thread:hitl:open")
    assert _members(hitl, hitl.keys.hitl_queue(None, "open")) == [item]
    done = hitl.hitl.resolve(item["correlationId"], "done", by="user:mikey")
    assert done.addressee is None
    assert _coord(hitl)[0]["payload"]["addressee"] is None


def test_create_is_idempotent_by_correlation_id(hitl: Acmi, clock: FakeClock) -> None:
    cid = _cid()
    first = _create(hitl, correlation_id=cid, addressee="user:mikey")
    before = _state(hitl, "user:mikey", None)
    clock.now += 1_000
    again = _create(
        hitl,
        topic="something else",
        urgency="P2",
        correlation_id=cid,
        addressee="user:mikey",
    )
    assert again.created is False and again.item == first.item
    assert _state(hitl, "user:mikey", None) == before  # nothing written
    hitl.hitl.resolve(cid, "ok", by="user:mikey")
    closed = _create(hitl, correlation_id=cid, addressee="user:mikey")
    assert closed.created is False and closed.item["payload"]["resolution"]["text"] == "ok"
    assert hitl.hitl.list("user:mikey").items == []  # a re-create never reopens it


def test_twenty_concurrent_creates_of_one_id_store_one_item(hitl: Acmi) -> None:
    cid = _cid()
    results: list[Any] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        made = _create(hitl, topic=f"racer {i}", correlation_id=cid, addressee="agent:a")
        with lock:
            results.append(made)

    run_together(20, work)
    assert sum(r.created for r in results) == 1
    (winner,) = [r for r in results if r.created]
    assert all(r.item == winner.item for r in results)
    assert _members(hitl, hitl.keys.hitl_queue(EntityId.parse("agent:a"), "open")) == [winner.item]
    assert hitl.store.execute(("HLEN", hitl.keys.hitl_items())) == 1


def test_ordered_by_deadline_and_paged(hitl: Acmi, clock: FakeClock) -> None:
    deadlines = [START + d for d in (50, 10, 40, 10, 30, 20, 10, 60)]
    cids = []
    for i, due in enumerate(deadlines):
        cid = f"c-{i:02d}-{uuid.uuid4().hex[:6]}"
        cids.append(cid)
        _create(hitl, deadline=due, addressee="user:mikey", correlation_id=cid)
    everything = hitl.hitl.list("user:mikey", limit=100).items
    assert [i["payload"]["deadline"] for i in everything] == sorted(deadlines)
    # the bootstrap reads the raw queue the same way: most urgent first
    assert _members(hitl, hitl.keys.hitl_queue(EntityId.parse("user:mikey"), "open")) == everything
    for size in (1, 2, 3):
        seen: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = hitl.hitl.list("user:mikey", limit=size, cursor=cursor)
            seen += page.items
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == everything, size  # ties (three at +10) neither repeated nor lost
    # closed: newest resolution first
    for cid in (cids[0], cids[3], cids[5]):
        clock.now += 1_000
        hitl.hitl.resolve(cid, "ok", by="user:mikey")
    closed = hitl.hitl.list("user:mikey", "closed").items
    assert [c["correlationId"] for c in closed] == [cids[5], cids[3], cids[0]]
    page = hitl.hitl.list("user:mikey", "closed", limit=2)
    rest = hitl.hitl.list("user:mikey", "closed", limit=2, cursor=page.next_cursor)
    assert page.items + rest.items == closed and rest.next_cursor is None


def test_a_cursor_of_another_queue_is_refused(hitl: Acmi) -> None:
    for due in (1, 2, 3):
        _create(hitl, deadline=START + due, addressee="user:mikey")
    cursor = hitl.hitl.list("user:mikey", limit=1).next_cursor
    assert cursor is not None
    for call in (
        lambda: hitl.hitl.list("user:other", limit=1, cursor=cursor),
        lambda: hitl.hitl.list("user:mikey", "closed", limit=1, cursor=cursor),
        lambda: hitl.hitl.list("user:mikey", limit=1, cursor="garbage"),
    ):
        with pytest.raises(AcmiValidationError) as refused:
            call()
        assert refused.value.field == "cursor"


# --- resolve: atomic, once ----------------------------------------------------------------------


def test_resolving_twice_is_a_conflict_naming_who_and_when(hitl: Acmi, clock: FakeClock) -> None:
    cid = _cid()
    _create(hitl, correlation_id=cid, addressee="user:mikey")
    clock.now += 7_000
    hitl.hitl.resolve(cid, "done", by="user:mikey")
    resolved_at = clock.now
    before = _state(hitl, "user:mikey", None)
    clock.now += 1_000
    with pytest.raises(Conflict) as twice:
        hitl.hitl.resolve(cid, "done again", by="user:other")
    assert (twice.value.field, twice.value.rule) == ("correlationId", "open")
    assert "user:mikey" in twice.value.message and str(resolved_at) in twice.value.message
    assert _state(hitl, "user:mikey", None) == before
    assert len(_coord(hitl, cid)) == 1


def test_unknown_correlation_id_is_not_found_and_writes_nothing(hitl: Acmi) -> None:
    _create(hitl, addressee="user:mikey")
    before = _state(hitl, "user:mikey", None)
    with pytest.raises(NotFound) as missing:
        hitl.hitl.resolve("no-such-item", "x", by="user:mikey")
    assert missing.value.field == "correlationId" and "no-such-item" in missing.value.message
    assert _state(hitl, "user:mikey", None) == before


def test_twenty_concurrent_resolvers_one_wins(hitl: Acmi) -> None:
    cid = _cid()
    _create(hitl, correlation_id=cid)
    won: list[str] = []
    lost: list[str] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        who = f"user:r{i}"
        try:
            hitl.hitl.resolve(cid, f"answer {i}", by=who)
            outcome = won
        except Conflict:
            outcome = lost
        with lock:
            outcome.append(who)

    run_together(20, work)
    assert len(won) == 1 and len(lost) == 19
    (event,) = _coord(hitl, cid)
    assert event["source"] == won[0]
    (closed,) = hitl.hitl.list(state="closed").items
    assert closed["payload"]["resolution"]["by"] == won[0]
    assert hitl.hitl.list().items == []


BAD: list[tuple[str, Callable[[Acmi], object], str]] = [
    ("urgency", lambda a: _create(a, urgency="P7"), "urgency"),
    ("topic-empty", lambda a: _create(a, topic=""), "topic"),
    ("topic-blank", lambda a: _create(a, topic="   "), "topic"),
    ("topic-long", lambda a: _create(a, topic="t" * 201), "topic"),
    ("request-long", lambda a: _create(a, request="r" * 4001), "request"),
    ("request-type", lambda a: _create(a, request=5), "request"),
    ("deadline-type", lambda a: _create(a, deadline="tomorrow"), "deadline"),
    ("deadline-negative", lambda a: _create(a, deadline=-1), "deadline"),
    ("deadline-bool", lambda a: _create(a, deadline=True), "deadline"),
    ("asker", lambda a: _create(a, asked_by="claude the agent"), "asked_by"),
    ("addressee", lambda a: _create(a, addressee="Mikey"), "addressee"),
    ("cid", lambda a: _create(a, correlation_id="has space"), "correlationId"),
    ("cid-long", lambda a: _create(a, correlation_id="c" * 129), "correlationId"),
    ("resolve-cid", lambda a: a.hitl.resolve("a b", "x", by="user:m"), "correlationId"),
    ("resolve-text", lambda a: a.hitl.resolve("c-1", "", by="user:m"), "resolution"),
    ("resolve-by", lambda a: a.hitl.resolve("c-1", "x", by="nobody"), "by"),
    ("list-state", lambda a: a.hitl.list(state="pending"), "state"),
    ("list-limit", lambda a: a.hitl.list(limit=0), "limit"),
    ("list-addressee", lambda a: a.hitl.list("x y"), "addressee"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_refused_with_nothing_stored(
    hitl: Acmi, case: tuple[str, Callable[[Acmi], object], str]
) -> None:
    _, call, field = case
    _create(hitl, correlation_id="c-1", addressee="user:m")
    before = _state(hitl, None, "user:m")
    with pytest.raises(AcmiValidationError) as refused:
        call(hitl)
    assert refused.value.field == field
    assert _state(hitl, None, "user:m") == before


def test_tenants_do_not_see_each_other(hitl: Acmi) -> None:
    other = hitl.for_tenant(f"o-{uuid.uuid4().hex[:12]}")
    cid = _cid()
    _create(hitl, correlation_id=cid, addressee="user:mikey")
    assert other.hitl.list("user:mikey").items == []
    with pytest.raises(NotFound):
        other.hitl.resolve(cid, "x", by="user:mikey")
    made = _create(other, correlation_id=cid, addressee="user:mikey")  # same id, own item
    assert made.created is True
    other.hitl.resolve(cid, "theirs", by="user:mikey")
    assert len(hitl.hitl.list("user:mikey").items) == 1  # ours is still open
    assert _coord(hitl, cid) == []
    assert other.keys.hitl_queue(None, "open").startswith(f"acmi:tenant:{other.tenant}:")


# --- items another tool wrote (the reference: a raw ZADD, no record) ---------------------------


def _foreign(cid: str, addressee: str | None, deadline: int) -> str:
    return json.dumps(
        {
            "ts": START - 10,
            "source": "agent:ts-sdk",
            "kind": "hitl-required",
            "correlationId": cid,
            "summary": "[HITL] rotate the API key",
            "payload": {
                "topic": "rotate the API key",
                "concrete_unblock_request": "paste the new key in the vault",
                "urgency": "P0",
                "deadline": deadline,
                "addressee": addressee,
                "big": 12345678901234567890,
            },
            "x_reference_field": [1, {}],
        },
        separators=(",", ":"),
    )


@pytest.fixture
def default_tenant(acmi: Acmi, clock: FakeClock) -> Iterator[tuple[Acmi, list[str]]]:
    """The default tenant (keys ``acmi:...``, where the reference writes), left as found:
    the redis backend's database is shared by the session, and other tests read its
    coordination thread. The list: the correlationIds to remove afterwards."""
    ref = Acmi(acmi.store, acmi.settings, clock=clock)
    cids: list[str] = []
    yield ref, cids
    for cid in cids:
        ref.store.execute(("HDEL", ref.keys.hitl_items(), cid))
        for key in (
            ref.keys.coordination_timeline(),
            *(
                ref.keys.hitl_queue(to, state)
                for to in (None, EntityId.parse("user:mikey"))
                for state in ("open", "closed")
            ),
        ):
            members = ref.store.execute(("ZRANGE", key, 0, -1))
            assert isinstance(members, list)
            for member in members:
                if isinstance(member, bytes) and f'"correlationId":"{cid}"'.encode() in member:
                    ref.store.execute(("ZREM", key, member))


@pytest.mark.parametrize("addressee", [None, "user:mikey"])
def test_a_foreign_item_is_listed_and_adopted_by_resolve(
    default_tenant: tuple[Acmi, list[str]], clock: FakeClock, addressee: str | None
) -> None:
    ref, cleanup = default_tenant
    acmi = ref
    eid = None if addressee is None else EntityId.parse(addressee)
    queue = ref.keys.hitl_queue(eid, "open")
    assert queue in ("acmi:thread:hitl:open", "acmi:hitl:user:mikey:open")
    cid = _cid()
    cleanup.append(cid)
    member = _foreign(cid, addressee, 5)  # a very early deadline: the most urgent item
    acmi.store.execute(("ZADD", queue, 5, member))
    listed = ref.hitl.list(addressee).items
    assert listed[0]["correlationId"] == cid
    assert listed[0]["payload"]["big"] == 12345678901234567890
    done = ref.hitl.resolve(cid, "rotated", by="user:mikey", addressee=addressee)
    assert done.addressee == addressee and done.deadline == 5
    assert acmi.store.execute(("ZSCORE", queue, member)) is None
    closed = [
        c for c in ref.hitl.list(addressee, "closed", limit=1000).items if c["correlationId"] == cid
    ]
    assert len(closed) == 1
    assert closed[0]["x_reference_field"] == [1, {}]
    assert closed[0]["payload"]["big"] == 12345678901234567890  # exact, not a double
    assert closed[0]["payload"]["resolution"] == {
        "by": "user:mikey",
        "ts": clock.now,
        "text": "rotated",
    }
    assert [e["kind"] for e in _coord(ref, cid)] == ["hitl-resolved"]
    with pytest.raises(Conflict):
        ref.hitl.resolve(cid, "again", by="user:mikey", addressee=addressee)


def test_a_foreign_item_outside_the_window_is_a_404_saying_why(hitl: Acmi) -> None:
    queue = hitl.keys.hitl_queue(None, "open")
    for i in range(ADOPT_WINDOW):
        hitl.store.execute(("ZADD", queue, i, _foreign(f"f-{i}", None, i)))
    hitl.store.execute(("ZADD", queue, 10_000, _foreign("late", None, 10_000)))
    before = _state(hitl, None)
    with pytest.raises(NotFound) as missing:
        hitl.hitl.resolve("late", "x", by="user:mikey")
    assert str(ADOPT_WINDOW) in missing.value.message and queue in missing.value.message
    assert _state(hitl, None) == before
    hitl.hitl.resolve(f"f-{ADOPT_WINDOW - 1}", "x", by="user:mikey")  # inside: adopted


def test_a_corrupt_member_is_skipped_and_reported(hitl: Acmi) -> None:
    queue = hitl.keys.hitl_queue(None, "open")
    hitl.store.execute(("ZADD", queue, 1, "not json"))
    item = _create(hitl, deadline=START).item
    page = hitl.hitl.list()
    assert page.items == [item] and len(page.skipped) == 1


# --- round trips (the Upstash double counts HTTP requests) -------------------------------------


def test_one_request_per_hitl_operation(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    acmi = create_acmi(upstash_store, Settings())
    acmi.hitl.create("warm", "load the script", asked_by="agent:a")  # EVALSHA cached
    cid = _cid()
    foreign = _cid()
    acmi.store.execute(("ZADD", acmi.keys.hitl_queue(None, "open"), 1, _foreign(foreign, None, 1)))

    def conflict() -> None:
        with pytest.raises(Conflict):
            acmi.hitl.resolve(cid, "again", by="user:m")

    def missing() -> None:
        with pytest.raises(NotFound):
            acmi.hitl.resolve("nope", "x", by="user:m")

    steps: dict[str, Callable[[], object]] = {
        "create": lambda: acmi.hitl.create("t", "r", asked_by="agent:a", correlation_id=cid),
        "create (existing)": lambda: acmi.hitl.create(
            "t", "r", asked_by="agent:a", correlation_id=cid
        ),
        "list": lambda: acmi.hitl.list(limit=10),
        "resolve": lambda: acmi.hitl.resolve(cid, "ok", by="user:m"),
        "resolve (409)": conflict,
        "resolve (404)": missing,
        "resolve (a foreign item)": lambda: acmi.hitl.resolve(foreign, "ok", by="user:m"),
    }
    assert requests_per_step(upstash_double, steps) == {
        **dict.fromkeys(steps, 1),
        "resolve (a foreign item)": 2,
    }


# --- HTTP ---------------------------------------------------------------------------------------


@pytest.fixture
def http(hitl: Acmi) -> tuple[TestClient, dict[str, str], dict[str, str]]:
    routes = RouteClient(hitl, "hitl")
    return routes.client, routes.auth["write"], routes.auth["read"]


def test_http_create_list_resolve(
    http: tuple[TestClient, dict[str, str], dict[str, str]], clock: FakeClock
) -> None:
    client, auth, read = http
    body = {
        "topic": "prod deploy",
        "request": "approve PR 42",
        "urgency": "P0",
        "deadline": START + 60_000,
        "asked_by": "agent:claude",
        "addressee": "user:mikey",
        "correlationId": "deploy-42",
    }
    made = client.post("/v1/hitl", json=body, headers=auth)
    assert made.status_code == 201, made.text
    assert made.json()["created"] is True
    item = made.json()["item"]
    assert item["payload"]["concrete_unblock_request"] == "approve PR 42"
    again = client.post("/v1/hitl", json={**body, "topic": "other"}, headers=auth)
    assert again.status_code == 200 and again.json() == {"item": item, "created": False}
    alias = {k: v for k, v in body.items() if k != "request"}
    alias.update(concrete_unblock_request="approve PR 43", correlationId="deploy-43")
    assert client.post("/v1/hitl", json=alias, headers=auth).status_code == 201
    listed = client.get("/v1/hitl", params={"addressee": "user:mikey"}, headers=read)
    assert listed.status_code == 200
    page = listed.json()
    assert [i["correlationId"] for i in page["items"]] == ["deploy-42", "deploy-43"]
    assert page["next_cursor"] is None and page["state"] == "open"
    first = client.get("/v1/hitl?addressee=user:mikey&limit=1", headers=read).json()
    second = client.get(
        "/v1/hitl",
        params={"addressee": "user:mikey", "limit": 1, "cursor": first["next_cursor"]},
        headers=read,
    ).json()
    assert first["items"] + second["items"] == page["items"]
    assert client.get("/v1/hitl", headers=read).json()["items"] == []  # the shared queue
    assert client.post("/v1/hitl", json=body, headers=read).status_code == 403
    clock.now += 1_000
    done = client.post(
        "/v1/hitl/deploy-42/resolve", json={"resolution": "go", "by": "user:mikey"}, headers=auth
    )
    assert done.status_code == 200, done.text
    assert done.json()["resolved_at"] == clock.now and done.json()["addressee"] == "user:mikey"
    twice = client.post(
        "/v1/hitl/deploy-42/resolve", json={"resolution": "go", "by": "user:x"}, headers=auth
    )
    error = assert_error(twice, 409, "correlationId")
    assert "user:mikey" in error["message"]
    missing = client.post(
        "/v1/hitl/nope/resolve", json={"resolution": "go", "by": "user:x"}, headers=auth
    )
    assert_error(missing, 404, "correlationId")
    closed = client.get(
        "/v1/hitl", params={"addressee": "user:mikey", "state": "closed"}, headers=read
    ).json()
    assert closed["items"][0]["payload"]["resolution"]["text"] == "go"


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        (
            "post",
            "/v1/hitl",
            {"topic": "t", "request": "r", "asked_by": "agent:a", "urgency": "P7"},
            "urgency",
        ),
        ("post", "/v1/hitl", {"topic": "t", "asked_by": "agent:a"}, "request"),
        ("post", "/v1/hitl", {"request": "r", "asked_by": "agent:a"}, "topic"),
        ("post", "/v1/hitl", {"topic": "t", "request": "r"}, "asked_by"),
        ("post", "/v1/hitl", {"topic": "t", "request": "r", "asked_by": "agent:a", "x": 1}, "x"),
        (
            "post",
            "/v1/hitl",
            {"topic": "t", "request": "r", "concrete_unblock_request": "r", "asked_by": "agent:a"},
            "request",
        ),
        ("post", "/v1/hitl", ["t"], "body"),
        ("post", "/v1/hitl/c-1/resolve", {"by": "user:m"}, "resolution"),
        ("post", "/v1/hitl/c-1/resolve", {"resolution": "x"}, "by"),
        ("post", "/v1/hitl/bad%20id/resolve", {"resolution": "x", "by": "user:m"}, "correlationId"),
        ("get", "/v1/hitl?state=pending", None, "state"),
        ("get", "/v1/hitl?limit=0", None, "limit"),
        ("get", "/v1/hitl?cursor=zzz", None, "cursor"),
    ],
)
def test_http_bad_input_is_a_400_naming_the_field(
    http: tuple[TestClient, dict[str, str], dict[str, str]],
    hitl: Acmi,
    method: str,
    path: str,
    body: Any,
    field: str,
) -> None:
    client, auth, _ = http
    _create(hitl, correlation_id="c-1", addressee="user:m")
    before = _state(hitl, None, "user:m")
    if method == "post":
        response = client.post(path, json=body, headers=auth)
    else:
        response = client.get(path, headers=auth)
    assert_error(response, 400, field)
    assert _state(hitl, None, "user:m") == before


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/hitl", {"topic": "t", "request": "r", "asked_by": "agent:a", "x": 1}),
        ("/v1/hitl/c-1/resolve", {"resolution": "go", "by": "user:m", "x": 1}),
    ],
)
def test_http_an_unknown_field_is_refused_with_rule_unknown(
    http: tuple[TestClient, dict[str, str], dict[str, str]], hitl: Acmi, path: str, body: Any
) -> None:
    client, auth, _ = http
    _create(hitl, correlation_id="c-1", addressee="user:m")
    before = _state(hitl, None, "user:m")
    error = assert_error(client.post(path, json=body, headers=auth), 400, "x")
    assert error["rule"] == "unknown" and error["message"].startswith("x: ")
    assert _state(hitl, None, "user:m") == before

"""Work items (acmi.work and /v1/work) on every backend: each operation, the owner index
staying exact through create, status changes and reassignment, one round trip per
operation, concurrent events losing nothing, bad input storing nothing, and data the
reference CLI wrote reading back."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base.errors import AcmiValidationError, Conflict, NotFound
from acmi_core.base.model import EntityId, tenant_id_fill
from acmi_core.coordination.work import CLOSED_STATUSES, MAX_GET_SESSIONS, is_open
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import (
    START,
    Api,
    FakeClock,
    RouteClient,
    assert_error,
    fresh_tenant,
    requests_per_step,
    run_together,
)


@pytest.fixture
def work(acmi: Acmi, clock: FakeClock) -> Acmi:
    """A tenant of its own (the redis backend's database is shared), on a clock tests move."""
    return fresh_tenant(acmi, clock)


def _event(n: int = 1, **fields: Any) -> dict[str, Any]:
    event = {
        "source": "agent:bentley",
        "kind": "work-progress",
        "correlationId": f"c-{n}",
        "summary": f"step {n}",
    }
    event.update(fields)
    return event


def _open_index(acmi: Acmi, owner: str) -> dict[str, float]:
    reply = acmi.store.execute(
        ("ZRANGE", acmi.keys.work_open(EntityId.parse(owner)), 0, -1, "WITHSCORES")
    )
    assert isinstance(reply, list)
    return {m.decode(): float(s) for m, s in zip(reply[::2], reply[1::2], strict=True)}


def _owners(acmi: Acmi) -> dict[str, str]:
    reply = acmi.store.execute(("HGETALL", acmi.keys.work_owners()))
    assert isinstance(reply, list)
    return {f.decode(): v.decode() for f, v in zip(reply[::2], reply[1::2], strict=True)}


def _assert_index_exact(acmi: Acmi, owners: list[str]) -> None:
    """Every owner's open index holds exactly the open items the owners HASH gives it."""
    hashed = _owners(acmi)
    for owner in owners:
        expected = {
            wid
            for wid, who in hashed.items()
            if who == owner and is_open(acmi.work.get(wid, events=0).status)
        }
        assert set(_open_index(acmi, owner)) == expected, owner


def _tenant_keys(acmi: Acmi) -> list[bytes]:
    """Every key of ``acmi``'s (non-default) tenant: entity keys and bookkeeping."""
    found: list[bytes] = []
    for pattern in (f"{acmi.keys.prefix}*", f"acmi:_*:{acmi.tenant}:*"):
        reply = acmi.store.execute(("KEYS", pattern))
        assert isinstance(reply, list)
        found += [k for k in reply if isinstance(k, bytes)]
    return sorted(found)


# --- operations -------------------------------------------------------------------------------


def test_create_stores_the_reference_layout_and_indexes_the_owner(
    work: Acmi, clock: FakeClock
) -> None:
    item = work.work.create("acmi-launch", {"title": "ACMI public launch"}, owner="bentley")
    assert (item.id, item.entity, item.owner, item.status, item.open) == (
        "acmi-launch",
        "work:acmi-launch",
        "agent:bentley",
        "open",
        True,
    )
    prefix = work.keys.prefix
    profile = work.store.execute(("GET", f"{prefix}work:acmi-launch:profile"))
    assert isinstance(profile, bytes)
    # the owner kept as given (bare, as the reference writes it)
    assert json.loads(profile) == {
        "title": "ACMI public launch",
        "owner": "bentley",
        "tenant_id": tenant_id_fill(work.tenant),
    }
    signals = work.store.execute(("GET", f"{prefix}work:acmi-launch:signals"))
    assert signals == b'{"status":"open"}'
    assert work.store.execute(("SMEMBERS", f"{prefix}work:list")) == [b"acmi-launch"]
    assert _owners(work) == {"acmi-launch": "agent:bentley"}
    assert _open_index(work, "agent:bentley") == {"acmi-launch": float(clock.now)}
    # the entity client sees the same item
    assert work.profile.get("work:acmi-launch") == item.profile
    assert work.signals.all("work:acmi-launch") == {"status": "open"}
    assert work.list("work") == ["work:acmi-launch"]


def test_create_takes_the_owner_from_the_profile_or_refuses_two_owners(work: Acmi) -> None:
    item = work.work.create("from-profile", {"title": "t", "owner": "user:mikey"})
    assert item.owner == "user:mikey"
    assert set(_open_index(work, "user:mikey")) == {"from-profile"}
    with pytest.raises(AcmiValidationError) as two:
        work.work.create("two", {"owner": "bentley"}, owner="gemini-cli")
    assert (two.value.field, two.value.rule) == ("owner", "matches_profile")
    same = work.work.create("same", {"owner": "bentley"}, owner="agent:bentley")
    assert same.profile is not None and same.profile["owner"] == "bentley"
    unowned = work.work.create("unowned", {"title": "t"})
    assert unowned.owner is None and "unowned" not in _owners(work)
    closed = work.work.create("closed", {"title": "t"}, owner="bentley", status="done")
    assert closed.open is False
    assert set(_open_index(work, "agent:bentley")) == {"same"}


def test_create_on_an_existing_id_is_a_conflict_that_changes_nothing(work: Acmi) -> None:
    work.work.create("dup", {"title": "first"}, owner="bentley")
    work.work.signal("dup", {"status": "blocked"})
    before = _tenant_keys(work), work.work.get("dup")
    with pytest.raises(Conflict) as exists:
        work.work.create("dup", {"title": "second"}, owner="gemini-cli")
    assert (exists.value.field, exists.value.rule) == ("id", "unique")
    assert "dup" in exists.value.message
    assert (_tenant_keys(work), work.work.get("dup")) == before
    # an item that has signals only (written through acmi.signals) exists too
    work.signals.set("work:signals-only", "status", "open")
    with pytest.raises(Conflict):
        work.work.create("signals-only", {"title": "t"})


def test_get_is_the_whole_item(work: Acmi, clock: FakeClock) -> None:
    work.work.create("g", {"title": "t"}, owner="bentley")
    for n in range(5):
        clock.now += 1
        work.work.event("g", _event(n), session_id=f"s-{n % 2}")
    item = work.work.get("g", events=3)
    assert [e["correlationId"] for e in item.timeline] == ["c-2", "c-3", "c-4"]
    assert all(e["session_id"] == f"s-{int(e['correlationId'][2:]) % 2}" for e in item.timeline)
    assert (item.sessions, item.sessions_total) == (["s-0", "s-1"], 2)
    assert item.signals == {"status": "open"} and item.owner == "agent:bentley"
    assert item.problems == [] and item.legacy == [] and item.skipped == []
    assert work.work.get("g", events=0).timeline == []
    data = item.to_dict()
    assert data["id"] == "g" and data["entity"] == "work:g" and len(data["timeline"]) == 3


def test_unknown_items_are_not_found_and_nothing_is_stored(work: Acmi) -> None:
    calls: list[Callable[[], object]] = [
        lambda: work.work.get("nope"),
        lambda: work.work.event("nope", _event(), session_id="s"),
        lambda: work.work.signal("nope", {"status": "done"}),
        lambda: work.work.assign("nope", "bentley"),
    ]
    for call in calls:
        with pytest.raises(NotFound) as missing:
            call()
        assert (missing.value.field, missing.value.rule) == ("id", "exists")
        assert "nope" in missing.value.message
    assert _tenant_keys(work) == []
    work.work.delete("nope")  # a no-op
    assert work.work.sessions("nope") == []


def test_event_with_a_session_joins_the_sessions_in_the_same_step(work: Acmi) -> None:
    work.work.create("e", {"title": "t"})
    stored = work.work.event("e", _event(1), session_id="sess-1")
    assert stored["session_id"] == "sess-1" and stored["tenant_id"] == tenant_id_fill(work.tenant)
    work.work.event("e", _event(2, session_id="sess-2"))  # the reference field in the event
    work.work.event("e", _event(3))  # no session
    work.work.event("e", _event(4, session_id=None))  # the reference's own "no session"
    assert work.work.sessions("e") == ["sess-1", "sess-2"]
    events = work.timeline.read("work:e").to_dicts()
    assert [e.get("session_id", "absent") for e in events] == ["sess-1", "sess-2", "absent", None]
    with pytest.raises(AcmiValidationError) as differs:
        work.work.event("e", _event(5, session_id="a"), session_id="b")
    assert differs.value.field == "event.session_id"
    assert work.timeline.size("work:e") == 4


def test_signal_merges_and_returns_the_signals(work: Acmi) -> None:
    work.work.create("s", {"title": "t"})
    assert work.work.signal("s", {"eta": "2026-12-01", "blockers": []}) == {
        "status": "open",
        "eta": "2026-12-01",
        "blockers": [],
    }
    assert work.work.signal("s", {"status": "blocked"})["status"] == "blocked"
    assert work.signals.all("work:s") == {"status": "blocked", "eta": "2026-12-01", "blockers": []}


def test_the_open_index_stays_exact(work: Acmi, clock: FakeClock) -> None:
    owners = ["agent:bentley", "agent:gemini-cli", "user:mikey"]
    w = work.work
    w.create("a", {"title": "a"}, owner="bentley")
    w.create("b", {"title": "b"}, owner="bentley", status="done")
    w.create("c", {"title": "c"})
    w.create("d", {"title": "d"}, owner="gemini-cli", status="in-progress")
    _assert_index_exact(work, owners)
    assert set(_open_index(work, "agent:bentley")) == {"a"}

    clock.now += 10
    w.event("a", _event(), session_id="s")  # an open item's update moves its score
    assert _open_index(work, "agent:bentley") == {"a": float(clock.now)}
    clock.now += 10
    w.signal("a", {"note": "x"})
    assert _open_index(work, "agent:bentley") == {"a": float(clock.now)}
    w.event("b", _event())  # a closed item stays out
    w.signal("b", {"note": "x"})
    _assert_index_exact(work, owners)

    for status in [*sorted(CLOSED_STATUSES), "Done", "CLOSED"]:
        w.signal("a", {"status": "open"})
        assert "a" in _open_index(work, "agent:bentley")
        w.signal("a", {"status": status})
        assert "a" not in _open_index(work, "agent:bentley"), status
    w.signal("b", {"status": "reopened"})  # any other status is open
    assert set(_open_index(work, "agent:bentley")) == {"b"}
    _assert_index_exact(work, owners)

    # reassign: open items move, closed ones only change owner, no owner -> added
    clock.now += 10
    assert w.assign("b", "gemini-cli") == "agent:gemini-cli"
    assert _open_index(work, "agent:bentley") == {}
    assert _open_index(work, "agent:gemini-cli") == {"d": float(START), "b": float(clock.now)}
    w.assign("a", "user:mikey")  # closed: only the owner changes
    assert _owners(work)["a"] == "user:mikey" and _open_index(work, "user:mikey") == {}
    w.assign("c", "bentley")  # had no owner, open
    assert set(_open_index(work, "agent:bentley")) == {"c"}
    w.assign("c", "agent:bentley")  # the same owner again: stays
    assert set(_open_index(work, "agent:bentley")) == {"c"}
    profile = work.profile.get("work:c")
    assert profile is not None and profile["owner"] == "agent:bentley"  # as given
    w.signal("a", {"status": "open"})  # reopened under its new owner
    assert set(_open_index(work, "user:mikey")) == {"a"}
    _assert_index_exact(work, owners)

    w.delete("b")
    assert "b" not in _owners(work) and "b" not in _open_index(work, "agent:gemini-cli")
    assert set(w.ids(None, None)) == {"a", "c", "d"}
    _assert_index_exact(work, owners)


def test_assign_of_an_unowned_closed_item_adds_no_index_entry(work: Acmi) -> None:
    work.work.create("x", {"title": "t"}, status="Resolved")
    work.work.assign("x", "bentley")
    assert _owners(work) == {"x": "agent:bentley"}
    assert _open_index(work, "agent:bentley") == {}


def test_assign_repairs_an_index_left_stale_by_a_status_written_around_it(work: Acmi) -> None:
    work.work.create("stale", {"title": "t"}, owner="bentley")
    work.signals.set("work:stale", "status", "done")  # the entity client keeps no index
    assert set(_open_index(work, "agent:bentley")) == {"stale"}
    work.work.assign("stale", "bentley")
    assert _open_index(work, "agent:bentley") == {}
    work.signals.set("work:stale", "status", "open")
    work.work.assign("stale", "gemini-cli")
    assert set(_open_index(work, "agent:gemini-cli")) == {"stale"}
    assert _open_index(work, "agent:bentley") == {}


def test_list_by_owner_status_and_pages(work: Acmi, clock: FakeClock) -> None:
    w = work.work
    for n in range(5):
        clock.now += 1
        w.create(f"open-{n}", {"title": "t"}, owner="bentley")
    w.create("done-1", {"title": "t"}, owner="bentley", status="done")
    w.create("other", {"title": "t"}, owner="gemini-cli")
    w.create("nobody", {"title": "t"})
    first = w.list("bentley", limit=2)
    assert [i.id for i in first.items] == ["open-4", "open-3"]  # newest update first
    assert first.items[0].updated_at == START + 5 and first.items[0].owner == "agent:bentley"
    assert first.next_cursor is not None
    second = w.list("bentley", cursor=first.next_cursor, limit=2)
    third = w.list("bentley", cursor=second.next_cursor, limit=2)
    assert [i.id for i in second.items + third.items] == ["open-2", "open-1", "open-0"]
    assert third.next_cursor is None
    assert w.ids("bentley") == [f"open-{n}" for n in range(4, -1, -1)]
    assert set(w.ids("agent:bentley", None)) == {f"open-{n}" for n in range(5)} | {"done-1"}
    everything = {f"open-{n}" for n in range(5)} | {"done-1", "other", "nobody"}
    assert set(w.ids(None, None)) == everything
    assert set(w.ids()) == everything - {"done-1"}
    opened = w.list(None, "open", limit=1000)
    assert all(i.status == "open" for i in opened.items)
    with pytest.raises(AcmiValidationError) as bad:
        w.list(None, "closed")
    assert bad.value.field == "status"
    with pytest.raises(AcmiValidationError) as cursor:
        w.list("bentley", cursor="garbage!")
    assert cursor.value.field == "cursor"


def test_sessions_page_through_many(work: Acmi) -> None:
    work.work.create("many", {"title": "t"})
    sessions = [f"s-{n:03d}" for n in range(MAX_GET_SESSIONS + 30)]
    with work.batch() as batch:  # raw setup: one event per session would be slow on upstash
        for n, session in enumerate(sessions):
            batch.timeline.append("work:many", _event(n, session_id=session))
    work.store.execute(("SADD", work.keys.slot(EntityId.parse("work:many"), "sessions"), *sessions))
    item = work.work.get("many", events=0)
    assert item.sessions_total == len(sessions)
    assert len(item.sessions) <= MAX_GET_SESSIONS and set(item.sessions) <= set(sessions)
    assert work.work.sessions("many") == sessions
    page = work.work.sessions_page("many", limit=10)
    assert page.sessions and len(page.sessions) <= len(sessions)


# --- concurrency and atomicity ----------------------------------------------------------------


def test_twenty_concurrent_events_with_sessions_lose_nothing(work: Acmi) -> None:
    work.work.create("busy", {"title": "t"}, owner="bentley")

    def post(i: int) -> None:
        work.work.event("busy", _event(i), session_id=f"session-{i}")

    run_together(20, post)
    assert work.timeline.size("work:busy") == 20
    assert work.work.sessions("busy") == sorted(f"session-{i}" for i in range(20))
    events = work.work.get("busy", events=20).timeline
    assert sorted(e["session_id"] for e in events) == sorted(f"session-{i}" for i in range(20))
    assert set(_open_index(work, "agent:bentley")) == {"busy"}


def test_concurrent_status_flips_and_reassigns_keep_the_index_exact(work: Acmi) -> None:
    owners = ["agent:a", "agent:b", "agent:c"]
    work.work.create("flip", {"title": "t"}, owner="agent:a")

    def act(i: int) -> None:
        if i % 3 == 0:
            work.work.assign("flip", owners[i % len(owners)])
        else:
            work.work.signal("flip", {"status": "done" if i % 2 else "open", f"k{i}": i})

    run_together(20, act)
    _assert_index_exact(work, owners)
    signals = work.signals.all("work:flip")
    assert {f"k{i}" for i in range(20) if i % 3} <= set(signals)  # no lost signal
    in_indexes = [o for o in owners if "flip" in _open_index(work, o)]
    assert len(in_indexes) <= 1


BAD: list[tuple[str, Callable[[Acmi], object], str]] = [
    ("id", lambda a: a.work.create("bad id!", {"title": "t"}), "id"),
    ("id-category", lambda a: a.work.create("user:mikey", {"title": "t"}), "id"),
    ("id-long", lambda a: a.work.create("x" * 252, {"title": "t"}), "id"),
    ("profile-array", lambda a: a.work.create("p", ["t"]), "profile"),  # type: ignore[arg-type]
    ("profile-null", lambda a: a.work.create("p", None), "profile"),  # type: ignore[arg-type]
    ("owner", lambda a: a.work.create("p", {"title": "t"}, owner="Bent ley"), "owner"),
    ("profile-owner", lambda a: a.work.create("p", {"owner": 5}), "profile.owner"),
    ("status-long", lambda a: a.work.create("p", {}, status="x" * 65), "status"),
    ("status-empty", lambda a: a.work.create("p", {}, status=""), "status"),
    ("session-long", lambda a: a.work.event("w", _event(), session_id="s" * 257), "session_id"),
    ("session-empty", lambda a: a.work.event("w", _event(), session_id=""), "session_id"),
    ("session-type", lambda a: a.work.event("w", _event(session_id=7)), "event.session_id"),
    ("event-kind", lambda a: a.work.event("w", {"source": "a", "summary": "s"}), "event.kind"),
    ("event-type", lambda a: a.work.event("w", "hello"), "event"),  # type: ignore[arg-type]
    ("signals-empty", lambda a: a.work.signal("w", {}), "signals"),
    ("signal-status", lambda a: a.work.signal("w", {"status": 3}), "signals.status"),
    ("signal-key", lambda a: a.work.signal("w", {"k" * 129: 1}), "signals." + "k" * 129),
    ("assign-owner", lambda a: a.work.assign("w", "not an id"), "owner"),
    ("events-range", lambda a: a.work.get("w", events=-1), "events"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_refused_and_stores_nothing(
    work: Acmi, case: tuple[str, Callable[[Acmi], object], str]
) -> None:
    _, call, field = case
    work.work.create("w", {"title": "t"}, owner="bentley")
    before = {k: work.store.execute(("DUMP", k)) for k in _tenant_keys(work)}
    with pytest.raises(AcmiValidationError) as refused:
        call(work)
    assert refused.value.field == field
    assert {k: work.store.execute(("DUMP", k)) for k in _tenant_keys(work)} == before


def test_a_signals_key_of_the_wrong_type_fails_whole(work: Acmi) -> None:
    work.work.create("wt", {"title": "t"}, owner="bentley")
    key = work.keys.signals(EntityId.parse("work:wt"))
    work.store.execute(("DEL", key))
    work.store.execute(("SADD", key, "x"))
    before = _open_index(work, "agent:bentley")
    from acmi_core.base.errors import CorruptData

    with pytest.raises(CorruptData):
        work.work.signal("wt", {"status": "done"})
    assert _open_index(work, "agent:bentley") == before  # the index did not move alone
    assert work.work.get("wt").problems  # and the read reports it, never raises


# --- interop: what the reference CLI writes ---------------------------------------------------


def test_reference_written_items_read_back(acmi: Acmi, clock: FakeClock) -> None:
    """Raw SET/ZADD/SADD of the reference's shapes on the default tenant: a bare owner,
    legacy events without kind/correlationId and with ``session_id: null``."""
    wid = f"ref-{uuid.uuid4().hex[:10]}"
    prefix = f"acmi:work:{wid}"
    store = acmi.store
    store.execute(("SET", f"{prefix}:profile", '{"title":"ACMI public launch","owner":"bentley"}'))
    store.execute(("SET", f"{prefix}:signals", '{"status":"open","priority":"high"}'))
    legacy = [
        {"ts": 1_780_000_000_000, "source": "bentley", "summary": "kickoff", "session_id": None},
        {"ts": 1_780_000_000_001, "source": "bentley", "summary": "drafted", "session_id": "s-1"},
    ]
    for event in legacy:
        store.execute(("ZADD", f"{prefix}:timeline", event["ts"], json.dumps(event)))
    store.execute(("SADD", f"{prefix}:sessions", "s-1"))
    store.execute(("SADD", "acmi:work:list", wid))
    work = Acmi(store, acmi.settings, clock=clock)
    try:
        item = work.work.get(wid)
        assert item.profile == {"title": "ACMI public launch", "owner": "bentley"}
        assert item.owner == "agent:bentley" and item.status == "open" and item.open
        assert item.timeline == legacy
        assert [entry["index"] for entry in item.legacy] == [0, 1]
        assert "kind: required" in item.legacy[0]["reasons"]
        assert item.sessions == ["s-1"] and work.work.sessions(wid) == ["s-1"]
        assert wid in work.work.ids(None, None) and wid in work.work.ids()
        # not in the owner index until something of ours names the owner (documented)
        assert wid not in work.work.ids("bentley")
        work.work.event(wid, _event(), session_id="s-2")
        work.work.assign(wid, "bentley")
        assert wid in work.work.ids("bentley")
        profile = work.profile.get(f"work:{wid}")
        assert profile is not None and profile["owner"] == "bentley"
        assert work.work.sessions(wid) == ["s-1", "s-2"]
        work.work.signal(wid, {"status": "done"})
        assert wid not in work.work.ids("bentley")
        assert work.signals.all(f"work:{wid}") == {"status": "done", "priority": "high"}
    finally:
        work.work.delete(wid)
    assert wid not in work.work.ids(None, None)


def test_other_tenants_keep_their_items_apart(work: Acmi) -> None:
    other = work.for_tenant(f"o{uuid.uuid4().hex[:12]}")
    work.work.create("same-id", {"title": "mine"}, owner="bentley")
    with pytest.raises(NotFound):
        other.work.get("same-id")
    other.work.create("same-id", {"title": "theirs"}, owner="bentley")
    assert other.keys.prefix == f"acmi:tenant:{other.tenant}:"
    assert other.keys.work_open(EntityId.parse("agent:bentley")).startswith(
        f"acmi:_work-open:{other.tenant}:"
    )
    mine, theirs = work.work.get("same-id"), other.work.get("same-id")
    assert mine.profile is not None and mine.profile["title"] == "mine"
    assert theirs.profile is not None and theirs.profile["title"] == "theirs"


# --- round trips (the Upstash double counts HTTP requests) -------------------------------------


def test_one_round_trip_per_operation(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    acmi = create_acmi(upstash_store, Settings())
    acmi.work.create("warm", {"title": "t"})  # loads the script (NOSCRIPT, then EVAL)

    def conflict() -> None:
        with pytest.raises(Conflict):
            acmi.work.create("rt", {})

    def missing() -> None:
        with pytest.raises(NotFound):
            acmi.work.get("nope")

    steps: dict[str, Callable[[], object]] = {
        "create": lambda: acmi.work.create("rt", {"title": "t"}, owner="bentley"),
        "event (with a session)": lambda: acmi.work.event("rt", _event(), session_id="s"),
        "signal (status)": lambda: acmi.work.signal("rt", {"status": "blocked"}),
        "signal (close)": lambda: acmi.work.signal("rt", {"status": "done"}),
        "assign": lambda: acmi.work.assign("rt", "gemini-cli"),
        "get": lambda: acmi.work.get("rt"),
        "sessions page": lambda: acmi.work.sessions_page("rt"),
        "list (owner, open)": lambda: acmi.work.list("gemini-cli"),
        "list (owner, any)": lambda: acmi.work.list("gemini-cli", None),
        "list (all)": lambda: acmi.work.list(None, None),
        "create (409)": conflict,
        "get (404)": missing,
        "delete": lambda: acmi.work.delete("rt"),
    }
    assert requests_per_step(upstash_double, steps) == dict.fromkeys(steps, 1)
    upstash_double.reset_counts()
    acmi.work.list(None, "open")
    assert upstash_double.requests == 2  # the page of ids, then their statuses


# --- HTTP -------------------------------------------------------------------------------------


def test_http_work_item_lifecycle(acmi: Acmi) -> None:
    routes = RouteClient(fresh_tenant(acmi, acmi.clock), "work")
    write, read, c = routes.auth["write"], routes.auth["read"], routes.client
    created = c.post(
        "/v1/work",
        json={"id": "acmi-launch", "profile": {"title": "ACMI public launch"}, "owner": "bentley"},
        headers=write,
    )
    assert created.status_code == 201, created.text
    assert created.json()["owner"] == "agent:bentley"
    assert_error(
        c.post("/v1/work", json={"id": "acmi-launch", "profile": {}}, headers=write), 409, "id"
    )
    posted = c.post("/v1/work/acmi-launch/events", json=_event(session_id="sess-1"), headers=write)
    assert posted.status_code == 201 and posted.json()["session_id"] == "sess-1"
    patched = c.patch("/v1/work/acmi-launch/signals", json={"eta": "soon"}, headers=write)
    assert patched.status_code == 200
    assert patched.json()["signals"] == {"status": "open", "eta": "soon"}
    listed = c.get("/v1/work", params={"owner": "bentley"}, headers=read)
    assert [i["id"] for i in listed.json()["items"]] == ["acmi-launch"]
    moved = c.put("/v1/work/acmi-launch/owner", json={"owner": "user:mikey"}, headers=write)
    assert moved.status_code == 200 and moved.json()["owner"] == "user:mikey"
    assert c.get("/v1/work", params={"owner": "bentley"}, headers=read).json()["items"] == []
    got = c.get("/v1/work/acmi-launch", params={"events": 5}, headers=read)
    assert got.status_code == 200
    body = got.json()
    assert body["owner"] == "user:mikey" and body["sessions"] == ["sess-1"]
    assert body["timeline"][0]["correlationId"] == "c-1"
    sessions = c.get("/v1/work/acmi-launch/sessions", headers=read).json()
    assert sessions["sessions"] == ["sess-1"] and sessions["next_cursor"] is None
    closed = c.patch("/v1/work/acmi-launch/signals", json={"status": "done"}, headers=write)
    assert closed.status_code == 200
    everything = c.get("/v1/work", params={"status": "any"}, headers=read).json()
    assert [i["id"] for i in everything["items"]] == ["acmi-launch"]
    assert c.get("/v1/work", headers=read).json()["items"] == []
    # scopes: a read key cannot write
    assert_error(c.patch("/v1/work/acmi-launch/signals", json={"a": 1}, headers=read), 403)
    assert_error(c.get("/v1/work/nope", headers=read), 404, "id")
    assert_error(c.get("/v1/work", params={"status": "closed"}, headers=read), 400)


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", "/v1/work", {"id": "bad id", "profile": {}}, "id"),
        ("post", "/v1/work", {"profile": {}}, "id"),
        ("post", "/v1/work", {"id": "x", "profile": []}, "profile"),
        ("post", "/v1/work", {"id": "x", "profile": {}, "owner": "no such owner"}, "owner"),
        ("post", "/v1/work", {"id": "x", "profile": {}, "colour": "red"}, "colour"),
        ("post", "/v1/work", ["x"], "body"),
        ("post", "/v1/work/w/events", {"source": "a", "summary": "s"}, "event.kind"),
        ("post", "/v1/work/w/events", _event(session_id=""), "session_id"),
        ("patch", "/v1/work/w/signals", {}, "signals"),
        ("patch", "/v1/work/w/signals", {"status": None}, "signals.status"),
        ("put", "/v1/work/w/owner", {}, "owner"),
        ("put", "/v1/work/w/owner", {"owner": "a b"}, "owner"),
    ],
)
def test_http_bad_input_is_a_400_naming_the_field_with_nothing_stored(
    acmi: Acmi, method: str, path: str, body: Any, field: str
) -> None:
    api = Api(acmi)
    api.acmi.work.delete("w")
    api.acmi.work.create("w", {"title": "t"}, owner="bentley")
    before = api.acmi.work.get("w")
    response = getattr(api.client, method)(path, json=body, headers=api.auth())
    field = "event.session_id" if field == "session_id" and "events" in path else field
    assert_error(response, 400, field)
    assert api.acmi.work.get("w") == before
    assert api.acmi.store.execute(("EXISTS", "acmi:work:x:profile")) == 0
    api.acmi.work.delete("w")

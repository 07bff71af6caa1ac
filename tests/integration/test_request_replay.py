"""A lost reply is not a failure: every script that is not idempotent answers a retry of
the same request with its first run's reply (issue 21, item 4).

The Upstash double's lost-reply fault runs the command and then closes the connection
without answering, so the transport's retry arrives after the commit. Each test warms
its script first (a retry of a lost NOSCRIPT would test nothing) and then counts the
requests: exactly the write and its retry. On the redis-server path (which never
retries: one attempt per call) the same record is checked by running one request twice.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from acmi_core import Acmi
from acmi_core.base.errors import Conflict, NotFound
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.model import EntityId
from acmi_core.base.settings import Settings
from acmi_core.jobs import sink as archive_sink
from acmi_core.jobs import wake as wake_job
from acmi_core.jobs.archive import archive_now
from acmi_core.jobs.runner import JobRun, run_job
from acmi_core.store import scripts
from acmi_core.store.redis import RedisStore
from acmi_core.store.upstash import UpstashStore
from acmi_core.store.writes import WritePlan
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import DB, FakeClock, MemorySink


@pytest.fixture
def up(upstash_store: UpstashStore, clock: FakeClock) -> Acmi:
    return Acmi(upstash_store, Settings(), clock=clock)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _lost_once(double: UpstashDouble) -> None:
    double.reset_counts()
    double.lose_reply_next(1)


def _coord(acmi: Acmi, field: str, value: str) -> list[dict[str, Any]]:
    return [
        e
        for e in acmi.timeline.read(COORDINATION_THREAD).to_dicts()
        if (e.get("payload") or {}).get(field) == value or e.get("correlationId") == value
    ]


def _records(double: UpstashDouble) -> list[bytes]:
    with redis.Redis.from_url(double._redis_url) as client:  # the double's own database
        return sorted(client.scan_iter(match="acmi:_req:*"))


# --- locks.lua ---------------------------------------------------------------------------


@pytest.mark.parametrize("lost", ["claim", "renew", "release"])
def test_a_lock_operation_whose_reply_is_lost_still_succeeds(
    up: Acmi, upstash_double: UpstashDouble, clock: FakeClock, lost: str
) -> None:
    """Before: the claim's retry met its own lease, Conflict (held by the caller itself,
    its owner token lost, the resource stranded until the TTL); a release's retry met a
    free lease, Conflict (not_held). A renew's retry was already harmless."""
    res = _name("deploy:web")
    with pytest.raises(Conflict):  # warms locks.lua: a free lease cannot be released
        up.locks.release(res, "warm-token")

    def step(op: str) -> None:
        if op == lost:
            _lost_once(upstash_double)
        else:
            upstash_double.reset_counts()

    step("claim")
    lease = up.locks.claim(res, "agent:a", 60_000)
    assert upstash_double.requests == (2 if lost == "claim" else 1)  # and its retry
    assert lease.owner_token and lease.fence == 1 and lease.owner == "agent:a"
    clock.now += 1_000
    step("renew")
    renewed = up.locks.renew(res, lease.owner_token, 60_000)
    assert upstash_double.requests == (2 if lost == "renew" else 1)
    assert renewed.expires_at == clock.now + 60_000
    step("release")
    released = up.locks.release(res, lease.owner_token)
    assert upstash_double.requests == (2 if lost == "release" else 1)
    assert (released.fence, released.correlationId) == (1, lease.correlationId)
    assert up.locks.get(res).held is False
    kinds = [e["kind"] for e in _coord(up, "resource", res)]
    assert kinds == ["coord-claim", "coord-release"]  # no deferral on itself, once each


def test_a_losing_claim_whose_reply_is_lost_defers_once(
    up: Acmi, upstash_double: UpstashDouble
) -> None:
    res = _name("deploy:api")
    up.locks.claim(res, "agent:holder", 60_000)
    _lost_once(upstash_double)
    with pytest.raises(Conflict, match="held by agent:holder"):
        up.locks.claim(res, "agent:b", 60_000)
    assert upstash_double.requests == 2
    assert sorted(e["kind"] for e in _coord(up, "resource", res)) == ["coord-claim", "coord-defer"]


# --- hitl.lua ----------------------------------------------------------------------------


@pytest.mark.parametrize("lost", ["create", "resolve"])
def test_a_hitl_create_or_resolve_whose_reply_is_lost_still_succeeds(
    up: Acmi, upstash_double: UpstashDouble, lost: str
) -> None:
    """Before: the create's retry found its own record and answered created=false (the
    API's 200 instead of 201); the resolve's retry found the item closed by itself and
    answered Conflict (409)."""
    with pytest.raises(NotFound):  # warms hitl.lua
        up.hitl.resolve(_name("hitl-warm"), "x", by="user:m", addressee="user:nobody")
    cid = _name("hitl-lost")
    (_lost_once if lost == "create" else UpstashDouble.reset_counts)(upstash_double)
    created = up.hitl.create(
        "rotate the key", "paste it", asked_by="agent:a", addressee="user:m", correlation_id=cid
    )
    assert upstash_double.requests == (2 if lost == "create" else 1)
    assert created.created is True
    (_lost_once if lost == "resolve" else UpstashDouble.reset_counts)(upstash_double)
    done = up.hitl.resolve(cid, "rotated", by="user:m")
    assert upstash_double.requests == (2 if lost == "resolve" else 1)
    assert done.addressee == "user:m"
    assert [e["kind"] for e in _coord(up, "correlationId", cid)] == ["hitl-resolved"]
    with pytest.raises(Conflict):  # a second resolve, a new request, is still refused
        up.hitl.resolve(cid, "again", by="user:m")


def test_adopting_a_foreign_item_whose_reply_is_lost_still_succeeds(
    up: Acmi, upstash_double: UpstashDouble
) -> None:
    """An item another tool wrote (no record): resolve lists it, adopt closes it. Before:
    adopt's retry found the record its own run wrote, closed: Conflict."""
    cid = _name("foreign")
    queue = up.keys.hitl_queue(None, "open")
    item = {
        "ts": 1,
        "source": "agent:ts-sdk",
        "kind": "hitl-required",
        "correlationId": cid,
        "summary": "[HITL] foreign",
        "payload": {"topic": "t", "deadline": 1, "addressee": None},
    }
    up.store.execute(("ZADD", queue, 1, json.dumps(item, separators=(",", ":"))))
    with pytest.raises(NotFound):  # warms hitl.lua
        up.hitl.resolve(_name("hitl-warm"), "x", by="user:m", addressee="user:nobody")
    upstash_double.reset_counts()
    # resolve (answers NONE with the queue's head), then adopt: its reply is the lost one
    upstash_double.lose_reply_next(1, after=1)
    done = up.hitl.resolve(cid, "done", by="user:m")
    assert upstash_double.requests == 3  # resolve, adopt, adopt's retry
    assert done.addressee is None
    assert [e["kind"] for e in _coord(up, "correlationId", cid)] == ["hitl-resolved"]


# --- work.lua (a prologue, then apply.lua) -------------------------------------------------


def test_a_work_create_whose_reply_is_lost_still_succeeds(
    up: Acmi, upstash_double: UpstashDouble
) -> None:
    """Before: the retry found the item its own run created: Conflict (409, unique)."""
    with pytest.raises(NotFound):  # warms work.lua
        up.work.signal(_name("warm"), {"status": "open"})
    wid = _name("task")
    _lost_once(upstash_double)
    item = up.work.create(wid, {"name": "ship it"}, owner="agent:a")
    assert upstash_double.requests == 2
    assert item.owner == "agent:a" and item.open
    assert up.work.ids("agent:a") == [wid]
    with pytest.raises(Conflict):  # a second create, a new request, is still refused
        up.work.create(wid, {"name": "again"})


def test_every_other_work_write_whose_reply_is_lost_answers_its_first_run(
    up: Acmi, upstash_double: UpstashDouble
) -> None:
    """A status change, an event, an assign and a delete: each retry answers with the
    results its first run recorded (the merged signals, here), writing nothing again."""
    wid = _name("task")
    up.work.create(wid, {"name": "ship it"}, owner="agent:a")
    _lost_once(upstash_double)
    assert up.work.signal(wid, {"status": "done", "note": "shipped"}) == {
        "status": "done",
        "note": "shipped",
    }
    assert upstash_double.requests == 2
    assert up.work.ids("agent:a") == []  # closed: out of the owner's open index
    _lost_once(upstash_double)
    up.work.event(
        wid, {"source": "agent:a", "kind": "note", "correlationId": "c1", "summary": "done"}
    )
    assert upstash_double.requests == 2
    _lost_once(upstash_double)
    assert up.work.assign(wid, "agent:b") == "agent:b"
    assert upstash_double.requests == 2
    assert [e.summary for e in up.timeline.read(f"work:{wid}")] == ["done"]
    _lost_once(upstash_double)
    up.work.delete(wid)
    assert upstash_double.requests == 2
    with pytest.raises(NotFound):
        up.work.get(wid)


# --- apply.lua: a WritePlan whose retry meets its own ONCE record ----------------------------


def test_an_invite_whose_reply_is_lost_reports_the_onboarding(
    up: Acmi, upstash_double: UpstashDouble
) -> None:
    """Before: the retry met the invite's own ONCE record as another invite's, read the
    agent again and answered "unchanged", created=false, with no event."""
    up.agents.invite(_name("warm"))  # warms apply.lua
    name = _name("scout")
    upstash_double.reset_counts()
    upstash_double.lose_reply_next(1, after=1)  # the state read, then the transition
    result = up.agents.invite(name, "Specialist")
    assert upstash_double.requests == 3
    assert (result["created"], result["action"]) == (True, "onboarded")
    assert result["event"] is not None
    assert result["profile"]["rbac_tier"] == result["tier"] == "Specialist"


# --- the record: per tenant, short-lived, bounded --------------------------------------------


def test_the_record_lives_briefly_under_the_tenant(
    upstash_store: UpstashStore, upstash_double: UpstashDouble, clock: FakeClock
) -> None:
    acme = Acmi(upstash_store, Settings(), clock=clock, tenant="acme")
    acme.locks.claim(_name("deploy:x"), "agent:a", 60_000)
    (record,) = _records(upstash_double)
    assert record.startswith(b"acmi:_req:acme:")
    ttl = upstash_store.execute(("PTTL", record))
    assert isinstance(ttl, int) and 0 < ttl <= scripts.REPLAY_TTL_MS


def test_results_over_the_cap_are_not_recorded_and_a_retry_runs_again(
    up: Acmi, upstash_double: UpstashDouble
) -> None:
    """Three 60 KB object edits: results of ~180 KB, over REPLAY_MAX_BYTES. Nothing is
    recorded; the retry runs the plan again, which for these ops is idempotent."""
    up.agents.heartbeat(_name("warm"))  # warms apply.lua (alone, a lost NOSCRIPT ran nothing)
    big = json.dumps("x" * 60_000)
    record = up.keys.request(scripts.new_request_id())
    plan = WritePlan(record=record)
    for i in range(3):
        plan.edit_object(up.keys.profile(EntityId.parse(f"user:big-{i}")), [("set", "v", big)])
    _lost_once(upstash_double)
    results = plan.apply(up.store)
    assert upstash_double.requests == 2
    assert len(results) == 4
    assert all(isinstance(r, bytes) and len(r) > 60_000 for r in results[1:])
    assert up.store.execute(("EXISTS", record)) == 0


# --- the redis-server path: one attempt per call, the same record -------------------------


@pytest.fixture
def resp(redis_server: RedisServer) -> Iterator[RedisStore]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    yield store
    store.close()


def test_the_redis_store_makes_one_attempt_and_a_rerun_of_a_request_replays(
    resp: RedisStore, clock: FakeClock
) -> None:
    """RespStore never retries (a caller's retry is a new call, a new id); a request sent
    twice, as a retrying transport would, answers the first run's reply both times."""
    acmi = Acmi(resp, Settings(), clock=clock, tenant=_name("t"))
    res = _name("deploy:db")
    keys: dict[str, Any] = {
        "lease": acmi.keys.lock(res),
        "thread": acmi.keys.coordination_timeline(),
        "index": acmi.keys.index("thread"),
        "leases": acmi.keys.leases(),
        "mentions": [],  # the events "{}" mention nobody
        "replay": acmi.keys.request(scripts.new_request_id()),
    }
    args: dict[str, Any] = {
        "op": "claim",
        "now": clock.now,
        "owner": "agent:a",
        "token_hash": "h" * 64,
        "expires": clock.now + 60_000,
        "cid": "lock-1",
        "index_member": "agent-coordination",
        "claim_template": [1, "{}"],
        "defer_template": [1, "{}"],
        "resource": res,
    }
    first = scripts.LOCKS.eval(resp, keys, args)
    again = scripts.LOCKS.eval(resp, keys, args)
    assert first == again == scripts.Slots("OK", {"fence": b"1"})
    other = scripts.LOCKS.eval(resp, {**keys, "replay": acmi.keys.request("another")}, args)
    assert other.tag == "HELD"  # a new request meets the lease, as before
    record = acmi.keys.request(scripts.new_request_id())
    plan = WritePlan(record=record)
    plan.once(acmi.keys.internal("once", res), 60_000, '{"v":1}')
    plan.edit_object(acmi.keys.profile(EntityId.parse("user:r")), [("set", "a", "1")])
    assert plan.apply(resp) == [0, 0, b'{"a":1}']
    assert plan.apply(resp) == [0, 0, b'{"a":1}']  # not Replayed: its own first run


# --- a plain command that is not idempotent: the archive lease's SET NX ---------------------


def test_an_archive_whose_lease_reply_is_lost_still_archives(
    up: Acmi, upstash_double: UpstashDouble, clock: FakeClock
) -> None:
    """Before: the lease's retried SET NX found the lease its first try took: Conflict
    ("another archive holds the archive lease"), and the lease stranded for 5 minutes."""
    day = 24 * 3600 * 1000
    entity = f"agent:{_name('atlas')}"
    events = [
        {"ts": clock.now - i * day, "source": "user:m", "kind": "note", "correlationId": f"c{i}"}
        for i in range(40)
    ]
    up.timeline.extend(entity, [{**e, "summary": "s"} for e in events])
    sink = MemorySink()
    dest = archive_sink.Destination(sink, "acmi-archive", "mem://b/acmi-archive")
    _lost_once(upstash_double)  # the lease, archive_now's first request
    done = archive_now(up, entity, dest=dest)
    assert done["trimmed"] == 9 and sink.objects  # days 31..39: older than 30 days
    assert up.store.execute(("EXISTS", up.keys.hygiene_lease())) == 0  # released


# --- apply.lua in a job: the wake tick's claim of a slot -------------------------------------


def test_a_wake_claim_whose_reply_is_lost_still_wakes_the_agent(
    upstash_store: UpstashStore, upstash_double: UpstashDouble, clock: FakeClock
) -> None:
    """Before: the claim's retry met its own ONCE record as another execution's and the
    tick reported the agent "already" woken: no spawn, no bundle delivered."""
    clock.now -= clock.now % 3_600_000  # on the hour
    fleet = Acmi(upstash_store, Settings(), clock=clock, tenant=_name("t"))
    fleet.wake.set("claude", minute=15)
    clock.now += 20 * 60_000  # 10:20: due since 10:15
    upstash_double.lose_reply_matching("wake-claim")
    done = run_job(
        fleet, JobRun("wake", "e1", clock.now, {}), wake_job.run, clock=time.perf_counter
    )
    assert (done["woken"], done["already"]) == (1, 0)
    assert [s["session_id"] for s in fleet.agents.spawns("claude")] == ["wake-e1"]

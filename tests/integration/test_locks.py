"""The Lock-Protocol (acmi.locks and /v1/locks) on every backend: atomic leases,
fencing tokens, the hedge, coordination events in the same step, one round trip each."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base.errors import AcmiValidationError, Conflict
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.coordination.locks import MAX_TTL_MS, MIN_TTL_MS
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import FakeClock, RouteClient, requests_per_step, run_together


@pytest.fixture
def locks_acmi(acmi: Acmi, clock: FakeClock) -> Acmi:
    return Acmi(acmi.store, acmi.settings, clock=clock)


def _resource() -> str:
    return f"deploy:web-{uuid.uuid4().hex[:12]}"


def _coord(acmi: Acmi, resource: str, kind: str | None = None) -> list[dict[str, Any]]:
    events = acmi.timeline.read(COORDINATION_THREAD).to_dicts()
    return [  # the thread is shared: other tests post there too (HITL resolutions, ...)
        e
        for e in events
        if isinstance(e.get("payload"), dict)
        and e["payload"].get("resource") == resource
        and (kind is None or e["kind"] == kind)
    ]


def _nothing_stored(acmi: Acmi, resource: str) -> None:
    assert acmi.store.execute(("EXISTS", acmi.keys.lock(resource))) == 0
    assert _coord(acmi, resource) == []


def test_claim_renew_release_get(locks_acmi: Acmi, clock: FakeClock) -> None:
    acmi, res = locks_acmi, _resource()
    assert acmi.locks.get(res).held is False
    lease = acmi.locks.claim(res, "agent:claude", 5_000)
    assert lease.owner == "agent:claude" and lease.fence == 1
    assert lease.expires_at == clock.now + 5_000 and lease.owner_token
    state = acmi.locks.get(res)
    assert (state.held, state.owner, state.expires_at, state.fence) == (
        True,
        "agent:claude",
        clock.now + 5_000,
        1,
    )
    assert "owner_token" not in state.to_dict()
    clock.now += 4_000
    renewed = acmi.locks.renew(res, lease.owner_token or "", 10_000)
    assert renewed.expires_at == clock.now + 10_000 and renewed.fence == 1
    clock.now += 9_000  # past the first expiry, within the renewed one
    assert acmi.locks.get(res).held is True
    released = acmi.locks.release(res, lease.owner_token or "")
    assert released.owner == "agent:claude"
    assert acmi.locks.get(res).held is False
    # the token digest, not the token, is what is stored
    stored = acmi.store.execute(("HGETALL", acmi.keys.lock(res)))
    assert isinstance(stored, list) and (lease.owner_token or "").encode() not in stored


def test_fence_strictly_increases_across_claims_and_expiry(
    locks_acmi: Acmi, clock: FakeClock
) -> None:
    acmi, res = locks_acmi, _resource()
    fences = []
    first = acmi.locks.claim(res, "agent:a", 1_000)
    fences.append(first.fence)
    acmi.locks.release(res, first.owner_token or "")
    fences.append(acmi.locks.claim(res, "agent:b", 1_000).fence)
    clock.now += 1_000  # expired (expiry is exclusive), never released
    fences.append(acmi.locks.claim(res, "agent:c", 1_000).fence)
    clock.now += 5_000
    fences.append(acmi.locks.claim(res, "agent:a", 1_000).fence)
    assert fences == [1, 2, 3, 4]


def test_the_hedge_names_holder_and_expiry_and_posts_a_defer(
    locks_acmi: Acmi, clock: FakeClock
) -> None:
    acmi, res = locks_acmi, _resource()
    lease = acmi.locks.claim(res, "agent:claude", 60_000)
    with pytest.raises(Conflict) as refused:
        acmi.locks.claim(res, "agent:gemini", 60_000)
    assert refused.value.field == "resource" and refused.value.rule == "held"
    assert "agent:claude" in refused.value.message
    assert str(lease.expires_at) in refused.value.message
    assert acmi.locks.get(res).owner == "agent:claude"  # the loser changed nothing
    (claim,) = _coord(acmi, res, "coord-claim")
    (defer,) = _coord(acmi, res, "coord-defer")
    assert claim["correlationId"] == defer["correlationId"] == lease.correlationId
    assert claim["payload"]["fence"] == 1 and claim["source"] == "agent:claude"
    assert defer["source"] == "agent:gemini"
    assert defer["payload"]["holder"] == "agent:claude"
    assert defer["payload"]["held_until"] == lease.expires_at
    acmi.locks.release(res, lease.owner_token or "")
    (release,) = _coord(acmi, res, "coord-release")
    assert release["correlationId"] == lease.correlationId
    assert release["source"] == "agent:claude" and release["payload"]["fence"] == 1


def test_wrong_token_and_expired_lease(locks_acmi: Acmi, clock: FakeClock) -> None:
    acmi, res = locks_acmi, _resource()
    lease = acmi.locks.claim(res, "agent:a", 2_000)
    for call in (
        lambda: acmi.locks.renew(res, "not-the-token", 2_000),
        lambda: acmi.locks.release(res, "not-the-token"),
    ):
        with pytest.raises(Conflict) as wrong:
            call()
        assert (wrong.value.field, wrong.value.rule) == ("owner_token", "matches_holder")
    assert acmi.locks.get(res).owner == "agent:a"
    assert _coord(acmi, res, "coord-release") == []
    clock.now += 2_000
    with pytest.raises(Conflict) as expired:
        acmi.locks.renew(res, lease.owner_token or "", 2_000)
    assert (expired.value.field, expired.value.rule) == ("resource", "expired")
    assert "expired" in expired.value.message
    # an expired lease is claimable, and the old token is then useless
    new = acmi.locks.claim(res, "agent:b", 2_000)
    assert new.fence == 2
    with pytest.raises(Conflict) as stale:
        acmi.locks.release(res, lease.owner_token or "")
    assert stale.value.field == "owner_token"
    acmi.locks.release(res, new.owner_token or "")
    with pytest.raises(Conflict) as free:
        acmi.locks.release(res, new.owner_token or "")
    assert (free.value.field, free.value.rule) == ("resource", "not_held")


def test_twenty_claimants_one_winner(locks_acmi: Acmi) -> None:
    acmi, res = locks_acmi, _resource()
    winners: list[str] = []
    losers: list[str] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        owner = f"agent:racer-{i}"
        try:
            acmi.locks.claim(res, owner, 60_000)
            outcome = winners
        except Conflict:
            outcome = losers
        with lock:
            outcome.append(owner)

    run_together(20, work)
    assert len(winners) == 1 and len(losers) == 19
    claims = _coord(acmi, res, "coord-claim")
    assert [c["source"] for c in claims] == winners
    assert sorted(d["source"] for d in _coord(acmi, res, "coord-defer")) == sorted(losers)
    assert acmi.locks.get(res).owner == winners[0] and acmi.locks.get(res).fence == 1


BAD: list[tuple[str, Callable[[Acmi, str], object], str]] = [
    ("resource", lambda a, r: a.locks.claim("bad resource!", "agent:a", 5_000), "resource"),
    ("resource-long", lambda a, r: a.locks.claim("r" * 201, "agent:a", 5_000), "resource"),
    ("owner", lambda a, r: a.locks.claim(r, "Agent claude", 5_000), "owner"),
    ("owner-type", lambda a, r: a.locks.claim(r, 7, 5_000), "owner"),  # type: ignore[arg-type]
    ("ttl-low", lambda a, r: a.locks.claim(r, "agent:a", MIN_TTL_MS - 1), "ttl_ms"),
    ("ttl-high", lambda a, r: a.locks.claim(r, "agent:a", MAX_TTL_MS + 1), "ttl_ms"),
    ("ttl-type", lambda a, r: a.locks.claim(r, "agent:a", "5000"), "ttl_ms"),  # type: ignore[arg-type]
    ("ttl-bool", lambda a, r: a.locks.claim(r, "agent:a", True), "ttl_ms"),
    ("token", lambda a, r: a.locks.release(r, ""), "owner_token"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_refused_with_nothing_stored(
    locks_acmi: Acmi, case: tuple[str, Callable[[Acmi, str], object], str]
) -> None:
    _, call, field = case
    res = _resource()
    with pytest.raises(AcmiValidationError) as refused:
        call(locks_acmi, res)
    assert refused.value.field == field
    _nothing_stored(locks_acmi, res)


def test_other_tenants_lock_under_their_prefix(locks_acmi: Acmi) -> None:
    res = _resource()
    other = locks_acmi.for_tenant("acme")
    other.locks.claim(res, "agent:a", 5_000)
    assert other.keys.lock(res) == f"acmi:_lock:acme:{res}"
    assert locks_acmi.locks.get(res).held is False  # the default tenant's lock is free
    assert _coord(locks_acmi, res) == []
    assert other.keys.coordination_timeline().startswith("acmi:tenant:acme:thread:")
    assert len(_coord(other, res, "coord-claim")) == 1


# --- round trips (the Upstash double counts HTTP requests) -----------------------------------


def test_one_round_trip_per_lock_operation(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    acmi = create_acmi(upstash_store, Settings())
    warm = acmi.locks.claim(_resource(), "agent:warm", 5_000)  # loads the script (EVALSHA)
    assert warm.fence == 1
    res = _resource()
    token: dict[str, str] = {}

    def claim() -> None:
        token["t"] = acmi.locks.claim(res, "agent:a", 5_000).owner_token or ""

    def defer() -> None:
        with pytest.raises(Conflict):
            acmi.locks.claim(res, "agent:b", 5_000)

    steps: dict[str, Callable[[], object]] = {
        "claim": claim,
        "claim (lost: 409 + coord-defer)": defer,
        "renew": lambda: acmi.locks.renew(res, token["t"], 5_000),
        "get": lambda: acmi.locks.get(res),
        "release": lambda: acmi.locks.release(res, token["t"]),
    }
    assert requests_per_step(upstash_double, steps) == dict.fromkeys(steps, 1)


# --- HTTP -------------------------------------------------------------------------------------


@pytest.fixture
def http(locks_acmi: Acmi) -> tuple[TestClient, dict[str, str]]:
    routes = RouteClient(locks_acmi, "locks")
    return routes.client, routes.auth["write"]


def test_http_claim_hedge_renew_release(
    http: tuple[TestClient, dict[str, str]], locks_acmi: Acmi, clock: FakeClock
) -> None:
    client, auth = http
    res = _resource()
    won = client.post(
        f"/v1/locks/{res}/claim", json={"owner": "agent:a", "ttl_ms": 5000}, headers=auth
    )
    assert won.status_code == 200, won.text
    lease = won.json()
    assert lease["fence"] == 1 and lease["owner_token"] and lease["owner"] == "agent:a"
    lost = client.post(
        f"/v1/locks/{res}/claim", json={"owner": "agent:b", "ttl_ms": 5000}, headers=auth
    )
    assert lost.status_code == 409
    body = lost.json()
    assert (body["field"], body["rule"]) == ("resource", "held")
    assert "agent:a" in body["message"] and str(lease["expires_at"]) in body["message"]
    got = client.get(f"/v1/locks/{res}", headers=auth).json()
    assert got["owner"] == "agent:a" and "owner_token" not in got
    wrong = client.post(
        f"/v1/locks/{res}/renew", json={"owner_token": "x", "ttl_ms": 5000}, headers=auth
    )
    assert wrong.status_code == 409 and wrong.json()["field"] == "owner_token"
    renewed = client.post(
        f"/v1/locks/{res}/renew",
        json={"owner_token": lease["owner_token"], "ttl_ms": 9000},
        headers=auth,
    )
    assert renewed.status_code == 200 and renewed.json()["expires_at"] == clock.now + 9000
    assert "owner_token" not in renewed.json()
    released = client.post(
        f"/v1/locks/{res}/release", json={"owner_token": lease["owner_token"]}, headers=auth
    )
    assert released.status_code == 200 and released.json()["released"] is True
    assert client.get(f"/v1/locks/{res}", headers=auth).json()["held"] is False


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/locks/bad%20name/claim", {"owner": "agent:a", "ttl_ms": 5000}, "resource"),
        ("/v1/locks/{res}/claim", {"owner": "not an id", "ttl_ms": 5000}, "owner"),
        ("/v1/locks/{res}/claim", {"owner": "agent:a", "ttl_ms": 100}, "ttl_ms"),
        ("/v1/locks/{res}/claim", {"owner": "agent:a"}, "ttl_ms"),
        ("/v1/locks/{res}/claim", ["agent:a"], "body"),
        ("/v1/locks/{res}/renew", {"owner_token": 5, "ttl_ms": 5000}, "owner_token"),
        ("/v1/locks/{res}/release", {}, "owner_token"),
    ],
)
def test_http_bad_input_is_a_400_naming_the_field(
    http: tuple[TestClient, dict[str, str]], locks_acmi: Acmi, path: str, body: Any, field: str
) -> None:
    client, auth = http
    res = _resource()
    response = client.post(path.format(res=res), json=body, headers=auth)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    _nothing_stored(locks_acmi, res)


def test_held_by_lists_what_an_owner_holds_and_follows_every_change(
    locks_acmi: Acmi, clock: FakeClock
) -> None:
    acmi = locks_acmi
    a, b, c = _resource(), _resource(), _resource()
    owner, other = f"agent:held-{uuid.uuid4().hex[:8]}", f"agent:other-{uuid.uuid4().hex[:8]}"
    la = acmi.locks.claim(a, owner, 5_000)
    lb = acmi.locks.claim(b, owner, 9_000)
    acmi.locks.claim(c, other, 5_000)
    # a longer id sharing the prefix is someone else
    acmi.locks.claim(_resource(), owner + "-x", 5_000)
    held = acmi.locks.held_by(owner)
    assert [(x.resource, x.fence, x.expires_at) for x in held] == [
        (a, la.fence, la.expires_at),
        (b, lb.fence, lb.expires_at),
    ]
    assert all(x.owner_token is None for x in held)
    renewed = acmi.locks.renew(a, la.owner_token or "", 20_000)
    assert [x.resource for x in acmi.locks.held_by(owner)] == [b, a]
    assert acmi.locks.held_by(owner)[1].expires_at == renewed.expires_at
    acmi.locks.release(b, lb.owner_token or "")
    assert [x.resource for x in acmi.locks.held_by(owner)] == [a]
    clock.now += 21_000  # a expired: not held any more, and free for the other agent
    assert acmi.locks.held_by(owner) == []
    taken = acmi.locks.claim(a, other, 5_000)
    assert [x.resource for x in acmi.locks.held_by(other)] == [a]
    # the index keeps one member per lease: the expired holder's member went with the claim
    members = acmi.store.execute(("ZRANGE", acmi.keys.leases(), 0, -1))
    assert isinstance(members, list)
    assert [m for m in members if f"|{a}|".encode() in m] == [
        f"{other}|{a}|{taken.expires_at}|{taken.fence}|{taken.correlationId}".encode()
    ]


def test_a_bad_owner_for_held_by_is_refused(locks_acmi: Acmi) -> None:
    with pytest.raises(AcmiValidationError) as info:
        locks_acmi.locks.held_by("no-colon-here!")
    assert info.value.field == "owner"


def test_a_claimant_polling_a_held_lease_defers_once_per_lease(
    locks_acmi: Acmi, clock: FakeClock
) -> None:
    acmi, res = locks_acmi, _resource()
    first = acmi.locks.claim(res, "agent:holder", 5_000)
    for _ in range(50):
        clock.now += 10
        with pytest.raises(Conflict):
            acmi.locks.claim(res, "agent:poller", 5_000)
    with pytest.raises(Conflict):
        acmi.locks.claim(res, "agent:other", 5_000)
    defers = _coord(acmi, res, "coord-defer")
    assert sorted(e["payload"]["claimant"] for e in defers) == ["agent:other", "agent:poller"]
    assert {e["correlationId"] for e in defers} == {first.correlationId}
    clock.now += 5_000  # a new lease: the poller may defer on it once more
    second = acmi.locks.claim(res, "agent:holder", 5_000)
    assert second.fence == first.fence + 1
    for _ in range(3):
        with pytest.raises(Conflict):
            acmi.locks.claim(res, "agent:poller", 5_000)
    defers = _coord(acmi, res, "coord-defer")
    assert [e["correlationId"] for e in defers].count(second.correlationId) == 1
    # the marks went with the old lease: the hash holds the new lease and one mark
    fields = acmi.store.execute(("HKEYS", acmi.keys.lock(res)))
    assert isinstance(fields, list)
    assert sorted(f.decode() for f in fields) == sorted(
        ["fence", "owner", "token", "expires", "cid", "d:agent:poller"]
    )

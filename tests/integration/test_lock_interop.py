"""Lock-Protocol interop: a claim respects a reference agent's raw ``coord-claim`` event for
the same resource on the coordination thread within the seed's hedge window (5 minutes),
and its ``coord-release``; on every backend, over HTTP for two tenants, and through the
CLI. The reference writes such events as ``JSON.stringify`` text (planted raw here) or
through its SDK's ``timeline.append`` (our append writes the same)."""

from __future__ import annotations

import json
import uuid
from typing import Any, Final

import pytest
import redis

from acmi_core import Acmi, Conflict
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.model import EntityId
from acmi_core.cli import main
from acmi_core.coordination.locks import HEDGE_BYTES, HEDGE_EVENTS, HEDGE_MS
from acmi_core.store.memory import MemoryStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, FakeClock, RouteClient, fresh_tenant


def _raw(acmi: Acmi, source: str, kind: str, resource: str, **extra: Any) -> dict[str, Any]:
    """The event a reference agent posts, stored as JSON.stringify writes it."""
    event = {
        "ts": acmi.clock(),
        "source": source,
        "kind": kind,
        "correlationId": f"ref-{uuid.uuid4().hex[:8]}",
        "summary": f"{kind} {resource}",
        "payload": {"resource": resource},
        **extra,
    }
    key = acmi.keys.timeline(EntityId.parse(COORDINATION_THREAD))
    acmi.store.execute(("ZADD", key, event["ts"], json.dumps(event, separators=(",", ":"))))
    return event


@pytest.fixture
def fleet(acmi: Acmi, clock: FakeClock) -> Acmi:
    return fresh_tenant(acmi, clock)


def _resource() -> str:
    return f"deploy:{uuid.uuid4().hex[:8]}"


def test_a_raw_coord_claim_hedges_the_resource_for_five_minutes(
    fleet: Acmi, clock: FakeClock
) -> None:
    resource = _resource()
    claim = _raw(fleet, "agent:ref", "coord-claim", resource)
    thread_before = fleet.timeline.size(COORDINATION_THREAD)
    clock.now += HEDGE_MS - 1
    with pytest.raises(Conflict) as caught:
        fleet.locks.claim(resource, "agent:ours", 60_000)
    assert (caught.value.field, caught.value.rule) == ("resource", "hedged")
    assert "agent:ref" in caught.value.message and claim["correlationId"] in caught.value.message
    assert fleet.locks.get(resource).held is False  # nothing written
    assert fleet.timeline.size(COORDINATION_THREAD) == thread_before
    # the claimant's own raw claim, and another resource's, hedge nothing
    _raw(fleet, "agent:ours", "coord-claim", f"{resource}-mine")
    fleet.locks.claim(f"{resource}-mine", "agent:ours", 60_000)
    fleet.locks.claim(f"{resource}-other", "agent:ours", 60_000)
    clock.now += 1  # the window has passed
    lease = fleet.locks.claim(resource, "agent:ours", 60_000)
    assert lease.owner == "agent:ours" and fleet.locks.get(resource).held


def test_a_coord_release_of_the_same_source_ends_the_hedge(fleet: Acmi, clock: FakeClock) -> None:
    resource = _resource()
    _raw(fleet, "agent:ref", "coord-claim", resource)
    clock.now += 1_000
    _raw(fleet, "agent:someone-else", "coord-release", resource)  # not the claimant's
    with pytest.raises(Conflict, match="agent:ref"):
        fleet.locks.claim(resource, "agent:ours", 60_000)
    clock.now += 1_000
    _raw(fleet, "agent:ref", "coord-release", resource)
    assert fleet.locks.claim(resource, "agent:ours", 60_000).owner == "agent:ours"


def test_the_resource_is_named_by_payload_task_or_the_correlation_id(
    fleet: Acmi, clock: FakeClock
) -> None:
    by_task, by_cid = _resource(), _resource()
    _raw(fleet, "agent:ref", "coord-claim", "x", payload={"task": by_task})
    _raw(fleet, "agent:ref", "coord-claim", "x", payload=None, correlationId=by_cid)
    for resource in (by_task, by_cid):
        with pytest.raises(Conflict, match="claimed by agent:ref"):
            fleet.locks.claim(resource, "agent:ours", 60_000)
    # through the reference SDK's append (ours writes the same event): hedged too
    sdk = _resource()
    fleet.timeline.append(
        COORDINATION_THREAD,
        {
            "source": "agent:ref",
            "kind": "coord-claim",
            "correlationId": "sdk-1",
            "summary": "claiming",
            "payload": {"resource": sdk},
        },
    )
    with pytest.raises(Conflict):
        fleet.locks.claim(sdk, "agent:ours", 60_000)


def test_our_own_claims_events_are_decided_by_their_lease(fleet: Acmi, clock: FakeClock) -> None:
    """locks.lua's coord-claim (payload.fence) is not a hedge: its release frees it."""
    resource = _resource()
    lease = fleet.locks.claim(resource, "agent:a", 60_000)
    fleet.locks.release(resource, lease.owner_token or "")
    assert fleet.locks.claim(resource, "agent:b", 60_000).owner == "agent:b"


def test_a_hedging_claim_behind_the_scan_caps(fleet: Acmi, clock: FakeClock) -> None:
    """The window read stops at HEDGE_EVENTS events: a claim behind them is not seen."""
    resource = _resource()
    _raw(fleet, "agent:ref", "coord-claim", resource)
    clock.now += 1
    filler = [
        {
            "source": f"agent:f{i}",
            "kind": "note",
            "correlationId": f"f{i}",
            "summary": "chatter",
        }
        for i in range(HEDGE_EVENTS)
    ]
    fleet.timeline.extend(COORDINATION_THREAD, filler)
    assert HEDGE_BYTES >= 1024
    assert fleet.locks.claim(resource, "agent:ours", 60_000).owner == "agent:ours"


def test_a_tenants_thread_hedges_only_its_own_resources(acmi: Acmi, clock: FakeClock) -> None:
    one, two = fresh_tenant(acmi, clock), fresh_tenant(acmi, clock)
    resource = _resource()
    _raw(one, "agent:ref", "coord-claim", resource)
    assert two.locks.claim(resource, "agent:ours", 60_000).owner == "agent:ours"
    with pytest.raises(Conflict):
        one.locks.claim(resource, "agent:ours", 60_000)


def test_http_answers_409_hedged_and_the_cli_exits_4(
    redis_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = FakeClock()
    acmi = Acmi(MemoryStore(), clock=clock)
    routes = RouteClient(acmi, "locks")
    _raw(acmi, "agent:ref", "coord-claim", "deploy:web")
    refused = routes.call(
        "POST", "/v1/locks/deploy:web/claim", {"owner": "agent:ours", "ttl_ms": 60_000}
    )
    assert refused.status_code == 409, refused.text
    assert (refused.json()["field"], refused.json()["rule"]) == ("resource", "hedged")
    other = RouteClient(acmi.for_tenant("t-two"), "locks")
    ok = other.call("POST", "/v1/locks/deploy:web/claim", {"owner": "agent:ours", "ttl_ms": 60_000})
    assert ok.status_code in (200, 201), ok.text

    url = redis_server.url_for(DB["backends"])
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    resource = _resource()
    event = {
        "ts": 1_790_000_000_000,
        "source": "agent:ref",
        "kind": "coord-claim",
        "correlationId": "ref-cli",
        "summary": "claiming",
        "payload": {"resource": resource},
    }
    now_ms = int(__import__("time").time() * 1000)
    event["ts"] = now_ms
    with redis.Redis.from_url(url) as client:
        client.zadd(
            f"acmi:{COORDINATION_THREAD}:timeline",
            {json.dumps(event, separators=(",", ":")): now_ms},
        )
    capsys.readouterr()
    assert main(["lock", "claim", resource, "agent:ours"]) == 4
    err = capsys.readouterr().err
    assert "agent:ref" in err and "hedged" in err, err


LUA_MIRRORS: Final = ("HEDGE_MS, HEDGE_EVENTS, HEDGE_BYTES = 300000, 200, 262144",)


def test_the_script_mirrors_the_windows() -> None:
    from importlib import resources

    text = resources.files("acmi_core").joinpath("store/lua/locks.lua").read_text()
    assert (HEDGE_MS, HEDGE_EVENTS, HEDGE_BYTES) == (300_000, 200, 262_144)
    assert all(line in text for line in LUA_MIRRORS)

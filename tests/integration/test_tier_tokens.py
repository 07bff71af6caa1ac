"""A bound key's ``max_tokens_per_hour`` (``acmi_core/bootstrap/allowance.py``,
``auth/tiers.py``) on the whole HTTP app and ``acmi --api``, over a real redis-server,
two tenants:

- the bundle that crosses the limit is served (the check is before), the next one is
  refused: 429 ``tier_tokens`` naming ``max_tokens_per_hour``, Retry-After to the next
  hour, nothing written (no spawn logged, no handoff taken); the next hour serves again;
- the counter is per tenant and agent (the same id in another tenant, another agent of
  the same tenant, an unbound key: served), charged the bundle's X-Acmi-Bundle-Tokens,
  expiring after its window;
- round trips of one bootstrap: an unbound key's unchanged; a bound key's one more (the
  charge) warm, two more cold (the tier read too);
- ``acmi --api bootstrap`` with a spent key exits non-zero naming the rule;
- the core under an allowance on every backend (embedded, Redis, the Upstash REST
  double), and the counter in the bootstrap script's slot on a cluster layout.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any, Final

import pytest
from fastapi.testclient import TestClient

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.auth.tiers import TIER_CACHE_S, TierGate
from acmi_core.base.errors import RateLimited
from acmi_core.base.keys import PERMISSIONS, Keys, Layout, key_tag
from acmi_core.base.model import EntityId
from acmi_core.bootstrap.allowance import COUNTER_TTL_S, HOUR_MS, Allowance, allowed
from acmi_core.cli import main
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import TEST_DBS, FakeClock, serving

DB = TEST_DBS["tier_tokens"]  # this module's own database (tests/kit.py TEST_DBS)
# 10 minutes into an hour: the refusal's Retry-After is the 50 minutes left
START: Final = 490_000 * HOUR_MS + 600_000


class Clock:
    """The tier gate's clock (seconds)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class World:
    """The app on one store and one clock (ms) the test moves, in two tenants; keys
    minted on demand, bound or not."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self.clock = FakeClock(START)
        self.acmi = create_acmi(store, Settings(auth_cache_s=0), clock=self.clock)
        self.acme = self.acmi.for_tenant("acme")
        self.gate_clock = Clock()
        self.ctx = ApiContext(self.acmi, tiers=TierGate(clock=self.gate_clock))
        self.client = TestClient(create_app(self.ctx), raise_server_exceptions=False)

    def key(self, agent: str | None, tenant: str = "default") -> str:
        key, _ = apikeys.mint(
            self.store, tenant=tenant, scope="write", name="t", now_ms=0, agent=agent
        )
        return key

    def limit(self, agent: str, tokens: int, tenant: str = "default") -> None:
        """``agent``'s tier: Specialist's namespaces, ``tokens`` an hour."""
        acmi = self.acmi.for_tenant(tenant)
        slot = acmi.keys.slot(EntityId.parse(agent), PERMISSIONS)
        doc = {
            "role_tier": "Specialist",
            "allowed_namespaces": ["agent", "thread", "issue"],
            "write_access": True,
            "max_tokens_per_hour": tokens,
        }
        self.store.execute(("SET", slot, json.dumps(doc)))

    def bootstrap(self, key: str, agent: str = "scout", spawn: str | None = None) -> Any:
        headers = {"authorization": f"Bearer {key}"}
        path = f"/v1/agents/{agent}/bootstrap"
        if spawn is None:
            return self.client.get(path, headers=headers)
        body = {"spawn": {"session_id": spawn, "model_id": "m"}}
        return self.client.post(path, headers=headers, json=body)

    def served(self, agent: str = "agent:scout", tenant: str = "default") -> int:
        acmi = self.acmi.for_tenant(tenant)
        key = acmi.keys.tier_tokens(EntityId.parse(agent), self.clock.now // HOUR_MS)
        raw = self.store.execute(("GET", key))
        return int(raw) if isinstance(raw, bytes) else 0

    def dbsize(self) -> int:
        size = self.store.execute(("DBSIZE",))
        assert isinstance(size, int)
        return size


@pytest.fixture
def world(redis_server: RedisServer) -> Iterator[World]:
    redis_server.flush(DB)
    store = RedisStore.from_url(redis_server.url_for(DB))
    yield World(store)
    store.close()


def refused(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 429, answer.text
    body: dict[str, Any] = answer.json()
    assert (body["error"], body["field"], body["rule"]) == (
        "rate_limited",
        "max_tokens_per_hour",
        "tier_tokens",
    ), body
    assert answer.headers["Retry-After"] == "3000"  # 50 minutes: the next hour
    return body


def test_the_bundle_that_crosses_is_served_and_the_next_refused(world: World) -> None:
    world.acmi.memory.handoff("agent:scout", text="pick up the deploy")
    world.limit("agent:scout", 1)
    key = world.key("agent:scout")
    first = world.bootstrap(key)
    assert first.status_code == 200, first.text
    tokens = int(first.headers["X-Acmi-Bundle-Tokens"])
    assert tokens > 1 and world.served() == tokens  # charged what it said it served
    before = world.dbsize()
    body = refused(world.bootstrap(key, spawn="s-1"))
    assert "agent:scout" in body["message"] and f"{tokens} served" in body["message"]
    refused(world.bootstrap(key))
    # nothing written: no spawn logged, the handoff still pending, no counter moved
    assert world.dbsize() == before and world.served() == tokens
    assert world.acmi.agents.spawns("agent:scout") == []
    assert world.acmi.memory.take_handoff("agent:scout") is not None
    world.clock.now += 50 * 60_000  # the next hour: served again, its own counter
    again = world.bootstrap(key, spawn="s-2")
    assert again.status_code == 200, again.text
    assert world.served() == int(again.headers["X-Acmi-Bundle-Tokens"])
    assert [s["session_id"] for s in world.acmi.agents.spawns("agent:scout")] == ["s-2"]


def test_the_counter_is_per_tenant_and_agent_and_unbound_keys_are_not_counted(
    world: World,
) -> None:
    for tenant in ("default", "acme"):
        world.limit("agent:scout", 1, tenant)
        world.limit("agent:helper", 1, tenant)
    scout = world.key("agent:scout")
    assert world.bootstrap(scout).status_code == 200
    refused(world.bootstrap(scout))
    # the same id in another tenant, another agent here, an unbound key: their own
    acme = world.key("agent:scout", tenant="acme")
    assert world.bootstrap(acme).status_code == 200
    assert world.served(tenant="acme") > 0
    helper = world.key("agent:helper")
    assert world.bootstrap(helper, agent="helper").status_code == 200
    assert world.served("agent:helper") > 0
    served = world.served()
    unbound = world.key(None)
    for _ in range(3):
        assert world.bootstrap(unbound).status_code == 200
    assert world.served() == served  # an unbound key's bundles are not counted
    # the counter's key: the tenant's, expiring after its window
    acme_key = world.acme.keys.tier_tokens(EntityId.parse("agent:scout"), START // HOUR_MS)
    assert acme_key != world.acmi.keys.tier_tokens(EntityId.parse("agent:scout"), START // HOUR_MS)
    ttl = world.store.execute(("TTL", acme_key))
    assert isinstance(ttl, int) and 0 < ttl <= COUNTER_TTL_S


def test_an_invited_tier_s_limit_is_its_document_s(world: World) -> None:
    """invite-agent's tiers carry the reference's limits; the permissions slot's wins."""
    world.acme.agents.invite("scout", "Utility")
    key = world.key("agent:scout", tenant="acme")
    assert world.bootstrap(key).status_code == 200  # 200,000 an hour: far off
    world.limit("agent:scout", 0, "acme")  # a tier change, in force after the cache time
    world.gate_clock.now += TIER_CACHE_S + 1
    refused(world.bootstrap(key))


def test_round_trips_of_a_bootstrap(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted at the store, one run: an unbound key's unchanged (no allowance read), a
    bound key's one more warm (the charge: INCRBY and EXPIRE in one pipeline; the counter
    is read by the bootstrap script), two more cold (the tier read)."""
    world.limit("agent:scout", 10_000_000)
    sent: list[str] = []
    store = world.store
    for name in ("execute", "pipeline", "eval"):
        real = getattr(store, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            sent.append(_name)
            return _real(*args)

        monkeypatch.setattr(store, name, counted)
    unbound, bound = world.key(None), world.key("agent:scout")

    def trips(key: str) -> int:
        sent.clear()
        answer = world.bootstrap(key)
        assert answer.status_code == 200, answer.text
        return len(sent)

    trips(unbound)  # the script's first run may load it: not what is counted
    base = trips(unbound)
    cold, warm = trips(bound), trips(bound)
    assert (trips(unbound), cold, warm) == (base, base + 2, base + 1)
    print(f"round trips per bootstrap: unbound {base}, bound cold {cold}, bound warm {warm}")


def test_acmi_api_bootstrap_with_a_spent_key_names_the_rule(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    world.limit("agent:scout", 1)
    key = world.key("agent:scout")
    monkeypatch.setenv("ACMI_API_KEY", key)
    served = ApiContext(world.acmi, offload=True, tiers=world.ctx.tiers)  # as `acmi serve`
    with serving(create_app(served)) as url:
        assert main(["--api", url, "bootstrap", "scout"]) == 0
        capsys.readouterr()
        assert main(["--api", url, "bootstrap", "scout"]) != 0
    err = capsys.readouterr().err
    assert "max_tokens_per_hour" in err and "tier_tokens" in err, err


def test_the_allowance_on_every_backend(acmi: Acmi) -> None:
    """The core under an allowance (what the surfaces set) on the embedded store, Redis
    and the Upstash REST double, two tenants of their own: served and charged, then
    refused before the spawn is written; outside the allowance, nothing counted."""
    run = uuid.uuid4().hex[:8]
    clock = FakeClock(START)
    base = create_acmi(acmi.store, Settings(), clock=clock)
    one, two = base.for_tenant(f"t1-{run}"), base.for_tenant(f"t2-{run}")
    allowance = Allowance("agent:scout", 1, "Specialist")
    with allowed(allowance):
        bundle = one.bootstrap("scout", spawn={"session_id": "s-1", "model_id": "m"})
        with pytest.raises(RateLimited) as caught:
            one.bootstrap("scout", spawn={"session_id": "s-2", "model_id": "m"})
        assert two.bootstrap("scout").tokens > 0  # the other tenant's own counter
    assert (caught.value.rule, caught.value.field) == ("tier_tokens", "max_tokens_per_hour")
    assert caught.value.retry_after == 3000
    assert [s["session_id"] for s in one.agents.spawns("agent:scout")] == ["s-1"]
    counter = one.keys.tier_tokens(EntityId.parse("agent:scout"), START // HOUR_MS)
    assert int(one.store.execute(("GET", counter))) == bundle.tokens  # type: ignore[arg-type]
    one.bootstrap("scout")  # no allowance: not counted
    assert int(one.store.execute(("GET", counter))) == bundle.tokens  # type: ignore[arg-type]


def test_the_counter_shares_the_bootstrap_s_slot_on_a_cluster() -> None:
    """Cluster layout, B = 3: the counter is in bucket 0, beside the coordination keys
    the bootstrap script reads in the same run (agents are pinned there too)."""
    keys = Keys("acme", "default", Layout.CLUSTER, 3)
    counter = keys.tier_tokens(EntityId.parse("agent:scout"), 1)
    assert key_tag(counter) == key_tag(keys.leases()) == "{acme}"
    assert key_tag(keys.profile(EntityId.parse("agent:scout"))) == "{acme}"

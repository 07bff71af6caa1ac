"""acmi.agents.invite (the reference's invite-agent) on every backend: what one invite
writes, idempotency, tier changes, refusals that store nothing, concurrent invites on a
real store, and its round trips."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import EntityId, tenant_id_fill
from acmi_core.coordination.agents import TIERS
from acmi_core.entities.context import system_clock
from acmi_core.store.base import Arg, Command, Reply, Script, Store
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import START, FakeClock, fresh_tenant, requests_per_step, run_together

COORD = "thread:agent-coordination"


class CountingStore:
    """The store underneath, counting script runs: every ACMI write is one."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.evals = 0

    def execute(self, command: Command) -> Reply:
        return self.store.execute(command)

    def pipeline(self, commands: Sequence[Command]) -> list[Any]:
        return self.store.pipeline(commands)

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        self.evals += 1
        return self.store.eval(script, keys, args)

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def team(acmi: Acmi, clock: FakeClock) -> Acmi:
    """A tenant of its own (the coordination thread is per tenant), writes counted."""
    return Acmi(
        CountingStore(acmi.store),  # type: ignore[arg-type]
        acmi.settings,
        tenant=f"t-{uuid.uuid4().hex[:12]}",
        clock=clock,
    )


def _evals(acmi: Acmi) -> int:
    store = acmi.store
    assert isinstance(store, CountingStore)
    return store.evals


def _coordination(acmi: Acmi) -> list[dict[str, Any]]:
    return acmi.timeline.read(COORD).to_dicts()


def test_first_invite_onboards_in_one_write_and_keeps_unrelated_fields(team: Acmi) -> None:
    team.profile.set("agent:scout", {"bio": "reads papers", "model_id": "old"})
    team.signals.update("agent:scout", {"status": "BLOCKED", "queue": [1, 2]})
    before = _evals(team)
    result = team.agents.invite(
        "scout", "operator", model="claude-sonnet-4", role="research", invited_by="user:mikey"
    )
    assert _evals(team) == before + 1  # one WritePlan: profile, signals, event, indexes
    permissions = {
        "role_tier": "Operator",
        "allowed_namespaces": ["agent", "thread", "tracker", "issue", "workspace"],
        "write_access": True,
        "max_tokens_per_hour": 800_000,
    }
    assert result["agent"] == "agent:scout"
    assert result["tier"] == "Operator"  # stored as the reference spells it
    assert result["previous_tier"] is None
    assert result["created"] is True
    assert result["action"] == "onboarded"
    assert result["permissions"] == permissions
    assert result["changed"] == sorted(
        [
            "created_at_ms",
            "id",
            "invited_by",
            "model_id",
            "onboarded_at_ms",
            "permissions",
            "rbac_tier",
            "role",
        ]
    )
    profile = team.profile.get("agent:scout")
    assert profile == result["profile"]
    assert profile == {
        "bio": "reads papers",  # unrelated: kept
        "model_id": "claude-sonnet-4",
        "role": "research",
        "rbac_tier": "Operator",
        "permissions": permissions,
        "onboarded_at_ms": START,
        "invited_by": "user:mikey",
        "id": "scout",
        "created_at_ms": START,
        "actor_type": "agent",
        "tenant_id": tenant_id_fill(team.tenant),
    }
    # a live agent's own status wins; the onboarding focus fills what is absent
    assert team.signals.all("agent:scout") == {
        "status": "BLOCKED",
        "queue": [1, 2],
        "last_heartbeat_ts": START,
        "current_focus": "initialized",
    }
    [event] = _coordination(team)
    assert event == result["event"]
    assert event["kind"] == "agent-onboarded"
    assert event["source"] == "user:mikey"
    assert event["speaker_type"] == "human"
    assert event["correlationId"] == "agent-invite-scout-v1"
    assert event["payload"] == {
        "agent": "agent:scout",
        "tier": "Operator",
        "previous_tier": None,
        "permissions": permissions,
        "model_id": "claude-sonnet-4",
        "role": "research",
    }
    assert team.list("agent") == ["agent:scout"]
    assert json.loads(json.dumps(result, allow_nan=False)) == result  # the CLI prints it


def test_a_new_agent_gets_the_onboarding_signals(team: Acmi) -> None:
    team.agents.invite("fresh")  # Utility by default, as in the reference
    # the reference's invite-agent.mjs signals: active, heartbeat now, initialized
    assert team.signals.all("agent:fresh") == {
        "status": "active",
        "last_heartbeat_ts": team.clock(),
        "current_focus": "initialized",
    }
    # and its :permissions key, the document it writes (JSON.stringify of its object)
    key = team.keys.slot(EntityId.parse("agent:fresh"), "permissions")
    assert team.store.execute(("GET", key)) == (
        b'{"role_tier":"Utility","allowed_namespaces":["agent"],"write_access":false,'
        b'"max_tokens_per_hour":200000}'
    )
    assert team.profile.get("agent:fresh")["permissions"] == TIERS["Utility"].permissions(  # type: ignore[index]
        "Utility"
    )


def test_the_same_invite_again_writes_nothing(team: Acmi, clock: FakeClock) -> None:
    first = team.agents.invite("scout", "Specialist", model="m1", lane="research")
    clock.now += 60_000
    snapshot = (team.get("agent:scout").to_dict(), _coordination(team))
    before = _evals(team)
    for spelling in ("Specialist", "specialist", "SPECIALIST"):
        again = team.agents.invite("agent:scout", spelling, model="m1", lane="research")
        assert again["created"] is False
        assert again["action"] == "unchanged"
        assert again["changed"] == []
        assert again["event"] is None
        assert again["profile"] == first["profile"]
    # fewer details than the first time is the same invite too
    assert team.agents.invite("scout", "Specialist")["action"] == "unchanged"
    assert _evals(team) == before
    assert (team.get("agent:scout").to_dict(), _coordination(team)) == snapshot


def test_new_details_with_the_same_tier_are_merged_without_an_event(team: Acmi) -> None:
    team.agents.invite("scout", "Utility", model="m1")
    updated = team.agents.invite("scout", "Utility", model="m2", name="Scout")
    assert updated["created"] is False
    assert updated["action"] == "updated"
    assert updated["changed"] == ["name", "model_id"]
    assert updated["event"] is None
    assert updated["profile"]["model_id"] == "m2"
    assert team.profile.get("agent:scout")["name"] == "Scout"  # type: ignore[index]
    assert [e["kind"] for e in _coordination(team)] == ["agent-onboarded"]


def test_another_tier_is_a_change_announced_once(team: Acmi, clock: FakeClock) -> None:
    team.agents.invite("scout", "Utility")
    clock.now += 1000
    changed = team.agents.invite("scout", "Admin")
    assert changed["created"] is False
    assert changed["action"] == "tier-changed"
    assert changed["previous_tier"] == "Utility"
    assert changed["changed"] == ["permissions", "rbac_tier"]
    profile = team.profile.get("agent:scout")
    assert profile is not None
    assert profile["rbac_tier"] == "Admin"
    assert profile["permissions"]["allowed_namespaces"] == ["*"]
    assert profile["onboarded_at_ms"] == START  # the first onboarding's, kept
    assert team.agents.invite("scout", "admin")["action"] == "unchanged"
    clock.now += 1000
    back = team.agents.invite("scout", "Utility")  # and back again: a change, not a replay
    assert back["action"] == "tier-changed"
    events = _coordination(team)
    assert [(e["kind"], e["payload"]["previous_tier"], e["payload"]["tier"]) for e in events] == [
        ("agent-onboarded", None, "Utility"),
        ("agent-tier-changed", "Utility", "Admin"),
        ("agent-tier-changed", "Admin", "Utility"),
    ]
    assert [e["correlationId"] for e in events] == [
        "agent-invite-scout-v1",
        "agent-invite-scout-v2",
        "agent-invite-scout-v3",
    ]
    assert events[1]["summary"] == "Agent 'scout' moved from Utility to Admin permissions."


def test_a_reference_onboarded_agent_is_recognised(team: Acmi, raw: Any) -> None:
    """The reference CLI's profile (its tier in lower case, no permissions in the
    profile: they are in its :permissions key) is the same tier: its spelling is the only
    change, no permissions are merged into the profile, no event."""
    key = team.keys.profile(EntityId.parse("agent:old"))
    reference = {
        "id": "old",
        "role": "ops",
        "model_id": "gemini-2.5",
        "lane": "ops",
        "rbac_tier": "operator",
        "created_at_ms": 1_777_399_140_000,
    }
    raw.set(key, json.dumps(reference))
    result = team.agents.invite("old", "Operator")
    assert result["previous_tier"] == "Operator"
    assert result["action"] == "updated"
    assert result["changed"] == ["rbac_tier"]
    assert result["profile"]["created_at_ms"] == 1_777_399_140_000
    assert "permissions" not in result["profile"]
    assert result["permissions"] == TIERS["Operator"].permissions("Operator")
    assert _coordination(team) == []


def test_an_agent_deleted_and_invited_again_is_onboarded_again(team: Acmi) -> None:
    team.agents.invite("scout", "Operator")
    team.delete("agent:scout")
    again = team.agents.invite("scout", "Operator")
    assert again["created"] is True
    assert again["event"]["correlationId"] == "agent-invite-scout-v2"
    assert [e["kind"] for e in _coordination(team)] == ["agent-onboarded", "agent-onboarded"]


@pytest.mark.parametrize(
    ("call", "field", "rule"),
    [
        (lambda a: a.agents.invite("scout", "superuser"), "tier", "enum"),
        (lambda a: a.agents.invite("scout", ""), "tier", "enum"),
        (lambda a: a.agents.invite("scout", None), "tier", "enum"),
        (lambda a: a.agents.invite("scout", 3), "tier", "enum"),
        (lambda a: a.agents.invite("user:mikey", "Admin"), "agent", "category"),
        (lambda a: a.agents.invite("bad id!", "Admin"), "agent", "id_format"),
        (lambda a: a.agents.invite("scout", "Admin", model=""), "model", "string"),
        (lambda a: a.agents.invite("scout", "Admin", role="x" * 257), "role", "string"),
        (lambda a: a.agents.invite("scout", "Admin", lane=7), "lane", "string"),
        (lambda a: a.agents.invite("scout", "Admin", invited_by=""), "invited_by", "string"),
    ],
)
def test_bad_input_is_refused_naming_field_and_rule_and_stores_nothing(
    team: Acmi, call: Callable[[Acmi], object], field: str, rule: str
) -> None:
    before = _evals(team)
    with pytest.raises(AcmiValidationError) as refused:
        call(team)
    assert (refused.value.field, refused.value.rule) == (field, rule)
    assert _evals(team) == before
    assert team.list("agent") == []
    assert _coordination(team) == []


def test_concurrent_invites_onboard_once(acmi: Acmi) -> None:
    team = fresh_tenant(acmi, system_clock)
    results: list[dict[str, Any]] = [{} for _ in range(8)]

    def invite(i: int) -> None:
        results[i] = team.agents.invite("racer", "Specialist", model="m1")

    run_together(8, invite)
    assert sorted(r["created"] for r in results) == [False] * 7 + [True]
    assert {r["action"] for r in results} == {"onboarded", "unchanged"}
    [event] = _coordination(team)
    assert event["kind"] == "agent-onboarded"
    assert team.profile.get("agent:racer")["rbac_tier"] == "Specialist"  # type: ignore[index]


def test_concurrent_invites_with_different_tiers_keep_one_history(acmi: Acmi) -> None:
    team = fresh_tenant(acmi, system_clock)
    tiers = ["Admin", "Utility"] * 4

    run_together(len(tiers), lambda i: team.agents.invite("racer", tiers[i]))
    events = _coordination(team)
    assert [e["kind"] for e in events].count("agent-onboarded") == 1
    assert events[0]["kind"] == "agent-onboarded"
    # every change starts from the tier the one before it set: no transition was lost
    # or applied twice, and the last one is what the profile holds
    versions = sorted(events, key=lambda e: int(e["correlationId"].rsplit("v", 1)[1]))
    for before, after in itertools.pairwise(versions):
        assert after["payload"]["previous_tier"] == before["payload"]["tier"]
    assert team.profile.get("agent:racer")["rbac_tier"] == versions[-1]["payload"]["tier"]  # type: ignore[index]


def test_round_trips_of_an_invite(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    acmi = create_acmi(upstash_store, Settings())
    acmi = fresh_tenant(acmi, FakeClock())
    acmi.agents.heartbeat("warm")  # loads the write script
    steps: dict[str, Callable[[], object]] = {
        "onboard": lambda: acmi.agents.invite("counted", "Operator"),
        "same again": lambda: acmi.agents.invite("counted", "Operator"),
        "new details": lambda: acmi.agents.invite("counted", "Operator", model="m2"),
        "tier change": lambda: acmi.agents.invite("counted", "Admin"),
    }
    assert requests_per_step(upstash_double, steps) == {
        "onboard": 2,  # read (one pipeline) + one WritePlan
        "same again": 1,
        "new details": 2,
        "tier change": 2,
    }

"""An upgrade over data written before the indexes that later writes keep: the mentions
index (keys.mentions), the indexes of tenants with work (keys.tenants_with) and the
memory index (keys.memory_index). `acmi doctor` reports each missing entry, `acmi
migrate` adds it (idempotently, never over a concurrent newer write), and then the
bootstrap shows the old mention and the scheduled job serves the old tenant. Two
tenants, on a real redis-server and the Upstash double."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import pytest
import redis

from acmi_core import Acmi
from acmi_core.base.keys import (
    ACTIVITY,
    CHANGED,
    COORDINATION_THREAD,
    MENTIONS_KEPT,
    MENTIONS_PER_EVENT,
    TENANT_INDEXES,
)
from acmi_core.jobs import rollup
from acmi_core.jobs.runner import JobRun
from acmi_core.jobs.tenants import run_tenants
from acmi_core.ops.doctor import Doctor
from acmi_core.ops.findings import PROBLEMS, Finding, Kind
from acmi_core.ops.migrate import REPAIR_BYTES, Action, Migrate
from acmi_core.store.base import Arg, Reply, Script, Store
from acmi_core.store.counting import CountingStore
from tests.integration.test_doctor import env  # noqa: F401  (the fixture)
from tests.kit import FakeClock

MINUTE = 60_000
TENANTS = ("madez", "acme")  # madez: the default tenant of test_doctor's SETTINGS
NEW = (Kind.MENTION_MISSING, Kind.TENANT_UNINDEXED, Kind.MEMORY_UNINDEXED)


def _event(summary: str, kind: str = "note") -> dict[str, Any]:
    return {"source": "agent:lead", "kind": kind, "correlationId": summary, "summary": summary}


def _clients(acmi: Acmi, clock: FakeClock) -> dict[str, Acmi]:
    return {t: Acmi(acmi.store, acmi.settings, tenant=t, clock=clock) for t in TENANTS}


def _pre_upgrade(clients: dict[str, Acmi], raw: redis.Redis, clock: FakeClock) -> None:
    """Each tenant's data, then the index keys deleted: what an older ACMI left."""
    for tenant, client in clients.items():
        clock.now += 1
        client.timeline.append(COORDINATION_THREAD, _event(f"{tenant}: agent:w take the deploy"))
        client.timeline.append("deal:old", _event(f"{tenant} deal"))
        client.agents.heartbeat("agent:w")
        client.memory.remember("agent:w", f"{tenant} ships on fridays", layer="hot")
        keys = client.keys
        raw.delete(keys.mentions("w"), keys.memory_index())
    raw.delete(*(clients["madez"].keys.tenants_with(kind) for kind in TENANT_INDEXES))


class _Old(NamedTuple):
    acmi: Acmi
    raw: redis.Redis
    clock: FakeClock
    clients: dict[str, Acmi]


@pytest.fixture
def old(env: tuple[Acmi, redis.Redis]) -> _Old:  # noqa: F811
    """Two tenants' data as an older ACMI left it (``_pre_upgrade``)."""
    acmi, raw = env
    clock = FakeClock()
    clients = _clients(acmi, clock)
    _pre_upgrade(clients, raw, clock)
    return _Old(acmi, raw, clock, clients)


def _problems(acmi: Acmi) -> list[Finding]:
    return [f for f in Doctor(acmi).findings() if f.kind in PROBLEMS]


def _coordination(client: Acmi) -> list[str]:
    sections = client.bootstrap("agent:w").to_dict()["sections"]
    return [e["summary"] for e in sections["coordination"]]


def _run_rollup(client: Acmi) -> dict[str, Any]:
    run = JobRun("rollup-cron", f"exec-{time.monotonic_ns()}", client.clock(), {})
    return run_tenants(client, run, rollup.run, clock=time.perf_counter)


def test_doctor_reports_and_migrate_rebuilds_the_new_indexes_once(old: _Old) -> None:
    acmi, raw, clock, clients = old
    # the default tenant's job ran since: its floor is past acme's old change
    clock.now += 10 * MINUTE
    clients["madez"].timeline.append("deal:new", _event("madez new"))
    clock.now += 10 * MINUTE
    _run_rollup(clients["madez"])
    clients["madez"].timeline.append("deal:newer", _event("madez newer"))
    clock.now += 10 * MINUTE
    before = _run_rollup(clients["madez"])
    assert "acme" not in before.get("tenants", {})  # the old tenant is not served
    assert _coordination(clients["acme"]) == []  # nor is the old mention shown

    found = _problems(acmi)
    by_kind = {(f.kind, f.tenant) for f in found}
    assert by_kind == {
        (Kind.MENTION_MISSING, "madez"),
        (Kind.MENTION_MISSING, "acme"),
        (Kind.MEMORY_UNINDEXED, "madez"),
        (Kind.MEMORY_UNINDEXED, "acme"),
        (Kind.TENANT_UNINDEXED, "acme"),  # changed, activity
        (Kind.TENANT_UNINDEXED, "madez"),  # activity (its changes were indexed since)
    }
    unindexed = sorted((f.tenant, f.key) for f in found if f.kind is Kind.TENANT_UNINDEXED)
    tenants_changed, tenants_active = (acmi.keys.tenants_with(k) for k in (CHANGED, ACTIVITY))
    assert unindexed == [
        ("acme", tenants_active),
        ("acme", tenants_changed),
        ("madez", tenants_active),
    ]
    mention = next(f for f in found if f.kind is Kind.MENTION_MISSING and f.tenant == "acme")
    assert mention.entity == "agent:w" and mention.counts == {"missing": 1}

    steps = list(Migrate(acmi).run())
    assert sorted(s.action for s in steps) == sorted(
        [Action.MENTION_ADD] * 2 + [Action.MEMORY_INDEX_ADD] * 2 + [Action.TENANT_INDEX_ADD] * 3
    )
    assert _problems(acmi) == []
    assert list(Migrate(acmi).run()) == []  # a second run: nothing to do

    assert _coordination(clients["acme"]) == ["acme: agent:w take the deploy"]
    assert _coordination(clients["madez"]) == ["madez: agent:w take the deploy"]
    for client in clients.values():
        index = client.keys.memory_index()
        assert raw.zscore(index, "agent:w") is not None
    clock.now += 10 * MINUTE
    after = _run_rollup(clients["madez"])
    assert after["tenants"]["acme"]["written"] >= 1, after  # deal:old rolled up at last


def test_migrate_never_overwrites_a_write_landing_meanwhile(old: _Old) -> None:
    acmi, raw, clock, clients = old
    acme = clients["acme"]
    late = FakeClock()
    late.now = clock.now + 1000 * MINUTE  # a writer whose time is after migrate's

    def write_meanwhile(_: int) -> None:
        # between doctor's read of a SCAN step and migrate's scripts (the first step)
        if late.now > clock.now + 1000 * MINUTE:
            return
        writer = Acmi(acmi.store, acmi.settings, tenant="acme", clock=late)
        writer.timeline.append("deal:late", _event("late"))
        for n in range(12):  # more newest mentions than the index keeps
            late.now += 1
            writer.timeline.append(COORDINATION_THREAD, _event(f"late {n}: agent:w"))

    steps = list(Migrate(clients["madez"], progress=write_meanwhile).run())
    assert Action.TENANT_INDEX_ADD in {s.action for s in steps}
    assert (
        raw.zscore(acmi.keys.tenants_with(CHANGED), "acme") == late.now
    )  # not migrate's earlier time
    # the newest ten are the late ones: the old event was not put back over them
    assert _coordination(acme)[:10] == [f"late {n}: agent:w" for n in range(11, 1, -1)]
    assert raw.zcard(acme.keys.mentions("w")) == 10


def test_dry_run_writes_nothing(old: _Old) -> None:
    acmi = old.acmi
    steps = list(Migrate(acmi, dry_run=True).run())
    assert {s.action for s in steps} == {
        Action.MENTION_ADD,
        Action.MEMORY_INDEX_ADD,
        Action.TENANT_INDEX_ADD,
    }
    assert {f.kind for f in _problems(acmi)} == set(NEW)


class _ScriptSizes(CountingStore):
    """The real store, recording the bytes of each script run's arguments."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.sizes: list[int] = []

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        self.sizes.append(sum(len(str(a)) for a in args))
        return super().eval(script, keys, args)


def test_the_rebuild_runs_in_bounded_scripts(env: tuple[Acmi, redis.Redis]) -> None:  # noqa: F811
    acmi, raw = env
    clock = FakeClock()
    client = Acmi(acmi.store, acmi.settings, tenant="acme", clock=clock)
    agents = [f"a{n}" for n in range(MENTIONS_PER_EVENT)]
    pad = "x" * 40_000
    for n in range(20):  # 20 events of 40 KB, each mentioning the same 16 agents
        clock.now += 1
        names = " ".join(f"agent:{a}" for a in agents)
        client.timeline.append(COORDINATION_THREAD, {**_event(f"{n} {names}"), "payload": pad})
    for n in range(300):  # 300 more agents in small events: ops, not bytes, bound these
        client.timeline.append(COORDINATION_THREAD, _event(f"small {n} agent:s{n}"))
    raw.delete(*raw.keys(client.keys.mentions("*")))

    counted = _ScriptSizes(acmi.store)
    runner = Acmi(counted, acmi.settings, clock=clock)
    steps = list(Migrate(runner).run())
    # agent:lead (each event's source) takes one of an event's 16: a0..a14, s0..s299, lead
    assert sum(s.action is Action.MENTION_ADD for s in steps) == 316
    assert len(counted.sizes) >= 4  # 160 40-KB events and 300 small ones: split
    assert max(counted.sizes) <= REPAIR_BYTES + 60_000  # one event past the cap at most
    assert [f for f in Doctor(acmi).findings() if f.kind is Kind.MENTION_MISSING] == []
    assert list(Migrate(acmi).run()) == []
    for a in ["lead", *agents[:-1]]:
        assert raw.zcard(client.keys.mentions(a)) == MENTIONS_KEPT

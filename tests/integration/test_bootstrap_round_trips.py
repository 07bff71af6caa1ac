"""A bootstrap in one round trip in the steady state (acmi_core/bootstrap/script.py): the
open work items this process saw last time are read in the script, and a new spawn's
session-start line is written there when the agent's zone is the one last seen; every
guarantee kept when the guess is wrong (an item deleted, re-typed or new in between, a
zone changed in between, a heartbeat that no longer checks), per tenant, on every
backend (embedded, Redis, the Upstash double) and on a Redis Cluster with B = 1 and 3."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from acmi_core import Acmi
from acmi_core.base.keys import CHANGED, MEMORY_HEARTBEAT, TENANT_REGISTRY
from acmi_core.base.model import EntityId
from acmi_core.base.settings import Settings
from acmi_core.bootstrap import script
from acmi_core.memory.writes import session_start_event
from acmi_core.store import open_store
from acmi_core.store.counting import CountingStore
from acmi_core.testing.redis_cluster import RedisCluster
from tests.kit import FakeClock

NOW = 1_764_763_200_000  # 2025-12-03T12:00:00Z


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def counted(acmi: Acmi) -> Iterator[tuple[Acmi, CountingStore]]:
    """A tenant of its own on each backend, its requests counted, the clock at NOW."""
    store = CountingStore(acmi.store)
    view = Acmi(store, acmi.settings, tenant=_name("t"), clock=FakeClock(NOW))
    yield view, store


def _requests(store: CountingStore, call: Any) -> tuple[int, Any]:
    store.reset()
    out = call()
    return store.requests, out


def _set_heartbeat(acmi: Acmi, agent: str, fields: dict[str, Any]) -> None:
    key = acmi.keys.slot(EntityId.parse(agent), MEMORY_HEARTBEAT)
    acmi.store.execute(("SET", key, json.dumps({f"heartbeat.{k}": v for k, v in fields.items()})))


def _starts(acmi: Acmi, agent: str, session_id: str) -> list[bytes]:
    """The stored members of ``session_id``'s start lines on the agent's timeline."""
    key = acmi.keys.timeline(EntityId.parse(agent))
    members = acmi.store.execute(("ZRANGE", key, 0, -1))
    assert isinstance(members, list)
    return [m for m in members if isinstance(m, bytes) and f"session {session_id} ".encode() in m]


def _expected_line(agent: str, bundle: Any, zone: str) -> bytes:
    spawn = bundle.spawn
    event = session_start_event(
        EntityId.parse(agent), spawn["session_id"], spawn["model_id"], spawn["ts"], zone
    )
    return event.to_json().encode()


def test_open_work_is_read_in_the_one_run_once_this_process_saw_it(
    counted: tuple[Acmi, CountingStore],
) -> None:
    acmi, store = counted
    agent = f"agent:{_name('a')}"
    for n in range(3):
        acmi.work.create(f"w{n}", {"title": f"task {n}"}, owner=agent)
    acmi.bootstrap(f"agent:{_name('warm')}")  # the script loaded (EVALSHA, NOSCRIPT, EVAL)
    cold, first = _requests(store, lambda: acmi.bootstrap(agent))
    warm, second = _requests(store, lambda: acmi.bootstrap(agent))
    assert (cold, warm) == (2, 1)
    assert first.to_dict()["sections"]["work"] == second.to_dict()["sections"]["work"]
    assert sorted(w["profile"]["title"] for w in second.to_dict()["sections"]["work"]) == [
        "task 0",
        "task 1",
        "task 2",
    ]

    # a new item in between: only it costs the second pipeline; an item deleted in
    # between is not open any more (its index entry went with it)
    acmi.work.create("w3", {"title": "task 3"}, owner=agent)
    acmi.work.delete("w0")
    count, bundle = _requests(store, lambda: acmi.bootstrap(agent))
    work = {w["id"]: w["profile"]["title"] for w in bundle.to_dict()["sections"]["work"]}
    assert count == 2 and work == {"w1": "task 1", "w2": "task 2", "w3": "task 3"}
    count, _ = _requests(store, lambda: acmi.bootstrap(agent))
    assert count == 1

    # an item whose keys went behind the index's back reads as absent; one re-typed is a
    # problem naming its key, never an error
    w1, w2 = EntityId.parse("work:w1"), EntityId.parse("work:w2")
    acmi.store.execute(("DEL", acmi.keys.profile(w1), acmi.keys.signals(w1)))
    acmi.store.execute(("DEL", acmi.keys.profile(w2)))
    acmi.store.execute(("RPUSH", acmi.keys.profile(w2), "not a string"))
    count, bundle = _requests(store, lambda: acmi.bootstrap(agent))
    work = {w["id"]: w for w in bundle.to_dict()["sections"]["work"]}
    assert count == 1
    assert work["w1"]["profile"] is None and work["w2"]["profile"] is None
    assert work["w3"]["profile"]["title"] == "task 3"
    assert any(acmi.keys.profile(w2) in p and "WRONGTYPE" in p for p in bundle.problems)


def test_each_tenant_guesses_its_own_work(counted: tuple[Acmi, CountingStore]) -> None:
    acmi, store = counted
    other = Acmi(store, acmi.settings, tenant=_name("t"), clock=FakeClock(NOW))
    agent = f"agent:{_name('a')}"
    acmi.work.create("mine", {"title": "tenant one's"}, owner=agent)
    other.work.create("theirs", {"title": "tenant two's"}, owner=agent)
    acmi.bootstrap(agent)
    acmi.bootstrap(agent)
    # tenant one's guess is no guess in tenant two: its first bootstrap reads its own
    count, bundle = _requests(store, lambda: other.bootstrap(agent))
    assert count == 2
    assert [w["id"] for w in bundle.to_dict()["sections"]["work"]] == ["theirs"]
    count, bundle = _requests(store, lambda: other.bootstrap(agent))
    assert count == 1
    assert [w["profile"]["title"] for w in bundle.to_dict()["sections"]["work"]] == ["tenant two's"]
    count, bundle = _requests(store, lambda: acmi.bootstrap(agent))
    assert count == 1
    assert [w["profile"]["title"] for w in bundle.to_dict()["sections"]["work"]] == ["tenant one's"]


def test_a_new_spawn_logs_its_start_in_the_one_run_exactly_once(
    counted: tuple[Acmi, CountingStore],
) -> None:
    acmi, store = counted
    agent = f"agent:{_name('a')}"
    spawn = {"session_id": "s-1", "model_id": "opus"}
    count, bundle = _requests(store, lambda: acmi.bootstrap(agent, spawn=spawn))
    assert count in (1, 2)  # 2: the script's first run on this server loads it
    assert _starts(acmi, agent, "s-1") == [_expected_line(agent, bundle, "UTC")]
    # a repeat of the session (a resume, a compact) and another scope: logged once
    for scope in ("main", "subagent", "group"):
        count, again = _requests(store, lambda s=scope: acmi.bootstrap(agent, scope=s, spawn=spawn))
        assert count == 1 and again.spawn.get("duplicate") is True
    assert len(_starts(acmi, agent, "s-1")) == 1
    # the line is today's note, as the writer's is
    count, bundle = _requests(
        store, lambda: acmi.bootstrap(agent, spawn={"session_id": "s-2", "model_id": "opus"})
    )
    assert count == 1
    today = acmi.bootstrap(agent).to_dict()["sections"]["today"]
    assert "Started session s-1 (opus)" in json.dumps(today)
    assert "Started session s-2 (opus)" in json.dumps(today)
    # the indexes the writer keeps: the memory index, the change index
    own = acmi.keys.of(EntityId.parse(agent))
    assert acmi.store.execute(("ZSCORE", own.memory_index(), agent)) is not None
    assert acmi.store.execute(("ZSCORE", own.changed(), agent)) is not None


def test_a_zone_changed_in_between_is_logged_in_the_new_zone(
    counted: tuple[Acmi, CountingStore],
) -> None:
    acmi, store = counted
    agent = f"agent:{_name('a')}"
    acmi.bootstrap(agent)  # this process saw the agent in UTC
    _set_heartbeat(acmi, agent, {"timezone": "Asia/Tokyo"})
    count, bundle = _requests(
        store, lambda: acmi.bootstrap(agent, spawn={"session_id": "s-1", "model_id": "m"})
    )
    # the script read another zone than the one assumed: the client logs it, as before
    assert count == 2 and bundle.memory["timezone"] == "Asia/Tokyo"
    assert _starts(acmi, agent, "s-1") == [_expected_line(agent, bundle, "Asia/Tokyo")]
    count, bundle = _requests(
        store, lambda: acmi.bootstrap(agent, spawn={"session_id": "s-2", "model_id": "m"})
    )
    assert count == 1  # the zone seen last time
    assert _starts(acmi, agent, "s-2") == [_expected_line(agent, bundle, "Asia/Tokyo")]
    # back to no zone (UTC)
    _set_heartbeat(acmi, agent, {})
    count, bundle = _requests(
        store, lambda: acmi.bootstrap(agent, spawn={"session_id": "s-3", "model_id": "m"})
    )
    assert count == 2 and bundle.memory["timezone"] == "UTC"
    assert _starts(acmi, agent, "s-3") == [_expected_line(agent, bundle, "UTC")]


def test_a_heartbeat_that_no_longer_checks_has_the_line_rewritten_in_the_bundles_zone(
    counted: tuple[Acmi, CountingStore],
) -> None:
    """The script reads the zone it assumed, but the bundle (which checks the whole
    heartbeat-state) falls back to UTC: the line the script wrote is replaced by the UTC
    one in one write, so the note holds exactly the line the writer would have written."""
    acmi, store = counted
    agent = f"agent:{_name('a')}"
    _set_heartbeat(acmi, agent, {"timezone": "Asia/Tokyo"})
    acmi.bootstrap(agent)
    _set_heartbeat(acmi, agent, {"timezone": "Asia/Tokyo", "last_memory_review": "never"})
    count, bundle = _requests(
        store, lambda: acmi.bootstrap(agent, spawn={"session_id": "s-1", "model_id": "m"})
    )
    assert count == 2 and bundle.memory["timezone"] == "UTC"
    assert any("last_memory_review" in p for p in bundle.problems)
    assert _starts(acmi, agent, "s-1") == [_expected_line(agent, bundle, "UTC")]


# --- a Redis Cluster, B = 1 and B = 3 ----------------------------------------------------------


@pytest.fixture
def cluster_tenants() -> tuple[str, str]:
    token = uuid.uuid4().hex[:8]
    return f"rt1-{token}", f"rt3-{token}"


@pytest.fixture
def cluster_store(
    redis_cluster3: RedisCluster, cluster_tenants: tuple[str, str]
) -> Iterator[tuple[Any, Settings]]:
    settings = Settings(
        key_layout="cluster",
        redis_cluster=True,
        redis_url=redis_cluster3.url,
        cluster_buckets=f"1,{cluster_tenants[1]}=3",
    )
    opened = open_store(settings)
    yield opened, settings
    opened.close()


@pytest.mark.parametrize("which", [0, 1], ids=["B=1", "B=3"])
def test_on_a_cluster_a_bootstrap_with_work_and_a_spawn_is_one_round_trip(
    cluster_store: tuple[Any, Settings], cluster_tenants: tuple[str, str], which: int
) -> None:
    inner, settings = cluster_store
    store = CountingStore(inner)
    acmi = Acmi(store, settings, tenant=cluster_tenants[which], clock=FakeClock(NOW))
    assert acmi.keys.buckets == (1, 3)[which]
    agent = f"agent:{_name('a')}"
    for n in range(5):
        acmi.work.create(f"w{n}", {"title": f"task {n}"}, owner=agent)
    acmi.bootstrap(agent)
    count, bundle = _requests(
        store, lambda: acmi.bootstrap(agent, spawn={"session_id": "s-1", "model_id": "m"})
    )
    # + the tenant's registration in the registry of tenants with marks, once a process
    registered = inner.execute(("SISMEMBER", TENANT_REGISTRY, acmi.tenant))
    assert registered == 1
    assert count in (1, 2)
    assert sorted(w["profile"]["title"] for w in bundle.to_dict()["sections"]["work"]) == [
        f"task {n}" for n in range(5)
    ]
    assert _starts(acmi, agent, "s-1") == [_expected_line(agent, bundle, "UTC")]
    own = acmi.keys.of(EntityId.parse(agent))
    assert inner.execute(("ZSCORE", own.changed(), agent)) is not None
    assert inner.execute(("ZSCORE", own.tenants_with(CHANGED), acmi.tenant)) is not None
    count, bundle = _requests(
        store, lambda: acmi.bootstrap(agent, spawn={"session_id": "s-2", "model_id": "m"})
    )
    assert count == 1
    assert _starts(acmi, agent, "s-2") == [_expected_line(agent, bundle, "UTC")]
    assert len(bundle.to_dict()["sections"]["work"]) == 5


def test_the_memories_are_bounded() -> None:
    recent: script._Recent[str] = script._Recent(size=3)
    for n in range(5):
        recent.put(("p", f"agent:{n}"), str(n))
    assert recent.get(("p", "agent:0")) is None and recent.get(("p", "agent:1")) is None
    assert [recent.get(("p", f"agent:{n}")) for n in (2, 3, 4)] == ["2", "3", "4"]
    assert script.SEEN_WORK._size == script.SEEN_ZONE._size == script.RECENT_AGENTS

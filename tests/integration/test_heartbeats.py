"""Heartbeats (acmi.agents.heartbeat / silent_since) on every backend: the signals they
set, the activity index the sweep reads, one request each, bad input storing nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base.errors import AcmiValidationError
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import START, FakeClock, fresh_tenant, requests_per_step, run_together


@pytest.fixture
def beats(acmi: Acmi, clock: FakeClock) -> Acmi:
    """A tenant of its own: the activity index is per tenant, and the redis backend's
    database is shared by the session."""
    return fresh_tenant(acmi, clock)


def _activity(acmi: Acmi) -> list[tuple[str, float]]:
    reply = acmi.store.execute(("ZRANGE", acmi.keys.activity(), 0, -1, "WITHSCORES"))
    assert isinstance(reply, list)
    return [(m.decode(), float(s)) for m, s in zip(reply[::2], reply[1::2], strict=True)]


def test_heartbeat_sets_its_signals_and_keeps_the_others(beats: Acmi, clock: FakeClock) -> None:
    beats.signals.update("agent:claude", {"current_task": "PR 42", "status": "old"})
    beat = beats.agents.heartbeat("claude", "BLOCKED", "waiting on review")
    assert beat == {
        "agent": "agent:claude",
        "ts": START,
        "status": "BLOCKED",
        "note": "waiting on review",
    }
    assert beats.signals.all("agent:claude") == {
        "current_task": "PR 42",
        "status": "BLOCKED",
        "last_heartbeat_ts": START,
        "status_note": "waiting on review",
    }
    assert _activity(beats) == [("agent:claude", START)]
    assert beats.list("agent") == ["agent:claude"]
    clock.now += 60_000
    # no note: the previous one belonged to the previous status and goes
    assert beats.agents.heartbeat("agent:claude") == {
        "agent": "agent:claude",
        "ts": clock.now,
        "status": "ACTIVE",
    }
    assert beats.signals.all("agent:claude") == {
        "current_task": "PR 42",
        "status": "ACTIVE",
        "last_heartbeat_ts": clock.now,
    }
    assert _activity(beats) == [("agent:claude", clock.now)]  # moved, not added


def test_explicit_now_and_silent_since(beats: Acmi, clock: FakeClock) -> None:
    for name, ago in (("a", 10), ("b", 50), ("c", 30), ("d", 0), ("e", 40)):
        beats.agents.heartbeat(name, now=START - ago * 60_000)
    assert beats.signals.get("agent:b", "last_heartbeat_ts") == START - 50 * 60_000
    silent = beats.agents.silent_since(START - 20 * 60_000)
    assert silent == [
        ("agent:b", START - 50 * 60_000),
        ("agent:e", START - 40 * 60_000),
        ("agent:c", START - 30 * 60_000),
    ]
    assert beats.agents.silent_since(START - 30 * 60_000) == silent[:2]  # the cutoff is exclusive
    assert beats.agents.silent_since(START + 1, limit=2) == silent[:2]
    assert beats.agents.silent_since(START + 1, limit=2, offset=2) == [
        ("agent:c", START - 30 * 60_000),
        ("agent:a", START - 10 * 60_000),
    ]
    assert beats.agents.silent_since(0) == []
    beats.agents.heartbeat("b")  # a fresh heartbeat takes it off the silent list
    assert [a for a, _ in beats.agents.silent_since(START - 20 * 60_000)] == ["agent:e", "agent:c"]


def test_tenants_have_their_own_activity_index(beats: Acmi) -> None:
    other = beats.for_tenant(f"hb-{uuid.uuid4().hex[:12]}")
    beats.agents.heartbeat("claude")
    assert other.agents.silent_since(START + 1) == []
    assert other.signals.all("agent:claude") == {}
    assert other.keys.activity() != beats.keys.activity()


def test_concurrent_heartbeats_and_signal_writes_lose_nothing(beats: Acmi) -> None:
    def work(i: int) -> None:
        if i % 2:
            beats.agents.heartbeat(f"racer-{i}", now=START + i)
        else:
            beats.signals.set("agent:racer-1", f"k{i}", i)

    run_together(40, work)
    assert len(_activity(beats)) == 20
    signals = beats.signals.all("agent:racer-1")
    assert {k for k in signals if k.startswith("k")} == {f"k{i}" for i in range(0, 40, 2)}
    assert signals["last_heartbeat_ts"] == START + 1


BAD: list[tuple[str, Callable[[Acmi], object], str]] = [
    ("status-long", lambda a: a.agents.heartbeat("claude", "S" * 65), "status"),
    ("status-empty", lambda a: a.agents.heartbeat("claude", ""), "status"),
    ("status-chars", lambda a: a.agents.heartbeat("claude", "ACTIVE;"), "status"),
    ("status-type", lambda a: a.agents.heartbeat("claude", 1), "status"),  # type: ignore[arg-type]
    ("agent", lambda a: a.agents.heartbeat("Claude Bot"), "agent"),
    ("agent-category", lambda a: a.agents.heartbeat("user:mikey"), "agent"),
    ("note-long", lambda a: a.agents.heartbeat("claude", note="n" * 501), "note"),
    ("note-empty", lambda a: a.agents.heartbeat("claude", note=""), "note"),
    ("now", lambda a: a.agents.heartbeat("claude", now=-1), "now"),
    ("now-type", lambda a: a.agents.heartbeat("claude", now=1.5), "now"),  # type: ignore[arg-type]
    ("cutoff", lambda a: a.agents.silent_since("soon"), "cutoff_ms"),  # type: ignore[arg-type]
    ("limit", lambda a: a.agents.silent_since(1, limit=0), "limit"),
    ("offset", lambda a: a.agents.silent_since(1, offset=-1), "offset"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_refused_with_nothing_stored(
    beats: Acmi, case: tuple[str, Callable[[Acmi], object], str]
) -> None:
    _, call, field = case
    with pytest.raises(AcmiValidationError) as refused:
        call(beats)
    assert refused.value.field == field
    assert _activity(beats) == []
    assert beats.signals.all("agent:claude") == {}
    assert beats.list("agent") == []


def test_one_request_per_heartbeat_and_per_silent_page(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    acmi = create_acmi(upstash_store, Settings())
    acmi.agents.heartbeat("warm")  # loads the write script
    steps: dict[str, Callable[[], object]] = {
        "heartbeat": lambda: acmi.agents.heartbeat("claude", "ACTIVE", "note"),
        "heartbeat (no note)": lambda: acmi.agents.heartbeat("claude"),
        "silent_since": lambda: acmi.agents.silent_since(acmi.clock() + 1, limit=10),
    }
    assert requests_per_step(upstash_double, steps) == dict.fromkeys(steps, 1)

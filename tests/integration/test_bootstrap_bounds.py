"""The bootstrap's own reads are bounded by bytes, not only counts, and a lost reply does
not lose the memory handoff (issue 21, items 3 and 4).

Each event read of store/lua/bootstrap.lua (the timeline, the daily notes, the lessons
feed, the agent's mentions) stops before the member that would take it past
``budget.READ_BYTES`` (the first member read is taken whatever its size) and the bundle
reports the stop as a cut of the section. Before, 20 timeline events of 255 KB were
copied into Lua whole (~5 MB, ~40 ms of CPU, 140 ms of SLOWLOG) and returned, 200 allowed.

A main bootstrap that logs a new spawn takes the handoff (GETDEL). On the Upstash
transport a lost reply is retried: the retry finds its spawn logged and the handoff
gone, and the handoff the first run took was delivered to nobody. The first run now
records what it took under the request's record, and the retry answers with it."""

from __future__ import annotations

import json

import redis

from acmi_core import Acmi, Settings
from acmi_core.base.keys import MEMORY_STAMPS
from acmi_core.base.model import EntityId, dumps
from acmi_core.bootstrap.budget import READ_BYTES
from acmi_core.bootstrap.bundle import MAX_EVENTS
from acmi_core.bootstrap.script import as_list
from acmi_core.memory.service import MemoryAPI
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble
from bench.script_limits import EVENT_BYTES
from tests.kit import DB

AGENT = "agent:big"
NOW = 1_750_000_000_000


def _big_events(acmi: Acmi, count: int, ts: int = NOW - 1_000_000) -> None:
    for i in range(count):
        acmi.timeline.append(
            AGENT,
            {
                "source": "t",
                "kind": "note",
                "correlationId": f"e{i}",
                "summary": f"e{i}",
                "ts": ts + i,
                "payload": {"pad": "x" * (EVENT_BYTES - 300)},
            },
        )


def _acmi(store: UpstashStore) -> Acmi:
    return Acmi(store, Settings(), clock=lambda: NOW)


def test_the_timeline_read_stops_at_read_bytes(upstash_store: UpstashStore) -> None:
    """MAX_EVENTS events of the largest size a write carries, all asked for: before, all
    200 (~50 MB) were copied into Lua and returned; now the newest that fit READ_BYTES,
    and the rest reported as cut."""
    acmi = _acmi(upstash_store)
    _big_events(acmi, MAX_EVENTS)
    bundle = acmi.bootstrap(AGENT, events=MAX_EVENTS)
    shown = bundle.section("timeline").value
    fit = READ_BYTES // EVENT_BYTES
    assert [e["correlationId"] for e in shown] == [f"e{i}" for i in range(200 - fit, 200)][::-1]
    assert bundle.cut["timeline"] == MAX_EVENTS - fit
    assert bundle.reads["timeline"] == fit + 1  # the one that told the cap was reached
    assert bundle.to_dict()["cut"]["timeline"] == MAX_EVENTS - fit
    assert (
        f"({MAX_EVENTS - fit} more left out"
        in acmi.bootstrap(AGENT, events=MAX_EVENTS, format="markdown").text
    )


def test_the_timeline_read_of_an_agent_with_daily_notes_stops_at_read_bytes(
    upstash_store: UpstashStore,
) -> None:
    """With daily notes the timeline skips their lines, examining up to 500 events: the
    same byte stop."""
    acmi = _acmi(upstash_store)
    MemoryAPI(acmi.context).remember(AGENT, "a daily line", layer="daily", now_ms=NOW - 2_000_000)
    _big_events(acmi, 40)
    bundle = acmi.bootstrap(AGENT, events=40)
    fit = READ_BYTES // EVENT_BYTES
    assert len(bundle.section("timeline").value) == fit
    assert bundle.cut["timeline"] == 40 - fit
    assert bundle.reads["timeline"] == fit + 1


def test_a_small_timeline_is_read_whole_and_reports_no_cut(upstash_store: UpstashStore) -> None:
    acmi = _acmi(upstash_store)
    for i in range(30):
        acmi.timeline.append(
            AGENT,
            {
                "source": "t",
                "kind": "note",
                "correlationId": "c",
                "summary": "s",
                "ts": NOW - 100 + i,
            },
        )
    bundle = acmi.bootstrap(AGENT)
    assert len(bundle.section("timeline").value) == 20 and bundle.reads["timeline"] == 20
    assert "timeline" not in bundle.cut


def test_the_daily_note_read_stops_at_read_bytes(upstash_store: UpstashStore) -> None:
    """Events of other writers at a daily line's ts are read with it (the stamp says where
    the line is, not what else is there): 5 of 255 KB were all read; now the read stops
    at READ_BYTES and the note is reported cut."""
    acmi = _acmi(upstash_store)
    MemoryAPI(acmi.context).remember(AGENT, "a daily line", layer="daily", now_ms=NOW - 60_000)
    stamps = acmi.keys.slot(EntityId.parse(AGENT), MEMORY_STAMPS)
    (line_ts,) = (int(t) for t in as_list(upstash_store.execute(("ZRANGE", stamps, 0, -1))))
    for i in range(5):  # all at the line's ts
        acmi.timeline.append(
            AGENT,
            {
                "source": "t",
                "kind": "note",
                "ts": line_ts,
                "correlationId": f"same{i}",
                "summary": "s",
            }
            | {"payload": {"pad": "y" * (EVENT_BYTES - 300)}},
        )
    bundle = acmi.bootstrap(AGENT)
    assert bundle.reads["stamps"] == 1
    assert bundle.reads["daily"] == READ_BYTES // EVENT_BYTES + 1  # of the 6 there
    assert bundle.cut.get("today") == 1


def test_the_lessons_read_stops_at_read_bytes(
    upstash_store: UpstashStore, upstash_double: UpstashDouble, redis_server: RedisServer
) -> None:
    """The lessons feed as another writer may leave it (the reference's tools write it
    raw): lessons of 255 KB on the agent's workflow. Before, the 200 newest were read
    whole; now the read stops at READ_BYTES."""
    acmi = _acmi(upstash_store)
    acmi.workflows.improve("workflow:wf", "s1", "small lesson", AGENT)
    feed = acmi.keys.lessons()
    (member,) = upstash_store.execute(("ZRANGE", feed, 0, -1))  # type: ignore[misc]
    event = json.loads(member)
    with redis.Redis.from_url(redis_server.url_for(DB["upstash_double"])) as raw:
        for i in range(10):
            big = event | {"correlationId": f"big{i}", "summary": "x" * (EVENT_BYTES - 500)}
            raw.zadd(feed, {dumps(big): NOW - 1000 + i})
    bundle = acmi.bootstrap(AGENT)
    fit = READ_BYTES // EVENT_BYTES  # after the small lesson, the newest
    assert len(bundle.section("lessons").value) == 1 + fit
    assert bundle.cut["lessons"] == 10 - (1 + fit)


def test_a_lost_bootstrap_reply_still_delivers_the_handoff(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    """The reply of the bootstrap that takes the handoff is lost; the transport retries.
    Before: the retry found the spawn logged (a duplicate) and the handoff deleted, so the
    handoff was delivered to nobody. Now the retry answers with what the first run took."""
    acmi = _acmi(upstash_store)
    memory = MemoryAPI(acmi.context)
    written = memory.handoff(AGENT, "Done: the KPI pack. Next: call Priya.")
    acmi.bootstrap(AGENT)  # loads the script (EVALSHA, NOSCRIPT, EVAL): not the request lost
    upstash_double.reset_counts()
    upstash_double.lose_reply_matching("s-lost")
    bundle = acmi.bootstrap(AGENT, spawn={"session_id": "s-lost", "model_id": "m"})
    # the lost one and its retry: the first run wrote the session start's line in
    # today's note (and its mark), so the retry has it logged, once
    assert upstash_double.requests == 2
    lines = [e for e in acmi.timeline.read(AGENT) if "Started session s-lost" in e.summary]
    assert len(lines) == 1
    handoff = bundle.section("handoff").value
    assert handoff is not None and handoff["text"] == written["text"] and handoff["taken"]
    assert bundle.memory["handoff"] == "taken"
    assert bundle.spawn is not None and "duplicate" not in bundle.spawn
    assert memory.take_handoff(AGENT) is None  # taken once: gone from the store
    # another session's bootstrap (a new request) takes nothing, and says so
    again = acmi.bootstrap(AGENT, spawn={"session_id": "s-next", "model_id": "m"})
    assert again.section("handoff").value is None


def test_a_repeated_spawn_in_a_new_request_does_not_replay(upstash_store: UpstashStore) -> None:
    """The record is the request's, not the spawn's: the same spawn sent again by the
    caller (a new request) is a duplicate and reads a newer handoff, as before."""
    acmi = _acmi(upstash_store)
    memory = MemoryAPI(acmi.context)
    memory.handoff(AGENT, "first")
    spawn = {"session_id": "s-1", "model_id": "m"}
    first = acmi.bootstrap(AGENT, spawn=spawn)
    assert first.section("handoff").value["text"] == "first"
    memory.handoff(AGENT, "second")
    retry = acmi.bootstrap(AGENT, spawn=spawn)
    assert retry.spawn is not None and retry.spawn.get("duplicate") is True
    assert retry.section("handoff").value["text"] == "second"
    assert retry.section("handoff").value["taken"] is False

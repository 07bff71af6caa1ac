"""No script may stall Redis (every tenant) because of what a write key stored: each is
bounded by the bytes it reads and the work it does. The mentions a bootstrap shows are
indexed when the coordination event is written (not scanned at read time), the sweep
marks its agents in runs of at most MARK_BYTES of signals, a trim runs at most
TRIM_MEMBERS members, and a drill runs every script at the largest inputs the limits
allow (bench/script_limits.py) and holds its Redis time under the budget.

Redis time is measured two ways. SLOWLOG is the time a command took inside Redis, and
on a loaded machine that includes the time the OS ran something else (measured here at
a load of 9 on 2 cores: 2-4x the CPU time). The CPU time of Redis's main thread (INFO
cpu, getrusage) is what the script itself cost, whatever else runs, so that bound is
always held; the SLOWLOG bound is held when the machine is not oversubscribed, and
otherwise reported (a warning naming the load)."""

from __future__ import annotations

import json
import os
import random
import re
import warnings
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest

from acmi_core import Acmi, Settings
from acmi_core.base.errors import StoreCommandError
from acmi_core.base.keys import (
    COORDINATION_THREAD,
    MEMORY_ARCHIVE,
    MENTIONS_KEPT,
    MENTIONS_PER_EVENT,
    mentioned,
)
from acmi_core.base.model import EntityId, dumps
from acmi_core.bootstrap.budget import READ_BYTES
from acmi_core.jobs import quarterly, sweep
from acmi_core.jobs.runner import JobRun
from acmi_core.store import scripts
from acmi_core.store.base import Script
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from bench import script_limits
from tests.kit import TEST_DBS

BUDGET_MS = script_limits.BUDGET_MS
DB_BOUNDS = TEST_DBS["script_bounds"]  # this module's own database (tests/kit.py TEST_DBS)
LUA = resources.files("acmi_core").joinpath("store/lua")


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[RedisStore]:
    store = RedisStore.from_url(redis_server.url_for(DB_BOUNDS))
    store.execute(("FLUSHDB",))
    yield store
    store.execute(("FLUSHDB",))
    store.close()


@pytest.fixture
def acmi(store: RedisStore) -> Acmi:
    return Acmi(store, Settings())


_quiet = script_limits.quiet


def hold(case: str, runs: list[script_limits.Run]) -> None:
    """The budget, held on the fastest run (load only ever adds to one): in CPU time
    always, in SLOWLOG time on a machine with a core for Redis (else a warning)."""
    cpu = min(r.cpu_ms for r in runs)  # load only ever adds to a run: the fastest is its cost
    slow = min(r.slowlog_ms for r in runs)
    assert cpu < BUDGET_MS, (case, "CPU ms", sorted(r.cpu_ms for r in runs))
    if _quiet():
        assert slow < BUDGET_MS, (case, "SLOWLOG ms", sorted(r.slowlog_ms for r in runs))
    elif slow >= BUDGET_MS:
        warnings.warn(
            f"{case}: SLOWLOG {slow:.1f} ms not held to {BUDGET_MS:g} ms at a load of "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (CPU {cpu:.1f} ms held)",
            stacklevel=2,
        )


# --- the mentions index ------------------------------------------------------------------------


def _lua_mentioned(store: RedisStore, text: str) -> list[str]:
    source = LUA.joinpath("mentions.lua").read_text() + "\nreturn mentioned(ARGV[1])"
    reply = store.eval(Script(source), [], [text.encode()])
    assert isinstance(reply, list)
    return [m.decode() for m in reply if isinstance(m, bytes)]


def test_the_mentions_rule_is_one_rule_in_python_and_lua(store: RedisStore) -> None:
    """The client indexes the events it writes, locks.lua and hitl.lua the ones they
    write: the same text gives the same agents, in the same order, capped alike."""
    cases = [
        '{"actor":"agent:claude","summary":"ask @bob"}',
        "agent:claude-engineer agent:claude",  # a longer id is another agent
        "x@bob mail@bob.com @bob. :@bob @@bob agent:@x @agent:y",
        "agent:a.b agent:-z agent:é agent:" + "i" * 251 + " agent:" + "j" * 250,
        " ".join(f"agent:a{i}" for i in range(40)),  # over MENTIONS_PER_EVENT
        "",
        "no mention at all",
    ]
    rng = random.Random(21)
    alphabet = ["agent:", "@", "a", "b", "-", ".", "_", ":", " ", '"', "1", "é", "\\"]
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    for text in cases:
        assert _lua_mentioned(store, text) == mentioned(text), text
    assert len(mentioned(cases[4])) == MENTIONS_PER_EVENT
    assert mentioned(cases[1]) == ["claude-engineer", "claude"]


def test_the_lua_mentions_limits_mirror_the_python_ones() -> None:
    text = LUA.joinpath("mentions.lua").read_text()
    limits = re.search(
        r"local MENTIONS_PER_EVENT, MENTIONS_KEPT, MENTION_ID_MAX = (\d+), (\d+)", text
    )
    assert limits is not None
    assert (int(limits[1]), int(limits[2])) == (MENTIONS_PER_EVENT, MENTIONS_KEPT)


def _coordination(acmi: Acmi, count: int, size: int) -> list[dict[str, Any]]:
    """``count`` coordination events of ``size`` bytes, every third mentioning agent:w
    among near misses (agent:w-2, @w.x), written by the client as any other event."""
    events = []
    for i in range(count):
        filler = "agent:w-2 @w.x x@w " * (size // 20)
        note = filler + (" @w" if i % 3 == 0 else "")
        events.append(
            {
                "source": "t",
                "kind": "note",
                "correlationId": f"c{i}",
                "summary": f"s{i}",
                "ts": 1_700_000_000_000 + i,
                "payload": {"note": note},
            }
        )
    for start in range(0, count, 10):
        acmi.timeline.extend(COORDINATION_THREAD, events[start : start + 10])
    return events


def test_a_bootstrap_reads_the_agents_mentions_not_the_thread(
    acmi: Acmi, store: RedisStore
) -> None:
    """200 coordination events of 250 KB, a third of them mentioning the agent: the
    bootstrap ran 0.5-4.6 s of Redis time (it copied the 200 into Lua and scanned each for
    the mention); now it reads the agent's index, what it returns. Same section as before:
    the newest mentions, newest first, as many as the read's byte cap holds."""
    events = _coordination(acmi, 200, 250_000)
    acmi.bootstrap("agent:w")  # loads the script
    case = script_limits.ScriptCase("bootstrap", "bootstrap", "", lambda _: lambda: None)
    with script_limits.slowlog_everything(store):
        runs = [
            script_limits.run_once(store, case, lambda: acmi.bootstrap("agent:w")) for _ in range(3)
        ]
    hold("bootstrap after 200 x 250 KB coordination events", runs)
    bundle = acmi.bootstrap("agent:w")
    section = bundle.section("coordination").value
    expected = [e["correlationId"] for e in events if e["payload"]["note"].endswith(" @w")]
    # the newest of them, as many as READ_BYTES holds (~2 of 250 KB); the rest is a cut
    fit = READ_BYTES // len(dumps(events[0]))
    assert [e["correlationId"] for e in section] == expected[::-1][:fit]
    assert bundle.cut["coordination"] == MENTIONS_KEPT - fit
    # a near miss is nobody's mention of w; the index holds MENTIONS_KEPT events at most
    assert store.execute(("ZCARD", acmi.keys.mentions("w"))) == MENTIONS_KEPT
    assert store.execute(("EXISTS", acmi.keys.mentions("w-2"))) == 1  # agent:w-2 is an agent


def test_lock_and_hitl_events_are_indexed_under_the_agents_they_mention(acmi: Acmi) -> None:
    acmi.locks.claim("res:a", "agent:holder", 60_000)
    with pytest.raises(Exception, match="agent:holder"):
        acmi.locks.claim("res:a", "agent:claimant", 60_000)
    acmi.hitl.create("t", "r", asked_by="agent:asker", addressee="agent:to", correlation_id="h1")
    acmi.hitl.resolve("h1", "done", by="agent:to")
    thread = acmi.timeline.read(COORDINATION_THREAD)
    for agent in ("holder", "claimant", "to"):
        shown = acmi.bootstrap(f"agent:{agent}").section("coordination").value
        scanned = [e.to_dict() for e in thread if f"agent:{agent}" in e.to_json()][::-1]
        assert shown == scanned, agent
        assert shown


# --- the sweep: chunked by the bytes it reads ----------------------------------------------------


def test_the_sweep_marks_large_signals_in_runs_of_at_most_mark_bytes(
    acmi: Acmi, store: RedisStore
) -> None:
    """100 silent agents with 64 KB signals were one run of 1.2 s; now each run reads at
    most MARK_BYTES of signals (one object this large), and the result counts the runs."""
    now = acmi.clock()
    signals = {"pad": "x" * (60 * 1024)}
    for i in range(sweep.MARK_BATCH):
        agent = f"agent:s{i}"
        acmi.agents.heartbeat(agent, now=now - sweep.STALL_AFTER_MS - 60_000)
        acmi.signals.update(agent, signals)
    with script_limits.slowlog_everything(store):
        store.execute(("SLOWLOG", "RESET"))
        result = sweep.run(acmi, JobRun("sweep", "e1", now))
        entries = store.execute(("SLOWLOG", "GET", "-1"))
    assert result["stalled"] == sweep.MARK_BATCH
    assert result["mark_runs"] == sweep.MARK_BATCH  # two would be over MARK_BYTES
    assert all(acmi.signals.get(f"agent:s{i}", "status") == "STALLED" for i in range(100))
    assert acmi.signals.get("agent:s7", "pad") == signals["pad"]  # every other signal kept
    assert isinstance(entries, list)
    sha = store.script_dialect.render(scripts.SWEEP.script)[1].encode()  # as it was sent
    times = [e[2] / 1000 for e in entries if isinstance(e, list) and e[3][:2] == [b"EVALSHA", sha]]
    assert len(times) in (sweep.MARK_BATCH, sweep.MARK_BATCH - 1)  # the first may be an EVAL
    if _quiet():
        assert max(times) < BUDGET_MS, sorted(times)[-5:]


def test_a_sweep_run_handles_the_agents_that_fit_and_says_which(acmi: Acmi) -> None:
    now = acmi.clock()
    silent = now - sweep.STALL_AFTER_MS - 60_000
    for i, size in enumerate((40_000, 20_000, 10_000, 100)):
        acmi.agents.heartbeat(f"agent:f{i}", now=silent)
        acmi.signals.update(f"agent:f{i}", {"pad": "x" * size})
    batch = [(f"agent:f{i}", silent) for i in range(4)]
    assert sweep._mark(acmi, batch) == [True, True]  # 60 KB; the third would pass 64 KiB
    assert acmi.signals.get("agent:f2", "status") == "ACTIVE"  # untouched, sent again
    assert sweep._mark(acmi, batch[2:]) == [True, True]


def test_the_lua_sweep_and_trim_limits_mirror_the_python_ones() -> None:
    unlog_lua = LUA.joinpath("unlog.lua").read_text()
    caps = f"{script_limits.UNLOG_AT_TS}, {script_limits.UNLOG_AT_TS_BYTES}"
    assert f"local MAX_AT_TS, MAX_AT_TS_BYTES = {caps}\n" in unlog_lua
    sweep_lua = LUA.joinpath("sweep.lua").read_text()
    assert f"local SWEEP_BYTES = {sweep.MARK_BYTES}\n" in sweep_lua
    hygiene_lua = LUA.joinpath("hygiene.lua").read_text()
    assert f"if n > {quarterly.TRIM_MEMBERS} then" in hygiene_lua


def test_a_trim_of_more_than_trim_members_is_refused_whole(acmi: Acmi, store: RedisStore) -> None:
    """50,000 members of 10 bytes fit TRIM_BYTES and were one run of 0.5 s."""
    entity = EntityId.parse("user:trim")
    key = acmi.keys.timeline(entity)
    members = [json.dumps({"i": i}) for i in range(quarterly.TRIM_MEMBERS + 1)]
    store.execute(("ZADD", key, *[x for m in members for x in (1, m)]))
    args: dict[str, Any] = {
        "mode": "trim",
        "quarter": "",
        "doc": "",
        "member_count": len(members),
        "members": [x for m in members for x in (m, "1")],
    }
    keys = {"timeline": key, "archive": acmi.keys.slot(entity, MEMORY_ARCHIVE)}
    keys["replay"] = acmi.keys.request(scripts.new_request_id())
    with pytest.raises(StoreCommandError, match=f"over {quarterly.TRIM_MEMBERS} members"):
        scripts.HYGIENE.eval(store, keys, args)
    assert store.execute(("ZCARD", key)) == len(members)  # nothing removed
    args["member_count"] -= 1
    args["members"] = args["members"][:-2]
    assert scripts.HYGIENE.eval(store, keys, args)["trimmed"] == 1  # an error is not recorded


# --- the drill: every script at the limits -----------------------------------------------------


def test_the_drill_covers_every_script() -> None:
    assert {c.script for c in script_limits.cases()} == {p.name for p in scripts.PROTOCOLS}


@pytest.mark.slow
@pytest.mark.parametrize("case", script_limits.cases(), ids=lambda c: c.script)
def test_every_script_at_the_largest_inputs_allowed_stays_within_the_budget(
    case: script_limits.ScriptCase, acmi: Acmi, store: RedisStore
) -> None:
    """bench/script_limits.py's case for the script, 5 runs: its fastest run within
    BUDGET_MS of Redis CPU time (and of SLOWLOG on a machine with a core to spare).
    Measured on this 2-core box at a load of 9: CPU 0.3-30 ms (the object edits slowest),
    SLOWLOG 2-4x that."""
    call = case.prepare(acmi)
    call()  # loads the script (NOSCRIPT, EVAL): not timed
    with script_limits.slowlog_everything(store):
        runs = [script_limits.run_once(store, case, call) for _ in range(5)]
    hold(case.name, runs)

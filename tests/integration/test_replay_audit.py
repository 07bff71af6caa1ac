"""Every script and write plan against a lost reply (issue 21, item 4).

The Upstash transport resends a request whose reply it lost, and that retry meets its
own committed write. ``AUDIT`` is the table of every write whose retry is not
idempotent by itself, how its retry is answered with the first run's result, and the
test that proves it through the Upstash double's lost-reply fault; ``IDEMPOTENT`` the
writes whose retry rewrites the same values and whose answer does not depend on what
the write found, each proved by ``test_an_idempotent_write_whose_reply_is_lost_answers_
as_its_first_run`` (the same call with and without the fault answer the same). The
table is held to the code: every script in ``store/lua`` and every module that builds a
write that is not idempotent by itself (a ONCE, SAME, TAKE or RECORD op, a SET NX)
has its row.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from acmi_core import Acmi
from acmi_core.auth import apikeys
from acmi_core.base.errors import AcmiError
from acmi_core.base.keys import MEMORY_HOT
from acmi_core.base.model import EntityId
from acmi_core.base.settings import Settings
from acmi_core.ingest.config import put_config
from acmi_core.jobs import sink as archive_sink
from acmi_core.jobs import sweep as sweep_job
from acmi_core.jobs.archive import archive_now
from acmi_core.jobs.runner import JobRun, run_job
from acmi_core.memory.service import MemoryAPI
from acmi_core.ops.migrate import Action, Migrate
from acmi_core.store import scripts
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import FakeClock, MemorySink

ROOT = Path(__file__).resolve().parents[2]
LUA = resources.files("acmi_core").joinpath("store/lua")


@dataclass(frozen=True)
class Row:
    operation: str
    write: str  # the script, or the apply.lua op, that makes it not idempotent
    retry_alone: str  # what a retry answered before it was recorded
    answered_by: str  # what answers a retry now
    test: str  # module::test that loses the reply and checks the first result


RR = "tests/integration/test_request_replay.py"
HERE = "tests/integration/test_replay_audit.py"
AUDIT: tuple[Row, ...] = (
    Row(
        "lock claim / renew / release",
        "locks.lua",
        "claim: Conflict on its own lease; release: Conflict (not held)",
        "replay.lua record",
        f"{RR}::test_a_lock_operation_whose_reply_is_lost_still_succeeds",
    ),
    Row(
        "lock claim that loses",
        "locks.lua",
        "a second coord-defer",
        "replay.lua record",
        f"{RR}::test_a_losing_claim_whose_reply_is_lost_defers_once",
    ),
    Row(
        "HITL create / resolve",
        "hitl.lua",
        "create: created false; resolve: Conflict (already resolved)",
        "replay.lua record",
        f"{RR}::test_a_hitl_create_or_resolve_whose_reply_is_lost_still_succeeds",
    ),
    Row(
        "HITL adopt (a foreign item)",
        "hitl.lua",
        "Conflict: its own record, closed",
        "replay.lua record",
        f"{RR}::test_adopting_a_foreign_item_whose_reply_is_lost_still_succeeds",
    ),
    Row(
        "hygiene trim (archive)",
        "hygiene.lua",
        "members gone: 'changed since read, nothing trimmed', trimmed 0",
        "replay.lua record",
        f"{HERE}::test_an_archive_trim_whose_reply_is_lost_reports_the_trim",
    ),
    Row(
        "hygiene lease release",
        "hygiene.lua",
        "released 0 (not ours)",
        "replay.lua record",
        f"{HERE}::test_an_archive_trim_whose_reply_is_lost_reports_the_trim",
    ),
    Row(
        "work create",
        "work.lua",
        "Conflict (unique): its own item",
        "RECORD op",
        f"{RR}::test_a_work_create_whose_reply_is_lost_still_succeeds",
    ),
    Row(
        "work signal / event / assign / delete",
        "work.lua",
        "delete: NotFound; the others re-run on the new state",
        "RECORD op",
        f"{RR}::test_every_other_work_write_whose_reply_is_lost_answers_its_first_run",
    ),
    Row(
        "bootstrap with a spawn, main scope",
        "bootstrap.lua",
        "duplicate, and the handoff it took delivered to nobody",
        "request record 'T'/'S'",
        "tests/integration/test_bootstrap_bounds.py::"
        "test_a_lost_bootstrap_reply_still_delivers_the_handoff",
    ),
    Row(
        "bootstrap with a spawn, group / subagent scope",
        "bootstrap.lua",
        "duplicate",
        "request record 'S'",
        f"{HERE}::test_a_spawn_whose_reply_is_lost_is_new_in_every_scope",
    ),
    Row(
        "agent invite (tier transition)",
        "apply.lua ONCE",
        "its own ONCE read as another invite's: unchanged, no event",
        "RECORD op",
        f"{RR}::test_an_invite_whose_reply_is_lost_reports_the_onboarding",
    ),
    Row(
        "wake claim (the tick)",
        "apply.lua ONCE",
        "already woken: no spawn, no bundle",
        "RECORD op",
        f"{RR}::test_a_wake_claim_whose_reply_is_lost_still_wakes_the_agent",
    ),
    Row(
        "job run record",
        "apply.lua ONCE",
        "replayed: true for its own run",
        "RECORD op",
        f"{HERE}::test_a_job_whose_run_record_reply_is_lost_is_not_replayed",
    ),
    Row(
        "events and webhooks with an idempotency key",
        "apply.lua ONCE",
        "its own ONCE: a replay (200, nothing counted)",
        "a nonce in the ONCE value",
        "tests/integration/test_ingest_hardening.py::"
        "test_a_reply_lost_after_the_write_counts_as_stored_not_replayed",
    ),
    Row(
        "memory take-handoff",
        "apply.lua TAKE",
        "None: the handoff taken and delivered to nobody",
        "RECORD op",
        f"{HERE}::test_a_handoff_take_whose_reply_is_lost_still_delivers_it",
    ),
    Row(
        "migrate: memory out of signals and profile",
        "apply.lua SAME",
        "its own move read as a change: re-read, nothing reported moved",
        "RECORD op",
        f"{HERE}::test_a_memory_move_whose_reply_is_lost_reports_the_move",
    ),
    Row(
        "memory forget: one line, audited",
        "apply.lua SAME",
        "Conflict: its own edit of the slot read as a concurrent write",
        "RECORD op",
        "tests/integration/test_memory_forget.py::"
        "test_a_forget_whose_reply_is_lost_answers_its_first_run",
    ),
    Row(
        "timeline event delete",
        "unlog.lua",
        "NONE (404): its own deletion met as an event already gone",
        "replay.lua record",
        "tests/integration/test_event_delete.py::"
        "test_a_delete_whose_reply_is_lost_answers_its_first_run",
    ),
    Row(
        "hygiene job: the archive lease",
        "SET NX PX",
        "the lease its first try took: nothing archived",
        "the lease holds the run's execution id (GET)",
        f"{HERE}::test_a_hygiene_run_whose_lease_reply_is_lost_still_archives",
    ),
    Row(
        "archive now: the archive lease",
        "SET NX PX",
        "Conflict: the lease its first try took",
        "the lease holds the caller's token (GET)",
        f"{RR}::test_an_archive_whose_lease_reply_is_lost_still_archives",
    ),
)

# writes whose retry is idempotent by itself: each rewrites the same values, and its
# answer is built by the client or from the values written, never from what it found
IDEMPOTENT_SCRIPTS = {
    # ONLY: a retry meets its own member at its own score, which the check admits
    "apply": "SET, DEL, ZADD NX, ZSET, ZREM, ZMAX, ZMIN, ZHEAD, ZKEEP, ZBUMP, ZHAS, SADD, "
    "SREM, HSET, HDEL, HPUT (keeps the created_at it finds: its own on a retry), HDUE "
    "(a retry finds nothing due left), OBJ, ONLY",
    # apply.lua's plain ops and its OBJ edit, each rewriting the same values; a ONCE record
    # answers a retry with what the first run stored
    "lean": "SET, ZADD NX, ZSET, ZREM, ZMAX, ZMIN, SADD, SREM, HSET, HDEL, OBJ, ONCE",
    # HDEL of stale digests: a retry finds them gone (its count 0), or a vector written
    # since (BUSY: nothing deleted)
    "vectors": "HDEL",
    "sweep": "a retry finds the same heartbeat score and writes the same STALLED text",
    "page": "a read",
    "merge": "a read",
}


def _tests_named() -> set[str]:
    found = set()
    for row in AUDIT:
        path, _, name = row.test.partition("::")
        found.add(path)
        text = (ROOT / path).read_text()
        assert re.search(rf"^def {name}\(", text, re.M), f"{row.operation}: no test {row.test}"
    return found


def test_the_table_names_a_test_for_every_row() -> None:
    assert _tests_named()


def test_every_script_is_in_the_table() -> None:
    audited = {row.write.split(" ")[0].removesuffix(".lua") for row in AUDIT}
    names = {p.name for p in scripts.PROTOCOLS}
    assert names <= audited | set(IDEMPOTENT_SCRIPTS), names - audited - set(IDEMPOTENT_SCRIPTS)
    for protocol in (scripts.LOCKS, scripts.HITL, scripts.HYGIENE, scripts.UNLOG):
        assert "replay" in protocol.sources  # every op of a recorded script takes its record


# a write that is not idempotent by itself: the modules building one, and what they build
NOT_IDEMPOTENT = re.compile(r"\.once\(|\.expect\(|\.take\(|record=|\"NX\"|GETDEL")
COVERED = {
    "acmi_core/coordination/agents.py": "agent invite (tier transition)",
    "acmi_core/coordination/work.py": "work create",
    "acmi_core/jobs/wake.py": "wake claim (the tick)",
    "acmi_core/jobs/runner.py": "job run record",
    "acmi_core/ingest/service.py": "events and webhooks with an idempotency key",
    "acmi_core/memory/writes.py": "memory take-handoff",
    "acmi_core/memory/forget.py": "memory forget: one line, audited",
    "acmi_core/ops/migrate.py": "migrate: memory out of signals and profile",
    "acmi_core/jobs/archive.py": "archive now: the archive lease",
    # SET NX of a handoff the budget cut: a retry finds its own value, the same end state
    "acmi_core/bootstrap/bootstrapper.py": "bootstrap with a spawn, main scope",
    "acmi_core/store/writes.py": "the ops themselves",
    "acmi_core/jobs/hygiene.py": "hygiene job: the archive lease",
}
# matches that build no such write: a docstring or comment naming GETDEL, another
# method's `record=` or `.take(`
ADMITTED = {
    "acmi_core/base/keys.py",  # a comment: the handoff slot is taken on wake
    "acmi_core/memory/service.py",  # its docstring's table: take is GETDEL
    "acmi_core/cli/quota.py",  # a quota record passed by keyword
    "acmi_core/jobs/drift.py",  # a scan's take() of one entity's data
}


def test_every_module_that_builds_such_a_write_is_in_the_table() -> None:
    builders = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "acmi_core").rglob("*.py")
        if "testing" not in path.parts and NOT_IDEMPOTENT.search(path.read_text())
    }
    assert builders - ADMITTED == set(COVERED), (builders - ADMITTED) ^ set(COVERED)
    operations = {row.operation for row in AUDIT}
    assert {v for v in COVERED.values() if v != "the ops themselves"} <= operations


# --- the rows proved here ---------------------------------------------------------------------


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def up(upstash_store: UpstashStore, clock: FakeClock) -> Acmi:
    return Acmi(upstash_store, Settings(), clock=clock, tenant=_name("t"))


@pytest.mark.parametrize("scope", ["main", "group", "subagent"])
def test_a_spawn_whose_reply_is_lost_is_new_in_every_scope(
    up: Acmi, upstash_double: UpstashDouble, scope: str
) -> None:
    """Before: only main's spawn (the one that takes the handoff) was recorded; a group or
    subagent bootstrap whose reply was lost answered its own spawn as a duplicate."""
    agent = f"agent:{_name('w')}"
    up.bootstrap(agent, scope=scope)  # loads the script: not the request lost
    spawn = {"session_id": _name("s"), "model_id": "m"}
    upstash_double.reset_counts()
    upstash_double.lose_reply_matching(spawn["session_id"])
    bundle = up.bootstrap(agent, scope=scope, spawn=spawn)
    # the lost one and its retry: the first run wrote the session start's line in
    # today's note (and its mark), so the retry has it logged, once
    assert upstash_double.requests == 2
    started = f"Started session {spawn['session_id']} "
    assert len([e for e in up.timeline.read(agent) if started in e.summary]) == 1
    assert bundle.spawn is not None and "duplicate" not in bundle.spawn
    assert [s["session_id"] for s in up.agents.spawns(agent)] == [spawn["session_id"]]
    again = up.bootstrap(agent, scope=scope, spawn=spawn)  # a new request: a real repeat
    assert again.spawn is not None and again.spawn.get("duplicate") is True


@pytest.mark.parametrize("scope", ["group", "subagent"])
def test_a_retried_spawn_outside_main_leaves_the_handoff_pending(
    up: Acmi, upstash_double: UpstashDouble, scope: str
) -> None:
    """Only main takes the handoff: a group or subagent spawn, retried from its record,
    takes nothing and the handoff waits for the next main session."""
    agent = f"agent:{_name('w')}"
    memory = MemoryAPI(up.context)
    memory.handoff(agent, "next: call Priya")
    up.bootstrap(agent, scope=scope)
    upstash_double.lose_reply_matching("s-other")
    bundle = up.bootstrap(agent, scope=scope, spawn={"session_id": "s-other", "model_id": "m"})
    assert bundle.spawn is not None and "duplicate" not in bundle.spawn
    assert bundle.memory.get("handoff") != "taken"
    pending = memory.take_handoff(agent)
    assert pending is not None and pending["text"] == "next: call Priya"


def test_a_job_whose_run_record_reply_is_lost_is_not_replayed(
    up: Acmi, upstash_double: UpstashDouble, clock: FakeClock
) -> None:
    """Before: the record's retry met its own ONCE record, and the run reported its own
    summary as another run's, ``replayed: true``. A real retry of the execution still is."""
    up.agents.heartbeat("warm")  # loads apply.lua: not the request lost
    upstash_double.lose_reply_matching("sweep-e1")
    run = JobRun("sweep", "sweep-e1", clock.now, {})
    done = run_job(up, run, sweep_job.run, clock=time.perf_counter)
    assert "replayed" not in done and done["execution_id"] == "sweep-e1"
    again = run_job(up, run, sweep_job.run, clock=time.perf_counter)
    assert again["replayed"] is True
    assert {k: v for k, v in again.items() if k != "replayed"} == done


@pytest.mark.parametrize("lost", ['"trim"', '"release"'])
def test_an_archive_trim_whose_reply_is_lost_reports_the_trim(
    up: Acmi, upstash_double: UpstashDouble, clock: FakeClock, lost: str
) -> None:
    """Before: the trim's retry found its members gone and reported "changed since they
    were read: nothing trimmed", trimmed 0, for a trim that ran."""
    day = 24 * 3600 * 1000
    entity = f"agent:{_name('atlas')}"
    events = [
        {"ts": clock.now - i * day, "source": "user:m", "kind": "note", "correlationId": f"c{i}"}
        for i in range(40)
    ]
    up.timeline.extend(entity, [{**e, "summary": "s"} for e in events])
    dest = archive_sink.Destination(MemorySink(), "acmi-archive", "mem://b/acmi-archive")
    archive_now(up, f"agent:{_name('warm')}", dest=dest)  # loads hygiene.lua
    upstash_double.reset_counts()
    upstash_double.lose_reply_matching(lost)
    done = archive_now(up, entity, dest=dest)
    assert upstash_double.lose_reply_pending() == 0  # the fault met its request
    assert done["trimmed"] == 9, done  # days 31..39: older than 30 days
    assert not [p for p in done.get("problems", []) if "nothing trimmed" in p]
    assert up.timeline.size(entity) == 31
    assert up.store.execute(("EXISTS", up.keys.hygiene_lease())) == 0  # released


def test_a_hygiene_run_whose_lease_reply_is_lost_still_archives(
    upstash_store: UpstashStore, upstash_double: UpstashDouble
) -> None:
    """The lease's SET NX reply is lost; its retry finds the lease taken, by this run's own
    execution id (compared, so the run archives), and every later step (the trims, the
    release, the run record) answers as it would without the fault."""
    from tests.integration import test_hygiene as hy_tests

    clock = FakeClock(hy_tests.START + 60_000)
    fleet = Acmi(upstash_store, Settings(), clock=clock, tenant=_name("t"))
    sink = hy_tests.DictSink()
    archive_sink.register_sink("mem", lambda location: sink)
    try:
        before = hy_tests.fill(fleet)
        upstash_double.lose_reply_matching('"hy-lost", "NX"')
        done = hy_tests.job(fleet, "hy-lost")
    finally:
        archive_sink.SINKS.pop("mem", None)
    assert upstash_double.lose_reply_pending() == 0  # the fault met its request
    assert done["archived_entities"] == 1 and done["problems"] == []
    assert done["events_trimmed"] == len(hy_tests.older(before))
    assert "replayed" not in done
    assert fleet.store.execute(("GET", fleet.keys.hygiene_lease())) is None  # released


def test_a_handoff_take_whose_reply_is_lost_still_delivers_it(
    up: Acmi, upstash_double: UpstashDouble
) -> None:
    """Before: GETDEL's retry found the handoff gone and answered None: the handoff was
    taken and delivered to nobody."""
    memory = MemoryAPI(up.context)
    memory.take_handoff(f"agent:{_name('warm')}")  # loads apply.lua
    agent = f"agent:{_name('w')}"
    written = memory.handoff(agent, "Done: the KPI pack. Next: call Priya.")
    upstash_double.reset_counts()
    upstash_double.lose_reply_next(1)
    taken = memory.take_handoff(agent)
    assert upstash_double.requests == 2
    assert taken is not None and taken["text"] == written["text"]
    assert memory.take_handoff(agent) is None  # taken once: a new request finds none


def test_a_memory_move_whose_reply_is_lost_reports_the_move(
    up: Acmi, upstash_double: UpstashDouble
) -> None:
    """Before: the move's retry met its own write as a change (SAME), read again, found
    nothing left to move and reported no move for a move that ran."""
    agent = EntityId.parse(f"agent:{_name('w')}")
    up.store.execute(("SET", up.keys.signals(agent), '{"status":"ok","hot.focus":"ship"}'))
    up.store.execute(("SADD", up.keys.index("agent"), agent.local_id))
    up.agents.heartbeat("warm")  # loads apply.lua: not the request lost
    upstash_double.lose_reply_matching("hot.focus")  # the move: its SAME text (reads name keys)
    steps = [(s.action, s.key) for s in Migrate(up).run()]
    assert upstash_double.lose_reply_pending() == 0  # the fault met its request
    assert (Action.MEMORY_MOVE, up.keys.signals(agent)) in steps
    assert json.loads(up.store.execute(("GET", up.keys.signals(agent)))) == {"status": "ok"}
    hot = up.store.execute(("GET", up.keys.slot(agent, MEMORY_HOT)))
    assert json.loads(hot) == {"hot.focus": "ship"}


# --- every other write: the same call with and without the fault answers the same ------------


def _register(acmi: Acmi, name: str) -> object:
    plaintext = f"acmik_{name}_{'x' * 24}"
    record = apikeys.register(
        acmi.store, plaintext, tenant=acmi.tenant, scope="write", name="k", now_ms=acmi.clock()
    )
    looked = apikeys.lookup(acmi.store, plaintext)
    return {**record.to_dict(), "id": None, "found": looked is not None}


def _revoke(acmi: Acmi, name: str) -> object:
    plaintext = f"acmik_{name}_{'y' * 24}"
    record = apikeys.register(
        acmi.store, plaintext, tenant=acmi.tenant, scope="read", name="k", now_ms=acmi.clock()
    )
    return {
        **apikeys.revoke(acmi.store, record.id).to_dict(),
        "id": None,
        "found": apikeys.lookup(acmi.store, plaintext) is not None,
    }


def _source(acmi: Acmi, name: str) -> object:
    config, _token = put_config(acmi.store, acmi.keys, "n8n", entity=f"deal:{name}")
    return config.model_dump(exclude_none=True)


IDEMPOTENT: dict[str, Callable[[Acmi, str], object]] = {
    "heartbeat": lambda a, n: [
        a.agents.heartbeat(n, "ACTIVE", note="n"),
        a.signals.all(f"agent:{n}"),
    ],
    "join": lambda a, n: [a.agents.join(n, "thread:x"), a.agents.active(n)],
    "leave": lambda a, n: [
        a.agents.join(n, "thread:x"),
        a.agents.leave(n, "thread:x"),
        a.agents.active(n),
    ],
    "spawn": lambda a, n: [a.agents.spawn(n, "s1", "m"), a.agents.spawns(n)],
    "set rollup": lambda a, n: [a.agents.set_rollup(n, "sum"), a.agents.rollup(n)],
    "remember hot": lambda a, n: a.memory.remember(f"agent:{n}", "focus", layer="hot"),
    "remember warm": lambda a, n: a.memory.remember(f"agent:{n}", "a fact", layer="warm"),
    "remember daily": lambda a, n: [
        a.memory.remember(f"agent:{n}", "did a thing", layer="daily"),
        a.timeline.size(f"agent:{n}"),
    ],
    "handoff": lambda a, n: a.memory.handoff(f"agent:{n}", "next"),
    "workflow execute": lambda a, n: [
        a.workflows.execute(f"workflow:{n}", "s1", "agent:a", "ran").to_dict(),
        a.timeline.size(f"workflow:{n}"),
    ],
    "workflow assess": lambda a, n: [
        a.workflows.assess(f"workflow:{n}", "s1", 4, ["clear"], "agent:a").to_dict(),
        a.timeline.size(f"workflow:{n}"),
    ],
    "workflow improve": lambda a, n: [
        a.workflows.improve(f"workflow:{n}", "s1", "a lesson", "agent:a").to_dict(),
        a.timeline.size(f"workflow:{n}"),
    ],
    "timeline append": lambda a, n: [
        a.timeline.append(
            f"user:{n}", {"source": "user:m", "kind": "note", "correlationId": "c", "summary": "s"}
        ),
        a.timeline.size(f"user:{n}"),
    ],
    "profile set": lambda a, n: a.profile.set(f"user:{n}", {"name": "N"}),
    "profile merge": lambda a, n: a.profile.merge(f"user:{n}", {"name": "N"}),
    "api key register": _register,
    "api key revoke": _revoke,
    "source set": _source,
}


# The request whose reply is lost: a write's script, or, for an API key (one-key steps, no
# script: auth/apikeys.py), its index entry and its revoked mark.
LOST_REPLY_OF: dict[str, str] = {"api key register": '"HSET"', "api key revoke": '"SADD"'}


def _plain(value: object) -> object:
    """JSON-able: dataclasses and models by their dicts, an error by its class."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@pytest.fixture
def tenants(upstash_store: UpstashStore, clock: FakeClock) -> Iterator[Callable[[], Acmi]]:
    yield lambda: Acmi(upstash_store, Settings(), clock=clock, tenant=_name("t"))


@pytest.mark.parametrize("write", sorted(IDEMPOTENT))
def test_an_idempotent_write_whose_reply_is_lost_answers_as_its_first_run(
    tenants: Callable[[], Acmi], upstash_double: UpstashDouble, write: str
) -> None:
    """The write's script reply is lost (the first EVALSHA after the reads, or the
    request ``LOST_REPLY_OF`` names): its retry
    rewrites the same values, and the call answers exactly what the same call answers
    without the fault, in a tenant of its own (names replaced by one placeholder)."""
    op = IDEMPOTENT[write]

    def observe(lose: bool) -> tuple[str, int]:
        acmi, name = tenants(), _name("e")
        op(acmi, _name("warm"))  # loads its scripts, fills the caches
        upstash_double.reset_counts()
        if lose:
            upstash_double.lose_reply_matching(LOST_REPLY_OF.get(write, '"EVALSHA"'))
        try:
            seen: object = _plain(op(acmi, name))
        except AcmiError as exc:
            seen = type(exc).__name__
        text = json.dumps(seen, sort_keys=True, default=str)
        return text.replace(name, "NAME").replace(acmi.tenant, "TENANT"), upstash_double.requests

    clean, clean_requests = observe(False)
    lost, lost_requests = observe(True)
    assert lost_requests == clean_requests + 1  # the lost reply was retried
    assert lost == clean
    assert upstash_double.lose_reply_pending() == 0

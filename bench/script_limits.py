"""Every script at the largest inputs the limits allow, in Redis's own time (SLOWLOG).

A Lua script blocks the whole Redis (every tenant) while it runs, so each script is
bounded by the bytes it reads and the work it does. Each case below fills a store with
the most a script can be made to read (objects at MAX_OBJECT_BYTES in a shape slow to
scan, events as large as a request body may be, every count at its cap) and runs the
operation that calls the script; the script's time is each EVAL/EVALSHA's SLOWLOG
duration. Part of the write_limits section (bench/write_limits.py), and the drill in
tests/integration/test_script_bounds.py. Also the usual writes' Redis time per run
(per_write_us), through apply.lua and lean.lua side by side.

One module: every script's case at its limits, the timing helpers they share and the
usual writes' per-run figure, so the drill, the bench section and the bounds test read
one list."""

from __future__ import annotations

import hashlib
import itertools
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from acmi_core import Acmi, Settings
from acmi_core.base.keys import (
    CHANGED,
    COORDINATION_THREAD,
    MEMORY_ARCHIVE,
    MEMORY_VECTORS,
    MEMORY_VECTORS_PASS,
    MENTIONS_PER_EVENT,
    SPAWNS,
)
from acmi_core.base.model import MAX_EDIT_FIELDS, MAX_OBJECT_BYTES, EntityId, dumps
from acmi_core.base.pages import MAX_PAGE_BYTES, MAX_PAGE_SIZE
from acmi_core.bootstrap.budget import CAPS, READ_BYTES
from acmi_core.bootstrap.bundle import MAX_EVENTS
from acmi_core.entities.api import MAX_CAT_ENTITIES, MAX_CAT_LIMIT
from acmi_core.entities.timeline_parts import event_parts
from acmi_core.jobs import sweep
from acmi_core.jobs.quarterly import TRIM_BYTES, TRIM_MEMBERS
from acmi_core.memory.vectors import MARK_CHUNK, PASS_TTL_MS, PRUNE_CHUNK
from acmi_core.store import scripts, writes
from acmi_core.store.base import Arg, Reply, Script, ScriptDialect, Store
from acmi_core.store.counting import CountingStore
from acmi_core.store.redis import RedisStore
from acmi_core.store.scripts import Value

BUDGET_MS: Final = 50.0  # what one script run may block Redis for
# The largest event a write through the API carries: a request body of at most
# ACMI_MAX_BODY_BYTES (256 KiB by default), less the envelope.
EVENT_BYTES: Final = Settings().max_body_bytes - 1024
AGENT: Final = "agent:drill"
# The bootstrap's timeline events: the largest a write carries, as many as a bootstrap
# may ask for (its event reads stop at budget.READ_BYTES, whatever the count)
TIMELINE_EVENT_BYTES: Final = EVENT_BYTES - 300
NOW: Final = int(time.time() * 1000) - 3_600_000  # an hour ago: every ts is in the past
# each script by its SHA as sent plain and under each shebang a store may send it with
NAMES: Final = {
    sha: p.name
    for p in scripts.PROTOCOLS
    for dialect in (
        ScriptDialect(shebang=False),
        ScriptDialect(shebang=True),
        ScriptDialect(shebang=True, key_locking=True),
    )
    for sha in (dialect.render(p.script)[1],)
}
_SCRIPT_CALLS: Final = (b"EVALSHA", b"EVAL", b"EVALSHA_RO", b"EVAL_RO")


@dataclass(frozen=True)
class ScriptCase:
    name: str
    script: str  # the protocol whose runs are timed (scripts.PROTOCOLS names)
    what: str
    prepare: Callable[[Acmi], Callable[[], object]]  # fills the store, returns the call
    # the call's runs after the timed one (a bootstrap of a new session: its daily-note
    # line, one plan), each a plain write timed by its own case
    then: tuple[str, ...] = ()


def _pad(size: int, text: str = "") -> str:
    """A string value of about ``size`` bytes once JSON, ``text`` at its end."""
    return "x" * max(0, size - len(text)) + text


def _slow_object(size: int = MAX_OBJECT_BYTES) -> dict[str, int]:
    """An object of ``size`` bytes as JSON made of as many members as fit: the shape the
    object scanner spends most on per byte (bench/write_limits.py's "many members")."""
    out: dict[str, int] = {}
    used = 2
    i = 0
    while used + len(f'"{i:x}":0,') <= size:
        out[f"{i:x}"] = 0
        used += len(f'"{i:x}":0,')
        i += 1
    return out


def _near_misses(budget: int) -> str:
    """Text that names the agent's id inside longer ids, over and over: what a scan for
    mentions would test one by one (agent:drill-0, @drill.1, x@drill, ...)."""
    parts, size, i = [], 0, 0
    while size < budget:
        part = f"{AGENT}-{i} @drill.{i} x@drill "
        parts.append(part)
        size += len(part)
        i += 1
    return "".join(parts)[:budget]


def _bootstrap(acmi: Acmi) -> Callable[[], object]:
    """Every section at its cap: 200 coordination events of EVENT_BYTES mentioning the
    agent among near misses, CAPS['work'] work items with 64 KiB profile and signals,
    both HITL queues full, a profile and signals at the object cap, MAX_EVENTS timeline
    events of TIMELINE_EVENT_BYTES, all asked for; and a spawn logged, its session looked
    for among CAPS['spawn_sessions'] spawns another tool wrote (READ_BYTES of them, the
    newest whatever the clock says, none of its session)."""
    for i in range(200):
        note = _near_misses(EVENT_BYTES - 200) + f" {AGENT}"
        acmi.timeline.append(
            COORDINATION_THREAD,
            {
                "source": "bench",
                "kind": "note",
                "correlationId": "drill",
                "summary": f"n{i}",
                "ts": NOW - 10_000 + i,
                "payload": {"note": note},
            },
        )
    acmi.profile.set(AGENT, {"pad": _pad(MAX_OBJECT_BYTES - 200)})
    acmi.signals.replace(AGENT, _slow_object(MAX_OBJECT_BYTES - 200))
    for i in range(CAPS["work"]):
        acmi.work.create(f"drill-{i}", {"name": _pad(MAX_OBJECT_BYTES - 300)}, owner=AGENT)
    for i in range(CAPS["hitl"]):
        for to in (AGENT, None):
            acmi.hitl.create(
                f"t{i}",
                _pad(1000),
                asked_by="agent:asker",
                addressee=to,
                correlation_id=f"drill-{i}-{to is None}",
            )
    for i in range(MAX_EVENTS):
        acmi.timeline.append(
            AGENT,
            {
                "source": "bench",
                "kind": "note",
                "correlationId": "drill",
                "summary": f"e{i}",
                "ts": NOW - 100 + i,
                "payload": {"pad": _pad(TIMELINE_EVENT_BYTES)},
            },
        )
    spawns = acmi.keys.slot(EntityId.parse(AGENT), SPAWNS)
    window = CAPS["spawn_sessions"]
    for i in range(window):
        ts = NOW + 10**12 + i
        record = {"ts": ts, "session_id": f"foreign-{i}", "model_id": "m"}
        member = dumps({**record, "pad": _pad(READ_BYTES // window - 100)})
        acmi.store.execute(("ZADD", spawns, ts, member))
    sessions = itertools.count()
    acmi.bootstrap(AGENT)  # this process has seen the agent: its open work and its zone
    return lambda: acmi.bootstrap(
        AGENT, events=MAX_EVENTS, spawn={"session_id": f"s-{next(sessions)}", "model_id": "m"}
    )


def _sweep(acmi: Acmi) -> Callable[[], object]:
    """MARK_BATCH agents silent for over 48 h with signals at the object cap, slow to scan."""
    signals = _slow_object(MAX_OBJECT_BYTES - 100)
    for i in range(sweep.MARK_BATCH):
        agent = f"agent:silent-{i}"
        acmi.agents.heartbeat(agent, now=NOW - sweep.STALL_AFTER_MS - 60_000)
        acmi.signals.replace(agent, signals)
    batch = [
        (f"agent:silent-{i}", NOW - sweep.STALL_AFTER_MS - 60_000) for i in range(sweep.MARK_BATCH)
    ]
    # one run of the script: the job's own step (the job runs it until the batch is done)
    return lambda: sweep._mark(acmi, batch)


def _apply(acmi: Acmi) -> Callable[[], object]:
    """An edit of MAX_EDIT_FIELDS fields on an object at the cap, slow to scan."""
    stored = _slow_object(MAX_OBJECT_BYTES - 6 * MAX_EDIT_FIELDS)
    names = list(stored)
    step = max(1, len(names) // MAX_EDIT_FIELDS)
    edit = {names[i * step]: 1 for i in range(MAX_EDIT_FIELDS)}
    acmi.signals.replace("user:drill", stored)
    return lambda: acmi.signals.update("user:drill", edit)


def _store_items(acmi: Acmi) -> Callable[[], object]:
    """A batch of store writes at both caps: WRITES_PER_PLAN overwrites of items at the
    object cap (each HPUT reads the item it replaces), WRITE_PLAN_BYTES of new text, all in
    one namespace with a TTL (the namespace and expiry indexes kept for each)."""
    from acmi_core.entities.items import WRITE_PLAN_BYTES, WRITES_PER_PLAN, ItemWrite

    namespace = ("drill", "n" * 100)
    big = {"text": _pad(MAX_OBJECT_BYTES - 200)}
    for start in range(0, WRITES_PER_PLAN, 4):
        acmi.items.write([ItemWrite(namespace, f"k{n:04d}", big) for n in range(start, start + 4)])
    small = {"text": _pad(WRITE_PLAN_BYTES // WRITES_PER_PLAN - 200)}
    batch = [ItemWrite(namespace, f"k{n:04d}", small, 60.0) for n in range(WRITES_PER_PLAN)]
    return lambda: acmi.items.write(batch)


def _locks(acmi: Acmi) -> Callable[[], object]:
    """A claim refused (coord-defer, indexed under both agents) on a held lease."""
    resource = "drill:" + "r" * 194  # the longest name allowed
    acmi.locks.claim(resource, "agent:holder", 3_600_000)
    counter = iter(range(10**6))

    def refused_claim() -> object:
        try:
            return acmi.locks.claim(resource, f"agent:claimant-{next(counter)}", 60_000)
        except Exception as exc:  # the Conflict is the case
            return exc

    return refused_claim


def _hedge(acmi: Acmi) -> Callable[[], object]:
    """A claim hedged by a reference agent's raw coord-claim behind HEDGE_EVENTS - 1
    coord-releases of others naming the resource, all decoded, HEDGE_BYTES in all."""
    from acmi_core.base.keys import COORDINATION_THREAD
    from acmi_core.coordination.locks import HEDGE_BYTES, HEDGE_EVENTS

    resource = "drill:" + "h" * 194
    now = acmi.clock()
    size = HEDGE_BYTES // HEDGE_EVENTS - 200  # each member's padding: the window at its cap
    events = [
        {
            "ts": now - HEDGE_EVENTS + i,
            "source": f"agent:ref-{i}",
            "kind": "coord-claim" if i == 0 else "coord-release",
            "correlationId": f"ref-{i}",
            "summary": "the reference's Lock-Protocol",
            "payload": {"resource": resource, "note": _pad(size)},
        }
        for i in range(HEDGE_EVENTS)
    ]
    acmi.timeline.extend(COORDINATION_THREAD, events)
    counter = iter(range(10**6))

    def hedged_claim() -> object:
        try:
            return acmi.locks.claim(resource, f"agent:claimant-{next(counter)}", 60_000)
        except Exception as exc:  # the Conflict is the case
            return exc

    return hedged_claim


def _lean(acmi: Acmi) -> Callable[[], object]:
    """An extend of as many events as one request carries (one lean.lua run: a ZADD NX
    each, and the indexes), each call new events on a timeline of many."""
    counter = iter(range(10**6))
    acmi.timeline.extend("user:drill-lean", [_event(f"seed-{i}") for i in range(5000)])
    fits = len(event_parts([dumps(_event("x" * 12), "e")] * 2000, False)[0])

    def extend() -> object:
        run = next(counter)
        return acmi.timeline.extend(
            "user:drill-lean", [_event(f"r{run:04d}-{i:06d}") for i in range(fits)]
        )

    return extend


def _event(correlation: str) -> dict[str, Any]:
    return {"source": "agent:drill", "kind": "note", "correlationId": correlation, "summary": "s"}


def _hitl(acmi: Acmi) -> Callable[[], object]:
    """A resolve of an item with the largest request text, posting hitl-resolved."""
    counter = iter(range(10**6))

    cids = [f"drill-r-{i}" for i in range(64)]
    for cid in cids:
        acmi.hitl.create("t", _pad(4000), asked_by=AGENT, addressee="agent:to", correlation_id=cid)
    return lambda: acmi.hitl.resolve(cids[next(counter)], _pad(4000), by="agent:to")


def _work(acmi: Acmi) -> Callable[[], object]:
    """A work item's signals edit of MAX_EDIT_FIELDS fields on signals at the cap."""
    acmi.work.create("drill-w", {"name": "w"}, owner=AGENT)
    stored = _slow_object(MAX_OBJECT_BYTES - 8 * MAX_EDIT_FIELDS)
    acmi.store.execute(("SET", acmi.keys.signals(EntityId.parse("work:drill-w")), dumps(stored)))
    names = list(stored)
    step = max(1, len(names) // MAX_EDIT_FIELDS)
    edit = {names[i * step]: 2 for i in range(MAX_EDIT_FIELDS - 1)}
    return lambda: acmi.work.signal("drill-w", edit)


def _hygiene(acmi: Acmi) -> Callable[[], object]:
    """A trim of TRIM_MEMBERS members (the most ZSCOREs a run), the largest fitting."""
    entity = EntityId.parse("user:drill-trim")
    key = acmi.keys.timeline(entity)
    pad = _pad(TRIM_BYTES // TRIM_MEMBERS - 30)
    members = [dumps({"i": i, "pad": pad}) for i in range(TRIM_MEMBERS)]
    archive = acmi.keys.slot(entity, MEMORY_ARCHIVE)

    def trim() -> object:
        acmi.store.execute(("ZADD", key, *[x for m in members for x in (NOW, m)]))
        return scripts.HYGIENE.eval(
            acmi.store,
            {
                "timeline": key,
                "archive": archive,
                "replay": acmi.keys.request(scripts.new_request_id()),
            },
            {
                "mode": "trim",
                "quarter": "",
                "doc": "",
                "member_count": len(members),
                "members": [x for m in members for x in (m, str(NOW))],
            },
        )

    return trim


# unlog.lua's caps (store/lua/unlog.lua MAX_AT_TS, MAX_AT_TS_BYTES): the events at one ts
# it reads, at most
UNLOG_AT_TS: Final = 64
UNLOG_AT_TS_BYTES: Final = 1_048_576


def _unlog(acmi: Acmi) -> Callable[[], object]:
    """A delete by ts and id on the coordination thread among UNLOG_AT_TS events at that
    ts, as many bytes as it reads: the id JSON escapes (no plain find holds it), so every
    event is decoded; the one found mentions MENTIONS_PER_EVENT agents, its copies
    removed from their mentions indexes."""
    thread = EntityId.parse(COORDINATION_THREAD)
    key = acmi.keys.timeline(thread)
    agents = [f"agent:drill-{i}" for i in range(MENTIONS_PER_EVENT)]
    size = UNLOG_AT_TS_BYTES // UNLOG_AT_TS - 400
    others = [
        dumps({"ts": NOW, "source": AGENT, "kind": "note", "correlationId": f"o-{i}",
               "summary": "x", "payload": {"pad": _pad(size)}})
        for i in range(UNLOG_AT_TS - 1)
    ]  # fmt: skip
    cid = 'drill-"quoted"'
    target = dumps({"ts": NOW, "source": AGENT, "kind": "note", "correlationId": cid,
                    "summary": " ".join(agents), "payload": {"pad": _pad(size - 600)}})  # fmt: skip
    acmi.store.execute(("ZADD", key, *[x for m in others for x in (NOW, m)]))
    mentions = [acmi.keys.mentions(a.removeprefix("agent:")) for a in agents]
    audit = dumps({"ts": NOW + 1, "source": "acmi", "kind": "event-delete",
                   "correlationId": "unlog-drill", "summary": "deleted one event"})  # fmt: skip

    def delete() -> object:
        acmi.store.execute(("ZADD", key, NOW, target))
        for index in mentions:
            acmi.store.execute(("ZADD", index, NOW, target))
        return scripts.UNLOG.eval(
            acmi.store,
            {
                "timeline": key,
                "changed": acmi.keys.changed(),
                "tenants": acmi.keys.tenants_with(CHANGED),
                "mentions": mentions,
                "replay": acmi.keys.request(scripts.new_request_id()),
            },
            {
                "now": NOW + 1,
                "entity": str(thread),
                "tenant": acmi.keys.tenant,
                "thread": 1,
                "score": str(NOW),
                "id": cid,
                "member": "",
                "audit": audit,
            },
        )

    return delete


def _page(acmi: Acmi) -> Callable[[], object]:
    """A page of MAX_PAGE_SIZE events making MAX_PAGE_BYTES, the page's byte cap."""
    size = MAX_PAGE_BYTES // MAX_PAGE_SIZE - 120
    events = [
        {
            "source": "bench",
            "kind": "note",
            "correlationId": "drill",
            "summary": f"p{i}",
            "ts": NOW + i,
            "payload": {"pad": _pad(size)},
        }
        for i in range(MAX_PAGE_SIZE)
    ]
    for start in range(0, len(events), 100):
        acmi.timeline.extend("user:drill-page", events[start : start + 100])
    # a page from a cursor is the script's (a first page is one ZRANGE)
    cursor = acmi.timeline.page("user:drill-page", limit=1).next_cursor
    return lambda: acmi.timeline.page("user:drill-page", cursor=cursor, limit=MAX_PAGE_SIZE)


def _merge_large(acmi: Acmi) -> Callable[[], object]:
    """A merge of MAX_CAT_ENTITIES timelines of events as large as a write carries, every
    ts tied across them, resumed from a cursor: the page reads the cap and the next event
    of each timeline (and checks the cursor's event again)."""
    names = [f"user:drill-merge{i:02d}" for i in range(MAX_CAT_ENTITIES)]
    for name in names:
        members = {
            dumps(
                {
                    "ts": NOW + k,
                    "source": name,
                    "kind": "note",
                    "correlationId": f"{name}/{k}",
                    "summary": f"m{k}",
                    "payload": {"pad": _pad(TIMELINE_EVENT_BYTES)},
                },
                "event",
            ): NOW + k
            for k in range(8)
        }
        acmi.store.execute(("ZADD", acmi.keys.timeline(EntityId.parse(name)), *_pairs(members)))
    cursor = acmi.timeline.cat_page(names, limit=MAX_CAT_LIMIT).next_cursor
    assert cursor is not None
    return lambda: acmi.timeline.cat_page(names, cursor=cursor, limit=MAX_CAT_LIMIT)


def _merge_small(acmi: Acmi) -> Callable[[], object]:
    """A merge of MAX_CAT_ENTITIES timelines of MAX_CAT_LIMIT small events each, so a page
    takes its MAX_CAT_LIMIT events, about MAX_PAGE_BYTES, from every timeline in turn: the
    most reads and comparisons one page makes."""
    names = [f"user:drill-merge-small{i:02d}" for i in range(MAX_CAT_ENTITIES)]
    size = MAX_PAGE_BYTES // MAX_CAT_LIMIT - 200
    for index, name in enumerate(names):
        members = {
            dumps(
                {
                    "ts": NOW + k * MAX_CAT_ENTITIES + index,
                    "source": name,
                    "kind": "note",
                    "correlationId": f"{name}/{k}",
                    "summary": f"s{k}",
                    "payload": {"pad": _pad(size)},
                },
                "event",
            ): NOW + k * MAX_CAT_ENTITIES + index
            for k in range(MAX_CAT_LIMIT)
        }
        acmi.store.execute(("ZADD", acmi.keys.timeline(EntityId.parse(name)), *_pairs(members)))
    return lambda: acmi.timeline.cat_page(names, limit=MAX_CAT_LIMIT)


def _pairs(members: dict[str, int]) -> list[str | int]:
    return [x for member, score in members.items() for x in (score, member)]


# an index this big (a memory-heavy entity's vectors, ~1 KiB each: Titan v2's 1,024
# dimensions as int8: 50,000 lines' and 20,000 stale), the pass holding the 50,000 lines'
# digests; a sweep step's HSCAN of PRUNE_CHUNK fields, all stale (every one an HEXISTS and
# deleted), the next step each run
VECTOR_FIELDS: Final = 70_000
VECTOR_NEEDED: Final = 50_000
VECTOR_BYTES: Final = 1_040


def _names(n: int, salt: str = "") -> list[str]:
    return [hashlib.blake2b(f"{salt}{i}".encode(), digest_size=8).hexdigest() for i in range(n)]


def _pass_keys(acmi: Acmi) -> dict[str, str]:
    eid = EntityId.parse("agent:drill-vectors")
    return {
        "vectors": acmi.keys.slot(eid, MEMORY_VECTORS),
        "pass": acmi.keys.slot(eid, MEMORY_VECTORS_PASS),
    }


def _fill_pass(acmi: Acmi, keys: dict[str, str], marks: list[str], at: str) -> None:
    meta = ("~pass", "drill", "~gen", "", "~prov", "drill", "~at", at)
    acmi.store.execute(("HSET", keys["pass"], *meta))
    for at_ in range(0, len(marks), 1_000):
        acmi.store.execute(
            ("HSET", keys["pass"], *[x for m in marks[at_ : at_ + 1_000] for x in (m, "1")])
        )


def _vectors(acmi: Acmi) -> Callable[[], object]:
    """A vector prune's sweep step at its largest: PRUNE_CHUNK fields of a VECTOR_FIELDS
    index, every one looked up in a pass of VECTOR_NEEDED digests and all deleted (the
    stale first in the hash: the lines' digests are added after, so the HSCAN meets the
    stale ones' buckets as much as the others'), each run the next step."""
    keys = _pass_keys(acmi)
    names = _names(VECTOR_FIELDS)
    for at in range(0, VECTOR_FIELDS, 1_000):
        pairs = [x for name in names[at : at + 1_000] for x in (name, "v" * VECTOR_BYTES)]
        acmi.store.execute(("HSET", keys["vectors"], *pairs))
    # the pass marks digests no field has (each HEXISTS a miss: every field scanned is
    # deleted), as many as the 50,000 lines' would be
    _fill_pass(acmi, keys, _names(VECTOR_NEEDED, "line"), "done")
    cursor = ["0"]

    def call() -> object:
        args: dict[str, Value] = {"mode": "sweep", "pass": "drill", "ttl": PASS_TTL_MS}
        done = scripts.VECTORS.eval(
            acmi.store, keys, {**args, "cursor": cursor[0], "count": PRUNE_CHUNK}
        )
        cursor[0] = str(done["next"], "ascii") if isinstance(done["next"], bytes) else "0"
        return done

    return call


def _vector_marks(acmi: Acmi) -> Callable[[], object]:
    """A vector prune's mark step at its largest: MARK_CHUNK new digests into a pass that
    holds VECTOR_NEEDED already, each run the next batch."""
    keys = _pass_keys(acmi)
    _fill_pass(acmi, keys, _names(VECTOR_NEEDED, "line"), "(0|0")
    batches = iter(range(10_000))

    def call() -> object:
        n = next(batches)
        return scripts.VECTORS.eval(
            acmi.store,
            keys,
            {
                "mode": "mark",
                "pass": "drill",
                "ttl": PASS_TTL_MS,
                "at": f"({n}|0",
                "next": f"({n + 1}|0",
                "digests": _names(MARK_CHUNK, f"batch{n}-"),
            },
        )

    return call


def cases() -> list[ScriptCase]:
    return [
        ScriptCase(
            "edit at the caps", "lean", f"{MAX_EDIT_FIELDS:,} fields, 64 KiB object", _apply
        ),
        ScriptCase("extend of a full request", "lean", "~990 events and their indexes", _lean),
        ScriptCase(
            "bootstrap, every section full",
            "bootstrap",
            f"200 x {EVENT_BYTES // 1024} KiB mentions, {CAPS['work']} work items of 2 x 64 KiB, "
            f"a spawn's session looked for in {READ_BYTES // 1024} KiB of spawns",
            # the open work items guessed from the last call, read in the run, and the new
            # session's start written in it (its zone the one seen last time)
            _bootstrap,
        ),
        ScriptCase(
            "sweep of a full batch",
            "sweep",
            f"{sweep.MARK_BATCH} agents, signals of 64 KiB",
            _sweep,
        ),
        ScriptCase(
            "store batch at the caps",
            "apply",
            "200 overwrites of 64 KiB items, 512 KiB written, with TTLs",
            _store_items,
        ),
        ScriptCase("lock claim refused", "locks", "coord-defer posted and indexed", _locks),
        ScriptCase(
            "lock claim hedged", "locks", "200 coord events decoded, 256 KiB scanned", _hedge
        ),
        ScriptCase("HITL resolve", "hitl", "4 KB request and resolution", _hitl),
        ScriptCase("work signals edit", "work", f"{MAX_EDIT_FIELDS - 1:,} fields, 64 KiB", _work),
        ScriptCase(
            "archive trim",
            "hygiene",
            f"{TRIM_MEMBERS:,} members, {TRIM_BYTES // 1024} KiB",
            _hygiene,
        ),
        ScriptCase(
            "event delete by ts and id",
            "unlog",
            f"{UNLOG_AT_TS} events at one ts, {UNLOG_AT_TS_BYTES // 1024} KiB, all decoded",
            _unlog,
        ),
        ScriptCase(
            "vector prune sweep step",
            "vectors",
            f"HSCAN {PRUNE_CHUNK} of {VECTOR_FIELDS:,} vectors of {VECTOR_BYTES:,} bytes, "
            f"all looked up in a pass of {VECTOR_NEEDED:,} and deleted",
            _vectors,
        ),
        ScriptCase(
            "vector prune mark step",
            "vectors",
            f"{MARK_CHUNK:,} digests into a pass of {VECTOR_NEEDED:,}",
            _vector_marks,
        ),
        ScriptCase("timeline page", "page", f"{MAX_PAGE_SIZE:,} events, 1 MiB", _page),
        ScriptCase(
            "timeline merge, large events",
            "merge",
            f"{MAX_CAT_ENTITIES} timelines of {TIMELINE_EVENT_BYTES // 1024} KiB events, resumed",
            _merge_large,
        ),
        ScriptCase(
            "timeline merge, small events",
            "merge",
            f"{MAX_CAT_ENTITIES} timelines x {MAX_CAT_LIMIT:,} events, {MAX_CAT_LIMIT:,} taken",
            _merge_small,
        ),
    ]


# --- measuring ------------------------------------------------------------------------------


@contextmanager
def slowlog_everything(store: Store, length: int = 4096) -> Iterator[None]:
    """Log every command's duration (SLOWLOG), keeping ``length`` entries; the server's
    settings restored after."""
    settings = {}
    for name in ("slowlog-log-slower-than", "slowlog-max-len"):
        reply = store.execute(("CONFIG", "GET", name))
        assert isinstance(reply, list) and isinstance(reply[1], bytes)
        settings[name] = reply[1]
    store.execute(("CONFIG", "SET", "slowlog-log-slower-than", "0"))
    store.execute(("CONFIG", "SET", "slowlog-max-len", str(length)))
    try:
        yield
    finally:
        for name, value in settings.items():
            store.execute(("CONFIG", "SET", name, value))


def cpu_us(store: Store) -> int:
    """The CPU time Redis's main thread has used (INFO cpu, from getrusage), in us: what
    a script costs whatever else the machine runs, where SLOWLOG's figure is the time
    the command took, preemptions included."""
    info = store.execute(("INFO", "cpu"))
    assert isinstance(info, bytes)
    fields = dict(line.split(":", 1) for line in info.decode().splitlines() if ":" in line)
    seconds = float(fields["used_cpu_sys_main_thread"]) + float(fields["used_cpu_user_main_thread"])
    return round(seconds * 1e6)


@dataclass(frozen=True)
class Run:
    slowlog_ms: float  # the script's run in SLOWLOG
    cpu_ms: float  # Redis's main thread CPU time over the call: that run, and the INFO around it


def run_once(store: Store, case: ScriptCase, call: Callable[[], object]) -> Run:
    """One call of the case: exactly one run of its script (and no other), timed."""
    store.execute(("SLOWLOG", "RESET"))
    before = cpu_us(store)
    call()
    after = cpu_us(store)
    entries = store.execute(("SLOWLOG", "GET", "-1"))
    assert isinstance(entries, list)
    runs: list[tuple[str, int]] = []
    for entry in entries:
        assert isinstance(entry, list) and isinstance(entry[3], list)
        command = entry[3]
        if command[0] in _SCRIPT_CALLS and isinstance(command[1], bytes):
            sha = command[1].decode() if command[0].startswith(b"EVALSHA") else _sha(command[1])
            assert isinstance(entry[2], int)
            runs.append((NAMES.get(sha, sha), entry[2]))
    runs.reverse()  # SLOWLOG lists the newest first: in the order they ran
    assert [name for name, _ in runs] == [case.script, *case.then], (case.name, runs)
    return Run(runs[0][1] / 1000, (after - before) / 1000)


def quiet() -> bool:
    """Whether the machine has a core for Redis (load average at most the cores): then a
    script's SLOWLOG time is its own, not what the OS ran meanwhile."""
    return os.getloadavg()[0] <= (os.cpu_count() or 1)


def _sha(source: bytes) -> str:
    return hashlib.sha1(source).hexdigest()


def measure(url: str, repeats: int) -> list[dict[str, Any]]:
    """Each case ``repeats`` times: its script's fastest and slowest run in SLOWLOG and
    in CPU time."""
    rows: list[dict[str, Any]] = []
    for case in cases():
        store = RedisStore.from_url(url)
        try:
            store.execute(("FLUSHDB",))
            call = case.prepare(Acmi(store, Settings()))
            call()  # loads the script (NOSCRIPT, EVAL): not timed
            with slowlog_everything(store):
                runs = [run_once(store, case, call) for _ in range(repeats)]
            rows.append(
                {
                    "case": case.name,
                    "script": case.script,
                    "what": case.what,
                    "slowlog_best_ms": min(r.slowlog_ms for r in runs),
                    "slowlog_max_ms": max(r.slowlog_ms for r in runs),
                    "cpu_best_ms": min(r.cpu_ms for r in runs),
                    "cpu_max_ms": max(r.cpu_ms for r in runs),
                }
            )
            store.execute(("FLUSHDB",))
        finally:
            store.close()
    return rows


# --- Redis time per write, the usual plans ------------------------------------------------------

TEN_FIELDS: Final = {f"field{i}": f"value number {i}" for i in range(10)}


class _Capture(CountingStore):
    """A store that keeps the last script run's keys and arguments (to run again)."""

    last: tuple[Script, list[str], list[Arg]] | None = None

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        self.last = (script, list(keys), list(args))
        return super().eval(script, keys, args)


def _usual_writes(acmi: Acmi) -> dict[str, Callable[[], object]]:
    """The writes every agent makes, on objects of ten fields: an event appended, one
    signal set (its index SADD and an edit of 2 fields) and a profile merged (the SADD,
    2 fields and the 2 auto-filled)."""
    acmi.signals.replace("user:usual", TEN_FIELDS)
    acmi.profile.set("user:usual", TEN_FIELDS)
    event = {"source": "agent:a", "kind": "note", "correlationId": "c", "summary": "hello"}
    return {
        "timeline append": lambda: acmi.timeline.append("user:usual", event),
        "signals.set": lambda: acmi.signals.set("user:usual", "field3", "v1"),
        "profile.merge": lambda: acmi.profile.merge("user:usual", {"field2": 2, "stage": "x"}),
    }


def _evalsha_us(
    store: Store, calls: int, script: Script, keys: Sequence[str], args: Sequence[Arg]
) -> float:
    """Redis's time per EVALSHA over ``calls`` runs of ``script`` (INFO commandstats
    after RESETSTAT)."""
    store.eval(script, keys, args)  # loads it (NOSCRIPT, EVAL): not timed
    store.execute(("CONFIG", "RESETSTAT"))
    for _ in range(calls):
        store.eval(script, keys, args)
    info = store.execute(("INFO", "commandstats"))
    assert isinstance(info, bytes)
    line = next(x for x in info.decode().splitlines() if x.startswith("cmdstat_evalsha:"))
    stats = dict(kv.split("=", 1) for kv in line.split(":", 1)[1].split(","))
    assert int(stats["calls"]) == calls, stats
    return float(stats["usec"]) / calls


def per_write_us(url: str, calls: int = 2000, rounds: int = 3) -> list[dict[str, Any]]:
    """Each usual write's plan, as the API sends it, run ``calls`` times through apply.lua
    (the interpreter every plan once ran) and through lean.lua (where WritePlan sends
    it), the two alternating ``rounds`` times: the median us per run of each, side by
    side. Each run repeats one plan (a duplicate event, the same values): the same
    reads, checks and writes as a new one."""
    store = RedisStore.from_url(url)
    try:
        store.execute(("FLUSHDB",))
        capture = _Capture(store)
        acmi = Acmi(capture, Settings())
        rows: list[dict[str, Any]] = []
        for name, write in _usual_writes(acmi).items():
            write()
            assert capture.last is not None and capture.last[0] is writes.LEAN, name
            _, keys, args = capture.last
            runs: dict[str, list[float]] = {"apply": [], "lean": []}
            for _ in range(rounds):
                for kind, script in (("apply", writes.APPLY), ("lean", writes.LEAN)):
                    runs[kind].append(_evalsha_us(store, calls, script, keys, args))
            apply_us, lean_us = (statistics.median(runs[s]) for s in ("apply", "lean"))
            rows.append(
                {
                    "write": name,
                    "apply_us": round(apply_us, 2),
                    "lean_us": round(lean_us, 2),
                    "ratio": round(lean_us / apply_us, 2),
                }
            )
        store.execute(("FLUSHDB",))
        return rows
    finally:
        store.close()

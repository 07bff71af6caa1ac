"""8. How cost grows: each operation at growing sizes, with its latency (median of many
calls, interleaved across the sizes, local redis-server, RedisStore), its round trips,
Redis commands and bytes read per call (exact counts, ``acmi_core.store.counting``), and a
verdict computed from those figures.

Groups (each its own table, with its own sizes):

a) one entity's timeline at 10 / 10,000 / 1,000,000 events: append, get (profile,
   signals, newest 50), the newest page of 50, a since/until window of 50 events in the
   middle, the next page from a cursor in the middle, and the next page from a cursor
   half-way through n events that share one ts (what one ``extend`` call without ts
   writes). The timelines are loaded with pipelined ZADDs of event JSON byte for byte as
   ``Event.to_json`` writes it (score = ts), plus the category and change-index entries
   ``TimelineAPI.stage`` writes: two 1,000,000-event timelines take ~12 s and ~700 MB of
   Redis memory (reported). Appends land after the loaded events and are removed after
   each batch, untimed, so every size stays what it says.
b) one category at 100 / 10,000 / 100,000 entities: ``list_page`` (the first page, and a
   full page from the middle of a walk, reached untimed) and whole ``iter_list`` walks,
   per id listed (a sample lists at least ``WALK_ENTITIES`` ids).
c) the wake bundle (``acmi.bootstrap``) of an agent (``build_agent``'s, 50 events) with
   10 / 1,000 / 10,000 more of one kind of coordination state, written through the API:
   leases it holds, open work items it owns, HITL items addressed to it,
   coordination-thread events (a third mention it), threads it joined. One tenant per
   kind and size, so the kinds do not mix.
d) each scheduled job at 100 vs 10,000 idle entities (``bench.jobs``' idle agents: a
   profile, an event, change/activity/wake index entries, all older than the job's last
   run), through ``run_job``: the runs after 10 entities became active (as section 7),
   and the runs with nothing new. Idle = not changed since the job's last run.

The 1,000,000 size is the timeline's only; lists stop at 100,000 entities, bootstrap state
at 10,000 of a kind and jobs at 10,000 idle entities. The whole section takes about 1.5
minutes on a quiet 2-CPU machine (2.5 under heavy load). ``--quick`` runs the smallest
sizes (timeline 10 / 1,000 / 10,000, lists 100 / 1,000, bootstrap 10 / 1,000, jobs
100 / 1,000) in about 10 s.

Verdict (``judge``), on the sizes a row compares (a read: only sizes where it returned a
full page, so the 10-event timeline is shown but not judged): round trips must be equal
(a walk's per id: within ``FLAT_RATIO``), bytes read and Redis commands within
``WITNESS_RATIO`` or ``WITNESS_BYTES`` / ``WITNESS_COMMANDS``; then time, the median's
ratio confirmed by the 10th percentile's (the smaller of the two counts: a noise burst
inflates one size's median, rarely its fast calls): within ``FLAT_RATIO`` is "flat", a
growth exponent (t ~ n^k) up to ``LOG_EXPONENT`` is "log" (what O(log n) plus a constant
gives from 10 to 10^6), anything else "GROWS", with the measured factors and the known
cause when there is one.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence, Sized
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import redis

from acmi_core import Acmi, Settings
from acmi_core.base.errors import StoreCommandError
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.lambdas import FUNCTIONS
from acmi_core.base.model import EntityId
from acmi_core.base.pages import TimelinePosition, member_digest
from acmi_core.jobs.runner import Job, JobRun, load_job, run_job
from acmi_core.store import scripts
from acmi_core.store.base import Arg, Command, Reply, Script
from acmi_core.store.counting import CountingStore
from acmi_core.store.redis import RedisStore
from acmi_core.testing.fleet import KINDS, build_agent
from bench import jobs as job_bench
from bench._infra import Column, RedisServer, median, percentile, table_of

TITLE = "10. How cost grows: latency, round trips and bytes read at growing sizes"
DB = 11  # timeline, lists, bootstrap (the other sections use 0, 5-7, 9, 10)
JOB_DB = 12  # and up: one database per job size, so the sizes are measured side by side

ROUND_BUDGET_MS: Final = 20.0  # timed calls of one size in one round: about this long
FLAT_RATIO: Final = 1.5  # medians within this factor: flat (a shared 2-CPU machine's noise)
LOG_EXPONENT: Final = 0.2  # t ~ n^k with k up to this: log (O(log n) + a constant, 10 -> 1e6)
WITNESS_RATIO: Final = 1.25  # bytes read / commands may differ this much ...
WITNESS_BYTES: Final = 256  # ... or by this many bytes (ids and numbers get longer)
WITNESS_COMMANDS: Final = 2  # ... or by this many commands (section 7's rule)

PAGE: Final = 50  # events per timeline read (get's default, and the pages measured)
LIST_PAGE: Final = 100  # ids per list page (the API's default page size)
WALK_ENTITIES: Final = 10_000  # ids a timed iter_list sample lists at least
STEP_MS: Final = 1_000  # loaded events are one second apart
START_MS: Final = 1_796_000_000_000  # the bench clock; loaded events end before it
LOAD_CHUNK: Final = 2_000  # members per ZADD / SADD while loading
BOOT_EVENTS: Final = 50  # the bootstrap agent's own timeline
AGENT: Final = "agent:scale-engineer"


@dataclass(frozen=True)
class Sizes:
    timeline: tuple[int, ...]
    lists: tuple[int, ...]
    bootstrap: tuple[int, ...]
    jobs: tuple[int, ...]


FULL = Sizes((10, 10_000, 1_000_000), (100, 10_000, 100_000), (10, 1_000, 10_000), (100, 10_000))
QUICK = Sizes((10, 1_000, 10_000), (100, 1_000), (10, 1_000), (100, 1_000))


@dataclass(frozen=True)
class Effort:
    """How many timed calls per size: ``rounds`` of ``batch``, sizes interleaved."""

    rounds: int
    batch: int
    walks: int  # whole iter_list walks per size
    job_runs: int  # measured job runs per size (each after 10 entities became active)
    idle_runs: int  # job runs with nothing new, per size


FULL_EFFORT = Effort(rounds=30, batch=10, walks=7, job_runs=5, idle_runs=21)
QUICK_EFFORT = Effort(rounds=6, batch=5, walks=2, job_runs=3, idle_runs=7)


# --- what a call costs: round trips, commands, bytes read --------------------------------


def reply_bytes(reply: object) -> int:
    """The payload bytes of a reply (strings' lengths, 8 per integer), nested lists too."""
    if isinstance(reply, bytes):
        return len(reply)
    if isinstance(reply, list):
        return sum(reply_bytes(r) for r in reply)
    if isinstance(reply, StoreCommandError):
        return len(str(reply))
    return 8 if isinstance(reply, int) else 0


class Metered(CountingStore):
    """A counting store (requests, commands) that also adds up the bytes it reads."""

    def __init__(self, inner: RedisStore) -> None:
        super().__init__(inner)
        self.bytes_read = 0

    def reset(self) -> None:
        super().reset()
        self.bytes_read = 0

    def execute(self, command: Command) -> Reply:
        reply = super().execute(command)
        self.bytes_read += reply_bytes(reply)
        return reply

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        replies = super().pipeline(commands)
        self.bytes_read += reply_bytes(replies)
        return replies

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        reply = super().eval(script, keys, args)
        self.bytes_read += reply_bytes(reply)
        return reply


class TickClock:
    """A bench clock: ``START_MS`` plus one ms per reading (appends get distinct ts)."""

    def __init__(self, start: int = START_MS) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1
        return self.now


@dataclass
class Rig:
    """ACMI on one flushed database: ``timed`` over a plain RedisStore (what the timings
    use), ``metered`` over the same connection counted (one call per size, untimed)."""

    plain: redis.Redis
    timed: Acmi
    metered: Acmi
    meter: Metered

    def tenant(self, tenant: str) -> tuple[Acmi, Acmi]:
        return self.timed.for_tenant(tenant), self.metered.for_tenant(tenant)


@contextmanager
def rig(server: RedisServer, db: int, clock: Callable[[], int] | None = None) -> Iterator[Rig]:
    settings = Settings(store_timeout_s=30.0)
    store = RedisStore.from_url(server.url_for(db), settings)
    meter = Metered(store)
    plain = redis.Redis.from_url(server.url_for(db))
    plain.flushdb()  # the database only: the script cache is other sections' (and tests')
    # A read's pipeline sends page.lua in its plain form, which a server that has loaded
    # only the flagged form (a script call's) misses once per server; load both, so each
    # figure is the warm count, as in a deployment after its first read.
    plain.script_load(scripts.PAGE.script.source)
    kwargs: dict[str, Any] = {} if clock is None else {"clock": clock}
    try:
        yield Rig(plain, Acmi(store, settings, **kwargs), Acmi(meter, settings, **kwargs), meter)
    finally:
        plain.flushdb()  # the 1M timeline is ~350 MB: give it back before the next group
        plain.close()
        store.close()


# --- timing ---------------------------------------------------------------------------------

Call = Callable[[Acmi], object]


@dataclass
class Figures:
    """One operation at one size."""

    ms: float  # median per call
    round_trips: float
    bytes_read: float
    commands: float | None = None
    full: bool = True  # a read returned a full page (what the verdict compares)
    p10: float = math.nan  # 10th percentile per call: confirms a growth of the median


def metered_call(r: Rig, acmi: Acmi, call: Call, page: int | None = None) -> Figures:
    """``call`` once on a metered client: what it costs, untimed. With ``page``, a read
    returning fewer items (events, entity ids) is not a full page: not judged."""
    r.meter.reset()
    result = call(acmi)
    full = page is None or len(_items(result)) == page
    return Figures(math.nan, r.meter.requests, r.meter.bytes_read, r.meter.commands, full)


def _items(result: object) -> Sized:
    """What a read returned: a page's events or ids, a get's timeline."""
    for name in ("events", "timeline", "entities"):
        items = getattr(result, name, None)
        if isinstance(items, Sized):
            return items
    raise TypeError(f"{type(result).__name__}: no page of items")


def interleaved(
    calls: Mapping[int, Call],
    clients: Mapping[int, Acmi],
    effort: Effort,
    after_batch: Mapping[int, Callable[[], None]] | None = None,
) -> dict[int, tuple[float, float]]:
    """(median, 10th percentile) ms per call of each size's call: ``effort.rounds``
    rounds, in each a batch of individually timed calls per size, the sizes' order
    rotating (machine noise hits every size alike). A batch is ``effort.batch`` calls, or
    fewer for a slow call (``ROUND_BUDGET_MS`` a size a round, at least one call).
    ``after_batch`` runs untimed after each size's batch."""
    sizes = list(calls)
    batch: dict[int, int] = {}
    for size in sizes:  # connections, script caches: untimed, but they size the batch
        start = time.perf_counter()
        calls[size](clients[size])
        took = (time.perf_counter() - start) * 1000
        batch[size] = max(1, min(effort.batch, int(ROUND_BUDGET_MS / max(took, 1e-3))))
        if after_batch and size in after_batch:
            after_batch[size]()
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    for r in range(effort.rounds):
        for size in _rotated(tuple(sizes), r):
            call, acmi, out = calls[size], clients[size], samples[size]
            for _ in range(batch[size]):
                start = time.perf_counter()
                call(acmi)
                out.append((time.perf_counter() - start) * 1000)
            if after_batch and size in after_batch:
                after_batch[size]()
    return {size: (median(v), percentile(v, 10)) for size, v in samples.items()}


def _set_times(figures: Mapping[int, Figures], times: Mapping[int, tuple[float, float]]) -> None:
    for n, (ms, p10) in times.items():
        figures[n].ms, figures[n].p10 = ms, p10


# --- rows and verdicts ----------------------------------------------------------------------


@dataclass
class Row:
    """One operation at growing sizes, and what its verdict compares."""

    group: str
    operation: str
    work: str  # what Redis does per call, and its complexity
    sizes: tuple[int, ...]
    figures: dict[int, Figures]
    unit: str = "ms/call"
    per_entity: bool = False  # a whole walk: round trips compared per entity
    grows_because: str = ""  # the known cause, shown when the verdict is not flat

    def series(self, name: str) -> list[float]:
        return [
            getattr(self.figures[s], name) if s in self.figures else math.nan for s in self.sizes
        ]


@dataclass(frozen=True)
class Verdict:
    text: str
    kind: str  # flat | log | grows | n/a
    time_ratio: float
    size_ratio: float
    exponent: float
    p10_ratio: float = math.nan
    problems: list[str] = field(default_factory=list)


def _grows(values: Sequence[float], ratio_tol: float, abs_tol: float) -> float | None:
    """The factor between the first and last value when it is beyond both tolerances."""
    first, last = values[0], values[-1]
    if not (math.isfinite(first) and math.isfinite(last)) or last - first <= abs_tol:
        return None
    factor = last / first if first > 0 else math.inf
    return factor if factor > ratio_tol else None


def judge(
    sizes: Sequence[int],
    ms: Sequence[float],
    round_trips: Sequence[float],
    bytes_read: Sequence[float],
    *,
    commands: Sequence[float] | None = None,
    p10: Sequence[float] | None = None,
    judged: Sequence[bool] | None = None,
    per_entity: bool = False,
    because: str = "",
) -> Verdict:
    """The verdict on one row's figures (module docstring). With ``p10``, time grows
    only if the 10th percentiles grow too: noise inflates one size's median far more
    often than its fast calls."""
    at = [
        i
        for i in range(len(sizes))
        if (judged is None or judged[i]) and math.isfinite(ms[i]) and ms[i] > 0
    ]
    if len(at) < 2:
        return Verdict("n/a: fewer than two sizes to compare", "n/a", math.nan, math.nan, math.nan)
    lo, hi = at[0], at[-1]
    size_ratio = sizes[hi] / sizes[lo]
    time_ratio = ms[hi] / ms[lo]
    p10_ratio = math.nan
    if p10 is not None and all(math.isfinite(p10[i]) and p10[i] > 0 for i in (lo, hi)):
        p10_ratio = p10[hi] / p10[lo]
    judged_ratio = min(time_ratio, p10_ratio) if math.isfinite(p10_ratio) else time_ratio
    exponent = math.log(judged_ratio) / math.log(size_ratio)
    problems: list[str] = []
    trips = [round_trips[i] for i in at]
    if per_entity:
        factor = _grows(trips, FLAT_RATIO, 0.0)
        if factor is not None:
            problems.append(f"round trips per entity x{factor:.1f}")
    elif len(set(trips)) > 1:
        problems.append("round trips " + " -> ".join(f"{t:g}" for t in trips))
    factor = _grows([bytes_read[i] for i in at], WITNESS_RATIO, WITNESS_BYTES)
    if factor is not None:
        problems.append(f"bytes read x{factor:.1f}")
    if commands is not None:
        factor = _grows([commands[i] for i in at], WITNESS_RATIO, WITNESS_COMMANDS)
        if factor is not None:
            problems.append(f"Redis commands x{factor:.1f}")
    span = f"n {sizes[lo]:,} -> {sizes[hi]:,}"
    timing = f"time x{time_ratio:.2f}"
    if judged_ratio < time_ratio / 1.1:  # the median grew with noise, the fast calls less
        timing += f", p10 x{judged_ratio:.2f}"
    if problems or (judged_ratio > FLAT_RATIO and exponent > LOG_EXPONENT):
        measured = ", ".join([f"{timing} (~n^{exponent:.2f})", *problems])
        cause = because or "not expected: see the Redis work column"
        kind, text = "grows", f"GROWS: {measured}, {span}: {cause}"
    elif judged_ratio > FLAT_RATIO:
        kind, text = "log", f"log ({timing}, {span})"
    else:
        kind, text = "flat", f"flat ({timing}, {span})"
    return Verdict(text, kind, time_ratio, size_ratio, exponent, p10_ratio, problems)


def record(row: Row) -> dict[str, Any]:
    """A row as reported (JSON), its verdict computed from its figures."""
    commands = row.series("commands")
    verdict = judge(
        row.sizes,
        row.series("ms"),
        row.series("round_trips"),
        row.series("bytes_read"),
        commands=commands if any(math.isfinite(c) for c in commands) else None,
        p10=row.series("p10"),
        judged=[s in row.figures and row.figures[s].full for s in row.sizes],
        per_entity=row.per_entity,
        because=row.grows_because,
    )
    return {
        "group": row.group,
        "operation": row.operation,
        "unit": row.unit,
        "sizes": list(row.sizes),
        "ms": row.series("ms"),
        "p10_ms": row.series("p10"),
        "round_trips": row.series("round_trips"),
        "bytes_read": row.series("bytes_read"),
        "commands": commands,
        "judged": [s in row.figures and row.figures[s].full for s in row.sizes],
        "verdict": verdict.kind,
        "verdict_text": verdict.text,
        "time_ratio": verdict.time_ratio,
        "p10_ratio": verdict.p10_ratio,
        "size_ratio": verdict.size_ratio,
        "exponent": verdict.exponent,
        "problems": verdict.problems,
        "work": row.work,
        "known_cause": row.grows_because,
    }


# --- a) one entity's timeline ---------------------------------------------------------------


def event_member(i: int, source: str, tenant: str, t0: int, step: int = STEP_MS) -> str:
    """The i-th loaded event (ts ``t0 + i * step``), byte for byte as
    ``parse_event(...).to_json()`` stores it (the test holds them equal): ~220 bytes with
    a payload, like ``build_agent``'s events."""
    kind = KINDS[i % len(KINDS)]
    files = i % 40 + 1
    return (
        f'{{"ts":{t0 + i * step},"source":"{source}","kind":"{kind}",'
        f'"correlationId":"task-{i // 4}","summary":"{kind} #{i}: parser work, {files} files '
        f'touched","payload":{{"n":{i},"files":{files},"ok":{"true" if i % 5 else "false"}}},'
        f'"speaker_type":"agent","tenant_id":"{tenant}"}}'
    )


def load_timeline(
    plain: redis.Redis, acmi: Acmi, entity: str, n: int, t0: int, step: int = STEP_MS
) -> None:
    """``n`` events on ``entity`` by pipelined ZADDs, with the index entries a write keeps
    (``step`` 0: every event has the same ts, as one ``extend`` call writes them)."""
    eid = EntityId.parse(entity)
    key, tenant = acmi.keys.timeline(eid), acmi.tenant
    pipe = plain.pipeline(transaction=False)
    for start in range(0, n, LOAD_CHUNK):
        args: list[int | str] = []
        for i in range(start, min(n, start + LOAD_CHUNK)):
            args += (t0 + i * step, event_member(i, entity, tenant, t0, step))
        pipe.execute_command("ZADD", key, *args)  # type: ignore[no-untyped-call]
        if len(pipe) >= 50:
            pipe.execute()
    pipe.sadd(acmi.keys.index(eid.category), eid.local_id)
    pipe.zadd(acmi.keys.changed(), {entity: t0 + (n - 1) * step})
    pipe.execute()


def run_cursor(plain: redis.Redis, acmi: Acmi, entity: str, ts: int, run: int) -> str:
    """The cursor ``timeline.page`` returns after the ``run``-th of the events that share
    ``ts`` (built here: walking to the middle of a million-event run takes too long)."""
    key = acmi.keys.timeline(EntityId.parse(entity))
    members: list[bytes] = plain.zrange(key, run - 1, run - 1)  # type: ignore[assignment]
    return TimelinePosition(False, float(ts), run, member_digest(members[0])).encode()


def _get(entity: str) -> Call:
    return lambda a: a.get(entity, events=PAGE)


def _newest(entity: str) -> Call:
    return lambda a: a.timeline.page(entity, limit=PAGE, reverse=True)


def _after(entity: str, cursor: str) -> Call:
    return lambda a: a.timeline.page(entity, cursor=cursor, limit=PAGE)


SAME_TS_CAUSE: Final = (
    "the run of equal ts is skipped member by member: lua/page.lua should resume by rank"
)


def timeline_rows(
    server: RedisServer, sizes: tuple[int, ...], effort: Effort
) -> tuple[list[Row], dict[str, Any]]:
    clock = TickClock()
    t0 = START_MS - 30 * 86_400_000  # a million events at 1 s apart end ~18 days later
    with rig(server, DB, clock) as r:
        entities = {n: f"agent:timeline-{n}" for n in sizes}
        load_s = {}
        for n, entity in entities.items():
            start = time.perf_counter()
            load_timeline(r.plain, r.timed, entity, n, t0)
            load_s[n] = time.perf_counter() - start
            r.timed.profile.set(entity, {"name": entity, "model_id": "claude-opus-4"})
            r.timed.signals.update(entity, {"status": "ACTIVE", "current_task": "scaling"})
        same_ts = {n: f"agent:same-ts-{n}" for n in sizes}
        for n, entity in same_ts.items():
            load_timeline(r.plain, r.timed, entity, n, t0, step=0)
        memory = int(r.plain.info("memory")["used_memory"])
        last_ts = {n: t0 + (n - 1) * STEP_MS for n in sizes}
        mid = {n: t0 + max(0, n // 2 - PAGE // 2) * STEP_MS for n in sizes}

        def trim(n: int) -> Callable[[], None]:
            """Drop what the appends added: the sizes stay what they say."""
            key = r.timed.keys.timeline(EntityId.parse(entities[n]))

            def drop() -> None:
                r.plain.zremrangebyscore(key, f"({last_ts[n]}", "+inf")

            return drop

        cursors: dict[int, str] = {}
        for n in sizes:
            page = r.timed.timeline.page(entities[n], limit=PAGE, since_ms=mid[n])
            if page.next_cursor is not None:
                cursors[n] = page.next_cursor

        in_run = {n: run_cursor(r.plain, r.timed, same_ts[n], t0, n // 2) for n in sizes}

        def append(n: int) -> Call:
            counter = iter(range(10**9))
            event = {"source": "agent:bench", "kind": "note", "correlationId": "scale-append"}
            return lambda a: a.timeline.append(
                entities[n], {**event, "summary": f"append {next(counter)}"}
            )

        def window(n: int) -> Call:
            until = mid[n] + (PAGE - 1) * STEP_MS
            return lambda a: a.timeline.page(
                entities[n], limit=PAGE, since_ms=mid[n], until_ms=until
            )

        # name -> (Redis work, the call per size)
        ops: dict[str, tuple[str, dict[int, Call]]] = {
            "append 1 event": (
                "one lean.lua run: ZADD NX + ZADD (change index) + SADD, O(log N)",
                {n: append(n) for n in sizes},
            ),
            "get (profile, signals, newest 50)": (
                "one pipeline: GET, GET, ZRANGE -50 -1, O(log N + 50)",
                {n: _get(entities[n]) for n in sizes},
            ),
            "timeline page, newest 50": (
                "ZRANGE +inf -inf BYSCORE REV LIMIT 0 51, O(log N + 51)",
                {n: _newest(entities[n]) for n in sizes},
            ),
            "timeline page, since/until window of 50 mid-timeline": (
                "ZRANGE since until BYSCORE LIMIT 0 51, O(log N + 51)",
                {n: window(n) for n in sizes},
            ),
            "timeline page, next 50 from a mid-timeline cursor": (
                "lua/page.lua: ZCOUNT to the cursor's score, then ZRANGE by rank: O(log N + 52)",
                {n: _after(entities[n], cursors[n]) for n in cursors},
            ),
            "timeline page, next 50 from a cursor mid-way through n events of one ts": (
                "lua/page.lua: the run position as a rank (ZCOUNT, ZRANGE by index), O(log N + 52)",
                {n: _after(same_ts[n], in_run[n]) for n in sizes},
            ),
        }
        rows = []
        for name, (work, calls) in ops.items():
            after = {n: trim(n) for n in calls} if name.startswith("append") else {}
            figures = {}
            for n, call in calls.items():
                figures[n] = metered_call(r, r.metered, call, None if after else PAGE)
                if n in after:
                    after[n]()
            _set_times(figures, interleaved(calls, dict.fromkeys(calls, r.timed), effort, after))
            because = SAME_TS_CAUSE if "one ts" in name else ""
            rows.append(Row("timeline", name, work, sizes, figures, grows_because=because))
    extra = {
        "events": list(sizes),
        "load_s": {str(n): s for n, s in load_s.items()},
        "redis_used_memory_mb": memory / 2**20,
    }
    return rows, extra


# --- b) one category's entity list ----------------------------------------------------------


def load_list(plain: redis.Redis, key: str, n: int) -> None:
    """``n`` ids (12 hex characters, as random as real ids) into a category index."""
    pipe = plain.pipeline(transaction=False)
    for start in range(0, n, LOAD_CHUNK):
        ids = [
            hashlib.blake2b(str(i).encode(), digest_size=6).hexdigest()
            for i in range(start, min(n, start + LOAD_CHUNK))
        ]
        pipe.sadd(key, *ids)
    pipe.execute()


def _middle_page(acmi: Acmi, category: str) -> str | None:
    """Walks the category once, untimed: the cursor of the first full page (``LIST_PAGE``
    ids) from the middle of the walk on (an SSCAN step holds 0 to ~COUNT ids), or the first
    page's."""
    cursors: list[str | None] = [None]
    full: list[bool] = []
    while True:
        page = acmi.list_page(category, cursor=cursors[-1], limit=LIST_PAGE)
        full.append(len(page.entities) == LIST_PAGE)
        if page.next_cursor is None:
            break
        cursors.append(page.next_cursor)
    later = [i for i in range(len(cursors) // 2, len(cursors)) if full[i]]
    return cursors[later[0] if later else 0]


def list_rows(server: RedisServer, sizes: tuple[int, ...], effort: Effort) -> list[Row]:
    category = "user"
    with rig(server, DB) as r:
        timed: dict[int, Acmi] = {}
        metered: dict[int, Acmi] = {}
        middle: dict[int, str | None] = {}
        for n in sizes:
            timed[n], metered[n] = r.tenant(f"list-{n}")
            load_list(r.plain, timed[n].keys.index(category), n)
            middle[n] = _middle_page(timed[n], category)

        # a walk sample covers at least WALK_ENTITIES ids: the 100-id category is walked
        # many times over, so its sample is not one 0.1 ms call at the timer's mercy
        laps = {n: -(-WALK_ENTITIES // n) for n in sizes}

        def walk(n: int) -> Call:
            def call(a: Acmi) -> int:
                return sum(1 for _ in range(laps[n]) for _ in a.iter_list(category))

            return call

        def page(cursor: str | None) -> Call:
            return lambda a: a.list_page(category, cursor=cursor, limit=LIST_PAGE)

        ops: dict[str, tuple[str, dict[int, Call]]] = {
            "list_page, first page of 100": (
                "SSCAN 0 COUNT 100, O(100) a step",
                {n: page(None) for n in sizes},
            ),
            "list_page, a middle page of 100": (
                "SSCAN <cursor> COUNT 100, O(100) a step",
                {n: page(middle[n]) for n in sizes},
            ),
            "iter_list, whole category, per entity": (
                "one SSCAN step per page: O(n) in all, O(1) per entity",
                {n: walk(n) for n in sizes},
            ),
        }
        rows = []
        for name, (work, calls) in ops.items():
            per_entity = name.startswith("iter_list")
            full = None if per_entity else LIST_PAGE
            figures = {n: metered_call(r, metered[n], calls[n], full) for n in sizes}
            sampling = Effort(effort.walks, 1, 0, 0, 0) if per_entity else effort
            _set_times(figures, interleaved(calls, timed, sampling))
            if per_entity:  # what the walk cost per id listed (time in µs)
                for n, f in figures.items():
                    ids = laps[n] * n
                    f.ms, f.p10, f.round_trips, f.bytes_read = (
                        f.ms * 1000 / ids,
                        f.p10 * 1000 / ids,
                        f.round_trips / ids,
                        f.bytes_read / ids,
                    )
                    f.commands = None if f.commands is None else f.commands / ids
            unit = "µs/entity" if per_entity else "ms/call"
            rows.append(Row("list", name, work, sizes, figures, unit=unit, per_entity=per_entity))
    return rows


# --- c) the wake bundle with growing coordination state -------------------------------------


def _grow_leases(acmi: Acmi, n: int) -> None:
    for i in range(n):
        acmi.locks.claim(f"scale:res-{i}", AGENT, 3_600_000)


def _grow_work(acmi: Acmi, n: int) -> None:
    for i in range(n):
        acmi.work.create(f"scale-task-{i}", {"title": f"scaling task {i}"}, owner=AGENT)


def _grow_hitl(acmi: Acmi, n: int) -> None:
    for i in range(n):
        acmi.hitl.create(
            f"approve step {i}",
            f"approve the rollout of step {i}",
            asked_by="agent:bentley",
            addressee=AGENT,
            correlation_id=f"scale-hitl-{i}",
        )


def _grow_coordination(acmi: Acmi, n: int) -> None:
    batch: list[dict[str, Any]] = []
    for i in range(n):
        mention = AGENT if i % 3 == 0 else "agent:gemini-cli"
        batch.append(
            {
                "source": "agent:bentley",
                "kind": "handoff-request",
                "correlationId": f"scale-handoff-{i}",
                "summary": f"[handoff] {mention} please take review #{i}",
            }
        )
        if len(batch) == 500:
            acmi.timeline.extend(COORDINATION_THREAD, batch)
            batch = []
    if batch:
        acmi.timeline.extend(COORDINATION_THREAD, batch)


def _grow_threads(acmi: Acmi, n: int) -> None:
    for i in range(n):
        acmi.agents.join(AGENT, f"thread:scale-{i}", "participant")


THREADS_CAUSE: Final = "active_context read past its cap (bootstrap CAPS['threads'])"

# kind -> (row name, what the script reads of it, how to add n of it, known cause of growth)
STATE: Final[dict[str, tuple[str, str, Callable[[Acmi, int], None], str]]] = {
    "leases": (
        "bootstrap, n leases held",
        "ZRANGEBYLEX [agent| LIMIT 0 50 on the lease index, O(log N + 50)",
        _grow_leases,
        "",
    ),
    "work": (
        "bootstrap, n open work items owned",
        "ZRANGE REV 0 19 of its open-work index + 2 GETs each, O(log N + 20)",
        _grow_work,
        "",
    ),
    "hitl": (
        "bootstrap, n HITL items addressed to it",
        "ZRANGE 0 19 of its open queue (and the shared one), O(log N + 20)",
        _grow_hitl,
        "",
    ),
    "coordination": (
        "bootstrap, n coordination events",
        "ZRANGE -200 -1 of the coordination thread, O(log N + 200)",
        _grow_coordination,
        "",
    ),
    "threads": (
        "bootstrap, n threads joined",
        "HLEN, then HGETALL up to 50 threads, else one HSCAN step of COUNT 50: O(50)",
        _grow_threads,
        THREADS_CAUSE,
    ),
}


def bootstrap_rows(
    server: RedisServer, sizes: tuple[int, ...], effort: Effort
) -> tuple[list[Row], dict[str, Any]]:
    rows = []
    build_s: dict[str, dict[str, float]] = {}
    with rig(server, DB) as r:
        for kind, (name, work, grow, because) in STATE.items():
            timed: dict[int, Acmi] = {}
            metered: dict[int, Acmi] = {}
            build_s[kind] = {}
            for n in sizes:
                timed[n], metered[n] = r.tenant(f"boot-{kind}-{n}")
                start = time.perf_counter()
                build_agent(timed[n], AGENT, events=BOOT_EVENTS)
                grow(timed[n], n)
                build_s[kind][str(n)] = time.perf_counter() - start

            def call(a: Acmi) -> object:
                return a.bootstrap(AGENT)

            calls = dict.fromkeys(sizes, call)
            figures = {n: metered_call(r, metered[n], call) for n in sizes}
            _set_times(figures, interleaved(calls, timed, effort))
            rows.append(Row("bootstrap", name, work, sizes, figures, grows_because=because))
    return rows, {"build_s": build_s}


# --- d) scheduled jobs over idle entities ---------------------------------------------------

JOB_WORK: Final = {
    "sweep": "ZRANGE BYSCORE of the activity index from its watermark: O(log N + crossed)",
    "wake": "ZRANGE BYSCORE of the wake index up to now: O(log N + due)",
    "drift-diff": "the change and activity indexes from its watermark: O(log N + changed)",
    "standup-brief": "the change index over the last 24 h, newest first, LIMIT max (500)",
    "rollup-cron": "the change index from its watermark: O(log N + changed)",
    "hygiene": "the memory index from its watermark into its due index: O(log N + due)",
}
STANDUP_CAUSE: Final = (
    "it reads every entity changed in its 24 h window (any category, up to max=500) "
    "to find the thread:* ones"
)


@dataclass
class JobBench:
    """One database per size of idle entities, one clock for all (bench.jobs' fixed one)."""

    rigs: dict[int, Rig]
    clients: dict[int, Acmi]  # over each rig's metered store: bytes read per run
    clock: job_bench.Clock

    def run(self, n: int, job: str, fn: Job, execution_id: str) -> dict[str, Any]:
        """One run through ``run_job`` (as its Lambda handler runs it), with its bytes read."""
        meter = self.rigs[n].meter
        meter.reset()
        run = JobRun(job, execution_id, self.clock.now)
        result = run_job(self.clients[n], run, fn, clock=time.perf_counter)
        return {**result, "bytes_read": meter.bytes_read}

    def warm(self, n: int, job: str, fn: Job) -> None:
        """Runs until the job has no backlog: every idle entity is old news to it
        (rollup-cron visits at most 500 entities a run)."""
        for k in range(100):
            if not self.run(n, job, fn, f"{n}-warm-{k}").get("backlog"):
                return
            self.clock.now += 1_000


def _job_figures(runs: list[dict[str, Any]]) -> Figures:
    ms = [float(x["duration_ms"]) for x in runs]
    return Figures(
        median(ms),
        max(float(x["requests"]) for x in runs),
        median([float(x["bytes_read"]) for x in runs]),
        max(float(x["commands"]) for x in runs),
        p10=percentile(ms, 10),
    )


def job_rows(server: RedisServer, sizes: tuple[int, ...], effort: Effort) -> list[Row]:
    """Per job: warm every size, then ``job_runs`` x (10 entities become active, one run
    per size) and ``idle_runs`` runs per size with nothing new, the sizes' order rotating."""
    rows: list[Row] = []
    with ExitStack() as stack:
        rigs = {n: stack.enter_context(rig(server, JOB_DB + i)) for i, n in enumerate(sizes)}
        clock = job_bench.Clock()
        clients = {n: Acmi(r.meter, r.timed.settings, clock=clock) for n, r in rigs.items()}
        bench = JobBench(rigs, clients, clock)
        for n, r in rigs.items():
            job_bench._idle(r.plain, clients[n], n, clock.now)
        clock.now += 60_000
        for spec in FUNCTIONS:
            if spec.job is None:
                continue
            job, fn = spec.name, load_job(spec.job)
            for n in sizes:
                bench.warm(n, job, fn)
            runs: dict[str, dict[int, list[dict[str, Any]]]] = {
                label: {n: [] for n in sizes} for label in ("10 active", "nothing new")
            }
            for k in range(effort.job_runs):
                clock.now += 60_000
                for n in sizes:
                    job_bench._activate(job, clients[n], clock)
                clock.now += 60_000
                for n in _rotated(sizes, k):
                    runs["10 active"][n].append(bench.run(n, job, fn, f"{n}-active-{k}"))
            for k in range(effort.idle_runs):
                clock.now += 60_000
                for n in _rotated(sizes, k):
                    runs["nothing new"][n].append(bench.run(n, job, fn, f"{n}-idle-{k}"))
            for label, by_size in runs.items():
                figures = {n: _job_figures(by_size[n]) for n in sizes}
                rows.append(
                    Row(
                        "jobs",
                        f"{job}, {label}",
                        JOB_WORK.get(job, "see its module"),
                        sizes,
                        figures,
                        unit="ms/run",
                        grows_because=STANDUP_CAUSE if job == "standup-brief" else "",
                    )
                )
    return rows


def _rotated(sizes: tuple[int, ...], k: int) -> tuple[int, ...]:
    return sizes[k % len(sizes) :] + sizes[: k % len(sizes)]


# --- the section ----------------------------------------------------------------------------


def _cells(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    shown = [fmt(v) for v in values]
    return shown[0] if len(set(shown)) == 1 else " / ".join(shown)


def _num(value: float) -> str:
    if not math.isfinite(value):
        return "n/a"
    if value == int(value):
        return f"{int(value):,}"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value < 1 else f"{value:.2f}"


def _median_at(i: int) -> Callable[[Mapping[str, Any]], str]:
    return lambda rec: _num(rec["ms"][i])


def columns(sizes: Sequence[int]) -> list[Column]:
    cols: list[Column] = [("operation", "operation"), ("unit", "unit")]
    cols += [(f"n={n:,}", _median_at(i)) for i, n in enumerate(sizes)]
    cols += [
        ("round trips", lambda rec: _cells(rec["round_trips"], _num)),
        ("bytes read", lambda rec: _cells(rec["bytes_read"], _num)),
        ("verdict", "verdict_text"),
        ("Redis work per call", "work"),
    ]
    return cols


GROUP_TITLES: Final = {
    "timeline": "a) one entity's timeline, n events",
    "list": "b) one category, n entities",
    "bootstrap": "c) bootstrap, n of one kind of coordination state",
    "jobs": "d) scheduled jobs, n idle entities (+ 10 active)",
}


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    sizes, effort = (QUICK, QUICK_EFFORT) if quick else (FULL, FULL_EFFORT)
    timeline, timeline_extra = timeline_rows(server, sizes.timeline, effort)
    lists = list_rows(server, sizes.lists, effort)
    boot, boot_extra = bootstrap_rows(server, sizes.bootstrap, effort)
    jobs = job_rows(server, sizes.jobs, effort)
    groups = {"timeline": timeline, "list": lists, "bootstrap": boot, "jobs": jobs}
    records = {name: [record(row) for row in rows] for name, rows in groups.items()}
    group_sizes = {
        "timeline": sizes.timeline,
        "list": sizes.lists,
        "bootstrap": sizes.bootstrap,
        "jobs": sizes.jobs,
    }
    all_rows = [rec for recs in records.values() for rec in recs]
    not_flat = [rec["operation"] for rec in all_rows if rec["verdict"] == "grows"]
    biggest = str(max(sizes.timeline))
    note = (
        f"Local redis-server, RedisStore, one client. Latency: median of {effort.rounds} "
        f"rounds of up to {effort.batch} calls per size (~{ROUND_BUDGET_MS:.0f} ms a size a "
        f"round), sizes interleaved; whole walks: {effort.walks} per size; jobs: "
        f"{effort.job_runs} runs after 10 entities became active and {effort.idle_runs} with "
        "nothing new, per size. Round trips, Redis commands and bytes read: exact counts of "
        f"one call. The largest timelines ({int(biggest):,} events, plain and one-ts) are "
        f"the only sizes that big: one loaded in {timeline_extra['load_s'][biggest]:.1f} s, "
        f"Redis at {timeline_extra['redis_used_memory_mb']:,.0f} MB with all of them. Reads "
        f"are judged on the sizes where they return a full page ({PAGE} events, "
        f"{LIST_PAGE} ids). Verdict: flat = time within x{FLAT_RATIO} (the median's ratio, "
        f"or the 10th percentile's when smaller), log = t ~ n^k with k <= {LOG_EXPONENT}, "
        "GROWS = steeper, or round trips / bytes read / commands that grow."
    )
    if not_flat:
        note += " Not flat: " + "; ".join(not_flat) + "."
    return {
        "rows": all_rows,
        "groups": records,
        "sizes": {name: list(s) for name, s in group_sizes.items()},
        "timeline": timeline_extra,
        "bootstrap": boot_extra,
        "not_flat": not_flat,
        "tables": {
            GROUP_TITLES[name]: table_of(columns(group_sizes[name]), recs)
            for name, recs in records.items()
        },
        "note": note,
    }

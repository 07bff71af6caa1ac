"""7. Scheduled jobs: what one run costs over 10,000 idle entities + 10 active ones, next to
100 idle + the same 10. A job's cost must grow with what changed, never with all entities:
the two columns' commands are equal (± a constant). Each job runs through ``run_job`` (as
its Lambda handler does) on a local redis-server, which counts requests and commands.

Per job and size: the idle entities are written first (raw pipelines: profile, an event,
their change-index entry, a fresh heartbeat, a wake slot due tomorrow), a first run sets
the job's watermark, then 10 entities become active in the way the job watches (new
events, a 49 h old heartbeat, a wake slot due now, coordination traffic) and the measured
run handles them."""

from __future__ import annotations

import time
from typing import Any

import redis

from acmi_core import Acmi, Settings
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.lambdas import FUNCTIONS
from acmi_core.base.model import dumps
from acmi_core.jobs.runner import JobRun, load_job, run_job
from acmi_core.store.redis import RedisStore
from bench._infra import Column, RedisServer, median, table_of

TITLE = "7. Scheduled jobs: one run over idle + active entities (local redis-server)"
DB = 10
ACTIVE = 10
HOUR_MS = 3_600_000
START_MS = 1_796_000_000_000  # a fixed clock: runs are reproducible


class Clock:
    def __init__(self) -> None:
        self.now = START_MS

    def __call__(self) -> int:
        return self.now


def _idle(plain: redis.Redis, acmi: Acmi, n: int, now: int) -> None:
    """``n`` idle agents: written before the first run, so nothing here is news to it."""
    keys = acmi.keys
    pipe = plain.pipeline(transaction=False)
    for i in range(n):
        agent = f"agent:idle-{i}"
        local = f"idle-{i}"
        eid_profile = f"{keys.prefix}agent:{local}:profile"
        pipe.set(eid_profile, dumps({"name": local, "model_id": "claude-opus-4"}))
        event = {
            "ts": now - 2 * HOUR_MS,
            "source": agent,
            "kind": "note",
            "correlationId": f"idle-{i}",
            "summary": "nothing new",
        }
        pipe.zadd(f"{keys.prefix}agent:{local}:timeline", {dumps(event): now - 2 * HOUR_MS})
        pipe.sadd(keys.index("agent"), local)
        pipe.zadd(keys.changed(), {agent: now - 2 * HOUR_MS})
        pipe.zadd(keys.activity(), {agent: now - HOUR_MS})  # heartbeat an hour ago
        pipe.zadd(keys.wake_due(), {agent: now + 24 * HOUR_MS})  # due tomorrow
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()


def _activate(job: str, acmi: Acmi, clock: Clock) -> None:
    """Make ``ACTIVE`` agents news to ``job``."""
    for i in range(ACTIVE):
        agent = f"agent:active-{i}"
        if job == "sweep":  # silent since just before the last run's 48 h line: crosses it now
            acmi.agents.heartbeat(agent, "ACTIVE", now=clock.now - 48 * HOUR_MS + 30_000)
        elif job == "wake":
            acmi.wake.set(agent, minute=0)
            acmi.store.execute(("ZADD", acmi.keys.wake_due(), clock.now - 1, agent))
        elif job == "standup-brief":
            acmi.timeline.append(
                COORDINATION_THREAD,
                {
                    "source": agent,
                    "kind": "deployment-shipped" if i % 2 else "handoff-request",
                    "correlationId": f"task-{i}",
                    "summary": f"{agent} shipped task {i}",
                },
            )
        else:  # rollup-cron, drift-diff: new events on the entity's timeline
            acmi.timeline.append(
                agent,
                {
                    "source": agent,
                    "kind": "handoff-request" if i % 2 else "task-end",
                    "correlationId": f"task-{i}",
                    "summary": f"task {i}: {i * 3} files changed",
                },
            )


def measure(server: RedisServer, job: str, idle: int) -> dict[str, Any]:
    url = server.url_for(DB)
    plain = redis.Redis.from_url(url)
    plain.flushdb()
    clock = Clock()
    store = RedisStore.from_url(url)
    acmi = Acmi(store, Settings(), clock=clock)
    spec = next(s for s in FUNCTIONS if s.name == job)
    assert spec.job is not None
    fn = load_job(spec.job)
    try:
        _idle(plain, acmi, idle, clock.now)
        clock.now += 60_000
        # idle = already handled: warm runs until the job has no backlog (rollup-cron
        # visits at most 500 entities a run)
        warm_runs = 0
        while True:
            warm = JobRun(job, f"warm-{idle}-{warm_runs}", clock.now)
            first = run_job(acmi, warm, fn, clock=time.perf_counter)
            warm_runs += 1
            if not first.get("backlog") or warm_runs >= 100:
                break
            clock.now += 1_000
        clock.now += 60_000
        _activate(job, acmi, clock)
        clock.now += 60_000
        t0 = time.perf_counter()
        result = run_job(
            acmi, JobRun(job, f"measured-{idle}", clock.now), fn, clock=time.perf_counter
        )
        wall_ms = (time.perf_counter() - t0) * 1000
    finally:
        store.close()
        plain.flushdb()
        plain.close()
    return {
        "job": job,
        "idle": idle,
        "warm_runs": warm_runs,
        "commands": result.get("commands"),
        "requests": result.get("requests"),
        "duration_ms": result.get("duration_ms"),
        "wall_ms": wall_ms,
        "backlog": result.get("backlog"),
    }


COLUMNS: tuple[Column, ...] = (
    ("job", "job"),
    ("commands, N idle + 10", "commands_big"),
    ("commands, 100 idle + 10", "commands_small"),
    ("requests (big / small)", "requests"),
    ("ms (big / small, median)", "ms"),
    ("O(changed)", "flat"),
)


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    sizes = (1_000, 100) if quick else (10_000, 100)
    repeats = 1 if quick else 3
    jobs = [spec.name for spec in FUNCTIONS if spec.kind == "job"]
    rows: list[dict[str, Any]] = []
    raw: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for job in jobs:
        runs: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
        try:
            for _ in range(repeats):
                for size in sizes:  # interleaved
                    runs[size].append(measure(server, job, size))
        except AttributeError as exc:  # a job this bench does not know how to activate
            skipped[job] = str(exc)
            continue
        big, small = runs[sizes[0]], runs[sizes[1]]
        cmd_big = max(r["commands"] for r in big)
        cmd_small = max(r["commands"] for r in small)

        def ms(rs: list[dict[str, Any]]) -> float:
            return median([float(r["duration_ms"]) for r in rs])

        rows.append(
            {
                "job": job,
                "commands_big": cmd_big,
                "commands_small": cmd_small,
                "requests": f"{big[0]['requests']} / {small[0]['requests']}",
                "ms": f"{ms(big):.1f} / {ms(small):.1f}",
                "flat": "yes" if abs(cmd_big - cmd_small) <= 2 else "NO",
            }
        )
        raw[job] = {"big": big, "small": small}
    note = (
        f"N = {sizes[0]:,}. Each job through run_job on a local redis-server: "
        f"{repeats} run(s) per size, "
        "interleaved; commands and requests are exact counts (a script run or a command of "
        "a pipeline is one command), ms is the run's own duration. O(changed): the two "
        "command counts differ by at most 2."
    )
    if skipped:
        note += " Not measured: " + "; ".join(f"{k} ({v})" for k, v in skipped.items())
    return {"jobs": raw, "rows": rows, "table": table_of(COLUMNS, rows), "note": note}

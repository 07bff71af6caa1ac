"""8. Client CPU per operation on local Redis: ours against the reference SDK's commands on
node + ioredis (``bench/contender.py``), on the same redis-server, in interleaved rounds
(ours, node, ours without hiredis when hiredis is installed; one fresh process each). On
a local server a round trip is ~25 µs, so what separates the two is the client's own CPU.

Per round and side: n timed calls of each operation after a warm-up; reported are the
medians over rounds of calls/s and of the per-call p50, and the medians of the per-round
ratios of each (> 1: ours is faster)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

from acmi_core import Acmi, Settings
from acmi_core.store import writes
from acmi_core.store.redis import RedisStore
from bench import contender as c
from bench._infra import Column, RedisServer, median, table_of

TITLE = "8. Client CPU per operation (local Redis): ours vs the reference SDK on node + ioredis"
DB = 14  # the other sections use 0, 5-7 and 9-13 (throughput part c: 15)
GET_ENTITY = "user:cpu-get"
GET_EVENTS = 60  # more than the 50 read, so every get reads a full page

# (row, our op kind, the contender's op kind, what ours does per call)
OPS: tuple[tuple[str, str, str, str], ...] = (
    ("append", "append", "append", "one EVALSHA (lua/lean.lua)"),
    ("signals.set", "signals.set", "signals.set", "one EVALSHA (lua/lean.lua)"),
    ("profile.merge", "profile.merge", "profile.merge", "one EVALSHA (lua/lean.lua)"),
    ("get (50 events)", "get", "get", "one pipeline: GET, GET, ZRANGE"),
    ("get (50 events), Promise.all", "get", "get.all", "one pipeline: GET, GET, ZRANGE"),
)
SIDES = ("ours", "ours_pure", "contender")


def _ops(side: str) -> list[c.Op]:
    """Each side writes its own entities; every get reads the one seeded entity (ours has
    one get: the Promise.all row measures it again, so both rows pair within a round)."""
    out = []
    for row, ours_kind, their_kind, _ in OPS:
        kind = their_kind if side == "contender" else ours_kind
        slug = f"{side}-{kind}".replace("_", "-").replace(".", "-")
        out.append(c.Op(row, kind, GET_ENTITY if kind.startswith("get") else f"user:cpu-{slug}"))
    return out


def _seed(url: str) -> None:
    """The entity every get reads: a profile, signals and GET_EVENTS events, written by
    ours (the reference's layout is the same: acmi:<entity>:<slot>, JSON strings, a ZSET)."""
    with Acmi(RedisStore.from_url(url), Settings()) as acmi:
        acmi.profile.set(GET_ENTITY, {"name": "Bench", "tz": "UTC", "role": "tester"})
        acmi.signals.update(GET_ENTITY, {"status": "busy", "load": 3, "task": "bench"})
        acmi.timeline.extend(
            GET_ENTITY,
            [
                {
                    "source": "agent:bench",
                    "kind": "note",
                    "correlationId": f"seed-{i}",
                    "summary": f"seeded event {i}",
                }
                for i in range(GET_EVENTS)
            ],
        )


def measure(server: RedisServer, *, rounds: int, n: int, warmup: int) -> dict[str, Any]:
    """Interleaved rounds: per side, one Run per round (the contender: none when skipped)."""
    server.flush(DB)
    url = server.url_for(DB)
    _seed(url)
    node = c.node_runtime()
    pure = c.hiredis_importable()
    runs: dict[str, list[c.Run]] = {side: [] for side in SIDES}
    for _ in range(rounds):
        runs["ours"].append(c.run_ours(url, _ops("ours"), n=n, warmup=warmup))
        if isinstance(node, c.Node):
            runs["contender"].append(c.run_node(node, url, _ops("contender"), n=n, warmup=warmup))
        if pure:
            ours_pure = c.run_ours(url, _ops("ours_pure"), n=n, warmup=warmup, hiredis=False)
            runs["ours_pure"].append(ours_pure)
    return {"runs": runs, "node": node, "pure": pure}


def _side(runs: list[c.Run], row: str) -> dict[str, float]:
    timings = [r.ops[row] for r in runs]
    return {
        "ops_per_s": median([t.calls_per_s for t in timings]),
        "p50_us": median([t.p50_us() for t in timings]),
    }


def rows(measured: dict[str, Any]) -> list[dict[str, Any]]:
    runs: dict[str, list[c.Run]] = measured["runs"]
    node = measured["node"]
    out: list[dict[str, Any]] = []
    for row, _, their_kind, ours_does in OPS:
        record: dict[str, Any] = {
            "op": row,
            "ours_does": ours_does,
            "reference_commands": c.REFERENCE_COMMANDS[their_kind],
            "rounds": len(runs["ours"]),
            "contender": node if isinstance(node, str) else runs["contender"][0].runtime,
            "contender_skipped": node if isinstance(node, str) else None,
        }
        nan = float("nan")
        for side in SIDES:
            stats = _side(runs[side], row) if runs[side] else {"ops_per_s": nan, "p50_us": nan}
            record[f"{side}_ops_per_s"] = stats["ops_per_s"]
            record[f"{side}_p50_us"] = stats["p50_us"]
        record["ratio"] = nan
        record["ratio_p50"] = nan
        record["ratio_pure"] = nan
        if runs["contender"]:
            theirs = [r.ops[row].calls_per_s for r in runs["contender"]]
            record["ratio"] = c.paired_ratio([r.ops[row].calls_per_s for r in runs["ours"]], theirs)
            record["ratio_p50"] = c.paired_ratio(  # inverted: > 1 still means ours is faster
                [r.ops[row].p50_us() for r in runs["contender"]],
                [r.ops[row].p50_us() for r in runs["ours"]],
            )
            if runs["ours_pure"]:
                pure = [r.ops[row].calls_per_s for r in runs["ours_pure"]]
                record["ratio_pure"] = c.paired_ratio(pure, theirs)
        out.append(record)
    return out


COLUMNS: tuple[Column, ...] = (
    ("operation", "op"),
    ("ours calls/s", "ours_ops_per_s"),
    ("ours p50 µs", "ours_p50_us"),
    ("ours, no hiredis calls/s", "ours_pure_ops_per_s"),
    ("reference commands", "reference_commands"),
    ("contender calls/s", lambda r: r["contender_skipped"] or r["contender_ops_per_s"]),
    ("contender p50 µs", "contender_p50_us"),
    ("ours / contender, calls/s", "ratio"),
    ("ours / contender, p50", "ratio_p50"),
    ("no hiredis / contender, calls/s", "ratio_pure"),
)


# The write operations whose script's Redis time is measured: (row, the call, a call number)
_WRITES: tuple[tuple[str, Callable[[Acmi, int], object]], ...] = (
    (
        "append",
        lambda a, i: a.timeline.append(
            "user:cpu-redis-append",
            {"source": "agent:bench", "kind": "note", "correlationId": f"r-{i}", "summary": "s"},
        ),
    ),
    ("signals.set", lambda a, i: a.signals.set("user:cpu-redis-signals", f"k{i % 10}", i)),
    ("profile.merge", lambda a, i: a.profile.merge("user:cpu-redis-profile", {f"n{i % 10}": i})),
)


def _script_us(acmi: Acmi, call: Callable[[Acmi, int], object], start: int, n: int) -> float:
    """Redis's own time per script run over ``n`` calls (INFO commandstats, EVALSHA)."""
    acmi.store.execute(("CONFIG", "RESETSTAT"))
    for i in range(start, start + n):
        call(acmi, i)
    stats = acmi.store.execute(("INFO", "commandstats"))
    text = stats.decode() if isinstance(stats, bytes) else str(stats)
    line = next(x for x in text.splitlines() if x.startswith("cmdstat_evalsha:"))
    return float(line.split("usec_per_call=")[1].split(",")[0])


def redis_time(server: RedisServer, *, rounds: int, n: int) -> list[dict[str, Any]]:
    """Each write's script, Redis time per run: the script it runs (lean.lua for an
    append, a signals.set and a merge: plain ops and object edits) and, for the same
    calls, apply.lua (every plan sent to it, as before lean.lua), interleaved round by
    round; medians."""
    server.flush(DB)
    times: dict[tuple[str, str], list[float]] = {}
    with Acmi(RedisStore.from_url(server.url_for(DB)), Settings()) as acmi:
        for r in range(rounds):
            for row, call in _WRITES:
                call(acmi, -1)  # loads the scripts: not timed
                times.setdefault((row, "ours"), []).append(_script_us(acmi, call, r * n, n))
                with mock.patch.dict(writes._LEAN_TYPES, clear=True):  # every plan: apply.lua
                    call(acmi, -2)
                    base = (rounds + r) * n
                    times.setdefault((row, "apply"), []).append(_script_us(acmi, call, base, n))
    out = []
    for row, _ in _WRITES:
        ours, generic = median(times[(row, "ours")]), median(times[(row, "apply")])
        out.append(
            {
                "op": row,
                "script": "lean.lua",
                "ours_us": ours,
                "apply_us": generic,
                "ratio": ours / generic,
            }
        )
    return out


REDIS_COLUMNS: tuple[Column, ...] = (
    ("operation", "op"),
    ("its script", "script"),
    ("Redis µs a run", "ours_us"),
    ("apply.lua µs a run, same calls", "apply_us"),
    ("ratio", "ratio"),
)


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    rounds, n, warmup = (2, 60, 30) if quick else (21, 1000, 300)
    measured = measure(server, rounds=rounds, n=n, warmup=warmup)
    records = rows(measured)
    script_rows = redis_time(server, rounds=2 if quick else 5, n=100 if quick else 2000)
    node, pure = measured["node"], measured["pure"]
    ours_runtime = measured["runs"]["ours"][0].runtime
    contender = node if isinstance(node, str) else measured["runs"]["contender"][0].runtime
    hiredis_note = (
        "ours runs with hiredis and again with it hidden (pure-Python parser)"
        if pure
        else "hiredis is not installed: ours is the pure-Python path only"
    )
    return {
        "rounds": rounds,
        "n": n,
        "warmup": warmup,
        "ours_runtime": ours_runtime,
        "contender_runtime": contender,
        "rows": records,
        "summary": {r["op"]: r["ratio"] for r in records},
        "table": table_of(COLUMNS, records),
        "script_rows": script_rows,
        "tables": {"redis_time_per_write_script": table_of(REDIS_COLUMNS, script_rows)},
        "note": (
            f"{rounds} interleaved rounds of {n} calls per operation after {warmup} warm-up "
            "calls, one fresh process per side and round; medians over rounds; each ratio is "
            "the median of per-round ratios, > 1 where ours is faster (calls/s: ours/theirs; "
            "p50: theirs/ours, the steadier of the two when other processes take the CPU). "
            f"Ours: {ours_runtime}, "
            f"`Acmi(RedisStore.from_url(...))`; {hiredis_note}. Contender: {contender}, "
            "issuing exactly the reference SDK's commands (its ioredis adapter) with the "
            "same client-side work (id check, event fill, JSON). Ours is one round trip per "
            "call and atomic; the reference's signals.set and profile.merge are two and racy. "
            "Redis time: INFO commandstats usec_per_call of EVALSHA (the script and the "
            "commands it runs), medians of interleaved rounds; apply.lua: the same calls "
            "with every plan sent to the generic interpreter."
        ),
    }

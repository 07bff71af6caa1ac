"""5. Coordination on local Redis (the bench's redis-server): the wake bundle and leases.

a) bootstrap reads/s of a realistic agent (``w.realistic_agent``), JSON and markdown, next
   to the reference CLI's bootstrap (6 sequential reads) replayed with plain redis-py, in
   the same loop: rounds of ``batch`` calls per method, the methods' order rotating each
   round; the median round's rate per method, and the ratios.
b) what the bundle costs in a prompt: the raw bytes stored under the keys it reads (plain
   redis-py reads of the same keys and ranges) next to the bundle as JSON and markdown, with
   tokens (``Bundle.tokens``: cl100k when ``acmi[tokens]`` is installed; the raw reads at one
   per 3 UTF-8 bytes), and markdown cut to a 1,000-token budget with what the cut left out.
c) lock latency: claim, release, claim + release, and a contended claim that loses (the
   lease held by another owner), interleaved in one loop, p50/p99; a plain redis-py
   ``SET NX PX`` / ``DEL`` (no fence, no event, no owner check) as the floor.
d) a race: ``RACERS`` threads claim one resource over and over, for ``periods`` lease
   periods; each winner ends its lease alternately by release (after half the TTL) or by
   expiry (it waits the TTL out). Checked with the wall clock and the lock's own fences:
   winners per lease period (exactly 1 each), fences strictly increasing in the order the
   leases were granted, coord-claim / coord-release events equal to grants / releases,
   and one coord-defer per claimant per lease, however often it lost. The shortest TTL
   the lock accepts is 1 s (``acmi_core.coordination.locks.MIN_TTL_MS``), so the race takes about
   0.75 s a period.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis

from acmi_core import Acmi, Settings
from acmi_core.base.errors import Conflict
from acmi_core.base.model import EntityId
from acmi_core.bootstrap.budget import CAPS
from acmi_core.coordination.locks import MIN_TTL_MS
from acmi_core.store.redis import RedisStore
from bench import _workload as w
from bench._infra import Column, RedisServer, median, percentile, table_of

TITLE = "6. Coordination on local Redis (bootstrap, bundle size, locks)"
DB = 9  # the other sections use 0 and 5-7
RACERS = 20
RACE_TTL_MS = MIN_TTL_MS
BUDGET_TOKENS = 1000  # the realistic agent's markdown is ~1,900 tokens: a budget that cuts


@contextmanager
def _rig(server: RedisServer) -> Iterator[tuple[Acmi, redis.Redis]]:
    """ACMI on a flushed db of the local redis-server, and a plain redis-py client on it."""
    server.flush(DB)
    store = RedisStore.from_url(server.url_for(DB), Settings(store_timeout_s=10.0))
    plain = redis.Redis.from_url(server.url_for(DB))
    try:
        yield Acmi(store, Settings(store_timeout_s=10.0)), plain
    finally:
        plain.close()
        store.close()


def _ms() -> float:
    return time.time() * 1000  # the clock acmi.clock (system_clock) reads too


# --- a) bootstrap reads/s ------------------------------------------------------------------


def _reference_keys(agent: str) -> dict[str, str]:
    return {
        slot: f"acmi:{agent}:{slot}"
        for slot in ("profile", "signals", "active_context", "rollup:latest", "timeline", "spawns")
    }


def reference_bootstrap_raw(plain: redis.Redis, agent: str) -> list[Any]:
    """The reference CLI's six sequential requests (``w.reference_bootstrap``), redis-py."""
    k = _reference_keys(agent)
    return [
        plain.get(k["profile"]),
        plain.get(k["signals"]),
        plain.hgetall(k["active_context"]),
        plain.get(k["rollup:latest"]),
        plain.zrevrange(k["timeline"], 0, 19),
        plain.zrevrange(k["spawns"], 0, 4, withscores=True),
    ]


def reference_bootstrap_decoded(plain: redis.Redis, agent: str) -> dict[str, Any]:
    """The same, every stored JSON text decoded (what the CLI does before printing)."""
    profile, signals, active, rollup, timeline, spawns = reference_bootstrap_raw(plain, agent)
    return {
        "profile": json.loads(profile) if profile else None,
        "signals": json.loads(signals) if signals else None,
        "active_context": {k.decode(): json.loads(v) for k, v in active.items()},
        "rollup": json.loads(rollup) if rollup else None,
        "timeline": [json.loads(m) for m in timeline],
        "spawns": [json.loads(m) for m, _ in spawns],
    }


def bootstrap_methods(acmi: Acmi, plain: redis.Redis, agent: str) -> dict[str, Callable[[], Any]]:
    return {
        "acmi bootstrap, JSON": lambda: acmi.bootstrap(agent),
        "acmi bootstrap, markdown": lambda: acmi.bootstrap(agent, format="markdown"),
        "reference, 6 reads (redis-py)": lambda: reference_bootstrap_raw(plain, agent),
        "reference, 6 reads + JSON decode": lambda: reference_bootstrap_decoded(plain, agent),
    }


def measure_rates(
    methods: dict[str, Callable[[], Any]], *, rounds: int, batch: int
) -> dict[str, list[float]]:
    """Calls/s per method per round; the methods run back to back in each round, in an
    order that rotates, so machine noise hits all of them alike."""
    names = list(methods)
    for call in methods.values():  # connections, caches: untimed
        call()
    rates: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            call = methods[name]
            start = time.perf_counter()
            for _ in range(batch):
                call()
            rates[name].append(batch / (time.perf_counter() - start))
    return rates


RATE_BASELINES = ("reference, 6 reads (redis-py)", "reference, 6 reads + JSON decode")


def server_us(plain: redis.Redis, reference_calls: int) -> tuple[float, float]:
    """Redis's own time per bootstrap since the last CONFIG RESETSTAT (INFO commandstats):
    ACMI's script (EVALSHA, the only script run meanwhile), and the reference's six
    commands per bootstrap over ``reference_calls`` of them."""
    stats: dict[str, dict[str, float]] = plain.info("commandstats")

    def usec(command: str) -> float:
        return float(stats.get(f"cmdstat_{command}", {}).get("usec", 0))

    evals = stats.get("cmdstat_evalsha", {}).get("calls", 0)
    ours = usec("evalsha") / evals if evals else float("nan")
    theirs = sum(usec(c) for c in ("get", "hgetall", "zrevrange")) / reference_calls
    return ours, theirs


def rate_rows(rates: dict[str, list[float]], server: tuple[float, float]) -> list[dict[str, Any]]:
    medians = {name: median(values) for name, values in rates.items()}
    raw, decoded = (medians[name] for name in RATE_BASELINES)
    return [
        {
            "method": name,
            "reads_per_s": rate,
            "ms_per_read": 1000 / rate,
            "server_us_per_read": server[1] if name in RATE_BASELINES else server[0],
            "vs_reference_raw": rate / raw,
            "vs_reference_decoded": rate / decoded,
            "rounds": len(rates[name]),
        }
        for name, rate in medians.items()
    ]


# --- b) the bundle's size ------------------------------------------------------------------


def _size(reply: Any) -> int:
    """Bytes of every member/value (and hash field) in a redis-py reply."""
    if reply is None:
        return 0
    if isinstance(reply, bytes):
        return len(reply)
    if isinstance(reply, dict):
        return sum(_size(k) + _size(v) for k, v in reply.items())
    if isinstance(reply, list | tuple):
        return sum(_size(item) for item in reply)
    return 0  # a score


def raw_reference_bytes(plain: redis.Redis, agent: str) -> int:
    """What the reference bootstrap's six reads return."""
    profile, signals, active, rollup, timeline, spawns = reference_bootstrap_raw(plain, agent)
    return sum(
        _size(r) for r in (profile, signals, active, rollup, timeline, [m for m, _ in spawns])
    )


def raw_script_bytes(acmi: Acmi, plain: redis.Redis, agent: str) -> int:
    """What lua/bootstrap.lua reads, read again with plain redis-py: the reference's six
    reads plus both HITL queues, the agent's leases, its open work items with their
    profiles and signals, its workflows, the scanned lessons (200, of which the bundle
    keeps the agent's) and the agent's mentions index."""
    keys, eid = acmi.keys, EntityId.parse(agent)
    total = raw_reference_bytes(plain, agent)
    total += _size(plain.zrange(keys.hitl_queue(eid, "open"), 0, CAPS["hitl"] - 1))
    total += _size(plain.zrange(keys.hitl_queue(None, "open"), 0, CAPS["hitl"] - 1))
    leases = plain.zrangebylex(keys.leases(), f"[{agent}|", f"({agent}}}", 0, CAPS["locks"])
    total += _size(leases)
    items: list[bytes] = plain.zrevrange(keys.work_open(eid), 0, CAPS["work"] - 1)  # type: ignore[assignment]
    for item in items:
        base = f"{keys.prefix}work:{item.decode()}:"
        total += len(item) + _size(plain.get(base + "profile")) + _size(plain.get(base + "signals"))
    total += _size(plain.zrevrange(keys.agent_workflows(eid), 0, CAPS["workflows"] - 1))
    total += _size(plain.zrevrange(keys.lessons(), 0, CAPS["lessons_scanned"] - 1))
    mentions = keys.mentions(eid.local_id)  # the agent's mentions, indexed by the writes
    total += _size(plain.zrange(mentions, -CAPS["coordination_scanned"], -1))
    return total


def size_rows(acmi: Acmi, plain: redis.Redis, agent: str) -> list[dict[str, Any]]:
    ref = raw_reference_bytes(plain, agent)
    script = raw_script_bytes(acmi, plain, agent)
    as_json = acmi.bootstrap(agent)
    as_md = acmi.bootstrap(agent, format="markdown")
    cut = acmi.bootstrap(agent, format="markdown", max_tokens=BUDGET_TOKENS)
    rows: list[dict[str, Any]] = [
        {"what": "raw: the reference bootstrap's 6 reads", "bytes": ref, "cut": {}},
        {"what": "raw: every key/range the script reads", "bytes": script, "cut": {}},
        {"what": "bundle, JSON", "bytes": as_json.size_bytes, "cut": as_json.cut},
        {"what": "bundle, markdown", "bytes": as_md.size_bytes, "cut": as_md.cut},
        {
            "what": f"bundle, markdown, {BUDGET_TOKENS:,}-token budget",
            "bytes": cut.size_bytes,
            "cut": cut.cut,
        },
    ]
    for row in rows:
        row["tokens"] = -(-row["bytes"] // 3)  # raw reads: one per 3 bytes
        row["vs_reference_raw"] = row["bytes"] / ref
    rows[2]["tokens"], rows[3]["tokens"], rows[4]["tokens"] = (
        as_json.tokens,
        as_md.tokens,
        cut.tokens,
    )
    assert cut.tokens <= BUDGET_TOKENS
    return rows


def _cut_text(cut: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in cut.items()) or "nothing"


# --- c) lock latency -----------------------------------------------------------------------

LOCK_OPS = (
    "claim",
    "release",
    "claim + release",
    "contended claim (loses)",
    "floor: SET NX PX",
    "floor: DEL",
)


def _since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def measure_locks(acmi: Acmi, plain: redis.Redis, n: int) -> dict[str, list[float]]:
    """Per iteration, on a fresh resource: claim, a rival's claim (refused), release, then
    the plain SET NX PX / DEL pair; every call timed alone (ms)."""
    samples: dict[str, list[float]] = {op: [] for op in LOCK_OPS}
    for i in range(-5, n):  # 5 warm-up iterations, dropped
        resource, key = f"bench:lock-{i}", f"bench:plain-{i}"
        t = time.perf_counter()
        lease = acmi.locks.claim(resource, w.AGENT, 60_000)
        claim = _since(t)
        t = time.perf_counter()
        try:
            acmi.locks.claim(resource, "agent:rival", 60_000)
        except Conflict:
            lost = _since(t)
        else:
            raise AssertionError(f"a rival claimed {resource} while it was held")
        t = time.perf_counter()
        acmi.locks.release(resource, lease.owner_token or "")
        release = _since(t)
        t = time.perf_counter()
        plain.set(key, secrets.token_hex(8), nx=True, px=60_000)
        set_nx = _since(t)
        t = time.perf_counter()
        plain.delete(key)
        delete = _since(t)
        if i >= 0:
            for op, ms in zip(
                LOCK_OPS, (claim, release, claim + release, lost, set_nx, delete), strict=True
            ):
                samples[op].append(ms)
    return samples


def lock_rows(samples: dict[str, list[float]]) -> list[dict[str, Any]]:
    return [
        {
            "op": op,
            "n": len(samples[op]),
            "p50_ms": median(samples[op]),
            "p99_ms": percentile(samples[op], 99),
        }
        for op in LOCK_OPS
    ]


# --- d) the race ---------------------------------------------------------------------------


@dataclass
class Grant:
    """One lease granted in the race (times in epoch ms, the lock's clock and the wall's)."""

    fence: int
    owner: str
    now: int  # the claim's own clock reading: the lease runs from here
    expires_at: int
    returned_ms: float  # wall clock when the claim returned
    released_ms: float | None = None  # wall clock when its holder called release


@dataclass
class RaceState:
    periods: int
    deadline: float
    grants: list[Grant] = field(default_factory=list)
    lost: int = 0
    late_releases: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def done(self) -> bool:
        return len(self.grants) >= self.periods or time.monotonic() > self.deadline


def _racer(
    acmi: Acmi, resource: str, index: int, state: RaceState, barrier: threading.Barrier
) -> None:
    owner = f"agent:racer-{index}"
    try:
        acmi.store.execute(("PING",))  # this thread's connection exists before the start
        barrier.wait(timeout=60)
        while not state.done():
            try:
                lease = acmi.locks.claim(resource, owner, RACE_TTL_MS)
            except Conflict:
                with state.lock:
                    state.lost += 1
                continue  # claim again at once: no pause but the holders' TTL waits
            grant = Grant(
                lease.fence, owner, lease.expires_at - RACE_TTL_MS, lease.expires_at, _ms()
            )
            with state.lock:
                state.grants.append(grant)
                by_release = len(state.grants) % 2 == 1  # every other lease is released
            if by_release:
                time.sleep(RACE_TTL_MS / 2000)  # holds half its lease, then releases
                grant.released_ms = _ms()
                try:
                    acmi.locks.release(resource, lease.owner_token or "")
                except Conflict:  # this thread was starved past its expiry: it expired
                    grant.released_ms = None
                    with state.lock:
                        state.late_releases += 1
            else:  # waits its lease out: the next one starts at expiry
                time.sleep(max(0.0, (lease.expires_at - _ms()) / 1000))
    except Exception as exc:  # a racer must never die silently
        state.errors.append(f"{owner}: {type(exc).__name__}: {exc}")


def run_race(acmi: Acmi, plain: redis.Redis, periods: int) -> dict[str, Any]:
    resource = f"bench:race-{secrets.token_hex(4)}"
    state = RaceState(periods, time.monotonic() + periods * RACE_TTL_MS / 1000 * 3 + 30)
    barrier = threading.Barrier(RACERS + 1)
    threads = [
        threading.Thread(target=_racer, args=(acmi, resource, i, state, barrier))
        for i in range(RACERS)
    ]
    for t in threads:
        t.start()
    barrier.wait(timeout=60)
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return race_result(state, elapsed, count_events(acmi, plain, resource))


def count_events(acmi: Acmi, plain: redis.Redis, resource: str) -> dict[str, int]:
    """coord-* events about ``resource`` in the coordination thread, by kind."""
    counts = {"coord-claim": 0, "coord-release": 0, "coord-defer": 0}
    deferred: set[tuple[str, str]] = set()
    members: list[bytes] = plain.zrange(acmi.keys.coordination_timeline(), 0, -1)  # type: ignore[assignment]
    for member in members:
        event = json.loads(member)
        payload = event.get("payload")
        mine = isinstance(payload, dict) and payload.get("resource") == resource
        if mine and event.get("kind") in counts:
            counts[event["kind"]] += 1
            if event["kind"] == "coord-defer":
                deferred.add((str(payload.get("claimant")), str(event.get("correlationId"))))
    counts["distinct claimant+lease deferrals"] = len(deferred)
    return counts


def winners_per_period(grants: list[Grant]) -> list[int]:
    """For each lease (in grant order), the grants that hold it during its period: itself
    plus any later grant that began before the period ended. A period ends at its expiry
    (the lock's clock, which is what the lock compares a claim's own reading against) or,
    sooner, when its holder called release (wall clock, the same clock)."""
    counts = []
    for i, g in enumerate(grants):
        overlapping = sum(
            1
            for later in grants[i + 1 :]
            if later.now < g.expires_at
            and (g.released_ms is None or later.returned_ms < g.released_ms)
        )
        counts.append(1 + overlapping)
    return counts


def race_result(state: RaceState, elapsed_s: float, events: dict[str, int]) -> dict[str, Any]:
    grants = sorted(state.grants, key=lambda g: g.returned_ms)  # granted order, wall clock
    fences = [g.fence for g in grants]
    winners = winners_per_period(grants)
    released = sum(1 for g in grants if g.released_ms is not None)
    return {
        "racers": RACERS,
        "ttl_ms": RACE_TTL_MS,
        "periods": len(grants),
        "periods_wanted": state.periods,
        "elapsed_s": elapsed_s,
        "winners_per_period": winners,
        "one_winner_each": bool(winners) and all(n == 1 for n in winners),
        "fences": fences,
        "fences_increase": all(a < b for a, b in itertools.pairwise(fences)),
        "fences_consecutive": fences == list(range(fences[0], fences[0] + len(fences)))
        if fences
        else False,
        "released": released,
        "expired": len(grants) - released,
        "distinct_winners": len({g.owner for g in grants}),
        "lost_claims": state.lost,
        "late_releases": state.late_releases,
        "claims_per_s": (len(grants) + state.lost) / elapsed_s,
        "events": events,
        "claim_events_match": events["coord-claim"] == len(grants),
        "release_events_match": events["coord-release"] == released,
        # one coord-defer per claimant per lease, however often it polled
        "defer_events_match": events["coord-defer"]
        == events["distinct claimant+lease deferrals"]
        <= min(state.lost, RACERS * len(grants)),
        "errors": state.errors[:5],
    }


# --- the section ---------------------------------------------------------------------------

RATE_COLUMNS: tuple[Column, ...] = (
    ("method", "method"),
    ("reads/s (median round)", "reads_per_s"),
    ("ms/read", "ms_per_read"),
    ("Redis µs/read", "server_us_per_read"),
    ("vs reference raw", "vs_reference_raw"),
    ("vs reference decoded", "vs_reference_decoded"),
)
SIZE_COLUMNS: tuple[Column, ...] = (
    ("what", "what"),
    ("bytes", "bytes"),
    ("est. tokens", "tokens"),
    ("vs reference raw", "vs_reference_raw"),
    ("cut (items)", lambda r: _cut_text(r["cut"])),
)
LOCK_COLUMNS: tuple[Column, ...] = (
    ("operation", "op"),
    ("n", "n"),
    ("p50 ms", "p50_ms"),
    ("p99 ms", "p99_ms"),
)
RACE_COLUMNS: tuple[Column, ...] = (
    ("racers", "racers"),
    ("TTL ms", "ttl_ms"),
    ("lease periods", "periods"),
    (
        "winners per period",
        lambda r: f"{min(r['winners_per_period'])}-{max(r['winners_per_period'])}",
    ),
    ("fences increase", "fences_increase"),
    ("fences", lambda r: f"{r['fences'][0]}..{r['fences'][-1]}" if r["fences"] else "none"),
    ("released / expired", lambda r: f"{r['released']} / {r['expired']}"),
    ("lost claims", "lost_claims"),
    ("coord-claim = grants", "claim_events_match"),
    ("coord-release = releases", "release_events_match"),
    ("one coord-defer per claimant per lease", "defer_events_match"),
    ("s", "elapsed_s"),
)


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    rounds, batch = (3, 20) if quick else (15, 200)
    lock_n = 50 if quick else 1000
    periods = 4 if quick else 10
    with _rig(server) as (acmi, plain):
        w.realistic_agent(acmi)
        plain.config_resetstat()
        samples = measure_rates(bootstrap_methods(acmi, plain, w.AGENT), rounds=rounds, batch=batch)
        rates = rate_rows(samples, server_us(plain, (rounds * batch + 1) * len(RATE_BASELINES)))
        sizes = size_rows(acmi, plain, w.AGENT)
        locks = lock_rows(measure_locks(acmi, plain, lock_n))
    with _rig(server) as (acmi, plain):  # the race's events alone in their thread
        race = run_race(acmi, plain, periods)
    ours = rates[0]
    return {
        "bootstrap_rates": rates,
        "bootstrap_vs_reference_raw": ours["vs_reference_raw"],
        "bootstrap_vs_reference_decoded": ours["vs_reference_decoded"],
        "bundle_sizes": sizes,
        "locks": {r["op"]: r for r in locks},
        "race": race,
        "tables": {
            "bootstrap_reads": table_of(RATE_COLUMNS, rates),
            "bundle_size": table_of(SIZE_COLUMNS, sizes),
            "lock_latency": table_of(LOCK_COLUMNS, locks),
            "lock_race": table_of(RACE_COLUMNS, [race]),
        },
        "note": (
            f"Local redis-server (no injected delay), one process. Bootstrap: the realistic "
            f"agent (300 events), {rounds} rounds x {batch} calls per method, interleaved, "
            "median round; the reference replay is its 6 sequential reads with plain redis-py "
            "(raw replies, and decoded); Redis µs/read is Redis's own time per bootstrap "
            "(INFO commandstats). ACMI's bundle reads every section (HITL, leases, work, "
            "lessons, coordination) in one script and renders it; at a local RTT of ~0.1 ms "
            "one request saves little, so the ratio here is about CPU, not round trips (see "
            "section 2 for both under an injected RTT). Tokens: estimated, 1 per 3 bytes. "
            f"Locks: n = {lock_n} per operation. Race: {RACERS} threads, TTL {RACE_TTL_MS} ms "
            "(the lock's minimum), every other lease released after half its TTL, the others "
            "left to expire; losers claim again at once."
        ),
    }

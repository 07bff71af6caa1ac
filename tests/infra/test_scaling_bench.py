"""bench/scaling.py (section 8, how cost grows): the events it loads are the bytes ACMI
writes, its verdicts follow from the figures (never typed in), and a quick run on a real
redis-server gives every row with exact round trips. Timings are only checked for
presence: this machine is shared and noisy, so no test asserts on a timing."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from acmi_core.base.lambdas import FUNCTIONS
from acmi_core.base.model import parse_event
from acmi_core.testing.redis_server import RedisServer
from bench import scaling
from bench.scaling import judge

ROW_KEYS = {
    "group",
    "operation",
    "unit",
    "sizes",
    "ms",
    "p10_ms",
    "round_trips",
    "bytes_read",
    "commands",
    "judged",
    "verdict",
    "verdict_text",
    "time_ratio",
    "p10_ratio",
    "size_ratio",
    "exponent",
    "problems",
    "work",
    "known_cause",
}
GROUPS = {"timeline", "list", "bootstrap", "jobs"}


# --- what it loads --------------------------------------------------------------------------


@pytest.mark.parametrize("tenant", ["default", "acme-2"])
@pytest.mark.parametrize("step", [scaling.STEP_MS, 0])
@pytest.mark.parametrize("i", [0, 1, 4, 7, 39, 999_999])
def test_loaded_events_are_byte_for_byte_what_acmi_writes(tenant: str, step: int, i: int) -> None:
    """The timeline is loaded raw for speed: each member must be exactly what a write
    through ``timeline.append`` stores (``parse_event(...).to_json()``), or the reads
    would be measured on data ACMI never writes."""
    member = scaling.event_member(i, "agent:timeline-9", tenant, scaling.START_MS, step)
    event = parse_event(json.loads(member), now_ms=0, tenant=tenant)
    assert event.to_json() == member
    assert event.ts == scaling.START_MS + i * step
    assert event.payload == {"n": i, "files": i % 40 + 1, "ok": bool(i % 5)}


# --- verdicts -------------------------------------------------------------------------------


def verdict(ms: list[float], **kw: Any) -> scaling.Verdict:
    sizes = kw.pop("sizes", [10, 10_000, 1_000_000])
    trips = kw.pop("round_trips", [1.0] * len(sizes))
    read = kw.pop("bytes_read", [12_000.0] * len(sizes))
    return judge(sizes, ms, trips, read, **kw)


def test_equal_times_are_flat() -> None:
    v = verdict([0.40, 0.42, 0.44])
    assert v.kind == "flat" and v.text.startswith("flat (time x1.10")
    assert v.size_ratio == 100_000 and math.isclose(v.time_ratio, 1.1)


def test_a_slow_creep_is_log_and_a_steep_one_grows() -> None:
    assert verdict([0.40, 0.60, 0.80]).kind == "log"  # x2 over x100,000: k = 0.06
    steep = verdict([0.40, 4.0, 40.0])  # x100 over x100,000: k = 0.4
    assert steep.kind == "grows"
    assert "time x100.00 (~n^0.40)" in steep.text
    assert "not expected" in steep.text  # no known cause given


def test_a_known_cause_is_named_in_the_verdict() -> None:
    v = verdict([1.0, 50.0, 2500.0], because="HGETALL without a cap")
    assert v.kind == "grows" and v.text.endswith(": HGETALL without a cap")


def test_a_median_grown_by_noise_alone_is_not_growth() -> None:
    """One size's median hit by a noise burst, its fast calls (p10) unchanged: flat."""
    sizes = [100, 1_000, 10_000]
    v = verdict([0.40, 0.41, 1.60], p10=[0.35, 0.35, 0.36], sizes=sizes)
    assert v.kind == "flat"
    assert "p10 x1.03" in v.text and math.isclose(v.time_ratio, 4.0)
    assert verdict([0.40, 0.41, 1.60], sizes=sizes).kind == "grows"  # without p10 it would


def test_growing_bytes_round_trips_or_commands_grow_whatever_the_time() -> None:
    more_bytes = verdict([1.0, 1.0, 1.0], bytes_read=[12_000.0, 60_000.0, 600_000.0])
    assert more_bytes.kind == "grows" and more_bytes.problems == ["bytes read x50.0"]
    more_trips = verdict([1.0, 1.0, 1.0], round_trips=[1.0, 2.0, 3.0])
    assert more_trips.kind == "grows" and more_trips.problems == ["round trips 1 -> 2 -> 3"]
    more_commands = verdict([1.0, 1.0, 1.0], commands=[14.0, 14.0, 40.0])
    assert more_commands.kind == "grows" and more_commands.problems == ["Redis commands x2.9"]


def test_small_absolute_differences_are_not_growth() -> None:
    """Longer ids and numbers: a few bytes more; a job's ± 2 commands (section 7's rule)."""
    v = verdict([1.0, 1.0, 1.0], bytes_read=[100.0, 300.0, 340.0], commands=[14.0, 15.0, 16.0])
    assert v.kind == "flat" and v.problems == []


def test_a_walk_compares_round_trips_per_entity_within_the_flat_ratio() -> None:
    per_id = [0.010, 0.0144, 0.0148]
    walk = verdict([2.0, 2.2, 2.4], round_trips=per_id, per_entity=True)
    assert walk.kind == "flat"
    doubled = verdict([2.0, 2.2, 2.4], round_trips=[0.01, 0.02, 0.03], per_entity=True)
    assert doubled.kind == "grows" and doubled.problems == ["round trips per entity x3.0"]


def test_only_the_judged_sizes_are_compared() -> None:
    """A 10-event timeline returns 10 events, not a page of 50: shown, not compared."""
    v = verdict([0.1, 0.5, 0.52], judged=[False, True, True])
    assert v.kind == "flat" and "n 10,000 -> 1,000,000" in v.text
    lone = verdict([0.1, 0.5, math.nan], judged=[False, True, True])
    assert lone.kind == "n/a"


# --- a quick run on a real redis-server -----------------------------------------------------


@pytest.fixture(scope="module")
def quick(redis_server: RedisServer) -> dict[str, Any]:
    result: dict[str, Any] = scaling.run(redis_server, quick=True)
    return result


def _rejudged(row: dict[str, Any]) -> scaling.Verdict:
    commands = row["commands"]
    return judge(
        row["sizes"],
        row["ms"],
        row["round_trips"],
        row["bytes_read"],
        commands=commands if any(math.isfinite(c) for c in commands) else None,
        p10=row["p10_ms"],
        judged=row["judged"],
        per_entity=row["unit"] == "µs/entity",
        because=row["known_cause"],
    )


@pytest.mark.slow
def test_quick_run_has_every_row_with_its_figures(quick: dict[str, Any]) -> None:
    assert set(quick) >= {"rows", "tables", "note", "groups", "sizes"}
    assert set(quick["groups"]) == GROUPS
    assert quick["sizes"]["timeline"] == list(scaling.QUICK.timeline)
    rows = quick["rows"]
    assert {row["group"] for row in rows} == GROUPS
    for row in rows:
        assert set(row) == ROW_KEYS, row["operation"]
        assert row["sizes"] == quick["sizes"][row["group"]]
        assert row["verdict"] in {"flat", "log", "grows", "n/a"}, row
        judged = [i for i, ok in enumerate(row["judged"]) if ok]
        assert len(judged) >= 2, row["operation"]  # quick sizes still compare two
        for i in judged:
            assert row["ms"][i] > 0 and row["p10_ms"][i] > 0, row["operation"]
            assert row["bytes_read"][i] > 0, row["operation"]
    jobs = {row["operation"].split(",")[0] for row in quick["groups"]["jobs"]}
    assert jobs == {spec.name for spec in FUNCTIONS if spec.kind == "job"}  # every job row
    kinds = {row["operation"] for row in quick["groups"]["bootstrap"]}
    assert len(kinds) == len(scaling.STATE)
    for title, table in quick["tables"].items():  # every row is printed in its table
        group = next(g for g, t in scaling.GROUP_TITLES.items() if t == title)
        assert all(row["operation"] in table for row in quick["groups"][group])


@pytest.mark.slow
def test_quick_run_verdicts_follow_from_the_figures(quick: dict[str, Any]) -> None:
    for row in quick["rows"]:
        again = _rejudged(row)
        assert (row["verdict"], row["verdict_text"]) == (again.kind, again.text), row
        judged = [b for b, ok in zip(row["bytes_read"], row["judged"], strict=True) if ok]
        first, last = judged[0], judged[-1]
        if last - first > scaling.WITNESS_BYTES and last > scaling.WITNESS_RATIO * first:
            assert row["verdict"] == "grows", row  # more bytes read is never called flat
    not_flat = [r["operation"] for r in quick["rows"] if r["verdict"] == "grows"]
    assert quick["not_flat"] == not_flat


@pytest.mark.slow
def test_quick_run_round_trips_are_exact(quick: dict[str, Any]) -> None:
    """Counts, not timings: one request per read, page and append, two per bootstrap of
    an agent with open work, at every size; a job's requests and Redis commands the same
    over 100 or 1,000 idle entities."""
    # the bootstrap's agent has open work, whose items it reads in a second round trip
    for group, trips in (("timeline", 1.0), ("bootstrap", 2.0)):
        for row in quick["groups"][group]:
            measured = [t for t in row["round_trips"] if math.isfinite(t)]
            assert measured and set(measured) == {trips}, row["operation"]
    for row in quick["groups"]["list"]:
        if row["unit"] == "ms/call":
            assert set(row["round_trips"]) == {1.0}, row["operation"]
        else:  # a walk: about one SSCAN step per 100 ids
            assert all(0.005 <= t <= 0.02 for t in row["round_trips"]), row
    for row in quick["groups"]["jobs"]:
        small, big = row["round_trips"]
        assert small == big > 0, row["operation"]
        assert abs(row["commands"][0] - row["commands"][1]) <= scaling.WITNESS_COMMANDS, row

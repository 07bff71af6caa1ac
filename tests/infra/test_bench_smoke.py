"""The benchmark suite's CI smoke: `python -m bench --quick` runs end to end and its JSON
holds every section. Round-trip counts are exact and asserted; timings are only checked
for presence (this machine is shared and noisy: never assert on a timing)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acmi_core.base.lambdas import FUNCTIONS
from bench.__main__ import SECTIONS

pytestmark = pytest.mark.slow  # runs `python -m bench --quick` (~20 s)

ROOT = Path(__file__).resolve().parents[2]

# operation -> round trips (requests to the Upstash double) per call
EXPECTED_ROUND_TRIPS = {
    "get": 1,
    "append": 1,
    "batch": 1,
    "signal set": 1,
    "merge": 1,
    "list": 1,
    "delete": 1,
    "POST events": 1,
    "ingest webhook (warm)": 1,
    # issue 10, on a realistic agent: it has open work, whose items the script reads when
    # this process saw them open last time (every key a script touches is declared in
    # KEYS; the first bootstrap of a process reads them in a second round trip); a new
    # session's start is written in the same run when the agent's zone is the one seen
    # last time (issue 24: the line's day is the agent's zone, which the script reads)
    "bootstrap (+spawn)": 1,
    "bootstrap, markdown, 3k-token budget": 1,
    "work get": 1,
    "work event (+session)": 1,
    "lock claim": 1,
    "lock release": 1,
    "heartbeat": 1,
    "HITL create": 1,
    "HITL resolve": 1,
    "assess": 1,
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "quick.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACMI_", "UPSTASH_"))}
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "### 1. Round trips" in result.stdout  # the tables are printed
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def test_every_section_is_there(report: dict[str, Any]) -> None:
    assert set(report) >= {"meta", *SECTIONS}
    assert report["meta"]["quick"] is True
    for section in SECTIONS:
        assert _number(report[section]["duration_s"]), section


def test_the_largest_allowed_edit_is_timed_by_the_server(report: dict[str, Any]) -> None:
    """Redis's own SLOWLOG time of the worst edit the limits allow (a script blocks every
    client of that Redis while it runs) is reported for every case; the budget itself is
    held by tests/integration/test_write_limits.py."""
    section = report["write_limits"]
    assert _number(section["largest_edit_median_ms"]) and section["largest_edit_median_ms"] > 0
    assert section["cases"] and all(_number(c["median_ms"]) for c in section["cases"].values())
    # the usual writes' Redis time per run, through apply.lua and lean.lua side by side
    per_write = section["per_write_us"]
    assert set(per_write) == {"timeline append", "signals.set", "profile.merge"}
    assert all(
        _number(r["apply_us"]) and _number(r["lean_us"]) and r["lean_us"] > 0
        for r in per_write.values()
    )
    # and every script at its limits (the budget held by tests/integration/test_script_bounds.py)
    scripts = {c["script"] for c in section["scripts"].values()}
    assert scripts == {
        "apply",
        "lean",
        "bootstrap",
        "sweep",
        "locks",
        "hitl",
        "work",
        "hygiene",
        "page",
        "merge",
        "unlog",
        "vectors",
    }
    assert all(_number(c["cpu_best_ms"]) for c in section["scripts"].values())


def test_round_trips_are_the_documented_ones(report: dict[str, Any]) -> None:
    ops = report["round_trips"]["operations"]
    measured = {name: ops[name]["acmi"] for name in EXPECTED_ROUND_TRIPS}
    assert measured == EXPECTED_ROUND_TRIPS
    assert all(ops[name]["stable"] for name in EXPECTED_ROUND_TRIPS)
    # the reference's own pattern, replayed on the same double
    assert ops["get"]["reference_pattern_measured"] == 3
    assert ops["signal set"]["reference_pattern_measured"] == 2
    assert ops["merge"]["reference_pattern_measured"] == 2
    assert ops["bootstrap (+spawn)"]["reference_pattern_measured"] == 7  # 6 reads + ZADD
    assert ops["work get"]["reference_pattern_measured"] == 4
    # a webhook's first request of a process also looks up its key and its source config
    assert ops["ingest webhook (warm)"]["acmi"] == 1
    assert ops["ingest webhook (cold)"]["acmi"] == 3
    # EVALSHA (NOSCRIPT), EVAL refused (OSS Redis 7.0 behind the double has no
    # allow-key-locking: learnt once a process), EVAL
    assert report["round_trips"]["first_write_fresh_server"] == 3


def test_latency_section_measures_each_operation(report: dict[str, Any]) -> None:
    latency = report["latency"]
    assert latency["delay_ms"] > 0
    ops = latency["operations"]
    for name in ("get", "append", "signal set", "ingest (HTTP)"):
        row = ops[name]
        for key in ("p50_ms", "p99_ms", "p50_ratio", "p99_ratio"):
            assert _number(row[key]), (name, key)
    # round trips are counts, not timings: exact
    for name in ("PING", "get", "append", "signal set"):
        assert ops[name]["round_trips"] == 1.0, name
    assert ops["get, reference pattern"]["round_trips"] == 3.0
    for name in ("bootstrap", "lock claim+release", "bootstrap, reference pattern"):
        for key in ("p50_ms", "p99_ms", "p50_ratio", "p99_ratio"):
            assert _number(ops[name][key]), (name, key)
    # the agent has open work, guessed from the warm-up's bootstrap: read in the script
    assert ops["bootstrap"]["round_trips"] == 1.0
    assert ops["bootstrap, reference pattern"]["round_trips"] == 6.0
    assert ops["lock claim+release"]["round_trips"] == 2.0


def test_cold_start_covers_every_function_and_both_baselines(report: dict[str, Any]) -> None:
    probes = report["cold_start"]["probes"]
    assert set(probes) == {
        "python (bare)",
        "fastapi + mangum (bare app)",
        "functions.ingest",
        "functions.entities",
        "functions.docs",
        "functions.mcp",
    }
    for name, row in probes.items():
        assert _number(row["import_ms"]), name
        assert _number(row["import_vs_fastapi_mangum"]), name
        assert _number(row["process_vs_bare_python"]), name
        assert isinstance(row["heavy_modules"], list), name
        assert set(row["heavy_modules"]) <= set(report["cold_start"]["heavy_looked_for"])
    assert probes["python (bare)"]["heavy_modules"] == []


def test_throughput_and_contention(report: dict[str, Any]) -> None:
    throughput = report["throughput"]
    handler = {row["label"]: row for row in throughput["ingest_handler"]}
    assert set(handler) == {"embedded (memory)", "redis-server"}
    for label, row in handler.items():
        assert row["all_stored"], label
        assert set(row["statuses"]) == {"201"}, (label, row["statuses"])
        assert _number(row["events_per_s"]), label
    ours = [r for r in throughput["contention"] if r["method"] == "acmi"]
    assert ours and {r["writers"] for r in ours} >= {1, 16}
    for row in ours:  # no lost update, and exactly one attempt (one request) per write
        assert row["lost"] == 0, row
        assert row["kept"] == row["writes"], row
        assert row["requests_per_write"] == 1.0, row
        assert row["errors"] == [], row
    baselines = {r["method"] for r in throughput["contention"]}
    assert baselines == {"acmi", "naive", "cas"}
    for row in throughput["contention"]:
        if row["method"] == "cas":
            assert row["lost"] == 0, row  # CAS loses nothing either; it retries instead


def test_coordination_bootstrap_rates_and_bundle_sizes(report: dict[str, Any]) -> None:
    section = report["coordination"]
    methods = {row["method"]: row for row in section["bootstrap_rates"]}
    assert set(methods) == {
        "acmi bootstrap, JSON",
        "acmi bootstrap, markdown",
        "reference, 6 reads (redis-py)",
        "reference, 6 reads + JSON decode",
    }
    for name, row in methods.items():
        for key in ("reads_per_s", "vs_reference_raw", "vs_reference_decoded"):
            assert _number(row[key]) and row[key] > 0, (name, key)
    sizes = {row["what"]: row for row in section["bundle_sizes"]}
    for row in sizes.values():
        assert isinstance(row["bytes"], int) and row["bytes"] > 0, row
        assert isinstance(row["tokens"], int) and row["tokens"] > 0, row
    budgeted = sizes["bundle, markdown, 1,000-token budget"]
    assert budgeted["tokens"] <= 1000  # the budget holds, and says what it cut
    assert budgeted["cut"] and budgeted["bytes"] < sizes["bundle, markdown"]["bytes"]
    for name in ("claim", "release", "claim + release", "contended claim (loses)"):
        row = section["locks"][name]
        assert row["n"] > 0 and _number(row["p50_ms"]) and _number(row["p99_ms"]), name


def test_coordination_race_has_one_winner_per_lease_period(report: dict[str, Any]) -> None:
    """20 claimants on one resource: every lease period had exactly one winner, fences
    rose in the order the leases were granted, and the coordination thread holds one
    coord-claim per grant, one coord-release per release, and one coord-defer per claimant
    per lease however often it polled."""
    race = report["coordination"]["race"]
    assert race["errors"] == []
    assert race["racers"] == 20
    assert race["periods"] >= race["periods_wanted"] >= 2
    assert race["winners_per_period"] == [1] * race["periods"]
    assert race["one_winner_each"] is True
    assert race["fences_increase"] is True and race["fences_consecutive"] is True
    assert race["released"] >= 1 and race["expired"] >= 1  # both ways a lease ends
    assert race["events"]["coord-claim"] == race["periods"]
    assert race["events"]["coord-release"] == race["released"]
    defers = race["events"]["coord-defer"]
    assert defers == race["events"]["distinct claimant+lease deferrals"]
    assert 1 <= defers <= min(race["lost_claims"], 20 * race["periods"])
    assert race["defer_events_match"] is True


def test_every_job_costs_the_same_over_1000_or_100_idle_entities(report: dict[str, Any]) -> None:
    """Each scheduled job's run over N idle + 10 active entities issues as many commands
    as over 100 idle + the same 10: its cost grows with what changed."""
    section = report["jobs"]
    jobs = {row["job"]: row for row in section["rows"]}
    assert set(jobs) == {spec.name for spec in FUNCTIONS if spec.kind == "job"}  # every job row
    for job, row in jobs.items():
        assert row["flat"] == "yes", (job, row)
        assert row["commands_big"] == row["commands_small"] > 0, (job, row)


def test_density_per_fixture_agent(report: dict[str, Any]) -> None:
    """Issue 26's density targets, on the bench's own figures: scaffolding <= 80 tokens,
    the markdown <= 0.6x the reference's minified JSON for the same facts (agents with
    facts), and no budgeted bundle over its budget with either counter."""
    section = report["density"]
    records = {r["agent"]: r for r in section["records"]}
    assert set(records) == {"empty", "idle", "busy", "coordinating", "memory"}
    for name, row in records.items():
        assert row["scaffolding"] <= 80, row
        parts = sum(section["sections"][name].values())  # each part counted alone
        assert abs(parts - row["markdown"]) <= 0.02 * row["markdown"] + 2, (parts, row)
        if row["facts"]:
            assert row["ratio"] <= 0.6 and row["facts_per_1k"] > 0, row
    assert {r["counter"] for r in section["budgets"]["rows"]} == {"cl100k", "estimate"}
    assert all(0 < r["worst"] <= 1 for r in section["budgets"]["rows"])
    assert section["budgets"]["estimate_low"] >= 1


def test_semantic_search_recall_bytes_and_latency(report: dict[str, Any]) -> None:
    """Issue 24, item 1: the labelled set, recall keyword vs hybrid, bytes a line,
    one search's latency on each store, the model's cold start."""
    semantic = report["semantic"]
    assert semantic["queries"] >= 50 and semantic["sharing_no_word"] > semantic["queries"] / 2
    keyword, hybrid = semantic["keyword"], semantic["hybrid"]
    assert hybrid["recall_at_3"] > keyword["recall_at_3"] + 0.2
    assert hybrid["recall_at_10"] > keyword["recall_at_10"] + 0.2
    assert semantic["bytes_per_line"] == 256 + 16
    assert {s["store"] for s in semantic["stores"]} == {
        "memory (embedded)",
        "redis",
        "upstash (REST double)",
    }
    assert all(_number(s["hybrid_ms"]) for s in semantic["stores"])
    assert all(_number(v) for v in semantic["cold_start"].values())

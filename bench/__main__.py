"""python -m bench [--quick] [--json PATH] [--only SECTION ...]

Runs every section (round_trips, latency, cold_start, throughput, write_limits,
coordination, jobs, client_cpu, lambda_path, scaling, cluster, density, semantic), prints
its tables as it goes, writes all figures to JSON (default bench/results/latest.json,
git-ignored) and, after a full run of every section, the committed summary bench/RESULTS.md."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import (
    client_cpu,
    cluster,
    cold_start,
    coordination,
    density,
    jobs,
    lambda_path,
    latency,
    round_trips,
    scaling,
    semantic,
    throughput,
    write_limits,
)
from bench._infra import ROOT, RedisServer, redis_server

SECTIONS = (
    "round_trips",
    "latency",
    "cold_start",
    "throughput",
    "write_limits",
    "coordination",
    "jobs",
    "client_cpu",
    "lambda_path",
    "scaling",
    "cluster",
    "density",
    "semantic",
)
TITLES = {
    "round_trips": round_trips.TITLE,
    "latency": latency.TITLE,
    "cold_start": cold_start.TITLE,
    "throughput": throughput.TITLE,
    "write_limits": write_limits.TITLE,
    "coordination": coordination.TITLE,
    "jobs": jobs.TITLE,
    "client_cpu": client_cpu.TITLE,
    "lambda_path": lambda_path.TITLE,
    "scaling": scaling.TITLE,
    "cluster": cluster.TITLE,
    "density": density.TITLE,
    "semantic": semantic.TITLE,
}
DEFAULT_JSON = ROOT / "bench" / "results" / "latest.json"
RESULTS_MD = ROOT / "bench" / "RESULTS.md"
COMMAND = "python -m bench"

Section = Callable[[RedisServer], dict[str, Any]]  # a section's run, the CLI's options bound


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False
        )
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_commit() -> str | None:
    """The commit measured; "+changes" when tracked files differ from it."""
    commit = _git("rev-parse", "--short", "HEAD")
    if commit and _git("status", "--porcelain", "--untracked-files=no"):
        commit += "+changes"
    return commit


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _section_text(title: str, result: dict[str, Any]) -> str:
    parts = [f"### {title}", ""]
    if "table" in result:
        parts += [result["table"], ""]
    for label, table in result.get("tables", {}).items():
        parts += [f"**{label.replace('_', ' ')}**", "", table, ""]
    if result.get("note"):
        parts += [result["note"], ""]
    return "\n".join(parts)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="CI smoke: small N, < 60 s")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write JSON")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    parser.add_argument(
        "--delay-ms", type=float, default=latency.DELAY_MS, help="latency: injected RTT"
    )
    return parser.parse_args(argv)


def _meta(args: argparse.Namespace, sections: tuple[str, ...]) -> dict[str, Any]:
    return {
        "command": COMMAND + (" --quick" if args.quick else ""),
        "quick": args.quick,
        "sections": list(sections),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "commit": _git_commit(),
    }


def _runners(args: argparse.Namespace) -> dict[str, Section]:
    return {
        "round_trips": lambda s: round_trips.run(s, quick=args.quick),
        "latency": lambda s: latency.run(s, quick=args.quick, delay_ms=args.delay_ms),
        "cold_start": lambda s: cold_start.run(quick=args.quick),
        "throughput": lambda s: throughput.run(s, quick=args.quick),
        "write_limits": lambda s: write_limits.run(s, quick=args.quick),
        "coordination": lambda s: coordination.run(s, quick=args.quick),
        "jobs": lambda s: jobs.run(s, quick=args.quick),
        "client_cpu": lambda s: client_cpu.run(s, quick=args.quick),
        "lambda_path": lambda s: lambda_path.run(s, quick=args.quick),
        "scaling": lambda s: scaling.run(s, quick=args.quick),
        "cluster": lambda s: cluster.run(s, quick=args.quick),
        "density": lambda s: density.run(s, quick=args.quick),
        "semantic": lambda s: semantic.run(s, quick=args.quick),
    }


def _run_sections(
    args: argparse.Namespace, sections: tuple[str, ...], report: dict[str, Any]
) -> list[str]:
    """Runs each section on one redis-server into report; returns their printed texts."""
    runners, texts = _runners(args), []
    with redis_server() as server:
        report["meta"]["redis_version"] = server.version
        for name in sections:
            t0 = time.perf_counter()
            print(f"== {name} ...", file=sys.stderr, flush=True)
            result = runners[name](server)
            result["duration_s"] = time.perf_counter() - t0
            report[name] = result
            texts.append(_section_text(TITLES[name], result))
            print(texts[-1], flush=True)
    return texts


def _write_results_md(meta: dict[str, Any], texts: list[str]) -> None:
    header = (
        "# ACMI benchmark results\n\n"
        f"Reproduce: `{COMMAND}` (from the repository root; needs `redis-server` on PATH). "
        f"Last full run: {meta['started']}, commit {meta['commit']}, Python {meta['python']}, "
        f"Redis {meta['redis_version']}, {meta['cpus']} CPUs ({meta['platform']}), "
        f"{meta['duration_s']:.0f} s. Shared, noisy machine: read ratios and medians, "
        "not absolute times.\n\n"
    )
    RESULTS_MD.write_text(header + "\n".join(texts).rstrip() + "\n")
    print(f"wrote {RESULTS_MD}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    sections = tuple(args.only or SECTIONS)
    started = time.perf_counter()
    report: dict[str, Any] = {"meta": _meta(args, sections)}
    texts = _run_sections(args, sections, report)
    report["meta"]["duration_s"] = time.perf_counter() - started
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(_jsonable(report), indent=2) + "\n")
    print(f"wrote {args.json} ({report['meta']['duration_s']:.1f} s)", file=sys.stderr, flush=True)
    if not args.quick and sections == SECTIONS:  # only a full run is the committed summary
        _write_results_md(report["meta"], texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())

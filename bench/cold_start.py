"""3. Cold start: the import time of every Lambda function module in a fresh interpreter
(as a cold start pays it), against a bare FastAPI + mangum app and a bare Python, and the
heavy modules each one loads. The environment is the Lambda one (Upstash store, no
ACMI_API_KEY, no secret ARN); probes are interleaved round-robin so noise hits all alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from bench._infra import ROOT, fmt_table, median

HEAVY = (
    "boto3",
    "aws_lambda_powertools.tracing",
    "jwt",
    "cryptography",
    "fakeredis",
    "redis",
)
UPSTASH_ENV = {
    "UPSTASH_REDIS_REST_URL": "https://eu1-bench-otter-12345.upstash.io",
    "UPSTASH_REDIS_REST_TOKEN": "not-a-real-token",
}

_PROBE = """
import json, sys, time
start = time.perf_counter()
{body}
elapsed = time.perf_counter() - start
heavy = {heavy!r}
print(json.dumps({{"elapsed": elapsed, "heavy": [m for m in heavy if m in sys.modules],
                  "modules": len(sys.modules)}}))
"""

PROBES: dict[str, str] = {
    "python (bare)": "pass",
    "fastapi + mangum (bare app)": (
        "from fastapi import FastAPI\n"
        "from mangum import Mangum\n"
        "handler = Mangum(FastAPI(), lifespan='off')"
    ),
    "functions.ingest": "import functions.ingest",
    "functions.entities": "import functions.entities",
    "functions.docs": "import functions.docs",
}


def _run_probe(body: str, env: dict[str, str]) -> dict[str, Any]:
    code = _PROBE.format(body=body, heavy=HEAVY)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"cold-start probe failed: {result.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    data["wall"] = wall
    return data


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **extra}
    for name in ("HOME", "LANG", "PYENV_VERSION"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def run(*, quick: bool) -> dict[str, Any]:
    runs = 3 if quick else 15
    env = _env(UPSTASH_ENV)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in PROBES}
    for body in PROBES.values():  # one untimed pass: warm the OS file cache
        _run_probe(body, env)
    for _ in range(runs):
        for name, body in PROBES.items():
            results[name].append(_run_probe(body, env))
    # the same modules on the embedded store (local runs, `acmi serve`): loads only
    embedded = {
        name: _run_probe(body, _env({}))["heavy"]
        for name, body in PROBES.items()
        if name.startswith("functions.")
    }
    import_ms = {n: median([r["elapsed"] for r in rs]) * 1000 for n, rs in results.items()}
    wall_ms = {n: median([r["wall"] for r in rs]) * 1000 for n, rs in results.items()}
    bare_app = import_ms["fastapi + mangum (bare app)"]
    bare_py = wall_ms["python (bare)"]
    rows: list[dict[str, Any]] = []
    for name in PROBES:
        rows.append(
            {
                "probe": name,
                "import_ms": import_ms[name],
                "process_ms": wall_ms[name],
                "import_vs_fastapi_mangum": import_ms[name] / bare_app,
                "process_vs_bare_python": wall_ms[name] / bare_py,
                "modules_loaded": results[name][0]["modules"],
                "heavy_modules": results[name][0]["heavy"],
                "heavy_modules_embedded_store": embedded.get(name),
            }
        )
    table = fmt_table(
        [
            "module",
            "import ms",
            "process ms",
            "import / bare app",
            "process / bare python",
            "heavy modules loaded (Upstash env)",
        ],
        [
            [
                r["probe"],
                r["import_ms"],
                r["process_ms"],
                r["import_vs_fastapi_mangum"],
                r["process_vs_bare_python"],
                ", ".join(r["heavy_modules"]) or "none",
            ]
            for r in rows
        ],
    )
    note = (
        f"Fresh interpreters, median of {runs} each, interleaved. import ms: inside the process "
        "around the import; process ms: the whole interpreter, start to exit. Heavy modules "
        f"looked for: {', '.join(HEAVY)}. On the embedded store (no Upstash env) the function "
        "modules also load: "
        + "; ".join(f"{n}: {', '.join(m or []) or 'none'}" for n, m in embedded.items())
        + "."
    )
    return {
        "runs": runs,
        "heavy_looked_for": list(HEAVY),
        "probes": {r["probe"]: r for r in rows},
        "table": table,
        "note": note,
    }

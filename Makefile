# Lambda artifacts for `sam build` (template.yaml: Metadata BuildMethod makefile).
#
# SAM runs `make build-<LogicalId>` with ARTIFACTS_DIR set. Each artifact gets only what
# runs in Lambda: acmi_core/ and functions/ (no tests, docs, .venv) plus the packages of
# requirements-lambda.txt as Linux arm64 wheels for the runtime's CPython, and bytecode
# compiled ahead of time (Lambda's code directory is read-only: without shipped .pyc every
# cold start recompiles fastapi, pydantic, ... from source).

# Keep in step with Globals.Function.Runtime in template.yaml (tests/test_template.py checks).
LAMBDA_PYTHON_VERSION := 3.12
LAMBDA_PLATFORMS := manylinux2014_aarch64 manylinux_2_28_aarch64 manylinux_2_34_aarch64
LAMBDA_REQUIREMENTS := requirements-lambda.txt
PYTHON ?= python$(LAMBDA_PYTHON_VERSION)

# One rule for every function (build-IngestFunction, build-RollupCronFunction, ...): each
# artifact ships the same code, so a new row in acmi_core/lambdas.py needs no edit here.
# acmi_core/testing (the test kit) is not shipped.
build-%Function:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set: run this through sam build" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; v = "$(LAMBDA_PYTHON_VERSION)"; sys.exit(0 if "%d.%d" % sys.version_info[:2] == v else "need Python " + v + " (the Lambda runtime) as $(PYTHON), found " + sys.version.split()[0])'
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-compile \
		$(foreach platform,$(LAMBDA_PLATFORMS),--platform $(platform)) \
		--implementation cp --python-version $(LAMBDA_PYTHON_VERSION) --only-binary=:all: \
		--upgrade --target "$(ARTIFACTS_DIR)" -r $(LAMBDA_REQUIREMENTS)
	rm -rf "$(ARTIFACTS_DIR)/bin"
	tar --exclude=__pycache__ --exclude='*.pyc' --exclude=acmi_core/testing \
		-cf - acmi_core functions | tar -xf - -C "$(ARTIFACTS_DIR)"
	$(PYTHON) -m compileall -q -j 0 --invalidation-mode unchecked-hash "$(ARTIFACTS_DIR)"

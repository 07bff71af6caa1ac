"""The Lambda runtime kit: every module in functions/ is one line built from here.

``http_handler(name)`` and ``job_handler(name)`` turn a row of ``acmi_core.base.lambdas`` into
the callable Lambda invokes. Importing a handler module does no I/O and writes nothing:
the settings, the token secret, the store and the app are built on the first invocation
and reused while the process stays warm.

- HTTP functions: the FastAPI app of the row's routers behind mangum (lifespan off),
  store calls inline (one request per process at a time: no worker thread per request).
- Scheduled functions: exactly EventBridge Scheduler's ``Input`` in, the job's summary
  out; no mangum, no app.
- Both: Powertools Logger (JSON, correlation id) and Metrics (EMF). Tracer is not used
  (its X-Ray import costs ~0.8 s of cold start). The Logger's formatter is Powertools' own,
  with a direct path for a plain message (``InvocationFormatter``: the same line, ~3x
  cheaper); an HTTP invocation appends the Lambda context's keys itself (what
  ``inject_lambda_context`` adds, without building its model per call).
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics import MetricUnit

from acmi_core import Acmi, Settings, Store, open_store
from acmi_core.base.lambdas import FunctionSpec, function, mounted_routers

if TYPE_CHECKING:
    import httpx
    from fastapi import FastAPI

    from acmi_core.ingest.service import GmailFetch

# Invocations that record no metric (docs, 401s) are normal, not worth a warning each.
warnings.filterwarnings("ignore", message="No application metrics to publish")


# The attributes Powertools' formatter treats as a LogRecord's own (a key named so is a
# template, never an extra); tests/infra/test_log_lines.py keeps it equal to Powertools'.
RECORD_ATTRS: frozenset[str] = frozenset(
    [
        "name",
        "msg",
        "args",
        "level",
        "levelname",
        "levelno",
        "pathname",
        "filename",
        "module",
        "exc_info",
        "exc_text",
        "stack_info",
        "lineno",
        "funcName",
        "created",
        "msecs",
        "relativeCreated",
        "thread",
        "threadName",
        "processName",
        "process",
        "asctime",
        "location",
        "timestamp",
    ]
)
# Powertools' default templates of its first keys, and the words json.loads takes whole.
_TEMPLATES: Final = {
    "level": "%(levelname)s",
    "location": "%(funcName)s:%(lineno)d",
    "timestamp": "%(asctime)s",
}
_JSON_WORDS: Final = frozenset(("true", "false", "null", "NaN", "Infinity"))


class InvocationFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON log line, the same keys in the same order, built directly when the
    record is a plain message (a ``str`` with no ``%`` arguments that is not JSON, no
    exception, no stack): Powertools' ``format`` copies the record, tries the message as
    JSON (an exception per line) and walks the keys three times (~28 us a line; this path
    ~9 us). Anything else, and any key that is a template other than Powertools' own
    defaults, goes through Powertools' ``format``. tests/infra/test_log_lines.py compares
    the two byte for byte."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.msg
        if (
            record.exc_info
            or record.stack_info
            or record.args
            or not isinstance(message, str)
            or not message[:1].isalpha()
            or message.rstrip() in _JSON_WORDS
            or self.json_deserializer is not json.loads
        ):
            return str(super().format(record))
        log: dict[str, Any] = {}
        for keys in (self.get_current_keys(), self.thread_safe_get_current_keys()):
            for key, value in keys.items():
                if value and key in RECORD_ATTRS:
                    if value != _TEMPLATES.get(key):
                        return str(super().format(record))
                    log[key] = self._template(key, record)
                else:
                    log[key] = value
        for key, value in record.__dict__.items():
            if key not in RECORD_ATTRS:
                log[key] = value
        log["message"] = message
        trace = None  # Powertools' rule: the env's Root, unless the key was set to None
        if self.get_current_keys().get("xray_trace_id", "") is not None:
            trace = os.environ.get("_X_AMZN_TRACE_ID")
        log["xray_trace_id"] = trace.split(";")[0].replace("Root=", "") if trace else None
        return str(self.serialize({k: v for k, v in log.items() if v is not None}))

    def _template(self, key: str, record: logging.LogRecord) -> str:
        if key == "level":
            return record.levelname
        if key == "location":
            return f"{record.funcName}:{record.lineno}"
        return str(self.formatTime(record))


logger = Logger(service="acmi", logger_formatter=InvocationFormatter())
metrics = Metrics(namespace="ACMI", service="acmi")


def skip_pydantic_v1_checks() -> None:
    """Keep FastAPI from importing ``pydantic.v1`` (25-35 ms of an HTTP cold start, 23
    modules) only to find that no route uses a v1 model. FastAPI asks ``from pydantic import
    v1`` for each parameter of each route; no object can be a v1 model unless ``pydantic.v1``
    has been imported, so the checks first ask ``sys.modules``: the same answers, no import.
    FastAPI offers no public switch for it, so these private helpers are patched and its
    range is bounded to the releases that have them (pyproject.toml); if FastAPI moves
    them, nothing is patched and tests/infra/test_fastapi_compat.py fails."""
    import sys

    from fastapi import encoders

    try:
        from fastapi._compat import shared
    except ImportError:  # moved: a slower cold start, not a broken one
        return

    def only_when_v1_is_loaded(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
        if getattr(check, "acmi_lean", False):
            return check

        def lean(obj: Any) -> bool:
            return "pydantic.v1" in sys.modules and check(obj)

        lean.acmi_lean = True  # type: ignore[attr-defined]
        return lean

    for module in (shared, encoders):
        for name in ("is_pydantic_v1_model_class", "is_pydantic_v1_model_instance"):
            if callable(check := getattr(module, name, None)):
                setattr(module, name, only_when_v1_is_loaded(check))


Event = dict[str, Any]
Invoke = Callable[[Event, Any], dict[str, Any]]


class PowertoolsObserver:
    """Business metrics as CloudWatch EMF; the events' correlationId on every log line."""

    def metric(self, name: str, value: float = 1) -> None:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def correlate(self, correlation_id: str) -> None:
        logger.set_correlation_id(correlation_id)


# --- settings and the token secret -----------------------------------------------------------


def fetch_token(arn: str) -> str:
    """The Upstash token from Secrets Manager: a plain string, or JSON with an
    ``UPSTASH_REDIS_REST_TOKEN`` or ``token`` field. Powertools parameters (and boto3)
    are imported here only, so functions without the ARN never pay for them."""
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(arn)
    text = value.decode("utf-8") if isinstance(value, bytes) else str(value or "")
    if text.lstrip().startswith("{"):
        data = json.loads(text)
        text = str(data.get("UPSTASH_REDIS_REST_TOKEN") or data.get("token") or "")
    if not text:
        raise RuntimeError(f"secret {arn} holds no Upstash token")
    return text


# Gmail credentials are read again at most this often per process: a rotated secret is
# picked up within 5 minutes, and a push does not pay a Secrets Manager call.
GMAIL_SECRET_MAX_AGE_S = 300
# The Secrets Manager read is retried by Pub/Sub (a 503) after this long.
GMAIL_SECRET_RETRY_AFTER_S = 30.0


def fetch_gmail_secret(arn: str) -> str:
    """The text of a Gmail source's credentials secret (Google's authorized_user JSON),
    cached ``GMAIL_SECRET_MAX_AGE_S``. A failed read is a 503 (Pub/Sub redelivers); its
    message names the ARN, never a value. Powertools parameters (and boto3) are imported
    here only, on the first push of a source that has the secret."""
    from aws_lambda_powertools.utilities import parameters

    from acmi_core.base.errors import Unavailable

    try:
        value = parameters.get_secret(arn, max_age=GMAIL_SECRET_MAX_AGE_S)
    except parameters.GetParameterError:
        raise Unavailable(
            f"gmail_credentials_secret: {arn} could not be read from Secrets Manager "
            "(missing, not allowed by the function's policy, or unreachable)",
            retry_after=GMAIL_SECRET_RETRY_AFTER_S,
            field="gmail_credentials_secret",
            rule="readable_secret",
        ) from None
    return value.decode("utf-8") if isinstance(value, bytes) else str(value or "")


def _google_client() -> httpx.Client:
    import httpx

    from acmi_core.ingest.gmail_api import REQUEST_TIMEOUT_S

    return httpx.Client(timeout=REQUEST_TIMEOUT_S)


def gmail_fetch() -> GmailFetch:
    """One per process: the secret reader; the HTTP client for Google (httpx, its CA
    bundle: ~40-100 ms) and the token cache are built on the first Gmail fetch, so an
    ingest cold start without Gmail credentials pays nothing for them."""
    from acmi_core.ingest.service import GmailFetch

    return GmailFetch(secret=fetch_gmail_secret, new_client=_google_client)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Settings from the environment, with the token fetched when only its ARN is set."""
    settings = Settings.from_env(env)
    if settings.needs_token_secret:
        assert settings.upstash_token_secret_arn is not None
        token = fetch_token(settings.upstash_token_secret_arn)
        settings = settings.replace(upstash_token=token)
    if settings.needs_wake_secret:  # the wake function's: each tenant's is derived from it
        assert settings.wake_secret_arn is not None
        settings = settings.replace(wake_secret=fetch_wake_secret(settings.wake_secret_arn))
    return settings


def fetch_wake_secret(arn: str) -> str:
    """ACMI_WAKE_SECRET from Secrets Manager: a plain string, or JSON with an
    ``ACMI_WAKE_SECRET`` field. The error names the ARN, never a value."""
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(arn)
    text = value.decode("utf-8") if isinstance(value, bytes) else str(value or "")
    if text.lstrip().startswith("{"):
        text = str(json.loads(text).get("ACMI_WAKE_SECRET") or "")
    if not text:
        raise RuntimeError(f"secret {arn} holds no wake secret")
    return text


# --- one Lambda function -----------------------------------------------------------------


Builder = Callable[[FunctionSpec, Settings, Store], Invoke]


class LambdaFunction:
    """A row of the function table made callable by Lambda: ``handler(event, context)``.

    Built on its first invocation from the environment; ``configure`` swaps in another
    environment or store (tests, ``acmi invoke``) and rebuilds on the next call.
    """

    def __init__(self, spec: FunctionSpec, build: Builder) -> None:
        self.spec = spec
        self._build = build
        self._env: Mapping[str, str] | None = None
        self._store: Store | None = None
        self._invoke: Invoke | None = None

    def configure(
        self, *, env: Mapping[str, str] | None = None, store: Store | None = None
    ) -> None:
        self._env, self._store, self._invoke = env, store, None

    def warm(self) -> None:
        """Build now what the first invocation would build (settings, secret, store, app)."""
        if self._invoke is None:
            self._invoke = self._setup()

    def __call__(self, event: Event, context: Any) -> dict[str, Any]:
        self.warm()
        assert self._invoke is not None
        return self._invoke(event, context)

    def _setup(self) -> Invoke:
        if not self.spec.store:  # no secret fetch, no connection on its cold start
            from acmi_core.store.base import NoStore

            return self._build(self.spec, Settings.from_env(self._env), NoStore())
        settings = load_settings(self._env)
        return self._build(self.spec, settings, self._store or open_store(settings))


# --- HTTP functions --------------------------------------------------------------------------


def http_app(spec: FunctionSpec, acmi: Acmi) -> FastAPI:
    """The app HTTP function ``spec`` serves: its routers (all of them, to describe, for
    a docs function), store calls inline."""
    from acmi_core.api.app import create_app
    from acmi_core.api.context import ApiContext

    routers = mounted_routers(spec)
    # Only the function that takes Gmail pushes pays for an HTTP client to Google.
    gmail = gmail_fetch() if spec.store and "ingest" in routers else None
    ctx = ApiContext(acmi, observer=PowertoolsObserver(), offload=False, gmail=gmail)
    return create_app(ctx, routers, docs=spec.docs)


# The correlation id of an HTTP invocation: Powertools' API Gateway HTTP path
# ("requestContext.requestId"), walked directly: its jmespath query costs ~6 us per call.
_REQUEST_ID_PATH = tuple(correlation_paths.API_GATEWAY_HTTP.split("."))


def _request_id(event: Event) -> Any:
    value: Any = event
    for key in _REQUEST_ID_PATH:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _build_http(spec: FunctionSpec, settings: Settings, store: Store) -> Invoke:
    return asgi_invoke(spec, settings, store, lambda acmi: http_app(spec, acmi))


def asgi_invoke(
    spec: FunctionSpec, settings: Settings, store: Store, app: Callable[[Acmi], Any]
) -> Invoke:
    """The invocation of an HTTP function: ``app(acmi)`` (an ASGI app) behind mangum,
    lifespan off, one log line an invocation naming the route and status (never a
    header: the bearer key)."""
    from mangum import Mangum

    from acmi_core.auth.apikeys import ensure_admin_key

    acmi = Acmi(store, settings)
    if settings.api_key and spec.store:
        # The policy of `acmi serve`: a sample key only on the embedded store (else this
        # raises, and the function fails loudly), and a revoked key is never re-created.
        record = ensure_admin_key(
            store, settings.api_key, tenant=settings.default_tenant, now_ms=acmi.clock()
        )
        if record is None:
            logger.warning("ACMI_API_KEY was revoked: not registered again; unset it")
    asgi = Mangum(app(acmi), lifespan="off")
    lambda_keys = LambdaKeys()

    def invoke(event: Event, context: Any) -> dict[str, Any]:
        try:
            lambda_keys.append(context)
            logger.set_correlation_id(_request_id(event))
            response: dict[str, Any] = asgi(event, context)
            # One structured line per invocation; correlation_id is the events'
            # correlationId when there were events, else the API Gateway request id.
            logger.info(
                "handled",
                extra={"route": event.get("routeKey"), "status": response.get("statusCode")},
            )
            return response
        finally:
            flush_metrics()

    return invoke


class LambdaKeys:
    """The keys ``logger.inject_lambda_context`` appends (cold_start, then the context's
    function_name, function_memory_size, function_arn and function_request_id, in its
    order), appended directly: the decorator builds a context model, and asks the
    environment, on every call (~10 us; this ~2 us)."""

    def append(self, context: Any) -> None:
        logger.append_keys(
            cold_start=cold_start.take(),
            function_name=context.function_name,
            function_memory_size=context.memory_limit_in_mb,
            function_arn=context.invoked_function_arn,
            function_request_id=context.aws_request_id,
        )


class ColdStart:
    """True for the first invocation of the process, as Powertools counts it."""

    def __init__(self) -> None:
        self._cold = True

    def take(self) -> bool:
        cold, self._cold = self._cold, False
        return cold


cold_start = ColdStart()


def flush_metrics() -> None:
    """What ``metrics.log_metrics`` does after each invocation (one EMF line of its
    metrics), without its warning when there are none (docs, 401s: normal here)."""
    if metrics.metric_set:
        metrics.flush_metrics()


def _row(function_: str | FunctionSpec) -> FunctionSpec:
    return function(function_) if isinstance(function_, str) else function_


def http_handler(name: str | FunctionSpec) -> LambdaFunction:
    """The handler of HTTP function ``name``. Imports its routers now (no I/O), so their
    import cost falls in Lambda's init phase."""
    spec = _row(name)
    if spec.kind != "http":
        raise ValueError(f"function {spec.name!r} is a scheduled job: use job_handler")
    import importlib

    skip_pydantic_v1_checks()  # before any route is built
    from acmi_core.api.app import ROUTER_MODULES

    for router in mounted_routers(spec):
        importlib.import_module(ROUTER_MODULES[router])
    return LambdaFunction(spec, _build_http)


# --- scheduled functions ---------------------------------------------------------------------


def _build_job(spec: FunctionSpec, settings: Settings, store: Store) -> Invoke:
    from acmi_core.jobs.runner import JobRun, load_job
    from acmi_core.jobs.tenants import run_tenants

    assert spec.job is not None
    job = load_job(spec.job)
    acmi = Acmi(store, settings)

    @metrics.log_metrics
    @logger.inject_lambda_context(correlation_id_path="execution_id")
    def invoke(event: Event, context: Any) -> dict[str, Any]:
        run = JobRun.parse(spec.name, event, now_ms=acmi.clock())
        # once per execution id (a Scheduler retry of a finished run does nothing),
        # its requests, commands and duration counted and kept for `acmi jobs status`
        # and for every tenant with work, each on its own watermark and record
        result = run_tenants(acmi, run, job, clock=time.perf_counter)
        metrics.add_metric(name="JobRuns", unit=MetricUnit.Count, value=1)
        failed = {t: r["error"] for t, r in result.get("tenants", {}).items() if "error" in r}
        for tenant, error in failed.items():
            logger.error(
                "job failed for a tenant",
                extra={"job": spec.name, "tenant": tenant, "error": error},
            )
        if failed:
            metrics.add_metric(name="JobTenantFailures", unit=MetricUnit.Count, value=len(failed))
        logger.info("job done", extra={"job": spec.name, "result": result})
        return {"job": spec.name, "execution_id": run.execution_id, **result}

    return invoke


def job_handler(name: str | FunctionSpec) -> LambdaFunction:
    """The handler of scheduled function ``name``: runs its job with an ``Acmi`` built from
    the settings, on exactly the Scheduler's ``Input``."""
    spec = _row(name)
    if spec.kind != "job":
        raise ValueError(f"function {spec.name!r} serves HTTP: use http_handler")
    return LambdaFunction(spec, _build_job)

"""What every Lambda function shares: settings (with the Upstash token from Secrets
Manager when configured), Powertools logging and metrics, and the mangum adapter.

Cold-start budget: nothing here imports boto3 unless ACMI_UPSTASH_TOKEN_SECRET_ARN is set
and the token is not already in the environment; Tracer is not used at all.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from fastapi import FastAPI
from mangum import Mangum

from acmi_core import Acmi, Settings, open_store
from acmi_core.api.app import ApiContext, create_app
from acmi_core.auth.apikeys import ensure_admin_key
from acmi_core.store.base import NoStore

SECRET_ARN_ENV = "ACMI_UPSTASH_TOKEN_SECRET_ARN"

# Invocations that record no metric (docs, 401s) are normal, not worth a warning each.
warnings.filterwarnings("ignore", message="No application metrics to publish")

logger = Logger(service="acmi")
metrics = Metrics(namespace="ACMI", service="acmi")

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


class PowertoolsObserver:
    """Business metrics as CloudWatch EMF; the events' correlationId on every log line."""

    def metric(self, name: str, value: float = 1) -> None:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def correlate(self, correlation_id: str) -> None:
        logger.set_correlation_id(correlation_id)


def fetch_secret(arn: str) -> str:
    """The Upstash token from Secrets Manager: a plain string, or JSON with a
    ``UPSTASH_REDIS_REST_TOKEN`` or ``token`` field. boto3 is imported here, only."""
    import boto3

    value: str = boto3.client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"]
    if value.lstrip().startswith("{"):
        data = json.loads(value)
        value = str(data.get("UPSTASH_REDIS_REST_TOKEN") or data.get("token") or "")
    if not value:
        raise RuntimeError(f"secret {arn} holds no Upstash token")
    return value


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    settings = Settings.from_env(env)
    arn = env.get(SECRET_ARN_ENV)
    if arn and not settings.upstash_token:
        settings = dataclasses.replace(settings, upstash_token=fetch_secret(arn))
    return settings


def build_context(settings: Settings | None = None, *, with_store: bool = True) -> ApiContext:
    if not with_store:  # docs: no secret fetch, no connection on its cold start
        return ApiContext(Acmi(NoStore(), Settings.from_env()), observer=PowertoolsObserver())
    settings = settings or load_settings()
    acmi = Acmi(open_store(settings), settings)
    if settings.api_key:  # local runs and `sam local invoke`: a known admin key
        ensure_admin_key(acmi, settings.api_key)
    return ApiContext(acmi, observer=PowertoolsObserver())


def build_app(routers: Sequence[str], *, docs: bool = False, with_store: bool = True) -> FastAPI:
    return create_app(build_context(with_store=with_store), routers, docs=docs)


def lambda_handler(app: FastAPI) -> LambdaHandler:
    """mangum with lifespan off (no startup/shutdown per invocation), wrapped by Powertools.
    Every error is already JSON (acmi_core.api.errors), never mangum's text 500."""
    asgi = Mangum(app, lifespan="off")

    @metrics.log_metrics
    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        response: dict[str, Any] = asgi(event, context)
        # One structured line per invocation; correlation_id is the events' correlationId
        # when there were events, else the API Gateway request id.
        logger.info(
            "handled",
            extra={"route": event.get("routeKey"), "status": response.get("statusCode")},
        )
        return response

    return handler

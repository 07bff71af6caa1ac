"""POST /mcp: the MCP server over stateless streamable HTTP (``acmi_core.mcp.http``)
behind mangum, lifespan off.

Its own function: the MCP SDK's import (~0.8 s) falls in this cold start only. As with
every handler, importing the module does no I/O (the SDK is imported now, in Lambda's init
phase); settings, the token secret, the store and the app are built on the first
invocation. The log line names the route and the status, never a header (the bearer key).
"""

from __future__ import annotations

import logging
from typing import Any

import acmi_core.mcp.http  # noqa: F401  (the SDK's import, in the init phase)
from acmi_core import Acmi, Settings, Store
from acmi_core.lambdas import FunctionSpec, function
from functions.runtime import Event, Invoke, LambdaFunction, logger, metrics

# The SDK logs each request's lifecycle at INFO (manager started, request type, shutting
# down): three lines an invocation under the function's INFO level. Its warnings stay.
logging.getLogger("mcp").setLevel(logging.WARNING)


def _request_id(event: Event) -> Any:
    """API Gateway's request id: the correlation id of the invocation's log lines."""
    context = event.get("requestContext")
    return context.get("requestId") if isinstance(context, dict) else None


def build(spec: FunctionSpec, settings: Settings, store: Store) -> Invoke:
    from mangum import Mangum

    from acmi_core.auth.apikeys import ensure_admin_key
    from acmi_core.mcp.http import McpHttpApp

    acmi = Acmi(store, settings)
    if settings.api_key:
        # The HTTP functions' policy (functions.runtime): a sample key only on the embedded
        # store (else this raises, loudly), a revoked key never registered again.
        record = ensure_admin_key(
            store, settings.api_key, tenant=settings.default_tenant, now_ms=acmi.clock()
        )
        if record is None:
            logger.warning("ACMI_API_KEY was revoked: not registered again; unset it")
    asgi = Mangum(McpHttpApp(acmi), lifespan="off")

    @metrics.log_metrics
    @logger.inject_lambda_context
    def invoke(event: Event, context: Any) -> dict[str, Any]:
        logger.set_correlation_id(_request_id(event))
        response: dict[str, Any] = asgi(event, context)
        logger.info(
            "handled", extra={"route": event.get("routeKey"), "status": response.get("statusCode")}
        )
        return response

    return invoke


handler = LambdaFunction(function("mcp"), build)

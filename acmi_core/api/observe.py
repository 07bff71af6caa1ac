"""What the API reports about itself, without depending on any telemetry library: the
Lambda layer plugs in Powertools (Logger correlation id, EMF metrics); local runs log;
with ``ACMI_TRACES=1``, a span per request (``RequestSpans``, opentelemetry imported on
the first request)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("acmi.api")


class Observer(Protocol):
    def metric(self, name: str, value: float = 1) -> None:
        """One business metric per operation (e.g. EventsStored)."""
        ...

    def correlate(self, correlation_id: str) -> None:
        """The correlationId of the events being handled, for every later log line."""
        ...


class LogObserver:
    def metric(self, name: str, value: float = 1) -> None:
        log.debug("metric %s=%s", name, value)

    def correlate(self, correlation_id: str) -> None:
        log.debug("correlation_id=%s", correlation_id)


class RequestSpans:
    """ASGI middleware (``ACMI_TRACES=1``): a server span per HTTP request, named by its
    method and route template (``GET /v1/entities/{entity}``), with the response's status.
    The path itself is not recorded: an entity id may be an email address."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from opentelemetry.trace import SpanKind

        from acmi_core.client.tracing import tracer

        method = str(scope["method"])
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        attributes = {"http.request.method": method}
        with tracer().start_as_current_span(
            f"HTTP {method}", kind=SpanKind.SERVER, attributes=attributes
        ) as span:
            try:
                await self.app(scope, receive, sending)
            finally:
                route = scope.get("route")
                template = getattr(route, "path", None)
                if isinstance(template, str):
                    span.set_attribute("http.route", template)
                    span.update_name(f"{method} {template}")
                span.set_attribute("http.response.status_code", status)

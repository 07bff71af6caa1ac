"""The one place that maps errors to HTTP. Every error body is JSON with all four keys:
``{"error": code, "message": ..., "field": ..., "rule": ...}`` (``ERROR_SCHEMA``)."""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from acmi_core.errors import (
    AcmiError,
    AcmiValidationError,
    Conflict,
    CorruptData,
    Forbidden,
    IdempotencyKeyReused,
    NotFound,
    PayloadTooLarge,
    PlanError,
    SecretDetected,
    StoreAuthError,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    Throttled,
    Unauthenticated,
    Unavailable,
)

log = logging.getLogger("acmi.api")

# Most specific first: the first isinstance match wins. 500s say nothing inner.
STATUS_BY_ERROR: tuple[tuple[type[AcmiError], int], ...] = (
    (PayloadTooLarge, 413),
    (IdempotencyKeyReused, 422),
    # a secret in a write under the tenant's reject policy: the path and rule, never the value
    (SecretDetected, 422),
    (AcmiValidationError, 400),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (CorruptData, 409),
    (Unavailable, 503),
    (StoreAuthError, 500),
    (StoreError, 500),
    (PlanError, 500),
)
SERVER_MESSAGES: dict[type[AcmiError], str] = {
    StoreAuthError: "the store rejected our credentials",
    StoreError: "the store failed",
    PlanError: "a write was refused by the store script",
}
# 503s of the store say what happened, never the backend's own text: a redis-py
# ConnectionError names the server's host:port, which is not the caller's business.
# StoreBusy keeps its text (Redis's error reply: BUSY, LOADING, ...; no address).
STORE_UNAVAILABLE_MESSAGES: dict[type[StoreUnavailable], str] = {
    Throttled: "store: the store is throttling requests; retry after Retry-After seconds",
    StoreUnavailable: "store: the store cannot be reached for now; retry after Retry-After seconds",
}

# The body of every error response, for the OpenAPI document.
ERROR_SCHEMA: dict[str, Any] = {
    "title": "Error",
    "type": "object",
    "required": ["error", "message", "field", "rule"],
    "properties": {
        "error": {"type": "string", "description": "the error's code, e.g. validation_error"},
        "message": {"type": "string", "description": "what is wrong, naming the field"},
        "field": {
            "type": "string",
            "description": "what to look at: a dotted body path, a parameter, a header",
        },
        "rule": {"type": "string", "description": "the name of the rule broken"},
    },
}


def error_body(code: str, message: str, field: str, rule: str) -> dict[str, Any]:
    return {"error": code, "message": message, "field": field, "rule": rule}


def acmi_error_response(exc: AcmiError) -> JSONResponse:
    status = next((s for cls, s in STATUS_BY_ERROR if isinstance(exc, cls)), 500)
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, Unavailable):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    if status == 500:
        # A misconfiguration, a Redis error or our bug: log it, tell the caller nothing inner.
        log.error("server failure: %s", exc.code, extra={"error": exc.code})
        message = next(
            (m for cls, m in SERVER_MESSAGES.items() if isinstance(exc, cls)), "unexpected error"
        )
        return JSONResponse(error_body(exc.code, message, "server", exc.rule), status_code=500)
    message = exc.message
    if isinstance(exc, StoreUnavailable) and not isinstance(exc, StoreBusy):
        log.warning("store unavailable: %s", exc.message, extra={"error": exc.code})
        message = next(m for cls, m in STORE_UNAVAILABLE_MESSAGES.items() if isinstance(exc, cls))
    return JSONResponse(
        error_body(exc.code, message, exc.field, exc.rule), status_code=status, headers=headers
    )


def install_error_handlers(app: FastAPI) -> None:
    async def on_acmi(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AcmiError)
        return acmi_error_response(exc)

    async def on_request_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid", "type": ""}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("path", "query", "header")]
        field = ".".join(loc) or "request"
        message = f"{field}: {first.get('msg', 'invalid')}"
        return JSONResponse(
            error_body("validation_error", message, field, str(first.get("type"))), 400
        )

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        # (code, field, rule) of the errors Starlette raises itself
        code, field, rule = {
            404: ("not_found", "path", "route_exists"),
            405: ("method_not_allowed", "method", "method_allowed"),
        }.get(exc.status_code, ("http_error", "request", "http"))
        return JSONResponse(
            error_body(code, str(exc.detail), field, rule),
            status_code=exc.status_code,
            headers=dict(exc.headers or {}),
        )

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(
            error_body("internal_error", "unexpected server error", "server", "internal"), 500
        )

    app.add_exception_handler(AcmiError, on_acmi)
    app.add_exception_handler(RequestValidationError, on_request_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)

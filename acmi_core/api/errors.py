"""The one place that maps errors to HTTP. Every error body is JSON:
``{"error": code, "message": ..., "field": ..., "rule": ...}``."""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from acmi_core.auth.google_oidc import GoogleKeysUnavailable, GoogleTokenError
from acmi_core.errors import (
    AcmiError,
    AcmiValidationError,
    Conflict,
    CorruptData,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    StoreAuthError,
    StoreUnavailable,
    Unauthenticated,
)

log = logging.getLogger("acmi.api")

# Most specific first: the first isinstance match wins.
STATUS_BY_ERROR: tuple[tuple[type[AcmiError], int], ...] = (
    (PayloadTooLarge, 413),
    (AcmiValidationError, 400),
    (GoogleTokenError, 401),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (CorruptData, 409),
    (GoogleKeysUnavailable, 503),
    (StoreUnavailable, 503),
)


def error_body(
    code: str, message: str, field: str | None = None, rule: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"error": code, "message": message}
    if field is not None:
        body["field"] = field
    if rule is not None:
        body["rule"] = rule
    return body


def acmi_error_response(exc: AcmiError) -> JSONResponse:
    status = next((s for cls, s in STATUS_BY_ERROR if isinstance(exc, cls)), 500)
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, StoreUnavailable):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    elif isinstance(exc, GoogleKeysUnavailable):
        headers["Retry-After"] = "5"
    if status == 500:
        # Store misconfiguration or a Redis error: log it, tell the caller nothing inner.
        log.error("store failure: %s", exc.code, extra={"error": exc.code})
        message = (
            "the store rejected our credentials"
            if isinstance(exc, StoreAuthError)
            else "the store failed"
        )
        return JSONResponse(error_body(exc.code, message), status_code=500)
    rule = getattr(exc, "rule", None)
    return JSONResponse(
        error_body(exc.code, exc.message, exc.field, rule), status_code=status, headers=headers
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
        codes = {404: "not_found", 405: "method_not_allowed"}
        return JSONResponse(
            error_body(codes.get(exc.status_code, "http_error"), str(exc.detail)),
            status_code=exc.status_code,
            headers=dict(exc.headers or {}),
        )

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(error_body("internal_error", "unexpected server error"), 500)

    app.add_exception_handler(AcmiError, on_acmi)
    app.add_exception_handler(RequestValidationError, on_request_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)

"""The one place that maps errors to HTTP: the status, the body and the headers of an
ACMI error. Every error body is JSON with all four keys: ``{"error": code, "message":
..., "field": ..., "rule": ...}``. Free of FastAPI: the API (``api/errors.py``) and the
MCP function (``mcp/http.py``, which ships without FastAPI) answer with the same."""

from __future__ import annotations

import logging
import math
from typing import Any

from acmi_core.base.errors import (
    AcmiError,
    AcmiValidationError,
    BudgetTooSmall,
    Conflict,
    CorruptData,
    Forbidden,
    IdempotencyKeyReused,
    NotFound,
    PayloadTooLarge,
    PlanError,
    RateLimited,
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
    (RateLimited, 429),
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


def error_body(code: str, message: str, field: str, rule: str) -> dict[str, Any]:
    """The four-key body. A field name echoed from the request may hold a lone surrogate
    (``{"\\udfff": 1}``), which no UTF-8 response can carry: it is written as its
    ``\\uXXXX`` escape, so the caller still sees which name was refused."""
    return {
        "error": code,
        "message": well_formed(message),
        "field": well_formed(field),
        "rule": rule,
    }


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate as the six characters of its escape (``\\udfff``)."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_answer(exc: AcmiError) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(status, body, headers) of ``exc``; a 5xx says nothing inner (no store address)."""
    status = next((s for cls, s in STATUS_BY_ERROR if isinstance(exc, cls)), 500)
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, (Unavailable, RateLimited)):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    if status == 500:
        # A misconfiguration, a Redis error or our bug: log it, tell the caller nothing inner.
        log.error("server failure: %s", exc.code, extra={"error": exc.code})
        message = next(
            (m for cls, m in SERVER_MESSAGES.items() if isinstance(exc, cls)), "unexpected error"
        )
        return 500, error_body(exc.code, message, "server", exc.rule), headers
    message = exc.message
    if isinstance(exc, StoreUnavailable) and not isinstance(exc, StoreBusy):
        log.warning("store unavailable: %s", exc.message, extra={"error": exc.code})
        message = next(m for cls, m in STORE_UNAVAILABLE_MESSAGES.items() if isinstance(exc, cls))
    body = error_body(exc.code, message, exc.field, exc.rule)
    if isinstance(exc, BudgetTooSmall):  # a key added to the four: what to ask for instead
        body["min_budget"] = exc.min_budget
    return status, body, headers

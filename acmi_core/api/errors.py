"""The API's error handlers: ACMI errors answered as ``api/status.py`` maps them (the
one place that maps errors to HTTP), request and routing errors in the same four-key
body (``ERROR_SCHEMA``)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from acmi_core.api.status import error_answer, error_body
from acmi_core.base.errors import AcmiError
from acmi_core.base.model import pydantic_rule

log = logging.getLogger("acmi.api")

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


def acmi_error_response(exc: AcmiError) -> JSONResponse:
    status, body, headers = error_answer(exc)
    return JSONResponse(body, status_code=status, headers=headers)


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
            error_body("validation_error", message, field, pydantic_rule(str(first.get("type")))),
            400,
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

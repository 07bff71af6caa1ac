"""GET /openapi.json and GET /docs for the whole API (no store: see acmi_core.base.lambdas)."""

from functions.runtime import http_handler

handler = http_handler("docs")

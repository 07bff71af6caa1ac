"""GET /openapi.json and GET /docs for the whole API."""

from functions._runtime import build_app, lambda_handler

app = build_app(["ingest", "entities"], docs=True)
handler = lambda_handler(app)

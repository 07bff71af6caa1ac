"""GET /openapi.json and GET /docs for the whole API."""

from functions._runtime import build_app, lambda_handler

# The spec describes every route; this function serves only the spec and the docs page,
# so it needs no store (and no Secrets Manager call on its cold start).
app = build_app(["ingest", "entities"], docs=True, with_store=False)
handler = lambda_handler(app)

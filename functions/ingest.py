"""POST /v1/entities/{entity}/events and POST /v1/ingest/{source}."""

from functions._runtime import build_app, lambda_handler

app = build_app(["ingest"])
handler = lambda_handler(app)

"""Profile, signals, timeline, full context, list and delete of entities."""

from functions._runtime import build_app, lambda_handler

app = build_app(["entities"])
handler = lambda_handler(app)

"""POST /v1/entities/{entity}/events and POST /v1/ingest/{source}."""

from functions.runtime import http_handler

handler = http_handler("ingest")

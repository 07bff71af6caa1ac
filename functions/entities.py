"""Profile, signals, timeline, full context, list and delete of entities."""

from functions.runtime import http_handler

handler = http_handler("entities")

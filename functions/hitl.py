"""Human-in-the-loop queues: create, list, resolve."""

from functions.runtime import http_handler

handler = http_handler("hitl")

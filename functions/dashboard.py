"""The fleet dashboard: its page and the one read it polls."""

from functions.runtime import http_handler

handler = http_handler("dashboard")

"""The bootstrap function: an agent's wake bundle (see acmi_core/bootstrap/bundle.py)."""

from functions.runtime import http_handler

handler = http_handler("bootstrap")

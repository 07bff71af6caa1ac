"""Work items: create, list, get, events with sessions, signals, owner."""

from functions.runtime import http_handler

handler = http_handler("work")

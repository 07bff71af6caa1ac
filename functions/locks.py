"""Leases with fencing tokens: claim, renew, release, get."""

from functions.runtime import http_handler

handler = http_handler("locks")

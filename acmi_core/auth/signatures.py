"""Webhook body signatures, for sources whose config holds an HMAC secret.

The sender sends ``X-Acmi-Signature: sha256=<64 hex digits>``, the HMAC-SHA256 of the
request with the source's secret, compared in constant time. What is signed:

- with ``X-Acmi-Timestamp: <unix seconds>``: the bytes ``<timestamp>.<raw body>``, and the
  timestamp must be within ``TIMESTAMP_TOLERANCE_S`` (5 minutes) of our clock, so a
  captured delivery cannot be replayed once it is older than that (the idempotency
  record only catches replays of the identical body while it is kept);
- without it: the raw body alone (senders that cannot add a header of their own).

A malformed header is a 400 naming it (rule ``format``); a missing or wrong signature, or
a timestamp outside the window, is a 401 naming the header and the rule.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import Final

from acmi_core.errors import AcmiValidationError, Unauthenticated

SIGNATURE_HEADER: Final = "X-Acmi-Signature"
TIMESTAMP_HEADER: Final = "X-Acmi-Timestamp"
TIMESTAMP_TOLERANCE_S: Final = 300

# ASCII only (re.ASCII): \d would also match other scripts' digits, and compare_digest
# raises TypeError on a non-ASCII str.
_SIGNATURE: Final = re.compile(r"sha256=([0-9a-fA-F]{64})", re.ASCII)
_TIMESTAMP: Final = re.compile(r"[0-9]{1,11}", re.ASCII)  # seconds, not milliseconds


class SignatureRejected(Unauthenticated):
    """A 401 that names the rule broken (``required``, ``mismatch``, ``window``)."""

    def __init__(self, field: str, rule: str, message: str) -> None:
        super().__init__(f"{field}: {message}", field=field)
        self.rule = rule


def signed_bytes(body: bytes, timestamp: str | None) -> bytes:
    return body if timestamp is None else timestamp.encode("ascii") + b"." + body


def sign(secret: str, body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
    """The headers a sender adds (the recipe, for clients and tests)."""
    headers: dict[str, str] = {}
    stamp = None
    if timestamp is not None:
        stamp = headers[TIMESTAMP_HEADER] = str(int(timestamp))
    digest = hmac.new(secret.encode("utf-8"), signed_bytes(body, stamp), hashlib.sha256)
    headers[SIGNATURE_HEADER] = f"sha256={digest.hexdigest()}"
    return headers


def verify_signature(
    secret: str,
    body: bytes,
    signature: str | None,
    timestamp: str | None = None,
    *,
    now_s: float | None = None,
) -> None:
    """Raise unless ``signature`` (the header's value) signs ``body`` (and ``timestamp``,
    when that header was sent) with ``secret``."""
    if not signature:
        raise SignatureRejected(
            SIGNATURE_HEADER, "required", "required for this source (sha256=<hex HMAC>)"
        )
    match = _SIGNATURE.fullmatch(signature.strip())
    if match is None:
        # never echoed: the value may be anything the sender put there
        raise AcmiValidationError(SIGNATURE_HEADER, "format", "must be 'sha256=' and 64 hex digits")
    if timestamp is not None:
        if _TIMESTAMP.fullmatch(timestamp.strip()) is None:
            raise AcmiValidationError(
                TIMESTAMP_HEADER, "format", "must be unix time in whole seconds (digits only)"
            )
        timestamp = timestamp.strip()
        now = time.time() if now_s is None else now_s
        if abs(now - int(timestamp)) > TIMESTAMP_TOLERANCE_S:
            raise SignatureRejected(
                TIMESTAMP_HEADER,
                "window",
                f"must be within {TIMESTAMP_TOLERANCE_S} seconds of the server's clock",
            )
    expected = hmac.new(secret.encode("utf-8"), signed_bytes(body, timestamp), hashlib.sha256)
    if not hmac.compare_digest(expected.hexdigest(), match.group(1).lower()):
        what = f"<{TIMESTAMP_HEADER}>.<body>" if timestamp is not None else "the body"
        raise SignatureRejected(SIGNATURE_HEADER, "mismatch", f"does not match {what}")

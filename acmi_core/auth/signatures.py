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

Senders with a scheme of their own (the source table's ``signature``), with the signing
secret stored as the source's HMAC secret:

- slack: ``X-Slack-Signature: v0=<hex>``, the HMAC-SHA256 of
  ``v0:<X-Slack-Request-Timestamp>:<raw body>``; the timestamp is required and must be
  within the same 5 minutes;
- github: ``X-Hub-Signature-256: sha256=<hex>``, the HMAC-SHA256 of the raw body.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import Final

from acmi_core.base.errors import AcmiValidationError, Unauthenticated

SIGNATURE_HEADER: Final = "X-Acmi-Signature"
TIMESTAMP_HEADER: Final = "X-Acmi-Timestamp"
TIMESTAMP_TOLERANCE_S: Final = 300
SLACK_SIGNATURE_HEADER: Final = "X-Slack-Signature"
SLACK_TIMESTAMP_HEADER: Final = "X-Slack-Request-Timestamp"
GITHUB_SIGNATURE_HEADER: Final = "X-Hub-Signature-256"

# ASCII only (re.ASCII): \d would also match other scripts' digits, and compare_digest
# raises TypeError on a non-ASCII str.
_SIGNATURE: Final = re.compile(r"sha256=([0-9a-fA-F]{64})", re.ASCII)
_TIMESTAMP: Final = re.compile(r"[0-9]{1,11}", re.ASCII)  # seconds, not milliseconds
_SLACK_SIGNATURE: Final = re.compile(r"v0=([0-9a-fA-F]{64})", re.ASCII)


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


def _hmac_hex(secret: str, data: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), data, hashlib.sha256).hexdigest()


def _check_window(header: str, timestamp: str, now_s: float | None) -> str:
    """The timestamp header's digits, or a 400 (format) / 401 (window)."""
    stamp = timestamp.strip()
    if _TIMESTAMP.fullmatch(stamp) is None:
        raise AcmiValidationError(header, "format", "must be unix time in whole seconds")
    now = time.time() if now_s is None else now_s
    if abs(now - int(stamp)) > TIMESTAMP_TOLERANCE_S:
        raise SignatureRejected(
            header,
            "window",
            f"must be within {TIMESTAMP_TOLERANCE_S} seconds of the server's clock",
        )
    return stamp


def sign_slack(secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """The headers Slack sends (the recipe, for tests)."""
    stamp = str(int(timestamp))
    digest = _hmac_hex(secret, b"v0:" + stamp.encode("ascii") + b":" + body)
    return {SLACK_TIMESTAMP_HEADER: stamp, SLACK_SIGNATURE_HEADER: f"v0={digest}"}


def verify_slack(
    secret: str,
    body: bytes,
    signature: str | None,
    timestamp: str | None,
    *,
    now_s: float | None = None,
) -> None:
    """Slack's signing secret scheme: ``v0=<hex>`` over ``v0:<timestamp>:<body>``."""
    if not signature:
        raise SignatureRejected(SLACK_SIGNATURE_HEADER, "required", "required (v0=<hex HMAC>)")
    match = _SLACK_SIGNATURE.fullmatch(signature.strip())
    if match is None:
        raise AcmiValidationError(
            SLACK_SIGNATURE_HEADER, "format", "must be 'v0=' and 64 hex digits"
        )
    if not timestamp:
        raise SignatureRejected(
            SLACK_TIMESTAMP_HEADER, "required", "required with X-Slack-Signature"
        )
    stamp = _check_window(SLACK_TIMESTAMP_HEADER, timestamp, now_s)
    expected = _hmac_hex(secret, b"v0:" + stamp.encode("ascii") + b":" + body)
    if not hmac.compare_digest(expected, match.group(1).lower()):
        raise SignatureRejected(
            SLACK_SIGNATURE_HEADER, "mismatch", "does not match v0:<timestamp>:<body>"
        )


def sign_github(secret: str, body: bytes) -> dict[str, str]:
    """The header GitHub sends (the recipe, for tests)."""
    return {GITHUB_SIGNATURE_HEADER: f"sha256={_hmac_hex(secret, body)}"}


def verify_github(secret: str, body: bytes, signature: str | None) -> None:
    """GitHub's webhook secret scheme: ``sha256=<hex>`` over the raw body."""
    if not signature:
        raise SignatureRejected(GITHUB_SIGNATURE_HEADER, "required", "required (sha256=<hex HMAC>)")
    match = _SIGNATURE.fullmatch(signature.strip())
    if match is None:
        raise AcmiValidationError(
            GITHUB_SIGNATURE_HEADER, "format", "must be 'sha256=' and 64 hex digits"
        )
    if not hmac.compare_digest(_hmac_hex(secret, body), match.group(1).lower()):
        raise SignatureRejected(GITHUB_SIGNATURE_HEADER, "mismatch", "does not match the body")


# The header a scheme's signature travels in (to name it when no secret is configured).
SCHEME_HEADERS: Final = {
    "acmi": SIGNATURE_HEADER,
    "slack": SLACK_SIGNATURE_HEADER,
    "github": GITHUB_SIGNATURE_HEADER,
}

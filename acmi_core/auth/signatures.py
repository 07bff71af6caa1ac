"""Webhook body signatures: ``X-Acmi-Signature: sha256=<hex>``, an HMAC-SHA256 of the
raw body with the source's secret, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from acmi_core.errors import AcmiValidationError, Unauthenticated

SIGNATURE_HEADER: Final = "X-Acmi-Signature"


def verify_signature(secret: str, body: bytes, header: str | None) -> None:
    if not header:
        raise Unauthenticated(
            f"{SIGNATURE_HEADER}: required for this source (sha256=<hex HMAC of the body>)",
            field=SIGNATURE_HEADER,
        )
    algorithm, _, given = header.partition("=")
    if algorithm != "sha256" or not given:
        raise AcmiValidationError(SIGNATURE_HEADER, "format", "must be 'sha256=<hex>'")
    expected = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, given.strip().lower()):
        raise Unauthenticated(
            f"{SIGNATURE_HEADER}: does not match the body", field=SIGNATURE_HEADER
        )

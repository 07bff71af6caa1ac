"""Webhook body signatures: the header's format, the optional signed timestamp and its
window, computed here independently of the code under test."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from acmi_core.auth.signatures import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    TIMESTAMP_TOLERANCE_S,
    sign,
    verify_signature,
)
from acmi_core.base.errors import AcmiValidationError, Unauthenticated

SECRET = "a-long-shared-hmac-secret"
BODY = b'{"message":"Invoice paid","entity":"deal:1"}'
NOW = 1_795_977_727.0


def hexmac(message: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()


def test_a_signature_of_the_body_alone_still_verifies() -> None:
    verify_signature(SECRET, BODY, hexmac(BODY), now_s=NOW)
    verify_signature(SECRET, BODY, hexmac(BODY).upper().replace("SHA256=", "sha256="), now_s=NOW)


def test_a_wrong_signature_is_a_401_naming_the_header() -> None:
    with pytest.raises(Unauthenticated) as caught:
        verify_signature(SECRET, BODY, hexmac(BODY + b" "), now_s=NOW)
    assert caught.value.field == SIGNATURE_HEADER
    assert caught.value.rule == "mismatch"  # type: ignore[attr-defined]


def test_a_missing_signature_is_a_401_naming_the_header() -> None:
    with pytest.raises(Unauthenticated) as caught:
        verify_signature(SECRET, BODY, None, now_s=NOW)
    assert caught.value.field == SIGNATURE_HEADER
    assert caught.value.rule == "required"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "header",
    [
        "sha256=" + "é" * 64,  # non-ASCII: hmac.compare_digest raised TypeError (a 500)
        "sha256=" + "\u0663" * 64,  # Arabic-Indic digits
        "sha256=" + "Ã©" * 32,  # UTF-8 bytes as Starlette decodes them (latin-1)
        "sha256=" + "z" * 64,
        "sha256=" + "0" * 63,
        "sha256=" + "0" * 65,
        "sha256=",
        "md5=" + "0" * 32,
        "sha256",
        "0" * 64,
        " ",
    ],
)
def test_a_malformed_signature_header_is_a_400_naming_the_header(header: str) -> None:
    with pytest.raises(AcmiValidationError) as caught:
        verify_signature(SECRET, BODY, header, now_s=NOW)
    assert (caught.value.field, caught.value.rule) == (SIGNATURE_HEADER, "format")
    # a fixed message: whatever the sender put there is never echoed
    assert caught.value.message == f"{SIGNATURE_HEADER}: must be 'sha256=' and 64 hex digits"


def test_a_timestamped_signature_covers_timestamp_dot_body() -> None:
    timestamp = str(int(NOW))
    signed = hexmac(timestamp.encode() + b"." + BODY)
    verify_signature(SECRET, BODY, signed, timestamp, now_s=NOW)
    # the body alone does not verify once a timestamp is sent: the timestamp is covered
    with pytest.raises(Unauthenticated) as caught:
        verify_signature(SECRET, BODY, hexmac(BODY), timestamp, now_s=NOW)
    assert caught.value.field == SIGNATURE_HEADER
    # nor does a captured signature replayed with a fresh timestamp
    with pytest.raises(Unauthenticated):
        verify_signature(SECRET, BODY, signed, str(int(NOW) + 60), now_s=NOW + 60)


@pytest.mark.parametrize("skew", [-TIMESTAMP_TOLERANCE_S, -1, 0, 1, TIMESTAMP_TOLERANCE_S])
def test_a_timestamp_within_five_minutes_is_accepted(skew: int) -> None:
    timestamp = str(int(NOW) + skew)
    verify_signature(SECRET, BODY, hexmac(timestamp.encode() + b"." + BODY), timestamp, now_s=NOW)


@pytest.mark.parametrize("skew", [-TIMESTAMP_TOLERANCE_S - 1, TIMESTAMP_TOLERANCE_S + 1, -86_400])
def test_a_timestamp_outside_five_minutes_is_a_401_naming_the_header_and_rule(skew: int) -> None:
    timestamp = str(int(NOW) + skew)
    with pytest.raises(Unauthenticated) as caught:
        verify_signature(
            SECRET, BODY, hexmac(timestamp.encode() + b"." + BODY), timestamp, now_s=NOW
        )
    assert caught.value.field == TIMESTAMP_HEADER
    assert caught.value.rule == "window"  # type: ignore[attr-defined]
    assert "300" in caught.value.message
    assert TIMESTAMP_TOLERANCE_S == 300


@pytest.mark.parametrize(
    "timestamp", ["", "abc", "1795977727.5", "-1795977727", "+1795977727", "\u0661" * 10, "1" * 13]
)
def test_a_malformed_timestamp_is_a_400_naming_the_header(timestamp: str) -> None:
    with pytest.raises(AcmiValidationError) as caught:
        verify_signature(SECRET, BODY, hexmac(BODY), timestamp, now_s=NOW)
    assert (caught.value.field, caught.value.rule) == (TIMESTAMP_HEADER, "format")


def test_the_signing_recipe_matches_the_verifier() -> None:
    assert sign(SECRET, BODY) == {SIGNATURE_HEADER: hexmac(BODY)}
    headers = sign(SECRET, BODY, timestamp=int(NOW))
    assert headers == {
        TIMESTAMP_HEADER: str(int(NOW)),
        SIGNATURE_HEADER: hexmac(f"{int(NOW)}.".encode() + BODY),
    }
    verify_signature(SECRET, BODY, headers[SIGNATURE_HEADER], headers[TIMESTAMP_HEADER], now_s=NOW)

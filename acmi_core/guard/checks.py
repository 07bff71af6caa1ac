"""The secret rules' value checks: what a regex match must also be before it is a finding
(a checksum: Luhn, mod 97, the JWT header; a credential-like value: not prose, not a
placeholder, not a reference such as ``${DB_PASSWORD}``).

They run on a match only, so they may be plain Python. Pure: no I/O. The rules that use
them are in ``acmi_core.guard.rules``; the JSON-key rule (``acmi_core.guard.secrets``)
uses ``password_like``, ``random_like`` and ``aws_secret`` too.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Final

# Values that name where a secret lives, or stand in for one: never findings.
_REFERENCE_PREFIXES: Final = (
    "$",
    "%",
    "<",
    "{{",
    "[redacted",
    "env:",
    "op://",
    "vault:",
    "arn:",
    "ssm:",
    "secretsmanager:",
    "keychain:",
    "file:",
)
_PLACEHOLDER_WORDS: Final = ("your", "replace", "placeholder", "example", "xxxx", "changeme")
_STATUS_WORDS: Final = frozenset(
    re.split(
        r"\s+",
        "required optional changed change reset expired updated set unset none null nil true "
        "false redacted hidden masked omitted removed hash hashed missing invalid valid ok "
        "empty unknown yes no enabled disabled protected encrypted provided supplied needed "
        "sent verified weak strong",
    )
)


def placeholder(value: str) -> bool:
    low = value.lower()
    return (
        len(set(value)) <= 2  # ******, xxxxxx, ----
        or low.startswith(_REFERENCE_PREFIXES)
        or low.strip(".,;:!?") in _STATUS_WORDS
        or any(word in low for word in _PLACEHOLDER_WORDS)
    )


def classes(value: str) -> int:
    """How many of lower, upper, digit, other a value uses (a Capitalized word counts once)."""
    lower = any(c.islower() for c in value)
    upper = any(c.isupper() for c in value)
    if value[:1].isupper() and value[1:].isalpha() and value[1:].islower():
        upper = False
    digit = any(c.isdigit() for c in value)
    other = any(not c.isalnum() for c in value)
    return lower + upper + digit + other


def password_like(value: str, *, keyed: bool) -> bool:
    """A password's value: one token, not a placeholder or a reference; in text (not a
    JSON key's value) also two kinds of character, since ``password: remember`` is prose."""
    if len(value) < (4 if keyed else 6) or any(c.isspace() for c in value):
        return False
    if placeholder(value) or (value.startswith(("/", "~/", "./")) and "/" in value[1:]):
        return False
    return keyed or classes(value) >= 2


def keyed_password(value: str) -> bool:
    return password_like(value, keyed=True)


def text_password(value: str) -> bool:
    return password_like(value, keyed=False)


def random_like(value: str) -> bool:
    """An opaque credential: 16+ characters of one token with letters and digits (or both
    cases), not a placeholder, not an ENV_VAR_NAME naming where it is kept."""
    if len(value) < 16 or any(c.isspace() for c in value) or placeholder(value):
        return False
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    return letters and (digits or mixed)


def luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        number = ord(char) - 48
        if index % 2:
            number = number * 2 - 9 if number > 4 else number * 2
        total += number
    return total % 10 == 0


# (first digits as text, low, high, lengths) of the card networks; a number outside these
# is not a card (a 16-digit order number starting with 1 never is).
_IIN: Final[tuple[tuple[int, int, int, frozenset[int]], ...]] = (
    (1, 4, 4, frozenset({13, 16, 19})),  # Visa
    (2, 51, 55, frozenset({16})),  # Mastercard
    (4, 2221, 2720, frozenset({16})),  # Mastercard 2-series
    (2, 34, 34, frozenset({15})),  # American Express
    (2, 37, 37, frozenset({15})),
    (4, 6011, 6011, frozenset(range(16, 20))),  # Discover
    (3, 644, 649, frozenset(range(16, 20))),
    (2, 65, 65, frozenset(range(16, 20))),
    (3, 300, 305, frozenset(range(14, 20))),  # Diners Club
    (2, 36, 36, frozenset(range(14, 20))),
    (2, 38, 39, frozenset(range(16, 20))),
    (4, 3528, 3589, frozenset(range(16, 20))),  # JCB
    (2, 62, 62, frozenset(range(16, 20))),  # UnionPay
)


def card(digits: str) -> bool:
    if not 13 <= len(digits) <= 19 or digits[0] not in "23456":
        return False
    head = int(digits[:4])  # the first 4 digits; a prefix of width w is head // 10**(4-w)
    for width, low, high, lengths in _IIN:
        if len(digits) in lengths and low <= head // 10 ** (4 - width) <= high:
            return luhn(digits)
    return False


def card_text(text: str) -> bool:
    digits = text.replace(" ", "").replace("-", "")
    if len(digits) < len(text):  # grouped like a card (4-4-4-4, 4-6-5), not "1 2 3 4 ..."
        separator = " " if " " in text else "-"
        groups = text.split(separator)
        if (separator == " " and "-" in text) or not all(3 <= len(g) <= 6 for g in groups):
            return False
    return card(digits)


# Published example numbers (an advertisement's, the SSA's "123-45-6789"): not anyone's.
_EXAMPLE_SSNS: Final = frozenset({"078-05-1120", "219-09-9999", "123-45-6789"})


def ssn(text: str) -> bool:
    area, group, serial = text.split("-")
    return (
        area not in ("000", "666")
        and area[0] != "9"
        and group != "00"
        and serial != "0000"
        and text not in _EXAMPLE_SSNS
    )


_IBAN_LENGTHS: Final = {
    **dict.fromkeys(("NO",), 15),
    **dict.fromkeys(("BE",), 16),
    **dict.fromkeys(("DK", "FI", "FO", "GL", "NL"), 18),
    **dict.fromkeys(("MK", "SI"), 19),
    **dict.fromkeys(("AT", "BA", "EE", "KZ", "LT", "LU", "XK"), 20),
    **dict.fromkeys(("CH", "HR", "LI", "LV"), 21),
    **dict.fromkeys(("BG", "BH", "CR", "DE", "GB", "GE", "IE", "ME", "RS", "VA"), 22),
    **dict.fromkeys(("AE", "GI", "IL", "IQ", "TL"), 23),
    **dict.fromkeys(("AD", "CZ", "ES", "MD", "PK", "RO", "SA", "SE", "SK", "TN", "VG"), 24),
    **dict.fromkeys(("PT", "ST"), 25),
    **dict.fromkeys(("IS", "TR"), 26),
    **dict.fromkeys(("FR", "GR", "IT", "MC", "MR", "SM"), 27),
    **dict.fromkeys(("AL", "AZ", "BY", "CY", "DO", "GT", "HU", "LB", "PL", "SV"), 28),
    **dict.fromkeys(("BR", "EG", "PS", "QA", "UA"), 29),
    **dict.fromkeys(("JO", "KW", "MU"), 30),
    **dict.fromkeys(("MT", "SC"), 31),
    **dict.fromkeys(("LC",), 32),
}


def iban_span(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    """The IBAN's span inside a candidate run (which may run on into other capitals):
    its country's length, then mod 97 == 1 (ISO 13616)."""
    length = _IBAN_LENGTHS.get(match.group(0)[:2])
    if length is None:
        return None
    start, chars, end = match.start(), 0, match.start()
    for end in range(start, match.end()):
        if text[end] != " ":
            chars += 1
            if chars == length:
                break
    if chars != length or (end + 1 < len(text) and text[end + 1].isalnum()):
        return None
    compact = text[start : end + 1].replace(" ", "")
    rotated = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in rotated)
    return (start, end + 1) if int(number) % 97 == 1 else None


def _b64json(part: str) -> Any:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        return json.loads(raw)
    except (binascii.Error, ValueError):
        return None


def jwt(token: str) -> bool:
    header = _b64json(token.split(".", 1)[0])
    return isinstance(header, dict) and "alg" in header


def basic(token: str) -> bool:
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password) and decoded.isprintable()


def aws_secret(value: str) -> bool:
    return (
        any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and any(c.isdigit() or c in "/+" for c in value)
    )

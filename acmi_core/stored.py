"""Stored JSON, as any client may have written it: read tolerantly, rendered exactly.

Other writers (the reference TypeScript SDK, JavaScript's JSON.stringify, older versions
of ACMI, a person with redis-cli) store what we would not: lone UTF-16 surrogates,
integers of any length, numbers beyond the double range, deep nesting, NaN. A read must
never fail on them: ``load_stored`` returns the value or raises :class:`Unreadable` with a
reason (never the content), and ``render_json`` writes back exactly what was read.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import sys
from decimal import Decimal
from typing import Any, Final

from acmi_core.model import Event, event_from_stored

# Deepest stored value a read serves; deeper is skipped and reported. Fixed rather than
# "whatever json.loads survives", which depends on the caller's stack depth; 512 levels
# decode and render with room to spare under Python's default recursion limit (1000).
MAX_READ_DEPTH: Final = 512


class JsonNumber(Decimal):
    """A stored JSON number no double can hold (beyond +-1.8e308, or a non-zero number
    below 5e-324): kept as written, so it renders back digit for digit."""

    text: str

    def __new__(cls, text: str) -> JsonNumber:
        number = super().__new__(cls, text)
        number.text = text
        return number


class Unreadable(Exception):
    """A stored value that cannot be served; ``reason`` never echoes its content."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


TOO_DEEP: Final = f"nested deeper than {MAX_READ_DEPTH} levels (the read limit)"
LONE_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")


def _number(text: str) -> float | JsonNumber:
    value = float(text)
    if math.isinf(value) or (value == 0.0 and text.lower().partition("e")[0].strip("-+0.")):
        return JsonNumber(text)  # overflow, or a non-zero number that underflowed to 0
    return value


def _constant(name: str) -> Any:
    raise Unreadable(f"holds {name}, which is not JSON")


# Built once: json.loads(..., parse_float=...) builds a decoder per call (5 us each).
_DECODER: Final = json.JSONDecoder(parse_float=_number, parse_constant=_constant)


def _too_deep(value: Any, text: str) -> bool:
    # cheap tests first: a level takes two characters, and an opening bracket
    if len(text) <= 2 * MAX_READ_DEPTH or text.count("{") + text.count("[") <= MAX_READ_DEPTH:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:  # iterative: the value may be too deep for recursion
        item, depth = stack.pop()
        if depth > MAX_READ_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def load_stored(raw: bytes) -> Any:
    """A stored JSON value, as another client may have written it. Raises ``Unreadable``
    (with a reason) for what cannot be served: not UTF-8, not JSON, NaN/Infinity, nested
    deeper than ``MAX_READ_DEPTH``, an integer past Python's digit limit."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8") from None
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise Unreadable(TOO_DEEP) from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            limit = sys.get_int_max_str_digits()
            raise Unreadable(f"holds an integer longer than {limit} digits") from None
        raise Unreadable("not JSON") from None
    if _too_deep(value, text):
        raise Unreadable(TOO_DEEP)
    return value


def render_json(value: Any, *, indent: int | None = None) -> bytes:
    """UTF-8 JSON of what a read returned, exactly (compact unless ``indent``):
    ``JsonNumber``s as written and lone surrogates as \\u escapes (as ensure_ascii writes
    them; UTF-8 cannot carry them). The stdlib encoder, not pydantic's, which stops at
    depth 255."""
    numbers: list[str] = []
    marker = f"\x00acmi-number-{secrets.token_hex(8)}-"

    def number(obj: object) -> str:
        if isinstance(obj, JsonNumber):
            numbers.append(obj.text)
            return f"{marker}{len(numbers) - 1}"
        raise TypeError(f"{type(obj).__name__} is not JSON")

    text = json.dumps(
        value,
        ensure_ascii=False,
        allow_nan=False,
        indent=indent,
        separators=(",", ": ") if indent is not None else (",", ":"),
        default=number,
    )
    if numbers:
        placeholder = re.compile(re.escape(json.dumps(marker)[:-1]) + r'(\d+)"')
        text = placeholder.sub(lambda m: numbers[int(m[1])], text)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text).encode("utf-8")


def _well_formed(data: dict[str, Any]) -> dict[str, Any] | None:
    """``data`` with lone surrogates in its top-level keys and strings replaced by U+FFFD
    (pydantic refuses them in str fields; payload and extra values are not checked), or
    None when there are none."""
    clean: dict[str, Any] = {}
    changed = False
    for name, value in data.items():
        fixed_name = LONE_SURROGATE.sub("\ufffd", name)
        fixed = LONE_SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value
        changed = changed or fixed_name != name or fixed is not value
        clean[fixed_name] = fixed
    return clean if changed else None


def decode_event(member: object) -> tuple[Event, dict[str, Any]] | str:
    """One stored timeline member: the event (perhaps legacy) and its stored dict, or
    why it is skipped (never its content)."""
    if not isinstance(member, bytes):
        return "not a string"
    try:
        data = load_stored(member)
    except Unreadable as exc:
        return exc.reason
    if not isinstance(data, dict):
        return "not a JSON object"
    event = event_from_stored(data)
    if isinstance(event, str) or event.legacy:
        # pydantic refuses lone surrogates in str fields: read them as U+FFFD (the stored
        # dict keeps them); only here, so a valid event costs no second look
        clean = _well_formed(data)
        if clean is not None:
            event = event_from_stored(clean)
    return event if isinstance(event, str) else (event, data)


BACKTICKS: Final = re.compile("`+")


def fence(body: str, info: str = "text") -> str:
    """``body`` in a code fence no backtick run inside it can close (CommonMark: a fence
    closes only with a run at least as long as the opening one): stored text shown to a
    reader (a wake bundle, an LLM prompt) stays data and cannot pose as instructions."""
    longest = max(map(len, BACKTICKS.findall(body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"


def load_object(raw: object) -> dict[str, Any] | None:
    """A stored JSON object (a profile, a rollup, a record), or None for anything else:
    absent, unreadable, or JSON that is not an object."""
    if not isinstance(raw, bytes):
        return None
    try:
        value = load_stored(raw)
    except Unreadable:
        return None
    return value if isinstance(value, dict) else None


def scored(reply: object, *, keep_unreadable: bool = False) -> list[tuple[str, int]]:
    """``(member, score)`` pairs of a ZRANGE ... WITHSCORES reply (members as text, scores
    as integer ms). A pair another tool wrote with a member that is not UTF-8 or an
    unusable score (inf, nan) is left out, or with ``keep_unreadable`` kept as ``("", 0)``
    so the list counts every member (for a cursor that pages by position)."""
    items = reply if isinstance(reply, list) else []
    pairs: list[tuple[str, int]] = []
    for member, score in zip(items[::2], items[1::2], strict=False):
        if isinstance(member, bytes) and isinstance(score, bytes):
            try:
                pairs.append((member.decode("utf-8"), int(float(score))))
            except (ValueError, OverflowError):  # UnicodeDecodeError is a ValueError
                if keep_unreadable:
                    pairs.append(("", 0))
    return pairs

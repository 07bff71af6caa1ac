"""Reading a request body: size cap, UTF-8, JSON, with errors that name the rule.

Every refusal is a 4xx naming ``body`` and a rule, never a 500: ``required``, ``utf8``,
``json`` (syntax, and control characters), ``max_depth`` (nesting deeper than
:data:`MAX_JSON_DEPTH`, checked by a linear pre-scan before the recursive parser runs)
and ``number`` (an integer longer than Python converts, 4,300 digits).
"""

from __future__ import annotations

import json
import re
import sys
from itertools import accumulate
from typing import Any, Final

from fastapi import Request

from acmi_core.base.errors import AcmiValidationError, PayloadTooLarge
from acmi_core.base.model import MAX_JSON_DEPTH

# Deeper documents are refused (the core's bound, one number): the recursive parser would
# hit Python's recursion limit near 1,000 levels (a 500), and stored documents past ~250
# levels broke every read of the entity. No sender we know nests past a dozen.

# The depth pre-scan works on the raw bytes (UTF-8 never puts an ASCII byte inside a
# multi-byte character): escaped quotes and backslashes out, then everything but quotes
# and brackets, then the strings (brackets inside them do not nest anything).
_QUOTE_OR_BACKSLASH_ESCAPE: Final = re.compile(rb'\\[\\"]')
_NOT_STRUCTURE: Final = bytes(c for c in range(256) if c not in b'"[]{}')
_STRING: Final = re.compile(rb'"[^"]*+"')
_SQUARE: Final = bytes.maketrans(b"{}", b"[]")
_DEPTH_STEP: Final = {ord("["): 1, ord("]"): -1}
# Rounds of removing innermost pairs tried before counting exactly: any ordinary body
# (a dozen levels at most) resolves in these, at C speed.
_PAIR_ROUNDS: Final = 8
# Control characters JSON forbids raw inside strings, except the three lenient sources
# may send (a raw newline, carriage return or tab in pasted text); a translate table
# that deletes every other byte finds them at C speed.
_FORBIDDEN_IN_LENIENT: Final = bytes(c for c in range(0x20) if c not in b"\t\n\r")
_ALL_BUT_FORBIDDEN: Final = bytes(c for c in range(256) if c not in _FORBIDDEN_IN_LENIENT)


async def read_raw(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge("body", "max_bytes", f"must be at most {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge("body", "max_bytes", f"must be at most {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(raw: bytes, *, lenient_strings: bool = False) -> Any:
    """JSON from raw bytes. ``lenient_strings`` accepts raw newlines, carriage returns and
    tabs inside strings (Make pastes mapped text into the body unescaped); any other
    control character is refused either way."""
    if not raw.strip():
        raise AcmiValidationError("body", "required", "must be a JSON document")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AcmiValidationError(
            "body", "utf8", f"must be UTF-8 (invalid byte at offset {exc.start})"
        ) from None
    if lenient_strings:
        _check_control_characters(raw)
    _check_depth(raw)
    try:
        return json.loads(text, strict=not lenient_strings, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise AcmiValidationError(
            "body", "json", f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except AcmiValidationError:
        raise
    except ValueError:  # the only other: an integer past Python's conversion limit
        limit = sys.get_int_max_str_digits()
        raise AcmiValidationError(
            "body", "number", f"integers may have at most {limit} digits"
        ) from None


def _check_control_characters(raw: bytes) -> None:
    found = raw.translate(None, _ALL_BUT_FORBIDDEN)
    if found:
        before = raw[: raw.find(found[:1])].decode("utf-8")
        line, column = before.count("\n") + 1, len(before) - before.rfind("\n")
        raise AcmiValidationError(
            "body",
            "json",
            f"is not valid JSON: control character U+{found[0]:04X} at line {line} "
            f"column {column} (only raw newlines, carriage returns and tabs may appear "
            "inside strings)",
        )


def _check_depth(raw: bytes) -> None:
    """Refuse nesting deeper than MAX_JSON_DEPTH, in time linear in the body: a few
    C-level passes for ordinary bodies, one counting pass for deep or broken ones."""
    if _too_deep(raw):
        raise AcmiValidationError(
            "body", "max_depth", f"must nest arrays and objects at most {MAX_JSON_DEPTH} deep"
        )


def _too_deep(raw: bytes) -> bool:
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return False  # almost every body: too few brackets to be that deep
    if b"\\" in raw:
        raw = _QUOTE_OR_BACKSLASH_ESCAPE.sub(b"", raw)  # other escapes hide no quote
    # Two quotes in a row are an empty string or the end and start of two strings with
    # nothing between them: dropping them keeps what is inside and outside strings.
    skeleton = raw.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    brackets = _STRING.sub(b"", skeleton).translate(_SQUARE, b'"')  # and an unclosed one
    if b"[" * (MAX_JSON_DEPTH + 1) in brackets:
        return True  # that many openers in a row nest that deep, whatever follows
    rest = brackets
    for _ in range(_PAIR_ROUNDS):
        shorter = rest.replace(b"[]", b"")
        if not shorter:
            return False  # balanced, and no deeper than the rounds taken
        if len(shorter) == len(rest):
            break  # only unmatched brackets left: invalid JSON, measured below
        rest = shorter
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > MAX_JSON_DEPTH


def _reject_constant(name: str) -> Any:
    raise AcmiValidationError("body", "json", f"{name} is not valid JSON")


async def read_json(request: Request, max_bytes: int, *, lenient_strings: bool = False) -> Any:
    return parse_json(await read_raw(request, max_bytes), lenient_strings=lenient_strings)

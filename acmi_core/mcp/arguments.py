"""The one check of a JSON-RPC message before the SDK decodes it, for both transports (a
POST body of the mcp function, ``mcp/http.py``; a line of ``acmi mcp``, ``mcp/stdio.py``):
what the SDK cannot decode is answered here, a tool error naming the argument and the
rule, instead of the SDK's HTTP 500 / -32603 (or, over stdio, no answer at all).

The SDK's transport parses with ``json.loads`` and pydantic: nesting near 1,000 levels is a
RecursionError, an integer past 4,300 digits a ValueError, and a lone surrogate (``"\\udfff"``,
valid JSON, not valid Unicode) in a tool's name a 500 (in an argument, an unnamed -32602).
Refused here:

- ``max_depth``: an argument nested deeper than :data:`MAX_ARGUMENT_DEPTH` (the deepest
  value a write takes, inside the object an argument may be, e.g. an event's payload);
- ``number``: an integer of more digits than Python converts;
- ``utf8``: a lone surrogate in the tool's name, an argument's name or any of its text.

The common message pays three C-speed scans (brackets, long digit runs, surrogate
escapes) and no parse; only a message that trips one is parsed here, with the too-deep
parts cut out first (a linear scan) so that the parse cannot recurse."""

from __future__ import annotations

import json
import re
import secrets
import sys
from collections.abc import Iterator
from typing import Any, Final

from acmi_core.api.status import well_formed
from acmi_core.base.model import MAX_JSON_DEPTH
from acmi_core.base.stored import LONE_SURROGATE

# An argument (an event, a profile) is one level above the values writes limit.
MAX_ARGUMENT_DEPTH: Final = MAX_JSON_DEPTH + 1
# The message, its params and the arguments object hold an argument's value.
_ENVELOPE: Final = 3
_CUT_DEPTH: Final = _ENVELOPE + MAX_ARGUMENT_DEPTH
_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*+"|[\[\]{}]')
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
_DIGITS: Final = sys.get_int_max_str_digits()
_LONG_DIGITS: Final = re.compile(rb"\d{%d}" % (_DIGITS + 1))
# What a cut part becomes: a string no client sends (random per process).
_CUT: Final = f"acmi-too-deep-{secrets.token_hex(8)}"
_CUT_BYTES: Final = json.dumps(_CUT).encode()


class _LongInteger:
    """An integer the parser was given as too many digits (kept as its digit count)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _int(digits: str) -> Any:
    return _LongInteger(len(digits)) if len(digits.lstrip("-")) > _DIGITS else int(digits)


def refusal(raw: bytes) -> tuple[int, dict[str, Any]] | None:
    """(HTTP status, JSON-RPC answer) for a message the SDK could not decode; None for
    every other message (the SDK answers it, bad JSON included)."""
    deep = raw.count(b"[") + raw.count(b"{") > _CUT_DEPTH
    if not (deep or _LONG_DIGITS.search(raw) or _SURROGATE_ESCAPE.search(raw)):
        return None
    try:
        message = json.loads(_cut(raw) if deep else raw, parse_int=_int)
    except ValueError:  # not JSON (or not UTF-8): the SDK's parse error, unless too deep
        if not deep:
            return None
        return 400, _rpc_error(None, -32700, "Parse error: not valid JSON")
    if not isinstance(message, dict):
        return 400, _rpc_error(None, -32600, "Invalid request: one JSON-RPC message per POST")
    ident = message.get("id")
    if not isinstance(ident, (str, int)) or isinstance(ident, bool):
        ident = None
    params = message.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    if message.get("method") == "tools/call" and isinstance(params, dict) and ident is not None:
        found = next(_problems(params.get("name"), "name"), None)
        for key, item in (arguments if isinstance(arguments, dict) else {}).items():
            if found is not None:
                break
            found = next(_problems({key: item}, ""), None)
            if found is not None and found[1] == "max_depth":
                found = (key, *found[1:])  # the argument, not the path down to the cut
        if found is not None:
            return 200, _tool_error(ident, found)
    found = next(_problems(message, ""), None)
    if found is None:
        return None
    where, rule, why = found
    text = well_formed(f"{where or 'message'}: {why} (rule: {rule})")
    return (
        (200, _rpc_error(ident, -32602, text))
        if ident is not None
        else (400, _rpc_error(None, -32600, text))
    )


def _cut(raw: bytes) -> bytes:
    """``raw`` with every array or object deeper than ``_CUT_DEPTH`` replaced by the
    ``_CUT`` string, in one pass over its brackets and strings."""
    parts: list[bytes] = []
    depth, start, kept = 0, -1, 0
    for token in _TOKEN.finditer(raw):
        char = raw[token.start()]
        if char == ord('"'):
            continue
        if char in b"[{":
            depth += 1
            if depth == _CUT_DEPTH + 1:
                start = token.start()
        else:
            if depth == _CUT_DEPTH + 1 and start >= 0:
                parts += [raw[kept:start], _CUT_BYTES]
                kept, start = token.end(), -1
            depth -= 1
    if start >= 0:  # never closed: cut to the end (the parse then fails)
        parts += [raw[kept:start], _CUT_BYTES]
        kept = len(raw)
    parts.append(raw[kept:])
    return b"".join(parts)


def _problems(value: Any, where: str) -> Iterator[tuple[str, str, str]]:
    """(path, rule, why) of each value the SDK could not decode, depth first."""
    if isinstance(value, str):
        if value == _CUT:
            why = f"must nest arrays and objects at most {MAX_ARGUMENT_DEPTH} deep"
            yield where, "max_depth", why
        elif LONE_SURROGATE.search(value):
            yield where, "utf8", "contains a lone UTF-16 surrogate: not valid Unicode text"
    elif isinstance(value, _LongInteger):
        yield where, "number", f"integers may have at most {_DIGITS} digits ({value.digits} given)"
    elif isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else key
            if LONE_SURROGATE.search(key):
                yield path, "utf8", "the name contains a lone UTF-16 surrogate"
            yield from _problems(item, path)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from _problems(item, f"{where}[{n}]")


def _tool_error(ident: str | int, found: tuple[str, str, str]) -> dict[str, Any]:
    where, rule, why = found
    text = well_formed(f"{where}: {why} (rule: {rule})")
    result = {"content": [{"type": "text", "text": text}], "isError": True}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def _rpc_error(ident: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}

"""Reading a request body: size cap, UTF-8, JSON, with errors that name the rule."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from acmi_core.errors import AcmiValidationError, PayloadTooLarge


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
    """JSON from raw bytes. ``lenient_strings`` accepts raw newlines/tabs inside strings:
    Make pastes mapped text into the body unescaped."""
    if not raw.strip():
        raise AcmiValidationError("body", "required", "must be a JSON document")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AcmiValidationError(
            "body", "utf8", f"must be UTF-8 (invalid byte at offset {exc.start})"
        ) from None
    try:
        return json.loads(text, strict=not lenient_strings, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise AcmiValidationError(
            "body", "json", f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None


def _reject_constant(name: str) -> Any:
    raise AcmiValidationError("body", "json", f"{name} is not valid JSON")


async def read_json(request: Request, max_bytes: int, *, lenient_strings: bool = False) -> Any:
    return parse_json(await read_raw(request, max_bytes), lenient_strings=lenient_strings)

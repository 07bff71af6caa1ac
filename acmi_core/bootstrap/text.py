"""Measures and stamps of a bundle's text, used by the bundle, its budget and its renderer
alike (so none of those imports another for them)."""

from __future__ import annotations

import math
import time


def iso(ms: float) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
    except (OverflowError, OSError, ValueError):
        return str(ms)


def utf8_len(text: str) -> int:
    # surrogatepass: a lone surrogate costs its 3 bytes, as the U+FFFD it is shown as
    return len(text.encode("utf-8", "surrogatepass"))


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` costs an LLM, estimated with no tokenizer download: one per 3
    UTF-8 bytes (real tokenizers: 3.5-4.5 on English and JSON), so it rarely undercounts."""
    return math.ceil(utf8_len(text) / 3)

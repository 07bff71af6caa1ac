"""The seed's size limits per layer (§12 "Token Budget Rules"), checked on rendered text.

Over budget is reported with the fix the seed prescribes, never cut: a memory file that
was truncated would lose what the agent wrote down. Tokens are estimated offline as one
per 3 UTF-8 bytes, the rule the bootstrap budget uses (real tokenizers: 3.5-4.5 bytes a
token on English), so the estimate errs on the safe side. A KB is 1,024 bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from acmi_core.memory.layers import Layer, MemorySnapshot
from acmi_core.memory.results import BudgetCheck


@dataclass(frozen=True)
class Budget:
    """One row of the seed's table: a layer's file, its limits, what to do when over."""

    layer: Layer
    file: str
    max_lines: int
    max_bytes: int
    fix: str


BUDGETS: Final[dict[Layer, Budget]] = {
    b.layer: b
    for b in (
        Budget("hot", "ACTIVE-CONTEXT.md", 50, 2 * 1024, "Move items to daily notes"),
        Budget("warm", "MEMORY.md", 500, 25 * 1024, "Split into topic files"),
        Budget("daily", "Daily notes", 200, 10 * 1024, "Summarize, stop transcribing"),
        Budget("topic", "Topic files", 300, 15 * 1024, "Split or archive"),
    )
}
# The cold layer has no budget: archives load only on an explicit search (seed §12).


@dataclass(frozen=True)
class BudgetReport:
    """How one rendered file measures against its layer's budget. ``over`` names what is
    over (``("lines", "bytes")``); ``fix`` is the seed's remedy when anything is."""

    layer: Layer
    lines: int
    bytes: int
    tokens: int
    max_lines: int | None
    max_bytes: int | None
    over: tuple[str, ...]
    fix: str | None
    path: str | None = None

    @property
    def ok(self) -> bool:
        return not self.over

    def to_dict(self) -> BudgetCheck:
        return {
            "path": self.path,
            "layer": self.layer,
            "lines": self.lines,
            "bytes": self.bytes,
            "tokens": self.tokens,
            "max_lines": self.max_lines,
            "max_bytes": self.max_bytes,
            "over": list(self.over),
            "fix": self.fix,
        }


def count_lines(text: str) -> int:
    """Lines as an editor counts them: a last line without a line break counts too."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def estimate_tokens(size: int) -> int:
    return math.ceil(size / 3)


def check(layer: Layer, text: str, path: str | None = None) -> BudgetReport:
    """Measure ``text`` (a file of ``layer`` as rendered) against the seed's budget."""
    lines = count_lines(text)
    size = len(text.encode("utf-8", "surrogatepass"))
    budget = BUDGETS.get(layer)
    if budget is None:
        return BudgetReport(layer, lines, size, estimate_tokens(size), None, None, (), None, path)
    over = tuple(
        name
        for name, value, limit in (
            ("lines", lines, budget.max_lines),
            ("bytes", size, budget.max_bytes),
        )
        if value > limit
    )
    return BudgetReport(
        layer,
        lines,
        size,
        estimate_tokens(size),
        budget.max_lines,
        budget.max_bytes,
        over,
        budget.fix if over else None,
        path,
    )


def rendered_files(snapshot: MemorySnapshot) -> Iterator[tuple[str, Layer, str]]:
    """Every Markdown file of a snapshot as (path, layer, text)."""
    if snapshot.active_context is not None:
        yield "ACTIVE-CONTEXT.md", "hot", snapshot.active_context.render()
    if snapshot.memory is not None:
        yield "MEMORY.md", "warm", snapshot.memory.render()
    for note in snapshot.daily:
        yield note.path, "daily", note.render()
    for topic in snapshot.topics:
        yield topic.path, "topic", topic.render()
    for archive in snapshot.archives:
        yield archive.path, "cold", archive.render()


def check_snapshot(snapshot: MemorySnapshot) -> list[BudgetReport]:
    """A report per file (what ``memory status`` shows), in tree order."""
    return [check(layer, text, path) for path, layer, text in rendered_files(snapshot)]

"""The seed's size limits per layer (acmi_core.memory.budgets): reported, never cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from acmi_core.memory import BUDGETS, check, check_snapshot, read_tree

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"


def test_the_budgets_are_the_seeds_table() -> None:
    # seed 002 §12 "Token Budget Rules": file, max size, if over limit
    assert {layer: (b.file, b.max_lines, b.max_bytes, b.fix) for layer, b in BUDGETS.items()} == {
        "hot": ("ACTIVE-CONTEXT.md", 50, 2048, "Move items to daily notes"),
        "warm": ("MEMORY.md", 500, 25600, "Split into topic files"),
        "daily": ("Daily notes", 200, 10240, "Summarize, stop transcribing"),
        "topic": ("Topic files", 300, 15360, "Split or archive"),
    }


def test_the_oversize_fixture_day_is_flagged_with_the_seeds_fix() -> None:
    reports = check_snapshot(read_tree(FIXTURE))
    over = [r for r in reports if not r.ok]
    assert [r.path for r in over] == ["memory/2026-01-21.md"]  # the transcribed workshop
    (report,) = over
    assert report.layer == "daily"
    assert report.over == ("lines", "bytes")
    assert report.fix == "Summarize, stop transcribing"
    assert report.lines == 203 and report.bytes == 15185 and report.tokens == 5062
    assert len(reports) == 2 + 24 + 4 + 1  # every Markdown file is measured
    assert {r.layer for r in reports} == {"hot", "warm", "daily", "topic", "cold"}
    assert report.to_dict()["over"] == ["lines", "bytes"]


@pytest.mark.parametrize(
    ("layer", "text", "over", "fix"),
    [
        ("hot", "- item\n" * 50, (), None),
        ("hot", "- item\n" * 51, ("lines",), "Move items to daily notes"),
        ("hot", "x" * 2049, ("bytes",), "Move items to daily notes"),
        ("warm", "- fact\n" * 501, ("lines",), "Split into topic files"),
        ("warm", ("y" * 99 + "\n") * 257, ("bytes",), "Split into topic files"),
        ("daily", "- [08:00] e\n" * 201, ("lines",), "Summarize, stop transcribing"),
        ("topic", "- fact\n" * 301, ("lines",), "Split or archive"),
        ("topic", "é" * 7681, ("bytes",), "Split or archive"),  # 2 bytes each in UTF-8
        ("cold", "- old\n" * 5000, (), None),  # archives load on demand: no budget
    ],
)
def test_each_layer_reports_its_own_fix(
    layer: str, text: str, over: tuple[str, ...], fix: str | None
) -> None:
    report = check(layer, text)  # type: ignore[arg-type]
    assert (report.over, report.fix, report.ok) == (over, fix, not over)


def test_lines_count_a_last_line_without_a_break() -> None:
    assert check("hot", "").lines == 0
    assert check("hot", "a").lines == 1
    assert check("hot", "a\nb").lines == 2
    assert check("hot", "a\nb\n").lines == 2

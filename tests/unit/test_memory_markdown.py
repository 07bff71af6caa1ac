"""The lossless Markdown codec of the memory files (acmi_core.memory.markdown)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acmi_core.memory.markdown import (
    Bullet,
    Document,
    Entry,
    MemoryFormatError,
    Row,
    Section,
    Subsection,
    Task,
    Text,
    parse_document,
    parse_item,
    render_document,
)

# Lines built from the pieces Markdown memory files are made of, so generated text hits
# every branch (headings, fences, stamps, tasks, rows, blank lines) often.
PIECES = st.sampled_from(
    [
        "# ",
        "## ",
        "### ",
        "- ",
        "- [ ] ",
        "- [x] ",
        "- [X] ",
        "- [08:15] ",
        "- [8:05]",
        "| ",
        " |",
        "|",
        "```",
        "\\|",
        "  ",
        "Last updated: ",
        "🔥",
        "—",
        "\r",
        "\t",
        "word",
        "",
    ]
)
LINE = st.lists(PIECES, max_size=4).map("".join)
TEXT = st.lists(LINE, max_size=25).map("\n".join) | st.text(max_size=200)


@pytest.mark.slow  # a property run: seconds
@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_any_text_renders_back_byte_for_byte(text: str) -> None:
    assert render_document(parse_document(text)) == text


@pytest.mark.slow  # a property run: seconds
@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_parsing_a_rendering_gives_the_same_document(text: str) -> None:
    doc = parse_document(text)
    assert parse_document(render_document(doc)) == doc


@pytest.mark.parametrize(
    ("line", "item"),
    [
        ("- [08:15] Started session", Entry("08:15", "Started session")),
        ("- [8:05] early", Entry("8:05", "early")),
        ("- [ ] Follow up on X", Task("Follow up on X", done=False)),
        ("- [x] Sent the pack", Task("Sent the pack", done=True)),
        ("- plain bullet", Bullet("plain bullet")),
        (
            "| 2026-01-06 | Dagster | no VM | trial |",
            Row(("2026-01-06", "Dagster", "no VM", "trial")),
        ),
        ("| a \\| b | c |", Row(("a \\| b", "c"))),
        # kept verbatim: each would render differently as a typed item
        ("- [X] capital X", Bullet("[X] capital X")),
        ("- [24:00] no time", Bullet("[24:00] no time")),
        ("-  two spaces", Bullet(" two spaces")),
        ("|------|----------|", Text("|------|----------|")),
        ("| | | | |", Text("| | | | |")),
        ("  - nested", Text("  - nested")),
        ("* star bullet", Text("* star bullet")),
        ("A paragraph.", Text("A paragraph.")),
        ("", Text("")),
    ],
)
def test_a_line_is_typed_only_when_it_renders_back(line: str, item: object) -> None:
    parsed = parse_item(line)
    assert parsed == item
    assert parsed.render() == line


def test_document_structure() -> None:
    text = (
        "# 2026-01-15 — Daily Notes\n"
        "\n"
        "## Morning\n"
        "- [08:15] Started session\n"
        "\n"
        "## Projects\n"
        "intro\n"
        "### Alpha\n"
        "- Status: green\n"
        "\n"
        "### Beta\n"
        "- Status: red\n"
    )
    doc = parse_document(text)
    assert doc == Document(
        title="2026-01-15 — Daily Notes",
        preamble=("",),
        sections=(
            Section("Morning", (Entry("08:15", "Started session"),), (), gap=1),
            Section(
                "Projects",
                (Text("intro"),),
                (
                    Subsection("Alpha", (Bullet("Status: green"),), gap=1),
                    Subsection("Beta", (Bullet("Status: red"),), gap=0),
                ),
                gap=0,
            ),
        ),
        final_newline=True,
    )
    assert render_document(doc) == text


def test_headings_inside_a_fence_are_text() -> None:
    text = "## Notes\n```\n## not a heading\n### nor this\n```\n## Next\n"
    doc = parse_document(text)
    assert [s.heading for s in doc.sections] == ["Notes", "Next"]
    assert doc.sections[0].items[1] == Text("## not a heading")
    assert render_document(doc) == text


@pytest.mark.parametrize("text", ["", "\n", "no newline", "# t", "a\r\nb\r\n", "\n\n\n"])
def test_edge_texts(text: str) -> None:
    assert render_document(parse_document(text)) == text


def test_a_stamp_that_is_no_time_names_file_and_line() -> None:
    text = "# 2026-01-15 — Daily Notes\n\n## Morning\n- [08:15] ok\n- [25:61] broken\n"
    with pytest.raises(MemoryFormatError) as err:
        parse_document(text, path="memory/2026-01-15.md", times=True)
    assert err.value.field == "memory/2026-01-15.md:5"
    assert err.value.rule == "entry_time"
    assert "[25:61] is not a time of day" in err.value.message
    # outside daily notes a stamp-like line is just a bullet
    assert parse_document(text).sections[0].items[1] == Bullet("[25:61] broken")

"""A daily note's appended lines, placed a section at a time (memory/daily.py
``_append_all``), land exactly where one ``_append`` after another puts them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acmi_core.memory.daily import _append, _append_all

HEADINGS = ("Morning", "Afternoon", "Evening", "Notes")
LINE = st.one_of(
    st.sampled_from(["", "## Morning", "## Notes", "- [09:00] a", "- b", "text"]),
    st.text(alphabet="#- ab\n", max_size=6),
)
NOTE = st.lists(st.one_of(st.sampled_from([f"## {h}" for h in HEADINGS]), LINE), max_size=12)
PAIRS = st.lists(st.tuples(st.sampled_from(HEADINGS), LINE), max_size=40)


def one_at_a_time(lines: list[str], pairs: list[tuple[str, str]]) -> list[str]:
    out = list(lines)
    for heading, line in pairs:
        _append(out, heading, line)
    return out


@given(NOTE, PAIRS)
def test_a_section_at_a_time_is_one_line_at_a_time(
    note: list[str], pairs: list[tuple[str, str]]
) -> None:
    batched = list(note)
    _append_all(batched, pairs)
    assert batched == one_at_a_time(note, pairs)


@given(NOTE, st.lists(st.tuples(st.sampled_from(HEADINGS), st.sampled_from(["- x", "- y", "z"]))))
def test_plain_lines_take_the_grouped_path_and_agree(
    note: list[str], pairs: list[tuple[str, str]]
) -> None:
    batched = list(note)
    _append_all(batched, pairs)
    assert batched == one_at_a_time(note, pairs)

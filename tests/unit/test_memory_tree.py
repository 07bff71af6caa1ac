"""The seed's file tree <-> MemorySnapshot (acmi_core.memory.tree): byte for byte."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from acmi_core.memory import (
    MemoryFormatError,
    parse_tree,
    read_tree,
    render_tree,
    snapshot_from_slots,
    snapshot_to_slots,
    write_tree,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"


def fixture_files() -> dict[str, bytes]:
    return {
        p.relative_to(FIXTURE).as_posix(): p.read_bytes() for p in FIXTURE.rglob("*") if p.is_file()
    }


def test_the_fixture_tree_renders_back_byte_for_byte() -> None:
    files = fixture_files()
    snapshot = parse_tree(files)
    assert snapshot.ignored == ()
    assert render_tree(snapshot) == files


def test_export_import_export_is_byte_identical(tmp_path: Path) -> None:
    """Import the tree into ACMI's slots, export it to a directory, import and export
    again: both exports are the fixture, byte for byte."""
    first, second = tmp_path / "first", tmp_path / "second"
    image = snapshot_to_slots(read_tree(FIXTURE), source="agent:atlas")
    written = write_tree(snapshot_from_slots(image), first)
    assert len(written) == len(fixture_files())
    image = snapshot_to_slots(read_tree(first), source="agent:atlas")
    write_tree(snapshot_from_slots(image), second)
    for root in (first, second):
        assert {
            p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
        } == fixture_files()


def test_other_files_are_listed_and_left_alone(tmp_path: Path) -> None:
    files = {
        **fixture_files(),
        "NOTES.md": b"# NOTES.md\n",
        "memory/notes.txt": b"scratch\n",
        "memory/today.md": b"# not a dated note\n",
    }
    snapshot = parse_tree(files)
    assert snapshot.ignored == ("NOTES.md", "memory/notes.txt", "memory/today.md")
    assert "NOTES.md" not in render_tree(snapshot)
    (tmp_path / "NOTES.md").write_text("mine\n")
    write_tree(snapshot, tmp_path)
    assert (tmp_path / "NOTES.md").read_text() == "mine\n"


def test_the_startup_files_are_read_and_rendered_as_written() -> None:
    files = {**fixture_files(), "AGENTS.md": b"# AGENTS.md\r\nno final newline", "SOUL.md": b""}
    snapshot = parse_tree(files)
    assert snapshot.startup == (("SOUL.md", ""), ("AGENTS.md", "# AGENTS.md\r\nno final newline"))
    assert render_tree(snapshot) == files
    assert snapshot.for_scope("group", today=dt.date(2026, 1, 15)).startup == (("SOUL.md", ""),)
    assert snapshot.for_scope("subagent", today=dt.date(2026, 1, 15)).startup == ()


@pytest.mark.parametrize(
    ("path", "content", "field", "rule"),
    [
        ("memory/2026-13-45.md", b"# x\n", "memory/2026-13-45.md", "date"),
        ("memory/2026-1-5.md", b"# x\n", "memory/2026-1-5.md", "date"),
        ("memory/archive/2025-Q5.md", b"# x\n", "memory/archive/2025-Q5.md", "archive_name"),
        ("memory/topics/big plan.md", b"# x\n", "memory/topics/big plan.md", "topic_slug"),
        ("MEMORY.md", b"# MEMORY.md\n\n## Lessons\n- caf\xe9\n", "MEMORY.md:4", "utf8"),
        (
            "memory/2026-01-15.md",
            b"# 2026-01-15 \xe2\x80\x94 Daily Notes\n\n## Morning\n- [08:15] ok\n- [8:75] typo\n",
            "memory/2026-01-15.md:5",
            "entry_time",
        ),
        (
            "memory/heartbeat-state.json",
            b'{\n  "last_archive": "2025-12-31"\n  "daily_notes_count": 3\n}\n',
            "memory/heartbeat-state.json:3",
            "json",
        ),
    ],
)
def test_malformed_files_name_file_and_line(
    path: str, content: bytes, field: str, rule: str
) -> None:
    with pytest.raises(MemoryFormatError) as err:
        parse_tree({**fixture_files(), path: content})
    assert (err.value.field, err.value.rule) == (field, rule)
    assert err.value.path == path


def test_reading_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MemoryFormatError) as err:
        read_tree(tmp_path / "nope")
    assert err.value.rule == "directory"

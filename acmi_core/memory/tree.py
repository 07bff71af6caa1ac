"""The seed's file tree (§1) to and from a :class:`MemorySnapshot`.

::

    MEMORY.md                       ACTIVE-CONTEXT.md
    memory/YYYY-MM-DD.md            memory/heartbeat-state.json
    memory/topics/<slug>.md         memory/archive/YYYY-QN.md
    SOUL.md  USER.md  AGENTS.md     (the startup files, kept as written)

``parse_tree`` / ``render_tree`` are pure (relative path -> bytes); ``read_tree`` /
``write_tree`` add the file system. ``render_tree(parse_tree(files))`` gives back every
memory file byte for byte. Other files (anything else under ``memory/`` or beside
it) are listed in ``snapshot.ignored`` and never written. Files are UTF-8;
anything else is a :class:`MemoryFormatError` naming the file and line.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import MAX_JSON_DEPTH
from acmi_core.memory.layers import (
    STARTUP_PATHS,
    ActiveContext,
    ArchiveFile,
    DailyNote,
    HeartbeatState,
    LongTermMemory,
    MemorySnapshot,
    Quarter,
    TopicFile,
    parse_date,
)
from acmi_core.memory.markdown import MemoryFormatError

ACTIVE_PATH: Final = "ACTIVE-CONTEXT.md"
MEMORY_PATH: Final = "MEMORY.md"
HEARTBEAT_PATH: Final = HeartbeatState.PATH
_DAILY: Final = re.compile(r"memory/([^/]+)\.md")
_TOPIC: Final = re.compile(r"memory/topics/([^/]+)\.md")
_ARCHIVE: Final = re.compile(r"memory/archive/([^/]+)\.md")
# a name shaped like a date is a daily note (and must then be a real date)
_DATE_LIKE: Final = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")
# The days a daily note may have: its events are stamped from its midnight to the next
# one in the tree's zone (up to 14 hours off UTC), and an event's ts runs from the epoch
# to the end of 9999 (base/model.py MAX_TS_MS), so the first and last day are left out.
FIRST_DAY: Final = dt.date(1970, 1, 2)
LAST_DAY: Final = dt.date(9999, 12, 30)


def _decode(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise MemoryFormatError(
            path, line, "utf8", f"is not UTF-8 (byte {exc.start}); memory files are UTF-8 text"
        ) from None


def _day(raw: str, path: str) -> dt.date:
    date = parse_date(raw, path)
    if not FIRST_DAY <= date <= LAST_DAY:
        raise MemoryFormatError(
            path, None, "date_range", f"a daily note's day must be from {FIRST_DAY} to {LAST_DAY}"
        )
    return date


def _heartbeat(path: str, text: str) -> HeartbeatState:
    """The heartbeat file, its JSON refused before the parser fails on it: nesting past
    what the stored value may have (``MAX_JSON_DEPTH``) and integers past Python's
    conversion limit."""
    if _nesting(text) > MAX_JSON_DEPTH:
        raise MemoryFormatError(
            path, None, "max_depth", f"must nest arrays and objects at most {MAX_JSON_DEPTH} deep"
        )
    try:
        return HeartbeatState.parse(text, path)
    except AcmiValidationError:  # (a ValueError too) the file's own rules
        raise
    except ValueError:  # JSON's only other: an integer past Python's conversion limit
        limit = sys.get_int_max_str_digits()
        raise MemoryFormatError(
            path, None, "number", f"integers may have at most {limit} digits"
        ) from None


def _nesting(text: str) -> int:
    """How deep ``text``'s brackets nest outside strings, in one pass (a bound: the
    parser refuses what is not JSON)."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0  # every ordinary file: too few brackets to be that deep
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_tree(files: Mapping[str, bytes]) -> MemorySnapshot:
    """A snapshot of ``files`` (relative POSIX path -> content)."""
    active = memory = heartbeat = None
    daily: list[DailyNote] = []
    topics: list[TopicFile] = []
    archives: list[ArchiveFile] = []
    ignored: list[str] = []
    startup: dict[str, str] = {}
    for path in sorted(files):
        if path in STARTUP_PATHS:  # free text: no template to hold it to
            startup[path] = _decode(path, files[path])
        elif path == ACTIVE_PATH:
            active = ActiveContext.parse(_decode(path, files[path]), path)
        elif path == MEMORY_PATH:
            memory = LongTermMemory.parse(_decode(path, files[path]), path)
        elif path == HEARTBEAT_PATH:
            heartbeat = _heartbeat(path, _decode(path, files[path]))
        elif (match := _TOPIC.fullmatch(path)) is not None:
            topics.append(TopicFile.parse(_decode(path, files[path]), match[1], path))
        elif (match := _ARCHIVE.fullmatch(path)) is not None:
            quarter = Quarter.parse(match[1], path)
            archives.append(ArchiveFile.parse(_decode(path, files[path]), quarter, path))
        elif (match := _DAILY.fullmatch(path)) is not None and _DATE_LIKE.fullmatch(match[1]):
            date = _day(match[1], path)
            daily.append(DailyNote.parse(_decode(path, files[path]), date, path))
        else:
            ignored.append(path)
    return MemorySnapshot(
        active_context=active,
        memory=memory,
        daily=tuple(sorted(daily, key=lambda d: d.date)),
        topics=tuple(sorted(topics, key=lambda t: t.slug)),
        archives=tuple(sorted(archives, key=lambda a: a.quarter)),
        heartbeat=heartbeat,
        ignored=tuple(ignored),
        startup=tuple((p, startup[p]) for p in STARTUP_PATHS if p in startup),
    )


def render_tree(snapshot: MemorySnapshot) -> dict[str, bytes]:
    """Every memory file of ``snapshot`` (relative path -> UTF-8 bytes), in tree order."""
    files: dict[str, str] = dict(snapshot.startup)
    if snapshot.memory is not None:
        files[MEMORY_PATH] = snapshot.memory.render()
    if snapshot.active_context is not None:
        files[ACTIVE_PATH] = snapshot.active_context.render()
    for note in snapshot.daily:
        files[note.path] = note.render()
    if snapshot.heartbeat is not None:
        files[HEARTBEAT_PATH] = snapshot.heartbeat.render()
    for topic in snapshot.topics:
        files[topic.path] = topic.render()
    for archive in snapshot.archives:
        files[archive.path] = archive.render()
    return {path: text.encode("utf-8", "surrogatepass") for path, text in files.items()}


def _files(root: str | Path) -> dict[str, bytes]:
    base = Path(root)
    if not base.is_dir():
        raise MemoryFormatError(str(root), None, "directory", "is not a directory")
    return {
        path.relative_to(base).as_posix(): path.read_bytes()
        for path in base.rglob("*")
        if path.is_file()
    }


def read_tree(root: str | Path) -> MemorySnapshot:
    """The snapshot of the tree under ``root`` (its workspace directory)."""
    return parse_tree(_files(root))


def read_files(root: str | Path) -> dict[str, str]:
    """The memory files under ``root`` as {relative path: text}, as the API's import takes
    them: only the files the tree reads (others are left out, as ``parse_tree`` ignores
    them), each decoded as UTF-8 (a lone surrogate kept, as ``parse_tree`` reads it)."""
    files = _files(root)
    kept = set(render_tree(parse_tree(files)))
    return {path: files[path].decode("utf-8", "surrogatepass") for path in sorted(kept)}


def write_tree(snapshot: MemorySnapshot, root: str | Path) -> list[str]:
    """Write ``snapshot``'s files under ``root`` (making ``memory/`` as the seed says);
    other files there are left alone. Returns the paths written."""
    return write_files(render_tree(snapshot), root)


def write_files(files: Mapping[str, bytes | str], root: str | Path) -> list[str]:
    """Write rendered files (relative path -> bytes, or text as the API's export gives it)
    under ``root``; a path that would leave ``root`` is refused before anything is written."""
    base = Path(root).resolve()
    targets = []
    for path in files:
        target = (base / path).resolve()
        if base not in target.parents:
            raise MemoryFormatError(path, None, "inside_tree", "leaves the tree's folder")
        targets.append((path, target))
    written = []
    for path, target in targets:
        data = files[path]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(
            data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
        )
        written.append(path)
    return written


def tree_texts(snapshot: MemorySnapshot) -> dict[str, str]:
    """``render_tree`` as {relative path: text}: the files as an API body carries them."""
    return {path: data.decode("utf-8") for path, data in render_tree(snapshot).items()}


def parse_texts(files: object, field: str = "files") -> MemorySnapshot:
    """The snapshot of files given as {relative path: text} (an API body, a tool's
    argument), each refusal naming ``<field>`` or ``<field>.<path>`` and the rule."""
    if not isinstance(files, Mapping) or not files:
        raise AcmiValidationError(field, "object", "must be a non-empty object path -> text")
    for path, text in files.items():
        if not isinstance(text, str):
            raise AcmiValidationError(f"{field}.{path}", "type", "must be the file's text")
    return parse_tree({str(p): t.encode("utf-8", "surrogatepass") for p, t in files.items()})

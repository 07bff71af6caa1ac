"""The Markdown of the seed's memory files, parsed losslessly and rendered back exactly.

A file is a :class:`Document`: an optional ``# title`` line, the preamble (lines before
the first ``## `` heading, e.g. ``Last updated: ...``), then ``## `` sections. A section
holds typed items (:class:`Entry` ``- [HH:MM] text``, :class:`Task` ``- [ ] text``,
:class:`Bullet` ``- text``, :class:`Row` ``| a | b |``) and :class:`Text` for every other
line, and ``### `` subsections (MEMORY.md's projects, an archive's projects).

Lossless by construction: a line becomes a typed item only when that item renders back to
exactly that line, else it is kept verbatim as :class:`Text`; blank lines after a section
are its ``gap``; lines inside a ``` fence are text, never headings. So ``render(parse(t))
== t`` for every string ``t`` (tests/unit/test_memory_markdown.py holds it with
hypothesis), and what the typed structures do not know (free text, unknown sections, the
order of everything) survives an export -> import -> export byte for byte.

The one thing parsing refuses (:class:`MemoryFormatError`, naming file and line) is a
``[HH:MM]`` stamp that is no time of day in a daily note: its timestamp would be wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from acmi_core.base.errors import AcmiValidationError


class MemoryFormatError(AcmiValidationError):
    """A memory file that cannot be read as the seed's format: ``field`` is
    ``<path>:<line>`` (1-based; ``<path>`` alone when no line is to blame)."""

    code = "memory_format"

    def __init__(self, path: str, line: int | None, rule: str, message: str) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(where, rule, message)
        self.path = path
        self.line = line


# --- items ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """A line kept verbatim: prose, a nested bullet, a table separator, a blank line."""

    line: str

    def render(self) -> str:
        return self.line


@dataclass(frozen=True)
class Bullet:
    """``- text``"""

    text: str

    def render(self) -> str:
        return f"- {self.text}"


@dataclass(frozen=True)
class Task:
    """``- [ ] text`` (open) or ``- [x] text`` (done)."""

    text: str
    done: bool = False

    def render(self) -> str:
        return f"- [{'x' if self.done else ' '}] {self.text}"


@dataclass(frozen=True)
class Entry:
    """``- [HH:MM] text``: a timestamped event of a daily note. ``at`` is kept as written
    (``08:15``; ``8:15`` too)."""

    at: str
    text: str

    def render(self) -> str:
        return f"- [{self.at}] {self.text}"

    @property
    def minutes(self) -> int:
        """Minutes after midnight."""
        hours, _, minutes = self.at.partition(":")
        return int(hours) * 60 + int(minutes)


@dataclass(frozen=True)
class Row:
    """``| a | b | c |``: a table row (a topic's decision log). Cells are kept as written
    (an escaped ``\\|`` stays escaped)."""

    cells: tuple[str, ...]

    def render(self) -> str:
        return "| " + " | ".join(self.cells) + " |"


Item = Text | Bullet | Task | Entry | Row

_TASK: Final = re.compile(r"- \[([ x])\] (.*)", re.DOTALL)
_STAMP: Final = re.compile(r"- \[(\d{1,2}):(\d{2})\](?: (.*))?", re.DOTALL)
_BULLET: Final = re.compile(r"- (.*)", re.DOTALL)
_CELL_SPLIT: Final = re.compile(r"(?<!\\)\|")
FENCE: Final = "```"


def parse_item(line: str, *, times: bool = False, where: tuple[str, int] = ("", 0)) -> Item:
    """The typed item ``line`` is, or :class:`Text`. ``times``: a ``[HH:MM]`` stamp must
    be a time of day (daily notes), else :class:`MemoryFormatError` at ``where``."""
    item: Item = Text(line)
    if match := _STAMP.fullmatch(line):
        hours, minutes = int(match[1]), int(match[2])
        if hours <= 23 and minutes <= 59:
            item = Entry(f"{match[1]}:{match[2]}", match[3] or "")
        elif not times:  # no time of day: an Entry always is one
            item = Bullet(line[2:])
        else:
            raise MemoryFormatError(
                where[0],
                where[1],
                "entry_time",
                f"[{match[1]}:{match[2]}] is not a time of day: an entry starts with "
                "'- [HH:MM] ' (00:00-23:59)",
            )
    elif match := _TASK.fullmatch(line):
        item = Task(match[2], match[1] == "x")
    elif match := _BULLET.fullmatch(line):
        item = Bullet(match[1])
    elif len(line) >= 2 and line[0] == "|" and line[-1] == "|":
        item = Row(tuple(cell.strip() for cell in _CELL_SPLIT.split(line[1:-1])))
    # typed only when it is exactly that line again; else verbatim
    return item if item.render() == line else Text(line)


# --- documents ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subsection:
    """``### title`` and its items; ``gap`` blank lines follow it."""

    title: str
    items: tuple[Item, ...] = ()
    gap: int = 0


@dataclass(frozen=True)
class Section:
    """``## heading``, its items, its ``### `` subsections; ``gap`` blank lines follow it."""

    heading: str
    items: tuple[Item, ...] = ()
    subsections: tuple[Subsection, ...] = ()
    gap: int = 0

    def all_items(self) -> Iterator[Item]:
        yield from self.items
        for sub in self.subsections:
            yield from sub.items


@dataclass(frozen=True)
class Document:
    """One Markdown memory file. ``title`` is the text after ``# `` on the first line (None
    when the file does not start with one); ``preamble`` the lines before the first
    section; ``final_newline`` whether the text ends with a line break."""

    title: str | None = None
    preamble: tuple[str, ...] = ()
    sections: tuple[Section, ...] = ()
    final_newline: bool = True

    def section(self, heading: str) -> Section | None:
        return next((s for s in self.sections if s.heading == heading), None)


def split_lines(text: str) -> tuple[list[str], bool]:
    """The lines of ``text`` and whether it ends with a line break (only ``\\n`` breaks a
    line: a ``\\r`` stays in its line, so CRLF files round-trip too)."""
    if not text:
        return [], False
    lines = text.split("\n")
    if lines[-1] == "":
        return lines[:-1], True
    return lines, False


def join_lines(lines: Sequence[str], final_newline: bool) -> str:
    return "\n".join(lines) + ("\n" if final_newline and lines else "")


def _fences(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it is inside a ``` fence (the fence lines included)."""
    inside, result = False, []
    for line in lines:
        opens = line.lstrip().startswith(FENCE)
        result.append(inside or opens)
        if opens:
            inside = not inside
    return result


def parse_document(text: str, *, path: str = "<text>", times: bool = False) -> Document:
    """``text`` as a :class:`Document`; ``render_document`` gives ``text`` back exactly."""
    lines, final_newline = split_lines(text)
    fenced = _fences(lines)
    start, title = 0, None
    if lines and lines[0].startswith("# ") and not fenced[0]:
        title, start = lines[0][2:], 1
    heads = [i for i in range(start, len(lines)) if not fenced[i] and lines[i].startswith("## ")]
    preamble = tuple(lines[start : heads[0] if heads else len(lines)])
    sections = []
    for n, head in enumerate(heads):
        end = heads[n + 1] if n + 1 < len(heads) else len(lines)
        sections.append(_section(lines, fenced, head, end, path, times))
    return Document(title, preamble, tuple(sections), final_newline)


def _gap(lines: Sequence[str], start: int, end: int) -> int:
    """How many blank lines end ``lines[start:end]``."""
    gap = 0
    while end - gap > start and lines[end - gap - 1] == "":
        gap += 1
    return gap


def _items(
    lines: Sequence[str], fenced: Sequence[bool], start: int, end: int, path: str, times: bool
) -> tuple[Item, ...]:
    return tuple(
        Text(lines[i]) if fenced[i] else parse_item(lines[i], times=times, where=(path, i + 1))
        for i in range(start, end)
    )


def _section(
    lines: Sequence[str], fenced: Sequence[bool], head: int, end: int, path: str, times: bool
) -> Section:
    gap = _gap(lines, head + 1, end)
    body_end = end - gap
    subs = [i for i in range(head + 1, body_end) if not fenced[i] and lines[i].startswith("### ")]
    items = _items(lines, fenced, head + 1, subs[0] if subs else body_end, path, times)
    subsections = []
    for n, sub in enumerate(subs):
        sub_end = subs[n + 1] if n + 1 < len(subs) else body_end
        sub_gap = _gap(lines, sub + 1, sub_end)
        subsections.append(
            Subsection(
                lines[sub][4:],
                _items(lines, fenced, sub + 1, sub_end - sub_gap, path, times),
                sub_gap,
            )
        )
    return Section(lines[head][3:], items, tuple(subsections), gap)


def section_lines(section: Section) -> list[str]:
    """The section's lines, its heading and its gap included."""
    lines = [f"## {section.heading}", *body_lines(section.items, section.subsections)]
    return lines + [""] * section.gap


def body_lines(items: Sequence[Item], subsections: Sequence[Subsection] = ()) -> list[str]:
    lines = [item.render() for item in items]
    for sub in subsections:
        lines.append(f"### {sub.title}")
        lines.extend(item.render() for item in sub.items)
        lines.extend([""] * sub.gap)
    return lines


def document_lines(doc: Document) -> list[str]:
    lines = [] if doc.title is None else [f"# {doc.title}"]
    lines.extend(doc.preamble)
    for section in doc.sections:
        lines.extend(section_lines(section))
    return lines


def render_document(doc: Document) -> str:
    return join_lines(document_lines(doc), doc.final_newline)

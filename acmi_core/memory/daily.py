"""The daily layer on the timeline, both ways, losslessly: a note (``memory/YYYY-MM-DD.md``)
as events, one per line with content plus a ``daily-note`` header holding the note's
skeleton (``daily_to_events``), and the notes a timeline holds, rebuilt line for line
(``daily_from_events``); ``entry_event`` is a line written through the API.

Daily events are Comms v1.1 events (``payload.memory == "daily"``). Their correlationId
is a digest of the day, the line and how many identical lines precede it in the file: a
re-import gives the same ids, so importing twice stores nothing new (ZADD NX on equal
members), and an import may skip a line whose id the day already has (a line written
through the API with :func:`entry_event`). ``[HH:MM]`` + the file's date, in the tree's
zone (heartbeat-state.json ``timezone``, else UTC), is the event's ``ts``; a line without
a stamp takes the stamp above it (midnight when none).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import MAX_SUMMARY_LEN, Event, summary_too_long, utf16_len
from acmi_core.base.stored import LONE_SURROGATE
from acmi_core.memory.layers import TIMEZONE_KEY, DailyNote, parse_date
from acmi_core.memory.markdown import (
    Bullet,
    Entry,
    Item,
    Row,
    Task,
    Text,
    document_lines,
    join_lines,
)

DAILY: Final = "daily"  # payload.memory of a daily-note event
HEADER_KIND: Final = "daily-note"
_AT: Final = re.compile(r"(\d{2}):(\d{2})")


def one_line(value: Any, where: str) -> str:
    """A memory file's one-line text (a section's item, an entry's text): a string with no
    line break, else AcmiValidationError (rule ``memory_section``)."""
    if not isinstance(value, str):
        raise AcmiValidationError(where, "memory_section", "must be a string")
    if "\n" in value:
        raise AcmiValidationError(where, "memory_section", "must be one line (no line break)")
    return value


def zone(name: str) -> dt.tzinfo:
    """An IANA zone by name (``UTC``, ``Europe/London``)."""
    if name == "UTC":
        return dt.UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise AcmiValidationError(
            TIMEZONE_KEY, "timezone", f"{name!r} is not an IANA time zone (e.g. Europe/London)"
        ) from None


def stamp_ms(date: dt.date, minutes: int, tz: dt.tzinfo) -> int:
    """Epoch ms of ``minutes`` after midnight on ``date`` in ``tz``."""
    moment = dt.datetime.combine(date, dt.time(minutes // 60, minutes % 60), tzinfo=tz)
    return int(moment.timestamp()) * 1000


def _cid(date: dt.date, line: str, occurrence: int) -> str:
    # surrogatepass: an imported line may hold one (the write refuses it, naming the field)
    text = f"{date.isoformat()}\n{occurrence}\n{line}"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"mem-{date.isoformat()}-{digest[:16]}"


def _summary(text: str, line: str) -> str:
    summary = text if text.strip() else line
    if summary_too_long(summary):  # the whole text stays in payload.text
        cut = summary[: MAX_SUMMARY_LEN - 1]
        while utf16_len(cut) > MAX_SUMMARY_LEN - 1:
            cut = cut[:-1]
        summary = cut + "…"
    return summary


def _kind(item: Item, section: str | None) -> str:
    if isinstance(item, Task):
        return "todo"
    if isinstance(item, Entry):
        head = item.text.lower()
        return (
            "decision"
            if head.startswith("decision")
            else "lesson"
            if head.startswith("lesson")
            else "note"
        )
    if isinstance(item, Bullet) and section == "Key Takeaways":
        return "takeaway"
    return "note"


def _item_event(
    item: Item,
    *,
    date: dt.date,
    ts: int,
    source: str,
    section: str | None,
    n: int | None,
    occurrence: int,
) -> Event:
    line = item.render()
    payload: dict[str, Any] = {"memory": DAILY, "date": date.isoformat()}
    if n is not None:
        payload["n"] = n
    if section is not None and n is None:
        payload["section"] = section
    text = line
    if isinstance(item, Entry):
        payload.update(item="entry", at=item.at)
        text = item.text
    elif isinstance(item, Task):
        payload.update(item="task", done=item.done)
        text = item.text
    elif isinstance(item, Bullet):
        payload["item"] = "bullet"
        text = item.text
    elif isinstance(item, Row):
        payload.update(item="row", cells=list(item.cells))
    else:
        payload["item"] = "text"
    summary = _summary(text, line)
    if summary != text and not isinstance(item, Row):
        payload["text"] = text
    return Event.model_validate(
        {
            "ts": ts,
            "source": source,
            "kind": _kind(item, section),
            "correlationId": _cid(date, line, occurrence),
            "summary": summary,
            "payload": payload,
        }
    )


def daily_to_events(note: DailyNote, *, source: str, tz: dt.tzinfo = dt.UTC) -> list[Event]:
    """A daily note as timeline events: a ``daily-note`` header (ts midnight; the note's
    skeleton: title, headings, blank lines, with ``null`` where an item line goes) and one
    event per line with content, in file order."""
    lines = document_lines(note.doc)
    skeleton: list[str | None] = list(lines)
    events: list[Event] = []
    seen: Counter[str] = Counter()
    ts = stamp_ms(note.date, 0, tz)
    n = (0 if note.doc.title is None else 1) + len(note.doc.preamble)
    for section in note.doc.sections:
        n += 1  # the heading
        groups = [(section.items, 0)] + [(s.items, s.gap) for s in section.subsections]
        for index, (items, gap) in enumerate(groups):
            if index:
                n += 1  # the ### heading
            for item in items:
                if not (isinstance(item, Text) and not item.line.strip()):
                    if isinstance(item, Entry):
                        ts = stamp_ms(note.date, item.minutes, tz)
                    line = lines[n]
                    events.append(
                        _item_event(
                            item,
                            date=note.date,
                            ts=ts,
                            source=source,
                            section=section.heading,
                            n=n,
                            occurrence=seen[line],
                        )
                    )
                    seen[line] += 1
                    skeleton[n] = None
                n += 1
            n += gap
        n += section.gap
    payload: dict[str, Any] = {"memory": DAILY, "date": note.date.isoformat(), "skeleton": skeleton}
    if not note.doc.final_newline:
        payload["final_newline"] = False
    header = Event.model_validate(
        {
            "ts": stamp_ms(note.date, 0, tz),
            "source": source,
            "kind": HEADER_KIND,
            "correlationId": f"mem-{note.date.isoformat()}-note",
            "summary": note.doc.title or f"{note.date.isoformat()} — Daily Notes",
            "payload": payload,
        }
    )
    return [header, *events]


def entry_event(
    date: dt.date,
    at: str,
    text: str,
    *,
    source: str,
    tz: dt.tzinfo = dt.UTC,
    section: str | None = None,
) -> Event:
    """An entry written to a day's note through the API (``- [HH:MM] text``), appended to
    ``section`` (by default Morning before 12:00, else Afternoon) when the note is
    rendered. Its correlationId is the one an import of that line computes."""
    match = _AT.fullmatch(one_line(at, "at"))
    if match is None or int(match[1]) > 23 or int(match[2]) > 59:
        raise AcmiValidationError("at", "entry_time", "must be a time of day HH:MM (00:00-23:59)")
    if LONE_SURROGATE.search(one_line(text, "text")):
        # JSON can carry one ("\udfff"), a memory file (UTF-8) cannot
        raise AcmiValidationError(
            "text", "utf8", "contains a lone UTF-16 surrogate: not valid Unicode text"
        )
    entry = Entry(at, text)
    minutes = entry.minutes
    section = section or ("Morning" if minutes < 12 * 60 else "Afternoon")
    return _item_event(
        entry,
        date=date,
        ts=stamp_ms(date, minutes, tz),
        source=source,
        section=section,
        n=None,
        occurrence=0,
    )


def _payload(event: Event) -> dict[str, Any] | None:
    payload = event.payload
    if isinstance(payload, dict) and payload.get("memory") == DAILY:
        return payload
    return None


def _skeleton(header: Event) -> list[Any]:
    payload = _payload(header) or {}
    skeleton = payload.get("skeleton")
    return skeleton if isinstance(skeleton, list) else []


def _event_item(event: Event, payload: Mapping[str, Any]) -> Item:
    text = payload.get("text", event.summary)
    kind = payload.get("item")
    if kind == "entry":
        return Entry(str(payload.get("at", "")), text)
    if kind == "task":
        return Task(text, payload.get("done") is True)
    if kind == "bullet":
        return Bullet(text)
    if kind == "row" and isinstance(payload.get("cells"), list):
        return Row(tuple(str(c) for c in payload["cells"]))
    return Text(text)


def _local(event: Event, tz: dt.tzinfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(event.ts / 1000, tz)


def _append(lines: list[str], heading: str, line: str) -> None:
    """Add ``line`` at the end of the ``## heading`` section (made at the end if none)."""
    try:
        head = lines.index(f"## {heading}")
    except ValueError:
        if lines and lines[-1] != "":
            lines.append("")
        lines += [f"## {heading}", line]
        return
    end = next((i for i in range(head + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    while end - 1 > head and lines[end - 1] == "":
        end -= 1
    lines.insert(end, line)


def _append_all(lines: list[str], pairs: Iterable[tuple[str, str]]) -> None:
    """``_append`` of each (heading, line) in turn, in one pass a section: the lines are
    grouped by heading (in the order their sections are first met) and each group goes in
    where its first line would, so a note of n lines costs O(n x sections), not O(n^2)
    (a day of 500 spawns' session starts: 29 ms a bootstrap before). A blank line, or one
    that reads as a heading, moves where the next goes (``_append`` trims trailing blanks
    and stops a section at ``## ``): then one at a time, as before."""
    items = list(pairs)
    if any(line == "" or line.startswith("## ") for _, line in items):
        for heading, line in items:
            _append(lines, heading, line)
        return
    groups: dict[str, list[str]] = {}
    for heading, line in items:
        groups.setdefault(heading, []).append(line)
    for heading, group in groups.items():
        _append(lines, heading, group[0])
        head = lines.index(f"## {heading}")
        end = next(
            (i for i in range(head + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
        )
        while end - 1 > head and lines[end - 1] == "":
            end -= 1
        lines[end:end] = group[1:]


def _assemble(
    date: dt.date,
    header: Event | None,
    placed: list[tuple[int, int, Item]],
    appended: list[tuple[float, int, str, Item]],
) -> DailyNote:
    """One day's note: the header's skeleton with its lines filled in by number, then the
    lines written through the API appended to their sections."""
    final_newline = True
    if header is None:
        lines: list[str] = [f"# {date.isoformat()} — Daily Notes", ""]
        slots: list[str | None] = []
    else:
        payload = _payload(header) or {}
        slots = list(_skeleton(header))
        final_newline = payload.get("final_newline", True) is not False
        lines = []
    extra: list[Item] = []
    for n, _, item in sorted(placed, key=lambda p: (p[0], p[1])):
        if 0 <= n < len(slots) and slots[n] is None:
            slots[n] = item.render()
        elif 0 <= n < len(slots) and slots[n] == item.render():
            continue  # the same line twice (events given twice): one line
        else:
            extra.append(item)
    if header is not None:
        lines = [line for line in slots if isinstance(line, str)]
    if header is None and not appended:
        lines += [i.render() for i in extra]
    else:
        _append_all(lines, (("Afternoon", item.render()) for item in extra))
    ordered = sorted(appended, key=lambda a: (a[0], a[1]))
    _append_all(lines, ((heading, item.render()) for _, _, heading, item in ordered))
    return DailyNote.parse(join_lines(lines, final_newline), date, f"timeline {date}")


def daily_from_events(
    events: Iterable[Event], *, tz: dt.tzinfo = dt.UTC, include_foreign: bool = False
) -> list[DailyNote]:
    """The daily notes a timeline holds, by date. Memory events (``payload.memory ==
    "daily"``) rebuild their note line for line; one without a line number (written
    through the API) is appended to its section. ``include_foreign``: any other event
    becomes an entry ``- [HH:MM] summary`` of its local day too."""
    headers: dict[dt.date, Event] = {}
    placed: dict[dt.date, list[tuple[int, int, Item]]] = defaultdict(list)
    appended: dict[dt.date, list[tuple[float, int, str, Item]]] = defaultdict(list)
    for order, event in enumerate(events):
        payload = _payload(event)
        if payload is None:
            if include_foreign:
                local = _local(event, tz)
                item: Item = Entry(local.strftime("%H:%M"), event.summary)
                heading = "Morning" if local.hour < 12 else "Afternoon"
                appended[local.date()].append((event.ts, order, heading, item))
            continue
        date = parse_date(str(payload.get("date")), f"event {event.correlationId}")
        if event.kind == HEADER_KIND and isinstance(payload.get("skeleton"), list):
            # two headers of a day: an import of the grown note left the old one (an
            # import should replace it by correlationId); a note only grows, so the
            # longer is the newer
            old = headers.get(date)
            if old is None or len(payload["skeleton"]) >= len(_skeleton(old)):
                headers[date] = event
            continue
        item = _event_item(event, payload)
        n = payload.get("n")
        if isinstance(n, int) and not isinstance(n, bool):
            placed[date].append((n, order, item))
        else:
            heading = str(payload.get("section") or "Afternoon")
            appended[date].append((event.ts, order, heading, item))
    return [
        _assemble(date, headers.get(date), placed[date], appended[date])
        for date in sorted({*headers, *placed, *appended})
    ]


__all__ = [
    "DAILY",
    "HEADER_KIND",
    "daily_from_events",
    "daily_to_events",
    "entry_event",
    "one_line",
    "stamp_ms",
    "zone",
]

"""The memory layers on ACMI's slots (DESIGN §6), both ways, losslessly.

One module: each layer's mapping is written both ways side by side (to_* and from_*,
held lossless by the round-trip tests), over one section codec (section_value,
section_lines, to_fields, from_fields) that every layer uses, and SlotImage converts all
layers at once.

=======  ==========================  =====================================================
layer    file                        ACMI
=======  ==========================  =====================================================
hot      ACTIVE-CONTEXT.md           the entity's ``memory:hot`` slot: ``hot.<section>``,
                                     ``hot.updated``
-        heartbeat-state.json        its ``memory:heartbeat`` slot: ``heartbeat.<key>``
warm     MEMORY.md                   its ``memory:warm`` slot: ``warm.<section>`` (all
                                     private), ``warm.topics``: the ``topic:<slug>`` entities
daily    memory/YYYY-MM-DD.md        the entity's timeline: one event per line with content
                                     and one ``daily-note`` header event per day
topic    memory/topics/<slug>.md     the profile of ``topic:<slug>``: ``topic.<section>``
cold     memory/archive/YYYY-QN.md   an archive document: ``archive.<section>``
=======  ==========================  =====================================================

The three memory slots are JSON objects of their own (``keys.MEMORY_HOT``, ``MEMORY_WARM``,
``MEMORY_HEARTBEAT``), never the entity's profile or signals: a whole-object replace of
those (``PUT``, ``acmi signal``, the reference CLI's raw SET) leaves memory alone. The
fields keep their prefixes inside the slots, so the prefixes never overlap and a merged
view of the three (``MemoryState.memory``) maps back to each slot by prefix
(:func:`memory_slot`).

A section's value is readable JSON: a string for prose (``hot.current_priority``), else a
list of items: ``"text"`` a bullet, ``{"task", "done"}``, ``{"at", "text"}`` an entry,
``{"date", "decision", "reasoning", "outcome"}`` a decision-log row, ``{"row": [...]}``
another table row, ``{"line": ...}`` any other line; a section with ``### `` subsections
is ``{"body": ..., "subsections": [{"title", "items"}]}``. Each field is one key, so a
shallow profile merge or a signals update changes one section.

What a file holds beyond its template (its own headings, unknown sections, free text,
ordering, blank lines) is ``<prefix>layout``: the file's lines with placeholders for the
fields. It is absent when the file is laid out as the seed's template, so a value set
through the API renders as the template would; a field with no place in the layout is
appended as its template section. Hence ``from_*(to_*(x)) == x`` for every file.

The daily layer's events (a note <-> timeline events, line for line) are
``acmi_core.memory.daily``'s; its names are re-exported here, where the other layers'
mappings are.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import MEMORY_HEARTBEAT, MEMORY_HOT, MEMORY_WARM
from acmi_core.base.model import EntityId, Event
from acmi_core.memory.daily import (
    DAILY,
    HEADER_KIND,
    daily_from_events,
    daily_to_events,
    entry_event,
    one_line,
    stamp_ms,
    zone,
)
from acmi_core.memory.layers import (
    ACTIVE_CONTEXT,
    ARCHIVE,
    DECISION_COLUMNS,
    LONG_TERM_MEMORY,
    TOPIC,
    ActiveContext,
    ArchiveFile,
    HeartbeatState,
    LongTermMemory,
    MarkdownFile,
    MemorySnapshot,
    Quarter,
    SectionSpec,
    Template,
    TopicFile,
    check_heartbeat,
)
from acmi_core.memory.markdown import (
    FENCE,
    Bullet,
    Entry,
    Item,
    Row,
    Subsection,
    Task,
    Text,
    body_lines,
    join_lines,
)

HOT: Final = "hot."
HEARTBEAT: Final = "heartbeat."
WARM: Final = "warm."
TOPIC_PREFIX: Final = "topic."
ARCHIVE_PREFIX: Final = "archive."
TOPIC_LINKS: Final = "warm.topics"  # profile: the topic:<slug> entities, in slug order
LAYOUT: Final = "layout"
# the memory slot of each field prefix (the slot the field is stored in)
LAYER_SLOTS: Final = ((HOT, MEMORY_HOT), (HEARTBEAT, MEMORY_HEARTBEAT), (WARM, MEMORY_WARM))
# heartbeat-state keys the hygiene job writes for itself (not the seed's own file)
HYGIENE_KEYS: Final = frozenset(
    {
        "next_scheduled",
        "last_memory_review",
        "last_audit",
        "memory_md_lines",
        "daily_notes_count",
        "archived_through",
        "archive_backlog",
        "last_archive",
    }
)
TOPIC_CATEGORY: Final = "topic"


def memory_slot(name: str) -> str | None:
    """The memory slot a field belongs in (``hot.x`` -> ``memory:hot``), None for a field
    that is no memory."""
    return next((slot for prefix, slot in LAYER_SLOTS if name.startswith(prefix)), None)


# --- a section's value ----------------------------------------------------------------------


def _item_json(item: Item, spec: SectionSpec) -> Any:
    if isinstance(item, Bullet):
        return item.text
    if isinstance(item, Task):
        return {"task": item.text, "done": item.done}
    if isinstance(item, Entry):
        return {"at": item.at, "text": item.text}
    if isinstance(item, Row):
        if spec.frame and len(item.cells) == len(DECISION_COLUMNS):
            return dict(zip(DECISION_COLUMNS, item.cells, strict=True))
        return {"row": list(item.cells)}
    return {"line": item.line}


def _items_json(items: Sequence[Item], spec: SectionSpec) -> Any:
    if items and all(isinstance(i, Text) for i in items):
        return "\n".join(i.render() for i in items)  # prose reads as a string
    return [_item_json(i, spec) for i in items]


def section_value(
    items: Sequence[Item], subsections: Sequence[Subsection], spec: SectionSpec
) -> Any:
    """A section's body as the JSON value stored for it."""
    if not subsections:
        return _items_json(items, spec)
    value: dict[str, Any] = {"body": _items_json(items, spec)} if items else {}
    subs = []
    for n, sub in enumerate(subsections):
        entry: dict[str, Any] = {"title": sub.title, "items": _items_json(sub.items, spec)}
        if sub.gap != (1 if n < len(subsections) - 1 else 0):
            entry["gap"] = sub.gap
        subs.append(entry)
    value["subsections"] = subs
    return value


def _bad(where: str, message: str) -> AcmiValidationError:
    return AcmiValidationError(where, "memory_section", message)


def _item(value: Any, where: str) -> Item:
    if isinstance(value, str):
        return Bullet(one_line(value, where))
    if not isinstance(value, dict):
        raise _bad(where, "an item is a string (a bullet) or an object")
    keys = set(value)
    if keys == {"task", "done"} and isinstance(value["done"], bool):
        return Task(one_line(value["task"], f"{where}.task"), value["done"])
    if keys == {"at", "text"}:
        return Entry(one_line(value["at"], f"{where}.at"), one_line(value["text"], f"{where}.text"))
    if keys == set(DECISION_COLUMNS):
        return Row(tuple(one_line(value[c], f"{where}.{c}") for c in DECISION_COLUMNS))
    if keys == {"row"} and isinstance(value["row"], list):
        return Row(tuple(one_line(c, f"{where}.row") for c in value["row"]))
    if keys == {"line"}:
        return Text(one_line(value["line"], f"{where}.line"))
    raise _bad(
        where,
        "an item object is {task, done}, {at, text}, {date, decision, reasoning, outcome}, "
        "{row} or {line}",
    )


def _items(value: Any, where: str) -> list[Item]:
    if isinstance(value, str):
        return [Text(line) for line in value.split("\n")]
    if not isinstance(value, list):
        raise _bad(where, "must be a string (prose) or a list of items")
    return [_item(v, f"{where}[{n}]") for n, v in enumerate(value)]


def section_lines(value: Any, where: str) -> list[str]:
    """The body lines a stored section value renders to. A value that would start another
    section (a ``## `` line outside a fence) is refused: it could not be read back."""
    if isinstance(value, dict):
        unknown = set(value) - {"body", "subsections"}
        if unknown or not isinstance(value.get("subsections"), list):
            raise _bad(where, "a section with subsections is {body?, subsections: [...]}")
        items = _items(value.get("body", []), f"{where}.body")
        subs = []
        raw = value["subsections"]
        for n, sub in enumerate(raw):
            at = f"{where}.subsections[{n}]"
            if not isinstance(sub, dict) or not {"title", "items"} <= set(sub) <= {
                "title",
                "items",
                "gap",
            }:
                raise _bad(at, "a subsection is {title, items, gap?}")
            gap = sub.get("gap", 1 if n < len(raw) - 1 else 0)
            if isinstance(gap, bool) or not isinstance(gap, int) or not 0 <= gap <= 100:
                raise _bad(f"{at}.gap", "must be an integer 0-100")
            subs.append(
                Subsection(
                    one_line(sub["title"], f"{at}.title"), tuple(_items(sub["items"], at)), gap
                )
            )
        lines = body_lines(items, subs)
    else:
        lines = body_lines(_items(value, where))
    inside = False
    for line in lines:
        if line.lstrip().startswith(FENCE):
            inside = not inside
        elif not inside and line.startswith("## "):
            raise _bad(where, f"a line {line[:40]!r} would start a new section")
    return lines


# --- a file's fields ------------------------------------------------------------------------


def _canonical(template: Template, fields: Mapping[str, Any], title: str | None) -> list[Any]:
    """The layout of a file written as the seed's template, for the fields present."""
    lines: list[Any] = []
    if title is not None:
        lines += [f"# {title}", ""]
    elif "title" in fields:
        lines += [{"field": "title"}, ""]
    pre = [{"field": key} for key, _ in template.fields if key in fields]
    if pre:
        lines += [*pre, ""]
    specs = [s for s in template.sections if s.key in fields]
    for n, spec in enumerate(specs):
        lines += [f"## {spec.heading}", *spec.frame, {"section": spec.key}]
        if n < len(specs) - 1:
            lines.append("")
    return lines


def to_fields(file: MarkdownFile, title: str | None) -> dict[str, Any]:
    """``file`` as fields (unprefixed): preamble fields, one per known section, and
    ``layout`` when the file departs from its template. ``title``: the file's fixed title
    (None: the title is a field, as a topic's name)."""
    template, doc = file.TEMPLATE, file.doc
    fields: dict[str, Any] = {}
    layout: list[Any] = []
    if doc.title is not None:
        if title is None:
            fields["title"] = doc.title
            layout.append({"field": "title"})
        else:
            layout.append(f"# {doc.title}")
    for line in doc.preamble:
        key = next(
            (k for k, label in template.fields if line.startswith(label) and k not in fields),
            None,
        )
        if key is None:
            layout.append(line)
        else:
            fields[key] = line[len(dict(template.fields)[key]) :]
            layout.append({"field": key})
    for key, section in file.sections_by_key():
        layout.append(f"## {section.heading}")
        if key is None:
            layout.extend(body_lines(section.items, section.subsections))
        else:
            spec = template.by_key(key)
            items = section.items
            head = tuple(i.render() for i in items[: len(spec.frame)])
            if spec.frame and head == spec.frame:
                layout.extend(spec.frame)
                items = items[len(spec.frame) :]
            fields[key] = section_value(items, section.subsections, spec)
            layout.append({"section": key})
        layout.extend([""] * section.gap)
    if layout != _canonical(template, fields, title) or not doc.final_newline:
        fields[LAYOUT] = {"lines": layout}
        if not doc.final_newline:
            fields[LAYOUT]["final_newline"] = False
    return fields


def _insert_fields(out: list[str], missing: list[str], after_fields: int) -> None:
    """Preamble field lines set through the API: beside the others, or under the title
    as the seed writes them (``# title``, blank, the fields, blank)."""
    if after_fields:
        at, block = after_fields, missing
    elif out and out[0].startswith("# "):
        at = 2 if len(out) > 1 and out[1] == "" else 1
        block = missing if at == 2 else ["", *missing]
    else:
        at, block = 0, missing
    if at < len(out) and out[at] != "":
        block.append("")
    out[at:at] = block


def from_fields(
    template: Template, fields: Mapping[str, Any], title: str | None, where: str
) -> str:
    """The file text of ``fields`` (what ``to_fields`` gave, or values set through the
    API). Errors name ``<where><key>``."""
    raw_layout = fields.get(LAYOUT)
    final_newline = True
    if raw_layout is None:
        layout = _canonical(template, fields, title)
    else:
        if not isinstance(raw_layout, dict) or not isinstance(raw_layout.get("lines"), list):
            raise _bad(f"{where}{LAYOUT}", "must be {lines: [...], final_newline?}")
        layout = raw_layout["lines"]
        final_newline = raw_layout.get("final_newline", True) is not False
    labels = dict(template.fields)
    out: list[str] = []
    placed: set[str] = set()
    after_fields = 0  # where the last preamble field line ends
    for n, entry in enumerate(layout):
        if isinstance(entry, str):
            out.append(one_line(entry, f"{where}{LAYOUT}.lines[{n}]"))
            continue
        if not isinstance(entry, dict) or len(entry) != 1:
            raise _bad(f"{where}{LAYOUT}.lines[{n}]", "a line is a string, {field} or {section}")
        ((kind, key),) = entry.items()
        if not isinstance(key, str):
            raise _bad(f"{where}{LAYOUT}.lines[{n}]", f"{kind} must name a field by a string")
        if key not in fields:
            continue  # deleted since: its line goes (a section keeps its heading)
        if kind == "field" and (key == "title" or key in labels):
            value = one_line(fields[key], f"{where}{key}")
            out.append(f"# {value}" if key == "title" else labels[key] + value)
            if key != "title":
                after_fields = len(out)
        elif kind == "section" and any(s.key == key for s in template.sections):
            out.extend(section_lines(fields[key], f"{where}{key}"))
        else:
            raise _bad(f"{where}{LAYOUT}.lines[{n}]", f"{kind} {key!r} is not in {template.name}")
        placed.add(key)
    missing = [
        label + one_line(fields[key], f"{where}{key}")
        for key, label in template.fields
        if key in fields and key not in placed
    ]
    if missing:
        _insert_fields(out, missing, after_fields)
    for spec in template.sections:
        if spec.key in fields and spec.key not in placed:
            if out and out[-1] != "":
                out.append("")
            body = section_lines(fields[spec.key], f"{where}{spec.key}")
            out += [f"## {spec.heading}", *spec.frame, *body]
    return join_lines(out, final_newline)


def _known(template: Template) -> frozenset[str]:
    return frozenset(
        {LAYOUT, "title", *(k for k, _ in template.fields), *(s.key for s in template.sections)}
    )


def _prefixed(fields: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {prefix + key: value for key, value in fields.items()}


def _unprefixed(doc: Mapping[str, Any], prefix: str, template: Template) -> dict[str, Any]:
    known = _known(template)
    return {
        k[len(prefix) :]: v
        for k, v in doc.items()
        if k.startswith(prefix) and k[len(prefix) :] in known
    }


# --- hot: signals ---------------------------------------------------------------------------


def to_signals(active: ActiveContext) -> dict[str, Any]:
    """ACTIVE-CONTEXT.md as ``hot.*`` fields (the ``memory:hot`` slot)."""
    return _prefixed(to_fields(active, ACTIVE_CONTEXT.title), HOT)


def from_signals(signals: Mapping[str, Any]) -> ActiveContext | None:
    """The ACTIVE-CONTEXT.md the ``hot.*`` fields hold (None: none); other fields are
    not memory and are ignored."""
    fields = _unprefixed(signals, HOT, ACTIVE_CONTEXT)
    fields.pop("title", None)
    if not fields:
        return None
    return ActiveContext.parse(
        from_fields(ACTIVE_CONTEXT, fields, ACTIVE_CONTEXT.title, f"signals.{HOT}"),
        "memory:hot hot.*",
    )


def heartbeat_to_signals(state: HeartbeatState) -> dict[str, Any]:
    return _prefixed(dict(state.data), HEARTBEAT)


def heartbeat_from_signals(signals: Mapping[str, Any]) -> HeartbeatState | None:
    data = {k[len(HEARTBEAT) :]: v for k, v in signals.items() if k.startswith(HEARTBEAT)}
    if not data:
        return None
    check_heartbeat(data, "memory:heartbeat heartbeat.*")
    return HeartbeatState(data)


# --- warm: profile --------------------------------------------------------------------------


def to_profile_sections(memory: LongTermMemory) -> dict[str, Any]:
    """MEMORY.md as ``warm.*`` fields (the ``memory:warm`` slot): every one private (never
    in a group)."""
    return _prefixed(to_fields(memory, LONG_TERM_MEMORY.title), WARM)


def from_profile(profile: Mapping[str, Any]) -> LongTermMemory | None:
    fields = _unprefixed(profile, WARM, LONG_TERM_MEMORY)
    fields.pop("title", None)
    if not fields:
        return None
    return LongTermMemory.parse(
        from_fields(LONG_TERM_MEMORY, fields, LONG_TERM_MEMORY.title, f"profile.{WARM}"),
        "memory:warm warm.*",
    )


def is_private(profile_key: str) -> bool:
    """Whether a profile field is private memory: never in a ``group`` scope (seed §3)."""
    return profile_key.startswith(WARM)


# --- topic: the topic:<slug> entity ---------------------------------------------------------


def topic_entity(slug: str) -> EntityId:
    return EntityId.parse(f"{TOPIC_CATEGORY}:{slug}", "topic")


def topic_to_profile(topic: TopicFile) -> dict[str, Any]:
    """A topic file as the profile fields ``topic.*`` of :func:`topic_entity`."""
    return _prefixed(to_fields(topic, None), TOPIC_PREFIX)


def new_topic(slug: str, name: str, today: dt.date) -> TopicFile:
    """``/topic-create``: the seed's topic template, every section empty (the decision
    log with its table header)."""
    fields: dict[str, Any] = {"title": name, "created": today.isoformat()}
    fields["updated"] = fields["created"]
    fields.update((spec.key, []) for spec in TOPIC.sections)
    return TopicFile.parse(from_fields(TOPIC, fields, None, "topic "), slug)


def topic_from_profile(slug: str, profile: Mapping[str, Any]) -> TopicFile | None:
    fields = _unprefixed(profile, TOPIC_PREFIX, TOPIC)
    if not fields:
        return None
    text = from_fields(TOPIC, fields, None, f"topic:{slug} profile.{TOPIC_PREFIX}")
    return TopicFile.parse(text, slug, f"topic:{slug} profile")


# --- cold: archive documents ----------------------------------------------------------------


def archive_to_document(archive: ArchiveFile) -> dict[str, Any]:
    """A quarter's archive as a JSON document ``archive.*`` (where the cold layer keeps
    it is the archiving job's choice)."""
    return _prefixed(
        to_fields(archive, ARCHIVE.title.format(key=archive.quarter.heading)), ARCHIVE_PREFIX
    )


def archive_from_document(quarter: Quarter, doc: Mapping[str, Any]) -> ArchiveFile:
    fields = _unprefixed(doc, ARCHIVE_PREFIX, ARCHIVE)
    fields.pop("title", None)
    title = ARCHIVE.title.format(key=quarter.heading)
    return ArchiveFile.parse(
        from_fields(ARCHIVE, fields, title, f"archive {quarter} "), quarter, f"archive {quarter}"
    )


# --- a whole snapshot -----------------------------------------------------------------------


@dataclass
class SlotImage:
    """A memory tree as what ACMI stores for its owner entity: ``signals`` (the hot and
    heartbeat fields: the ``memory:hot`` and ``memory:heartbeat`` slots), ``profile``
    (warm, and the links to the topics: ``memory:warm``), ``events`` (the daily notes),
    plus one profile per ``topic:<slug>`` entity and one archive document per
    quarter."""

    signals: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    archives: dict[str, dict[str, Any]] = field(default_factory=dict)


def snapshot_to_slots(snapshot: MemorySnapshot, *, source: str) -> SlotImage:
    """What an import writes. ``source`` is the events' Comms source (``agent:claude``)."""
    image = SlotImage()
    if snapshot.active_context is not None:
        image.signals.update(to_signals(snapshot.active_context))
    if snapshot.heartbeat is not None:
        image.signals.update(heartbeat_to_signals(snapshot.heartbeat))
    if snapshot.memory is not None:
        image.profile.update(to_profile_sections(snapshot.memory))
    if snapshot.topics:
        image.profile[TOPIC_LINKS] = [str(topic_entity(t.slug)) for t in snapshot.topics]
    tz = zone(snapshot.timezone)
    for note in snapshot.daily:
        image.events.extend(daily_to_events(note, source=source, tz=tz))
    for topic in snapshot.topics:
        image.topics[topic.slug] = topic_to_profile(topic)
    for archive in snapshot.archives:
        image.archives[str(archive.quarter)] = archive_to_document(archive)
    return image


def snapshot_from_slots(image: SlotImage, *, include_foreign: bool = False) -> MemorySnapshot:
    """What an export writes, from what the store holds."""
    heartbeat = heartbeat_from_signals(image.signals)
    tz = zone("UTC" if heartbeat is None else heartbeat.timezone)
    topics = [
        t
        for slug, profile in sorted(image.topics.items())
        if (t := topic_from_profile(slug, profile)) is not None
    ]
    return MemorySnapshot(
        active_context=from_signals(image.signals),
        memory=from_profile(image.profile),
        daily=tuple(daily_from_events(image.events, tz=tz, include_foreign=include_foreign)),
        topics=tuple(topics),
        archives=tuple(
            archive_from_document(Quarter.parse(q, f"archive {q}"), doc)
            for q, doc in sorted(image.archives.items())
        ),
        heartbeat=heartbeat,
    )


__all__ = [
    "ARCHIVE_PREFIX",
    "DAILY",
    "HEADER_KIND",
    "HEARTBEAT",
    "HOT",
    "HYGIENE_KEYS",
    "LAYER_SLOTS",
    "LAYOUT",
    "TOPIC_CATEGORY",
    "TOPIC_LINKS",
    "TOPIC_PREFIX",
    "WARM",
    "SlotImage",
    "archive_from_document",
    "archive_to_document",
    "daily_from_events",
    "daily_to_events",
    "entry_event",
    "from_fields",
    "from_profile",
    "from_signals",
    "heartbeat_from_signals",
    "heartbeat_to_signals",
    "is_private",
    "memory_slot",
    "new_topic",
    "section_lines",
    "section_value",
    "snapshot_from_slots",
    "snapshot_to_slots",
    "stamp_ms",
    "to_fields",
    "to_profile_sections",
    "to_signals",
    "topic_entity",
    "topic_from_profile",
    "topic_to_profile",
    "zone",
]

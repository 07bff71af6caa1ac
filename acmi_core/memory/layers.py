"""The five memory layers of the seed (002, "Agent Memory Architecture") as typed files.

One module: the seed's file formats, pure, in one place: the five layers share one
Template and MarkdownFile machinery, and the loading rules (SCOPES, ON_DEMAND,
SEARCH_ORDER, CONFLICT_RULES) name every layer.

=======  ===========================  ===================================================
layer    seed file                    class (template)
=======  ===========================  ===================================================
hot      ACTIVE-CONTEXT.md            :class:`ActiveContext` (``ACTIVE_CONTEXT``)
warm     MEMORY.md                    :class:`LongTermMemory` (``LONG_TERM_MEMORY``)
daily    memory/YYYY-MM-DD.md         :class:`DailyNote` (``DAILY_NOTE``)
topic    memory/topics/<slug>.md      :class:`TopicFile` (``TOPIC``)
cold     memory/archive/YYYY-QN.md    :class:`ArchiveFile` (``ARCHIVE``)
-        memory/heartbeat-state.json  :class:`HeartbeatState`
=======  ===========================  ===================================================

Each Markdown class wraps a lossless :class:`~acmi_core.memory.markdown.Document` and
reads the seed's sections through a :class:`Template`: the seed's headings, exactly
(``## 🔥 Current Priority``, ``## Decision Log`` ...), matched by a pattern where the seed's
heading is a placeholder (``## About [Human]`` is ``## About Kalin`` in a real file). A
section the template does not know stays in the document, in its place.

The seed's loading rules are data here too: :data:`SCOPES` (what each session kind
loads, §7 and §12), :data:`ON_DEMAND` (level 3), :data:`SEARCH_ORDER` (§9),
:data:`CONFLICT_RULES` (§8), and ``SectionSpec.private`` (§3, §13: MEMORY.md is never
loaded in a group).

One module: it is the seed's vocabulary, one concern read off one document. Each layer is
a template and the typed file that reads through it (``ActiveContext.TEMPLATE =
ACTIVE_CONTEXT``), and the loading rules are read by the snapshot that holds the files
(``MemorySnapshot.for_scope`` by :data:`SCOPES`); split into templates, files and rules,
every layer's definition would be cut in two and each part import the others. The codec
under it is ``memory/markdown.py``, the mappings onto ACMI's slots are ``memory/slots.py``
and ``memory/daily.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal

from acmi_core.memory.markdown import (
    Bullet,
    Document,
    Entry,
    Item,
    MemoryFormatError,
    Row,
    Section,
    Task,
    parse_document,
    render_document,
)

Layer = Literal["hot", "warm", "daily", "topic", "cold"]
LAYERS: Final[tuple[Layer, ...]] = ("hot", "warm", "daily", "topic", "cold")

# --- templates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SectionSpec:
    """One ``## `` section of a seed template. ``key`` names it in ACMI (a signal, a
    profile field); ``heading`` is the seed's text, written when the section is created;
    ``pattern`` recognises a real file's heading; ``frame`` are fixed lines the section
    body starts with (the decision log's table header); ``private``: never loaded in a
    group session."""

    key: str
    heading: str
    pattern: str | None = None
    frame: tuple[str, ...] = ()
    private: bool = False

    def matches(self, heading: str) -> bool:
        if self.pattern is None:
            return heading == self.heading
        return re.fullmatch(self.pattern, heading) is not None


@dataclass(frozen=True)
class Template:
    """A seed file's shape: its layer, ``# title`` (a format string over the file's key),
    preamble fields (``Last updated: ...`` lines: key -> label) and sections, in the
    seed's order."""

    name: str
    layer: Layer
    title: str
    fields: tuple[tuple[str, str], ...]
    sections: tuple[SectionSpec, ...]

    def spec(self, heading: str) -> SectionSpec | None:
        return next((s for s in self.sections if s.matches(heading)), None)

    def by_key(self, key: str) -> SectionSpec:
        return next(s for s in self.sections if s.key == key)


ACTIVE_CONTEXT: Final = Template(
    "ACTIVE-CONTEXT.md",
    "hot",
    "ACTIVE-CONTEXT.md — What's Hot",
    (("updated", "Last updated: "),),
    (
        SectionSpec("current_priority", "🔥 Current Priority", r"(?:🔥 )?Current Priority"),
        SectionSpec("in_progress", "In Progress"),
        SectionSpec("waiting_on", "Waiting On"),
        SectionSpec("decisions_today", "Key Decisions Made Today"),
        SectionSpec("next_session", "Context for Next Session"),
    ),
)

# MEMORY.md is private as a whole (seed §3 "Main session only — don't load MEMORY.md in
# group chats or shared contexts", §13 "MEMORY.md contains personal context").
LONG_TERM_MEMORY: Final = Template(
    "MEMORY.md",
    "warm",
    "MEMORY.md — Long-Term Memory",
    (),
    (
        SectionSpec("about_human", "About [Human]", r"About (?!Me\b).+", private=True),
        SectionSpec("about_agent", "About Me [Agent]", r"About Me\b.*", private=True),
        SectionSpec("projects", "Active Projects", private=True),
        SectionSpec("people", "Key People", private=True),
        SectionSpec("lessons", "Lessons Learned", private=True),
        SectionSpec("preferences", "Preferences & Patterns", private=True),
        SectionSpec("dates", "Important Dates", private=True),
    ),
)

DAILY_NOTE: Final = Template(
    "memory/YYYY-MM-DD.md",
    "daily",
    "{key} — Daily Notes",
    (),
    (
        SectionSpec("morning", "Morning"),
        SectionSpec("afternoon", "Afternoon"),
        SectionSpec("takeaways", "Key Takeaways"),
        SectionSpec("tomorrow", "Tomorrow"),
    ),
)

DECISION_LOG_FRAME: Final = (
    "| Date | Decision | Reasoning | Outcome |",
    "|------|----------|-----------|---------|",
)
DECISION_COLUMNS: Final = ("date", "decision", "reasoning", "outcome")

TOPIC: Final = Template(
    "memory/topics/<slug>.md",
    "topic",
    "{key}",
    (("created", "Created: "), ("updated", "Last updated: ")),
    (
        SectionSpec("summary", "Summary"),
        SectionSpec("key_facts", "Key Facts"),
        SectionSpec("decision_log", "Decision Log", frame=DECISION_LOG_FRAME),
        SectionSpec("open_questions", "Open Questions"),
        SectionSpec("related", "Related"),
    ),
)

ARCHIVE: Final = Template(
    "memory/archive/YYYY-QN.md",
    "cold",
    "{key} Archive",
    (),
    (
        SectionSpec("summary", "Summary"),
        SectionSpec("major_events", "Major Events"),
        SectionSpec("projects", "Projects"),
        SectionSpec("metrics", "Metrics"),
        SectionSpec("lessons", "Lessons Carried Forward"),
    ),
)

TEMPLATES: Final = {
    t.layer: t for t in (ACTIVE_CONTEXT, LONG_TERM_MEMORY, DAILY_NOTE, TOPIC, ARCHIVE)
}
PRIVATE_SECTIONS: Final = {
    t.layer: frozenset(s.key for s in t.sections if s.private) for t in TEMPLATES.values()
}

# --- loading, search and conflicts (seed §7, §8, §9, §12) -----------------------------------

Scope = Literal["main", "group", "subagent"]
# What a session loads at wake, in the seed's order ("today": today's daily note; "topic":
# the one topic file the task names). The startup files come before these (STARTUP_SCOPES).
SCOPES: Final[Mapping[Scope, tuple[str, ...]]] = {
    # §7 main also lists yesterday's note; §12 (and issue 13) make it level 3, on demand
    "main": ("warm", "hot", "today"),
    "group": ("hot", "today"),  # §7 group: "DO NOT load MEMORY.md — contains private context"
    "subagent": ("topic", "hot"),  # §7 sub-agent: task context, its topic file, ACTIVE-CONTEXT
}
# §7 / §12: the startup files each scope loads FIRST, in this order. SOUL.md and USER.md
# are level 1 ("always load ... identity") in main and group sessions; AGENTS.md (§1: "the
# operating manual, how you work") in main sessions only, the seed's fullest load. A
# sub-agent loads "task-specific context only" (§7), so none.
STARTUP_PATHS: Final = ("SOUL.md", "USER.md", "AGENTS.md")
STARTUP_SCOPES: Final[Mapping[Scope, tuple[str, ...]]] = {
    "main": ("SOUL.md", "USER.md", "AGENTS.md"),
    "group": ("SOUL.md", "USER.md"),
    "subagent": (),
}
# §12 progressive disclosure: level 1 always, level 2 in main sessions, level 3 on demand.
LEVELS: Final = {1: ("hot",), 2: ("warm", "today"), 3: ("topic", "yesterday", "cold")}
ON_DEMAND: Final = LEVELS[3]
# §9, fast to slow ("semantic" is the memory_search tool: ranked search over every layer).
SEARCH_ORDER: Final = ("hot", "warm", "today", "yesterday", "topic", "semantic", "cold")
# §8: which layer wins when two disagree, by the kind of fact.
CONFLICT_RULES: Final = {
    "current_state": "hot",  # "ACTIVE-CONTEXT.md wins for current state (most recent)"
    "long_term_fact": "warm",  # "MEMORY.md wins for long-term facts (curated)"
    "domain_knowledge": "topic",  # "Topic files win for deep domain knowledge"
    "evidence": "daily",  # "Daily notes are evidence — use to resolve disputes"
}

# --- the typed files ------------------------------------------------------------------------


@dataclass(frozen=True)
class MarkdownFile:
    """A seed Markdown file: its lossless document, read through its template."""

    doc: Document
    TEMPLATE: ClassVar[Template]
    TIMES: ClassVar[bool] = False  # [HH:MM] stamps must be times of day

    @classmethod
    def _doc(cls, text: str, path: str) -> Document:
        return parse_document(text, path=path, times=cls.TIMES)

    def render(self) -> str:
        return render_document(self.doc)

    def sections_by_key(self) -> Iterator[tuple[str | None, Section]]:
        """Each section with its template key (None: a section the seed does not name; a
        second section of one key is read as unknown too)."""
        seen: set[str] = set()
        for section in self.doc.sections:
            spec = self.TEMPLATE.spec(section.heading)
            key = spec.key if spec is not None and spec.key not in seen else None
            if key is not None:
                seen.add(key)
            yield key, section

    def section(self, key: str) -> Section | None:
        return next((s for k, s in self.sections_by_key() if k == key), None)

    def items(self, key: str) -> tuple[Item, ...]:
        section = self.section(key)
        return () if section is None else tuple(section.all_items())

    def texts(self, key: str) -> tuple[str, ...]:
        """The section's bullets' texts (``- [Name] — role``)."""
        return tuple(i.text for i in self.items(key) if isinstance(i, Bullet))

    def prose(self, key: str) -> str:
        """The section's text lines, joined (a one-sentence priority, a summary)."""
        return "\n".join(i.render() for i in self.items(key) if not isinstance(i, Row)).strip()

    def field(self, key: str) -> str | None:
        """A preamble field's value (``Last updated: <value>``)."""
        label = dict(self.TEMPLATE.fields)[key]
        return next((ln[len(label) :] for ln in self.doc.preamble if ln.startswith(label)), None)


@dataclass(frozen=True)
class ActiveContext(MarkdownFile):
    """ACTIVE-CONTEXT.md, the hot layer: what matters now."""

    TEMPLATE: ClassVar[Template] = ACTIVE_CONTEXT

    @classmethod
    def parse(cls, text: str, path: str = "ACTIVE-CONTEXT.md") -> ActiveContext:
        return cls(cls._doc(text, path))

    @property
    def last_updated(self) -> str | None:
        return self.field("updated")

    @property
    def current_priority(self) -> str:
        return self.prose("current_priority")

    @property
    def in_progress(self) -> tuple[Task, ...]:
        return tuple(i for i in self.items("in_progress") if isinstance(i, Task))

    @property
    def waiting_on(self) -> tuple[str, ...]:
        return self.texts("waiting_on")

    @property
    def decisions_today(self) -> tuple[str, ...]:
        return self.texts("decisions_today")

    @property
    def next_session(self) -> str:
        return self.prose("next_session")


@dataclass(frozen=True)
class Project:
    """A ``### `` project of MEMORY.md's Active Projects or an archive's Projects."""

    name: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class LongTermMemory(MarkdownFile):
    """MEMORY.md, the warm layer: curated long-term knowledge. Private as a whole."""

    TEMPLATE: ClassVar[Template] = LONG_TERM_MEMORY

    @classmethod
    def parse(cls, text: str, path: str = "MEMORY.md") -> LongTermMemory:
        return cls(cls._doc(text, path))

    @property
    def human(self) -> str | None:
        """Who ``## About <name>`` is about."""
        section = self.section("about_human")
        return None if section is None else section.heading.removeprefix("About ")

    @property
    def projects(self) -> tuple[Project, ...]:
        section = self.section("projects")
        if section is None:
            return ()
        return tuple(
            Project(s.title, tuple(i.text for i in s.items if isinstance(i, Bullet)))
            for s in section.subsections
        )

    @property
    def people(self) -> tuple[str, ...]:
        return self.texts("people")

    @property
    def lessons(self) -> tuple[str, ...]:
        return self.texts("lessons")

    @property
    def preferences(self) -> tuple[str, ...]:
        return self.texts("preferences")

    @property
    def dates(self) -> tuple[str, ...]:
        return self.texts("dates")


DATE_RE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_date(raw: str, path: str, line: int | None = None) -> dt.date:
    """A ``YYYY-MM-DD`` date, or :class:`MemoryFormatError` naming the file (and line)."""
    try:
        if not DATE_RE.fullmatch(raw):
            raise ValueError
        return dt.date.fromisoformat(raw)
    except ValueError:
        raise MemoryFormatError(path, line, "date", f"{raw!r} is not a date YYYY-MM-DD") from None


@dataclass(frozen=True)
class DailyNote(MarkdownFile):
    """memory/YYYY-MM-DD.md, the daily layer: the day's raw event log."""

    date: dt.date = dt.date(1970, 1, 1)
    TEMPLATE: ClassVar[Template] = DAILY_NOTE
    TIMES: ClassVar[bool] = True

    @classmethod
    def parse(cls, text: str, date: dt.date, path: str | None = None) -> DailyNote:
        return cls(cls._doc(text, path or f"memory/{date.isoformat()}.md"), date)

    @property
    def path(self) -> str:
        return f"memory/{self.date.isoformat()}.md"

    @property
    def entries(self) -> tuple[tuple[str, Entry], ...]:
        """Every ``[HH:MM]`` entry with the heading of its section, in file order."""
        return tuple(
            (s.heading, i) for s in self.doc.sections for i in s.all_items() if isinstance(i, Entry)
        )

    @property
    def takeaways(self) -> tuple[str, ...]:
        return self.texts("takeaways")

    @property
    def tomorrow(self) -> tuple[Task, ...]:
        return tuple(i for i in self.items("tomorrow") if isinstance(i, Task))


SLUG_RE: Final = re.compile(r"[A-Za-z0-9_.-]+")  # a topic:<slug> entity's local id


@dataclass(frozen=True)
class Decision:
    """A row of a topic's decision log."""

    date: str
    decision: str
    reasoning: str
    outcome: str


@dataclass(frozen=True)
class TopicFile(MarkdownFile):
    """memory/topics/<slug>.md, the topic layer: deep context on one subject, stored as
    the ``topic:<slug>`` entity."""

    slug: str = "topic"
    TEMPLATE: ClassVar[Template] = TOPIC

    @classmethod
    def parse(cls, text: str, slug: str, path: str | None = None) -> TopicFile:
        path = path or f"memory/topics/{slug}.md"
        if not SLUG_RE.fullmatch(slug):
            raise MemoryFormatError(
                path, None, "topic_slug", "a topic file's name must match [A-Za-z0-9_.-]+.md"
            )
        topic = cls(cls._doc(text, path), slug)
        for _key, label in TOPIC.fields:  # the seed's dates are YYYY-MM-DD
            for n, line in enumerate(topic.doc.preamble):
                if line.startswith(label):
                    parse_date(line[len(label) :], path, n + 2)
        return topic

    @property
    def path(self) -> str:
        return f"memory/topics/{self.slug}.md"

    @property
    def name(self) -> str:
        return self.doc.title if self.doc.title is not None else self.slug

    @property
    def created(self) -> str | None:
        return self.field("created")

    @property
    def last_updated(self) -> str | None:
        return self.field("updated")

    @property
    def summary(self) -> str:
        return self.prose("summary")

    @property
    def key_facts(self) -> tuple[str, ...]:
        return self.texts("key_facts")

    @property
    def decisions(self) -> tuple[Decision, ...]:
        """The decision log's rows (its header row left out)."""
        rows = [i for i in self.items("decision_log") if isinstance(i, Row) and len(i.cells) == 4]
        return tuple(Decision(*r.cells) for r in rows if r.render() not in DECISION_LOG_FRAME)

    @property
    def open_questions(self) -> tuple[str, ...]:
        return self.texts("open_questions")

    @property
    def related(self) -> tuple[str, ...]:
        return self.texts("related")


QUARTER_RE: Final = re.compile(r"(\d{4})-Q([1-4])")


@dataclass(frozen=True, order=True)
class Quarter:
    year: int
    number: int

    def __str__(self) -> str:
        return f"{self.year}-Q{self.number}"

    @classmethod
    def parse(cls, raw: str, path: str) -> Quarter:
        match = QUARTER_RE.fullmatch(raw)
        if match is None:
            raise MemoryFormatError(
                path, None, "archive_name", f"{raw!r} is not a quarter YYYY-QN (N 1-4)"
            )
        return cls(int(match[1]), int(match[2]))

    @classmethod
    def of(cls, day: dt.date) -> Quarter:
        return cls(day.year, (day.month - 1) // 3 + 1)

    @property
    def heading(self) -> str:
        """The seed's title: ``Q4 2025``."""
        return f"Q{self.number} {self.year}"


@dataclass(frozen=True)
class ArchiveFile(MarkdownFile):
    """memory/archive/YYYY-QN.md, the cold layer: a quarter's summary."""

    quarter: Quarter = Quarter(1970, 1)
    TEMPLATE: ClassVar[Template] = ARCHIVE

    @classmethod
    def parse(cls, text: str, quarter: Quarter, path: str | None = None) -> ArchiveFile:
        return cls(cls._doc(text, path or f"memory/archive/{quarter}.md"), quarter)

    @property
    def path(self) -> str:
        return f"memory/archive/{self.quarter}.md"

    @property
    def summary(self) -> str:
        return self.prose("summary")

    @property
    def major_events(self) -> tuple[str, ...]:
        return self.texts("major_events")

    @property
    def projects(self) -> tuple[Project, ...]:
        section = self.section("projects")
        if section is None:
            return ()
        return tuple(
            Project(s.title, tuple(i.text for i in s.items if isinstance(i, Bullet)))
            for s in section.subsections
        )

    @property
    def metrics(self) -> tuple[str, ...]:
        return self.texts("metrics")

    @property
    def lessons(self) -> tuple[str, ...]:
        return self.texts("lessons")


# --- heartbeat-state.json -------------------------------------------------------------------

# The seed's keys, in its order (§11); next_scheduled holds the three below.
HEARTBEAT_KEYS: Final = (
    "last_memory_review",
    "last_archive",
    "last_active_context_prune",
    "daily_notes_count",
    "memory_md_lines",
    "next_scheduled",
)
SCHEDULE_KEYS: Final = ("weekly_review", "monthly_audit", "quarterly_archive")
HEARTBEAT_DATES: Final = ("last_memory_review", "last_archive", "last_active_context_prune")
HEARTBEAT_COUNTS: Final = ("daily_notes_count", "memory_md_lines")
# Not the seed's: the IANA zone the tree's [HH:MM] stamps are in (absent: UTC).
TIMEZONE_KEY: Final = "timezone"


def heartbeat_json(data: Mapping[str, Any]) -> str:
    """heartbeat-state.json as written: the seed's keys first in its order, 2-space indent."""
    ordered = {k: data[k] for k in HEARTBEAT_KEYS if k in data}
    ordered.update((k, v) for k, v in data.items() if k not in ordered)
    return json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class HeartbeatState:
    """memory/heartbeat-state.json: when maintenance last ran and is next due. ``data``
    is the JSON object (unknown keys kept); ``text`` the file as read when it is not
    written as :func:`heartbeat_json` writes it (other indent or key order), so the tree
    still round-trips byte for byte; ACMI stores the values, not the formatting."""

    data: Mapping[str, Any]
    text: str | None = field(default=None, compare=False)

    PATH: ClassVar[str] = "memory/heartbeat-state.json"

    @classmethod
    def parse(cls, text: str, path: str = PATH) -> HeartbeatState:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MemoryFormatError(path, exc.lineno, "json", f"not JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise MemoryFormatError(path, 1, "object", "must be a JSON object")
        check_heartbeat(data, path)
        return cls(data, None if heartbeat_json(data) == text else text)

    def render(self) -> str:
        return self.text if self.text is not None else heartbeat_json(self.data)

    @property
    def timezone(self) -> str:
        zone = self.data.get(TIMEZONE_KEY, "UTC")
        return zone if isinstance(zone, str) else "UTC"

    def date(self, key: str) -> dt.date | None:
        raw = self.data.get(key)
        return None if raw is None else dt.date.fromisoformat(raw)

    def next_scheduled(self, key: str) -> dt.date | None:
        raw = self.data.get("next_scheduled", {}).get(key)
        return None if raw is None else dt.date.fromisoformat(raw)


def check_heartbeat(data: Mapping[str, Any], path: str = HeartbeatState.PATH) -> None:
    """The seed's keys have the seed's types: dates YYYY-MM-DD, counts integers >= 0,
    next_scheduled an object of dates. Errors name the key (and the file)."""

    def fail(key: str, rule: str, message: str) -> MemoryFormatError:
        return MemoryFormatError(path, None, rule, f"{key}: {message}")

    for key in HEARTBEAT_DATES:
        raw = data.get(key)
        if raw is not None and not (isinstance(raw, str) and _is_date(raw)):
            raise fail(key, "date", "must be a date YYYY-MM-DD")
    for key in HEARTBEAT_COUNTS:
        raw = data.get(key)
        if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int) or raw < 0):
            raise fail(key, "count", "must be an integer >= 0")
    schedule = data.get("next_scheduled")
    if schedule is not None:
        if not isinstance(schedule, dict):
            raise fail("next_scheduled", "object", "must be an object of dates")
        for key, raw in schedule.items():
            if not (isinstance(raw, str) and _is_date(raw)):
                raise fail(f"next_scheduled.{key}", "date", "must be a date YYYY-MM-DD")
    zone = data.get(TIMEZONE_KEY)
    if zone is not None and not isinstance(zone, str):
        raise fail(TIMEZONE_KEY, "timezone", "must be an IANA zone name, e.g. Europe/London")


def _is_date(raw: str) -> bool:
    try:
        parse_date(raw, "")
    except MemoryFormatError:
        return False
    return True


# --- the whole tree -------------------------------------------------------------------------


@dataclass(frozen=True)
class MemorySnapshot:
    """Every file of one entity's memory tree (``acmi_core.memory.tree`` reads and writes
    it; ``acmi_core.memory.slots`` maps it onto ACMI). ``daily``, ``topics`` and
    ``archives`` are sorted by date, slug and quarter; ``ignored`` lists files of the tree
    that are not the seed's memory files (notes.txt), never written back. ``startup``
    holds the startup files (SOUL.md, USER.md, AGENTS.md) as (path, text), in
    ``STARTUP_PATHS`` order, their text kept exactly as written."""

    active_context: ActiveContext | None = None
    memory: LongTermMemory | None = None
    daily: tuple[DailyNote, ...] = ()
    topics: tuple[TopicFile, ...] = ()
    archives: tuple[ArchiveFile, ...] = ()
    heartbeat: HeartbeatState | None = None
    ignored: tuple[str, ...] = field(default=(), compare=False)
    startup: tuple[tuple[str, str], ...] = ()

    def startup_file(self, path: str) -> str | None:
        return next((text for p, text in self.startup if p == path), None)

    @property
    def timezone(self) -> str:
        """The zone of the tree's [HH:MM] stamps: heartbeat-state.json's ``timezone``, or UTC."""
        return "UTC" if self.heartbeat is None else self.heartbeat.timezone

    def day(self, date: dt.date) -> DailyNote | None:
        return next((d for d in self.daily if d.date == date), None)

    def topic(self, slug: str) -> TopicFile | None:
        return next((t for t in self.topics if t.slug == slug), None)

    def for_scope(
        self, scope: Scope, *, today: dt.date, topic: str | None = None
    ) -> MemorySnapshot:
        """What a session of ``scope`` loads at wake (:data:`SCOPES`): a ``group`` view
        has no MEMORY.md (private), a ``subagent`` view only ACTIVE-CONTEXT and the
        topic it names. Level 3 (yesterday, other topics, archives) is never included.
        The startup files are those of :data:`STARTUP_SCOPES`."""
        loads = SCOPES[scope]
        startup = STARTUP_SCOPES[scope]
        today_note = self.day(today)
        chosen = self.topic(topic) if topic is not None else None
        return MemorySnapshot(
            active_context=self.active_context if "hot" in loads else None,
            memory=self.memory if "warm" in loads else None,
            daily=(today_note,) if "today" in loads and today_note is not None else (),
            topics=(chosen,) if "topic" in loads and chosen is not None else (),
            startup=tuple((p, t) for p, t in self.startup if p in startup),
        )


__all__ = [
    "ACTIVE_CONTEXT",
    "ARCHIVE",
    "DAILY_NOTE",
    "LONG_TERM_MEMORY",
    "TOPIC",
    "ActiveContext",
    "ArchiveFile",
    "DailyNote",
    "Decision",
    "HeartbeatState",
    "LongTermMemory",
    "MarkdownFile",
    "MemorySnapshot",
    "Project",
    "Quarter",
    "TopicFile",
]

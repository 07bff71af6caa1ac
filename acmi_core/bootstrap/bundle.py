"""The wake bundle itself: its sections (names, titles, display order), which a scope
carries, and :class:`Bundle` (labelled sections, as JSON or rendered text).

Which sections a scope carries (seed §7 and §12): ``SCOPE_SECTIONS``; the operation that
fills them is :class:`acmi_core.bootstrap.bootstrapper.Bootstrapper`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from acmi_core.bootstrap.results import BundleBody, BundleMemory
from acmi_core.bootstrap.text import count_tokens, iso, utf8_len

Scope = Literal["main", "group", "subagent"]
Format = Literal["json", "markdown"]
SCOPES: Final = ("main", "group", "subagent")
FORMATS: Final = ("json", "markdown")

DEFAULT_EVENTS: Final = 20
MAX_EVENTS: Final = 200
# Level 3 of the seed's progressive loading (§12): loaded only when asked for.
ON_DEMAND: Final = ("topics", "yesterday", "archive")
GROUP_ON_DEMAND: Final = frozenset({"yesterday"})  # §13: topics and archive stay out of groups
MAX_PROBLEMS: Final = 3  # reported in a bundle (each cut to PROBLEM_CHARS); the rest logged
PROBLEM_CHARS: Final = 160

# Display order, with each section's title (memory first: the seed's startup order, §7,
# which reads SOUL.md and USER.md before anything else; AGENTS.md, the operating manual, next).
# Lists are newest first (HITL: most urgent first).
TITLES: Final = {
    "soul": "SOUL.md",
    "user": "USER.md",
    "agents": "AGENTS.md",
    "profile": "Profile",
    "handoff": "Handoff (HANDOFF.md)",
    "hot": "ACTIVE-CONTEXT.md",
    "conflicts": "Memory conflicts",
    "warm": "MEMORY.md",
    "today": "Today's note",
    "topic": "Topic file",
    "signals": "Signals",
    "rollup": "Rollup",
    "hitl": "HITL for you (most urgent first)",
    "hitl_shared": "HITL, shared queue",
    "locks": "Locks you hold",
    "work": "Your open work",
    "active_threads": "Threads",
    "lessons": "Lessons",
    "coordination": "Mentions of you",
    "timeline": "Timeline",
    "yesterday": "Yesterday's note",
    "topics": "Topics (load one: topic=<slug>)",
    "archive": "Archive",
    "spawns": "Spawns",
}
SCOPE_SECTIONS: Final[dict[str, frozenset[str]]] = {
    "main": frozenset(TITLES),
    # §7: a group session loads SOUL.md and USER.md first; AGENTS.md only in main; a
    # sub-agent "task-specific context only", so none of the three
    "group": frozenset(
        (
            "soul",
            "user",
            "hot",
            "today",
            "yesterday",
            "signals",
            "active_threads",
            "timeline",
            "hitl_shared",
            "coordination",
            "locks",
            "work",
        )
    ),
    "subagent": frozenset(
        (
            "hot",
            "topic",
            "signals",
            "hitl",
            "locks",
            "work",
            "lessons",
            "yesterday",
            "topics",
            "archive",
        )
    ),
}


@dataclass
class Section:
    """One labelled part of a bundle. ``value`` is a dict (or None) or a list of items;
    ``cut`` counts the items (or the whole section, as 1) a budget left out."""

    name: str
    value: Any
    cut: int = 0

    @property
    def title(self) -> str:
        return TITLES[self.name]


@dataclass
class Bundle:
    agent: str
    tenant: str
    scope: str
    format: str
    generated_at: int
    sections: list[Section]
    spawn: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    max_bytes: int | None = None
    max_tokens: int | None = None
    text: str = ""
    # the memory read: the day it calls today, its zone, level-3 sections not loaded
    memory: BundleMemory = field(default_factory=BundleMemory)
    # what the script took from the timeline (members for the timeline and the daily notes,
    # daily-note stamps): the cost figure tests hold, not part of the bundle's JSON
    reads: dict[str, int] = field(default_factory=dict)
    # problems a budget left out (the last thing it cuts), said in ``cut`` as "problems"
    problems_cut: int = 0
    # False for an agent with no memory at all (sections.Memory): the markdown then does
    # not offer level 3 (no topics linked, no note of yesterday); the JSON still lists it
    has_memory: bool = True

    def section(self, name: str) -> Section:
        for section in self.sections:
            if section.name == name:
                return section
        raise KeyError(name)

    @property
    def cut(self) -> dict[str, int]:
        cut = {s.name: s.cut for s in self.sections if s.cut}
        if self.problems_cut:
            cut["problems"] = self.problems_cut
        return cut

    def to_dict(self) -> BundleBody:
        return {
            "agent": self.agent,
            "tenant": self.tenant,
            "scope": self.scope,
            "generated_at": self.generated_at,
            "generated_at_iso": iso(self.generated_at),
            "spawn": self.spawn,
            "sections": {s.name: s.value for s in self.sections},
            "cut": self.cut,
            "budget_bytes": self.max_bytes,
            "memory": self.memory,
            "problems": self.problems,
            "budget_tokens": self.max_tokens,
        }

    @property
    def size_bytes(self) -> int:
        return utf8_len(self.text)

    @property
    def tokens(self) -> int:
        """What the text costs an LLM (``text.count_tokens``: cl100k when installed)."""
        return count_tokens(self.text)

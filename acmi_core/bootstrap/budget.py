"""The bundle's size: what each section reads at most, the token estimate, the budget
and what a budget cuts first.

Budget: ``max_bytes`` and/or ``max_tokens`` bound the rendered text in the chosen format.
Tokens are counted by ``text.count_tokens``: cl100k when the ``acmi[tokens]`` extra is
installed, else an estimate calibrated to count high. Over budget, items go lowest
priority first (``TRIM_ORDER``: spawns, the shared queue, the oldest timeline events, ...
signals last), and the bundle says what it cut; the problems are dropped last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError, BudgetTooSmall
from acmi_core.base.stored import render_json
from acmi_core.bootstrap.bundle import Bundle, Section
from acmi_core.bootstrap.render import OBJECT_SECTIONS, View, item_line, render
from acmi_core.bootstrap.text import count_tokens, utf8_len

if TYPE_CHECKING:
    from acmi_core.bootstrap.results import BundleMemory

# How much each section reads at most (the script's cost is bounded by these).
CAPS: Final = {
    "spawns": 5,
    "hitl": 20,  # per queue: the agent's and the shared one
    "locks": 50,
    "work": 20,
    "lessons": 10,
    "lessons_scanned": 200,  # newest lessons of the tenant examined for the agent's
    "workflows": 50,  # the agent's most recent workflows
    "coordination": 10,
    # the agent's mentions index read (it keeps keys.MENTIONS_KEPT: the section's cap)
    "coordination_scanned": 10,
    "threads": 50,  # joined threads read; past it, one bounded HSCAN step
    # memory: daily-note events kept around now (a note's budget is 200 lines, so today
    # and yesterday fit), of the stamps and members examined there; archive quarters
    # shown, of the quarters a bootstrap lists at most; topics listed
    "daily": 500,
    "daily_scanned": 500,
    "archive": 2,
    "archive_scanned": 400,
    "topics": 100,
    # newest timeline events examined at most for the timeline section when the agent has
    # daily notes (their lines are skipped there): 10 a wanted event, at most this
    "timeline_scanned": 500,
    # a spawn the bootstrap logs (a session-start hook's) is a repeat, not logged, when its
    # session_id is among the agent's newest this many spawns (a resume or a compact of
    # the same session); read to READ_BYTES
    "spawn_sessions": 16,
}
# The events' bytes each of the bootstrap's event reads (timeline, daily notes, lessons,
# coordination) takes at most; the first event read is taken whatever its size (<= one
# request body). 20 events of 255 KB cost the script ~40 ms of CPU by count alone.
READ_BYTES: Final = 512 * 1024
MAX_BUDGET: Final = 2**31
# The skeleton a budget must hold (``floor``) is priced at its worst: every section cut
# with a three-digit count (no list section reads more than 999 items), the longest IANA
# zone name, the longest handoff state.
_WORST_CUT: Final = 999
_WORST_ZONE: Final = "America/Argentina/ComodRivadavia"
_WORST_HANDOFF: Final = "put back: cut to fit the budget, still pending"

# Lowest priority first: what a budget cuts first. List sections lose their last items
# (the oldest or least urgent) one by one; the others go whole.
# Memory: level 3 first, then level 2 (today, the topic, MEMORY.md: 25 KB at most, so it
# goes before the identity), level 1 late; the handoff last of all (a taken handoff that
# is cut is put back, see ``Bootstrapper._keep_handoff``).
TRIM_ORDER: Final = (
    "archive",
    "topics",
    "yesterday",
    "spawns",
    "hitl_shared",
    "timeline",
    "coordination",
    "lessons",
    "active_threads",
    "rollup",
    "today",
    "topic",
    "agents",  # the manual before the curated memory: how to work, not what is known
    "warm",
    "conflicts",
    "profile",
    "work",
    "locks",
    "hitl",
    "user",  # identity (§12 level 1): cut after everything but hot, signals, the handoff
    "soul",
    "hot",
    "signals",
    "handoff",
)


def count_in(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise AcmiValidationError(name, "range", f"must be an integer in {low}..{high}")
    return value


@dataclass(frozen=True)
class Budget:
    """What a bundle's text may cost: bytes, tokens (``text.count_tokens``), or both."""

    max_bytes: int | None = None
    max_tokens: int | None = None

    def excess(self, text: str) -> int:
        """The UTF-8 bytes to cut from ``text`` for it to fit (<= 0: it fits). Tokens over
        are turned into bytes at the text's own bytes a token, so each pass cuts about
        what is needed; the next pass measures again."""
        size = utf8_len(text)
        over = [size - self.max_bytes] if self.max_bytes is not None else []
        if self.max_tokens is not None:
            tokens = max(1, count_tokens(text))
            over.append(-(-(tokens - self.max_tokens) * size // tokens))
        return max(over, default=0)


def check_budget(max_bytes: int | None, max_tokens: int | None) -> Budget | None:
    """The budget the two limits make, or None. How small it may be depends on the
    request: ``floor``."""
    if max_bytes is not None:
        count_in(max_bytes, "max_bytes", 1, MAX_BUDGET)
    if max_tokens is not None:
        count_in(max_tokens, "max_tokens", 1, MAX_BUDGET)
    if max_bytes is None and max_tokens is None:
        return None
    return Budget(max_bytes, max_tokens)


def floor(budget: Budget, skeleton: Bundle) -> None:
    """Refuse ``budget`` when it cannot hold ``skeleton`` (the request's bundle with nothing
    read: its header, spawn and memory line) once every section is cut: ``fit`` cuts down to
    at most that, so every budget this lets through is kept. Checked before the script
    runs, so a refused call reads and writes nothing."""
    memory: BundleMemory = {
        **skeleton.memory,
        "timezone": _WORST_ZONE,
        "handoff": _WORST_HANDOFF,
    }
    worst = Bundle(
        skeleton.agent,
        skeleton.tenant,
        skeleton.scope,
        skeleton.format,
        skeleton.generated_at,
        [
            Section(s.name, None if s.name in OBJECT_SECTIONS else [], _WORST_CUT)
            for s in skeleton.sections
        ],
        spawn=None if skeleton.spawn is None else {**skeleton.spawn, "duplicate": True},
        # the JSON echoes the budget: priced at its longest, so the floor is one number
        max_bytes=None if budget.max_bytes is None else MAX_BUDGET,
        max_tokens=None if budget.max_tokens is None else MAX_BUDGET,
        memory=memory,
        problems_cut=_WORST_CUT,
    )
    text = render(worst)
    if budget.max_tokens is not None and count_tokens(text) > budget.max_tokens:
        raise BudgetTooSmall("max_tokens", budget.max_tokens, count_tokens(text))
    if budget.max_bytes is not None and utf8_len(text) > budget.max_bytes:
        raise BudgetTooSmall("max_bytes", budget.max_bytes, utf8_len(text))


def fit(bundle: Bundle, budget: Budget) -> None:
    """Cut lowest-priority items until the text fits ``budget``.

    Each item's cost is measured once (its own rendering), so a cut is O(items), not a
    re-render per item; the text is rendered (and its tokens counted) again only to
    confirm, and a shortfall (fence lengths, separators, tokens) feeds the next pass."""
    sections = {s.name: s for s in bundle.sections}
    cost = _item_cost(bundle)
    order = [sections[name] for name in TRIM_ORDER if name in sections]
    while True:
        excess = budget.excess(bundle.text)
        if excess <= 0:
            return
        excess += 64  # the "cut" note grows as sections are cut
        progressed = False
        for section in order:
            if excess <= 0:
                break
            value = section.value
            if isinstance(value, list):
                while value and excess > 0:
                    excess -= cost(section.name, value.pop())
                    section.cut += 1
                    progressed = True
            elif value:
                excess -= cost(section.name, value)
                section.value = (
                    None if not isinstance(value, dict) or section.name != "signals" else {}
                )
                section.cut = 1
                progressed = True
        if not progressed and bundle.problems:  # what the store held that did not read
            bundle.problems_cut += len(bundle.problems)
            bundle.problems = []
            progressed = True
        bundle.text = render(bundle)
        if not progressed:
            return  # nothing left to cut: the skeleton alone (the budget's floor refused)


def _item_cost(bundle: Bundle) -> Callable[[str, Any], int]:
    """What an item (or a whole object section) adds to the text, about: the next pass
    measures the text itself."""
    if bundle.format == "json":
        return lambda _, item: len(render_json(item)) + 1
    view = View(bundle.generated_at, bundle.agent)
    return lambda name, item: (
        (
            len(render_json(item))
            if name in OBJECT_SECTIONS
            else utf8_len(item_line(name, item, view))
        )
        + 1
    )

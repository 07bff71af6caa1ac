"""Where the hot and warm layers disagree (seed 002 §8): one pure rule, used by
``MemoryAPI.debug`` and the wake bundle's ``conflicts`` section alike.

The rule: a project MEMORY.md calls done, complete, shipped, closed or cancelled that
ACTIVE-CONTEXT.md still has an open task (``- [ ]``) for. That is current state, so hot
wins (``CONFLICT_RULES["current_state"]``); both lines are shown, nothing is dropped.
"""

from __future__ import annotations

import re
from typing import Final

from acmi_core.memory.layers import CONFLICT_RULES, ActiveContext, LongTermMemory
from acmi_core.memory.results import HotWarmConflict

# a MEMORY.md project note that says the project is over
DONE_WORDS: Final = re.compile(r"\b(done|complete|completed|shipped|closed|cancel+ed)\b", re.I)
FIX: Final = "update the project in MEMORY.md (hot wins for current state)"


def hot_warm_conflicts(
    active: ActiveContext | None, memory: LongTermMemory | None
) -> list[HotWarmConflict]:
    """The conflicts between ACTIVE-CONTEXT.md and MEMORY.md, one per project, in
    MEMORY.md's order: ``{about, hot, warm, rule, wins, fix}``. None on either side: none."""
    if active is None or memory is None:
        return []
    hot_lines = active.render().split("\n")
    found: list[HotWarmConflict] = []
    for project in memory.projects:
        closed = [n for n in project.notes if DONE_WORDS.search(n)]
        if not closed:
            continue
        name = project.name.casefold()
        open_hot = [
            line.strip()
            for line in hot_lines
            if name in line.casefold() and line.lstrip().startswith("- [ ]")
        ]
        if open_hot:
            found.append(
                {
                    "about": project.name,
                    "hot": open_hot[0],
                    "warm": closed[0],
                    "rule": "current_state",
                    "wins": CONFLICT_RULES["current_state"],
                    "fix": FIX,
                }
            )
    return found


__all__ = ["DONE_WORDS", "hot_warm_conflicts"]

"""The hot/warm conflict rule (seed 002 §8), one pure function for MemoryAPI.debug and the
wake bundle's ``conflicts`` section."""

from __future__ import annotations

from pathlib import Path

from acmi_core.memory import read_tree, render_tree
from acmi_core.memory.conflicts import hot_warm_conflicts
from acmi_core.memory.layers import ActiveContext, LongTermMemory
from acmi_core.memory.tree import parse_tree

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
OPEN = "- Status: 3 candidates in final round, offer target 2026-02-06"


def _tree(status: str) -> tuple[ActiveContext | None, LongTermMemory | None]:
    files = render_tree(read_tree(FIXTURE))
    files["MEMORY.md"] = files["MEMORY.md"].decode().replace(OPEN, status).encode()
    tree = parse_tree(files)
    return tree.active_context, tree.memory


def test_a_project_memory_calls_over_with_an_open_hot_task_is_a_conflict_hot_wins() -> None:
    active, memory = _tree("- Status: shipped on 2026-02-03")
    (conflict,) = hot_warm_conflicts(active, memory)
    assert conflict == {
        "about": "Analyst hire",
        "hot": conflict["hot"],
        "warm": "Status: shipped on 2026-02-03",
        "rule": "current_state",
        "wins": "hot",
        "fix": "update the project in MEMORY.md (hot wins for current state)",
    }
    assert conflict["hot"].startswith("- [ ] Analyst hire")


def test_no_conflict_while_the_project_is_open_or_a_layer_is_missing() -> None:
    active, memory = _tree(OPEN)
    assert hot_warm_conflicts(active, memory) == []
    closed_active, closed_memory = _tree("- Status: closed")
    assert hot_warm_conflicts(None, closed_memory) == []
    assert hot_warm_conflicts(closed_active, None) == []
    # "undone" is not "done": the words match whole
    assert hot_warm_conflicts(*_tree("- Status: undone paperwork")) == []

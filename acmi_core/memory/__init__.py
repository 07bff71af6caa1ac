"""The five memory layers of the Agent Memory Architecture (seed 002, DESIGN §6).

Pure code, no store: ``markdown`` (the lossless Markdown codec), ``layers`` (the seed's
templates as typed files, scopes, search and conflict order), ``budgets`` (the seed's
size limits and fixes), ``slots`` (files <-> signals, profile fields, archive documents),
``daily`` (daily notes <-> timeline events), ``conflicts`` (hot/warm disagreements),
``tree`` (the seed's directory tree <-> a :class:`MemorySnapshot`).

On a store, each on the tenant's :class:`~acmi_core.entities.context.Context`: ``service``
(``MemoryAPI``, ``acmi.memory``) composes ``reads``, ``writes``, ``upkeep`` and ``transfer``,
all on ``state`` (the one read every command starts from).
"""

from __future__ import annotations

from acmi_core.memory.budgets import BUDGETS, BudgetReport, check, check_snapshot
from acmi_core.memory.layers import (
    ActiveContext,
    ArchiveFile,
    DailyNote,
    HeartbeatState,
    LongTermMemory,
    MemorySnapshot,
    Quarter,
    TopicFile,
)
from acmi_core.memory.markdown import MemoryFormatError
from acmi_core.memory.slots import SlotImage, snapshot_from_slots, snapshot_to_slots
from acmi_core.memory.tree import parse_tree, read_tree, render_tree, write_tree

__all__ = [
    "BUDGETS",
    "ActiveContext",
    "ArchiveFile",
    "BudgetReport",
    "DailyNote",
    "HeartbeatState",
    "LongTermMemory",
    "MemoryFormatError",
    "MemorySnapshot",
    "Quarter",
    "SlotImage",
    "TopicFile",
    "check",
    "check_snapshot",
    "parse_tree",
    "read_tree",
    "render_tree",
    "snapshot_from_slots",
    "snapshot_to_slots",
    "write_tree",
]

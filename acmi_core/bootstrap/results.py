"""The wake bundle as JSON (``Bundle.to_dict``, the text a ``format=json`` bundle is): the
core answers the ``Bundle`` itself (its text, sizes and cuts); this is the body every
surface prints. ``Json`` marks what the bundle quotes as stored: the spawn record."""

# No `from __future__ import annotations`: on Python 3.11 a TypedDict's NotRequired
# written as a string is taken for a required key at run time.
from typing import Any, TypedDict

from pydantic import JsonValue

Json = JsonValue


class BundleMemory(TypedDict, total=False):
    """The memory read: the day it calls today, its zone, the level-3 sections not loaded,
    what became of the handoff (when the scope shows it). Empty until the read fills it."""

    today: str
    timezone: str
    on_demand: list[str]
    handoff: str


class BundleBody(TypedDict):
    agent: str
    tenant: str
    scope: str
    generated_at: int
    generated_at_iso: str
    spawn: dict[str, Json] | None
    # each section's own value (an object, a list of items, or null), by its name: read
    # by name, its shape the section's (bundle.py's TITLES, sections.py)
    sections: dict[str, Any]
    cut: dict[str, int]
    budget_bytes: int | None
    memory: BundleMemory
    problems: list[str]
    budget_tokens: int | None

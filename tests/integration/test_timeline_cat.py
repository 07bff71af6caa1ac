"""acmi.timeline.cat: several timelines merged newest first in one round trip, on every
backend (the CLI's and the MCP server's `cat`)."""

from __future__ import annotations

from typing import Any

import pytest

from acmi_core import Acmi, AcmiValidationError
from tests.kit import fresh_tenant


def event(summary: str, ts: int) -> dict[str, Any]:
    return {"source": "agent:a", "kind": "note", "correlationId": "c", "summary": summary, "ts": ts}


def test_merged_newest_first_within_the_window(acmi: Acmi) -> None:
    acmi = fresh_tenant(acmi, acmi.clock)
    for i in range(5):
        acmi.timeline.append("user:a", event(f"a{i}", 1_000 + 2 * i))
        acmi.timeline.append("user:b", event(f"b{i}", 1_001 + 2 * i))
    merged = acmi.timeline.cat(["user:a", "user:b"], limit=4)
    assert [(e, ev.summary) for e, ev in merged] == [
        ("user:b", "b4"), ("user:a", "a4"), ("user:b", "b3"), ("user:a", "a3"),
    ]  # fmt: skip
    window = acmi.timeline.cat(["user:a", "user:b"], since_ms=1_003, until_ms=1_006)
    assert [ev.summary for _, ev in window] == ["a3", "b2", "a2", "b1"]


def test_equal_timestamps_keep_the_given_order_and_names_are_read_once(acmi: Acmi) -> None:
    acmi = fresh_tenant(acmi, acmi.clock)
    acmi.timeline.append("user:a", event("a", 5_000))
    acmi.timeline.append("user:b", event("b", 5_000))
    merged = acmi.timeline.cat(["user:b", "user:a", "user:b"])
    assert [e for e, _ in merged] == ["user:b", "user:a"]
    assert acmi.timeline.cat(["user:nobody"]) == []


@pytest.mark.parametrize(
    ("entities", "limit", "field"),
    [
        ([], 10, "entities"),
        ([f"user:u{i}" for i in range(21)], 10, "entities"),
        (["user:a"], 0, "limit"),
        (["user:a"], 1_001, "limit"),
        (["Bad:x"], 10, "entity"),
    ],
)
def test_bad_input_names_the_field(acmi: Acmi, entities: list[str], limit: int, field: str) -> None:
    with pytest.raises(AcmiValidationError) as refused:
        acmi.timeline.cat(entities, limit=limit)
    assert refused.value.field == field

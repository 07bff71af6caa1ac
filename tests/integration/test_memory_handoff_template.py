"""Issue 24 item 7: ``memory handoff`` writes the seed's HANDOFF template (§12: what was
done, in progress, next steps, key decisions, gotchas) filled from the given parts."""

from __future__ import annotations

import pytest

from acmi_core import Acmi
from acmi_core.base.errors import AcmiValidationError

EXPECTED = """# HANDOFF.md

## What Was Done
- Imported the Q4 archive
- Fixed the stamp index

## In Progress
- none

## Next Steps
- Call Priya about the cutover

## Key Decisions
- Keep Stripe as the ledger of record

## Gotchas
- The sandbox rate-limits at 10 rps
"""


def test_the_template_filled_from_its_parts(acmi: Acmi) -> None:
    left = acmi.memory.handoff(
        "agent:hand",
        done=["Imported the Q4 archive", "Fixed the stamp\nindex"],
        next_steps=["Call Priya about the cutover"],
        decisions="Keep Stripe as the ledger of record",
        gotchas=["The sandbox rate-limits at 10 rps"],
    )
    assert left["text"] == EXPECTED
    taken = acmi.memory.take_handoff("agent:hand")
    assert taken is not None and taken["text"] == EXPECTED
    # the next main session's bundle shows it
    acmi.memory.handoff("agent:hand", done=["x"])
    bundle = acmi.bootstrap("agent:hand", spawn={"session_id": "h-1", "model_id": "m"})
    handoff = bundle.section("handoff").value
    assert handoff is not None and "## Gotchas\n- none" in handoff["text"]


def test_bad_parts_are_refused_naming_the_field(acmi: Acmi) -> None:
    with pytest.raises(AcmiValidationError) as both:
        acmi.memory.handoff("agent:hand-bad", "free text", done=["x"])
    assert (both.value.field, both.value.rule) == ("text", "exclusive")
    with pytest.raises(AcmiValidationError) as typed:
        acmi.memory.handoff("agent:hand-bad", gotchas=[1])
    assert (typed.value.field, typed.value.rule) == ("gotchas", "type")
    assert acmi.memory.take_handoff("agent:hand-bad") is None  # nothing stored


def test_a_secret_in_a_part_is_refused(acmi: Acmi) -> None:
    with pytest.raises(AcmiValidationError):
        acmi.memory.handoff("agent:hand-secret", gotchas=["key AKIAIOSFODNN7EXAMPLE"])
    assert acmi.memory.take_handoff("agent:hand-secret") is None


def test_per_tenant(acmi: Acmi) -> None:
    a, b = acmi.for_tenant("hand-acme"), acmi.for_tenant("hand-globex")
    a.memory.handoff("agent:atlas", done=["acme's work"])
    assert b.memory.take_handoff("agent:atlas") is None
    taken = a.memory.take_handoff("agent:atlas")
    assert taken is not None and "- acme's work" in taken["text"]

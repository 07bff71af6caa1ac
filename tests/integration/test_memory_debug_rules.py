"""Issue 24 item 7: ``memory debug`` checks the seed's four conflict rules (§8) over facts
two layers state differently, with the daily notes as evidence, and flags a line held in
more than one layer; on every backend, per tenant."""

from __future__ import annotations

from acmi_core import Acmi
from acmi_core.memory.tree import parse_tree

NOW = 1_768_478_400_000  # 2026-01-15 12:00 UTC
HOT = """# ACTIVE-CONTEXT.md — What's Hot

Last updated: 2026-01-15 11:00 GMT

## 🔥 Current Priority
Ship the billing migration

## In Progress
- [ ] Billing cutover: Friday 2026-01-16
"""
WARM = """# MEMORY.md — Long-Term Memory

## Key People
- Priya — head of payments
- Marco — data engineer, owns the Snowflake role

## Lessons Learned
- Always verify prospect names with live search before outreach
"""
TOPIC = """# Billing migration

Created: 2026-01-02
Last updated: 2026-01-14

## Summary
Moving billing from Stripe Billing to our own ledger.

## Key Facts
- Priya — CTO since January
- Billing cutover: Monday 2026-01-19
- Always verify prospect names with live search before outreach
"""
DAILY = """# 2026-01-15 — Daily Notes

## Morning
- [09:00] Priya announced as CTO at the all-hands
"""


def _tree() -> dict[str, bytes]:
    return {
        "ACTIVE-CONTEXT.md": HOT.encode(),
        "MEMORY.md": WARM.encode(),
        "memory/topics/billing-migration.md": TOPIC.encode(),
        "memory/2026-01-15.md": DAILY.encode(),
    }


def test_the_four_rules_and_duplicates(acmi: Acmi) -> None:
    agent = "agent:debug-rules"
    acmi.memory.import_snapshot(agent, parse_tree(_tree()))
    report = acmi.memory.debug(agent, now_ms=NOW)
    assert report["ok"] is False
    by_subject = {c["about"]: c for c in report["rule_conflicts"]}
    assert set(by_subject) == {"priya", "billing cutover"}
    priya = by_subject["priya"]
    # warm vs topic: topic files win for deep domain knowledge
    assert (priya["rule"], priya["wins"]) == ("domain_knowledge", "topic")
    assert [x["path"] for x in priya["lines"]] == [
        "MEMORY.md",
        "memory/topics/billing-migration.md",
    ]
    # daily notes are evidence: the line naming the subject, with its file
    assert priya["evidence"] == [
        {
            "path": "memory/2026-01-15.md",
            "line": "- [09:00] Priya announced as CTO at the all-hands",
        }
    ]
    assert priya["evidence_rule"] == "daily"
    cutover = by_subject["billing cutover"]
    # an open task in ACTIVE-CONTEXT.md: current state, hot wins
    assert (cutover["rule"], cutover["wins"]) == ("current_state", "hot")
    (dup,) = report["duplicates"]
    assert dup["text"] == "Always verify prospect names with live search before outreach"
    assert [w["layer"] for w in dup["where"]] == ["warm", "topic"]
    assert dup["where"][0] == {"layer": "warm", "path": "MEMORY.md", "line": 8}


def test_a_long_term_fact_is_warm_s(acmi: Acmi) -> None:
    agent = "agent:debug-fact"
    hot = HOT.replace("- [ ] Billing cutover: Friday 2026-01-16", "- Office: Lisbon")
    warm = WARM + "\n## Preferences & Patterns\n- Office: Porto\n"
    acmi.memory.import_snapshot(
        agent, parse_tree({"ACTIVE-CONTEXT.md": hot.encode(), "MEMORY.md": warm.encode()})
    )
    (conflict,) = acmi.memory.debug(agent, now_ms=NOW)["rule_conflicts"]
    assert (conflict["about"], conflict["rule"], conflict["wins"]) == (
        "office",
        "long_term_fact",
        "warm",
    )


def test_agreeing_layers_report_nothing_and_tenants_are_apart(acmi: Acmi) -> None:
    a, b = acmi.for_tenant("debug-acme"), acmi.for_tenant("debug-globex")
    a.memory.import_snapshot("agent:atlas", parse_tree(_tree()))
    b.memory.import_snapshot("agent:atlas", parse_tree({"MEMORY.md": WARM.encode()}))
    theirs = b.memory.debug("agent:atlas", now_ms=NOW)
    assert theirs["rule_conflicts"] == [] and theirs["duplicates"] == []
    assert a.memory.debug("agent:atlas", now_ms=NOW)["rule_conflicts"] != []

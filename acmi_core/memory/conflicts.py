"""Where the layers disagree (seed 002 §8), pure: ``hot_warm_conflicts`` (used by
``MemoryAPI.debug`` and the wake bundle's ``conflicts`` section alike), and for debug
``rule_conflicts`` (the seed's four rules over keyed facts) and ``duplicates`` (one line
held word for word in more than one file).

The rule: a project MEMORY.md calls done, complete, shipped, closed or cancelled that
ACTIVE-CONTEXT.md still has an open task (``- [ ]``) for. That is current state, so hot
wins (``CONFLICT_RULES["current_state"]``); both lines are shown, nothing is dropped.
"""

from __future__ import annotations

import re
from typing import Final

from acmi_core.memory.layers import CONFLICT_RULES, ActiveContext, LongTermMemory
from acmi_core.memory.results import (
    Duplicate,
    Evidence,
    FactLine,
    HotWarmConflict,
    RuleConflict,
)

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


# --- the four rules over keyed facts (debug) -------------------------------------------------

# "- Priya: head of payments", "- Priya — head of payments": a fact about a subject
_FACT: Final = re.compile(
    r"^\s*[-*]\s+(?:\[[ xX]\]\s+)?(?:\[\d\d:\d\d\]\s+)?"  # bullet, task box, stamp
    r"(.{2,60}?)\s*(?::|\s[\u2014\u2013-]\s)\s*(.+)$"  # subject, ":" or a dash, value
)
# a line of a file, as duplicates compare it: its bullet, task box and [HH:MM] stamp aside
_ITEM: Final = re.compile(r"^\s*[-*]\s+(?:\[[ xX]\]\s+)?(?:\[\d\d:\d\d\]\s+)?(.*\S)\s*$")
MIN_DUPLICATE_CHARS: Final = 12  # shorter lines ("- none", "- TBD") repeat by nature
MAX_FINDINGS: Final = 50  # of each kind a debug report lists (a bounded answer)
# which rule decides a disagreement between two layers (seed §8), and what to do
_PAIR_RULES: Final = {
    frozenset({"hot", "warm"}): ("current_state", "update the older of the two lines"),
    frozenset({"warm", "topic"}): ("domain_knowledge", "update MEMORY.md from the topic file"),
    frozenset({"hot", "topic"}): ("current_state", "update the topic file if it changed"),
}


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _facts(files: list[tuple[str, str, str]]) -> dict[str, list[FactLine]]:
    """Keyed fact lines by subject: {subject: [{layer, path, line, text}]}."""
    out: dict[str, list[FactLine]] = {}
    for layer, path, text in files:
        for n, line in enumerate(text.split("\n"), start=1):
            match = _FACT.match(line)
            if match is not None:
                subject = _norm(match[1])
                fact: FactLine = {"layer": layer, "path": path, "line": n, "text": line.strip()}
                out.setdefault(subject, []).append(fact)
    return out


def rule_conflicts(
    files: list[tuple[str, str, str]], daily: list[tuple[str, str]]
) -> list[RuleConflict]:
    """The seed's four conflict rules over facts keyed by subject (``- <subject>: <value>``)
    that two layers state differently: ACTIVE-CONTEXT.md wins for current state, MEMORY.md
    for long-term facts (hot vs warm on a subject that is not current state is a long-term
    fact: warm wins), topic files for deep domain knowledge; daily notes are evidence: the
    lines of ``daily`` (path, text) naming the subject are listed with each conflict.
    ``files``: (layer, path, text) of the hot, warm and topic layers."""
    found: list[RuleConflict] = []
    by_subject = _facts(files)
    for subject, facts in by_subject.items():
        values = {_norm(f["text"]) for f in facts}
        layers = {f["layer"] for f in facts}
        if len(values) < 2 or len(layers) < 2:
            continue
        first, other = facts[0], next(f for f in facts if f["layer"] != facts[0]["layer"])
        pair = frozenset({first["layer"], other["layer"]})
        rule, fix = _PAIR_RULES.get(pair, ("long_term_fact", "update the older of the two"))
        if pair == frozenset({"hot", "warm"}) and not any(
            f["layer"] == "hot" and "- [ ]" in f["text"] for f in facts
        ):
            rule, fix = "long_term_fact", "update ACTIVE-CONTEXT.md from MEMORY.md if it is stale"
        evidence: list[Evidence] = [
            Evidence(path=path, line=line.strip())
            for path, text in daily
            for line in text.split("\n")
            if subject in line.casefold() and _ITEM.match(line)
        ][-3:]  # the newest three: the notes are in date order
        found.append(
            {
                "about": subject,
                "lines": [first, other],
                "rule": rule,
                "wins": CONFLICT_RULES[rule],
                "evidence": evidence,
                "evidence_rule": CONFLICT_RULES["evidence"],
                "fix": fix,
            }
        )
        if len(found) >= MAX_FINDINGS:
            break
    return found


def duplicates(files: list[tuple[str, str, str]]) -> list[Duplicate]:
    """Lines held word for word (whitespace and case aside) in more than one file:
    ``{text, where: [{layer, path, line}]}``, in the order first seen. The seed's "single
    source per fact type": keep the line in the layer its kind belongs to."""
    seen: dict[str, list[FactLine]] = {}
    for layer, path, text in files:
        for n, line in enumerate(text.split("\n"), start=1):
            match = _ITEM.match(line)
            if match is None or len(match[1]) < MIN_DUPLICATE_CHARS:
                continue
            key = _norm(match[1])
            where = seen.setdefault(key, [])
            if not any(w["path"] == path for w in where):
                where.append({"layer": layer, "path": path, "line": n, "text": match[1]})
    out: list[Duplicate] = []
    for where in seen.values():
        if len({w["layer"] for w in where}) < 2:
            continue  # within one layer: a note repeating itself is the prune's business
        out.append(
            {
                "text": where[0]["text"],
                "where": [
                    {"layer": w["layer"], "path": w["path"], "line": w["line"]} for w in where
                ],
                "fix": "keep it in one layer (seed: a single source per fact type)",
            }
        )
        if len(out) >= MAX_FINDINGS:
            break
    return out


__all__ = ["DONE_WORDS", "duplicates", "hot_warm_conflicts", "rule_conflicts"]

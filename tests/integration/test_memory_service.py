"""The store-backed memory commands (``MemoryAPI``) on every backend: the fixture tree
imports, exports byte for byte and re-imports writing nothing; every write checks its
layer's budget (nothing stored when over); each operation's round trips are counted."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from acmi_core import Acmi
from acmi_core.base.errors import AcmiValidationError, Conflict, NotFound
from acmi_core.memory import read_tree, render_tree
from acmi_core.memory.layers import MemorySnapshot
from acmi_core.memory.service import MemoryAPI, MemoryOverBudget
from acmi_core.store.counting import CountingStore
from tests.kit import FakeClock

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
OWNER = "agent:atlas"
# the fixture's last day, 15:00 UTC (16:00 in its zone, heartbeat-state's Europe/Berlin)
NOW = int(dt.datetime(2026, 2, 3, 15, 0, tzinfo=dt.UTC).timestamp()) * 1000


@pytest.fixture
def counted(acmi: Acmi) -> tuple[MemoryAPI, CountingStore, Acmi]:
    """A MemoryAPI on a counting view of ``acmi``'s store, a tenant of its own, at NOW."""
    import uuid

    store = CountingStore(acmi.store)
    view = Acmi(store, acmi.settings, tenant=f"t-{uuid.uuid4().hex[:12]}", clock=FakeClock(NOW))
    return MemoryAPI(view.context), store, view


def trips(store: CountingStore, call: Any) -> tuple[Any, int]:
    store.reset()
    result = call()
    return result, store.requests


@pytest.fixture
def imported(
    counted: tuple[MemoryAPI, CountingStore, Acmi],
) -> tuple[MemoryAPI, CountingStore, Acmi]:
    memory, _, _ = counted
    memory.import_snapshot(OWNER, read_tree(FIXTURE))
    return counted


def test_import_export_round_trip_and_idempotent_reimport(
    counted: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    memory, store, acmi = counted
    snapshot = read_tree(FIXTURE)
    progress: list[tuple[int, int]] = []
    result, n = trips(
        store,
        lambda: memory.import_snapshot(
            OWNER, snapshot, progress=lambda d, t: progress.append((d, t))
        ),
    )
    # the memory slots + archives, topics, the days' events, then the writes: five
    # scripts, the tree (with its lines' vectors, the topics' too) being more than three
    # scripts' IMPORT_CHUNK_BYTES of work once a file is kept whole in one script, and
    # the days' events more than one script's IMPORT_CHUNK_ARGS (in one, 6,361
    # arguments: over a request's 3,999)
    assert n == 3 + 5
    assert result["events_added"] == 376 and result["topics_written"] == 4
    assert result["archives_written"] == 1
    assert [r["path"] for r in result["over_budget"]] == ["memory/2026-01-21.md"]  # reported
    assert progress[0] == (0, result["writes"]) and len(progress) == 6  # start + 5 scripts
    assert progress[-1] == (result["writes"], result["writes"])
    assert len(result["files_written"]) == result["files"]

    back, n = trips(store, lambda: memory.export_snapshot(OWNER))
    assert n == 3  # one pipeline, the topics, one timeline page
    assert render_tree(back) == render_tree(snapshot)  # byte for byte

    again, n = trips(store, lambda: memory.import_snapshot(OWNER, back))
    assert n == 3 and again["writes"] == 0  # reads only: nothing new
    assert again["events_unchanged"] == 376
    assert render_tree(memory.export_snapshot(OWNER)) == render_tree(snapshot)
    assert acmi.timeline.size(OWNER) == 376


def test_reimport_of_an_edited_tree_replaces_its_days(
    imported: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    memory, _, acmi = imported
    files = render_tree(read_tree(FIXTURE))
    day = "memory/2026-02-03.md"
    text = files[day].decode()
    edited = text.replace("Still no Snowflake role from Hannah", "Hannah sent the Snowflake role")
    assert edited != text
    files[day] = (edited + "- [ ] one more thing\n").encode()
    from acmi_core.memory.tree import parse_tree

    result = memory.import_snapshot(OWNER, parse_tree(files))
    assert result["events_removed"] >= 2 and result["events_added"] >= 2  # the line, the header
    assert render_tree(memory.export_snapshot(OWNER))[day] == files[day]
    assert acmi.timeline.size(OWNER) == 377


def test_strict_import_refuses_a_file_over_budget_and_stores_nothing(
    counted: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    memory, _, acmi = counted
    with pytest.raises(MemoryOverBudget) as caught:
        memory.import_snapshot(OWNER, read_tree(FIXTURE), strict=True)
    assert caught.value.field == "files.memory/2026-01-21.md"
    assert caught.value.rule == "memory_budget"
    assert "Summarize, stop transcribing" in caught.value.message
    assert acmi.timeline.size(OWNER) == 0 and acmi.signals.all(OWNER) == {}


def test_status_reports_every_layer_with_the_seeds_fix(
    imported: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    memory, store, _ = imported
    status, n = trips(store, lambda: memory.status(OWNER))
    assert n == 2
    assert status["today"] == "2026-02-03"
    assert status["layers"]["daily"]["verdict"] == "over"
    assert status["layers"]["daily"]["over"] == ["memory/2026-01-21.md"]
    assert status["layers"]["daily"]["fix"] == "Summarize, stop transcribing"
    assert status["layers"]["hot"]["verdict"] == "ok" and status["layers"]["topic"]["files"] == 4
    assert status["timeline_events"] == 376
    assert status["staleness"]["last_memory_review"]["date"] is not None
    assert set(status["next_maintenance"]) == {
        "weekly_review",
        "monthly_audit",
        "quarterly_archive",
    }


def test_remember_is_write_ahead_and_budgeted_on_every_layer(
    imported: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    memory, store, acmi = imported
    stored, n = trips(store, lambda: memory.remember(OWNER, "Prefers Slack over email"))
    assert n == 2 and stored["layer"] == "warm" and stored["section"] == "lessons"
    assert (
        "- Prefers Slack over email"
        in render_tree(memory.export_snapshot(OWNER))["MEMORY.md"].decode()
    )

    _, n = trips(store, lambda: memory.remember(OWNER, "Lesson: ask IT early", layer="daily"))
    assert n == 2
    today = memory.daily_summary(OWNER)
    assert "[16:00] Lesson: ask IT early" in today["entries"]
    assert today["lessons"] == ["Lesson: ask IT early"]

    _, n = trips(store, lambda: memory.remember(OWNER, "Review the PR", layer="hot"))
    assert n == 2
    assert "- [ ] Review the PR" in memory.active(OWNER)["text"]

    _, n = trips(
        store, lambda: memory.remember(OWNER, "SLA is 99.9%", layer="topic", topic="client-acme")
    )
    assert n == 2
    assert (
        "- SLA is 99.9%"
        in render_tree(memory.export_snapshot(OWNER))["memory/topics/client-acme.md"].decode()
    )

    # over budget: hot is 50 lines; nothing stored, the error names layer, limit, fix
    before = MemoryAPI(acmi.context).load(OWNER, events=False, topics=False).memory
    with pytest.raises(MemoryOverBudget) as caught:
        for n in range(60):
            memory.remember(OWNER, f"task {n}", layer="hot")
    error = caught.value
    assert error.field == "text" and error.rule == "memory_budget"
    assert "hot layer" in error.message and "50 lines / 2048 bytes" in error.message
    assert "Move items to daily notes" in error.message
    after = MemoryAPI(acmi.context).load(OWNER, events=False, topics=False).memory
    assert acmi.signals.all(OWNER) == {}  # memory has its own slots
    assert len(after["hot.in_progress"]) < 60 and after != before  # some fitted, the rest not

    with pytest.raises(AcmiValidationError) as bad:
        memory.remember(OWNER, "x", layer="cold")
    assert (bad.value.field, bad.value.rule) == ("layer", "memory_layer")
    with pytest.raises(AcmiValidationError) as bad:
        memory.remember(OWNER, "two\nlines")
    assert (bad.value.field, bad.value.rule) == ("text", "one_line")
    with pytest.raises(NotFound):
        memory.remember(OWNER, "x", layer="topic", topic="nope")


def test_active_set_get_and_budget(counted: tuple[MemoryAPI, CountingStore, Acmi]) -> None:
    memory, store, _ = counted
    text = (FIXTURE / "ACTIVE-CONTEXT.md").read_text()
    _, n = trips(store, lambda: memory.set_active(OWNER, text))
    assert n == 1
    shown, n = trips(store, lambda: memory.active(OWNER))
    assert n == 1 and shown["text"] == text
    huge = text + "".join(f"- line {i}\n" for i in range(60))
    with pytest.raises(MemoryOverBudget):
        memory.set_active(OWNER, huge)
    assert memory.active(OWNER)["text"] == text  # unchanged


def test_topic_create_links_and_refuses_twice(
    counted: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    memory, store, acmi = counted
    made, n = trips(store, lambda: memory.topic_create(OWNER, "vendor-x", "Vendor X"))
    assert n == 2 and made["created"] and made["path"] == "memory/topics/vendor-x.md"
    assert made["text"].startswith("# Vendor X\n\nCreated: 2026-02-03\n")
    assert "| Date | Decision | Reasoning | Outcome |" in made["text"]
    assert MemoryAPI(acmi.context).load(OWNER, events=False, topics=False).memory[
        "warm.topics"
    ] == ["topic:vendor-x"]
    with pytest.raises(Conflict):
        memory.topic_create(OWNER, "vendor-x", "Vendor X")
    with pytest.raises(AcmiValidationError) as bad:
        memory.topic_create(OWNER, "no spaces", "x")
    assert (bad.value.field, bad.value.rule) == ("slug", "topic_slug")
    snapshot = memory.export_snapshot(OWNER)
    assert [t.slug for t in snapshot.topics] == ["vendor-x"]


def test_prune_moves_done_items_to_today_idempotently(
    imported: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    memory, store, _ = imported
    pruned, n = trips(store, lambda: memory.prune(OWNER))
    # the move (2), then the vector prune: the index's token and the pass, the lines (a
    # pipeline and the topic profiles), one mark script, one sweep script (it deletes)
    assert n == 2 + 5, pruned.get("vectors")
    assert pruned["moved"] == [
        {"section": "in_progress", "item": "January KPI pack for Acme — sent 2026-02-02 09:00"}
    ]
    assert "[x] January KPI" not in memory.active(OWNER)["text"]
    assert (
        "[16:00] Done: January KPI pack for Acme — sent 2026-02-02 09:00"
        in (memory.daily_summary(OWNER)["entries"])
    )
    again, n = trips(store, lambda: memory.prune(OWNER))
    vectors = again.pop("vectors")
    assert again == {"entity": OWNER, "moved": [], "written": False}
    # nothing stale any more: the sweep script deletes nothing (the same 5 round trips)
    assert vectors["dropped"] == 0 and vectors["chunks"] == 1 and n == 1 + 5


def test_handoff_is_taken_once(counted: tuple[MemoryAPI, CountingStore, Acmi]) -> None:
    memory, store, _ = counted
    _, n = trips(store, lambda: memory.handoff(OWNER, "Done: X\nNext: Y"))
    assert n == 1
    assert memory.status(OWNER)["handoff_pending"] is True
    taken, n = trips(store, lambda: memory.take_handoff(OWNER))
    assert n == 1 and taken == {"text": "Done: X\nNext: Y", "ts": NOW}
    assert memory.take_handoff(OWNER) is None
    with pytest.raises(AcmiValidationError) as bad:
        memory.handoff(OWNER, "x" * 20_000)
    assert bad.value.rule == "max_bytes"


def test_review_promotes_once_and_prunes(imported: tuple[MemoryAPI, CountingStore, Acmi]) -> None:
    memory, store, acmi = imported
    review, n = trips(store, lambda: memory.review(OWNER, NOW))
    assert n == 2 and review["written"]
    assert "2026-01-29 — Slack DMs reach Hannah faster than email" in review["promoted"]
    assert any(p.startswith("2026-02-03 — Decision: keep Airflow") for p in review["promoted"])
    assert len(review["moved"]) == 1
    memory_md = render_tree(memory.export_snapshot(OWNER))["MEMORY.md"].decode()
    assert "- 2026-01-29 — Slack DMs reach Hannah faster than email" in memory_md
    signals = MemoryAPI(acmi.context).load(OWNER, events=False, topics=False).memory
    assert signals["heartbeat.last_memory_review"] == "2026-02-03"
    assert signals["heartbeat.next_scheduled"]["weekly_review"] == "2026-02-10"
    again, n = trips(store, lambda: memory.review(OWNER, NOW))
    assert n == 1 and not again["written"] and again["promoted"] == []


def test_search_runs_fast_to_slow_and_ranks_full_matches_first(
    imported: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    memory, store, _ = imported
    found, n = trips(store, lambda: memory.search(OWNER, "snowflake role", mode="keyword"))
    assert n == 2
    hits = found["hits"]
    assert hits and all(h["score"] == 1.0 for h in hits[:3])
    order = found["order"]
    full = [h for h in hits if h["score"] == 1.0]
    ranks = [order.index(h["layer"]) for h in full]
    assert ranks == sorted(ranks)  # hot before warm before today ... before the archive
    assert full[0]["layer"] == "hot"
    archived = memory.search(OWNER, "Q4", limit=200, mode="keyword")["hits"]
    assert any(h["layer"] == "cold" for h in archived)
    with pytest.raises(AcmiValidationError) as bad:
        memory.search(OWNER, "  ")
    assert bad.value.field == "query"


def test_debug_names_missing_pieces_conflicts_and_stale_items(
    counted: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    memory, store, _ = counted
    empty, n = trips(store, lambda: memory.debug(OWNER))
    assert n == 1 and not empty["ok"]  # no topics linked: no second read
    assert {m["piece"] for m in empty["missing"]} >= {"ACTIVE-CONTEXT.md", "MEMORY.md"}
    files = render_tree(read_tree(FIXTURE))
    memory_md = (
        files["MEMORY.md"]
        .decode()
        .replace("### Acme Logistics retainer\n", "### Acme Logistics retainer\n- Status: done\n")
    )
    active = (
        files["ACTIVE-CONTEXT.md"]
        .decode()
        .replace("## In Progress\n", "## In Progress\n- [ ] Acme Logistics retainer: weekly pack\n")
    )
    from acmi_core.memory.tree import parse_tree

    tree = parse_tree({"MEMORY.md": memory_md.encode(), "ACTIVE-CONTEXT.md": active.encode()})
    assert isinstance(tree, MemorySnapshot)
    memory.import_snapshot(OWNER, tree)
    report = memory.debug(OWNER)
    (conflict,) = report["conflicts"]
    assert conflict["about"] == "Acme Logistics retainer" and conflict["wins"] == "hot"
    assert any(s["why"] == "completed" for s in report["stale"])


def test_lines_written_through_the_api_survive_export_and_reimport(
    imported: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    memory, _, acmi = imported
    memory.remember(OWNER, "Lesson: pin versions", layer="daily")
    memory.remember(OWNER, "Coffee with Priya", layer="daily", section="morning")
    exported = memory.export_snapshot(OWNER)
    note = render_tree(exported)["memory/2026-02-03.md"].decode()
    assert "- [16:00] Coffee with Priya\n\n## Afternoon" in note  # at the end of its section
    size = acmi.timeline.size(OWNER)
    result = memory.import_snapshot(OWNER, exported)
    assert result["events_added"] == result["events_removed"]  # lines renumbered, none doubled
    assert acmi.timeline.size(OWNER) == size
    assert render_tree(memory.export_snapshot(OWNER)) == render_tree(exported)
    assert memory.import_snapshot(OWNER, memory.export_snapshot(OWNER))["writes"] == 0


def test_review_promotes_a_lesson_written_on_several_lines_as_one_bullet(
    imported: tuple[MemoryAPI, CountingStore, Acmi],
) -> None:
    """A lesson any sender appended (its text with newlines) becomes one bullet: a bullet
    of MEMORY.md is one line."""
    memory, _, acmi = imported
    acmi.timeline.append(
        OWNER,
        {
            "ts": NOW - 3_600_000,
            "source": "agent:atlas",
            "kind": "lesson",
            "correlationId": "lesson-multiline",
            "summary": "Retry budgets",
            "payload": {"text": "Retry budgets belong\nin the client,\n  not the queue"},
        },
    )
    review = memory.review(OWNER, NOW)
    assert "2026-02-03 — Retry budgets belong in the client, not the queue" in review["promoted"]
    memory_md = render_tree(memory.export_snapshot(OWNER))["MEMORY.md"].decode()
    assert "- 2026-02-03 — Retry budgets belong in the client, not the queue\n" in memory_md

"""The seed's templates as typed files, read from the fixture tree (acmi_core.memory.layers)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from acmi_core.memory import MemoryFormatError, MemorySnapshot, read_tree
from acmi_core.memory.layers import (
    ACTIVE_CONTEXT,
    ARCHIVE,
    DAILY_NOTE,
    LONG_TERM_MEMORY,
    PRIVATE_SECTIONS,
    SCOPES,
    TOPIC,
    ActiveContext,
    Decision,
    HeartbeatState,
    LongTermMemory,
    Project,
    Quarter,
    TopicFile,
    heartbeat_json,
)
from acmi_core.memory.markdown import Entry, Task
from acmi_core.memory.tree import render_tree

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
# in MEMORY.md only: never in a group session's view
PRIVATE_FACT = "her father is in hospice care in Chennai"


@pytest.fixture(scope="module")
def snapshot() -> MemorySnapshot:
    return read_tree(FIXTURE)


def test_templates_use_the_seeds_exact_headings() -> None:
    # copied from seed 002's templates, in its order
    assert [s.heading for s in ACTIVE_CONTEXT.sections] == [
        "🔥 Current Priority",
        "In Progress",
        "Waiting On",
        "Key Decisions Made Today",
        "Context for Next Session",
    ]
    assert ACTIVE_CONTEXT.title == "ACTIVE-CONTEXT.md — What's Hot"
    assert [s.heading for s in LONG_TERM_MEMORY.sections] == [
        "About [Human]",
        "About Me [Agent]",
        "Active Projects",
        "Key People",
        "Lessons Learned",
        "Preferences & Patterns",
        "Important Dates",
    ]
    assert [s.heading for s in DAILY_NOTE.sections] == [
        "Morning",
        "Afternoon",
        "Key Takeaways",
        "Tomorrow",
    ]
    assert [s.heading for s in TOPIC.sections] == [
        "Summary",
        "Key Facts",
        "Decision Log",
        "Open Questions",
        "Related",
    ]
    assert TOPIC.by_key("decision_log").frame == (
        "| Date | Decision | Reasoning | Outcome |",
        "|------|----------|-----------|---------|",
    )
    assert [s.heading for s in ARCHIVE.sections] == [
        "Summary",
        "Major Events",
        "Projects",
        "Metrics",
        "Lessons Carried Forward",
    ]


def test_placeholder_headings_match_real_ones() -> None:
    about_human = LONG_TERM_MEMORY.by_key("about_human")
    about_agent = LONG_TERM_MEMORY.by_key("about_agent")
    assert about_human.matches("About Priya") and about_human.matches("About [Human]")
    assert not about_human.matches("About Me (Atlas)")
    assert about_agent.matches("About Me (Atlas)") and about_agent.matches("About Me [Agent]")
    assert ACTIVE_CONTEXT.by_key("current_priority").matches("Current Priority")


def test_warm_memory_is_private_and_nothing_else_is() -> None:
    assert PRIVATE_SECTIONS["warm"] == {s.key for s in LONG_TERM_MEMORY.sections}
    assert all(not PRIVATE_SECTIONS[layer] for layer in ("hot", "daily", "topic", "cold"))


def test_active_context(snapshot: MemorySnapshot) -> None:
    active = snapshot.active_context
    assert isinstance(active, ActiveContext)
    assert active.last_updated == "2026-02-03 17:40 CET"
    assert active.current_priority.startswith("Get the Snowflake service role")
    assert [t.done for t in active.in_progress] == [False, False, True]
    assert active.waiting_on[0].startswith("Waiting for Hannah Berg")
    assert active.decisions_today[0].endswith("reversible: yes")
    assert "escalate through Marco" in active.next_session


def test_long_term_memory(snapshot: MemorySnapshot) -> None:
    memory = snapshot.memory
    assert isinstance(memory, LongTermMemory)
    assert memory.human == "Priya"
    assert [p.name for p in memory.projects] == [
        "Acme Logistics retainer",
        "Pipeline migration (Airflow → Dagster)",
        "Analyst hire",
    ]
    assert memory.projects[2] == Project(
        "Analyst hire",
        (
            "Status: 3 candidates in final round, offer target 2026-02-06",
            "Topic file: memory/topics/hiring-analyst.md",
        ),
    )
    assert len(memory.people) == 4
    assert memory.lessons[0].startswith("2025-11-12 — ")
    assert memory.dates[1] == "VAT return — 2026-02-10 — Lena needs receipts by 2026-02-05"
    assert any(PRIVATE_FACT in line for line in memory.texts("about_human"))


def test_daily_notes(snapshot: MemorySnapshot) -> None:
    assert len(snapshot.daily) == 24
    assert [d.date for d in snapshot.daily] == sorted(d.date for d in snapshot.daily)
    note = snapshot.day(dt.date(2026, 2, 3))
    assert note is not None
    assert note.entries[0] == (
        "Morning",
        Entry("08:20", "Started session, reviewed ACTIVE-CONTEXT"),
    )
    assert ("Evening", Entry("21:05", note.entries[-1][1].text)) == note.entries[-1]
    assert note.takeaways == (
        "Running old and new pipelines in parallel costs €40 and buys a safe close",
    )
    assert note.tomorrow == (
        Task("Reference call with Jonas at 10:00"),
        Task("Reference call with Aiko at 14:00"),
    )
    saturday = snapshot.day(dt.date(2026, 1, 31))
    assert saturday is not None and saturday.takeaways == () and saturday.tomorrow == ()


def test_topics(snapshot: MemorySnapshot) -> None:
    assert [t.slug for t in snapshot.topics] == [
        "client-acme",
        "hiring-analyst",
        "pipeline-migration",
        "tech-stack",
    ]
    topic = snapshot.topic("pipeline-migration")
    assert isinstance(topic, TopicFile)
    assert topic.name == "Pipeline migration: Airflow → Dagster"
    assert (topic.created, topic.last_updated) == ("2026-01-06", "2026-02-03")
    assert topic.decisions[0] == Decision(
        "2026-01-06",
        "Dagster Cloud (serverless) over self-hosted Dagster",
        "No VM to babysit; cost €110/month at our volume",
        "Trial started 2026-01-07",
    )
    assert len(topic.decisions) == 4
    assert topic.related == ("memory/topics/client-acme.md", "memory/topics/tech-stack.md")
    assert topic.open_questions[0].startswith("Does the Dagster Cloud trial")


def test_archive(snapshot: MemorySnapshot) -> None:
    (archive,) = snapshot.archives
    assert archive.quarter == Quarter(2025, 4)
    assert archive.doc.title == "Q4 2025 Archive"
    assert [p.name for p in archive.projects] == [
        "Acme Logistics audit",
        "Baltic Retail demand forecast",
    ]
    assert archive.metrics[0] == "Revenue: €61,200"
    assert len(archive.lessons) == 3
    assert Quarter.of(dt.date(2026, 2, 3)) == Quarter(2026, 1)


def test_heartbeat(snapshot: MemorySnapshot) -> None:
    heartbeat = snapshot.heartbeat
    assert heartbeat is not None
    assert heartbeat.text is None  # written as heartbeat_json writes it
    assert heartbeat.date("last_memory_review") == dt.date(2026, 2, 1)
    assert heartbeat.next_scheduled("quarterly_archive") == dt.date(2026, 3, 31)
    assert snapshot.timezone == "Europe/Berlin"


def test_heartbeat_in_another_layout_round_trips_but_stores_values() -> None:
    text = json.dumps({"daily_notes_count": 3, "last_archive": "2025-12-31"}, indent=4)
    state = HeartbeatState.parse(text)
    assert state.render() == text
    assert state == HeartbeatState({"daily_notes_count": 3, "last_archive": "2025-12-31"})
    assert heartbeat_json(state.data).startswith('{\n  "last_archive": "2025-12-31",')


@pytest.mark.parametrize(
    ("text", "field", "rule"),
    [
        (
            '{"last_archive": "2025-12-31",\n "daily_notes_count": 3,,}',
            "memory/heartbeat-state.json:2",
            "json",
        ),
        ("[1, 2]", "memory/heartbeat-state.json:1", "object"),
        ('{"last_archive": "31.12.2025"}', "memory/heartbeat-state.json", "date"),
        ('{"daily_notes_count": "12"}', "memory/heartbeat-state.json", "count"),
        ('{"daily_notes_count": true}', "memory/heartbeat-state.json", "count"),
        ('{"next_scheduled": {"weekly_review": "soon"}}', "memory/heartbeat-state.json", "date"),
        ('{"timezone": 1}', "memory/heartbeat-state.json", "timezone"),
    ],
)
def test_a_malformed_heartbeat_names_file_line_and_rule(text: str, field: str, rule: str) -> None:
    with pytest.raises(MemoryFormatError) as err:
        HeartbeatState.parse(text)
    assert (err.value.field, err.value.rule) == (field, rule)


def test_a_topic_date_that_is_no_date_names_its_line() -> None:
    text = "# T\n\nCreated: 2026-01-06\nLast updated: last week\n\n## Summary\nx\n"
    with pytest.raises(MemoryFormatError) as err:
        TopicFile.parse(text, "t")
    assert (err.value.field, err.value.rule) == ("memory/topics/t.md:4", "date")


def test_scopes_follow_the_seed(snapshot: MemorySnapshot) -> None:
    assert SCOPES["group"] == ("hot", "today")
    today = dt.date(2026, 2, 3)
    main = snapshot.for_scope("main", today=today)
    group = snapshot.for_scope("group", today=today)
    sub = snapshot.for_scope("subagent", today=today, topic="client-acme")
    assert main.memory is not None and [d.date for d in main.daily] == [today]
    assert main.topics == () and main.archives == ()  # level 3: on demand only
    assert group.memory is None and group.active_context is not None
    assert [d.date for d in group.daily] == [today]
    assert sub.memory is None and sub.daily == ()
    assert [t.slug for t in sub.topics] == ["client-acme"]
    main_text = b"".join(render_tree(main).values()).decode()
    group_text = b"".join(render_tree(group).values()).decode()
    assert PRIVATE_FACT in main_text
    assert PRIVATE_FACT not in group_text

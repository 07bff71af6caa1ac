"""Memory files <-> ACMI slots (acmi_core.memory.slots): every mapping is lossless."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import (
    MAX_SUMMARY_LEN,
    Event,
    check_json_object,
    check_signal_key,
    parse_event,
    utf16_len,
)
from acmi_core.memory import MemorySnapshot, read_tree, render_tree
from acmi_core.memory.layers import (
    ActiveContext,
    ArchiveFile,
    DailyNote,
    LongTermMemory,
    Quarter,
    TopicFile,
)
from acmi_core.memory.slots import (
    SlotImage,
    archive_from_document,
    archive_to_document,
    daily_from_events,
    daily_to_events,
    entry_event,
    from_profile,
    from_signals,
    heartbeat_from_signals,
    heartbeat_to_signals,
    is_private,
    new_topic,
    snapshot_from_slots,
    snapshot_to_slots,
    stamp_ms,
    to_profile_sections,
    to_signals,
    topic_entity,
    topic_from_profile,
    topic_to_profile,
    zone,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
BERLIN = ZoneInfo("Europe/Berlin")


def stored(value: Any) -> Any:
    """``value`` as it comes back from the store: through JSON text."""
    return json.loads(json.dumps(value, ensure_ascii=False))


@pytest.fixture(scope="module")
def snapshot() -> MemorySnapshot:
    return read_tree(FIXTURE)


def test_hot_round_trips_through_signals(snapshot: MemorySnapshot) -> None:
    active = snapshot.active_context
    assert active is not None
    signals = to_signals(active)
    assert "hot.layout" not in signals  # the fixture is laid out as the seed's template
    assert signals["hot.current_priority"] == active.current_priority
    assert signals["hot.in_progress"][2] == {
        "task": "January KPI pack for Acme — sent 2026-02-02 09:00",
        "done": True,
    }
    other = {"last_heartbeat_ts": 1, "status": "working"}  # not memory: ignored
    assert from_signals(stored({**other, **signals})) == active


def test_warm_round_trips_through_the_profile(snapshot: MemorySnapshot) -> None:
    memory = snapshot.memory
    assert memory is not None
    fields = to_profile_sections(memory)
    assert all(is_private(key) for key in fields)
    assert fields["warm.projects"]["subsections"][1]["title"] == (
        "Pipeline migration (Airflow → Dagster)"
    )
    profile = {"actor_type": "agent", "tenant_id": "default", **fields}
    assert from_profile(stored(profile)) == memory


def test_topics_round_trip_through_their_entities(snapshot: MemorySnapshot) -> None:
    for topic in snapshot.topics:
        profile = topic_to_profile(topic)
        assert "topic.layout" not in profile
        assert topic_from_profile(topic.slug, stored(profile)) == topic
    acme = topic_to_profile(snapshot.topics[0])
    assert (
        acme["topic.decision_log"][0]["decision"] == "Weekly PDF pack instead of a live dashboard"
    )
    assert str(topic_entity("client-acme")) == "topic:client-acme"


def test_archives_round_trip_as_documents(snapshot: MemorySnapshot) -> None:
    for archive in snapshot.archives:
        doc = archive_to_document(archive)
        assert archive_from_document(archive.quarter, stored(doc)) == archive


def test_heartbeat_round_trips_through_signals(snapshot: MemorySnapshot) -> None:
    assert snapshot.heartbeat is not None
    signals = heartbeat_to_signals(snapshot.heartbeat)
    assert signals["heartbeat.next_scheduled"]["weekly_review"] == "2026-02-08"
    assert heartbeat_from_signals(stored(signals)) == snapshot.heartbeat


def test_daily_notes_round_trip_through_events(snapshot: MemorySnapshot) -> None:
    for note in snapshot.daily:
        events = daily_to_events(note, source="agent:atlas", tz=BERLIN)
        back = [Event.model_validate(stored(e.to_dict())) for e in events]
        assert daily_from_events(reversed(back), tz=BERLIN) == [note]


def test_daily_event_timestamps_are_the_stamps_in_the_trees_zone(
    snapshot: MemorySnapshot,
) -> None:
    note = snapshot.day(dt.date(2026, 1, 5))
    assert note is not None
    header, first, *rest = daily_to_events(note, source="agent:atlas", tz=BERLIN)
    # 08:15 in Berlin (UTC+1 in January) is 07:15 UTC
    assert first.ts == int(dt.datetime(2026, 1, 5, 7, 15, tzinfo=dt.UTC).timestamp() * 1000)
    assert header.ts == int(dt.datetime(2026, 1, 4, 23, 0, tzinfo=dt.UTC).timestamp() * 1000)
    assert header.kind == "daily-note"
    # a line without a stamp takes the stamp above it
    takeaway = next(e for e in rest if e.kind == "takeaway")
    assert takeaway.ts == stamp_ms(dt.date(2026, 1, 5), 15 * 60 + 45, BERLIN)
    assert [e.kind for e in rest].count("decision") == 1
    assert [e.kind for e in rest].count("todo") == 2


def test_event_ids_are_deterministic_and_unique(snapshot: MemorySnapshot) -> None:
    image = snapshot_to_slots(snapshot, source="agent:atlas")
    again = snapshot_to_slots(read_tree(FIXTURE), source="agent:atlas")
    assert [e.to_json() for e in image.events] == [e.to_json() for e in again.events]
    ids = [e.correlationId for e in image.events]
    assert len(ids) == len(set(ids))


def test_every_slot_value_is_valid_acmi(snapshot: MemorySnapshot) -> None:
    image = snapshot_to_slots(snapshot, source="agent:atlas")
    check_json_object(image.signals, "signals")
    for key in image.signals:
        check_signal_key(key)
    check_json_object(image.profile, "profile")
    for doc in (*image.topics.values(), *image.archives.values()):
        check_json_object(doc, "profile")
    for event in image.events:
        parse_event(event.to_dict(), now_ms=0, tenant="default")


def test_the_whole_snapshot_round_trips_through_the_slots(snapshot: MemorySnapshot) -> None:
    image = snapshot_to_slots(snapshot, source="agent:atlas")
    assert image.profile["warm.topics"] == [f"topic:{t.slug}" for t in snapshot.topics]
    back = SlotImage(
        signals=stored(image.signals),
        profile=stored(image.profile),
        events=[Event.model_validate(stored(e.to_dict())) for e in image.events],
        topics=stored(image.topics),
        archives=stored(image.archives),
    )
    assert snapshot_from_slots(back) == snapshot
    assert render_tree(snapshot_from_slots(back)) == render_tree(snapshot)


def test_values_set_through_the_api_render_as_the_seeds_template() -> None:
    active = from_signals(
        {
            "hot.updated": "2026-01-15 14:30 GMT",
            "hot.in_progress": [{"task": "Task A — status, next step", "done": False}],
            "hot.current_priority": "Ship the import",
            "status": "idle",
        }
    )
    assert active is not None
    assert active.render() == (
        "# ACTIVE-CONTEXT.md — What's Hot\n"
        "\n"
        "Last updated: 2026-01-15 14:30 GMT\n"
        "\n"
        "## 🔥 Current Priority\n"
        "Ship the import\n"
        "\n"
        "## In Progress\n"
        "- [ ] Task A — status, next step\n"
    )
    assert from_signals({"status": "idle"}) is None
    topic = topic_from_profile(
        "alpha",
        {
            "topic.title": "Project Alpha",
            "topic.created": "2026-01-02",
            "topic.decision_log": [
                {"date": "2026-01-03", "decision": "Go", "reasoning": "Why not", "outcome": "Went"}
            ],
        },
    )
    assert topic is not None
    assert topic.render() == (
        "# Project Alpha\n\nCreated: 2026-01-02\n\n## Decision Log\n"
        "| Date | Decision | Reasoning | Outcome |\n"
        "|------|----------|-----------|---------|\n"
        "| 2026-01-03 | Go | Why not | Went |\n"
    )


def test_a_field_changed_through_the_api_keeps_the_files_layout(
    snapshot: MemorySnapshot,
) -> None:
    memory = snapshot.memory
    assert memory is not None
    profile = to_profile_sections(memory)
    assert "warm.layout" in profile  # "## About Priya" is not the template's placeholder
    profile["warm.lessons"] = [*profile["warm.lessons"], "2026-02-03 — a new lesson → noted"]
    del profile["warm.dates"]
    text = from_profile(profile).render()  # type: ignore[union-attr]
    assert "## About Priya\n" in text
    assert "- 2026-02-03 — a new lesson → noted\n\n## Preferences & Patterns" in text
    assert "VAT return" not in text and text.endswith("## Important Dates\n")
    # a section the layout has no place for is appended as the template writes it
    active = snapshot.active_context
    assert active is not None
    signals = {**to_signals(active), "hot.layout": {"lines": ["# ACTIVE-CONTEXT.md — What's Hot"]}}
    rebuilt = from_signals(signals)
    assert rebuilt is not None
    assert rebuilt.render().endswith(f"\n\n## Context for Next Session\n{active.next_session}\n")
    assert rebuilt.render().startswith(
        "# ACTIVE-CONTEXT.md — What's Hot\n\nLast updated: 2026-02-03 17:40 CET\n\n## 🔥 Current"
    )


@pytest.mark.parametrize(
    ("signals", "field"),
    [
        ({"hot.in_progress": [5]}, "signals.hot.in_progress[0]"),
        ({"hot.in_progress": [{"task": "a"}]}, "signals.hot.in_progress[0]"),
        ({"hot.waiting_on": ["two\nlines"]}, "signals.hot.waiting_on[0]"),
        ({"hot.next_session": "fine\n## Injected heading"}, "signals.hot.next_session"),
        ({"hot.current_priority": 42}, "signals.hot.current_priority"),
        ({"hot.updated": ["x"]}, "signals.hot.updated"),
        ({"hot.layout": ["x"]}, "signals.hot.layout"),
        ({"hot.layout": {"lines": [7]}}, "signals.hot.layout.lines[0]"),
        ({"hot.layout": {"lines": [{"section": ["x"]}]}}, "signals.hot.layout.lines[0]"),
        (
            {"hot.layout": {"lines": [{"field": "waiting_on"}]}, "hot.waiting_on": []},
            "signals.hot.layout.lines[0]",
        ),
    ],
)
def test_a_bad_stored_value_names_its_key(signals: dict[str, Any], field: str) -> None:
    with pytest.raises(AcmiValidationError) as err:
        from_signals(signals)
    assert err.value.field == field
    assert err.value.rule == "memory_section"


def test_an_entry_written_through_the_api_joins_its_day() -> None:
    note = DailyNote.parse(
        "# 2026-01-15 — Daily Notes\n\n## Morning\n- [08:15] Started session\n\n"
        "## Key Takeaways\n- One\n",
        dt.date(2026, 1, 15),
    )
    events = daily_to_events(note, source="agent:atlas")
    later = entry_event(dt.date(2026, 1, 15), "14:05", "Call with Marco", source="agent:atlas")
    early = entry_event(dt.date(2026, 1, 15), "09:10", "Sent the pack", source="agent:atlas")
    (rebuilt,) = daily_from_events([*events, later, early])
    assert rebuilt.render() == (
        "# 2026-01-15 — Daily Notes\n\n## Morning\n- [08:15] Started session\n"
        "- [09:10] Sent the pack\n\n## Key Takeaways\n- One\n\n## Afternoon\n"
        "- [14:05] Call with Marco\n"
    )
    # importing that rendering gives the API's events the same ids: an import skips them
    reimported = {e.correlationId for e in daily_to_events(rebuilt, source="agent:atlas")}
    assert {later.correlationId, early.correlationId} <= reimported
    with pytest.raises(AcmiValidationError) as err:
        entry_event(dt.date(2026, 1, 15), "24:00", "x", source="agent:atlas")
    assert (err.value.field, err.value.rule) == ("at", "entry_time")


def test_other_timeline_events_become_entries_only_when_asked() -> None:
    ts = int(dt.datetime(2026, 1, 15, 13, 5, tzinfo=dt.UTC).timestamp() * 1000)
    foreign = Event(
        ts=ts, source="gmail", kind="email", correlationId="m-1", summary="Invoice from Lena"
    )
    assert daily_from_events([foreign], tz=BERLIN) == []
    (note,) = daily_from_events([foreign], tz=BERLIN, include_foreign=True)
    assert note.date == dt.date(2026, 1, 15)
    assert note.render() == (
        "# 2026-01-15 — Daily Notes\n\n## Afternoon\n- [14:05] Invoice from Lena\n"
    )


def test_a_line_longer_than_a_summary_is_kept_whole() -> None:
    long = "word " * 200
    note = DailyNote.parse(f"## Morning\n- [08:00] {long}\n", dt.date(2026, 1, 15))
    _, event = daily_to_events(note, source="agent:atlas")
    assert utf16_len(event.summary) <= MAX_SUMMARY_LEN and event.summary.endswith("…")
    assert event.payload["text"] == long
    assert daily_from_events([*daily_to_events(note, source="agent:atlas")]) == [note]


def test_zone_names_are_checked() -> None:
    assert zone("UTC") is dt.UTC
    with pytest.raises(AcmiValidationError) as err:
        zone("Mars/Olympus")
    assert (err.value.field, err.value.rule) == ("timezone", "timezone")


# --- generated files ------------------------------------------------------------------------

PIECES = st.sampled_from(
    [
        "## 🔥 Current Priority",
        "## In Progress",
        "## Waiting On",
        "## About Kalin",
        "## About Me",
        "## Active Projects",
        "### Alpha",
        "## Morning",
        "## Afternoon",
        "## Key Takeaways",
        "## Summary",
        "## Decision Log",
        "| Date | Decision | Reasoning | Outcome |",
        "|------|----------|-----------|---------|",
        "| 2026-01-03 | Go | Why | Went |",
        "## Projects",
        "## Unknown section",
        "# A title",
        "Last updated: 2026-01-15",
        "Created: 2026-01-02",
        "- [08:15] entry",
        "- [ ] open task",
        "- [x] done task",
        "- bullet",
        "- ",
        "  - nested",
        "```",
        "prose line",
        "- crlf bullet\r",
        "",
    ]
)
FILE = st.lists(PIECES, max_size=30).map("\n".join) | st.lists(PIECES, max_size=30).map(
    lambda lines: "\n".join(lines) + "\n"
)


@pytest.mark.slow  # a property run: seconds
@settings(max_examples=300, deadline=None)
@given(FILE)
def test_generated_files_round_trip_through_every_mapping(text: str) -> None:
    active = ActiveContext.parse(text)
    assert active.render() == text
    assert from_signals(stored(to_signals(active))) == active
    memory = LongTermMemory.parse(text)
    assert from_profile(stored(to_profile_sections(memory))) == memory
    topic = TopicFile.parse(text, "alpha")
    assert topic_from_profile("alpha", stored(topic_to_profile(topic))) == topic
    archive = ArchiveFile.parse(text, Quarter(2025, 4))
    assert archive_from_document(archive.quarter, stored(archive_to_document(archive))) == archive
    note = DailyNote.parse(text, dt.date(2026, 1, 15))
    events = [
        Event.model_validate(stored(e.to_dict())) for e in daily_to_events(note, source="agent:a")
    ]
    assert daily_from_events(events) == [note]


def test_preamble_fields_set_through_the_api_sit_with_the_others() -> None:
    layout = {"lines": ["# T", "", {"field": "created"}, "", "## Summary", {"section": "summary"}]}
    profile = {
        "topic.created": "2026-01-01",
        "topic.updated": "2026-01-02",
        "topic.summary": "s",
        "topic.layout": layout,
    }
    topic = topic_from_profile("t", profile)
    assert topic is not None
    assert (
        topic.render() == "# T\n\nCreated: 2026-01-01\nLast updated: 2026-01-02\n\n## Summary\ns\n"
    )
    bare = topic_from_profile("t", {**profile, "topic.layout": {"lines": ["# T"]}})
    assert bare is not None
    assert bare.render() == (
        "# T\n\nCreated: 2026-01-01\nLast updated: 2026-01-02\n\n## Summary\ns\n"
    )


def test_a_new_topic_is_the_seeds_template() -> None:
    topic = new_topic("project-alpha", "Project Alpha", dt.date(2026, 2, 4))
    assert topic.render() == (
        "# Project Alpha\n\nCreated: 2026-02-04\nLast updated: 2026-02-04\n\n"
        "## Summary\n\n## Key Facts\n\n## Decision Log\n"
        "| Date | Decision | Reasoning | Outcome |\n|------|----------|-----------|---------|\n\n"
        "## Open Questions\n\n## Related\n"
    )
    assert topic.path == "memory/topics/project-alpha.md"
    assert "topic.layout" not in topic_to_profile(topic)


def test_a_day_imported_again_after_it_grew_reads_as_the_grown_note() -> None:
    day = dt.date(2026, 1, 15)
    morning = "# 2026-01-15 — Daily Notes\n\n## Morning\n- [08:15] Started session\n"
    grown = morning + "\n## Afternoon\n- [14:00] Call with Marco\n"
    first = daily_to_events(DailyNote.parse(morning, day), source="agent:atlas")
    second = daily_to_events(DailyNote.parse(grown, day), source="agent:atlas")
    assert first[0].correlationId == second[0].correlationId  # the header: replace by id
    assert first[1] == second[1]  # the morning line: the same member, stored once
    for events in ([*first, *second], [*second, *first]):
        (note,) = daily_from_events(events)
        assert note.render() == grown

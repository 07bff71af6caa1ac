"""The memory layers in the wake bundle (seed 002 §7, §8, §12; DESIGN §6), on every backend,
against the fixture tree imported through MemoryAPI: what each scope carries, level 3 on
demand, the day in the agent's zone, hot/warm conflicts, the handoff taken once, budgets
cutting memory in TRIM_ORDER, and still one round trip."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from acmi_core import Acmi
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import MEMORY_HANDOFF, MEMORY_HOT, MEMORY_STAMPS, MEMORY_WARM
from acmi_core.base.model import EntityId
from acmi_core.bootstrap.budget import CAPS, TRIM_ORDER
from acmi_core.bootstrap.bundle import TITLES
from acmi_core.memory import read_tree, render_tree
from acmi_core.memory.service import MemoryAPI
from acmi_core.memory.tree import parse_tree
from acmi_core.store.counting import CountingStore
from acmi_core.store.writes import WritePlan
from acmi_core.testing.fleet import build_agent
from tests.kit import FakeClock, RouteClient, assert_error

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
AGENT = "agent:atlas"
PRIVATE = "father is in hospice care"  # MEMORY.md's private fact (About Priya)
WARM_ONLY = "Priya Natarajan, founder of Northwind Analytics"  # in MEMORY.md only
YESTERDAY_ONLY = "Sent the January KPI pack"  # a line of 2026-02-02.md only
# the fixture's last day, 15:00 UTC = 16:00 in heartbeat-state's Europe/Berlin
NOW = int(dt.datetime(2026, 2, 3, 15, 0, tzinfo=dt.UTC).timestamp()) * 1000
SPAWN = {"session_id": "s-1", "model_id": "opus-4"}


def _file(path: str) -> str:
    return (FIXTURE / path).read_text(encoding="utf-8")


@pytest.fixture
def atlas(acmi: Acmi) -> tuple[Acmi, CountingStore, MemoryAPI]:
    """The fixture imported for agent:atlas in a tenant of its own, on a counting store,
    the clock at NOW."""
    store = CountingStore(acmi.store)
    view = Acmi(store, acmi.settings, tenant=f"t-{uuid.uuid4().hex[:12]}", clock=FakeClock(NOW))
    memory = MemoryAPI(view.context)
    memory.import_snapshot(AGENT, read_tree(FIXTURE))
    return view, store, memory


def _fenced(text: str) -> tuple[list[str], list[str]]:
    """The markdown's lines outside code fences and inside them."""
    outside: list[str] = []
    inside: list[str] = []
    fence = ""
    for line in text.splitlines():
        if not fence:
            match = re.match(r"^(`{3,})(\w*)$", line)
            if match:
                fence = match.group(1)
            else:
                outside.append(line)
        elif re.match(rf"^`{{{len(fence)},}}\s*$", line):
            fence = ""
        else:
            inside.append(line)
    assert not fence, "a fence left open"
    return outside, inside


def test_main_loads_levels_one_and_two_in_the_seeds_shapes(
    atlas: tuple[Acmi, CountingStore, MemoryAPI],
) -> None:
    acmi, _, _ = atlas
    bundle = acmi.bootstrap(AGENT)
    data = bundle.to_dict()
    sections = data["sections"]
    assert list(sections) == list(TITLES)
    # the files exactly as the tree holds them
    assert sections["hot"] == {"path": "ACTIVE-CONTEXT.md", "text": _file("ACTIVE-CONTEXT.md")}
    assert sections["warm"] == {"path": "MEMORY.md", "text": _file("MEMORY.md")}
    assert sections["today"] == {
        "path": "memory/2026-02-03.md",
        "date": "2026-02-03",
        "text": _file("memory/2026-02-03.md"),
    }
    assert PRIVATE in sections["warm"]["text"]  # main sessions load MEMORY.md
    # identity and state without the memory fields (each shown once, as its file)
    assert not any(k.startswith("warm.") for k in sections["profile"] or {})
    assert not sections["signals"]  # memory has slots of its own, heartbeat-state too
    assert data["memory"]["timezone"] == "Europe/Berlin"
    # level 3 is labelled, not loaded; older days stay out of the timeline too
    assert sections["yesterday"] is None and sections["topic"] is None
    assert sections["topics"] == [] and sections["archive"] == []
    assert data["memory"]["on_demand"] == ["topics", "yesterday", "archive", "topic"]
    assert data["memory"]["today"] == "2026-02-03"
    assert data["memory"]["timezone"] == "Europe/Berlin"
    assert sections["timeline"] == []  # every event of the fixture is a daily-note line
    assert YESTERDAY_ONLY not in bundle.text and sections["conflicts"] == []

    text = acmi.bootstrap(AGENT, format="markdown").text
    outside, inside = _fenced(text)
    assert PRIVATE in "\n".join(inside)
    # the seed's headings are there, inside the fences: stored text is data
    for heading in ("## 🔥 Current Priority", "## About Priya", "## Morning", "## Tomorrow"):
        assert heading in inside and heading not in outside
    assert "on demand: include=topics,yesterday,archive · topic=<slug>" in outside
    assert "## Yesterday's note" not in text  # named once in the header, not as a section


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_group_gets_hot_and_today_and_never_the_private_memory(
    atlas: tuple[Acmi, CountingStore, MemoryAPI], fmt: str
) -> None:
    acmi, _, memory = atlas
    memory.handoff(AGENT, "Done: the KPI pack. Private: call Priya about her father.")
    bundle = acmi.bootstrap(AGENT, scope="group", format=fmt, include="yesterday")
    for text in (bundle.text, json.dumps(bundle.to_dict(), ensure_ascii=False)):
        assert PRIVATE not in text and WARM_ONLY not in text
        assert "About Priya" not in text and "her father" not in text
    names = {s.name for s in bundle.sections}
    assert {"hot", "today", "yesterday"} <= names
    assert not names & {"profile", "warm", "handoff", "conflicts", "topic", "topics", "archive"}
    assert bundle.section("hot").value["text"] == _file("ACTIVE-CONTEXT.md")
    assert bundle.section("today").value["text"] == _file("memory/2026-02-03.md")
    assert bundle.section("yesterday").value["text"] == _file("memory/2026-02-02.md")
    assert memory.status(AGENT)["handoff_pending"]  # a group bundle never takes it


def test_subagent_gets_its_task_one_topic_and_hot(
    atlas: tuple[Acmi, CountingStore, MemoryAPI],
) -> None:
    acmi, _, _ = atlas
    bundle = acmi.bootstrap(AGENT, scope="subagent", topic="client-acme")
    sections = bundle.to_dict()["sections"]
    assert sections["topic"] == {
        "topic": "topic:client-acme",
        "path": "memory/topics/client-acme.md",
        "text": _file("memory/topics/client-acme.md"),
    }
    assert sections["hot"]["text"] == _file("ACTIVE-CONTEXT.md")
    assert set(sections) == {
        "hot",
        "topic",
        "signals",
        "hitl",
        "locks",
        "work",
        "lessons",
        "yesterday",
        "topics",
        "archive",
    }
    assert sections["yesterday"] is None and sections["topics"] == []
    other = _file("memory/topics/pipeline-migration.md").splitlines()[0]  # another topic
    for text in (bundle.text, acmi.bootstrap(AGENT, scope="subagent", format="markdown").text):
        assert PRIVATE not in text and WARM_ONLY not in text
        assert "Started session, reviewed ACTIVE-CONTEXT" not in text  # no daily notes
        assert other not in text
    # the topic: prefix is accepted; a topic with no file says so
    same = acmi.bootstrap(AGENT, scope="subagent", topic="topic:client-acme")
    assert same.section("topic").value == sections["topic"]
    none = acmi.bootstrap(AGENT, scope="subagent", topic="no-such-topic")
    assert none.section("topic").value is None
    assert "topic:no-such-topic: no topic file (memory topic-create)" in none.problems


def test_level_three_loads_on_demand(atlas: tuple[Acmi, CountingStore, MemoryAPI]) -> None:
    acmi, _, _ = atlas
    data = acmi.bootstrap(
        AGENT, include="topics,yesterday,archive", topic="hiring-analyst"
    ).to_dict()
    sections = data["sections"]
    assert [t["topic"] for t in sections["topics"]] == [
        "topic:client-acme",
        "topic:hiring-analyst",
        "topic:pipeline-migration",
        "topic:tech-stack",
    ]
    assert sections["topics"][0]["path"] == "memory/topics/client-acme.md"
    assert sections["yesterday"]["text"] == _file("memory/2026-02-02.md")
    assert sections["archive"] == [
        {
            "quarter": "2025-Q4",
            "path": "memory/archive/2025-Q4.md",
            "text": _file("memory/archive/2025-Q4.md"),
        }
    ]
    assert sections["topic"]["text"] == _file("memory/topics/hiring-analyst.md")
    assert data["memory"]["on_demand"] == []
    assert acmi.bootstrap(AGENT, include=["yesterday"]).section("yesterday").value is not None


def test_the_archive_shows_its_newest_quarters(
    atlas: tuple[Acmi, CountingStore, MemoryAPI],
) -> None:
    acmi, _, memory = atlas
    files = render_tree(read_tree(FIXTURE))
    q4 = files["memory/archive/2025-Q4.md"].decode()
    for quarter in ("2025-Q2", "2025-Q3"):
        files[f"memory/archive/{quarter}.md"] = q4.replace("Q4 2025", quarter).encode()
    memory.import_snapshot(AGENT, parse_tree(files))
    shown = acmi.bootstrap(AGENT, include="archive").section("archive").value
    assert [q["quarter"] for q in shown] == ["2025-Q4", "2025-Q3"][: CAPS["archive"]]


@pytest.mark.parametrize(
    ("kwargs", "field", "rule"),
    [
        ({"include": "topics,everything"}, "include", "enum"),
        ({"include": 3}, "include", "type"),
        ({"include": "topics", "scope": "group"}, "include", "scope"),
        ({"include": "archive", "scope": "group"}, "include", "scope"),
        ({"topic": "client-acme", "scope": "group"}, "topic", "scope"),
        ({"topic": "../etc"}, "topic", "topic_slug"),
        ({"topic": "x" * 129}, "topic", "topic_slug"),
    ],
)
def test_bad_memory_options_name_the_field_and_rule(
    atlas: tuple[Acmi, CountingStore, MemoryAPI], kwargs: dict[str, Any], field: str, rule: str
) -> None:
    acmi, store, _ = atlas
    store.reset()
    with pytest.raises(AcmiValidationError) as info:
        acmi.bootstrap(AGENT, **kwargs)
    assert (info.value.field, info.value.rule) == (field, rule)
    assert store.requests == 0  # refused before the store is asked


def test_today_is_the_day_of_now_in_the_heartbeat_zone(acmi: Acmi) -> None:
    """23:30 UTC on 2026-02-03 is 00:30 on 2026-02-04 in Berlin: a new, empty day."""
    late = int(dt.datetime(2026, 2, 3, 23, 30, tzinfo=dt.UTC).timestamp()) * 1000
    view = Acmi(
        acmi.store, acmi.settings, tenant=f"t-{uuid.uuid4().hex[:12]}", clock=FakeClock(late)
    )
    MemoryAPI(view.context).import_snapshot(AGENT, read_tree(FIXTURE))
    bundle = view.bootstrap(AGENT, include="yesterday")
    assert bundle.memory["today"] == "2026-02-04"
    assert bundle.section("today").value is None
    assert bundle.section("yesterday").value["text"] == _file("memory/2026-02-03.md")


def test_a_hot_warm_conflict_is_shown_with_the_layer_that_wins(
    atlas: tuple[Acmi, CountingStore, MemoryAPI],
) -> None:
    acmi, _, memory = atlas
    files = render_tree(read_tree(FIXTURE))
    closed = "- Status: closed — Aiko accepted the offer on 2026-02-03"
    text = files["MEMORY.md"].decode()
    files["MEMORY.md"] = text.replace(
        "- Status: 3 candidates in final round, offer target 2026-02-06", closed
    ).encode()
    memory.import_snapshot(AGENT, parse_tree(files))
    bundle = acmi.bootstrap(AGENT)
    (conflict,) = bundle.section("conflicts").value
    assert conflict["about"] == "Analyst hire"
    assert conflict["wins"] == "hot" and conflict["rule"] == "current_state"
    assert conflict["hot"].startswith("- [ ] Analyst hire — final interviews done")
    assert conflict["warm"] == closed.removeprefix("- ")
    # nothing dropped: both layers still say what they say
    assert closed in bundle.section("warm").value["text"]
    assert conflict["hot"] in bundle.section("hot").value["text"]
    text = acmi.bootstrap(AGENT, format="markdown").text
    _, inside = _fenced(text)
    # one line, stored text: fenced
    assert any(line.startswith("Analyst hire: hot wins (current_state) · ") for line in inside)
    # MemoryAPI.debug finds the same one
    assert [c["about"] for c in memory.debug(AGENT, now_ms=NOW)["conflicts"]] == ["Analyst hire"]
    # a group bundle has no MEMORY.md to quote
    assert "conflicts" not in {s.name for s in acmi.bootstrap(AGENT, scope="group").sections}


def test_the_handoff_is_taken_once_by_a_main_bootstrap_that_logs_a_spawn(
    atlas: tuple[Acmi, CountingStore, MemoryAPI],
) -> None:
    acmi, store, memory = atlas
    key = acmi.keys.slot(EntityId.parse(AGENT), MEMORY_HANDOFF)
    written = memory.handoff(AGENT, "Done: KPI pack. Next: reference calls. Gotcha: ```` fences")
    # a peek (no spawn), a subagent and a group bundle leave it pending
    peek = acmi.bootstrap(AGENT, format="markdown")
    assert peek.section("handoff").value == {
        "path": "HANDOFF.md",
        "ts": written["ts"],
        "taken": False,
        "text": written["text"],
    }
    assert peek.memory["handoff"] == "pending"
    assert "pending: the next main bootstrap that logs a spawn takes it" in peek.text
    _, inside = _fenced(peek.text)
    assert written["text"] in inside
    assert "handoff" not in {s.name for s in acmi.bootstrap(AGENT, scope="subagent").sections}
    acmi.bootstrap(AGENT, scope="group", spawn=SPAWN | {"session_id": "s-group"})
    assert store.execute(("EXISTS", key)) == 1

    # the next main bootstrap that logs a spawn takes it, in its one round trip (the
    # session's start in today's note written in the same run: the zone is the one the
    # last bootstrap saw)
    store.reset()
    taken = acmi.bootstrap(AGENT, spawn=SPAWN, format="markdown")
    assert store.requests == 1
    assert taken.section("handoff").value["taken"] is True
    assert taken.memory["handoff"] == "taken"
    assert "taken: this bootstrap cleared it" in taken.text
    assert store.execute(("EXISTS", key)) == 0 and memory.take_handoff(AGENT) is None
    # once: the next one has none
    again = acmi.bootstrap(AGENT, spawn=SPAWN | {"session_id": "s-2"})
    assert again.section("handoff").value is None and again.memory["handoff"] == "none"

    # a retried spawn (the same record: not new) only reads a newer handoff
    newer = memory.handoff(AGENT, "second handoff")
    retry = acmi.bootstrap(AGENT, spawn=SPAWN | {"session_id": "s-2"})
    assert retry.spawn is not None and retry.spawn.get("duplicate") is True
    assert retry.section("handoff").value["taken"] is False
    assert memory.take_handoff(AGENT) == {"text": newer["text"], "ts": newer["ts"]}


def test_a_taken_handoff_cut_by_the_budget_is_put_back(
    atlas: tuple[Acmi, CountingStore, MemoryAPI],
) -> None:
    acmi, store, memory = atlas
    text = "Next steps: " + "call Marco about the Snowflake role; " * 60  # ~2.2 KB
    memory.handoff(AGENT, text)
    store.reset()
    bundle = acmi.bootstrap(AGENT, spawn=SPAWN, format="markdown", max_bytes=1500)
    assert bundle.size_bytes <= 1500
    assert bundle.cut.get("handoff") == 1
    # the bundle and the session start in today's note (written in its run when the zone
    # is the one assumed: this process has not seen the agent yet, so UTC, and the atlas
    # agent's is not), then the put-back (only in this case)
    assert store.requests == 3
    assert bundle.memory["handoff"].startswith("put back")
    assert "handoff (it stays pending)" in bundle.text
    kept = memory.take_handoff(AGENT)
    assert kept is not None and kept["text"] == text  # nothing lost


@pytest.mark.parametrize("fmt", ["json", "markdown"])
@pytest.mark.parametrize("budget", [2_500, 5_000, 8_000])
def test_budgets_cut_memory_in_trim_order_and_say_so(
    atlas: tuple[Acmi, CountingStore, MemoryAPI], fmt: str, budget: int
) -> None:
    acmi, _, memory = atlas
    memory.handoff(AGENT, "Done: KPI pack.")
    full = acmi.bootstrap(AGENT, format=fmt, include="topics,yesterday,archive", topic="tech-stack")
    bundle = acmi.bootstrap(
        AGENT, format=fmt, include="topics,yesterday,archive", topic="tech-stack", max_bytes=budget
    )
    assert full.size_bytes > budget >= bundle.size_bytes
    cut = bundle.cut
    assert cut and "handoff" not in cut  # the last to go
    # lowest priority first: a section is cut only when every lower one is gone
    order = [name for name in TRIM_ORDER if name in cut]
    for name in order[:-1]:
        assert bundle.section(name).value in ([], None), f"{name} cut partly, a higher one too"
    assert order[0] == "archive"  # level 3 goes first
    lower = TRIM_ORDER[: TRIM_ORDER.index(order[-1])]
    assert all(
        bundle.section(n).value in ([], None, {})
        for n in lower
        if n in {s.name for s in bundle.sections}
    )
    if fmt == "json":
        data = json.loads(bundle.text)
        assert data["cut"] == cut and data["budget_bytes"] == budget
    else:
        assert "left out to fit the budget" in bundle.text


def test_every_scope_is_one_round_trip(atlas: tuple[Acmi, CountingStore, MemoryAPI]) -> None:
    acmi, store, memory = atlas
    acmi.bootstrap(AGENT, spawn=SPAWN)  # the session's first bootstrap logs its start: +1
    memory.handoff(AGENT, "Done: KPI pack.")  # taken in the loop's spawn, in its one trip
    acmi.bootstrap(AGENT)  # the script's first run on the backend loads it
    calls: list[dict[str, Any]] = [
        {"scope": "main", "include": "topics,yesterday,archive", "topic": "client-acme"},
        {"scope": "main", "spawn": SPAWN, "format": "markdown", "max_tokens": 2_000},
        {"scope": "group", "include": "yesterday", "format": "markdown"},
        {"scope": "subagent", "topic": "tech-stack", "include": "archive"},
    ]
    for kwargs in calls:
        store.reset()
        acmi.bootstrap(AGENT, **kwargs)
        assert store.requests == 1, kwargs


def test_unreadable_memory_is_a_problem_not_an_error(
    atlas: tuple[Acmi, CountingStore, MemoryAPI],
) -> None:
    acmi, store, _ = atlas
    eid = EntityId.parse(AGENT)
    store.execute(("HSET", acmi.keys.slot(eid, MEMORY_HANDOFF), "not", "a string"))
    set_hot(acmi, {"hot.in_progress": {"not": "a section"}})
    bundle = acmi.bootstrap(AGENT, spawn=SPAWN)
    assert bundle.section("hot").value is None and bundle.section("handoff").value is None
    assert any(p.startswith("memory:hot hot.*") for p in bundle.problems)
    assert any("memory:handoff: WRONGTYPE" in p for p in bundle.problems)
    assert bundle.section("warm").value is not None  # the rest still reads
    assert store.execute(("TYPE", acmi.keys.slot(eid, MEMORY_HANDOFF))) == b"hash"  # untouched


def test_the_routes_take_include_and_topic(atlas: tuple[Acmi, CountingStore, MemoryAPI]) -> None:
    acmi, _, memory = atlas
    http = RouteClient(acmi, "bootstrap")
    path = f"/v1/agents/{AGENT}/bootstrap"
    got = http.call("GET", f"{path}?scope=subagent&topic=client-acme&include=archive", scope="read")
    assert got.status_code == 200, got.text
    sections = got.json()["sections"]
    assert sections["topic"]["text"] == _file("memory/topics/client-acme.md")
    assert [q["quarter"] for q in sections["archive"]] == ["2025-Q4"]
    group = http.call("GET", f"{path}?scope=group&format=markdown", scope="read")
    assert group.status_code == 200 and PRIVATE not in group.text
    assert_error(
        http.call("GET", f"{path}?scope=group&topic=client-acme", scope="read"), 400, "topic"
    )
    assert_error(http.call("GET", f"{path}?include=everything", scope="read"), 400, "include")

    memory.handoff(AGENT, "Done: KPI pack.")
    body = {"spawn": SPAWN, "include": "yesterday", "topic": "tech-stack"}
    posted = http.call("POST", path, body)
    assert posted.status_code == 200, posted.text
    data = posted.json()
    assert data["sections"]["handoff"]["taken"] is True
    assert data["sections"]["yesterday"]["text"] == _file("memory/2026-02-02.md")
    assert data["sections"]["topic"]["path"] == "memory/topics/tech-stack.md"
    assert memory.take_handoff(AGENT) is None


def test_without_a_zone_the_days_are_utc_days(acmi: Acmi) -> None:
    """No heartbeat.timezone: the tree's stamps and the bundle's days are UTC (the script
    then reads the exact UTC window)."""
    files = render_tree(read_tree(FIXTURE))
    del files["memory/heartbeat-state.json"]
    view = Acmi(
        acmi.store, acmi.settings, tenant=f"t-{uuid.uuid4().hex[:12]}", clock=FakeClock(NOW)
    )
    MemoryAPI(view.context).import_snapshot(AGENT, parse_tree(files))
    bundle = view.bootstrap(AGENT, include="yesterday")
    assert bundle.memory["timezone"] == "UTC" and bundle.memory["today"] == "2026-02-03"
    assert bundle.section("today").value["text"] == _file("memory/2026-02-03.md")
    assert bundle.section("yesterday").value["text"] == _file("memory/2026-02-02.md")


def set_hot(acmi: Acmi, fields: dict[str, Any]) -> None:
    """Hot-layer fields written as another client would: straight into the slot."""
    plan = WritePlan()
    edit = [("set", k, json.dumps(v)) for k, v in fields.items()]
    plan.edit_object(acmi.keys.slot(EntityId.parse(AGENT), MEMORY_HOT), edit)  # type: ignore[arg-type]
    plan.apply(acmi.store)


def _stamps(acmi: Acmi) -> list[float]:
    reply = acmi.store.execute(
        ("ZRANGE", acmi.keys.slot(EntityId.parse(AGENT), MEMORY_STAMPS), 0, -1)
    )
    assert isinstance(reply, list)
    return [float(m) for m in reply if isinstance(m, bytes)]


def _daily_ts(acmi: Acmi) -> list[float]:
    events = acmi.timeline.read(AGENT)
    return sorted({e.ts for e in events if (e.payload or {}).get("memory") == "daily"})


def test_every_writer_of_daily_lines_keeps_their_stamps_in_the_same_write(
    atlas: tuple[Acmi, CountingStore, MemoryAPI],
) -> None:
    acmi, store, _ = atlas
    assert _stamps(acmi) == _daily_ts(acmi)  # the import
    assert len(_stamps(acmi)) < len(acmi.timeline.read(AGENT))  # a stamp per moment, not line
    later = NOW + 17 * 60_000 + 123
    view = Acmi(store, acmi.settings, tenant=acmi.tenant, clock=FakeClock(later))
    store.reset()
    MemoryAPI(view.context).remember(AGENT, "Called Priya back", layer="daily")
    assert store.requests == 2  # the day read, then one write: event and stamp together
    assert later - later % 60_000 in _stamps(acmi)
    # prune moves a done task to today's note: its line is stamped too
    set_hot(view, {"hot.in_progress": [{"task": "Ship the pack", "done": True}]})
    assert MemoryAPI(view.context).prune(AGENT, now_ms=later + 3_600_000)["moved"]
    assert _stamps(acmi) == _daily_ts(acmi)
    bundle = view.bootstrap(AGENT)
    assert "Called Priya back" in bundle.section("today").value["text"]
    assert "Done: Ship the pack" in bundle.section("today").value["text"]


def test_with_memory_the_daily_read_is_the_notes_lines_not_the_days_events(acmi: Acmi) -> None:
    """400 other events today beside the note: the bootstrap reads the note's lines at
    their stamps, and only as many newest events as the timeline section needs."""
    view = Acmi(
        acmi.store,
        acmi.settings,
        tenant=f"t-{uuid.uuid4().hex[:12]}",
        clock=FakeClock(NOW - 30 * 60_000 + 7, tick=1),  # ticks: never on a note's stamp
    )
    fleet = build_agent(view, AGENT, events=400)
    MemoryAPI(view.context).import_snapshot(AGENT, read_tree(FIXTURE))
    alone = Acmi(acmi.store, acmi.settings, tenant=f"t-{uuid.uuid4().hex[:12]}", clock=view.clock)
    MemoryAPI(alone.context).import_snapshot(AGENT, read_tree(FIXTURE))
    bundle, only_memory = view.bootstrap(AGENT), alone.bootstrap(AGENT)
    assert bundle.section("today").value["text"] == _file("memory/2026-02-03.md")
    # the same lines read with or without the 400 events around them
    assert bundle.reads["daily"] == only_memory.reads["daily"] < 2 * len(_stamps(view))
    assert bundle.reads["stamps"] == only_memory.reads["stamps"] > 0
    timeline = bundle.to_dict()["sections"]["timeline"]
    assert len(timeline) == 20 and not any("memory" in (e.get("payload") or {}) for e in timeline)
    assert timeline[0]["summary"].startswith(("note", "task", "handoff", "deploy", "email"))
    assert bundle.reads["timeline"] < 3 * 20 < fleet.events  # not the day's 400
    # a timeline of daily lines only: the timeline section's read stays bounded
    assert only_memory.reads["timeline"] <= CAPS["timeline_scanned"]


def test_stamps_without_lines_read_nothing_and_a_wrong_type_is_no_memory(
    atlas: tuple[Acmi, CountingStore, MemoryAPI], raw: Any
) -> None:
    acmi, _, _ = atlas
    eid = EntityId.parse(AGENT)
    key = acmi.keys.slot(eid, MEMORY_STAMPS)
    raw.zadd(key, {str(NOW - 60_000): NOW - 60_000})  # a stamp whose line went
    assert acmi.bootstrap(AGENT).section("today").value["text"] == _file("memory/2026-02-03.md")
    raw.delete(key)
    raw.set(key, "not a zset")
    bundle = acmi.bootstrap(AGENT)
    assert bundle.section("today").value is None and bundle.reads["daily"] == 0
    assert any(p.startswith(f"{key}: WRONGTYPE") for p in bundle.problems)


def test_a_memory_key_spelt_with_escapes_is_still_memory(acmi: Acmi, raw: Any) -> None:
    """The bootstrap looks for memory fields with a byte search (``"hot.``) before parsing
    them; a key another client spelt with \\u escapes is found all the same."""
    view = Acmi(
        acmi.store, acmi.settings, tenant=f"t-{uuid.uuid4().hex[:12]}", clock=FakeClock(NOW)
    )
    eid = EntityId.parse(AGENT)
    # memory in its slots, and a field left in the old places (before `acmi migrate`):
    # the identity never shows the latter
    raw.set(view.keys.signals(eid), '{"status":"ok","\\u0068ot.current_priority":"Old"}')
    raw.set(view.keys.profile(eid), '{"name":"atlas","\\u0077arm.about_priya":"- Old"}')
    raw.set(view.keys.slot(eid, MEMORY_HOT), '{"\\u0068ot.current_priority":"Ship it"}')
    raw.set(view.keys.slot(eid, MEMORY_WARM), '{"\\u0077arm.about_priya":"- Founder"}')
    sections = view.bootstrap(AGENT).to_dict()["sections"]
    assert sections["signals"] == {"status": "ok"}
    assert "Ship it" in sections["hot"]["text"]
    assert sections["profile"] == {"name": "atlas"}


def test_past_the_daily_cap_the_bundle_keeps_the_newest_lines(acmi: Acmi) -> None:
    """A day of more note lines than the bootstrap reads (``CAPS["daily_scanned"]``; an
    agent woken every minute logs 1,440 session starts): the window's oldest lines are
    left out, said in problems, never its newest; the other tenant's day is whole."""
    one, two = (
        Acmi(acmi.store, acmi.settings, tenant=f"t-{uuid.uuid4().hex[:12]}", clock=FakeClock(NOW))
        for _ in range(2)
    )
    memory = MemoryAPI(one.context)
    first = NOW - 12 * 3_600_000  # 03:00 UTC, the UTC day's lines from then on
    for i in range(CAPS["daily_scanned"] + 40):
        memory.log_session_start(AGENT, f"s-{i}", "opus-4", first + i * 60_000, "UTC")
    MemoryAPI(two.context).log_session_start(AGENT, "s-x", "opus-4", first, "UTC")
    today = one.bootstrap(AGENT, format="json").to_dict()
    text = today["sections"]["today"]["text"]
    last = CAPS["daily_scanned"] + 39
    assert f"Started session s-{last} (opus-4)" in text  # the newest line is shown
    assert "Started session s-0 (opus-4)" not in text  # the oldest is left out
    assert any("daily-note events around now" in p for p in today["problems"])
    other = two.bootstrap(AGENT, format="json").to_dict()
    assert "Started session s-x" in other["sections"]["today"]["text"]
    assert not any("daily-note" in p for p in other["problems"])

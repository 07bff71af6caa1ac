"""Issue 24 item 7 (seed 002 §8, "Session starts -> log start time -> daily notes"): the
bootstrap of a new spawn appends one line to today's daily note, once per session id, per
tenant, on every backend."""

from __future__ import annotations

from acmi_core import Acmi
from acmi_core.memory import render_tree


def _today_lines(acmi: Acmi, agent: str) -> list[str]:
    files = render_tree(acmi.memory.export_snapshot(agent))
    notes = [data.decode() for path, data in files.items() if path.startswith("memory/20")]
    return [line for note in notes for line in note.splitlines() if "Started session" in line]


def test_a_new_spawn_logs_its_start_once(acmi: Acmi) -> None:
    agent = "agent:starter"
    spawn = {"session_id": "s-1", "model_id": "opus-4"}
    acmi.bootstrap(agent, spawn=spawn)
    lines = _today_lines(acmi, agent)
    assert len(lines) == 1 and lines[0].endswith("Started session s-1 (opus-4)")
    assert lines[0].startswith("- [")  # the seed's "- [HH:MM] ..." entry
    # the same session again (a repeated hook, a later bootstrap): no second line
    acmi.bootstrap(agent, spawn=spawn)
    acmi.bootstrap(agent, spawn=spawn, scope="group")
    assert len(_today_lines(acmi, agent)) == 1
    # another session: its own line; a bootstrap without a spawn logs nothing
    acmi.bootstrap(agent, spawn={"session_id": "s-2", "model_id": "opus-4"})
    acmi.bootstrap(agent)
    # (one minute's lines: ordered by their stored form, not by arrival)
    assert sorted(x.split("] ", 1)[1] for x in _today_lines(acmi, agent)) == [
        "Started session s-1 (opus-4)",
        "Started session s-2 (opus-4)",
    ]
    # the next bootstrap reads it in today's note
    today = acmi.bootstrap(agent).to_dict()["sections"]["today"]
    assert today is not None and "Started session s-2 (opus-4)" in today["text"]


def test_the_timeline_section_is_unchanged_by_the_log(acmi: Acmi) -> None:
    agent = "agent:starter-timeline"
    event = {"source": agent, "kind": "note", "correlationId": "c-1", "summary": "hi"}
    acmi.timeline.append(agent, event)
    acmi.bootstrap(agent, spawn={"session_id": "s-t", "model_id": "m"})
    timeline = acmi.bootstrap(agent).to_dict()["sections"]["timeline"]
    assert [e["correlationId"] for e in timeline] == ["c-1"]  # daily lines are not events there


def test_ids_with_line_breaks_stay_one_line(acmi: Acmi) -> None:
    agent = "agent:starter-lines"
    acmi.bootstrap(agent, spawn={"session_id": "s\n3", "model_id": "m\tx"})
    assert [x.split("] ", 1)[1] for x in _today_lines(acmi, agent)] == ["Started session s 3 (m x)"]


def test_the_log_is_per_tenant(acmi: Acmi) -> None:
    a, b = acmi.for_tenant("start-acme"), acmi.for_tenant("start-globex")
    spawn = {"session_id": "shared-id", "model_id": "m"}
    a.bootstrap("agent:atlas", spawn=spawn)
    assert _today_lines(b, "agent:atlas") == []
    b.bootstrap("agent:atlas", spawn=spawn)  # the same session id in another tenant: its own
    assert len(_today_lines(b, "agent:atlas")) == len(_today_lines(a, "agent:atlas")) == 1

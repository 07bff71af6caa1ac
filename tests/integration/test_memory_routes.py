"""The memory function's routes (/v1/memory/{entity}/...) on every backend: import and
export through HTTP byte for byte, the commands, budgets as a 400 naming field and rule
with nothing stored, and a read key that cannot write. The router is mounted here by
name, as ``acmi_core.api.app.ROUTER_MODULES`` will once its function row exists."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from acmi_core import Acmi
from acmi_core.memory import read_tree, render_tree
from tests.kit import FakeClock, RouteClient, assert_error, fresh_tenant

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
NOW = int(dt.datetime(2026, 2, 3, 15, 0, tzinfo=dt.UTC).timestamp()) * 1000
BASE = "/v1/memory/agent:atlas"


@pytest.fixture
def http(acmi: Acmi) -> Iterator[RouteClient]:
    yield RouteClient(fresh_tenant(acmi, FakeClock(NOW)), "memory")


def fixture_files() -> dict[str, str]:
    return {p: b.decode() for p, b in render_tree(read_tree(FIXTURE)).items()}


def test_import_export_and_the_commands(http: RouteClient) -> None:
    files = fixture_files()
    imported = http.call("POST", f"{BASE}/import", {"files": files})
    assert imported.status_code == 200, imported.text
    assert imported.json()["events_added"] == 376
    again = http.call("POST", f"{BASE}/import", {"files": files})
    assert again.json()["writes"] == 0

    exported = http.call("GET", f"{BASE}/export", scope="read")
    assert exported.status_code == 200 and exported.json()["files"] == files

    status = http.call("GET", f"{BASE}/status", scope="read").json()
    assert status["layers"]["daily"]["fix"] == "Summarize, stop transcribing"

    made = http.call("POST", f"{BASE}/remember", {"text": "Ask IT a week early", "layer": "warm"})
    assert made.status_code == 201 and made.json()["stored"] is True
    hits = http.call("GET", f"{BASE}/search?q=ask+early", scope="read").json()["hits"]
    # in the top 3 (hybrid ranks by meaning too: a line under a heading about IT access
    # may come first); its keys as before, hybrid (the default) adding its two scores
    mine = next(h for h in hits[:3] if h["text"] == "- Ask IT a week early")
    assert mine == {
        "layer": "warm",
        "path": "MEMORY.md",
        "line": mine["line"],
        "text": "- Ask IT a week early",
        "score": mine["score"],
        "keyword": 1.0,
        "similarity": mine["similarity"],
    }
    keyword = http.call("GET", f"{BASE}/search?q=ask+early&mode=keyword", scope="read").json()
    assert keyword["mode"] == "keyword" and set(keyword["hits"][0]) == {
        "layer",
        "path",
        "line",
        "text",
        "score",
    }
    bad = http.call("GET", f"{BASE}/search?q=ask&mode=fuzzy", scope="read")
    assert bad.status_code == 400 and bad.json()["field"] == "mode"

    active = http.call("GET", f"{BASE}/active", scope="read").json()
    assert active["text"] == files["ACTIVE-CONTEXT.md"]
    put = http.call("PUT", f"{BASE}/active", {"text": files["ACTIVE-CONTEXT.md"]})
    assert put.status_code == 200

    summary = http.call("GET", f"{BASE}/daily-summary?date=2026-02-03", scope="read").json()
    assert summary["path"] == "memory/2026-02-03.md" and len(summary["tomorrow"]) == 2

    topic = http.call("POST", f"{BASE}/topics", {"slug": "vendor-x", "name": "Vendor X"})
    assert topic.status_code == 201 and topic.json()["topic"] == "topic:vendor-x"
    assert_error(
        http.call("POST", f"{BASE}/topics", {"slug": "vendor-x", "name": "X"}), 409, "slug"
    )

    pruned = http.call("POST", f"{BASE}/prune", {"days": 7})
    assert pruned.status_code == 200 and len(pruned.json()["moved"]) == 1
    reviewed = http.call("POST", f"{BASE}/review")
    assert reviewed.status_code == 200 and reviewed.json()["promoted"]

    assert http.call("PUT", f"{BASE}/handoff", {"text": "next: ship"}).status_code == 200
    taken = http.call("POST", f"{BASE}/handoff/take").json()
    assert taken["handoff"]["text"] == "next: ship"
    assert http.call("POST", f"{BASE}/handoff/take").json() == {"handoff": None}

    debug = http.call("GET", f"{BASE}/debug", scope="read")
    assert debug.status_code == 200 and "over_budget" in debug.json()


def test_bad_input_names_field_and_rule_and_stores_nothing(http: RouteClient) -> None:
    over = "# ACTIVE-CONTEXT.md — What's Hot\n\n## In Progress\n" + "- [ ] x\n" * 60
    error = assert_error(http.call("PUT", f"{BASE}/active", {"text": over}), 400, "text")
    assert error["rule"] == "memory_budget" and "Move items to daily notes" in error["message"]
    assert http.acmi.signals.all("agent:atlas") == {}

    cases = [
        ("POST", "remember", {"text": "x", "layer": "cold"}, "layer"),
        ("POST", "remember", {"text": ""}, "text"),
        ("POST", "remember", {"txt": "x"}, "txt"),
        ("POST", "remember", {"text": "x", "layer": 3}, "layer"),
        ("POST", "topics", {"slug": "a b", "name": "x"}, "slug"),
        ("POST", "prune", {"days": -1}, "days"),
        ("POST", "import", {"files": {"MEMORY.md": 1}}, "files.MEMORY.md"),
        ("POST", "import", {"files": {}}, "files"),
        ("POST", "import", {"files": {"memory/2026-13-01.md": "# x\n"}}, "memory/2026-13-01.md"),
        ("PUT", "handoff", {"text": ""}, "text"),
    ]
    for method, route, body, field in cases:
        assert_error(http.call(method, f"{BASE}/{route}", body), 400, field)
    assert_error(
        http.call("GET", f"{BASE}/daily-summary?date=2026-02-30", scope="read"), 400, "date"
    )
    assert_error(http.call("GET", "/v1/memory/not-an-entity/status", scope="read"), 400)
    assert_error(
        http.call("POST", f"{BASE}/import", {"files": fixture_files(), "strict": True}),
        400,
        "files.memory/2026-01-21.md",
    )
    assert http.acmi.timeline.size("agent:atlas") == 0
    assert_error(http.call("POST", f"{BASE}/remember", {"text": "x"}, scope="read"), 403)

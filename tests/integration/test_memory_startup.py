"""Issue 24 item 7: the startup files (SOUL.md, USER.md, AGENTS.md) are slots of their own
(``memory:soul``, ``memory:user``, ``memory:agents``), imported and exported byte for byte,
per tenant, on every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from acmi_core import Acmi, EntityId
from acmi_core.base.errors import PayloadTooLarge, SecretDetected
from acmi_core.base.keys import MEMORY_AGENTS, MEMORY_SOUL, MEMORY_USER
from acmi_core.memory import read_tree, render_tree
from acmi_core.memory.tree import parse_tree

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"
OWNER = "agent:atlas"
# what a hand-written file has: no final newline, CRLF, trailing spaces, tabs, non-ASCII
STARTUP = {
    "SOUL.md": b"# SOUL.md\r\n\r\nI am Atlas.  \r\nCalm, direct \xe2\x80\x94 never vague.",
    "USER.md": b"# USER.md\n\n- Name: Priya\n\t- Timezone: Europe/Lisbon\n\n\n",
    "AGENTS.md": b"# AGENTS.md - how I work\n\n1. Write it down.\n",
}


def _tree() -> dict[str, bytes]:
    files = {
        p.relative_to(FIXTURE).as_posix(): p.read_bytes() for p in FIXTURE.rglob("*") if p.is_file()
    }
    return {**files, **STARTUP}


def test_startup_files_round_trip_byte_for_byte(acmi: Acmi) -> None:
    snapshot = parse_tree(_tree())
    assert not {"SOUL.md", "USER.md", "AGENTS.md"} & set(snapshot.ignored)
    first = acmi.memory.import_snapshot(OWNER, snapshot)
    assert first["startup_written"] == 3
    assert {"SOUL.md", "USER.md", "AGENTS.md"} <= set(first["files_written"])

    exported = render_tree(acmi.memory.export_snapshot(OWNER))
    for path, data in STARTUP.items():
        assert exported[path] == data
    assert exported == render_tree(snapshot)

    # each in its own slot, as {"text": ...}
    eid = EntityId.parse(OWNER)
    for slot in (MEMORY_SOUL, MEMORY_USER, MEMORY_AGENTS):
        assert acmi.store.execute(("TYPE", acmi.keys.slot(eid, slot))) in (b"string", "string")

    again = acmi.memory.import_snapshot(OWNER, snapshot)
    assert again["writes"] == 0 and again["startup_written"] == 0


def test_a_changed_file_replaces_and_a_missing_one_is_kept(acmi: Acmi) -> None:
    owner = "agent:changed"
    acmi.memory.import_snapshot(owner, parse_tree(STARTUP))
    changed = {"SOUL.md": b"# SOUL.md\nI am Atlas, version two.\n"}
    result = acmi.memory.import_snapshot(owner, parse_tree(changed))
    assert result["startup_written"] == 1 and result["files_written"] == ["SOUL.md"]
    exported = render_tree(acmi.memory.export_snapshot(owner))
    assert exported["SOUL.md"] == changed["SOUL.md"]
    assert exported["USER.md"] == STARTUP["USER.md"]  # not in the tree: left alone


def test_startup_files_are_per_tenant(acmi: Acmi) -> None:
    a, b = acmi.for_tenant("startup-acme"), acmi.for_tenant("startup-globex")
    a.memory.import_snapshot(OWNER, parse_tree(STARTUP))
    b.memory.import_snapshot(OWNER, parse_tree({"SOUL.md": b"I am Globex's Atlas.\n"}))
    assert render_tree(a.memory.export_snapshot(OWNER))["SOUL.md"] == STARTUP["SOUL.md"]
    theirs = render_tree(b.memory.export_snapshot(OWNER))
    assert theirs["SOUL.md"] == b"I am Globex's Atlas.\n"
    assert "USER.md" not in theirs


def test_a_secret_in_a_startup_file_is_never_stored(acmi: Acmi) -> None:
    leaky = {"USER.md": b"# USER.md\nAPI key: AKIAIOSFODNN7EXAMPLE\n"}
    with pytest.raises(SecretDetected, match=r'files\["USER.md"\]'):
        acmi.memory.import_snapshot("agent:leaky", parse_tree(leaky))
    assert "USER.md" not in render_tree(acmi.memory.export_snapshot("agent:leaky"))


def test_read_tree_reads_them(tmp_path: Path) -> None:
    for path, data in STARTUP.items():
        (tmp_path / path).write_bytes(data)
    snapshot = read_tree(tmp_path)
    assert [p for p, _ in snapshot.startup] == ["SOUL.md", "USER.md", "AGENTS.md"]
    assert render_tree(snapshot) == STARTUP


def test_a_startup_file_over_the_object_limit_is_refused(acmi: Acmi) -> None:
    huge = {"AGENTS.md": b"x" * (64 * 1024)}
    with pytest.raises(PayloadTooLarge, match=r"at most 65536 bytes") as refused:
        acmi.memory.import_snapshot("agent:huge", parse_tree(huge))
    assert refused.value.field == 'files["AGENTS.md"]'
    assert "AGENTS.md" not in render_tree(acmi.memory.export_snapshot("agent:huge"))


# --- loaded first in the wake bundle, in the seed's scopes (§7) ------------------------------


def _with_memory(acmi: Acmi, agent: str) -> None:
    acmi.memory.import_snapshot(agent, parse_tree(_tree()))


def test_main_loads_soul_user_and_agents_first(acmi: Acmi) -> None:
    agent = "agent:wake-main"
    _with_memory(acmi, agent)
    bundle = acmi.bootstrap(agent)
    sections = bundle.to_dict()["sections"]
    assert list(sections)[:3] == ["soul", "user", "agents"]
    for name, path in (("soul", "SOUL.md"), ("user", "USER.md"), ("agents", "AGENTS.md")):
        assert sections[name] == {"path": path, "text": STARTUP[path].decode()}
    text = acmi.bootstrap(agent, format="markdown").text
    at = [text.index(f"## {t}") for t in ("SOUL.md", "USER.md", "AGENTS.md", "ACTIVE-CONTEXT.md")]
    assert at == sorted(at)  # in the seed's order, before the other memory files
    assert "I am Atlas." in text and bundle.problems == []


def test_group_loads_soul_and_user_and_a_subagent_none(acmi: Acmi) -> None:
    agent = "agent:wake-scopes"
    _with_memory(acmi, agent)
    group = acmi.bootstrap(agent, scope="group").to_dict()["sections"]
    assert list(group)[:2] == ["soul", "user"] and "agents" not in group
    assert group["soul"]["path"] == "SOUL.md"
    sub = acmi.bootstrap(agent, scope="subagent").to_dict()["sections"]
    assert not {"soul", "user", "agents"} & set(sub)


def test_the_budget_cuts_the_manual_before_identity(acmi: Acmi) -> None:
    agent = "agent:wake-budget"
    big = {**STARTUP, "AGENTS.md": b"# AGENTS.md\n" + b"- a rule of how I work\n" * 300}
    acmi.memory.import_snapshot(agent, parse_tree(big))
    bundle = acmi.bootstrap(agent, format="markdown", max_bytes=4096)
    assert bundle.cut.get("agents") == 1 and "soul" not in bundle.cut
    assert "I am Atlas." in bundle.text


def test_the_bundle_is_per_tenant(acmi: Acmi) -> None:
    a, b = acmi.for_tenant("wake-acme"), acmi.for_tenant("wake-globex")
    _with_memory(a, "agent:atlas")
    theirs = b.bootstrap("agent:atlas").to_dict()["sections"]
    assert theirs["soul"] is None and theirs["user"] is None
    assert a.bootstrap("agent:atlas").to_dict()["sections"]["soul"] is not None

"""`acmi memory ...` against a real Redis: import a seed workspace with a progress bar on
stderr, export it back byte for byte, and the other commands; errors exit 2 naming the
field."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from acmi_core.cli import main
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"


@pytest.fixture
def redis_env(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> str:
    url = redis_server.url_for(DB["cli"])
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    return url


@pytest.fixture
def tenant() -> str:
    """A tenant of its own: the cli database is shared by the CLI tests."""
    return f"t-{uuid.uuid4().hex[:12]}"


def run(capsys: pytest.CaptureFixture[str], tenant: str, *argv: str) -> tuple[int, Any, str]:
    try:
        code = main(["--tenant", tenant, "memory", *argv])
    except SystemExit as exc:  # `memory debug` exits 1 when it finds problems
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip().startswith("{") else out, err


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_import_export_round_trip(
    redis_env: str, tenant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, err = run(capsys, tenant, "import", "agent:atlas", "--dir", str(FIXTURE))
    assert code == 0, err
    assert result["events_added"] == 376
    assert f"{result['writes']}/{result['writes']} writes" in err  # the progress bar
    code, again, _ = run(capsys, tenant, "migrate", "agent:atlas", "--dir", str(FIXTURE), "--quiet")
    assert code == 0 and again["writes"] == 0

    code, exported, _ = run(capsys, tenant, "export", "agent:atlas", "--dir", str(tmp_path))
    assert code == 0 and len(exported["files"]) == 32
    assert tree(tmp_path) == tree(FIXTURE)


def test_the_commands(
    redis_env: str, tenant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, tenant, "import", "agent:atlas", "--dir", str(FIXTURE), "--quiet")
    code, stored, _ = run(capsys, tenant, "remember", "agent:atlas", "Pin the Dagster version")
    assert code == 0 and stored["layer"] == "warm"
    code, found, _ = run(capsys, tenant, "search", "agent:atlas", "dagster", "version")
    # in the top 3: hybrid ranks by meaning too (the lines under a Dagster heading)
    assert code == 0 and "- Pin the Dagster version" in [h["text"] for h in found["hits"][:3]]
    code, status, _ = run(capsys, tenant, "status", "agent:atlas")
    assert code == 0 and status["layers"]["warm"]["verdict"] == "ok"
    code, text, _ = run(capsys, tenant, "active", "agent:atlas", "--text")
    assert code == 0 and text == (FIXTURE / "ACTIVE-CONTEXT.md").read_text()
    code, summary, _ = run(capsys, tenant, "daily-summary", "agent:atlas", "--date", "2026-02-03")
    assert code == 0 and summary["path"] == "memory/2026-02-03.md"
    code, topic, _ = run(capsys, tenant, "topic-create", "agent:atlas", "vendor-x", "--name", "X")
    assert code == 0 and topic["created"] is True
    note = tmp_path / "handoff.md"
    note.write_text("Done: import\nNext: review\n")
    assert run(capsys, tenant, "handoff", "agent:atlas", "--file", str(note))[0] == 0
    code, taken, _ = run(capsys, tenant, "handoff", "agent:atlas", "--take")
    assert taken["handoff"]["text"] == "Done: import\nNext: review\n"
    code, pruned, _ = run(capsys, tenant, "prune", "agent:atlas")
    assert code == 0 and "moved" in pruned
    code, reviewed, _ = run(capsys, tenant, "review", "agent:atlas")
    assert code == 0 and "promoted" in reviewed
    code, debug, _ = run(capsys, tenant, "debug", "agent:atlas")
    # the fixture's topics and schedule are months old by the real clock: exit 1
    assert code == 1 and not debug["ok"] and debug["stale"]

    code, _, err = run(capsys, tenant, "topic-create", "agent:atlas", "bad slug")
    assert code == 2 and "error: slug:" in err
    code, _, err = run(capsys, tenant, "import", "agent:atlas", "--dir", str(FIXTURE), "--strict")
    assert code == 2 and "Summarize, stop transcribing" in err


STARTUP = {
    "SOUL.md": b"# SOUL.md\r\nI am Atlas.  \r\nno final newline",
    "USER.md": b"# USER.md\n\n- Priya, Europe/Lisbon\n\n",
    "AGENTS.md": b"# AGENTS.md\n\n1. Write it down.\n",
}


def test_the_startup_files_import_and_export_byte_for_byte(
    redis_env: str, tenant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24 item 7: SOUL.md, USER.md and AGENTS.md are no longer `ignored`."""
    workspace = tmp_path / "in"
    for path, data in {**tree(FIXTURE), **STARTUP}.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_bytes(data)
    code, result, err = run(capsys, tenant, "import", "agent:atlas", "--dir", str(workspace))
    assert code == 0, err
    assert result["ignored"] == [] and result["startup_written"] == 3
    out = tmp_path / "out"
    code, exported, _ = run(capsys, tenant, "export", "agent:atlas", "--dir", str(out))
    assert code == 0 and len(exported["files"]) == 35
    assert tree(out) == tree(workspace)


def test_the_handoff_template_from_its_parts(
    redis_env: str, tenant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["handoff", "agent:atlas", "--done", "imported", "--done", "reviewed"]
    code, left, err = run(capsys, tenant, *argv, "--next-step", "archive Q4", "--gotcha", "slow")
    assert code == 0, err
    assert left["text"].startswith("# HANDOFF.md\n\n## What Was Done\n- imported\n- reviewed\n")
    assert (
        "## Next Steps\n- archive Q4\n" in left["text"]
        and "## Key Decisions\n- none" in left["text"]
    )
    code, taken, _ = run(capsys, tenant, "handoff", "agent:atlas", "--take")
    assert code == 0 and taken["handoff"]["text"] == left["text"]

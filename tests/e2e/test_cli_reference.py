"""Every command of the reference `acmi` CLI (and its invite-agent and quota-monitor tools),
run through ``main`` in-process on a real redis-server, each checked by reading back what
it stored through the client (or the CLI); then the installed console script and its
shell completion in a subprocess.

The reference's own behaviour is the yardstick: `profile`/`signal` replace, `event`'s
colon form, `cat`'s key forms and `--since=24h`, `spawn`'s `unknown` defaults. `exec`
(it ran shell commands) must not exist."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any, Final

import pytest

from acmi_core import Acmi, create_acmi
from acmi_core.base.keys import COORDINATION_THREAD
from acmi_core.base.settings import Settings
from acmi_core.cli import main
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import console_script

DB: Final = 14  # this module's database on the session's redis-server (tests/kit.DB ends at 6)
HOUR: Final = 3_600_000
BOX: Final = ("┏", "┃", "└")  # rich's table borders


@pytest.fixture
def url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> str:
    """The CLI on a flushed database of the session's redis, tenant `default`, and no
    config file or API in the way."""
    redis_server.flush(DB)
    for name in (
        "UPSTASH_REDIS_REST_URL",
        "UPSTASH_REDIS_REST_TOKEN",
        "ACMI_API_KEY",
        "ACMI_API_URL",
        "ACMI_PROFILE",
        "ACMI_DEFAULT_TENANT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_CONFIG", str(tmp_path / "absent.toml"))
    address = redis_server.url_for(DB)
    monkeypatch.setenv("ACMI_REDIS_URL", address)
    return address


@pytest.fixture
def acmi(url: str) -> Iterator[Acmi]:
    """The client on the CLI's store and tenant: what a command wrote, read back."""
    store = RedisStore.from_url(url)
    yield create_acmi(store, Settings())
    store.close()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    """A command that must succeed; its stdout parsed as JSON (stdout is piped: JSON)."""
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    return json.loads(out)


def stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))


# --- entities ------------------------------------------------------------------------------


def test_profile_replaces_merges_shows_and_reads_stdin(
    acmi: Acmi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(capsys, "profile", "sales", "client-1", '{"name": "ClientCo", "stage": "lead"}')
    replaced = ok(capsys, "profile", "sales", "client-1", '{"stage": "proposal"}')
    # the reference SETs the whole document: the old name is gone
    assert "name" not in replaced and replaced["stage"] == "proposal"
    assert acmi.profile.get("sales:client-1") == replaced
    merged = ok(capsys, "profile", "sales", "client-1", '{"owner": "ann"}', "--merge")
    assert (merged["stage"], merged["owner"]) == ("proposal", "ann")
    assert acmi.profile.get("sales:client-1") == merged
    assert ok(capsys, "profile", "sales", "client-1") == merged  # no JSON: shown
    assert ok(capsys, "profile", "sales", "nobody") is None
    stdin(monkeypatch, '{"name": "From stdin", "big": [1, 2, 3]}')
    ok(capsys, "profile", "sales", "client-2", "-")
    stored = acmi.profile.get("sales:client-2")
    assert stored is not None
    assert (stored["name"], stored["big"]) == ("From stdin", [1, 2, 3])
    assert sorted(acmi.list("sales")) == ["sales:client-1", "sales:client-2"]


def test_signal_replaces_unless_merge(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    assert ok(capsys, "signal", "sales", "c", '{"a": 1, "b": 2}') == {"a": 1, "b": 2}
    assert ok(capsys, "signal", "sales", "c", '{"c": 3}') == {"c": 3}
    assert acmi.signals.all("sales:c") == {"c": 3}
    assert ok(capsys, "signal", "sales", "c", '{"d": 4}', "--merge") == {"c": 3, "d": 4}
    assert acmi.signals.all("sales:c") == {"c": 3, "d": 4}


def test_event_stores_every_flag(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    shown = ok(
        capsys, "event", "sales", "c", "gmail", "Sent the PDF proposal.",
        "--kind", "email-sent", "--correlation-id", "prop-1", "--parent", "deal-1",
        "--payload", '{"pages": 4}',
    )  # fmt: skip
    (stored,) = acmi.timeline.read("sales:c")
    assert stored.to_dict() == shown
    assert (stored.source, stored.kind, stored.summary) == ("gmail", "email-sent", shown["summary"])
    assert shown["correlationId"] == "prop-1"
    assert shown["parentCorrelationId"] == "deal-1"
    assert shown["payload"] == {"pages": 4}


def test_event_reference_colon_form(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    ok(capsys, "event", "thread:pm", "agent:x", "colon form summary")
    (stored,) = acmi.timeline.read("thread:pm")
    assert (stored.source, stored.summary, stored.kind) == ("agent:x", "colon form summary", "note")
    assert stored.correlationId.startswith("cli-")  # a fresh one when none is given
    code, _, err = cli(capsys, "event", "thread", "pm", "agent:x")  # no summary, no colon
    assert code == 2 and "summary" in err


def test_get_list_delete(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    acmi.profile.set("sales:c", {"name": "C"})
    acmi.signals.replace("sales:c", {"hot": True})
    for i in range(3):
        acmi.timeline.append("sales:c", _event(f"e{i}", ts=1_000 + i))
    context = ok(capsys, "get", "sales", "c", "--events", "2")
    assert context["profile"]["name"] == "C" and context["signals"] == {"hot": True}
    assert [e["summary"] for e in context["timeline"]] == ["e1", "e2"]
    acmi.profile.set("sales:d", {"name": "D"})
    assert sorted(ok(capsys, "list", "sales")) == ["sales:c", "sales:d"]
    assert ok(capsys, "list", "nothing-here") == []
    assert ok(capsys, "delete", "sales", "c") == {"deleted": "sales:c"}
    assert acmi.profile.get("sales:c") is None and acmi.timeline.read("sales:c") == []
    assert ok(capsys, "list", "sales") == ["sales:d"]


def test_list_without_a_namespace_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "list")
    assert (code, out) == (2, "")  # the reference printed [] here
    assert "NS" in err
    code, out, err = cli(capsys, "list", "Not A Namespace")
    assert (code, out) == (2, "")
    assert "category" in err


# --- agents --------------------------------------------------------------------------------


def test_bootstrap_json_and_markdown(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    acmi.profile.set("agent:claude", {"name": "Claude"})
    acmi.signals.replace("agent:claude", {"mood": "calm"})
    acmi.agents.join("claude", "thread:launch", "lead")
    acmi.agents.set_rollup("claude", "yesterday: shipped the CLI")
    acmi.timeline.append("agent:claude", _event("woke up"))
    bundle = ok(capsys, "bootstrap", "claude")
    text = json.dumps(bundle)
    for seen in ("Claude", "calm", "thread:launch", "yesterday: shipped the CLI", "woke up"):
        assert seen in text
    code, out, err = cli(capsys, "bootstrap", "claude", "--format", "markdown")
    assert code == 0, err
    assert out.startswith("# Wake bundle for agent:claude")
    assert "## Rollup" in out and "yesterday: shipped the CLI" in out
    assert acmi.agents.spawns("claude") == []  # reading logs nothing


def test_a_bootstrap_budget_too_small_is_refused_with_the_floor(
    acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "bootstrap", "claude", "--max-tokens", "5", "--format", "markdown")
    assert code != 0 and out == ""
    assert "error: max_tokens: 5 tokens" in err and "(rule: min_budget)" in err
    floor = err.split("min_budget is ")[1].split()[0]
    argv = ["bootstrap", "claude", "--max-tokens", floor, "--format", "markdown"]
    code, out, err = cli(capsys, *argv)
    assert code == 0 and out.startswith("# "), err


def test_bootstrap_hook_logs_the_spawn_and_prints_the_bundle(
    acmi: Acmi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    acmi.agents.set_rollup("claude", "where we left off")
    # what Claude Code gives a SessionStart hook on stdin
    hook = {
        "session_id": "9f1c2e7a-session",
        "transcript_path": "/home/u/.claude/projects/x/9f1c2e7a.jsonl",
        "cwd": "/home/u/project",
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    stdin(monkeypatch, json.dumps(hook))
    argv = ["bootstrap", "claude", "--format", "markdown", "--hook", "--host", "laptop"]
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    assert out.startswith("# Wake bundle for agent:claude") and "where we left off" in out
    assert "session 9f1c2e7a-session" in out  # the bundle shows the spawn it logged
    (spawn,) = acmi.agents.spawns("claude")
    assert (spawn["session_id"], spawn["model_id"], spawn["host"]) == (
        "9f1c2e7a-session",
        "unknown",
        "laptop",
    )
    # the spawn record never goes in the timeline; the session start's daily-note line does
    # (seed §8: daily notes are timeline events), once
    (line,) = acmi.timeline.read("agent:claude")
    assert line.payload["memory"] == "daily"
    assert line.summary.endswith("Started session 9f1c2e7a-session (unknown)")
    # a resume and a compact of the session run the hook again: still one spawn
    for source in ("resume", "compact"):
        stdin(monkeypatch, json.dumps(hook | {"source": source}))
        code, out, err = cli(capsys, *argv)
        assert code == 0 and "session 9f1c2e7a-session" in out, err
    assert [s["session_id"] for s in acmi.agents.spawns("claude")] == ["9f1c2e7a-session"]
    stdin(monkeypatch, json.dumps(hook | {"session_id": "next-session"}))
    assert cli(capsys, *argv)[0] == 0
    assert [s["session_id"] for s in acmi.agents.spawns("claude")] == [
        "next-session",
        "9f1c2e7a-session",
    ]


def test_spawn_defaults_to_unknown(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    shown = ok(capsys, "spawn", "claude")
    assert (shown["session_id"], shown["model_id"]) == ("unknown", "unknown")
    ok(capsys, "spawn", "agent:claude", "sess-2", "opus", "--host", "laptop")
    newest, oldest = acmi.agents.spawns("claude")
    assert (newest["session_id"], newest["model_id"], newest["host"]) == (
        "sess-2",
        "opus",
        "laptop",
    )
    assert oldest == shown


def test_active_add_list_remove(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    assert ok(capsys, "active", "claude", "add", "thread:pm", "lead")["role"] == "lead"
    assert ok(capsys, "active", "claude", "add", "thread:ops")["role"] == "participant"
    listed = ok(capsys, "active", "claude", "list")
    assert {k: v["role"] for k, v in listed.items()} == {
        "thread:pm": "lead",
        "thread:ops": "participant",
    }
    assert listed == acmi.agents.active("claude") == ok(capsys, "active", "claude")
    assert ok(capsys, "active", "claude", "remove", "thread:pm") == {"removed": "thread:pm"}
    assert list(acmi.agents.active("claude")) == ["thread:ops"]
    assert cli(capsys, "active", "claude", "add")[0] == 2  # no thread
    assert cli(capsys, "active", "claude", "join", "thread:x")[0] == 2


def test_rollup_set(
    acmi: Acmi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ok(capsys, "rollup-set", "claude", "the summary")["summary"] == "the summary"
    rollup = acmi.agents.rollup("claude")
    assert rollup is not None and rollup["summary"] == "the summary"
    stdin(monkeypatch, "a long\nsummary from stdin")
    ok(capsys, "rollup-set", "claude", "-")
    rollup = acmi.agents.rollup("claude")
    assert rollup is not None and rollup["summary"] == "a long\nsummary from stdin"


def test_heartbeat(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    beat = ok(capsys, "heartbeat", "claude", "--status", "BLOCKED", "--note", "waiting on review")
    signals = acmi.signals.all("agent:claude")
    assert (signals["status"], signals["status_note"]) == ("BLOCKED", "waiting on review")
    assert signals["last_heartbeat_ts"] == beat["ts"]
    assert cli(capsys, "heartbeat", "claude", "--status", "no/slash")[0] == 2


def test_invite_agent_is_idempotent(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("invite-agent", "scout", "--role", "research", "--model", "opus", "--lane", "docs")
    first = ok(capsys, *argv)
    assert (first["created"], first["action"], first["tier"]) == (True, "onboarded", "Utility")
    again = ok(capsys, *argv)
    assert (again["created"], again["action"], again["event"]) == (False, "unchanged", None)
    onboarded = [e for e in acmi.timeline.read(COORDINATION_THREAD) if e.kind == "agent-onboarded"]
    assert len(onboarded) == 1
    profile = acmi.profile.get("agent:scout")
    assert profile is not None
    assert (profile["role"], profile["model_id"], profile["lane"], profile["rbac_tier"]) == (
        "research",
        "opus",
        "docs",
        "Utility",
    )


# --- cat -----------------------------------------------------------------------------------


def test_cat_merges_newest_first_in_every_key_form(
    acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time() * 1000)
    acmi.timeline.append("thread:pm", _event("pm old", ts=now - 3 * HOUR, kind="plan"))
    acmi.timeline.append("agent:bentley", _event("bentley mid", ts=now - 2 * HOUR))
    acmi.timeline.append("thread:pm", _event("pm new", ts=now - HOUR // 2, kind="plan"))
    acmi.timeline.append("user:x", _event("x newest", ts=now - 60_000))
    forms = ("acmi:thread:pm:timeline", "agent:bentley:timeline", "user:x")
    code, out, err = cli(capsys, "cat", *forms)
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "x newest",
        "pm new",
        "bentley mid",
        "pm old",
    ]
    # the reference's line: `YYYY-MM-DD HH:MMZ [ns:id / kind] summary`
    assert lines[1].endswith(" [thread:pm / plan] pm new")
    assert len(lines[1].split(" [")[0]) == len("2026-11-30 16:05Z")
    events = ok(capsys, "cat", *forms, "--json")
    assert [(e["entity"], e["summary"]) for e in events] == [
        ("user:x", "x newest"),
        ("thread:pm", "pm new"),
        ("agent:bentley", "bentley mid"),
        ("thread:pm", "pm old"),
    ]
    # windows, in the reference's --opt=value spelling too
    since = ok(capsys, "cat", *forms, "--since=150m", "--json")
    assert [e["summary"] for e in since] == ["x newest", "pm new", "bentley mid"]
    window = ok(capsys, "cat", *forms, "--since", "150m", "--until", "10m", "--json")
    assert [e["summary"] for e in window] == ["pm new", "bentley mid"]
    assert [e["summary"] for e in ok(capsys, "cat", *forms, "--limit=2", "--json")] == [
        "x newest",
        "pm new",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["--since", "yesterday"],
        ["--since=24"],
        ["--until", "-1h"],
        ["--since", "1h", "--until", "2h"],  # until further back than since
        ["--limit", "0"],
    ],
)
def test_cat_bad_window_is_a_usage_error(
    url: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = cli(capsys, "cat", "thread:pm", *argv)
    assert (code, out) == (2, "")
    (line,) = [line for line in err.splitlines() if not line.startswith("#")]
    assert line.startswith("error: ") and "rule:" in line


def test_cat_refuses_a_name_that_is_not_a_timeline(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "cat", "acmi:just-one-part:timeline")
    assert code == 2 and "ns:id" in err


# --- work ----------------------------------------------------------------------------------


def test_workflow_commands_run_the_rl_cycle_per_tenant(
    acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = ok(capsys, "workflow", "execute", "deploy", "build", "claude", "--correlation-id", "r1")
    assert (ran["kind"], ran["correlationId"], ran["payload"]["step"]) == (
        "step-executed",
        "r1",
        "build",
    )
    again = ["workflow", "execute", "deploy", "build", "claude", "--correlation-id", "r2"]
    code, out, err = cli(capsys, *again)
    assert (code, out) == (4, "") and "run r1 has no assessment entry" in err, err
    assert "assessment_required" in err
    # another tenant's step is its own cycle
    other = ok(capsys, "--tenant", "t-two", *again)
    assert other["tenant_id"] == "t-two"
    scored = ok(
        capsys, "workflow", "assess", "deploy", "build", "85", "claude",
        "--correlation-id", "r1", "--criteria", '{"tests": "green"}', "--note", "fast",
    )  # fmt: skip
    assert scored["payload"]["score"] == 85 and scored["payload"]["criteria"] == {"tests": "green"}
    assert ok(capsys, *again)["correlationId"] == "r2"
    learned = ok(capsys, "workflow", "improve", "deploy", "build", "cache the wheels", "claude")
    assert learned["kind"] == "improvement"
    lessons = ok(capsys, "workflow", "lessons", "deploy", "--limit", "5")
    assert lessons == {
        "workflow": "workflow:deploy",
        "lessons": acmi.workflows.lessons(workflow="deploy", limit=5),
    }
    assert [e["payload"]["lesson"] for e in lessons["lessons"]] == ["cache the wheels"]
    assert ok(capsys, "--tenant", "t-two", "workflow", "lessons", "deploy")["lessons"] == []
    assert [e["correlationId"] for e in acmi.workflows.unassessed("deploy").executions] == ["r2"]
    code, _, err = cli(
        capsys, "workflow", "assess", "deploy", "build", "85", "claude", "--criteria", "7"
    )
    assert code == 2 and "--criteria" in err


def test_work_commands(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    created = ok(
        capsys, "work", "create", "acmi-launch", '{"title": "Launch"}', "--owner", "bentley"
    )
    assert created["profile"]["title"] == "Launch"
    ok(capsys, "work", "event", "acmi-launch", "claude-engineer", "manifesto v0 done", "sess_abc")
    ok(capsys, "work", "event", "acmi-launch", "agent:bentley", "reviewed", "--kind", "review")
    assert ok(capsys, "work", "signal", "acmi-launch", '{"progress": 40}')["progress"] == 40
    item = ok(capsys, "work", "get", "acmi-launch")
    core = acmi.work.get("acmi-launch", 50).to_dict()
    # the reference's keys first (work_id, timeline newest first), then every key of ours
    assert list(item)[:5] == ["work_id", "profile", "signals", "timeline", "sessions"]
    assert item["work_id"] == core["id"] and set(core) <= set(item)
    assert item["timeline"] == core["timeline"][::-1]
    assert [e["summary"] for e in item["timeline"]] == ["reviewed", "manifesto v0 done"]
    assert item["signals"]["progress"] == 40
    assert ok(capsys, "work", "sessions", "acmi-launch") == ["sess_abc"]  # a bare array
    assert ok(capsys, "work", "sessions", "acmi-launch", "--page")["sessions"] == ["sess_abc"]
    ok(capsys, "work", "create", "side-idea", '{"title": "Idea"}')
    assert sorted(ok(capsys, "work", "list")) == ["acmi-launch", "side-idea"]
    assert ok(capsys, "work", "list", "--owner", "bentley") == ["acmi-launch"]
    ok(capsys, "work", "signal", "side-idea", '{"status": "done"}')
    assert ok(capsys, "work", "list") == ["acmi-launch"]
    assert len(ok(capsys, "work", "list", "--status", "all")) == 2
    # the paged form, a page at a time
    page = ok(capsys, "work", "list", "--status", "all", "--page", "--limit", "1")
    assert len(page["items"]) == 1 and page["next_cursor"] is not None
    rest = ok(capsys, "work", "list", "--status", "all", "--cursor", page["next_cursor"])
    assert {page["items"][0]["id"], rest["items"][0]["id"]} == {"acmi-launch", "side-idea"}


# --- quota-monitor -------------------------------------------------------------------------


def test_quota_monitor_statuses_and_exit_codes(
    acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(capsys, "quota", "report", "anthropic", "tokens", "--remaining", "80", "--limit", "100")
    result = ok(capsys, "quota-monitor")
    assert result["status"] == "green"
    ok(capsys, "quota", "report", "gemini", "requests", "--remaining", "20", "--limit", "100")
    code, out, _ = cli(capsys, "quota-monitor")
    assert (code, json.loads(out)["status"]) == (0, "yellow")  # red is the default line
    assert cli(capsys, "quota-monitor", "--fail-on", "yellow")[0] == 1
    ok(capsys, "quota", "report", "openai", "tokens", "--remaining", "5", "--limit", "100")
    code, out, _ = cli(capsys, "quota-monitor")
    shown = json.loads(out)
    assert (code, shown["status"]) == (1, "red")
    assert {p["provider"]: p["status"] for p in shown["providers"]} == {
        "anthropic": "green",
        "gemini": "yellow",
        "openai": "red",
    }
    code, out, _ = cli(capsys, "quota-monitor", "--fail-on", "never")
    assert (code, json.loads(out)["status"]) == (0, "red")
    only = ok(capsys, "quota-monitor", "--provider", "anthropic")
    assert [p["provider"] for p in only["providers"]] == ["anthropic"]
    assert cli(capsys, "quota-monitor", "--fail-on", "sometimes")[0] == 2
    assert acmi.signals.all("quota:openai")["tokens"]["remaining"] == 5


# --- coordination --------------------------------------------------------------------------


def test_lock_claim_renew_release_show(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    claimed = ok(capsys, "lock", "claim", "deploy:prod", "agent:atlas", "--ttl-ms", "30000")
    token = claimed["owner_token"]
    shown = ok(capsys, "lock", "show", "deploy:prod")
    assert shown["owner"] == "agent:atlas" and "owner_token" not in shown
    code, out, err = cli(capsys, "lock", "claim", "deploy:prod", "agent:other")
    assert (code, out) == (4, "")
    assert "held by agent:atlas" in err
    renewed = ok(capsys, "lock", "renew", "deploy:prod", token, "--ttl-ms", "90000")
    assert renewed["expires_at"] > claimed["expires_at"]
    assert cli(capsys, "lock", "renew", "deploy:prod", "not-the-token")[0] == 4
    ok(capsys, "lock", "release", "deploy:prod", token)
    assert acmi.locks.get("deploy:prod").to_dict().get("owner") is None
    assert ok(capsys, "lock", "claim", "deploy:prod", "agent:other")["fence"] > claimed["fence"]


def test_hitl_create_list_resolve(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    created = ok(
        capsys, "hitl", "create", "deploy", "approve the prod deploy?",
        "--asked-by", "agent:atlas", "--urgency", "P0", "--to", "user:mikey",
        "--correlation-id", "h-1",
    )  # fmt: skip
    assert created["created"] is True
    again = ok(
        capsys, "hitl", "create", "deploy", "approve the prod deploy?",
        "--asked-by", "agent:atlas", "--to", "user:mikey", "--correlation-id", "h-1",
    )  # fmt: skip
    assert again["created"] is False
    listed = ok(capsys, "hitl", "list", "--to", "user:mikey")["items"]
    assert [i["correlationId"] for i in listed] == ["h-1"]
    assert ok(capsys, "hitl", "list")["items"] == []  # the shared queue is another one
    ok(capsys, "hitl", "resolve", "h-1", "yes, go", "--by", "user:mikey")
    assert ok(capsys, "hitl", "list", "--to", "user:mikey")["items"] == []
    closed = ok(capsys, "hitl", "list", "--to", "user:mikey", "--state", "closed")["items"]
    assert [i["correlationId"] for i in closed] == ["h-1"]
    (told,) = [e for e in acmi.timeline.read(COORDINATION_THREAD) if e.kind == "hitl-resolved"]
    assert told.correlationId == "h-1"
    assert cli(capsys, "hitl", "resolve", "h-1", "again", "--by", "user:mikey")[0] == 4
    assert cli(capsys, "hitl", "resolve", "h-none", "x", "--by", "user:mikey")[0] == 3


# --- the CLI as a whole --------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", ["keys", "sources", "doctor", "migrate", "memory", "jobs", "agents"]
)
def test_operator_commands_have_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, command, "--help")
    assert code == 0
    assert "Usage: acmi " + command in out


def test_exit_code_per_error_class(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "profile", "sales", "c", "{not json")
    assert (code, out) == (2, "")
    assert err.endswith(
        "\nerror: json: is not valid JSON (Expecting property name enclosed in double quotes)"
        " (rule: json)\n"
    )
    assert cli(capsys, "profile", "sales", "c", "[1, 2]")[0] == 2  # not an object
    assert cli(capsys, "no-such-command")[0] == 2
    code, out, err = cli(capsys, "work", "get", "missing")
    assert (code, out) == (3, "")
    assert "missing" in err and "rule: exists" in err
    acmi.locks.claim("deal:acme", "agent:a", 60_000)
    assert cli(capsys, "lock", "claim", "deal:acme", "agent:b")[0] == 4
    assert acmi.list("sales") == []  # nothing the refused commands carried was written


def test_exec_does_not_exist(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "exec", "work", "fix-1", "agent:claude", "touch", "/tmp/acmi-exec")
    assert (code, out) == (2, "")
    assert "No such command 'exec'" in err
    assert acmi.timeline.read("work:fix-1") == []


def test_json_is_accepted_after_the_command(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    acmi.profile.set("user:x", {"name": "X"})
    for argv in (("get", "user", "x", "--json"), ("--json", "get", "user", "x")):
        assert ok(capsys, *argv)["profile"]["name"] == "X"
    # after `--` it is an argument: here the summary itself
    ok(capsys, "event", "user", "x", "agent:a", "--", "--json")
    assert acmi.timeline.read("user:x")[-1].summary == "--json"
    # -o / --output after the command too
    for argv in (("get", "user", "x", "-o", "table"), ("get", "user", "x", "--output=table")):
        code, out, err = cli(capsys, *argv)
        assert code == 0, err
        assert any(box in out for box in BOX) and "X" in out


def test_table_output_renders_and_never_reads_markup(
    acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    markup = "[red]x[/red] [link=https://evil.example]y[/link]"
    acmi.profile.set("user:x", {"name": "[bold]Name[/bold]"})
    code, out, err = cli(capsys, "-o", "table", "event", "user", "x", "agent:a", markup)
    assert code == 0, err
    assert any(box in out for box in BOX)
    assert "[red]x[/red]" in out
    code, out, err = cli(capsys, "-o", "table", "get", "user", "x")
    assert code == 0, err
    assert all(box in out for box in BOX)
    assert "[bold]Name[/bold]" in out
    assert "[red]x[/red]" in out and "[link=https://evil.example]y[/link]" in out
    code, out, _ = cli(capsys, "-o", "table", "cat", "user:x")
    assert code == 0 and out.rstrip().endswith(markup)
    code, out, _ = cli(capsys, "-o", "table", "list", "user")
    assert (code, out) == (0, "user:x\n")  # one id a line for people


def test_table_of_active_threads_shows_every_thread(
    acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    # a thread may be called anything, "threads" included (the store keeps it as given)
    acmi.agents.join("claude", "threads", "lead")
    acmi.agents.join("claude", "thread:pm", "[red]owner[/red]")
    code, out, err = cli(capsys, "-o", "table", "active", "claude", "list")
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert sorted(row.split("│")[1].strip() for row in rows) == ["thread:pm", "threads"]
    assert "[red]owner[/red]" in out


def test_json_output_is_the_stored_value(acmi: Acmi, capsys: pytest.CaptureFixture[str]) -> None:
    big = 2**63 + 1  # past what JavaScript (and a float) keeps exactly
    ok(capsys, "signal", "user", "x", json.dumps({"n": big}))
    code, out, _ = cli(capsys, "-o", "json", "get", "user", "x")
    assert code == 0 and f'"n": {big}' in out


# --- the installed console script ----------------------------------------------------------


def _script_env(url: str, **extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ACMI_", "UPSTASH_", "_ACMI_"))
    }
    env.update(ACMI_REDIS_URL=url, ACMI_CONFIG=os.environ["ACMI_CONFIG"], **extra)
    return env


@pytest.mark.slow  # fresh interpreters
def test_the_installed_console_script(acmi: Acmi, url: str) -> None:
    script = console_script()

    def run(
        *argv: str, stdin_text: str | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *argv],
            input=stdin_text,
            capture_output=True,
            text=True,
            env=_script_env(url, **env),
            timeout=60,
            check=False,
        )

    done = run("profile", "user", "sub", "-", stdin_text='{"name": "Piped"}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "Piped"  # piped stdout: JSON
    assert done.stderr.startswith("# store: redis")  # chatter on stderr only
    assert acmi.profile.get("user:sub") is not None
    done = run("event", "thread:pm", "agent:sub", "from a shell")
    assert done.returncode == 0, done.stderr
    assert acmi.timeline.read("thread:pm")[0].summary == "from a shell"
    done = run("work", "get", "missing")
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr.count("\n") == 2 and "Traceback" not in done.stderr  # note + one line
    # shell completion: bash sets COMP_WORDS/COMP_CWORD and _ACMI_COMPLETE=complete_bash
    done = run(_ACMI_COMPLETE="complete_bash", COMP_WORDS="acmi wo", COMP_CWORD="1")
    assert (done.returncode, sorted(done.stdout.split())) == (0, ["work", "workflow"])
    done = run(_ACMI_COMPLETE="complete_bash", COMP_WORDS="acmi work s", COMP_CWORD="2")
    assert sorted(done.stdout.split()) == ["sessions", "signal"]
    # the script to source: `eval "$(acmi --show-completion bash)"`
    done = run("--show-completion", "bash")
    assert done.returncode == 0, done.stderr
    assert "_acmi_completion()" in done.stdout and "_ACMI_COMPLETE=complete_bash" in done.stdout
    assert "complete -o default -F _acmi_completion acmi" in done.stdout


def _event(summary: str, *, ts: int | None = None, kind: str = "note") -> dict[str, Any]:
    event: dict[str, Any] = {
        "source": "agent:test",
        "kind": kind,
        "correlationId": f"c-{summary.replace(' ', '-')}",
        "summary": summary,
    }
    if ts is not None:
        event["ts"] = ts
    return event


def test_reference_shaped_events_read_as_events(
    acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the reference's writers leave on a timeline reads as an event line in the
    bootstrap's markdown and in `cat`: its CLI's {ts, source, summary}, a 17-digit ts
    (read as its first 13 digits, as the reference's cat), a `message` instead of a
    summary, its MCP server's spawn record, a snake_case correlation_id."""
    key = "acmi:agent:claude:timeline"
    ms = 1_764_000_000_000  # 2025-11-24T16:00:00Z
    members = [
        {"ts": ms * 10_000 + 1234, "source": "gmail", "summary": "head cli, 17 digits"},
        {"ts": ms + 1_000, "source": "agent:x", "message": "a message, no summary"},
        {"ts": ms + 2_000, "sessionId": "s-9", "modelId": "m"},
        {
            "ts": ms + 3_000,
            "source": "agent:x",
            "kind": "note",
            "correlation_id": "snake-1",
            "summary": "snake case id",
        },
    ]
    for member in members:
        score = member["ts"] if member["ts"] < 10**13 else ms
        acmi.store.execute(("ZADD", key, score, json.dumps(member, separators=(",", ":"))))
    code, out, err = cli(capsys, "bootstrap", "claude", "--format", "markdown")
    assert code == 0, err
    # one line each, the time relative to the bundle's (the 17-digit ts read as 13
    # digits: the same day as the others), no JSON for a record without a summary
    lines = [
        "{ago} agent:x [note] snake case id (snake-1)",
        "{ago} sessionId=s-9 modelId=m",
        "{ago} agent:x a message, no summary",
        "{ago} gmail head cli, 17 digits",
    ]
    ago = re.search(r"^(\d+ d ago) agent:x \[note\]", out, re.MULTILINE)
    assert ago is not None, out
    assert "\n".join(lines).format(ago=ago.group(1)) in out
    code, out, err = cli(capsys, "cat", "agent:claude", "-o", "table")
    assert code == 0, err
    assert "2025-11-24 16:00Z [agent:claude / gmail] head cli, 17 digits" in out


def test_every_id_list_prints_get_takes_and_get_takes_ns_colon_id(
    acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    acmi.profile.set("user:mikey", {"name": "Mikey"})
    # what the reference CLI's `profile user mikey@example.com '{...}'` writes, and an id
    # with a ':' in it; the same ids under another tenant hold its own data
    for tenant, prefix in (("default", "acmi:"), ("acme", "acmi:tenant:acme:")):
        for local in ("mikey@example.com", "a:b"):
            profile = json.dumps({"name": f"{tenant} {local}"})
            acmi.store.execute(("SET", f"{prefix}user:{local}:profile", profile))
            acmi.store.execute(("SADD", f"{prefix}user:list", local))
    acmi.store.execute(("SADD", "acmi:user:list", "x/y"))  # no HTTP path segment holds it
    code, out, err = cli(capsys, "list", "user")
    assert code == 0 and sorted(json.loads(out)) == [
        "user:a:b",
        "user:mikey",
        "user:mikey@example.com",
    ]
    assert [line for line in err.splitlines() if "left out" in line] == [
        "left out 'user:x/y': entity: id after ':' must be non-empty, with no '/' "
        "(`acmi doctor` reports it as bad_id)"
    ]
    names = {"user:mikey": "Mikey"}
    names |= {e: f"default {e[5:]}" for e in ("user:a:b", "user:mikey@example.com")}
    for entity in json.loads(out):  # every id listed is one `get` takes, in both forms
        assert ok(capsys, "get", entity)["profile"]["name"] == names[entity]
        ns, _, local = entity.partition(":")
        assert ok(capsys, "get", ns, local)["profile"]["name"] == names[entity]
        assert ok(capsys, "profile", ns, local)["name"] == names[entity]
    assert ok(capsys, "--tenant", "acme", "get", "user:mikey@example.com")["profile"] == {
        "name": "acme mikey@example.com"
    }
    # a write still takes only an id that follows the rule
    code, _, err = cli(capsys, "profile", "user", "eve@example.com", "{}")
    assert code == 2 and "id_format" in err
    assert ok(capsys, "get", "user:mikey") == ok(capsys, "get", "user", "mikey")
    code, _, err = cli(capsys, "get", "user")  # neither NS ID nor ns:id
    assert code == 2 and "ns:id" in err


def test_every_id_list_prints_delete_removes_in_its_own_tenant(
    acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    """What reads take, delete takes too: the reference CLI's ``user:mikey@example.com``
    is removed with its index entry, and the other tenant's same id is kept."""
    for prefix in ("acmi:", "acmi:tenant:acme:"):
        acmi.store.execute(("SET", f"{prefix}user:mikey@example.com:profile", '{"name":"M"}'))
        acmi.store.execute(("SADD", f"{prefix}user:list", "mikey@example.com"))
    code, _, err = cli(capsys, "delete", "user", "mikey@example.com")
    assert code == 0, err
    assert acmi.store.execute(("EXISTS", "acmi:user:mikey@example.com:profile")) == 0
    assert acmi.store.execute(("SISMEMBER", "acmi:user:list", "mikey@example.com")) == 0
    assert ok(capsys, "--tenant", "acme", "get", "user:mikey@example.com")["profile"] == {
        "name": "M"
    }

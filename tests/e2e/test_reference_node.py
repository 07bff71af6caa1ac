"""The reference itself, on node, against ours on one redis-server: its CLI's JSON is
the golden output of ours, and its SDK and ours store the same event as one member.

The reference (madezmedia/acmi at 886dfc0) is vendored in tests/reference (its CLI as
is, its SDK transpiled once; see the README there) and talks to the Upstash REST
double in front of the session's redis-server; our CLI talks to that database over
the Redis protocol. Without node the tests skip, saying so (`.ci/run` has it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import redis

from acmi_core import Acmi, create_acmi
from acmi_core.base.settings import Settings
from acmi_core.cli import main
from acmi_core.ops.doctor import Doctor
from acmi_core.ops.findings import Kind
from acmi_core.ops.migrate import Action, Migrate
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import DB

REFERENCE: Final = Path(__file__).resolve().parents[1] / "reference"
NODE: Final = shutil.which("node")


@pytest.fixture
def node() -> str:
    if NODE is None:
        pytest.skip("node is not on PATH: the reference (JavaScript) cannot run here")
    return NODE


@pytest.fixture
def acmi(
    upstash_double: UpstashDouble,
    redis_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[Acmi]:
    """Our CLI and client on the database behind the double (the default tenant: the
    reference's layout)."""
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
    address = redis_server.url_for(DB["upstash_double"])
    monkeypatch.setenv("ACMI_REDIS_URL", address)
    store = RedisStore.from_url(address)
    yield create_acmi(store, Settings())
    store.close()


def reference(node: str, double: UpstashDouble, *argv: str) -> str:
    """The reference CLI's stdout for ``argv``."""
    env = {
        **os.environ,
        "UPSTASH_REDIS_REST_URL": double.url,
        "UPSTASH_REDIS_REST_TOKEN": double.token,
    }
    done = subprocess.run(
        [node, str(REFERENCE / "cli" / "acmi.mjs"), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def reference_append(
    node: str, double: UpstashDouble, appends: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """What the reference SDK's ``timeline.append`` returned for each (entity, event)."""
    spec = json.dumps({"url": double.url, "token": double.token, "appends": appends})
    done = subprocess.run(
        [node, str(REFERENCE / "append.mjs"), spec],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def ours(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def text(value: Any) -> str:
    """JSON.stringify(value, null, 2): the reference's printing (key order kept)."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def head(printed: str, keys: list[str]) -> str:
    """Our printed object cut to its first ``len(keys)`` keys, which must be ``keys``."""
    shown = json.loads(printed)
    assert list(shown)[: len(keys)] == keys
    return text({k: shown[k] for k in keys})


def _event(summary: str, ts: int) -> dict[str, Any]:
    return {"ts": ts, "source": "agent:x", "kind": "note", "correlationId": "c", "summary": summary}


# --- the CLI's JSON: held to the reference CLI's own output ---------------------------------


def test_get_prints_the_references_object_first(
    node: str, upstash_double: UpstashDouble, acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    acmi.profile.set("user:mikey", {"name": "Mikey"})
    acmi.signals.replace("user:mikey", {"mood": "calm", "n": 2})
    for i in range(12):
        acmi.timeline.append("user:mikey", _event(f"e{i}", 1_000 + i))
    golden = reference(node, upstash_double, "get", "user", "mikey")
    assert head(ours(capsys, "get", "user", "mikey"), list(json.loads(golden))) == golden
    assert [e["summary"] for e in json.loads(golden)["timeline_recent"]][:2] == ["e11", "e10"]
    # ours follow: the entity and the timeline oldest first
    shown = json.loads(ours(capsys, "get", "user", "mikey"))
    assert shown["entity"] == "user:mikey" and shown["timeline"][0]["summary"] == "e0"
    # nothing stored: the reference's nulls and []
    golden = reference(node, upstash_double, "get", "user", "nobody")
    assert head(ours(capsys, "get", "user", "nobody"), list(json.loads(golden))) == golden


def test_bootstrap_prints_the_references_object_first(
    node: str, upstash_double: UpstashDouble, acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    acmi.profile.set("agent:claude", {"name": "Claude"})
    acmi.signals.replace("agent:claude", {"mood": "calm"})
    acmi.agents.join("claude", "thread:launch", "lead")
    acmi.agents.set_rollup("claude", "yesterday: shipped")
    for i in range(22):
        acmi.timeline.append("agent:claude", _event(f"e{i}", 1_000 + i))
    for i in range(6):
        acmi.agents.spawn("claude", f"s{i}", "m")
    golden = json.loads(reference(node, upstash_double, "bootstrap", "claude"))
    shown = json.loads(ours(capsys, "bootstrap", "claude"))
    assert list(shown)[: len(golden)] == list(golden)
    for name in ("bootstrapped_at",):  # the clock of each run: same form only
        assert len(shown.pop(name)) == len(golden.pop(name)) == len("2026-12-02T04:46:37.808Z")
    assert text({k: shown[k] for k in golden}) == text(golden)
    assert shown["agent"] == "agent:claude"  # ours follow


def test_work_get_list_sessions_print_the_references_shapes(
    node: str, upstash_double: UpstashDouble, acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    ours(capsys, "work", "create", "launch", '{"title": "Launch"}', "--owner", "bentley")
    ours(capsys, "work", "event", "launch", "agent:claude", "draft done", "sess_a")
    ours(capsys, "work", "event", "launch", "agent:bentley", "reviewed", "sess_b")
    ours(capsys, "work", "signal", "launch", '{"progress": 40}')
    golden = json.loads(reference(node, upstash_double, "work", "get", "launch"))
    shown = json.loads(ours(capsys, "work", "get", "launch"))
    # a Redis set has no order (SMEMBERS): the sessions compare as sets
    golden["sessions"].sort()
    assert head(text(shown), list(golden)) == text(golden)
    assert [e["summary"] for e in golden["timeline"]] == ["reviewed", "draft done"]
    for argv in (("work", "list"), ("work", "sessions", "launch")):
        golden = reference(node, upstash_double, *argv)
        assert sorted(json.loads(ours(capsys, *argv))) == sorted(json.loads(golden))
        assert isinstance(json.loads(golden), list)
    # ours' paging: --page
    page = json.loads(ours(capsys, "work", "list", "--page"))
    assert [i["id"] for i in page["items"]] == ["launch"] and page["next_cursor"] is None


# --- one event, one member -------------------------------------------------------------------


def test_the_same_event_from_both_writers_is_one_member(
    node: str, upstash_double: UpstashDouble, acmi: Acmi, redis_server: RedisServer
) -> None:
    events: list[tuple[str, dict[str, Any]]] = [
        ("user:a", {**_event("explicit tenant", 5_000), "tenant_id": "acme"}),
        ("user:a", _event("all filled", 5_001)),
        ("user:a", {**_event("both given", 5_002), "speaker_type": "human", "tenant_id": "t"}),
        ("user:a", {**_event("no speaker", 5_003), "source": "gmail", "tenant_id": "acme"}),
        ("user:a", {**_event("no speaker, filled", 5_004), "source": "gmail"}),
        ("user:a", {**_event("payload", 5_005), "payload": {"b": 1, "a": [1.5, "x"]}}),
    ]
    theirs = reference_append(node, upstash_double, events)
    for entity, event in events:
        acmi.timeline.append(entity, event)
    with redis.Redis.from_url(redis_server.url_for(DB["upstash_double"])) as raw:
        members = raw.zrange("acmi:user:a:timeline", 0, -1)
    assert len(members) == len(events), members
    assert [json.loads(m) for m in members] == theirs
    assert theirs[0]["tenant_id"] == "acme" and list(theirs[0])[-2:] == [
        "tenant_id",
        "speaker_type",
    ]
    assert theirs[1]["tenant_id"] == "madez"  # the reference's default, and ours


# --- work items the reference created ----------------------------------------------------------


def test_reference_work_items_reach_the_owners_view(
    node: str, upstash_double: UpstashDouble, acmi: Acmi, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = '{"title":"ACMI public launch","owner":"bentley"}'
    reference(node, upstash_double, "work", "create", "acmi-launch", profile)
    reference(node, upstash_double, "work", "create", "no-owner", '{"title":"x"}')
    reference(node, upstash_double, "work", "create", "odd-owner", '{"owner":"Bob Smith"}')
    assert ours(capsys, "work", "list", "--owner", "bentley") == "[]\n"  # before the repair
    found = [f for f in Doctor(acmi).findings() if f.kind is Kind.WORK_UNOWNED]
    assert [(f.entity, f.key) for f in found] == [
        ("work:acmi-launch", "acmi:work:acmi-launch:profile")
    ]
    assert "bentley" in found[0].detail
    steps = [s for s in Migrate(acmi).run() if s.action is Action.WORK_ASSIGN]
    assert [(s.entity, s.detail) for s in steps] == [
        ("work:acmi-launch", "HSET acmi-launch agent:bentley (and its open index)")
    ]
    assert json.loads(ours(capsys, "work", "list", "--owner", "bentley")) == ["acmi-launch"]
    bundle = json.loads(ours(capsys, "bootstrap", "bentley"))
    assert [w["id"] for w in bundle["sections"]["work"]] == ["acmi-launch"]
    assert [f for f in Doctor(acmi).findings() if f.kind is Kind.WORK_UNOWNED] == []
    # the profile the reference wrote keeps its owner as given
    assert acmi.profile.get("work:acmi-launch") == json.loads(profile)


# --- invite-agent ----------------------------------------------------------------------------


def test_invite_writes_what_the_references_invite_agent_writes(
    node: str, upstash_double: UpstashDouble, acmi: Acmi, redis_server: RedisServer
) -> None:
    tool = str(REFERENCE / "cli" / "invite-agent.mjs")
    env = {
        **os.environ,
        "UPSTASH_REDIS_REST_URL": upstash_double.url,
        "UPSTASH_REDIS_REST_TOKEN": upstash_double.token,
    }
    argv = [node, tool, "scout", "research", "gemini-2.5-pro", "lane-a", "--tier", "Operator"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    with redis.Redis.from_url(redis_server.url_for(DB["upstash_double"])) as raw:
        theirs = {slot: raw.get(f"acmi:agent:scout:{slot}") for slot in ("profile", "permissions")}
        result = acmi.agents.invite("scout", "Operator")  # re-invited by us
        assert result["action"] == "unchanged"
        # its profile as the reference wrote it: no permissions merged in
        assert raw.get("acmi:agent:scout:profile") == theirs["profile"]
        acmi.agents.invite("fresh", "Operator")  # ours, next to theirs
        ours_signals = json.loads(raw.get("acmi:agent:fresh:signals") or b"{}")
        assert raw.get("acmi:agent:fresh:permissions") == theirs["permissions"]
        their_signals = json.loads(raw.get("acmi:agent:scout:signals") or b"{}")
    assert (
        list(ours_signals)
        == list(their_signals)
        == [
            "status",
            "last_heartbeat_ts",
            "current_focus",
        ]
    )
    assert ours_signals["status"] == their_signals["status"] == "active"

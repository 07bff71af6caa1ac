"""The `acmi` command with `--api URL`: the reference commands against the real API (created
by ``create_app``, served by uvicorn in a thread as ``acmi serve`` runs it) print exactly
what they print on the store; config-file profiles; and each refusal's exit code.

Both sides run on one redis database, one tenant and one clock that does not move: the
store side through ``main(argv, state=CliState(preset=...))`` on the API's own client, the
API side through ``main(["--api", URL, ...])`` with ACMI_API_KEY. The database is flushed
and the key minted again between the two runs, so each starts from nothing."""

from __future__ import annotations

import io
import json
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from acmi_core import Acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.settings import Settings
from acmi_core.cli import main
from acmi_core.cli.state import CliState
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer, free_port
from tests.kit import FakeClock, serving

DB: Final = 15  # this module's database on the session's redis-server (tests/kit.DB ends at 6)
START: Final = 1_790_000_000_000
HOOK: Final = '{"session_id": "sess-hook", "source": "startup", "hook_event_name": "SessionStart"}'

# The reference commands, in an order that builds on what came before. Every random part
# (correlation ids) is given, so the two runs can print the same bytes.
SCRIPT: Final[tuple[tuple[str, ...], ...]] = (
    ("profile", "sales", "client-1", '{"name": "ClientCo", "stage": "lead"}'),
    ("profile", "sales", "client-1", '{"stage": "proposal"}'),
    ("profile", "sales", "client-1", '{"owner": "ann"}', "--merge"),
    ("profile", "sales", "client-1"),
    ("profile", "sales", "nobody"),
    ("signal", "sales", "client-1", '{"a": 1, "b": 2}'),
    ("signal", "sales", "client-1", '{"c": 3}'),
    ("signal", "sales", "client-1", '{"d": 4}', "--merge"),
    ("event", "sales", "client-1", "gmail", "Sent the PDF.", "--kind", "email-sent",
     "--correlation-id", "prop-1", "--parent", "deal-1", "--payload", '{"pages": 4}'),
    ("event", "thread:pm", "agent:x", "colon form", "--correlation-id", "c-2"),
    ("get", "sales", "client-1"),
    ("get", "sales", "client-1", "--events", "1"),
    ("list", "sales"),
    ("list", "thread"),
    ("cat", "acmi:thread:pm:timeline", "sales:client-1:timeline"),
    ("cat", "thread:pm", "sales:client-1", "--json", "--limit=1"),
    ("cat", "thread:pm", "--since", "1h", "--json"),
    ("spawn", "claude"),
    ("spawn", "claude", "sess-2", "opus", "--host", "laptop"),
    ("active", "claude", "add", "thread:pm", "lead"),
    ("active", "claude", "add", "thread:ops"),
    ("active", "claude", "list"),
    ("active", "claude", "remove", "thread:ops"),
    ("rollup-set", "claude", "where we left off"),
    ("heartbeat", "claude", "--status", "BUSY", "--note", "on it"),
    ("bootstrap", "claude"),
    ("bootstrap", "claude", "--format", "markdown", "--max-tokens", "4000"),
    ("bootstrap", "claude", "--format", "markdown", "--hook"),  # reads HOOK on stdin
    ("work", "create", "launch", '{"title": "Launch"}', "--owner", "claude"),
    ("work", "event", "launch", "claude-engineer", "v0 done", "sess-1", "--correlation-id", "w-1"),
    ("work", "signal", "launch", '{"progress": 40}'),
    ("work", "get", "launch"),
    ("work", "sessions", "launch"),
    ("work", "list"),
    ("work", "list", "--owner", "claude", "--status", "all"),
    ("hitl", "create", "deploy", "ok?", "--asked-by", "agent:claude", "--to", "user:mikey",
     "--urgency", "P0", "--correlation-id", "h-1"),
    ("hitl", "list", "--to", "user:mikey"),
    ("hitl", "resolve", "h-1", "yes", "--by", "user:mikey"),
    ("hitl", "list", "--to", "user:mikey", "--state", "closed"),
    ("memory", "remember", "agent:claude", "Mikey prefers async updates"),
    ("memory", "remember", "agent:claude", "--layer", "hot", "--", "- [ ] verify web 2.4"),
    ("memory", "search", "agent:claude", "async", "updates"),
    ("memory", "status", "agent:claude"),
    ("memory", "active", "agent:claude", "--text"),
    ("memory", "topic-create", "agent:claude", "pricing"),
    ("memory", "handoff", "agent:claude", "--take"),
    ("memory", "debug", "agent:claude"),
    ("delete", "sales", "client-1"),
    ("list", "sales"),
    ("work", "get", "missing"),  # exit 3
    ("profile", "sales", "x", "{bad"),  # exit 2
)  # fmt: skip


@dataclass
class Served:
    acmi: Acmi
    clock: FakeClock
    url: str
    server: RedisServer

    def reset(self) -> str:
        """An empty database and a fresh write key for the tenant; the clock at START."""
        self.server.flush(DB)
        self.clock.now = START
        key, _ = apikeys.mint(
            self.acmi.store, tenant=self.acmi.tenant, scope="write", name="cli", now_ms=START
        )
        return key


@pytest.fixture(scope="module")
def served(redis_server: RedisServer) -> Iterator[Served]:
    """The whole API (create_app, offload, as ``acmi serve``) under uvicorn in a thread."""
    store = RedisStore.from_url(redis_server.url_for(DB))
    clock = FakeClock()
    acmi = Acmi(store, Settings(), tenant=f"t-{uuid.uuid4().hex[:12]}", clock=clock)
    with serving(create_app(ApiContext(acmi, offload=True))) as url:
        yield Served(acmi, clock, url, redis_server)
    store.close()


@pytest.fixture
def api(
    served: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[Served, str]]:
    """The served API with a fresh key in ACMI_API_KEY, and no config file, API URL or
    store variable from the environment in the way."""
    for name in (
        "ACMI_API_URL",
        "ACMI_PROFILE",
        "ACMI_REDIS_URL",
        "UPSTASH_REDIS_REST_URL",
        "UPSTASH_REDIS_REST_TOKEN",
        "ACMI_DEFAULT_TENANT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_CONFIG", str(tmp_path / "absent.toml"))
    key = served.reset()
    monkeypatch.setenv("ACMI_API_KEY", key)
    yield served, key
    served.server.flush(DB)


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    @property
    def error(self) -> str:
        """The one error line (stderr also carries `# store`/`# api` notes)."""
        return "\n".join(line for line in self.err.splitlines() if not line.startswith("#"))


def run(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: Sequence[str],
    *,
    state: CliState | None = None,
) -> Ran:
    monkeypatch.setattr(sys, "stdin", io.StringIO(HOOK if "--hook" in argv else ""))
    code = main(list(argv), state=state)
    out, err = capsys.readouterr()
    return Ran(code, out, err)


def test_the_reference_commands_print_the_same_on_the_api(
    api: tuple[Served, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served, _ = api
    on_store = [run(capsys, monkeypatch, a, state=CliState(preset=served.acmi)) for a in SCRIPT]
    monkeypatch.setenv("ACMI_API_KEY", served.reset())
    on_api = [run(capsys, monkeypatch, ["--api", served.url, *a]) for a in SCRIPT]
    for argv, store, remote in zip(SCRIPT, on_store, on_api, strict=True):
        assert (remote.code, remote.out, remote.error) == (store.code, store.out, store.error), argv
        assert remote.err.startswith(f"# api {served.url}\n"), argv  # where it worked
    codes = {" ".join(a[:3]): r.code for a, r in zip(SCRIPT, on_api, strict=True) if r.code}
    assert codes == {"memory debug agent:claude": 1, "work get missing": 3, "profile sales x": 2}
    # what the API run wrote is really there (the store side's run was flushed away)
    # one clock tick for all: the spawns tie on ts, so they are compared as a set
    spawned = {(s["session_id"], s.get("host")) for s in served.acmi.agents.spawns("claude")}
    assert spawned == {("unknown", None), ("sess-2", "laptop"), ("sess-hook", None)}
    assert served.acmi.work.get("launch", 5).to_dict()["signals"]["progress"] == 40
    hooked = next(r for a, r in zip(SCRIPT, on_api, strict=True) if "--hook" in a)
    assert hooked.out.startswith("# Wake bundle for agent:claude") and "sess-hook" in hooked.out


def _plant_reference_ids(acmi: Acmi) -> None:
    """Ids the reference SDK and CLI write, outside our id rule, as they left them."""
    from acmi_core.base.model import EntityId

    event = '{"ts":1790000000000,"source":"gmail","summary":"hi"}'
    for local in ("mikey@example.com", "a:b"):
        entity = EntityId("user", local)  # built as stored: parse would refuse it
        acmi.store.execute(("SET", acmi.keys.profile(entity), json.dumps({"name": local})))
        acmi.store.execute(("ZADD", acmi.keys.timeline(entity), "1790000000000", event))
        acmi.store.execute(("SADD", acmi.keys.index("user"), local))


READ_IDS: Final[tuple[tuple[str, ...], ...]] = (
    ("list", "user"),
    ("get", "user:mikey@example.com"),
    ("get", "user", "mikey@example.com"),
    ("get", "user:a:b"),
    ("profile", "user", "a:b"),
    ("cat", "user:mikey@example.com", "user:a:b", "--json"),
    ("profile", "user", "eve@example.com", "{}"),  # a write: the id rule stands (exit 2)
)


def test_every_id_list_prints_reads_back_on_the_api(
    api: tuple[Served, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served, _ = api
    _plant_reference_ids(served.acmi)
    on_store = [run(capsys, monkeypatch, a, state=CliState(preset=served.acmi)) for a in READ_IDS]
    on_api = [run(capsys, monkeypatch, ["--api", served.url, *a]) for a in READ_IDS]
    for argv, store, remote in zip(READ_IDS, on_store, on_api, strict=True):
        assert (remote.code, remote.out, remote.error) == (store.code, store.out, store.error), argv
    assert sorted(json.loads(on_api[0].out)) == ["user:a:b", "user:mikey@example.com"]
    assert json.loads(on_api[1].out)["profile"] == {"name": "mikey@example.com"}
    assert json.loads(on_api[3].out)["timeline"][0]["summary"] == "hi"
    assert on_api[-1].code == 2 and "id_format" in on_api[-1].error


FIXTURE: Final = Path(__file__).resolve().parents[1] / "fixtures" / "memory_tree"


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_memory_import_and_export_on_the_api(
    api: tuple[Served, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A seed workspace in and out over --api: one request each way, the store side's
    result, and the tree back byte for byte."""
    served, _ = api
    argv = ["memory", "import", "agent:atlas", "--dir", str(FIXTURE), "--quiet"]
    on_store = run(capsys, monkeypatch, argv, state=CliState(preset=served.acmi))
    monkeypatch.setenv("ACMI_API_KEY", served.reset())
    base = ["--api", served.url]
    imported = run(capsys, monkeypatch, [*base, *argv])
    assert (imported.code, imported.out) == (0, on_store.out), imported.err
    assert json.loads(imported.out)["events_added"] == 376
    again = run(capsys, monkeypatch, [*base, *argv])
    assert json.loads(again.out)["writes"] == 0  # idempotent over the API too

    out = tmp_path / "exported"
    exported = run(
        capsys, monkeypatch, [*base, "memory", "export", "agent:atlas", "--dir", str(out)]
    )
    assert exported.code == 0, exported.err
    assert len(json.loads(exported.out)["files"]) == 32
    assert _tree(out) == _tree(FIXTURE)


def test_the_startup_files_over_the_api_byte_for_byte(
    api: tuple[Served, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """SOUL.md, USER.md and AGENTS.md in and out over --api, exactly as written."""
    served, _ = api
    startup = {"SOUL.md": b"I am Atlas.\r\n  ", "AGENTS.md": b"# AGENTS.md\n\n- one\n"}
    workspace = tmp_path / "in"
    workspace.mkdir()
    for path, data in startup.items():
        (workspace / path).write_bytes(data)
    monkeypatch.setenv("ACMI_API_KEY", served.reset())
    base = ["--api", served.url]
    argv = ["memory", "import", "agent:soulful", "--dir", str(workspace), "--quiet"]
    imported = run(capsys, monkeypatch, [*base, *argv])
    assert imported.code == 0, imported.err
    assert json.loads(imported.out)["startup_written"] == 2
    out = tmp_path / "out"
    exported = run(
        capsys, monkeypatch, [*base, "memory", "export", "agent:soulful", "--dir", str(out)]
    )
    assert exported.code == 0, exported.err
    assert _tree(out) == startup


def test_the_handoff_template_over_the_api(
    api: tuple[Served, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, _ = api
    argv = ["memory", "handoff", "agent:handy", "--done", "shipped", "--gotcha", "flaky CI"]
    on_store = run(capsys, monkeypatch, argv, state=CliState(preset=served.acmi))
    monkeypatch.setenv("ACMI_API_KEY", served.reset())
    over_api = run(capsys, monkeypatch, ["--api", served.url, *argv])
    assert over_api.code == 0, over_api.err
    text = json.loads(over_api.out)["text"]
    assert text == json.loads(on_store.out)["text"] and "## Gotchas\n- flaky CI" in text


def test_an_export_that_would_leave_the_folder_writes_nothing(tmp_path: Path) -> None:
    """What an API answers is not trusted with paths: `../` is refused before any write."""
    from acmi_core.memory.markdown import MemoryFormatError
    from acmi_core.memory.tree import write_files

    with pytest.raises(MemoryFormatError) as refused:
        write_files({"MEMORY.md": "# ok\n", "../escape.md": "x"}, tmp_path / "tree")
    assert refused.value.rule == "inside_tree"
    assert not (tmp_path / "tree").exists() and not (tmp_path / "escape.md").exists()


def test_locks_on_the_api(
    api: tuple[Served, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, _ = api
    base = ["--api", served.url]
    claimed = run(capsys, monkeypatch, [*base, "lock", "claim", "deploy:prod", "agent:atlas"])
    assert claimed.code == 0, claimed.err
    token = json.loads(claimed.out)["owner_token"]
    held = run(capsys, monkeypatch, [*base, "lock", "claim", "deploy:prod", "agent:other"])
    assert (held.code, held.out) == (4, "")
    assert "held by agent:atlas" in held.error
    shown = run(capsys, monkeypatch, [*base, "lock", "show", "deploy:prod"])
    store = run(
        capsys, monkeypatch, ["lock", "show", "deploy:prod"], state=CliState(preset=served.acmi)
    )
    assert shown.out == store.out and "owner_token" not in shown.out
    renew = [*base, "lock", "renew", "deploy:prod", token, "--ttl-ms", "90000"]
    assert json.loads(run(capsys, monkeypatch, renew).out)["expires_at"] == START + 90_000
    release = run(capsys, monkeypatch, [*base, "lock", "release", "deploy:prod", token])
    assert release.code == 0, release.err
    assert served.acmi.locks.get("deploy:prod").to_dict().get("owner") is None


def test_the_workflow_commands_on_the_api_print_what_the_store_prints(
    api: tuple[Served, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, _ = api
    base = ["--api", served.url, "workflow"]
    execute = ["execute", "deploy", "build", "claude", "--correlation-id"]
    ran = run(capsys, monkeypatch, [*base, *execute, "r1"])
    assert ran.code == 0, ran.err
    assert json.loads(ran.out)["correlationId"] == "r1"
    refused = run(capsys, monkeypatch, [*base, *execute, "r2"])
    assert (refused.code, refused.out) == (4, "")
    assert "step build" in refused.error and "run r1 has no assessment entry" in refused.error
    # a key of another tenant: its own cycle
    other = apikeys.mint(served.acmi.store, tenant="t-other", scope="write", name="o", now_ms=START)
    monkeypatch.setenv("ACMI_API_KEY", other[0])
    assert run(capsys, monkeypatch, [*base, *execute, "r2"]).code == 0
    monkeypatch.setenv("ACMI_API_KEY", api[1])
    assess = ["assess", "deploy", "build", "70", "claude", "--correlation-id", "r1"]
    assert run(capsys, monkeypatch, [*base, *assess]).code == 0
    assert run(capsys, monkeypatch, [*base, *execute, "r2"]).code == 0
    improve = ["improve", "deploy", "build", "pin the base image", "claude"]
    assert run(capsys, monkeypatch, [*base, *improve]).code == 0
    remote = run(capsys, monkeypatch, [*base, "lessons", "deploy"])
    store = run(
        capsys, monkeypatch, ["workflow", "lessons", "deploy"], state=CliState(preset=served.acmi)
    )
    assert remote.code == 0 and remote.out == store.out
    assert [e["payload"]["lesson"] for e in json.loads(remote.out)["lessons"]] == [
        "pin the base image"
    ]
    unassessed = served.acmi.workflows.unassessed("deploy").executions
    assert [e["correlationId"] for e in unassessed] == ["r2"]


def test_event_with_a_seconds_ts_is_refused_on_the_api(
    api: tuple[Served, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, _ = api
    argv = ["--api", served.url, "event", "sales", "sec", "gmail", "sent", "--ts"]
    refused = run(capsys, monkeypatch, [*argv, "1745947200"])
    assert (refused.code, refused.out) == (2, ""), refused.err
    assert "ts" in refused.error and "seconds" in refused.error, refused.error
    assert served.acmi.timeline.size("sales:sec") == 0
    stored = run(capsys, monkeypatch, [*argv, "1745947200000"])
    assert stored.code == 0 and json.loads(stored.out)["ts"] == 1_745_947_200_000


def test_a_bootstrap_budget_too_small_on_the_api_names_the_floor(
    api: tuple[Served, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, _ = api
    argv = ["bootstrap", "claude", "--format", "markdown", "--max-tokens", "5"]
    refused = run(capsys, monkeypatch, ["--api", served.url, *argv])
    local = run(capsys, monkeypatch, argv, state=CliState(preset=served.acmi))
    assert refused.code == local.code != 0 and refused.out == ""
    assert "max_tokens: 5 tokens" in refused.error and "(rule: min_budget)" in refused.error
    assert refused.error == local.error  # the same floor, said the same way


def _config(tmp_path: Path, body: str, mode: int = 0o600) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(body, encoding="utf-8")
    path.chmod(mode)
    return path


def test_a_config_profile_with_key_env(
    api: tuple[Served, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    served, key = api
    monkeypatch.delenv("ACMI_API_KEY")
    monkeypatch.setenv("ACMI_STAGING_KEY", key)
    body = f'[profiles.staging]\napi = "{served.url}"\nkey_env = "ACMI_STAGING_KEY"\n'
    monkeypatch.setenv("ACMI_CONFIG", str(_config(tmp_path, body, 0o644)))  # no secret in it
    wrote = run(capsys, monkeypatch, ["--profile", "staging", "profile", "user", "a", '{"n": 1}'])
    assert wrote.code == 0, wrote.err
    assert wrote.err.startswith(f"# api {served.url}")
    assert served.acmi.profile.get("user:a") == json.loads(wrote.out)
    monkeypatch.setenv("ACMI_PROFILE", "staging")  # the variable names it too
    assert json.loads(run(capsys, monkeypatch, ["get", "user", "a"]).out)["profile"]["n"] == 1
    monkeypatch.delenv("ACMI_PROFILE")
    missing = run(capsys, monkeypatch, ["--profile", "prod", "list", "user"])
    assert missing.code == 2 and "'prod' is not in" in missing.error
    # default_profile: used without --profile
    body = f'default_profile = "staging"\n{body}'
    monkeypatch.setenv("ACMI_CONFIG", str(_config(tmp_path, body)))
    listed = run(capsys, monkeypatch, ["list", "user"])
    assert (listed.code, json.loads(listed.out)) == (0, ["user:a"])


def test_a_key_in_the_config_file_needs_mode_0600(
    api: tuple[Served, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    served, key = api
    monkeypatch.delenv("ACMI_API_KEY")
    body = f'[profiles.x]\napi = "{served.url}"\nkey = "{key}"\n'
    path = _config(tmp_path, body, 0o640)
    monkeypatch.setenv("ACMI_CONFIG", str(path))
    argv = ["--profile", "x", "profile", "user", "a", '{"n": 1}']
    refused = run(capsys, monkeypatch, argv)
    assert (refused.code, refused.out) == (2, "")
    assert "chmod 600" in refused.error and "profiles.x.key" in refused.error
    assert key not in refused.err
    assert served.acmi.profile.get("user:a") is None
    path.chmod(0o600)
    accepted = run(capsys, monkeypatch, argv)
    assert accepted.code == 0, accepted.err
    assert served.acmi.profile.get("user:a") == json.loads(accepted.out)


@pytest.mark.parametrize(
    "argv",
    [
        ["keys", "list"],
        ["invite-agent", "scout"],
        ["quota-monitor"],
        ["doctor"],
        ["agents", "wake", "claude", "--clear"],
    ],
)
def test_a_store_only_command_with_api_is_refused(
    api: tuple[Served, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    served, _ = api
    refused = run(capsys, monkeypatch, ["--api", served.url, *argv])
    assert (refused.code, refused.out) == (2, "")
    assert refused.error.startswith("error: --api: ") and "store_only" in refused.error


def test_tenant_with_api_is_refused(
    api: tuple[Served, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, _ = api
    refused = run(
        capsys, monkeypatch, ["--api", served.url, "--tenant", "acme", "profile", "user", "a"]
    )
    assert (refused.code, refused.out) == (2, "")
    assert refused.error.startswith("error: --tenant: ")


def test_a_bad_key_exits_5(
    api: tuple[Served, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served, _ = api
    unknown = "acmi_" + "x" * 43
    monkeypatch.setenv("ACMI_API_KEY", unknown)
    refused = run(capsys, monkeypatch, ["--api", served.url, "profile", "user", "a", "{}"])
    assert (refused.code, refused.out) == (5, "")
    assert "authorization" in refused.error and unknown not in refused.err
    monkeypatch.delenv("ACMI_API_KEY")
    unset = run(capsys, monkeypatch, ["--api", served.url, "get", "user", "a"])
    assert unset.code == 2 and "ACMI_API_KEY" in unset.error
    assert served.acmi.profile.get("user:a") is None


def test_a_server_that_is_down_exits_6(
    api: tuple[Served, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    # nothing listens there: the port was free a moment ago
    failed = run(capsys, monkeypatch, ["--api", down, "get", "user", "a"])
    assert (failed.code, failed.out) == (6, "")
    assert down in failed.error and os.environ["ACMI_API_KEY"] not in failed.err


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("http://api.example.com", "https"),
        ("http://10.0.0.5:8080/prod", "https"),
        ("ftp://example.com", "url"),
        ("https://user:pw@example.com", "no_credentials"),
    ],
)
def test_an_unsafe_url_is_refused(
    api: tuple[Served, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    rule: str,
) -> None:
    refused = run(capsys, monkeypatch, ["--api", url, "get", "user", "a"])
    assert (refused.code, refused.out) == (2, "")
    assert refused.error.startswith("error: --api: ") and f"(rule: {rule})" in refused.error
    assert "pw" not in refused.err

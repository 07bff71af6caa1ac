"""examples/02-06 run as a user runs them: against a real API served on 127.0.0.1 (as
`acmi serve` serves it) on a real redis-server, with each vendor SDK's base URL pointed at
a fake on 127.0.0.1 that answers as the vendor's API does. Never the network: the fake
records every request, and the store is read back afterwards, per tenant."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from acmi_core import Acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.base.settings import Settings
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB, serving

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CLAUDE_TEXT = "Ship the pricing page: the copy is approved and nothing else blocks it."
GEMINI_TEXT = "Website: pricing copy approved, deploy pending review."
REVIEW_TEXT = "Verdict: approve. Findings: none blocking; add a test for the empty cart."


@dataclass
class Vendor:
    """Fake Anthropic / Gemini / OpenAI endpoints; ``calls`` holds (path, parsed body)."""

    url: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _answer(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """What the vendor's API answers (the documented response shapes, trimmed to what a
    real reply always carries)."""
    if path == "/v1/messages":  # Anthropic Messages API
        return {
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": CLAUDE_TEXT}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 812, "output_tokens": 21},
        }
    if path.endswith(":generateContent"):  # Gemini API
        return {
            "candidates": [
                {
                    "content": {"parts": [{"text": GEMINI_TEXT}], "role": "model"},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 95,
                "candidatesTokenCount": 12,
                "totalTokenCount": 107,
            },
            "modelVersion": "gemini-2.5-flash",
            "responseId": "mG8uaM2bIoqe1dkP4Mf5sQQ",
        }
    if path == "/v1/chat/completions":  # OpenAI Chat Completions
        return {
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion",
            "created": 1741569952,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": REVIEW_TEXT, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 18, "total_tokens": 138},
        }
    raise AssertionError(f"the fake vendor has no {path}")


@pytest.fixture
def vendor() -> Iterator[Vendor]:
    calls: list[tuple[str, dict[str, Any]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            path = self.path.partition("?")[0]
            calls.append((path, body))
            try:
                answer, status = _answer(path, body), 200
            except AssertionError as exc:
                answer, status = {"error": str(exc)}, 404
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Vendor(f"http://127.0.0.1:{server.server_address[1]}", calls)
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Served:
    url: str
    acmi: Acmi  # the tenant the examples write as
    other: Acmi  # a second tenant, which must see none of it
    key: str
    other_key: str


@pytest.fixture
def served(redis_server: RedisServer) -> Iterator[Served]:
    store = RedisStore.from_url(redis_server.url_for(DB["backends"]))
    tenant, other_tenant = (f"t-{uuid.uuid4().hex[:12]}" for _ in range(2))
    acmi = Acmi(store, Settings(), tenant=tenant)
    other = Acmi(store, Settings(), tenant=other_tenant)
    key = apikeys.mint(store, tenant=tenant, scope="write", name="ex", now_ms=acmi.clock())[0]
    other_key = apikeys.mint(
        store, tenant=other_tenant, scope="write", name="ex", now_ms=acmi.clock()
    )[0]
    with serving(create_app(ApiContext(acmi, offload=True))) as url:
        yield Served(url, acmi, other, key, other_key)
    store.close()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, served: Served, vendor: Vendor) -> pytest.MonkeyPatch:
    """The environment a user sets, every base URL on 127.0.0.1; no proxy in between."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("ACMI_API_URL", served.url)
    monkeypatch.setenv("ACMI_API_KEY", served.key)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", vendor.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{vendor.url}/v1")
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-test")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", vendor.url)
    return monkeypatch


def example(name: str) -> ModuleType:
    """examples/<name>.py imported as the user runs it (its name starts with a digit)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nothing_in(other: Acmi, *entities: str) -> None:
    for entity in entities:
        ctx = other.get(entity)
        assert not ctx.signals and not list(ctx.timeline), f"{entity} leaked into another tenant"


def test_02_claude_reads_its_bundle_and_writes_two_timelines(
    env: pytest.MonkeyPatch, served: Served, vendor: Vendor
) -> None:
    served.acmi.signals.set("agent:claude", "focus", "pricing page launch")
    assert example("02_claude").main(["project:website"]) == 0
    [(path, body)] = vendor.calls
    assert path == "/v1/messages"
    # The bootstrap bundle went into the system prompt: the agent's own signal is in it.
    assert "pricing page launch" in body["system"] and "# " in body["system"]
    mine = served.acmi.timeline.read("agent:claude", limit=10)
    theirs = served.acmi.timeline.read("project:website", limit=10)
    assert [e.kind for e in mine] == ["next-step"] and [e.kind for e in theirs] == ["next-step"]
    assert mine[0].correlationId == theirs[0].correlationId
    assert mine[0].summary == CLAUDE_TEXT
    assert served.acmi.signals.get("project:website", "next_step") == CLAUDE_TEXT
    assert served.acmi.signals.get("agent:claude", "focus") == "pricing page launch"
    assert (
        served.acmi.signals.get("agent:claude", "current_task") == "next step for project:website"
    )
    _nothing_in(served.other, "agent:claude", "project:website")


def test_03_gemini_summarises_the_timeline_into_status_report(
    env: pytest.MonkeyPatch, served: Served, vendor: Vendor
) -> None:
    for i, text in enumerate(("pricing copy approved", "deploy opened for review")):
        served.acmi.timeline.append(
            "project:website",
            {"source": "agent:claude", "kind": "note", "correlationId": f"n-{i}", "summary": text},
        )
    assert example("03_gemini").main(["project:website"]) == 0
    [(path, body)] = vendor.calls
    # The SDK's API version (v1beta in older releases, v1 now) precedes the method path.
    assert path.endswith("/models/gemini-2.5-flash:generateContent")
    prompt = body["contents"][0]["parts"][0]["text"]
    assert "pricing copy approved" in prompt and "deploy opened for review" in prompt
    report = served.acmi.signals.get("project:website", "status_report")
    assert isinstance(report, dict)
    assert report["summary"] == GEMINI_TEXT and report["events"] == 2
    _nothing_in(served.other, "project:website")


def test_03_gemini_on_an_empty_timeline_calls_nobody(
    env: pytest.MonkeyPatch, served: Served, vendor: Vendor
) -> None:
    assert example("03_gemini").main(["project:empty"]) == 0
    assert vendor.calls == []
    assert served.acmi.signals.get("project:empty", "status_report", None) is None


def test_04_openai_review_is_one_code_review_event_even_when_rerun(
    env: pytest.MonkeyPatch, served: Served, vendor: Vendor
) -> None:
    diff = "--- a/cart.py\n+++ b/cart.py\n@@ -1 +1 @@\n-total = 0\n+total = sum(items)\n"
    module = example("04_openai")
    assert module.main(["repo:website"], diff=diff) == 0
    assert module.main(["repo:website"], diff=diff) == 0  # a retry: the first run's event
    assert [path for path, _ in vendor.calls] == ["/v1/chat/completions"] * 2
    assert "total = sum(items)" in vendor.calls[0][1]["messages"][1]["content"]
    [event] = served.acmi.timeline.read("repo:website", limit=10)
    assert event.kind == "code-review" and event.source == "agent:codex"
    assert event.summary == REVIEW_TEXT
    assert (event.model_extra or {})["review"] == REVIEW_TEXT
    _nothing_in(served.other, "repo:website")


RESOURCE = "work:website-pricing"
PLAN = {"resource": RESOURCE, "steps": ["write the copy", "deploy"]}


def _coordination(acmi: Acmi) -> list[str]:
    return [e.kind for e in acmi.timeline.read("thread:agent-coordination", limit=50)]


def test_05_ide_agent_claims_works_heartbeats_and_releases(
    env: pytest.MonkeyPatch, served: Served
) -> None:
    served.acmi.signals.set("project:website", "plan", PLAN)
    assert example("05_ide_agent").main(["project:website"]) == 0
    done = served.acmi.timeline.read("project:website", limit=10)
    assert [(e.kind, (e.model_extra or {})["step"]) for e in done] == [
        ("step-done", "write the copy"),
        ("step-done", "deploy"),
    ]
    assert {(e.model_extra or {})["fence"] for e in done} == {1}
    assert served.acmi.locks.get(RESOURCE).to_dict()["owner"] is None
    assert _coordination(served.acmi) == ["coord-claim", "coord-release"]
    signals = served.acmi.get("agent:ide").signals
    assert signals["status"] == "IDLE" and "last_heartbeat_ts" in signals
    _nothing_in(served.other, "project:website", "agent:ide")
    assert _coordination(served.other) == []


def test_05_ide_agent_defers_when_another_agent_holds_the_work(
    env: pytest.MonkeyPatch, served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    served.acmi.signals.set("project:website", "plan", PLAN)
    served.acmi.locks.claim(RESOURCE, "agent:claude", 60_000)
    assert example("05_ide_agent").main(["project:website"]) == 0
    assert "deferring" in capsys.readouterr().out
    assert served.acmi.timeline.read("project:website", limit=10) == []
    assert served.acmi.locks.get(RESOURCE).to_dict()["owner"] == "agent:claude"
    assert _coordination(served.acmi) == ["coord-claim", "coord-defer"]
    assert served.acmi.signals.get("agent:ide", "status_note") == "deferred"


VAPI = Path(__file__).resolve().parents[1] / "fixtures" / "vapi"
CALL = "vapi-call:4f1b5c7e-93a2-4b8e-9d61-0c2f7a9e5b13"
CALLER = "vapi-customer:14155550123"


def test_06_vapi_answers_from_status_report_and_writes_the_call_twice(
    env: pytest.MonkeyPatch, served: Served
) -> None:
    env.setenv("VAPI_SECRET", "vapi-server-secret-0001")
    served.acmi.signals.set(
        "project:website", "status_report", {"summary": GEMINI_TEXT, "events": 2}
    )
    module = example("06_vapi")
    with module.acmi_client() as acmi:
        server = module.make_server(acmi, 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{server.server_address[1]}"
        secret = {"x-vapi-secret": "vapi-server-secret-0001"}
        try:
            with httpx.Client(base_url=url, timeout=10) as vapi:
                assert vapi.post("/", json={"message": {}}).status_code == 401  # no secret
                answers = [
                    vapi.post(
                        "/", json=json.loads((VAPI / f"{name}.json").read_text()), headers=secret
                    )
                    for name in (
                        "status-update",
                        "tool-calls",
                        "end-of-call-report",
                        "end-of-call-report",
                    )  # Vapi may deliver a report twice
                ]
        finally:
            server.shutdown()
            server.server_close()
    assert [a.status_code for a in answers] == [200] * 4
    assert answers[1].json() == {
        "results": [{"toolCallId": "call_Vq3hYx8k2LmN5pR7sT9uW1aB", "result": GEMINI_TEXT}]
    }
    for entity in (CALLER, CALL):
        kinds = [e.kind for e in served.acmi.timeline.read(entity, limit=10)]
        assert sorted(kinds) == [
            "vapi.end-of-call-report",
            "vapi.status-update",
            "vapi.tool-calls",
        ], entity
    _nothing_in(served.other, CALLER, CALL)


def test_06_vapi_tool_without_a_report_says_so(env: pytest.MonkeyPatch, served: Served) -> None:
    module = example("06_vapi")
    body = json.loads((VAPI / "tool-calls.json").read_text())
    body["message"]["toolCallList"][0]["function"]["arguments"] = {"entity": "project:none"}
    with module.acmi_client() as acmi:
        answer = module.handle(acmi, body)
    assert answer["results"][0]["result"] == "I have no status report for project:none yet."
    # Another tenant's report is not this key's to read.
    served.other.signals.set("project:website", "status_report", {"summary": "not yours"})
    body["message"]["toolCallList"][0]["function"]["arguments"] = {"entity": "project:website"}
    with module.acmi_client() as acmi:
        assert "not yours" not in module.handle(acmi, body)["results"][0]["result"]


def test_04_runs_as_the_script_a_user_copies(
    env: pytest.MonkeyPatch, served: Served, vendor: Vendor
) -> None:
    """`python examples/04_openai.py repo:cli < diff`, in a process of its own: the
    environment is all it is given."""
    diff = "--- a/cli.py\n+++ b/cli.py\n@@ -1 +1 @@\n-print(1)\n+print(2)\n"
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "04_openai.py"), "repo:cli"],
        input=diff,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == REVIEW_TEXT
    [event] = served.acmi.timeline.read("repo:cli", limit=10)
    assert event.kind == "code-review"


def test_every_example_is_listed_with_the_test_that_runs_it() -> None:
    index = (EXAMPLES / "README.md").read_text()
    tests = Path(__file__).read_text()
    scripts = sorted(p.name for p in EXAMPLES.glob("[0-9][0-9]_*.py"))
    assert scripts == [
        "02_claude.py",
        "03_gemini.py",
        "04_openai.py",
        "05_ide_agent.py",
        "06_vapi.py",
    ]
    for script in scripts:
        number = script[:2]
        assert f"[{script}]({script})" in index, f"{script} is not in examples/README.md"
        assert f"test_examples.py::test_{number}_*" in index, f"{script}: no test named"
        assert f"def test_{number}_" in tests, f"{script} has no test here"

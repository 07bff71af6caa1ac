"""`acmi jobs run` and `acmi jobs status` on a real redis-server: a job run by hand once per
execution id, and each job's last run and what waits for its next one."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from acmi_core import Acmi, Settings
from acmi_core.base.lambdas import FUNCTIONS
from acmi_core.cli import main
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from tests.kit import DB

JOBS = {spec.name for spec in FUNCTIONS if spec.kind == "job"}  # every job row


@pytest.fixture
def url(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> str:
    url = redis_server.url_for(DB["cli"])
    redis.Redis.from_url(url).flushdb()
    for name in ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACMI_REDIS_URL", url)
    return url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_a_job_run_by_hand_runs_once_per_execution_id(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = run(capsys, "jobs", "run", "drift-diff", "--execution-id", "by-hand-1")
    assert first["job"] == "drift-diff" and first["execution_id"] == "by-hand-1"
    assert first["requests"] >= 1 and "replayed" not in first
    again = run(capsys, "jobs", "run", "drift-diff", "--execution-id", "by-hand-1")
    assert again["replayed"] is True and again["last_run_ms"] == first["last_run_ms"]
    other = run(capsys, "jobs", "run", "rollup-cron", "--param", "max=5")
    assert other["execution_id"].startswith("manual-") and other["backlog"] == 0


def test_status_shows_each_jobs_last_run_and_what_waits(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    acmi = Acmi(RedisStore.from_url(url), Settings())
    acmi.wake.set("claude", minute=15)
    acmi.agents.heartbeat("gemini-cli")
    run(capsys, "jobs", "run", "sweep", "--execution-id", "s-1")
    status = run(capsys, "jobs", "status")
    assert set(status) == JOBS
    assert status["sweep"]["last_run"]["execution_id"] == "s-1"
    assert status["rollup-cron"]["last_run"] is None
    assert status["wake"]["pending"]["next"]["agent"] == "agent:claude"
    stall = status["sweep"]["pending"]["next_stall"]
    assert stall["agent"] == "agent:gemini-cli" and stall["at_ms"] > acmi.clock()
    acmi.timeline.append(
        "user:mikey", {"source": "user:mikey", "kind": "note", "correlationId": "c", "summary": "s"}
    )
    assert run(capsys, "jobs", "status")["rollup-cron"]["pending"] == {"changed_since_watermark": 1}


def test_a_bad_param_is_refused(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "run", "rollup-cron", "--param", "no-equals-sign"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err

"""events/rollup-cron.scheduled.json through the real handler (functions.rollup_cron),
on a real redis-server: the Scheduler's Input in, rollups written, the run recorded; the
same execution id again does nothing; bad parameters name the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from acmi_core import Acmi, AcmiValidationError, Settings
from acmi_core.entities.context import system_clock
from acmi_core.jobs.rollup import SETTLE_MS
from acmi_core.jobs.runner import job_state
from acmi_core.store.redis import RedisStore
from acmi_core.testing.redis_server import RedisServer
from functions.rollup_cron import handler
from tests.kit import DB, FakeLambdaContext, load_event

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

SAMPLE = "rollup-cron.scheduled"


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    """The handlers' database, flushed; the handler configured on it (no process env)."""
    url = redis_server.url_for(DB["handlers"])
    with redis.Redis.from_url(url) as client:
        client.flushdb()
    handler.configure(env={"ACMI_REDIS_URL": url})
    yield url
    handler.configure()  # back to the process environment, built lazily


@pytest.fixture
def store(url: str) -> Iterator[RedisStore]:
    store = RedisStore.from_url(url)
    yield store
    store.close()


def written_a_minute_ago(store: RedisStore) -> Acmi:
    """A writer whose clock is a minute behind: its changes are past the settle margin
    when the handler runs on the real clock."""
    return Acmi(store, Settings(), clock=lambda: system_clock() - 60_000 - SETTLE_MS)


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    result = handler(event, FakeLambdaContext("acmi-rollup-cron"))
    assert isinstance(result, dict)
    return result


def test_the_sample_rolls_up_what_changed_once(store: RedisStore) -> None:
    writer = written_a_minute_ago(store)
    writer.timeline.append(
        "agent:claude-engineer",
        {
            "source": "agent:gemini-cli",
            "kind": "handoff-request",
            "correlationId": "handoff-2026-11-30-001",
            "summary": "Please take over the billing migration (PR 412)",
        },
    )
    writer.timeline.append(
        "deal:acme-42",
        {"source": "user:mikey", "kind": "note", "correlationId": "n-1", "summary": "call done"},
    )
    sample = load_event(SAMPLE)
    store.execute(("SCRIPT", "FLUSH"))  # a server that has run no read yet
    result = invoke(sample)
    assert result["job"] == "rollup-cron" and result["execution_id"] == sample["execution_id"]
    assert (result["visited"], result["written"], result["backlog"]) == (2, 2, 0)
    assert result["summarizer"] == "extractive" and "fallback" not in result
    # state, index, rollups, windows, plan, record; and once, the windows' page script
    # loaded (one request, not one per window)
    assert result["requests"] == 7

    reader = Acmi(store, Settings())
    rollup = reader.agents.rollup("claude-engineer")
    assert rollup is not None and rollup["execution_id"] == sample["execution_id"]
    assert [item["correlationId"] for item in rollup["open"]] == ["handoff-2026-11-30-001"]
    assert "PR 412" in rollup["summary"]
    assert job_state(reader, "rollup-cron")["watermark"] == result["watermark"]

    # Scheduler retries the same execution: nothing is done again
    writer.timeline.append(
        "agent:claude-engineer",
        {"source": "agent:x", "kind": "note", "correlationId": "n-2", "summary": "later"},
    )
    again = invoke(sample)
    assert again["replayed"] is True and again["written"] == 2
    assert reader.agents.rollup("claude-engineer") == rollup


def test_bad_parameters_in_the_input_name_the_field(store: RedisStore) -> None:
    with pytest.raises(AcmiValidationError) as err:
        invoke({**load_event(SAMPLE), "max": 0})
    assert (err.value.field, err.value.rule) == ("max", "range")
    assert job_state(Acmi(store, Settings()), "rollup-cron") == {}


def test_an_llm_summarizer_without_a_key_runs_extractive(url: str, store: RedisStore) -> None:
    written_a_minute_ago(store).timeline.append(
        "agent:a", {"source": "agent:a", "kind": "note", "correlationId": "c", "summary": "x"}
    )
    handler.configure(
        env={"ACMI_REDIS_URL": url, "ACMI_SUMMARIZER": "anthropic:claude-3-5-haiku-latest"}
    )
    result = invoke(load_event(SAMPLE))
    assert result["written"] == 1 and result["summarizer"] == "extractive"
    assert "ANTHROPIC_API_KEY is not set" in result["fallback"]

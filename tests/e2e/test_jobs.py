"""The scheduled-job half of the Lambda kit (functions.runtime.job_handler), on a job
defined here: exactly the Scheduler's Input in, the job's summary out, an Acmi built
from the function's settings, Powertools logs and metrics, bad input named."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from acmi_core import Acmi, AcmiValidationError
from acmi_core.base.lambdas import FunctionSpec, function
from acmi_core.jobs.runner import JobRun
from acmi_core.store.memory import MemoryStore
from functions import runtime
from functions.runtime import LambdaFunction, http_handler, job_handler
from tests.kit import FakeLambdaContext

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

ROW = FunctionSpec("count-users", "counts users (a test job)", job=f"{__name__}:count_users")
SCHEDULED = {
    "execution_id": "c0ffee00-1234-4d2e-9f10-0123456789ab",
    "scheduled_time": "2026-11-30T08:15:00Z",
    "limit": 5,
}


def count_users(acmi: Acmi, run: JobRun) -> dict[str, Any]:
    return {
        "users": acmi.list("user"),
        "tenant": acmi.tenant,
        "scheduled_ms": run.scheduled_ms,
        "params": dict(run.params),
    }


@pytest.fixture
def handler() -> LambdaFunction:
    store = MemoryStore()
    Acmi(store).profile.set("user:ada", {"name": "Ada"})
    handler = job_handler(ROW)
    handler.configure(env={"ACMI_DEFAULT_TENANT": "default"}, store=store)
    return handler


def test_a_job_gets_the_scheduler_input_and_the_store(
    handler: LambdaFunction, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Powertools' handler holds the stdout of the moment the logger was created: read it here
    log = io.StringIO()
    monkeypatch.setattr(runtime.logger.registered_handler, "stream", log)
    result = handler(dict(SCHEDULED), FakeLambdaContext("acmi-count-users"))
    measured = {k: result.pop(k) for k in ("requests", "commands", "duration_ms", "last_run_ms")}
    assert result == {
        "job": "count-users",
        "execution_id": SCHEDULED["execution_id"],
        "users": ["user:ada"],
        "tenant": "default",
        "scheduled_ms": 1_796_026_500_000,  # 2026-11-30T08:15:00Z
        "params": {"limit": 5},
    }
    # the job's one list read (SSCAN) and the run record, counted
    assert (measured["requests"], measured["commands"]) == (2, 2)
    assert measured["duration_ms"] >= 0
    (done,) = [json.loads(line) for line in log.getvalue().splitlines() if "job done" in line]
    assert done["correlation_id"] == SCHEDULED["execution_id"]
    metrics = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    (emf,) = [line for line in metrics if "_aws" in line]
    assert emf["JobRuns"] == [1.0]


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({}, "execution_id"),
        ({"execution_id": ""}, "execution_id"),
        ({"execution_id": 7}, "execution_id"),
        ({"execution_id": "x", "scheduled_time": "yesterday"}, "scheduled_time"),
        ({"execution_id": "x", "scheduled_time": "2026-11-30T08:15:00"}, "scheduled_time"),
    ],
)
def test_bad_scheduler_input_names_the_field(
    handler: LambdaFunction, event: dict[str, Any], field: str
) -> None:
    with pytest.raises(AcmiValidationError) as err:
        handler(event, FakeLambdaContext("acmi-count-users"))
    assert err.value.field == field


def test_a_run_by_hand_is_scheduled_now() -> None:
    run = JobRun.parse("count-users", {"execution_id": "manual-1"}, now_ms=42)
    assert run.scheduled_ms == 42 and run.params == {}


def test_the_kit_refuses_the_wrong_kind_of_row() -> None:
    with pytest.raises(ValueError, match="use http_handler"):
        job_handler(function("ingest"))
    with pytest.raises(ValueError, match="use job_handler"):
        http_handler(ROW)


def test_a_retried_execution_id_does_nothing_the_second_time(handler: LambdaFunction) -> None:
    handler.warm()
    first = handler(dict(SCHEDULED), FakeLambdaContext("acmi-count-users"))
    again = handler(dict(SCHEDULED), FakeLambdaContext("acmi-count-users"))
    assert first.get("replayed") is None and again["replayed"] is True
    assert again["users"] == first["users"] and again["requests"] == first["requests"]
    other = handler({**SCHEDULED, "execution_id": "another"}, FakeLambdaContext("x"))
    assert other.get("replayed") is None

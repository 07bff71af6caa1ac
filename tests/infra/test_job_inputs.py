"""The per-run caps of every scheduled job come from its schedule's Input in template.yaml:
the values there are the jobs' defaults (so a deployment that edits nothing runs as
before), the events/ samples carry exactly that Input, and every job row names where its
tenants with work are found."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acmi_core.base.lambdas import FUNCTIONS
from acmi_core.coordination.wake import MAX_WAKES_PER_RUN
from acmi_core.jobs.runner import MAX_PER_RUN
from acmi_core.jobs.tenants import DEFAULT_MAX_TENANTS, SOURCES
from tests.kit import load_event, load_template

JOBS = [spec for spec in FUNCTIONS if spec.kind == "job"]
# the default ``max`` each job applies when its Input names none
DEFAULT_MAX = {job.name: MAX_PER_RUN for job in JOBS} | {"wake": MAX_WAKES_PER_RUN}


def _input(logical_id: str) -> dict[str, Any]:
    resource = load_template()["Resources"][logical_id]
    (schedule,) = [
        e for e in resource["Properties"]["Events"].values() if e["Type"] == "ScheduleV2"
    ]
    payload: dict[str, Any] = json.loads(schedule["Properties"]["Input"])
    return payload


@pytest.mark.parametrize("job", JOBS, ids=lambda spec: spec.name)
def test_the_schedule_input_carries_the_default_caps(job: Any) -> None:
    payload = _input(job.logical_id)
    assert (payload["max"], payload["max_tenants"]) == (DEFAULT_MAX[job.name], DEFAULT_MAX_TENANTS)
    sample = load_event(f"{job.name}.scheduled")
    assert set(sample) == set(payload)
    assert {k: sample[k] for k in ("max", "max_tenants")} == {
        k: payload[k] for k in ("max", "max_tenants")
    }


def test_every_job_row_names_its_tenant_sources() -> None:
    assert sorted(SOURCES) == sorted(job.name for job in JOBS)

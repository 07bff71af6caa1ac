"""The contract of a scheduled job: what a job function receives and returns.

A job is ``def run(acmi: Acmi, run: JobRun) -> dict[str, Any]`` in some acmi_core module,
named in its row of ``acmi_core.lambdas`` as ``"<module>:<function>"``. It is run by the
Lambda kit (``functions.runtime.job_handler``) on EventBridge Scheduler's ``Input``, and
by hand with ``acmi invoke <function> --event events/<function>.<case>.json``.

The template gives every schedule this ``Input`` (Scheduler fills the placeholders)::

    {"execution_id": "<aws.scheduler.execution-id>",
     "scheduled_time": "<aws.scheduler.scheduled-time>", ...job parameters}

Scheduler retries a failed invocation with the same ``execution_id``: a job that writes
makes its writes idempotent on it (e.g. ``WritePlan.once`` keyed by the execution id),
so a retried execution does its work once.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from acmi_core.errors import AcmiValidationError

if TYPE_CHECKING:
    from acmi_core.client import Acmi

MAX_EXECUTION_ID_LEN = 256
RESERVED_FIELDS = ("execution_id", "scheduled_time")


@dataclass(frozen=True)
class JobRun:
    """One execution of a scheduled job."""

    job: str
    execution_id: str
    scheduled_ms: int  # when Scheduler meant it to run (ms since epoch)
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, job: str, event: object, *, now_ms: int) -> JobRun:
        """Scheduler's ``Input``; ``scheduled_time`` defaults to now for a run by hand."""
        if not isinstance(event, dict):
            raise AcmiValidationError("event", "object", "must be a JSON object")
        execution_id = event.get("execution_id")
        if not isinstance(execution_id, str) or not (
            1 <= len(execution_id) <= MAX_EXECUTION_ID_LEN
        ):
            raise AcmiValidationError(
                "execution_id",
                "required",
                f"must be a string of 1-{MAX_EXECUTION_ID_LEN} characters "
                "(the schedule's Input: <aws.scheduler.execution-id>)",
            )
        scheduled = event.get("scheduled_time")
        scheduled_ms = now_ms if scheduled is None else _parse_time(scheduled)
        params = {k: v for k, v in event.items() if k not in RESERVED_FIELDS}
        return cls(job, execution_id, scheduled_ms, params)


def _parse_time(raw: object) -> int:
    if isinstance(raw, str):
        try:
            moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is not None:
                return int(moment.timestamp() * 1000)
    raise AcmiValidationError(
        "scheduled_time", "timestamp", "must be an ISO 8601 time with a zone (2026-11-30T08:00:00Z)"
    )


Job = Callable[["Acmi", JobRun], dict[str, Any]]


def load_job(path: str) -> Job:
    """The job named ``"<module>:<function>"``."""
    module_name, _, attribute = path.partition(":")
    job: Job = getattr(importlib.import_module(module_name), attribute)
    if not callable(job):
        raise TypeError(f"job {path!r} is not callable")
    return job

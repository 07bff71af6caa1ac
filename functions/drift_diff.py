"""drift-diff (hourly): model drift, stale requests, past-due dates, Comms v1.1 violations."""

from functions.runtime import job_handler

handler = job_handler("drift-diff")

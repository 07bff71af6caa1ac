"""standup-brief (weekdays 09:00 UTC): the operator's brief of the last 24 h."""

from functions.runtime import job_handler

handler = job_handler("standup-brief")

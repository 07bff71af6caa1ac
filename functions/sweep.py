"""The liveness sweep (every 15 minutes): STALLED after 48 h of silence, escalated once."""

from functions.runtime import job_handler

handler = job_handler("sweep")

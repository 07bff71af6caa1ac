"""Daily: the memory hygiene job (weekly review, monthly audit, quarterly archive).

Archives go to Amazon S3 through :class:`functions.sinks.s3.S3Sink`, registered with
``acmi_core.jobs.sink`` for ``s3://bucket/prefix`` (the ``archive`` parameter, or
``ACMI_ARCHIVE_URL``) when that module is imported, here; acmi_core never imports the AWS
SDK. See ``functions/sinks/s3.py`` for the requests per quarter and the failures.
"""

from __future__ import annotations

from functions.runtime import job_handler
from functions.sinks.s3 import S3Sink, s3_client  # registers the s3 sink

__all__ = ["S3Sink", "handler", "s3_client"]

handler = job_handler("hygiene")

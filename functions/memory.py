"""The five memory layers under /v1/memory/{entity}/...

Importing ``functions.sinks.s3`` registers the S3 archive sink: ``POST .../archive``
and search's archived layer reach ``ACMI_ARCHIVE_URL`` through it."""

import functions.sinks.s3  # noqa: F401  (registers the s3 sink)
from functions.runtime import http_handler

handler = http_handler("memory")

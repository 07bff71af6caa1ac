"""The S3 archive sink: :class:`S3Sink`, registered with ``acmi_core.jobs.sink`` for
``s3://bucket/prefix`` when this module is imported. Three importers: the hygiene function
(the scheduled archive), the memory function (``POST /v1/memory/{entity}/archive`` and
memory search reaching archived events) and the ``acmi memory`` command, which imports it
by name (``importlib``) when its archive URL's scheme is ``s3``: acmi_core never imports
the AWS SDK nor ``functions/``. Importing it does not import boto3; the S3 client is built
on the first archive call of the process and reused while warm.

Per quarter archived: ``GetObject`` (what earlier runs wrote), ``PutObject`` with
``ChecksumSHA256`` (S3 refuses a body that does not match it) and the line count and
sha256 as metadata, then ``GetObject`` again: the archive counts the lines and hashes the
bytes read back before it trims anything. Every failure is a :class:`SinkError` naming
the operation and S3's error code (nothing is trimmed for that quarter).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable
from typing import Any, Final

from acmi_core.jobs.sink import SinkError, register_sink

CONNECT_TIMEOUT_S: Final = 3.0
READ_TIMEOUT_S: Final = 30.0
CONTENT_TYPE: Final = "application/x-ndjson"
MISSING: Final = ("NoSuchKey", "404", "NotFound")


@functools.cache
def s3_client() -> Any:
    """The process's S3 client (region from ``AWS_REGION``, set by Lambda); botocore
    retries throttling and 5xx itself (standard mode, 3 attempts)."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"total_max_attempts": 3, "mode": "standard"},
    )
    return boto3.client("s3", config=config)


class S3Sink:
    """``acmi_core.jobs.sink.ArchiveSink`` on one bucket."""

    def __init__(self, bucket: str, client: Callable[[], Any] = s3_client) -> None:
        self.bucket = bucket
        self._client = client

    def get(self, key: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            reply = self._client().get_object(Bucket=self.bucket, Key=key)
            body: bytes = reply["Body"].read()
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code") or "error")
            if code in MISSING:
                return None
            raise SinkError(f"S3 GetObject {code}") from None
        except BotoCoreError as exc:
            raise SinkError(f"S3 GetObject {type(exc).__name__}") from None
        return body

    def put(self, key: str, body: bytes, *, sha256: str, count: int) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client().put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                ContentType=CONTENT_TYPE,
                ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode(),
                Metadata={"acmi-count": str(count), "acmi-sha256": sha256},
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code") or "error"
            raise SinkError(f"S3 PutObject {code}") from None
        except BotoCoreError as exc:
            raise SinkError(f"S3 PutObject {type(exc).__name__}") from None


register_sink("s3", S3Sink)

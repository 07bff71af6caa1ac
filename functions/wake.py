"""The wake tick (every 5 minutes): due agents woken, their bundle delivered.

EventBridge targets (``{"type": "eventbridge", "bus": ...}``) are delivered from here,
because acmi_core never imports the AWS SDK: this module registers
:class:`EventBridgeDeliverer` with ``acmi_core.jobs.deliver``, so only the wake function pays for
boto3, and only on its first EventBridge wake. One ``PutEvents`` entry per wake on the
target's bus: ``Source: acmi.wake``, ``DetailType: acmi.wake``, ``Detail``: the wake body
(the agent, its session id and the Markdown bundle; about 24 KB at the wake budget, under
EventBridge's 256 KB). A failed entry or an API error is a failed delivery (the job posts
wake-status failed); botocore retries throttling itself (3 attempts, 3 s connect and 5 s
read timeouts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from acmi_core.jobs.deliver import DeliveryResult, register_deliverer
from functions.runtime import job_handler

SOURCE: Final = "acmi.wake"
DETAIL_TYPE: Final = "acmi.wake"


def _events_client() -> Any:
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=3, read_timeout=5, retries={"max_attempts": 3})
    return boto3.client("events", config=config)


class EventBridgeDeliverer:
    """``acmi_core.jobs.deliver.Deliverer`` for ``{"type": "eventbridge", "bus": ...}``."""

    def __init__(self, client: Callable[[], Any] = _events_client) -> None:
        self._new_client = client
        self._client: Any = None

    def deliver(self, target: Mapping[str, Any], body: bytes) -> DeliveryResult:
        from botocore.exceptions import BotoCoreError, ClientError

        if self._client is None:
            self._client = self._new_client()
        entry = {
            "Source": SOURCE,
            "DetailType": DETAIL_TYPE,
            "Detail": body.decode("utf-8"),
            "EventBusName": str(target.get("bus", "")),
        }
        try:
            reply = self._client.put_events(Entries=[entry])
        except (BotoCoreError, ClientError) as exc:
            return DeliveryResult(False, f"failed: EventBridge {type(exc).__name__}")
        if reply.get("FailedEntryCount"):
            failed = (reply.get("Entries") or [{}])[0]
            code = failed.get("ErrorCode") or "unknown error"
            return DeliveryResult(False, f"failed: EventBridge {code}")
        event_id = (reply.get("Entries") or [{}])[0].get("EventId", "")
        return DeliveryResult(True, f"delivered: EventBridge event {event_id}")


register_deliverer("eventbridge", EventBridgeDeliverer())
handler = job_handler("wake")

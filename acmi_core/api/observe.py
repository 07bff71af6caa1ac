"""What the API reports about itself, without depending on any telemetry library: the
Lambda layer plugs in Powertools (Logger correlation id, EMF metrics); local runs log."""

from __future__ import annotations

import logging
from typing import Protocol

log = logging.getLogger("acmi.api")


class Observer(Protocol):
    def metric(self, name: str, value: float = 1) -> None:
        """One business metric per operation (e.g. EventsStored)."""
        ...

    def correlate(self, correlation_id: str) -> None:
        """The correlationId of the events being handled, for every later log line."""
        ...


class LogObserver:
    def metric(self, name: str, value: float = 1) -> None:
        log.debug("metric %s=%s", name, value)

    def correlate(self, correlation_id: str) -> None:
        log.debug("correlation_id=%s", correlation_id)

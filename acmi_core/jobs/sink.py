"""The archive sink: where raw archived events go (S3 in Lambda, registered by
``functions/sinks/s3.py``), the key of a quarter's object, its JSONL body, and the events
read back from it (memory search reaches the cold layer through :func:`archived_events`).

acmi_core imports no SDK: a sink registers itself for its URL scheme with
:func:`register_sink`, and :func:`open_destination` opens ``<scheme>://<location>/<prefix>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import EntityId, Event
from acmi_core.base.settings import ARCHIVE_URL, ARCHIVE_URL_RULE
from acmi_core.base.stored import decode_event
from acmi_core.memory.layers import Quarter

if TYPE_CHECKING:
    from acmi_core.client import Acmi


class SinkError(Exception):
    """The sink could not read or write an object; the message names the operation and
    the error code, never data."""


class ArchiveSink(Protocol):
    """Where raw archived events go (S3 in Lambda: ``functions/hygiene.py``). ``get``
    returns the object's bytes, None when there is none; ``put`` replaces it (``sha256``
    and ``count`` describe ``body``: a sink may have its store check them on upload).
    Both raise :class:`SinkError`."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, body: bytes, *, sha256: str, count: int) -> None: ...


SinkFactory = Callable[[str], ArchiveSink]
"""Builds the sink of a location (the bucket of ``s3://bucket/prefix``); builds no
client until the first call."""

# Sinks of schemes whose SDK acmi_core does not import; functions/hygiene.py registers "s3".
SINKS: dict[str, SinkFactory] = {}


def register_sink(scheme: str, factory: SinkFactory) -> None:
    """``<scheme>://<location>/<prefix>`` archives through ``factory`` from now on."""
    SINKS[scheme] = factory


@dataclass(frozen=True)
class Destination:
    """An archive sink and the key prefix its objects go under; ``url`` for reports."""

    sink: ArchiveSink
    prefix: str
    url: str


def open_destination(url: str | None) -> tuple[Destination | None, str | None]:
    """The destination of ``url`` (None or "": no archive sink) and, when its scheme has
    no sink in this process, why not (the run then writes documents and trims nothing)."""
    if not url:
        return None, None
    match = ARCHIVE_URL.fullmatch(url)
    if match is None:
        raise AcmiValidationError("archive", "archive_url", ARCHIVE_URL_RULE)
    scheme, location, prefix = match[1], match[2], (match[3] or "").strip("/")
    factory = SINKS.get(scheme)
    if factory is None:
        return None, (
            f"{scheme}: no archive sink in this process (the hygiene Lambda function "
            "registers s3): documents written, nothing trimmed"
        )
    return Destination(factory(location), prefix, url.rstrip("/")), None


def object_key(prefix: str, tenant: str, entity: EntityId, quarter: Quarter) -> str:
    """``<prefix>/<tenant>/<entity>/<YYYY>-Q<N>.jsonl``."""
    tail = f"{tenant}/{entity}/{quarter}.jsonl"
    return f"{prefix}/{tail}" if prefix else tail


def jsonl(lines: Sequence[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def split_jsonl(body: bytes) -> list[bytes]:
    """An object's lines (the members), in order."""
    lines = body.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def archived_events(
    acmi: Acmi, dest: Destination, entity: str | EntityId, quarter: Quarter | str
) -> list[Event]:
    """The events of ``entity`` archived for ``quarter``, read back from the sink, oldest
    first (memory search reaches the cold layer through this). A line that is not an
    event (another tool's member) is left out."""
    eid = EntityId.parse(entity)
    q = quarter if isinstance(quarter, Quarter) else Quarter.parse(quarter, "quarter")
    body = dest.sink.get(object_key(dest.prefix, acmi.tenant, eid, q))
    events = []
    for line in split_jsonl(body or b""):
        decoded = decode_event(line)
        if not isinstance(decoded, str):
            events.append(decoded[0])
    events.sort(key=lambda e: e.ts)
    return events

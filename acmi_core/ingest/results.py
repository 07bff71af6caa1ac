"""What an append or a webhook answers (``IngestResult.body``, the HTTP body as it is):
the events stored, or on a replay the ids of those a first delivery stored; or a
handshake's reply. ``Json`` marks an event as stored (the sender's fields kept)."""

# No `from __future__ import annotations`, as in the other result modules: on Python 3.11
# a TypedDict's NotRequired written as a string is taken for a required key at run time.
from typing import TypedDict, final

from pydantic import JsonValue

Json = JsonValue


@final  # final: a key test (`"stored" in body`) tells the two bodies apart, for mypy
class StoredEvents(TypedDict):
    stored: int
    # each event stored, its entity first; a replay: only their ids (EVENT_ID_FIELDS)
    events: list[dict[str, Json]]


@final
class Challenge(TypedDict):
    """Slack's url_verification, answered with its challenge: nothing stored."""

    challenge: str


IngestBody = StoredEvents | Challenge

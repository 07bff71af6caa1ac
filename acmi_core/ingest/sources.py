"""The webhook sources: one row each, read by ingest (mapper, idempotency, JSON
leniency), auth (which credentials a source accepts) and the API docs.

A URL names a source as ``/v1/ingest/<row>`` or ``/v1/ingest/<row>-<anything>`` (e.g.
``n8n-billing``), so one tenant can configure several senders of one kind. Adding a
source is one mapper in ``mappers.py``, one row here, and its tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal

from acmi_core.base.errors import AcmiValidationError
from acmi_core.ingest.mappers import (
    GITHUB_DELIVERY_HEADER,
    GITHUB_EVENT_HEADER,
    map_automation,
    map_generic,
    map_github,
    map_gmail,
    map_slack,
    map_vapi,
)
from acmi_core.ingest.webhook import Mapper

SOURCE_RE: Final = re.compile(r"[a-z][a-z0-9_-]{0,63}")


class Credential(StrEnum):
    """How a webhook sender may prove who it is (an HMAC signature, when the source's
    config holds a secret, is checked on top of any of them)."""

    API_KEY = "api_key"  # Authorization: Bearer acmi_...
    PUSH_TOKEN = "push_token"  # ?token=acmipt_... for senders that cannot set headers
    GOOGLE_OIDC = "google_oidc"  # Pub/Sub push's signed Google identity token


@dataclass(frozen=True)
class SourceSpec:
    """``idempotency``: how a delivery without an ``Idempotency-Key`` header is recognised
    when retried: ``body`` (the source, the URL's parameters that choose the entity or
    the mapping, and the exact body, remembered briefly), ``pubsub`` or ``sender`` (the
    same URL parameters and the mapper's ``sender_id``: Pub/Sub's messageId, Slack's
    event_id, GitHub's delivery id). ``lenient_json``: raw newlines, carriage returns and
    tabs inside strings are accepted (never any other control character); only for a
    sender that writes its body from a text template, and the row says why.
    ``signature``: how the body is signed with the secret in the source's config:
    ``acmi`` (X-Acmi-Signature, checked when a secret is configured), ``slack`` or
    ``github`` (the sender's own scheme, always required: such a source refuses
    deliveries until its secret is configured). ``headers``: the request headers the
    mapper reads. ``mapping``: the mapper reads a stored mapping (so one may be set)."""

    name: str
    summary: str
    mapper: Mapper
    idempotency: Literal["body", "pubsub", "sender"] = "body"
    lenient_json: bool = False
    credentials: frozenset[Credential] = frozenset({Credential.API_KEY, Credential.PUSH_TOKEN})
    signature: Literal["acmi", "slack", "github"] = "acmi"
    headers: tuple[str, ...] = ()
    mapping: bool = False

    def accepts(self, credential: Credential) -> bool:
        return credential in self.credentials


SOURCES: Final[tuple[SourceSpec, ...]] = (
    SourceSpec(
        "make",
        "Make (HTTP module): a JSON object per item; well-known fields are picked up",
        map_automation,
        # Make's HTTP module sends its "Request content" as typed, with mapped values
        # pasted in unescaped: a multi-line note arrives as raw newlines inside a string.
        lenient_json=True,
        mapping=True,
    ),
    SourceSpec(
        "n8n",
        "n8n (HTTP Request node): a JSON object per item; well-known fields are picked up",
        map_automation,
        # Strict: the HTTP Request node parses its JSON body itself ("JSON parameter needs
        # to be valid JSON") and sends it re-serialised (JSON.stringify), escapes and all.
        mapping=True,
    ),
    SourceSpec(
        "gmail",
        "Gmail watch notifications delivered by a Google Pub/Sub push subscription",
        map_gmail,
        idempotency="pubsub",
        credentials=frozenset(Credential),
    ),
    SourceSpec(
        "generic",
        "any JSON, mapped with map.<field>=<path> query parameters or a stored mapping",
        map_generic,
        # Generic senders include templated ones (IFTTT's "Make a web request", Zapier's
        # Custom Request, a curl line in a shell script) that paste values into a JSON
        # text unescaped, as Make does.
        lenient_json=True,
        mapping=True,
    ),
    SourceSpec(
        "slack",
        "Slack Events API (event_callback; url_verification is answered with its challenge)",
        map_slack,
        idempotency="sender",
        # Slack cannot set an Authorization header: the push token goes in the Request
        # URL, and Slack's signing secret signs every request.
        signature="slack",
    ),
    SourceSpec(
        "github",
        "GitHub webhooks (the X-GitHub-Event header is the kind)",
        map_github,
        idempotency="sender",
        signature="github",
        headers=(GITHUB_EVENT_HEADER, GITHUB_DELIVERY_HEADER),
    ),
    SourceSpec(
        "vapi",
        "Vapi server messages (end-of-call-report, status-update, tool-calls): the call on"
        " the caller's and the call's timelines",
        map_vapi,
        # Vapi may send a message twice: the call id and message type identify it.
        idempotency="sender",
    ),
)


def check_source(source: object) -> str:
    if not isinstance(source, str) or not SOURCE_RE.fullmatch(source):
        raise AcmiValidationError(
            "source", "format", "must match [a-z][a-z0-9_-]{0,63} (e.g. make, n8n, gmail)"
        )
    return source


def source_spec(source: str) -> SourceSpec:
    """The row serving ``source``: its own name, or ``<name>-<anything>``."""
    for spec in SOURCES:
        if source == spec.name or source.startswith(f"{spec.name}-"):
            return spec
    names = ", ".join(spec.name for spec in SOURCES)
    raise AcmiValidationError(
        "source",
        "unknown",
        f"unknown source {source!r}: use one of {names} "
        "(or '<one of them>-<name>', e.g. n8n-billing)",
    )

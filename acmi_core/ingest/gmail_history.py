"""What changed in a Gmail mailbox since a history id: one event per new message.

A Gmail watch push carries only ``{"emailAddress", "historyId"}`` (``map_gmail``). When
the mailbox has OAuth credentials (client id, client secret, refresh token: kept in a
secret store, never in ACMI's store), the ingest asks the Gmail API v1 what was added
since the last history id it saw, and stores one ``gmail-message`` event per message.

Pure core: the caller gives the ``httpx.Client`` (tests: ``httpx.MockTransport``), the
token cache and a monotonic clock; nothing here reads the environment or a secret.

The requests, all to ``users/me`` (the account the refresh token belongs to), after an
access token (``gmail_api.AccessTokens``):

- ``GET history?startHistoryId=..&historyTypes=messageAdded`` page by page (at most
  ``MAX_HISTORY_PAGES`` pages of ``HISTORY_PAGE_SIZE`` records).
- ``GET messages/{id}?format=metadata`` (From, To, Subject, Date) per new message id,
  ids deduplicated, drafts skipped (every draft save adds a message), at most
  ``max_messages``; a message deleted since (404) is skipped.
- ``GET profile`` once per credentials and process: the account they belong to must be
  the mailbox notified, else its mail would land on another mailbox's entity.
- No start id yet, or one Gmail no longer knows (history 404: ids stay valid for at
  least a week): ``GET profile`` for the current history id, then the newest messages
  of the last day (``messages?q=newer_than:1d``, at most ``max_messages``). What was
  added before that day while the id was lost is not fetched.

``last_history_id`` is where the next fetch starts. When everything was read it is the
mailbox's current history id. When a bound cut the fetch short (``truncated``) it is the
last history record whose messages were all fetched, so the next fetch resumes there and
nothing is skipped (a message may come twice: its correlationId, ``gmail-<id>``, names
it); only a single record holding more than ``max_messages`` messages loses the rest.

Google's errors (``GmailUnavailable``, ``GmailAuthError``, ``GmailApiError``), the
credentials and the access token cache are ``ingest/gmail_api.py``'s.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Final, Literal

import httpx

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import MAX_TS_MS, EntityId
from acmi_core.ingest.gmail_api import (
    DEFAULT_RETRY_AFTER_S,
    AccessTokens,
    Clock,
    GmailAuthError,
    GmailCredentials,
    GmailSession,
    GmailUnavailable,
    json_object,
    raise_for_status,
)
from acmi_core.ingest.webhook import Delivery, truncate

METADATA_HEADERS: Final = ("From", "To", "Subject", "Date")
# A whole fetch (token, pages, every message) stops starting requests past this: a push
# handler must answer before Pub/Sub's ack deadline and the Lambda timeout.
DEFAULT_DEADLINE_S: Final = 20.0
DEFAULT_MAX_MESSAGES: Final = 50
MAX_MESSAGES: Final = 500
HISTORY_PAGE_SIZE: Final = 100  # Gmail's own default; it allows up to 500
MAX_HISTORY_PAGES: Final = 5
RECENT_QUERY: Final = "newer_than:1d"
# Header values are kept to this many characters (a To: of a mailing list can be huge).
MAX_HEADER_CHARS: Final = 1000
MAX_SNIPPET_CHARS: Final = 500
MAX_LABELS: Final = 100
_HISTORY_ID_RE: Final = re.compile(r"[0-9]{1,20}")
# Gmail's message ids are hex; one that is not must never be pasted into a URL path.
_MESSAGE_ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")


@dataclass(frozen=True)
class GmailMessage:
    """One message's metadata. ``date_ms``: its internalDate (when Gmail received it),
    else its Date header, else None."""

    id: str
    thread_id: str | None
    sender: str | None  # From:
    to: str | None
    subject: str | None
    snippet: str | None
    labels: tuple[str, ...]
    date_ms: int | None

    def to_payload(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "threadId": self.thread_id,
            "from": self.sender,
            "to": self.to,
            "subject": self.subject,
            "snippet": self.snippet,
            "labels": list(self.labels),
            "date_ms": self.date_ms,
        }


Fallback = Literal["no_start", "history_expired"]


@dataclass(frozen=True)
class GmailChanges:
    """The new messages (oldest first), where the next fetch starts, whether a bound cut
    this one short, and whether the recent listing stood in for the history (``fallback``:
    ``no_start`` when there was no history id, ``history_expired`` on a history 404)."""

    email: str
    messages: list[GmailMessage]
    last_history_id: str
    truncated: bool
    fallback: Fallback | None = None
    skipped_deleted: int = 0


# --- reading Gmail's answers ----------------------------------------------------------------


def _history_id(value: object, field: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and _HISTORY_ID_RE.fullmatch(value):
        return int(value)
    raise AcmiValidationError(field, "numeric", "must be a Gmail history id (digits)")


def _answered_history_id(body: Mapping[str, Any], what: str) -> int:
    try:
        return _history_id(body.get("historyId"), "historyId")
    except AcmiValidationError:
        raise GmailUnavailable(
            f"Gmail {what}: the answer has no historyId", retry_after=DEFAULT_RETRY_AFTER_S
        ) from None


def _text(value: object, limit: int) -> str | None:
    return truncate(value, limit) if isinstance(value, str) else None


def _parse_message(body: Mapping[str, Any], message_id: str) -> GmailMessage:
    payload = body.get("payload")
    raw_headers = payload.get("headers") if isinstance(payload, dict) else None
    headers: dict[str, str] = {}
    for header in raw_headers if isinstance(raw_headers, list) else []:
        if isinstance(header, dict) and isinstance(header.get("name"), str):
            value = header.get("value")
            # the first of each name (a header may repeat), as mail clients show it
            headers.setdefault(header["name"].lower(), value if isinstance(value, str) else "")
    labels = body.get("labelIds")
    thread = body.get("threadId")
    return GmailMessage(
        id=message_id,
        thread_id=thread if isinstance(thread, str) else None,
        sender=_text(headers.get("from"), MAX_HEADER_CHARS),
        to=_text(headers.get("to"), MAX_HEADER_CHARS),
        subject=_text(headers.get("subject"), MAX_HEADER_CHARS),
        # Gmail sends the snippet HTML-escaped (&#39;, &amp;): stored as the text it is.
        snippet=_text(_unescape(body.get("snippet")), MAX_SNIPPET_CHARS),
        labels=tuple(
            label
            for label in (labels if isinstance(labels, list) else [])
            if isinstance(label, str)
        )[:MAX_LABELS],
        date_ms=_date_ms(body.get("internalDate"), headers.get("date")),
    )


def _unescape(value: object) -> object:
    return html.unescape(value) if isinstance(value, str) else value


def _date_ms(internal: object, date_header: str | None) -> int | None:
    if isinstance(internal, str) and internal.isascii() and internal.isdigit():
        ms = int(internal)
        if 0 <= ms <= MAX_TS_MS:
            return ms
    if date_header:
        try:
            parsed = parsedate_to_datetime(date_header)
        except (TypeError, ValueError, IndexError):
            return None
        if parsed.tzinfo is not None:  # a Date with no zone is no instant
            ms = int(parsed.timestamp() * 1000)
            return ms if 0 <= ms <= MAX_TS_MS else None
    return None


def _is_draft(labels: object) -> bool:
    return isinstance(labels, list) and "DRAFT" in labels


def _message_id(message: object) -> str | None:
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, str) and _MESSAGE_ID_RE.fullmatch(value) else None


# --- the fetch ------------------------------------------------------------------------------


@dataclass
class _Record:
    """One history record: its id and the new message ids first seen in it."""

    id: int
    message_ids: list[str]


def _read_history(
    session: GmailSession, start: int, max_messages: int
) -> tuple[list[_Record], int, bool] | None:
    """The history records after ``start`` (pages followed until more than
    ``max_messages`` new ids were found): (records, the mailbox's history id, whether
    unread pages remain). None when Gmail no longer knows ``start`` (404)."""
    records: list[_Record] = []
    seen: set[str] = set()
    found = 0
    page_token: str | None = None
    current = start
    for _ in range(MAX_HISTORY_PAGES):
        params = [
            ("startHistoryId", str(start)),
            ("historyTypes", "messageAdded"),
            ("maxResults", str(HISTORY_PAGE_SIZE)),
        ]
        if page_token:
            params.append(("pageToken", page_token))
        response = session.get("/history", params, "history.list")
        if response.status_code == 404:
            if records or page_token:  # the id expired between two pages: start over
                raise GmailUnavailable(
                    "Gmail history.list: the start history id expired while paging",
                    retry_after=1.0,
                )
            return None
        raise_for_status(response, "history.list")
        body = json_object(response, "history.list")
        current = _answered_history_id(body, "history.list")
        history = body.get("history")
        for raw in history if isinstance(history, list) else []:
            if not isinstance(raw, dict):
                continue
            try:
                record_id = _history_id(raw.get("id"), "history.id")
            except AcmiValidationError:
                continue
            ids = []
            added = raw.get("messagesAdded")
            for item in added if isinstance(added, list) else []:
                message = item.get("message") if isinstance(item, dict) else None
                message_id = _message_id(message)
                if message_id is None or message_id in seen:
                    continue
                seen.add(message_id)
                if isinstance(message, dict) and _is_draft(message.get("labelIds")):
                    continue
                ids.append(message_id)
            records.append(_Record(record_id, ids))
            found += len(ids)
        next_token = body.get("nextPageToken")
        page_token = next_token if isinstance(next_token, str) and next_token else None
        if page_token is None:
            return records, current, False
        if found > max_messages or session.time_left() <= 0:
            break
    return records, current, True


def _get_message(session: GmailSession, message_id: str) -> GmailMessage | None:
    """A message's metadata; None when it was deleted since it was added (404)."""
    params = [("format", "metadata"), *(("metadataHeaders", h) for h in METADATA_HEADERS)]
    response = session.get(f"/messages/{message_id}", params, "messages.get")
    if response.status_code == 404:
        return None
    raise_for_status(response, "messages.get")
    return _parse_message(json_object(response, "messages.get"), message_id)


def _take(session: GmailSession, message_id: str, messages: list[GmailMessage]) -> int:
    """Fetch one message into ``messages`` (a draft is left out); 1 when it was deleted
    since it was added, else 0."""
    message = _get_message(session, message_id)
    if message is None:
        return 1
    if not _is_draft(list(message.labels)):
        messages.append(message)
    return 0


def _from_history(
    session: GmailSession, email: str, start: int, max_messages: int
) -> GmailChanges | None:
    read = _read_history(session, start, max_messages)
    if read is None:
        return None
    records, current, pages_left = read
    messages: list[GmailMessage] = []
    deleted = 0
    complete = start  # the last record whose messages were all fetched
    stopped = False
    for record in records:
        for message_id in record.message_ids:
            if len(messages) >= max_messages or session.time_left() <= 0:
                stopped = True
                break
            deleted += _take(session, message_id, messages)
        else:
            complete = max(complete, record.id)
            continue
        # Cut short inside this record: resume at the record before it, or past it when
        # it alone holds more than max_messages (else the mailbox would stall on it).
        if complete == start and len(record.message_ids) > max_messages:
            complete = record.id
        break
    truncated = stopped or pages_left
    last = complete if truncated else max(current, complete)
    return GmailChanges(email, messages, str(last), truncated, None, deleted)


def _profile(session: GmailSession, email: str) -> int:
    """The mailbox's current history id, checking the credentials are ``email``'s: with
    another account's, its mail would land on this mailbox's entity."""
    response = session.get("/profile", [], "getProfile")
    raise_for_status(response, "getProfile")
    profile = json_object(response, "getProfile")
    current = _answered_history_id(profile, "getProfile")
    owner = profile.get("emailAddress")
    if not isinstance(owner, str) or owner.lower() != email.lower():
        raise GmailAuthError(
            f"gmail_credentials: they are not the credentials of {email}'s mailbox",
            field="gmail_credentials",
        )
    session.tokens.set_owner(session.creds, email)
    return current


def _from_recent(
    session: GmailSession, email: str, max_messages: int, fallback: Fallback
) -> GmailChanges:
    """The newest messages of the last day, and the mailbox's history id read first, so
    that what arrives meanwhile comes with the next fetch."""
    current = _profile(session, email)
    params = [("maxResults", str(max_messages)), ("q", RECENT_QUERY)]
    response = session.get("/messages", params, "messages.list")
    raise_for_status(response, "messages.list")
    body = json_object(response, "messages.list")
    listed = body.get("messages")
    ids: list[str] = []
    for item in listed if isinstance(listed, list) else []:
        message_id = _message_id(item)
        if message_id is not None and message_id not in ids:
            ids.append(message_id)
    truncated = bool(body.get("nextPageToken")) or len(ids) > max_messages
    messages: list[GmailMessage] = []
    deleted = 0
    for message_id in ids[:max_messages]:
        if session.time_left() <= 0:
            truncated = True
            break
        deleted += _take(session, message_id, messages)
    messages.reverse()  # Gmail lists newest first; events go oldest first
    return GmailChanges(email, messages, str(current), truncated, fallback, deleted)


def fetch_changes(
    client: httpx.Client,
    creds: GmailCredentials,
    email: str,
    start_history_id: str | int | None,
    *,
    tokens: AccessTokens,
    max_messages: int = DEFAULT_MAX_MESSAGES,
    clock: Clock = time.monotonic,
    deadline_s: float = DEFAULT_DEADLINE_S,
) -> GmailChanges:
    """The messages added to ``email``'s mailbox after ``start_history_id`` (the last
    ``GmailChanges.last_history_id`` stored; None: none yet), at most ``max_messages``.
    ``tokens`` is the process's access token cache."""
    if isinstance(max_messages, bool) or not isinstance(max_messages, int):
        raise AcmiValidationError("max_messages", "type", "must be an integer")
    if not 1 <= max_messages <= MAX_MESSAGES:
        raise AcmiValidationError("max_messages", "range", f"must be 1-{MAX_MESSAGES}")
    if not isinstance(email, str) or "@" not in email:
        raise AcmiValidationError("email", "required", "must be the mailbox's address")
    session = GmailSession(client, creds, tokens, clock, deadline_s)
    if start_history_id is None:
        return _from_recent(session, email, max_messages, "no_start")
    start = _history_id(start_history_id, "start_history_id")
    if tokens.owner(creds) != email.lower():
        _profile(session, email)  # once per credentials and process
    changes = _from_history(session, email, start, max_messages)
    if changes is None:
        return _from_recent(session, email, max_messages, "history_expired")
    return changes


# --- events ---------------------------------------------------------------------------------


def _summary(message: GmailMessage) -> str:
    subject = (message.subject or "").strip() or "(no subject)"
    sender = (message.sender or "").strip()
    return truncate(f"{subject} (from {sender})" if sender else subject)


def message_events(
    changes: GmailChanges,
    *,
    source: str,
    mailbox_entity: str,
    parent_correlation_id: str | None = None,
) -> list[Delivery]:
    """One Comms v1.1 ``gmail-message`` event per message, for ``mailbox_entity``. The
    correlationId ``gmail-<message id>`` is the same however often the message is
    fetched; ``ts`` is when Gmail received it (else its Date header, else now, at
    storing). ``parent_correlation_id``: the notification event's, to link the two."""
    entity = str(EntityId.parse(mailbox_entity, "mailbox_entity"))
    deliveries = []
    for message in changes.messages:
        event: dict[str, Any] = {
            "source": source,
            "kind": "gmail-message",
            "correlationId": f"gmail-{message.id}",
            "summary": _summary(message),
            "payload": {"mailbox": changes.email, **message.to_payload()},
        }
        if parent_correlation_id:
            event["parentCorrelationId"] = parent_correlation_id
        if message.date_ms is not None:
            event["ts"] = message.date_ms
        deliveries.append(Delivery(entity, event))
    return deliveries

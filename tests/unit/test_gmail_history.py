"""The Gmail history fetcher against a fake Google (httpx.MockTransport): token refresh
and reuse, the one retry after a 401, history pages, the recent listing when the history
id expired, the bounds, the error family, and that no secret ever shows.

The answers are shaped like the documented Gmail API v1 responses (users.history.list
with messagesAdded, users.messages.get format=metadata with payload.headers,
users.messages.list, users.getProfile) and Google's OAuth token endpoint, error bodies
included. No sockets, no real waiting: a fake clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from acmi_core.base.errors import AcmiError, AcmiValidationError, Unavailable
from acmi_core.base.model import MAX_SUMMARY_LEN, parse_event
from acmi_core.ingest.gmail_api import (
    REQUEST_TIMEOUT_S,
    TOKEN_EXPIRY_MARGIN_S,
    AccessTokens,
    GmailApiError,
    GmailAuthError,
    GmailCredentials,
    GmailUnavailable,
)
from acmi_core.ingest.gmail_history import (
    MAX_MESSAGES,
    GmailChanges,
    GmailMessage,
    fetch_changes,
    message_events,
)

EMAIL = "mikey@example.com"
CLIENT_ID = "123456789012-abcdefghijklmnop.apps.googleusercontent.com"
CLIENT_SECRET = "GOCSPX-unitTestClientSecret9f2b"
REFRESH_TOKEN = "1//0gUnitTestRefreshTokenCgYIARAAGBASNwF-L9Ir"
ACCESS_TOKENS = ("ya29.a0AfB_unit-access-token-one", "ya29.a0AfB_unit-access-token-two")
SECRETS = (CLIENT_SECRET, REFRESH_TOKEN, *ACCESS_TOKENS)
CREDS = GmailCredentials(CLIENT_ID, CLIENT_SECRET, REFRESH_TOKEN)
START = "9876500"

INBOX = ["UNREAD", "IMPORTANT", "CATEGORY_PERSONAL", "INBOX"]


def token_answer(access_token: str, expires_in: int = 3599) -> dict[str, Any]:
    return {
        "access_token": access_token,
        "expires_in": expires_in,
        "scope": "https://www.googleapis.com/auth/gmail.readonly",
        "token_type": "Bearer",
    }


def added(record_id: str, *messages: tuple[str, list[str]]) -> dict[str, Any]:
    """A history record as history.list returns it with historyTypes=messageAdded."""
    return {
        "id": record_id,
        "messages": [{"id": mid, "threadId": mid} for mid, _ in messages],
        "messagesAdded": [
            {"message": {"id": mid, "threadId": mid, "labelIds": labels}}
            for mid, labels in messages
        ],
    }


def metadata(
    message_id: str,
    *,
    subject: str = "Renewal quote for 2027",
    sender: str = "Dana Ruiz <dana@acme.example>",
    internal_date: str | None = "1795701792000",
    date: str = "Thu, 26 Nov 2026 14:03:11 +0000",
    labels: list[str] | None = None,
) -> dict[str, Any]:
    """A messages.get?format=metadata answer (headers in the order Gmail keeps them)."""
    answer: dict[str, Any] = {
        "id": message_id,
        "threadId": "18c1f0000000aaaa",
        "labelIds": INBOX if labels is None else labels,
        "snippet": "Hi Mikey, the quote we discussed is attached &amp; valid until Dec 15. "
        "Let me know if you&#39;d like to go over it.",
        "sizeEstimate": 51234,
        "historyId": "9876540",
        "internalDate": internal_date,
        "payload": {
            "partId": "",
            "mimeType": "multipart/mixed",
            "filename": "",
            "headers": [
                {"name": "Date", "value": date},
                {"name": "From", "value": sender},
                {"name": "Subject", "value": subject},
                {"name": "To", "value": f"Mikey <{EMAIL}>"},
            ],
            "body": {"size": 0},
        },
    }
    if internal_date is None:
        del answer["internalDate"]
    return answer


def google_error(code: int, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "error": {
            "code": code,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": reason}],
            "status": status,
        }
    }


UNAUTHENTICATED = google_error(
    401,
    "UNAUTHENTICATED",
    "authError",
    "Request had invalid authentication credentials. Expected OAuth 2 access token, "
    "login cookie or other valid authentication credential.",
)
NOT_FOUND = google_error(404, "NOT_FOUND", "notFound", "Requested entity was not found.")
BACKEND_ERROR = google_error(503, "UNAVAILABLE", "backendError", "Backend Error")
PROFILE = {
    "emailAddress": EMAIL,
    "messagesTotal": 18234,
    "threadsTotal": 9120,
    "historyId": "9876599",
}


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


Answer = dict[str, Any] | httpx.Response | Exception
Route = Callable[[httpx.Request], Answer]


class FakeGoogle:
    """The MockTransport handler: routes by path, keeps every request. A route is a
    list of answers (taken in turn, the last repeats) or a function of the request."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.routes: dict[str, list[Answer] | Route] = {
            "/token": [token_answer(ACCESS_TOKENS[0])],
            "/gmail/v1/users/me/profile": [PROFILE],
        }
        self.calls: dict[str, int] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path.startswith("/gmail/v1/users/me/messages/"):
            route = self.routes.get(path) or self.routes["messages.get"]
        else:
            route = self.routes[path]
        if callable(route):
            answer = route(request)
        else:
            count = self.calls.get(path, 0)
            self.calls[path] = count + 1
            answer = route[min(count, len(route) - 1)]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        return httpx.Response(200, json=answer)

    def paths(self) -> list[str]:
        return [r.url.path.removeprefix("/gmail/v1/users/me") for r in self.requests]

    def gmail_requests(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.host == "gmail.googleapis.com"]


def messages_by_id(answers: dict[str, Answer]) -> Route:
    def route(request: httpx.Request) -> Answer:
        return answers[request.url.path.rsplit("/", 1)[1]]

    return route


@pytest.fixture
def google() -> FakeGoogle:
    return FakeGoogle()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tokens(clock: Clock) -> AccessTokens:
    return AccessTokens(clock=clock)


def fetch(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock, start: str | None = START, **kw: Any
) -> GmailChanges:
    with httpx.Client(transport=httpx.MockTransport(google)) as client:
        return fetch_changes(client, CREDS, EMAIL, start, tokens=tokens, clock=clock, **kw)


def two_pages(google: FakeGoogle) -> None:
    google.routes["/gmail/v1/users/me/history"] = [
        {
            "history": [
                added("9876510", ("18c1f2a3b4c5d6e7", INBOX)),
                added("9876512", ("18c1f2a3b4c5d6e8", ["SENT"])),
            ],
            "nextPageToken": "08317946702435567321",
            "historyId": "9876560",
        },
        {
            "history": [
                # the same message again (Gmail may list it in two records) and a draft
                added("9876530", ("18c1f2a3b4c5d6e7", INBOX), ("18c1f2a3b4c5d6f0", ["DRAFT"])),
                added("9876541", ("18c1f2a3b4c5d6e9", INBOX)),
            ],
            "historyId": "9876560",
        },
    ]
    google.routes["messages.get"] = messages_by_id(
        {
            "18c1f2a3b4c5d6e7": metadata("18c1f2a3b4c5d6e7"),
            "18c1f2a3b4c5d6e8": metadata(
                "18c1f2a3b4c5d6e8", subject="Re: Renewal quote", sender=EMAIL, labels=["SENT"]
            ),
            "18c1f2a3b4c5d6e9": metadata("18c1f2a3b4c5d6e9", subject="Invoice INV-2026-118"),
        }
    )


# --- the happy path --------------------------------------------------------------------------


def test_two_history_pages_become_deduplicated_messages(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    two_pages(google)
    changes = fetch(google, tokens, clock)

    assert [m.id for m in changes.messages] == [
        "18c1f2a3b4c5d6e7",
        "18c1f2a3b4c5d6e8",
        "18c1f2a3b4c5d6e9",
    ]
    assert changes.last_history_id == "9876560"
    assert (changes.truncated, changes.fallback, changes.email) == (False, None, EMAIL)
    first = changes.messages[0]
    assert first == GmailMessage(
        id="18c1f2a3b4c5d6e7",
        thread_id="18c1f0000000aaaa",
        sender="Dana Ruiz <dana@acme.example>",
        to=f"Mikey <{EMAIL}>",
        subject="Renewal quote for 2027",
        snippet="Hi Mikey, the quote we discussed is attached & valid until Dec 15. "
        "Let me know if you'd like to go over it.",
        labels=tuple(INBOX),
        date_ms=1795701792000,
    )
    # one token, the owner check once, two history pages, one get per new message
    assert google.paths() == [
        "/token",
        "/profile",
        "/history",
        "/history",
        "/messages/18c1f2a3b4c5d6e7",
        "/messages/18c1f2a3b4c5d6e8",
        "/messages/18c1f2a3b4c5d6e9",
    ]
    history = [r for r in google.requests if r.url.path.endswith("/history")]
    assert dict(history[0].url.params) == {
        "startHistoryId": START,
        "historyTypes": "messageAdded",
        "maxResults": "100",
    }
    assert history[1].url.params["pageToken"] == "08317946702435567321"
    get = google.requests[4]
    assert get.url.params["format"] == "metadata"
    assert get.url.params.get_list("metadataHeaders") == ["From", "To", "Subject", "Date"]
    for request in google.gmail_requests():
        assert request.headers["Authorization"] == f"Bearer {ACCESS_TOKENS[0]}"
    for request in google.requests:  # every request is bounded
        assert request.extensions["timeout"]["read"] == REQUEST_TIMEOUT_S


def test_no_changes_moves_the_cursor_to_the_mailbox_history_id(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/gmail/v1/users/me/history"] = [{"historyId": "9876777"}]
    changes = fetch(google, tokens, clock)
    assert (changes.messages, changes.last_history_id, changes.truncated) == ([], "9876777", False)


def test_a_deleted_message_is_skipped_and_counted_and_a_malformed_id_ignored(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/gmail/v1/users/me/history"] = [
        {
            "history": [
                added("9876510", ("gone01", INBOX), ("kept01", INBOX), ("../../settings", INBOX))
            ],
            "historyId": "9876511",
        }
    ]
    google.routes["messages.get"] = messages_by_id(
        {"gone01": httpx.Response(404, json=NOT_FOUND), "kept01": metadata("kept01")}
    )
    changes = fetch(google, tokens, clock)
    assert [m.id for m in changes.messages] == ["kept01"]
    # an id that is no Gmail id is never put into a URL path
    assert google.paths()[-2:] == ["/messages/gone01", "/messages/kept01"]
    assert (changes.skipped_deleted, changes.last_history_id) == (1, "9876511")


# --- the access token ----------------------------------------------------------------------


def test_the_access_token_is_refreshed_then_reused_until_shortly_before_it_expires(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/token"] = [token_answer(ACCESS_TOKENS[0]), token_answer(ACCESS_TOKENS[1])]
    google.routes["/gmail/v1/users/me/history"] = [{"historyId": "9876599"}]

    fetch(google, tokens, clock)
    clock.now += 3599 - TOKEN_EXPIRY_MARGIN_S - 1  # still fresh enough
    fetch(google, tokens, clock)
    token_requests = [r for r in google.requests if r.url.path == "/token"]
    assert len(token_requests) == 1
    (refresh,) = token_requests
    assert refresh.method == "POST" and str(refresh.url) == "https://oauth2.googleapis.com/token"
    assert refresh.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qs(refresh.content.decode()) == {
        "client_id": [CLIENT_ID],
        "client_secret": [CLIENT_SECRET],
        "refresh_token": [REFRESH_TOKEN],
        "grant_type": ["refresh_token"],
    }

    clock.now += 2  # within the margin of expiry: a new token
    fetch(google, tokens, clock)
    assert [r.url.path for r in google.requests].count("/token") == 2
    assert google.gmail_requests()[-1].headers["Authorization"] == f"Bearer {ACCESS_TOKENS[1]}"
    # the owner of the credentials was checked once for the process, not per fetch
    assert google.paths().count("/profile") == 1


def test_a_401_refreshes_the_token_once_and_retries_the_request(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/token"] = [token_answer(ACCESS_TOKENS[0]), token_answer(ACCESS_TOKENS[1])]

    def history(request: httpx.Request) -> Answer:
        if request.headers["Authorization"] == f"Bearer {ACCESS_TOKENS[0]}":
            return httpx.Response(401, json=UNAUTHENTICATED)  # revoked early
        return {"history": [added("9876510", ("m1", INBOX))], "historyId": "9876511"}

    google.routes["/gmail/v1/users/me/history"] = history
    google.routes["messages.get"] = [metadata("m1")]
    changes = fetch(google, tokens, clock)

    assert [m.id for m in changes.messages] == ["m1"]
    assert google.paths() == [
        "/token",
        "/profile",
        "/history",
        "/token",
        "/history",
        "/messages/m1",
    ]
    # the new token is cached and reused: the next fetch refreshes nothing
    fetch(google, tokens, clock)
    assert google.paths().count("/token") == 2


def test_a_second_401_after_the_refresh_is_an_auth_error_not_a_loop(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/token"] = [token_answer(ACCESS_TOKENS[0]), token_answer(ACCESS_TOKENS[1])]
    google.routes["/gmail/v1/users/me/profile"] = [httpx.Response(401, json=UNAUTHENTICATED)]
    with pytest.raises(GmailAuthError) as caught:
        fetch(google, tokens, clock)
    assert google.paths() == ["/token", "/profile", "/token", "/profile"]
    assert caught.value.field == "gmail_credentials"
    assert "UNAUTHENTICATED" in caught.value.message and "401" in caught.value.message


def test_a_revoked_refresh_token_is_an_auth_error_naming_googles_code(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/token"] = [
        httpx.Response(
            400,
            json={
                "error": "invalid_grant",
                "error_description": "Token has been expired or revoked.",
            },
        )
    ]
    with pytest.raises(GmailAuthError) as caught:
        fetch(google, tokens, clock)
    assert isinstance(caught.value, AcmiError) and not isinstance(caught.value, Unavailable)
    assert "invalid_grant" in str(caught.value) and "HTTP 400" in str(caught.value)
    assert google.paths() == ["/token"]  # no Gmail request without a token


def test_credentials_of_another_account_are_refused(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/gmail/v1/users/me/profile"] = [{**PROFILE, "emailAddress": "ops@example.com"}]
    with pytest.raises(GmailAuthError, match=r"not the credentials of mikey@example\.com"):
        fetch(google, tokens, clock)
    assert google.paths() == ["/token", "/profile"]  # no mail read


# --- the recent listing -------------------------------------------------------------------


def recent_listing(google: FakeGoogle, *, next_page: bool = False) -> None:
    listing: dict[str, Any] = {
        "messages": [  # newest first, as Gmail lists them
            {"id": "18c20000000000c3", "threadId": "18c20000000000c3"},
            {"id": "18c20000000000c2", "threadId": "18c20000000000c1"},
            {"id": "18c20000000000c1", "threadId": "18c20000000000c1"},
        ],
        "resultSizeEstimate": 3,
    }
    if next_page:
        listing["nextPageToken"] = "12345678901234567890"
        listing["resultSizeEstimate"] = 201
    google.routes["/gmail/v1/users/me/messages"] = [listing]
    google.routes["messages.get"] = messages_by_id(
        {
            "18c20000000000c1": metadata("18c20000000000c1", internal_date="1795780000000"),
            "18c20000000000c2": metadata(
                "18c20000000000c2", internal_date="1795781000000", labels=["DRAFT"]
            ),
            "18c20000000000c3": metadata("18c20000000000c3", internal_date="1795782000000"),
        }
    )


def test_an_expired_history_id_falls_back_to_the_recent_listing(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/gmail/v1/users/me/history"] = [httpx.Response(404, json=NOT_FOUND)]
    recent_listing(google)
    changes = fetch(google, tokens, clock, start="1200")

    assert changes.fallback == "history_expired"
    assert changes.last_history_id == "9876599"  # the profile's, read before the listing
    assert changes.truncated is False
    # oldest first; the draft skipped
    assert [m.id for m in changes.messages] == ["18c20000000000c1", "18c20000000000c3"]
    listing = next(r for r in google.requests if r.url.path.endswith("/messages"))
    assert dict(listing.url.params) == {"maxResults": "50", "q": "newer_than:1d"}
    assert google.paths()[:5] == ["/token", "/profile", "/history", "/profile", "/messages"]


def test_a_history_id_expiring_between_pages_is_retried_later_not_half_listed(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/gmail/v1/users/me/history"] = [
        {
            "history": [added("9876510", ("m1", INBOX))],
            "nextPageToken": "08317946702435567321",
            "historyId": "9876560",
        },
        httpx.Response(404, json=NOT_FOUND),
    ]
    with pytest.raises(GmailUnavailable, match="expired while paging") as caught:
        fetch(google, tokens, clock)
    assert caught.value.retry_after == 1.0
    # nothing half-listed is fetched: the retry will take the recent listing
    assert not [path for path in google.paths() if path.startswith("/messages")]


def test_no_start_history_id_lists_recent_messages(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    recent_listing(google, next_page=True)
    changes = fetch(google, tokens, clock, start=None, max_messages=2)
    assert (changes.fallback, changes.truncated) == ("no_start", True)
    assert [m.id for m in changes.messages] == ["18c20000000000c3"]  # c2 is a draft
    assert changes.last_history_id == "9876599"
    assert "/history" not in google.paths()


# --- bounds ---------------------------------------------------------------------------------


def test_max_messages_truncates_and_the_next_fetch_resumes_without_a_gap(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    def history(request: httpx.Request) -> Answer:
        records = [
            added("9876510", ("m1", INBOX)),
            added("9876520", ("m2", INBOX), ("m3", INBOX)),
            added("9876530", ("m4", INBOX)),
        ]
        start = int(request.url.params["startHistoryId"])
        return {"history": [r for r in records if int(r["id"]) > start], "historyId": "9876540"}

    google.routes["/gmail/v1/users/me/history"] = history
    google.routes["messages.get"] = lambda request: metadata(request.url.path.rsplit("/", 1)[1])

    first = fetch(google, tokens, clock, max_messages=2)
    assert [m.id for m in first.messages] == ["m1", "m2"]
    assert first.truncated is True
    # m3 was not fetched: resume after the last record fully read, not past m3's record
    assert first.last_history_id == "9876510"

    second = fetch(google, tokens, clock, start=first.last_history_id, max_messages=2)
    assert [m.id for m in second.messages] == ["m2", "m3"]  # m2 again: same correlationId
    assert (second.truncated, second.last_history_id) == (True, "9876520")

    third = fetch(google, tokens, clock, start=second.last_history_id, max_messages=2)
    assert [m.id for m in third.messages] == ["m4"]
    assert (third.truncated, third.last_history_id) == (False, "9876540")


def test_one_record_larger_than_max_messages_does_not_stall_the_mailbox(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/gmail/v1/users/me/history"] = [
        {
            "history": [added("9876510", *((f"m{i}", INBOX) for i in range(5)))],
            "historyId": "9876540",
        }
    ]
    google.routes["messages.get"] = lambda request: metadata(request.url.path.rsplit("/", 1)[1])
    changes = fetch(google, tokens, clock, max_messages=3)
    assert [m.id for m in changes.messages] == ["m0", "m1", "m2"]
    assert (changes.truncated, changes.last_history_id) == (True, "9876510")


def test_history_pages_are_bounded(google: FakeGoogle, tokens: AccessTokens, clock: Clock) -> None:
    pages = iter(range(100))

    def history(request: httpx.Request) -> Answer:
        page = next(pages)
        return {
            "history": [added(str(9876510 + page), ("x", ["DRAFT"]))],
            "nextPageToken": f"token{page}",
            "historyId": "9999999",
        }

    google.routes["/gmail/v1/users/me/history"] = history
    changes = fetch(google, tokens, clock)
    assert google.paths().count("/history") == 5
    # more pages remain: resume after the last record read, not at the mailbox's id
    assert (changes.truncated, changes.last_history_id) == (True, "9876514")


def test_the_deadline_stops_starting_requests(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/gmail/v1/users/me/history"] = [
        {
            "history": [
                added("9876510", ("m1", INBOX)),
                added("9876520", ("m2", INBOX)),
                added("9876530", ("m3", INBOX)),
            ],
            "historyId": "9876540",
        }
    ]

    def slow_get(request: httpx.Request) -> Answer:
        clock.now += 12  # each message takes 12 s of the 20 s deadline
        return metadata(request.url.path.rsplit("/", 1)[1])

    google.routes["messages.get"] = slow_get
    changes = fetch(google, tokens, clock)
    assert [m.id for m in changes.messages] == ["m1", "m2"]
    assert (changes.truncated, changes.last_history_id) == (True, "9876520")
    # the request started with 8 s left was given those 8 s, not the usual 10
    gets = [r for r in google.requests if "/messages/" in r.url.path]
    assert [r.extensions["timeout"]["read"] for r in gets] == [REQUEST_TIMEOUT_S, 8.0]


@pytest.mark.parametrize(
    ("kwargs", "field", "rule"),
    [
        ({"max_messages": 0}, "max_messages", "range"),
        ({"max_messages": MAX_MESSAGES + 1}, "max_messages", "range"),
        ({"start": "12ab"}, "start_history_id", "numeric"),
        ({"start": "-5"}, "start_history_id", "numeric"),
    ],
)
def test_bad_arguments_name_the_field_and_rule_and_send_nothing(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock, kwargs: Any, field: str, rule: str
) -> None:
    with pytest.raises(AcmiValidationError) as caught:
        fetch(google, tokens, clock, **kwargs)
    assert (caught.value.field, caught.value.rule) == (field, rule)
    assert google.requests == []


# --- transient failures ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "retry_after"),
    [
        (httpx.Response(503, json=BACKEND_ERROR, headers={"Retry-After": "7"}), 7.0),
        (httpx.Response(500, text="<html>Internal Server Error</html>"), 30.0),
        (
            httpx.Response(
                429,
                json=google_error(429, "RESOURCE_EXHAUSTED", "rateLimitExceeded", "Too many"),
            ),
            30.0,
        ),
        (
            httpx.Response(
                403,
                json=google_error(
                    403, "PERMISSION_DENIED", "userRateLimitExceeded", "User-rate limit"
                ),
            ),
            30.0,
        ),
        (httpx.ConnectError("[Errno 111] Connection refused"), 30.0),
        (httpx.ReadTimeout("timed out"), 30.0),
    ],
    ids=["503", "500-html", "429", "403-rate-limit", "network", "timeout"],
)
def test_transient_failures_are_unavailable_with_retry_after(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock, answer: Answer, retry_after: float
) -> None:
    google.routes["/gmail/v1/users/me/history"] = [answer]
    with pytest.raises(GmailUnavailable) as caught:
        fetch(google, tokens, clock)
    assert isinstance(caught.value, Unavailable)
    assert caught.value.retry_after == retry_after
    assert "history.list" in caught.value.message
    assert caught.value.__cause__ is None


def test_a_5xx_from_the_token_endpoint_is_unavailable(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/token"] = [httpx.Response(502, text="Bad Gateway")]
    with pytest.raises(GmailUnavailable, match="token refresh: HTTP 502"):
        fetch(google, tokens, clock)


def test_a_missing_scope_is_an_auth_error_and_another_refusal_an_api_error(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/gmail/v1/users/me/history"] = [
        httpx.Response(
            403,
            json=google_error(
                403,
                "PERMISSION_DENIED",
                "insufficientPermissions",
                "Request had insufficient authentication scopes.",
            ),
        )
    ]
    with pytest.raises(GmailAuthError, match=r"gmail\.readonly scope"):
        fetch(google, tokens, clock)
    google.routes["/gmail/v1/users/me/history"] = [
        httpx.Response(
            400,
            json=google_error(
                400, "FAILED_PRECONDITION", "failedPrecondition", "Precondition check failed."
            ),
        )
    ]
    with pytest.raises(GmailApiError) as caught:
        fetch(google, tokens, clock)
    assert not isinstance(caught.value, GmailAuthError | Unavailable)
    assert "HTTP 400 (FAILED_PRECONDITION)" in caught.value.message


# --- secrets --------------------------------------------------------------------------------


def test_no_secret_in_any_repr_or_error_message(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    shown = [repr(CREDS), str(CREDS), repr(tokens)]
    google.routes["/token"] = [
        # a token endpoint that echoes what it was sent must not get it into our errors
        httpx.Response(400, json={"error": REFRESH_TOKEN, "error_description": CLIENT_SECRET}),
        token_answer(ACCESS_TOKENS[0]),
    ]
    with pytest.raises(GmailAuthError) as refused:
        fetch(google, tokens, clock)
    shown += [str(refused.value), repr(refused.value)]
    google.routes["/gmail/v1/users/me/profile"] = [
        httpx.Response(401, json={"error": {"status": ACCESS_TOKENS[0]}})
    ]
    with pytest.raises(GmailAuthError) as unauthorized:
        fetch(google, tokens, clock)
    shown += [str(unauthorized.value), repr(tokens)]
    google.routes["/gmail/v1/users/me/profile"] = [PROFILE]
    google.routes["/gmail/v1/users/me/history"] = [
        httpx.ConnectError(f"failed with Authorization: Bearer {ACCESS_TOKENS[0]}")
    ]
    with pytest.raises(GmailUnavailable) as failed:
        fetch(google, tokens, clock)
    shown.append(str(failed.value))

    assert "client_id" in shown[0] and CLIENT_ID in shown[0]
    for text in shown:
        for secret in SECRETS:
            assert secret not in text, (secret, text)


def test_empty_credentials_are_refused_by_field() -> None:
    with pytest.raises(AcmiValidationError) as caught:
        GmailCredentials(CLIENT_ID, CLIENT_SECRET, " ")
    assert (caught.value.field, caught.value.rule) == (
        "gmail_credentials.refresh_token",
        "required",
    )


def test_credentials_are_read_from_an_authorized_user_secret() -> None:
    secret = json.dumps(
        {
            "account": "",
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "refresh_token": REFRESH_TOKEN,
            "type": "authorized_user",
            "universe_domain": "googleapis.com",
        }
    )
    assert GmailCredentials.from_secret(secret.encode()) == CREDS
    for broken in (
        REFRESH_TOKEN,  # the bare token, not JSON
        json.dumps({"client_id": CLIENT_ID, "refresh_token": REFRESH_TOKEN}),
        json.dumps({"client_id": CLIENT_ID, "client_secret": 7, "refresh_token": REFRESH_TOKEN}),
        json.dumps([CLIENT_ID, CLIENT_SECRET, REFRESH_TOKEN]),
    ):
        with pytest.raises(GmailAuthError) as caught:
            GmailCredentials.from_secret(broken)
        assert "client_id, client_secret and refresh_token" in caught.value.message
        assert REFRESH_TOKEN not in str(caught.value) and CLIENT_SECRET not in str(caught.value)


# --- events ---------------------------------------------------------------------------------


def test_message_events_are_valid_comms_events_keyed_by_message_id(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    two_pages(google)
    changes = fetch(google, tokens, clock)
    deliveries = message_events(
        changes,
        source="gmail",
        mailbox_entity="mailbox:mikey_example.com",
        parent_correlation_id="gmail-mikey_example.com-9876560",
    )
    assert [d.entity for d in deliveries] == ["mailbox:mikey_example.com"] * 3
    first = deliveries[0].event
    assert first == {
        "source": "gmail",
        "kind": "gmail-message",
        "correlationId": "gmail-18c1f2a3b4c5d6e7",
        "summary": "Renewal quote for 2027 (from Dana Ruiz <dana@acme.example>)",
        "payload": {
            "mailbox": EMAIL,
            "id": "18c1f2a3b4c5d6e7",
            "threadId": "18c1f0000000aaaa",
            "from": "Dana Ruiz <dana@acme.example>",
            "to": f"Mikey <{EMAIL}>",
            "subject": "Renewal quote for 2027",
            "snippet": changes.messages[0].snippet,
            "labels": INBOX,
            "date_ms": 1795701792000,
        },
        "parentCorrelationId": "gmail-mikey_example.com-9876560",
        "ts": 1795701792000,
    }
    for index, delivery in enumerate(deliveries):
        event = parse_event(delivery.event, now_ms=1, tenant="default", field=f"events[{index}]")
        assert event.correlationId == f"gmail-{changes.messages[index].id}"


def test_event_summary_and_ts_fallbacks() -> None:
    long_subject = "Q" * 2000
    messages = [
        GmailMessage("a1", "t", "x@example.com", None, long_subject, None, (), None),
        GmailMessage("a2", "t", None, None, "  ", None, (), None),
    ]
    changes = GmailChanges(EMAIL, messages, "1", False)
    long_one, untitled = (
        d.event for d in message_events(changes, source="gmail-ops", mailbox_entity="mailbox:m")
    )
    assert len(long_one["summary"]) == MAX_SUMMARY_LEN and long_one["summary"].endswith("…")
    assert "ts" not in long_one  # stored at now by the timeline
    assert untitled["summary"] == "(no subject)"
    with pytest.raises(AcmiValidationError) as caught:
        message_events(changes, source="gmail", mailbox_entity="no-category")
    assert caught.value.field == "mailbox_entity"


def test_ts_comes_from_the_date_header_when_there_is_no_internal_date(
    google: FakeGoogle, tokens: AccessTokens, clock: Clock
) -> None:
    google.routes["/gmail/v1/users/me/history"] = [
        {"history": [added("9876510", ("d1", INBOX), ("d2", INBOX))], "historyId": "9876511"}
    ]
    google.routes["messages.get"] = messages_by_id(
        {
            "d1": metadata("d1", internal_date=None, date="Thu, 26 Nov 2026 14:03:11 +0100"),
            "d2": metadata("d2", internal_date=None, date="not a date"),
        }
    )
    with_date, without = fetch(google, tokens, clock).messages
    assert with_date.date_ms == 1795698191000  # 13:03:11 UTC
    assert without.date_ms is None

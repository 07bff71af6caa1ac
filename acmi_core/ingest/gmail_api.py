"""Google's side of the Gmail fetch: a mailbox's OAuth credentials, the access token cache,
and the requests (each bounded by the fetch's deadline) with Google's errors turned into
ours. What the fetch asks for and how it reads the answers is ``ingest/gmail_history.py``.

The requests, all to ``users/me`` (the account the refresh token belongs to):

- ``POST oauth2.googleapis.com/token`` (``grant_type=refresh_token``) for an access
  token, reused until ``TOKEN_EXPIRY_MARGIN_S`` before its ``expires_in``. A 401 from
  Gmail drops it and refreshes once per fetch, then retries that request once.

Errors: ``GmailUnavailable`` (an ``Unavailable``: 503 + Retry-After) for network
failures, timeouts, 5xx, 429 and Gmail's rate-limit 403s, and unreadable answers;
``GmailAuthError`` when Google refuses the credentials (revoked grant, wrong client,
a 401 after a fresh token, a missing scope); ``GmailApiError`` for any other refusal.
Messages name the request and Google's error code, never a token, secret or body.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from acmi_core.base.errors import AcmiError, AcmiValidationError, Unavailable

TOKEN_URL: Final = "https://oauth2.googleapis.com/token"
GMAIL_API: Final = "https://gmail.googleapis.com/gmail/v1/users/me"
# Each request gets at most this long (connect, each read), and never more than what is
# left of the fetch's deadline.
REQUEST_TIMEOUT_S: Final = 10.0
# A token is refreshed this long before Google says it expires (clock skew, slow calls).
TOKEN_EXPIRY_MARGIN_S: Final = 60.0
# When Google's token answer has no expires_in: assume a short life, refresh sooner.
DEFAULT_TOKEN_LIFETIME_S: Final = 300.0
# Retry-After for a 5xx, a 429 or a network failure that names none; the largest we pass on.
DEFAULT_RETRY_AFTER_S: Final = 30.0
MAX_RETRY_AFTER_S: Final = 3600.0
# Google's error codes (invalid_grant, UNAUTHENTICATED, rateLimitExceeded) are safe to
# repeat; anything else from its body is not put into a message.
_ERROR_CODE_RE: Final = re.compile(r"[A-Za-z][A-Za-z_]{0,63}")
_RATE_LIMIT_REASONS: Final = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})

Clock = Callable[[], float]


class GmailApiError(AcmiError):
    """Google refused a request for a reason that is not transient (500: it is our
    configuration or our request, not the sender's delivery)."""

    code = "gmail_api_error"


class GmailAuthError(GmailApiError):
    """Google refused the mailbox's credentials: the refresh token was revoked or
    expired, the client id/secret are wrong, or the grant lacks the Gmail read scope."""

    code = "gmail_auth_error"


class GmailUnavailable(Unavailable):
    """Gmail or Google's token endpoint failed for now; retry after ``retry_after``."""

    code = "gmail_unavailable"


@dataclass(frozen=True)
class GmailCredentials:
    """A mailbox's OAuth client and refresh token. The repr shows the client id only."""

    client_id: str
    client_secret: str = field(repr=False)
    refresh_token: str = field(repr=False)

    def __post_init__(self) -> None:
        for name in ("client_id", "client_secret", "refresh_token"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise AcmiValidationError(
                    f"gmail_credentials.{name}", "required", "must be a non-empty string"
                )

    @classmethod
    def from_secret(cls, text: str | bytes) -> GmailCredentials:
        """Credentials from a secret's text: a JSON object with ``client_id``,
        ``client_secret`` and ``refresh_token`` (Google's ``authorized_user`` file, as
        ``gcloud auth application-default login`` writes it; other fields are ignored).
        Errors name the fields, never a value."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = None
        names = ("client_id", "client_secret", "refresh_token")
        if not isinstance(data, dict) or not all(
            isinstance(data.get(n), str) and data[n].strip() for n in names
        ):
            # GmailAuthError (a 500, logged): a misconfigured secret is not the sender's fault
            raise GmailAuthError(
                "gmail_credentials: the secret must be a JSON object with non-empty "
                "client_id, client_secret and refresh_token strings",
                field="gmail_credentials",
            )
        return cls(data["client_id"], data["client_secret"], data["refresh_token"])

    @property
    def cache_key(self) -> str:
        # A digest, so the cache's keys hold no secret either.
        text = f"{self.client_id}\0{self.refresh_token}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class _Token:
    value: str = field(repr=False)
    expires_at: float


class AccessTokens:
    """Access tokens per credentials, reused until shortly before they expire. One per
    process (a warm Lambda keeps it); safe to share between threads."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._tokens: dict[str, _Token] = {}
        self._owners: dict[str, str] = {}  # credentials -> the address Gmail said they are
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AccessTokens({len(self._tokens)} cached)"

    def get(self, client: httpx.Client, creds: GmailCredentials, *, timeout: float) -> str:
        """A valid access token: the cached one, or a fresh one from Google."""
        key = creds.cache_key
        with self._lock:
            token = self._tokens.get(key)
            if token is not None and self._clock() < token.expires_at:
                return token.value
            token = self._refresh(client, creds, timeout)
            self._tokens[key] = token
            return token.value

    def drop(self, creds: GmailCredentials, value: str) -> None:
        """Forget ``value`` (Gmail refused it), unless another thread already replaced it."""
        with self._lock:
            token = self._tokens.get(creds.cache_key)
            if token is not None and token.value == value:
                del self._tokens[creds.cache_key]

    def owner(self, creds: GmailCredentials) -> str | None:
        """The mailbox address ``creds`` were found to belong to, once checked."""
        return self._owners.get(creds.cache_key)

    def set_owner(self, creds: GmailCredentials, email: str) -> None:
        self._owners[creds.cache_key] = email.lower()

    def _refresh(self, client: httpx.Client, creds: GmailCredentials, timeout: float) -> _Token:
        now = self._clock()
        form = {
            "client_id": creds.client_id,
            "client_secret": creds.client_secret,
            "refresh_token": creds.refresh_token,
            "grant_type": "refresh_token",
        }
        response = _send(client, "POST", TOKEN_URL, "token refresh", timeout, data=form)
        if response.status_code in (400, 401, 403):
            # invalid_grant (revoked or expired refresh token), invalid_client, ...
            raise GmailAuthError(
                "gmail_credentials: Google refused the refresh token "
                f"(HTTP {response.status_code}, {_error_code(response)}); "
                "store new credentials for this mailbox",
                field="gmail_credentials",
            )
        raise_for_status(response, "token refresh")
        body = json_object(response, "token refresh")
        value, lifetime = body.get("access_token"), body.get("expires_in")
        if not isinstance(value, str) or not value:
            raise GmailUnavailable(
                "Google's token refresh answered without an access_token",
                retry_after=DEFAULT_RETRY_AFTER_S,
            )
        if isinstance(lifetime, bool) or not isinstance(lifetime, int | float):
            lifetime = DEFAULT_TOKEN_LIFETIME_S
        return _Token(value, now + max(0.0, float(lifetime) - TOKEN_EXPIRY_MARGIN_S))


# --- requests -------------------------------------------------------------------------------


def _send(
    client: httpx.Client,
    method: str,
    url: str,
    what: str,
    timeout: float,
    **kwargs: Any,
) -> httpx.Response:
    try:
        return client.request(method, url, timeout=timeout, **kwargs)
    except httpx.TimeoutException:
        raise GmailUnavailable(
            f"Gmail {what}: no answer within {timeout:.1f}s", retry_after=DEFAULT_RETRY_AFTER_S
        ) from None
    except httpx.TransportError as exc:
        # the class name only: an exception's text may quote the request
        raise GmailUnavailable(
            f"Gmail {what}: network failure ({type(exc).__name__})",
            retry_after=DEFAULT_RETRY_AFTER_S,
        ) from None


def _error_body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _safe_code(value: object) -> str | None:
    return value if isinstance(value, str) and _ERROR_CODE_RE.fullmatch(value) else None


def _error_code(response: httpx.Response) -> str:
    """Google's error code: OAuth's ``{"error": "invalid_grant"}`` or the API's
    ``{"error": {"status": "UNAUTHENTICATED", "errors": [{"reason": ..}]}}``."""
    body = _error_body(response)
    if not isinstance(body, dict):
        return "no error code"
    error = body.get("error")
    if isinstance(error, dict):
        return _safe_code(error.get("status")) or _safe_code(_reason(error)) or "no error code"
    return _safe_code(error) or "no error code"


def _reason(error: Mapping[str, Any]) -> str | None:
    errors = error.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        reason = errors[0].get("reason")
        return reason if isinstance(reason, str) else None
    return None


def _retry_after(response: httpx.Response) -> float:
    raw = response.headers.get("Retry-After")
    try:
        value = float(raw) if raw is not None else DEFAULT_RETRY_AFTER_S
    except ValueError:  # an HTTP-date: our default
        value = DEFAULT_RETRY_AFTER_S
    if not math.isfinite(value) or value < 0:
        value = DEFAULT_RETRY_AFTER_S
    return min(value, MAX_RETRY_AFTER_S)


def _is_rate_limited(response: httpx.Response) -> bool:
    if response.status_code == 429:
        return True
    body = _error_body(response)
    error = body.get("error") if isinstance(body, dict) else None
    return (
        response.status_code == 403
        and isinstance(error, dict)
        and _reason(error) in _RATE_LIMIT_REASONS
    )


def raise_for_status(response: httpx.Response, what: str) -> None:
    status = response.status_code
    if status < 400:
        return
    if status >= 500 or _is_rate_limited(response):
        raise GmailUnavailable(
            f"Gmail {what}: HTTP {status} ({_error_code(response)})",
            retry_after=_retry_after(response),
        )
    if status == 401:
        raise GmailAuthError(
            f"gmail_credentials: Gmail {what} refused a freshly refreshed access token "
            f"(HTTP 401, {_error_code(response)})",
            field="gmail_credentials",
        )
    if status == 403:
        raise GmailAuthError(
            f"gmail_credentials: Gmail {what} refused them (HTTP 403, "
            f"{_error_code(response)}); the grant needs the gmail.readonly scope",
            field="gmail_credentials",
        )
    raise GmailApiError(f"Gmail {what}: HTTP {status} ({_error_code(response)})")


def json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    body = _error_body(response)
    if not isinstance(body, dict):
        raise GmailUnavailable(
            f"Gmail {what}: the answer is not a JSON object", retry_after=DEFAULT_RETRY_AFTER_S
        )
    return body


class GmailSession:
    """One fetch: its credentials, the token cache, the deadline, the one forced refresh."""

    def __init__(
        self,
        client: httpx.Client,
        creds: GmailCredentials,
        tokens: AccessTokens,
        clock: Clock,
        deadline_s: float,
    ) -> None:
        self.client, self.creds, self.tokens, self.clock = client, creds, tokens, clock
        self.deadline = clock() + deadline_s
        self.refreshed = False

    def time_left(self) -> float:
        return self.deadline - self.clock()

    def timeout(self) -> float:
        return max(0.001, min(REQUEST_TIMEOUT_S, self.time_left()))

    def get(self, path: str, params: list[tuple[str, str]], what: str) -> httpx.Response:
        """GET ``GMAIL_API + path``; on a 401, one fresh token and one retry per fetch."""
        while True:
            token = self.tokens.get(self.client, self.creds, timeout=self.timeout())
            response = _send(
                self.client,
                "GET",
                GMAIL_API + path,
                what,
                self.timeout(),
                params=params,
                headers={"Authorization": f"Bearer {token}"},
            )
            if response.status_code != 401 or self.refreshed:
                return response
            # Revoked or expired early (a password change): refresh once and retry.
            self.refreshed = True
            self.tokens.drop(self.creds, token)

"""Verify the Google-signed OIDC tokens that Pub/Sub push subscriptions send.

Gmail push notifications arrive through a Pub/Sub push subscription, which authenticates
to our webhook with ``Authorization: Bearer <JWT>``: an RS256 ID token signed by Google,
whose public keys are published as a JWKS at ``GOOGLE_CERTS_URL``.

PyJWT, cryptography and httpx are imported inside the functions that use them: this
module sits on a Lambda cold-start path, and only Gmail pushes should pay for them.

Error messages name the check that failed and never echo the token (nor any claim or
header value from it: those are attacker-controlled and end up in logs).

When Google's JWKS endpoint fails: at most one fetch attempt per ``min_refresh_interval_s``
(60 s by default), however many pushes arrive; the last key set keeps verifying tokens
for up to ``STALE_GRACE_S`` (24 h) past its max-age, with a warning logged per failed
attempt; a token naming a key we do not have gets ``GoogleKeysUnavailable`` (503), since
it may be a key Google published while we could not fetch.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import Unauthenticated, Unavailable

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

GOOGLE_CERTS_URL: Final = "https://www.googleapis.com/oauth2/v3/certs"
GOOGLE_ISSUERS: Final = frozenset({"accounts.google.com", "https://accounts.google.com"})
# Only RS256: accepting the header's own choice enables algorithm confusion ("none", or
# HS256 keyed with our public key, which anyone can download).
ALGORITHM: Final = "RS256"
DEFAULT_MAX_AGE_S: Final = 3600.0
# Honour Google's max-age, but never trust a cached key set for more than a day while
# Google answers.
MAX_CACHE_S: Final = 86400.0
# While refreshing fails, the last key set keeps serving this long past its expiry: Google
# publishes a key before signing with it and keeps a retired one published for a while,
# so a recently expired set still holds the key in use; a revoked key stays trusted at
# most this long into an outage. Past it, every push is a 503 until a fetch succeeds.
STALE_GRACE_S: Final = 86400.0
# The default least interval between two fetch attempts, for unknown kids and failures.
MIN_REFRESH_INTERVAL_S: Final = 60.0
# Google ID tokens are ~1 KB; refuse to parse anything absurdly larger.
MAX_TOKEN_CHARS: Final = 16384
FETCH_TIMEOUT_S: Final = 5.0

_MAX_AGE_RE: Final = re.compile(r"(?:^|[,\s])max-age\s*=\s*\"?(\d+)", re.IGNORECASE)

log = logging.getLogger("acmi.auth")

JwksFetcher = Callable[[], tuple[dict[str, Any], float]]


class GoogleTokenError(Unauthenticated):
    """The bearer token is not a valid Google OIDC token for us (401); ``rule`` names the
    check it failed."""

    code = "invalid_token"
    default_field = "authorization"
    default_rule = "google_oidc_token"


class GoogleKeysUnavailable(Unavailable):
    """Google's signing keys could not be fetched. Transient: 503 + Retry-After."""

    code = "keys_unavailable"
    default_field = "authorization"
    default_rule = "google_keys_available"


@dataclass(frozen=True)
class GoogleIdentity:
    """Who the verified token speaks for (the push subscription's service account)."""

    email: str
    audience: str
    subject: str
    issued_at: int
    expires_at: int


def parse_max_age(cache_control: str | None, default: float = DEFAULT_MAX_AGE_S) -> float:
    """``max-age`` in seconds from a ``Cache-Control`` header, else ``default``."""
    if cache_control:
        match = _MAX_AGE_RE.search(cache_control)
        if match:
            return float(match.group(1))
    return default


def fetch_google_jwks() -> tuple[dict[str, Any], float]:
    """GET Google's JWKS: (document, max-age seconds). Production default; tests inject."""
    import httpx

    response = httpx.get(GOOGLE_CERTS_URL, timeout=FETCH_TIMEOUT_S)
    response.raise_for_status()
    document = response.json()
    if not isinstance(document, dict):
        raise ValueError("JWKS document is not a JSON object")
    return document, parse_max_age(response.headers.get("cache-control"))


def _parse_jwks(document: Any) -> dict[str, RSAPublicKey]:
    """kid -> RSA public key, keeping only keys usable for RS256 signatures."""
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey
    from jwt.algorithms import RSAAlgorithm

    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("JWKS document has no 'keys' list")
    keys: dict[str, RSAPublicKey] = {}
    for jwk in document["keys"]:
        if not isinstance(jwk, dict):
            continue
        kid = jwk.get("kid")
        if not isinstance(kid, str) or jwk.get("kty") != "RSA":
            continue
        if jwk.get("use", "sig") != "sig" or jwk.get("alg", ALGORITHM) != ALGORITHM:
            continue
        try:
            key = RSAAlgorithm.from_jwk(jwk)
        except Exception:  # one malformed key must not hide the others
            continue
        if isinstance(key, RSAPrivateKey):  # a JWKS should never carry "d"; use the public half
            key = key.public_key()
        if isinstance(key, RSAPublicKey):
            keys[kid] = key
    if not keys:
        raise ValueError("JWKS document has no usable RS256 keys")
    return keys


def _number(claims: dict[str, Any], name: str) -> float:
    """A NumericDate claim; bool is an int subclass in Python, so reject it explicitly."""
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GoogleTokenError(
            f"token claim '{name}' is missing or not a number", rule="claim_number"
        )
    return float(value)


class GoogleTokenVerifier:
    """Verifies Google OIDC bearer tokens against Google's JWKS, caching the keys.

    Keys are fetched lazily on the first ``verify`` (no network at construction), cached
    for the JWKS max-age, and refreshed once when a token names an unknown ``kid`` (Google
    rotated its keys). That refresh is rate limited by ``min_refresh_interval_s`` so a
    flood of tokens with forged kids cannot make us hammer Google; so is every attempt
    after a failed one, so an outage costs Google one fetch per interval, not one per
    push. While fetches fail, the last key set serves for ``stale_grace_s`` past expiry.
    """

    def __init__(
        self,
        *,
        fetch_jwks: JwksFetcher | None = None,
        clock: Callable[[], float] = time.time,
        leeway_s: float = 60,
        min_refresh_interval_s: float = MIN_REFRESH_INTERVAL_S,
        stale_grace_s: float = STALE_GRACE_S,
    ) -> None:
        self._fetch_jwks: JwksFetcher = fetch_jwks or fetch_google_jwks
        self._clock = clock
        self._leeway_s = float(leeway_s)
        self._min_refresh_interval_s = float(min_refresh_interval_s)
        self._stale_grace_s = float(stale_grace_s)
        self._keys: dict[str, RSAPublicKey] = {}
        self._keys_expire_at = -math.inf
        # Time of the last fetch *attempt* (success or failure): the refresh rate limit
        # must also hold while Google is failing.
        self._last_fetch_at = -math.inf
        # Why the last attempt failed; None once one succeeds (Google is up, as we know).
        self._fetch_error: GoogleKeysUnavailable | None = None
        # Lambda is single-threaded, but a threaded local server must not double-fetch.
        self._lock = threading.Lock()

    def verify(self, token: str, *, audience: str, email: str) -> GoogleIdentity:
        """Check ``token`` and return the identity it proves.

        Raises GoogleTokenError (code "invalid_token") naming the failed check, or
        GoogleKeysUnavailable (code "keys_unavailable") when Google's keys cannot be fetched.
        """
        import jwt

        if not isinstance(token, str) or not token:
            raise GoogleTokenError("token is missing", rule="required")
        if len(token) > MAX_TOKEN_CHARS:
            raise GoogleTokenError("token is too long", rule="max_length")

        # `from None` throughout: PyJWT's own messages may quote parts of the token.
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise GoogleTokenError("token is malformed", rule="jwt_format") from None
        if header.get("alg") != ALGORITHM:
            raise GoogleTokenError(f"token algorithm is not {ALGORITHM}", rule="algorithm")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise GoogleTokenError("token header has no key id", rule="key_id")

        key = self._key_for(kid)
        try:
            # PyJWT checks only the signature (pinned to RS256); the claims are checked
            # below against our injectable clock, with messages naming each check.
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                options={
                    "verify_signature": True,
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                    "verify_aud": False,
                    "verify_iss": False,
                    "verify_sub": False,
                    "verify_jti": False,
                },
            )
        except jwt.InvalidSignatureError:
            raise GoogleTokenError("token signature is invalid", rule="signature") from None
        except jwt.PyJWTError:
            raise GoogleTokenError("token is malformed", rule="jwt_format") from None
        return self._check_claims(claims, audience=audience, email=email)

    def _check_claims(self, claims: dict[str, Any], *, audience: str, email: str) -> GoogleIdentity:
        if claims.get("iss") not in GOOGLE_ISSUERS:
            raise GoogleTokenError("token issuer is not Google", rule="issuer")
        # Google sends `aud` as a single string; a list is not what a push token looks like.
        token_audience = claims.get("aud")
        if not isinstance(token_audience, str) or token_audience != audience:
            raise GoogleTokenError("token audience does not match", rule="audience")

        now = self._clock()
        expires_at = _number(claims, "exp")
        issued_at = _number(claims, "iat")
        if expires_at <= now - self._leeway_s:
            raise GoogleTokenError("token expired", rule="expired")
        if issued_at > now + self._leeway_s:
            raise GoogleTokenError("token issued in the future", rule="issued_at")
        if "nbf" in claims and _number(claims, "nbf") > now + self._leeway_s:
            raise GoogleTokenError("token not yet valid", rule="not_before")

        token_email = claims.get("email")
        if not isinstance(token_email, str) or token_email.casefold() != email.casefold():
            raise GoogleTokenError("token email does not match", rule="email")
        # Strictly the JSON boolean true: anything else (missing, false, "true") fails.
        if claims.get("email_verified") is not True:
            raise GoogleTokenError("token email is not verified", rule="email_verified")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise GoogleTokenError("token subject is missing", rule="subject")

        return GoogleIdentity(
            email=token_email,
            audience=token_audience,
            subject=subject,
            issued_at=int(issued_at),
            expires_at=int(expires_at),
        )

    def _key_for(self, kid: str) -> RSAPublicKey:
        with self._lock:
            now = self._clock()
            failed: GoogleKeysUnavailable | None = None
            if now >= self._keys_expire_at:
                # Expired: refresh (honouring max-age, however short, while Google is up).
                # While refreshing fails, the last set serves within its grace period.
                failed = self._try_refresh(now, limited=self._fetch_error is not None)
                if now >= self._keys_expire_at + self._stale_grace_s:
                    raise failed or self._unavailable(now)
            key = self._keys.get(kid)
            # Unknown kid: Google may have rotated. Refresh once, unless we fetched
            # recently (which includes the fetch just above).
            if key is None and failed is None:
                failed = self._try_refresh(now, limited=True)
                key = self._keys.get(kid)
            if key is not None:
                return key
            if failed is not None:
                raise failed
            if self._fetch_error is not None:
                # The last attempt failed: this may be a key Google published since, which
                # we could not fetch, or a forged kid. A 503 lets a genuine push be retried.
                raise self._unavailable(now)
            raise GoogleTokenError("token signed by an unknown key", rule="known_key")

    def _try_refresh(self, now: float, *, limited: bool) -> GoogleKeysUnavailable | None:
        """Fetch the key set, unless ``limited`` and the last attempt was less than
        ``min_refresh_interval_s`` ago. Returns the error if this attempt failed."""
        if limited and now - self._last_fetch_at < self._min_refresh_interval_s:
            return None
        self._last_fetch_at = now
        try:
            self._refresh(now)
        except GoogleKeysUnavailable as exc:
            self._fetch_error = exc
            if now < self._keys_expire_at + self._stale_grace_s:
                state = f"the previous key set serves until {self._stale_grace_s:.0f}s past expiry"
            else:
                state = "no key set to serve: pushes get 503"
            log.warning(
                "Google signing keys could not be fetched (next attempt in %.0fs); %s: %s",
                self._min_refresh_interval_s,
                state,
                exc.message,
                extra={"error": exc.code},
            )
            return exc
        self._fetch_error = None
        return None

    def _unavailable(self, now: float) -> GoogleKeysUnavailable:
        """503 without a fetch: Retry-After says when the next attempt may happen."""
        wait = max(1.0, self._last_fetch_at + self._min_refresh_interval_s - now)
        reason = self._fetch_error.message if self._fetch_error else "keys expired"
        return GoogleKeysUnavailable(f"{reason} (next attempt in {wait:.0f}s)", retry_after=wait)

    def _refresh(self, now: float) -> None:
        try:
            document, max_age = self._fetch_jwks()
            keys = _parse_jwks(document)
            max_age = float(max_age)
        except GoogleKeysUnavailable:
            raise
        except Exception as exc:  # any fetcher failure (network, HTTP, JSON) is transient
            raise GoogleKeysUnavailable(
                f"could not fetch Google signing keys: {type(exc).__name__}: {exc}",
                retry_after=self._min_refresh_interval_s,  # the next attempt, at the earliest
            ) from exc
        if math.isnan(max_age) or max_age < 0:
            max_age = 0.0
        self._keys = keys
        self._keys_expire_at = now + min(max_age, MAX_CACHE_S)

"""Verify the Google-signed OIDC tokens that Pub/Sub push subscriptions send.

Gmail push notifications arrive through a Pub/Sub push subscription, which authenticates
to our webhook with ``Authorization: Bearer <JWT>``: an RS256 ID token signed by Google,
whose public keys are published as a JWKS at ``GOOGLE_CERTS_URL``.

PyJWT, cryptography and httpx are imported inside the functions that use them: this
module sits on a Lambda cold-start path, and only Gmail pushes should pay for them.

Error messages name the check that failed and never echo the token (nor any claim or
header value from it: those are attacker-controlled and end up in logs).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from acmi_core.errors import Unauthenticated, Unavailable

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

GOOGLE_CERTS_URL: Final = "https://www.googleapis.com/oauth2/v3/certs"
GOOGLE_ISSUERS: Final = frozenset({"accounts.google.com", "https://accounts.google.com"})
# Only RS256: accepting the header's own choice enables algorithm confusion ("none", or
# HS256 keyed with our public key, which anyone can download).
ALGORITHM: Final = "RS256"
DEFAULT_MAX_AGE_S: Final = 3600.0
# Honour Google's max-age, but never trust a cached key set for more than a day.
MAX_CACHE_S: Final = 86400.0
# Google ID tokens are ~1 KB; refuse to parse anything absurdly larger.
MAX_TOKEN_CHARS: Final = 16384
FETCH_TIMEOUT_S: Final = 5.0

_MAX_AGE_RE: Final = re.compile(r"(?:^|[,\s])max-age\s*=\s*\"?(\d+)", re.IGNORECASE)

JwksFetcher = Callable[[], tuple[dict[str, Any], float]]


class GoogleTokenError(Unauthenticated):
    """The bearer token is not a valid Google OIDC token for us (401)."""

    code = "invalid_token"


class GoogleKeysUnavailable(Unavailable):
    """Google's signing keys could not be fetched. Transient: 503 + Retry-After."""

    code = "keys_unavailable"


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
        raise GoogleTokenError(f"token claim '{name}' is missing or not a number")
    return float(value)


class GoogleTokenVerifier:
    """Verifies Google OIDC bearer tokens against Google's JWKS, caching the keys.

    Keys are fetched lazily on the first ``verify`` (no network at construction), cached
    for the JWKS max-age, and refreshed once when a token names an unknown ``kid`` (Google
    rotated its keys). That refresh is rate limited by ``min_refresh_interval_s`` so a
    flood of tokens with forged kids cannot make us hammer Google.
    """

    def __init__(
        self,
        *,
        fetch_jwks: JwksFetcher | None = None,
        clock: Callable[[], float] = time.time,
        leeway_s: float = 60,
        min_refresh_interval_s: float = 60,
    ) -> None:
        self._fetch_jwks: JwksFetcher = fetch_jwks or fetch_google_jwks
        self._clock = clock
        self._leeway_s = float(leeway_s)
        self._min_refresh_interval_s = float(min_refresh_interval_s)
        self._keys: dict[str, RSAPublicKey] = {}
        self._keys_expire_at = -math.inf
        # Time of the last fetch *attempt* (success or failure): the refresh rate limit
        # must also hold while Google is failing.
        self._last_fetch_at = -math.inf
        # Lambda is single-threaded, but a threaded local server must not double-fetch.
        self._lock = threading.Lock()

    def verify(self, token: str, *, audience: str, email: str) -> GoogleIdentity:
        """Check ``token`` and return the identity it proves.

        Raises GoogleTokenError (code "invalid_token") naming the failed check, or
        GoogleKeysUnavailable (code "keys_unavailable") when Google's keys cannot be fetched.
        """
        import jwt

        if not isinstance(token, str) or not token:
            raise GoogleTokenError("token is missing")
        if len(token) > MAX_TOKEN_CHARS:
            raise GoogleTokenError("token is too long")

        # `from None` throughout: PyJWT's own messages may quote parts of the token.
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise GoogleTokenError("token is malformed") from None
        if header.get("alg") != ALGORITHM:
            raise GoogleTokenError(f"token algorithm is not {ALGORITHM}")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise GoogleTokenError("token header has no key id")

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
            raise GoogleTokenError("token signature is invalid") from None
        except jwt.PyJWTError:
            raise GoogleTokenError("token is malformed") from None
        return self._check_claims(claims, audience=audience, email=email)

    def _check_claims(self, claims: dict[str, Any], *, audience: str, email: str) -> GoogleIdentity:
        if claims.get("iss") not in GOOGLE_ISSUERS:
            raise GoogleTokenError("token issuer is not Google")
        # Google sends `aud` as a single string; a list is not what a push token looks like.
        token_audience = claims.get("aud")
        if not isinstance(token_audience, str) or token_audience != audience:
            raise GoogleTokenError("token audience does not match")

        now = self._clock()
        expires_at = _number(claims, "exp")
        issued_at = _number(claims, "iat")
        if expires_at <= now - self._leeway_s:
            raise GoogleTokenError("token expired")
        if issued_at > now + self._leeway_s:
            raise GoogleTokenError("token issued in the future")
        if "nbf" in claims and _number(claims, "nbf") > now + self._leeway_s:
            raise GoogleTokenError("token not yet valid")

        token_email = claims.get("email")
        if not isinstance(token_email, str) or token_email.casefold() != email.casefold():
            raise GoogleTokenError("token email does not match")
        # Strictly the JSON boolean true: anything else (missing, false, "true") fails.
        if claims.get("email_verified") is not True:
            raise GoogleTokenError("token email is not verified")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise GoogleTokenError("token subject is missing")

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
            if now >= self._keys_expire_at:
                self._refresh(now)
            key = self._keys.get(kid)
            # Unknown kid: Google may have rotated. Refresh once, unless we fetched
            # recently (which includes the fetch just above).
            if key is None and now - self._last_fetch_at >= self._min_refresh_interval_s:
                self._refresh(now)
                key = self._keys.get(kid)
            if key is None:
                raise GoogleTokenError("token signed by an unknown key")
            return key

    def _refresh(self, now: float) -> None:
        self._last_fetch_at = now
        try:
            document, max_age = self._fetch_jwks()
            keys = _parse_jwks(document)
            max_age = float(max_age)
        except GoogleKeysUnavailable:
            raise
        except Exception as exc:  # any fetcher failure (network, HTTP, JSON) is transient
            raise GoogleKeysUnavailable(
                f"could not fetch Google signing keys: {type(exc).__name__}: {exc}"
            ) from exc
        if math.isnan(max_age) or max_age < 0:
            max_age = 0.0
        self._keys = keys
        self._keys_expire_at = now + min(max_age, MAX_CACHE_S)

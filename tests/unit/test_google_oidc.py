"""GoogleTokenVerifier: local RSA keys stand in for Google's; the JWKS fetch and the clock
are injected, so no test touches the network."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import subprocess
import sys
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from acmi_core.auth import google_oidc
from acmi_core.auth.google_oidc import (
    GoogleIdentity,
    GoogleKeysUnavailable,
    GoogleTokenError,
    GoogleTokenVerifier,
    parse_max_age,
)
from acmi_core.base.errors import AcmiError

AUDIENCE = "https://acmi.example.com/webhooks/gmail"
EMAIL = "gmail-push@acmi-prod.iam.gserviceaccount.com"
NOW = 1_700_000_000.0
KID1 = "google-kid-1"
KID2 = "google-kid-2"


# -- keys and tokens ------------------------------------------------------------------


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


# Generated once per session: RSA keygen is the slow part of this file.
GOOGLE_KEY_1 = _new_key()
GOOGLE_KEY_2 = _new_key()
ATTACKER_KEY = _new_key()


def _jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


def _jwks(*pairs: tuple[rsa.RSAPrivateKey, str]) -> dict[str, Any]:
    return {"keys": [_jwk(key, kid) for key, kid in pairs]}


def _claims(**overrides: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": "https://accounts.google.com",
        "aud": AUDIENCE,
        "azp": "112233445566778899000",
        "sub": "112233445566778899000",
        "email": EMAIL,
        "email_verified": True,
        "iat": int(NOW) - 10,
        "exp": int(NOW) + 3590,
    }
    for name, value in overrides.items():
        if value is _DROP:
            claims.pop(name, None)
        else:
            claims[name] = value
    return claims


_DROP = object()


def _token(
    claims: dict[str, Any] | None = None,
    *,
    key: rsa.RSAPrivateKey = GOOGLE_KEY_1,
    kid: str | None = KID1,
) -> str:
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(claims or _claims(), key, algorithm="RS256", headers=headers)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(header: dict[str, Any], claims: dict[str, Any]) -> str:
    return f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"


# -- fakes ----------------------------------------------------------------------------


class FakeClock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeGoogle:
    """The injected ``fetch_jwks``: serves ``document`` for ``max_age`` and counts calls."""

    def __init__(self, document: dict[str, Any], max_age: float = 3600) -> None:
        self.document = document
        self.max_age = max_age
        self.calls = 0
        self.error: Exception | None = None

    def __call__(self) -> tuple[dict[str, Any], float]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.document, self.max_age


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def google() -> FakeGoogle:
    return FakeGoogle(_jwks((GOOGLE_KEY_1, KID1)))


@pytest.fixture
def verifier(google: FakeGoogle, clock: FakeClock) -> GoogleTokenVerifier:
    return GoogleTokenVerifier(fetch_jwks=google, clock=clock)


def _verify(verifier: GoogleTokenVerifier, token: str) -> GoogleIdentity:
    return verifier.verify(token, audience=AUDIENCE, email=EMAIL)


def _reject(verifier: GoogleTokenVerifier, token: str, message: str) -> GoogleTokenError:
    """Asserts the named check failed, and that nothing about the token leaks."""
    with pytest.raises(GoogleTokenError) as info:
        _verify(verifier, token)
    err = info.value
    assert err.message == message
    assert err.code == "invalid_token"
    assert isinstance(err, AcmiError)
    if token:
        assert token not in str(err)
        assert token not in repr(err)
    # PyJWT's exception (whose text may quote the token) is not chained onto ours.
    assert err.__cause__ is None
    assert err.__context__ is None or err.__suppress_context__
    return err


# -- the happy path -------------------------------------------------------------------


def test_valid_token_gives_identity(verifier: GoogleTokenVerifier) -> None:
    identity = _verify(verifier, _token())
    assert identity == GoogleIdentity(
        email=EMAIL,
        audience=AUDIENCE,
        subject="112233445566778899000",
        issued_at=int(NOW) - 10,
        expires_at=int(NOW) + 3590,
    )


@pytest.mark.parametrize("issuer", ["accounts.google.com", "https://accounts.google.com"])
def test_both_google_issuers_accepted(verifier: GoogleTokenVerifier, issuer: str) -> None:
    assert _verify(verifier, _token(_claims(iss=issuer))).email == EMAIL


def test_email_compared_case_insensitively(verifier: GoogleTokenVerifier) -> None:
    identity = _verify(verifier, _token(_claims(email=EMAIL.upper())))
    assert identity.email == EMAIL.upper()


def test_construction_does_not_fetch(google: FakeGoogle, clock: FakeClock) -> None:
    GoogleTokenVerifier(fetch_jwks=google, clock=clock)
    assert google.calls == 0


def test_module_import_does_not_load_pyjwt() -> None:
    # Cold-start budget: only a Gmail push (a verify call) should load PyJWT/cryptography.
    code = (
        "import sys, acmi_core.auth.google_oidc\n"
        "loaded = [m for m in ('jwt', 'cryptography', 'httpx') if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.strip().split(",")
    assert "jwt" not in loaded
    assert "cryptography" not in loaded


# -- claim checks ---------------------------------------------------------------------


def test_wrong_audience(verifier: GoogleTokenVerifier) -> None:
    _reject(
        verifier, _token(_claims(aud="https://other.example.com")), "token audience does not match"
    )


def test_audience_list_rejected(verifier: GoogleTokenVerifier) -> None:
    _reject(verifier, _token(_claims(aud=[AUDIENCE])), "token audience does not match")


def test_missing_audience(verifier: GoogleTokenVerifier) -> None:
    _reject(verifier, _token(_claims(aud=_DROP)), "token audience does not match")


def test_wrong_email(verifier: GoogleTokenVerifier) -> None:
    token = _token(_claims(email="someone-else@evil.example"))
    _reject(verifier, token, "token email does not match")


def test_missing_email(verifier: GoogleTokenVerifier) -> None:
    _reject(verifier, _token(_claims(email=_DROP)), "token email does not match")


@pytest.mark.parametrize("verified", [False, "true", 1, None, _DROP])
def test_email_not_verified(verifier: GoogleTokenVerifier, verified: Any) -> None:
    _reject(verifier, _token(_claims(email_verified=verified)), "token email is not verified")


def test_expired(verifier: GoogleTokenVerifier) -> None:
    # exp 61 s ago with 60 s leeway.
    _reject(verifier, _token(_claims(exp=int(NOW) - 61, iat=int(NOW) - 3661)), "token expired")


def test_expired_within_leeway_ok(verifier: GoogleTokenVerifier) -> None:
    identity = _verify(verifier, _token(_claims(exp=int(NOW) - 59, iat=int(NOW) - 3659)))
    assert identity.expires_at == int(NOW) - 59


def test_expiry_follows_injected_clock(verifier: GoogleTokenVerifier, clock: FakeClock) -> None:
    token = _token()
    _verify(verifier, token)
    clock.now += 3590 + 61
    _reject(verifier, token, "token expired")


def test_issued_in_the_future_beyond_leeway(verifier: GoogleTokenVerifier) -> None:
    token = _token(_claims(iat=int(NOW) + 61))
    _reject(verifier, token, "token issued in the future")


def test_issued_in_the_future_within_leeway_ok(verifier: GoogleTokenVerifier) -> None:
    assert _verify(verifier, _token(_claims(iat=int(NOW) + 59))).issued_at == int(NOW) + 59


def test_custom_leeway(google: FakeGoogle, clock: FakeClock) -> None:
    strict = GoogleTokenVerifier(fetch_jwks=google, clock=clock, leeway_s=0)
    _reject(strict, _token(_claims(exp=int(NOW) - 1)), "token expired")


def test_not_before_in_the_future(verifier: GoogleTokenVerifier) -> None:
    _reject(verifier, _token(_claims(nbf=int(NOW) + 120)), "token not yet valid")


@pytest.mark.parametrize("claim", ["exp", "iat"])
@pytest.mark.parametrize("value", [_DROP, "1700000000", True, None])
def test_time_claims_must_be_numbers(verifier: GoogleTokenVerifier, claim: str, value: Any) -> None:
    token = _token(_claims(**{claim: value}))
    _reject(verifier, token, f"token claim '{claim}' is missing or not a number")


@pytest.mark.parametrize("issuer", ["https://evil.example", "http://accounts.google.com", _DROP])
def test_wrong_issuer(verifier: GoogleTokenVerifier, issuer: Any) -> None:
    _reject(verifier, _token(_claims(iss=issuer)), "token issuer is not Google")


def test_missing_subject(verifier: GoogleTokenVerifier) -> None:
    _reject(verifier, _token(_claims(sub=_DROP)), "token subject is missing")


# -- signatures and algorithms --------------------------------------------------------


def test_attacker_key_with_known_kid(verifier: GoogleTokenVerifier) -> None:
    token = _token(key=ATTACKER_KEY, kid=KID1)
    _reject(verifier, token, "token signature is invalid")


def test_tampered_payload(verifier: GoogleTokenVerifier) -> None:
    header, _, signature = _token().split(".")
    forged = _b64(json.dumps(_claims(email="attacker@evil.example")).encode())
    _reject(verifier, f"{header}.{forged}.{signature}", "token signature is invalid")


def test_alg_none_rejected(verifier: GoogleTokenVerifier, google: FakeGoogle) -> None:
    token = _unsigned({"alg": "none", "kid": KID1, "typ": "JWT"}, _claims()) + "."
    _reject(verifier, token, "token algorithm is not RS256")
    assert google.calls == 0  # rejected before any key lookup


def test_hs256_with_public_key_as_secret_rejected(verifier: GoogleTokenVerifier) -> None:
    # Classic algorithm confusion: HMAC keyed with the (public) PEM an attacker downloaded.
    pem = GOOGLE_KEY_1.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = _unsigned({"alg": "HS256", "kid": KID1, "typ": "JWT"}, _claims())
    mac = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    _reject(verifier, f"{signing_input}.{_b64(mac)}", "token algorithm is not RS256")


@pytest.mark.parametrize("alg", ["RS512", "PS256", "ES256"])
def test_other_algorithms_rejected(verifier: GoogleTokenVerifier, alg: str) -> None:
    token = _unsigned({"alg": alg, "kid": KID1}, _claims()) + ".c2ln"
    _reject(verifier, token, "token algorithm is not RS256")


def test_alg_header_lies_about_rs256(verifier: GoogleTokenVerifier) -> None:
    # Header says RS256 but carries an HMAC: the signature check must fail.
    signing_input = _unsigned({"alg": "RS256", "kid": KID1}, _claims())
    mac = hmac.new(b"secret", signing_input.encode(), hashlib.sha256).digest()
    _reject(verifier, f"{signing_input}.{_b64(mac)}", "token signature is invalid")


@pytest.mark.parametrize(
    "token",
    [
        "garbage",
        "a.b.c",
        "a.b",
        "....",
        "eyJhbGciOiJSUzI1NiJ9",
        "eyJhbGciOiJSUzI1NiJ9.!!!.???",
        _b64(b"[1,2]") + ".e30.c2ln",
    ],
)
def test_garbage_token_rejected(verifier: GoogleTokenVerifier, token: str) -> None:
    _reject(verifier, token, "token is malformed")


def test_garbage_payload_after_valid_header(verifier: GoogleTokenVerifier) -> None:
    header = _b64(json.dumps({"alg": "RS256", "kid": KID1}).encode())
    _reject(verifier, f"{header}.@@notbase64@@.c2ln", "token is malformed")


def test_empty_token_rejected(verifier: GoogleTokenVerifier) -> None:
    _reject(verifier, "", "token is missing")


def test_oversized_token_rejected(verifier: GoogleTokenVerifier, google: FakeGoogle) -> None:
    _reject(verifier, "a" * 20_000, "token is too long")
    assert google.calls == 0


@pytest.mark.parametrize(
    ("kid", "message"),
    [
        (None, "token header has no key id"),
        ("", "token header has no key id"),
        (42, "token is malformed"),  # PyJWT itself refuses a non-string kid
    ],
)
def test_missing_or_bad_kid(verifier: GoogleTokenVerifier, kid: Any, message: str) -> None:
    header: dict[str, Any] = {"alg": "RS256"} if kid is None else {"alg": "RS256", "kid": kid}
    _reject(verifier, _unsigned(header, _claims()) + ".c2ln", message)


# -- the key cache --------------------------------------------------------------------


def test_jwks_cached_across_verifies(verifier: GoogleTokenVerifier, google: FakeGoogle) -> None:
    for _ in range(10):
        _verify(verifier, _token())
    assert google.calls == 1


def test_jwks_refetched_after_max_age(
    verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock
) -> None:
    google.max_age = 300
    token = _token(_claims(exp=int(NOW) + 3000))
    _verify(verifier, token)
    clock.now += 299
    _verify(verifier, token)
    assert google.calls == 1
    clock.now += 1
    _verify(verifier, token)
    assert google.calls == 2


def test_max_age_zero_fetches_every_time(verifier: GoogleTokenVerifier, google: FakeGoogle) -> None:
    google.max_age = 0
    _verify(verifier, _token())
    _verify(verifier, _token())
    assert google.calls == 2


def test_unknown_kid_refreshes_once_then_rate_limited(
    verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock
) -> None:
    _verify(verifier, _token())  # warm the cache
    assert google.calls == 1
    clock.now += 61  # past min_refresh_interval_s since that fetch

    _reject(verifier, _token(kid="forged-1"), "token signed by an unknown key")
    assert google.calls == 2  # exactly one refresh

    clock.now += 30
    _reject(verifier, _token(kid="forged-2"), "token signed by an unknown key")
    assert google.calls == 2  # within the interval: no refetch

    for i in range(50):  # a flood of forged kids costs Google nothing
        _reject(verifier, _token(kid=f"forged-flood-{i}"), "token signed by an unknown key")
    assert google.calls == 2

    clock.now += 31  # interval since the last fetch has passed
    _reject(verifier, _token(kid="forged-3"), "token signed by an unknown key")
    assert google.calls == 3
    _verify(verifier, _token())  # known keys keep working throughout
    assert google.calls == 3


def test_unknown_kid_on_cold_cache_fetches_once(
    verifier: GoogleTokenVerifier, google: FakeGoogle
) -> None:
    _reject(verifier, _token(kid="forged"), "token signed by an unknown key")
    assert google.calls == 1  # the initial fetch counts; no second, back-to-back fetch


def test_key_rotation(verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock) -> None:
    _verify(verifier, _token())
    clock.now += 120
    # Google publishes a new key and starts signing with it.
    google.document = _jwks((GOOGLE_KEY_1, KID1), (GOOGLE_KEY_2, KID2))
    identity = _verify(verifier, _token(key=GOOGLE_KEY_2, kid=KID2))
    assert identity.email == EMAIL
    assert google.calls == 2
    _verify(verifier, _token(key=GOOGLE_KEY_2, kid=KID2))
    _verify(verifier, _token())  # the old key is still published
    assert google.calls == 2

    # The old key is retired: once the cache expires, tokens under it are unknown.
    google.document = _jwks((GOOGLE_KEY_2, KID2))
    clock.now += 3600
    _reject(verifier, _token(), "token signed by an unknown key")
    assert google.calls == 3


def test_kid_swap_does_not_confuse_keys(verifier: GoogleTokenVerifier, google: FakeGoogle) -> None:
    # Signed by key 2 but naming key 1's kid: verified against key 1, so it fails.
    google.document = _jwks((GOOGLE_KEY_1, KID1), (GOOGLE_KEY_2, KID2))
    _reject(verifier, _token(key=GOOGLE_KEY_2, kid=KID1), "token signature is invalid")


def test_jwks_skips_unusable_keys(verifier: GoogleTokenVerifier, google: FakeGoogle) -> None:
    good = _jwk(GOOGLE_KEY_1, KID1)
    google.document = {
        "keys": [
            "not a dict",
            {"kid": "ec", "kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"},
            {**_jwk(GOOGLE_KEY_2, "enc-key"), "use": "enc"},
            {**_jwk(GOOGLE_KEY_2, "rs512-key"), "alg": "RS512"},
            {"kid": "broken", "kty": "RSA", "n": "!!", "e": "AQAB"},
            {k: v for k, v in _jwk(GOOGLE_KEY_2, "x").items() if k != "kid"},
            good,
        ]
    }
    assert _verify(verifier, _token()).email == EMAIL
    _reject(verifier, _token(key=GOOGLE_KEY_2, kid="enc-key"), "token signed by an unknown key")


# -- fetch failures -------------------------------------------------------------------


def _unavailable(verifier: GoogleTokenVerifier, token: str) -> GoogleKeysUnavailable:
    with pytest.raises(GoogleKeysUnavailable) as info:
        _verify(verifier, token)
    err = info.value
    assert err.code == "keys_unavailable"
    assert isinstance(err, AcmiError)
    assert not isinstance(err, GoogleTokenError)
    assert err.retry_after > 0
    assert token not in str(err)
    return err


def test_fetch_failure_is_keys_unavailable(
    verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock
) -> None:
    google.error = httpx.ConnectTimeout("timed out")
    err = _unavailable(verifier, _token())
    assert isinstance(err.__cause__, httpx.ConnectTimeout)

    google.error = None  # Google is back: the next attempt (a minute on) succeeds
    clock.now += 60
    assert _verify(verifier, _token()).email == EMAIL
    assert google.calls == 2


@pytest.mark.parametrize(
    "document", [{}, {"keys": "nope"}, {"keys": []}, {"keys": [{"kty": "RSA"}]}, ["keys"]]
)
def test_bad_jwks_document_is_keys_unavailable(
    verifier: GoogleTokenVerifier, google: FakeGoogle, document: Any
) -> None:
    google.document = document
    _unavailable(verifier, _token())


def test_fetcher_may_raise_keys_unavailable_itself(
    verifier: GoogleTokenVerifier, google: FakeGoogle
) -> None:
    google.error = GoogleKeysUnavailable("custom", retry_after=7)
    assert _unavailable(verifier, _token()).retry_after == 7


def test_failure_after_expiry_then_recovery(
    verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock
) -> None:
    _verify(verifier, _token())
    clock.now += 3600
    google.error = httpx.ConnectError("down")
    # the expired set still serves its keys while Google fails (grace period)
    assert _verify(verifier, _token(_claims(iat=int(clock.now), exp=int(clock.now) + 3600)))
    google.error = None
    clock.now += 60
    assert _verify(verifier, _token(_claims(iat=int(clock.now), exp=int(clock.now) + 3600)))
    assert google.calls == 3


def test_unknown_kid_refresh_failure_is_rate_limited_too(
    verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock
) -> None:
    _verify(verifier, _token())
    clock.now += 61
    google.error = httpx.ConnectError("down")
    _unavailable(verifier, _token(kid="maybe-rotated"))  # might be a real new key: 503
    assert google.calls == 2
    # While the last attempt failed, any unknown kid might be a new key we could not
    # fetch: 503, and the failed attempt counts against the rate limit (no fetch).
    _unavailable(verifier, _token(kid="forged"))
    assert google.calls == 2
    _verify(verifier, _token())  # cached keys still serve known kids


# -- an outage of Google's JWKS endpoint ----------------------------------------------


def _fresh_token(clock: FakeClock, **kwargs: Any) -> str:
    return _token(_claims(iat=int(clock.now), exp=int(clock.now) + 3600), **kwargs)


def test_failing_fetches_are_rate_limited(
    verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock
) -> None:
    google.error = httpx.ConnectError("down")
    for _ in range(20):  # a burst of pushes on a cold cache: one attempt, not twenty
        err = _unavailable(verifier, _token())
    assert google.calls == 1
    assert err.retry_after == 60  # when the next attempt is allowed
    clock.now += 59
    assert _unavailable(verifier, _token()).retry_after == 1
    assert google.calls == 1
    clock.now += 1  # MIN_REFRESH_INTERVAL_S after the failed attempt: one more
    _unavailable(verifier, _token())
    assert google.calls == 2
    google.error = None
    clock.now += 60
    assert _verify(verifier, _token()).email == EMAIL
    assert google.calls == 3


def test_expired_keys_keep_serving_through_an_outage(
    verifier: GoogleTokenVerifier,
    google: FakeGoogle,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _verify(verifier, _token())
    clock.now += 3600  # the set's max-age has passed
    google.error = httpx.ConnectError("googleapis.com unreachable")
    token = _fresh_token(clock)
    with caplog.at_level(logging.WARNING, logger="acmi.auth"):
        for _ in range(20):
            assert _verify(verifier, token).email == EMAIL
        assert google.calls == 2  # one failed refresh, not one per push
        clock.now += 60
        assert _verify(verifier, token).email == EMAIL
        assert google.calls == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # one per failed attempt
    assert all("ConnectError" in w and "previous key set" in w for w in warnings)
    assert all(token not in w for w in warnings)


def test_unknown_kid_during_an_outage_is_503_without_a_fetch(
    verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock
) -> None:
    _verify(verifier, _token())
    clock.now += 3600
    google.error = httpx.ConnectError("down")
    assert _verify(verifier, _fresh_token(clock)).email == EMAIL  # the refresh fails
    assert google.calls == 2
    for i in range(20):  # maybe rotated keys, maybe forged: we cannot tell, so 503
        _unavailable(verifier, _fresh_token(clock, key=GOOGLE_KEY_2, kid=f"new-{i}"))
    assert google.calls == 2


def test_stale_keys_are_dropped_after_the_grace_period(
    verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock
) -> None:
    _verify(verifier, _token())  # max-age 3600
    google.error = httpx.ConnectError("down")
    clock.now = NOW + 3600 + google_oidc.STALE_GRACE_S - 1
    assert _verify(verifier, _fresh_token(clock)).email == EMAIL
    clock.now += 61
    _unavailable(verifier, _fresh_token(clock))  # a day past its max-age: not trusted


def test_recovery_replaces_the_stale_set(
    verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock
) -> None:
    _verify(verifier, _token())
    clock.now += 3600
    google.error = httpx.ConnectError("down")
    assert _verify(verifier, _fresh_token(clock)).email == EMAIL
    google.error = None
    google.document = _jwks((GOOGLE_KEY_2, KID2))  # rotated during the outage
    clock.now += 60
    assert _verify(verifier, _fresh_token(clock, key=GOOGLE_KEY_2, kid=KID2)).email == EMAIL
    assert google.calls == 3
    _reject(verifier, _fresh_token(clock), "token signed by an unknown key")  # retired


def test_a_bad_document_during_refresh_keeps_the_previous_set(
    verifier: GoogleTokenVerifier, google: FakeGoogle, clock: FakeClock
) -> None:
    _verify(verifier, _token())
    clock.now += 3600
    google.document = {"keys": []}
    assert _verify(verifier, _fresh_token(clock)).email == EMAIL
    assert google.calls == 2


# -- no token in any message ----------------------------------------------------------


def test_no_message_contains_the_token(verifier: GoogleTokenVerifier) -> None:
    tokens = [
        _token(_claims(aud="x")),
        _token(_claims(email="x@y.z")),
        _token(_claims(email_verified=False)),
        _token(_claims(exp=1)),
        _token(_claims(iat=int(NOW) + 999)),
        _token(_claims(iss="evil")),
        _token(key=ATTACKER_KEY),
        _token(kid="unknown"),
        _unsigned({"alg": "none", "kid": KID1}, _claims()) + ".",
        "not.a.jwt",
    ]
    for token in tokens:
        with pytest.raises(GoogleTokenError) as info:
            _verify(verifier, token)
        err = info.value
        for text in (str(err), repr(err), err.message, str(err.__context__ or "")):
            assert token not in text
            # Nor any of its segments (header, claims or signature).
            for segment in token.split("."):
                if len(segment) > 8:
                    assert segment not in text


# -- the production fetcher (httpx patched: never the network) ------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("public, max-age=21540, must-revalidate, no-transform", 21540.0),
        ("max-age=0", 0.0),
        ('MAX-AGE="60"', 60.0),
        ("no-cache", 3600.0),
        ("s-maxage=10", 3600.0),
        ("", 3600.0),
        (None, 3600.0),
    ],
)
def test_parse_max_age(header: str | None, expected: float) -> None:
    assert parse_max_age(header) == expected


def test_default_fetcher_uses_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    document = _jwks((GOOGLE_KEY_1, KID1))
    seen: dict[str, Any] = {}

    def fake_get(url: str, *, timeout: float) -> httpx.Response:
        seen.update(url=url, timeout=timeout)
        return httpx.Response(
            200,
            json=document,
            headers={"Cache-Control": "public, max-age=21540, must-revalidate"},
            request=httpx.Request("GET", url),
        )

    monkeypatch.setattr(httpx, "get", fake_get)
    assert google_oidc.fetch_google_jwks() == (document, 21540.0)
    assert seen == {"url": "https://www.googleapis.com/oauth2/v3/certs", "timeout": 5.0}


def test_default_fetcher_http_error_is_keys_unavailable(
    monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    def fake_get(url: str, *, timeout: float) -> httpx.Response:
        return httpx.Response(503, request=httpx.Request("GET", url))

    monkeypatch.setattr(httpx, "get", fake_get)
    verifier = GoogleTokenVerifier(clock=clock)  # the default fetcher, over patched httpx
    err = _unavailable(verifier, _token())
    assert isinstance(err.__cause__, httpx.HTTPStatusError)

"""Who is calling: API keys (Bearer), webhook HMAC signatures, push tokens, Google OIDC.

Key lookups are cached per process for ``settings.auth_cache_s`` so that a warm Lambda
spends no round trip on auth; a revoked key stops working within that time.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass

from acmi_core.api.cache import TtlCache
from acmi_core.auth import apikeys
from acmi_core.auth.apikeys import ApiKey, Scope
from acmi_core.errors import AcmiValidationError, Forbidden, Unauthenticated
from acmi_core.store.base import Store

SIGNATURE_HEADER = "X-Acmi-Signature"


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its tenant and what it may do (``source``: only ingest
    into that one source, for push tokens and OIDC)."""

    tenant: str
    scope: Scope
    name: str
    source: str | None = None

    def require(self, scope: Scope, *, tenant_header: str | None = None) -> None:
        if tenant_header is not None and tenant_header != self.tenant:
            raise Forbidden(
                "X-Acmi-Tenant: this key belongs to another tenant", field="X-Acmi-Tenant"
            )
        if not self.scope.allows(scope):
            raise Forbidden(
                f"authorization: this key has scope {self.scope.value!r}; "
                f"this route needs {scope.value!r}",
                field="authorization",
            )


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("authorization: must be 'Bearer <key>'", field="authorization")
    return token.strip()


class KeyCache:
    """API key lookups, cached for ``ttl_s``: a revoked key stops working within it."""

    def __init__(
        self, store: Store, ttl_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._cache: TtlCache[str, ApiKey] = TtlCache(ttl_s, clock=clock)

    def lookup(self, token: str) -> ApiKey | None:
        return self._cache.get(apikeys.key_hash(token), lambda: apikeys.lookup(self._store, token))

    def authenticate(self, header: str | None) -> Principal:
        token = bearer_token(header)
        if token is None:
            raise Unauthenticated(
                "authorization: required ('Authorization: Bearer <key>')", field="authorization"
            )
        record = self.lookup(token)
        if record is None:
            raise Unauthenticated("authorization: unknown or revoked key", field="authorization")
        return Principal(record.tenant, record.scope, record.name)


def verify_signature(secret: str, body: bytes, header: str | None) -> None:
    """``X-Acmi-Signature: sha256=<hex>``: HMAC-SHA256 of the raw body, constant-time."""
    if not header:
        raise Unauthenticated(
            f"{SIGNATURE_HEADER}: required for this source (sha256=<hex HMAC of the body>)",
            field=SIGNATURE_HEADER,
        )
    algorithm, _, given = header.partition("=")
    if algorithm != "sha256" or not given:
        raise AcmiValidationError(SIGNATURE_HEADER, "format", "must be 'sha256=<hex>'")
    expected = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, given.strip().lower()):
        raise Unauthenticated(
            f"{SIGNATURE_HEADER}: does not match the body", field=SIGNATURE_HEADER
        )


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and not token.startswith(apikeys.KEY_PREFIX)

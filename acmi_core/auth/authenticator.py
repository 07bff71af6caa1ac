"""Who may call what: API keys on every route, and the webhook credential policy (which
credential a source accepts, per the source table, plus its HMAC signature).

Everything the checks read from the store (key records, source configs) is cached per
process for ``settings.auth_cache_s``: a warm Lambda spends no round trip on auth, and a
revoked key or a changed source config takes effect within that time. A source config
that cannot be read fails closed: its deliveries get a 503 and the operator a log line.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from acmi_core.auth.apikeys import KEY_PREFIX, KeyCache, Scope
from acmi_core.auth.principal import TENANT_HEADER, Principal, bearer_token
from acmi_core.auth.signatures import (
    GITHUB_SIGNATURE_HEADER,
    SCHEME_HEADERS,
    SIGNATURE_HEADER,
    SLACK_SIGNATURE_HEADER,
    SLACK_TIMESTAMP_HEADER,
    TIMESTAMP_HEADER,
    SignatureRejected,
    verify_github,
    verify_signature,
    verify_slack,
)
from acmi_core.base.cache import TtlCache
from acmi_core.base.errors import Forbidden, Unauthenticated
from acmi_core.base.keys import Keys
from acmi_core.base.model import check_tenant
from acmi_core.base.settings import Settings
from acmi_core.ingest import config as source_configs
from acmi_core.ingest.config import SourceConfig, SourceConfigUnreadable, push_token_hash
from acmi_core.ingest.sources import Credential, SourceSpec
from acmi_core.store.base import Store

if TYPE_CHECKING:
    from acmi_core.auth.google_oidc import GoogleTokenVerifier

log = logging.getLogger("acmi.auth")


@dataclass(frozen=True)
class WebhookCaller:
    """An authenticated webhook sender and its source's config in the sender's tenant."""

    principal: Principal
    config: SourceConfig | None
    signature: str = "acmi"  # the source row's signature scheme


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and not token.startswith(KEY_PREFIX)


class Authenticator:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        google: GoogleTokenVerifier | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock`` times the caches; ``wall_clock`` (unix seconds) checks signed
        timestamps."""
        self._store = store
        self._settings = settings
        self._google = google
        self._wall_clock = wall_clock
        self.keys = KeyCache(store, settings.auth_cache_s, clock=clock)
        self._configs: TtlCache[tuple[str, str], SourceConfig] = TtlCache(
            settings.auth_cache_s, clock=clock
        )

    def api_key(
        self, authorization: str | None, scope: Scope, *, tenant_header: str | None = None
    ) -> Principal:
        """The caller of ``Authorization: Bearer <key>``, checked for ``scope``."""
        token = bearer_token(authorization)
        if token is None:
            raise Unauthenticated(
                "authorization: required ('Authorization: Bearer <key>')",
                field="authorization",
                rule="required",
            )
        record = self.keys.lookup(token)
        if record is None:
            raise Unauthenticated(
                "authorization: unknown or revoked key", field="authorization", rule="known_key"
            )
        principal = Principal(record.tenant, record.scope, record.name, agent=record.agent)
        principal.require(scope, tenant_header=tenant_header)
        return principal

    def source_config(
        self, tenant: str, source: str, *, fresh: bool = False
    ) -> SourceConfig | None:
        """The source's config in ``tenant`` (cached; ``fresh``: read it now)."""
        if fresh:
            self._configs.forget((tenant, source))

        def read() -> SourceConfig | None:  # the tenant's keys built on a miss only
            settings = self._settings
            keys = Keys(
                tenant, settings.default_tenant, settings.key_layout, settings.buckets_for(tenant)
            )
            return source_configs.get_config(self._store, keys, source)

        try:
            return self._configs.get((tenant, source), read)
        except SourceConfigUnreadable as exc:
            # Never cached: the next delivery reads it again, so a fix applies at once.
            log.error(
                "source config unreadable, deliveries refused: tenant=%s source=%s problems=%s",
                exc.tenant,
                exc.source,
                "; ".join(exc.problems),
                extra={"tenant": exc.tenant, "source": exc.source, "problems": exc.problems},
            )
            raise

    def webhook(
        self,
        spec: SourceSpec,
        source: str,
        headers: Mapping[str, str],
        query: Mapping[str, str],
    ) -> WebhookCaller:
        """A Google OIDC token (where the source accepts one); else a push token in the
        URL; else an API key with write scope."""
        token = bearer_token(headers.get("authorization"))
        push_token = query.get("token")
        if token is not None and looks_like_jwt(token) and spec.accepts(Credential.GOOGLE_OIDC):
            principal = self._google_principal(source, token, headers, query)
        elif token is None and push_token and spec.accepts(Credential.PUSH_TOKEN):
            principal = self._push_principal(source, push_token)
        else:
            principal = self.api_key(
                headers.get("authorization"), Scope.WRITE, tenant_header=headers.get(TENANT_HEADER)
            )
        config = self.source_config(principal.tenant, source)
        return WebhookCaller(principal, config, spec.signature)

    def verify_body(self, caller: WebhookCaller, raw: bytes, headers: Mapping[str, str]) -> None:
        """The body's signature with the secret of the source's config: ours (over
        ``<X-Acmi-Timestamp>.<body>`` when that header is sent) when a secret is
        configured; a sender's own scheme (Slack, GitHub) always, those senders always
        sign."""
        secret = caller.config.hmac_secret if caller.config is not None else None
        if caller.signature == "acmi":
            if secret:
                verify_signature(
                    secret,
                    raw,
                    headers.get(SIGNATURE_HEADER),
                    headers.get(TIMESTAMP_HEADER),
                    now_s=self._wall_clock(),
                )
            return
        if not secret:
            raise SignatureRejected(
                SCHEME_HEADERS[caller.signature],
                "not_configured",
                "this source needs its signing secret configured before it accepts a "
                "delivery (acmi sources set <source> --hmac-secret-env VAR)",
            )
        if caller.signature == "slack":
            verify_slack(
                secret,
                raw,
                headers.get(SLACK_SIGNATURE_HEADER),
                headers.get(SLACK_TIMESTAMP_HEADER),
                now_s=self._wall_clock(),
            )
        elif caller.signature == "github":
            verify_github(secret, raw, headers.get(GITHUB_SIGNATURE_HEADER))
        else:  # a row naming a scheme nobody implements must not mean "unsigned"
            raise SignatureRejected(
                SCHEME_HEADERS.get(caller.signature, SIGNATURE_HEADER),
                "unsupported",
                f"unknown signature scheme {caller.signature!r}",
            )

    def _push_principal(self, source: str, push_token: str) -> Principal:
        found = source_configs.resolve_push_token(self._store, push_token)
        if found is None:
            raise Unauthenticated("token: unknown push token", field="token", rule="known_token")
        tenant, allowed = found
        if allowed != source:
            raise Forbidden(
                f"token: this push token is for source {allowed!r}",
                field="token",
                rule="source_match",
            )
        # The token's record alone is not enough: the source's config must name it (a
        # record left behind by an interrupted rotation authenticates nothing). A cached
        # config may predate a rotation: read it again before refusing.
        digest = push_token_hash(push_token)
        if not self._names_token(self.source_config(tenant, source), digest) and (
            not self._names_token(self.source_config(tenant, source, fresh=True), digest)
        ):
            raise Unauthenticated("token: unknown push token", field="token", rule="known_token")
        return Principal(tenant, Scope.WRITE, f"push:{source}", source=source)

    @staticmethod
    def _names_token(config: SourceConfig | None, digest: str) -> bool:
        stored = config.push_token_hash if config is not None else None
        return stored is not None and hmac.compare_digest(stored, digest)

    def _google_principal(
        self, source: str, token: str, headers: Mapping[str, str], query: Mapping[str, str]
    ) -> Principal:
        tenant = check_tenant(query.get("tenant") or self._settings.default_tenant, "tenant")
        if headers.get(TENANT_HEADER) not in (None, tenant):
            raise Forbidden(
                f"{TENANT_HEADER}: does not match ?tenant=",
                field=TENANT_HEADER,
                rule="tenant_match",
            )
        config = self.source_config(tenant, source)
        if config is None or not config.oidc_audience or not config.oidc_email:
            raise Unauthenticated(
                f"authorization: source {source!r} of tenant {tenant!r} has no OIDC audience "
                "and service account configured (acmi sources set --oidc-audience "
                "--oidc-email)",
                field="authorization",
                rule="oidc_configured",
            )
        identity = self._google_verifier().verify(
            token, audience=config.oidc_audience, email=config.oidc_email
        )
        return Principal(tenant, Scope.WRITE, f"google:{identity.email}", source=source)

    def _google_verifier(self) -> GoogleTokenVerifier:
        if self._google is None:  # its module on the first OIDC push, not at import
            from acmi_core.auth.google_oidc import GoogleTokenVerifier

            self._google = GoogleTokenVerifier()
        return self._google

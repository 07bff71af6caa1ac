"""Who is calling: an authenticated principal, and the bearer token it presented."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from acmi_core.auth.apikeys import Scope
from acmi_core.base.errors import Forbidden, Unauthenticated

TENANT_HEADER: Final = "X-Acmi-Tenant"


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its tenant and what it may do (``source``: only ingest
    into that one source, for push tokens and OIDC; ``agent``: the agent its key is bound
    to, whose tier its writes are held to, ``acmi_core.auth.tiers``)."""

    tenant: str
    scope: Scope
    name: str
    source: str | None = None
    agent: str | None = None

    def require(self, scope: Scope, *, tenant_header: str | None = None) -> None:
        """403 unless this caller may act at ``scope`` in the tenant the request names."""
        if tenant_header is not None and tenant_header != self.tenant:
            raise Forbidden(
                f"{TENANT_HEADER}: this key belongs to another tenant",
                field=TENANT_HEADER,
                rule="tenant_match",
            )
        if not self.scope.allows(scope):
            raise Forbidden(
                f"authorization: this key has scope {self.scope.value!r}; "
                f"this route needs {scope.value!r}",
                field="authorization",
                rule="scope",
            )


def bearer_token(header: str | None) -> str | None:
    """The token of ``Authorization: Bearer <token>``; None when there is no header."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated(
            "authorization: must be 'Bearer <key>'", field="authorization", rule="bearer"
        )
    return token.strip()

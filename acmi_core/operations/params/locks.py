"""The leases' params."""

from __future__ import annotations

from acmi_core.operations.params.base import Params


class LocksClaimParams(Params):
    """Claim a lease on a resource for ttl_ms (owner: ns:id); returns it with the
    owner_token that renews and releases it. Refused while another holds it."""

    resource: str
    owner: str
    ttl_ms: int


class LocksRenewParams(Params):
    """Renew a lease with its owner_token for ttl_ms more; returns the lease."""

    resource: str
    owner_token: str
    ttl_ms: int


class LocksReleaseParams(Params):
    """Release a lease with its owner_token; returns the lease released."""

    resource: str
    owner_token: str


class LocksGetParams(Params):
    """A lease's state now: {resource, held, owner, expires_at, fence}."""

    resource: str

"""The leases' params."""

from __future__ import annotations

from pydantic import Field

from acmi_core.operations.params.base import Params

RESOURCE = "the locked thing, [A-Za-z0-9_.:-]{1,200}"
TOKEN = "the owner_token the claim returned"
TTL = "lease, ms (1 s to 24 h)"


class LocksClaimParams(Params):
    """Claim a lease on a resource for ttl_ms (owner: ns:id); returns it with the
    owner_token that renews and releases it. Refused while another holds it."""

    resource: str = Field(description=RESOURCE)
    owner: str = Field(description="entity id, e.g. agent:claude")
    ttl_ms: int = Field(description=TTL)


class LocksRenewParams(Params):
    """Renew a lease with its owner_token for ttl_ms more; returns the lease."""

    resource: str = Field(description=RESOURCE)
    owner_token: str = Field(description=TOKEN)
    ttl_ms: int = Field(description=TTL)


class LocksReleaseParams(Params):
    """Release a lease with its owner_token; returns the lease released."""

    resource: str = Field(description=RESOURCE)
    owner_token: str = Field(description=TOKEN)


class LocksGetParams(Params):
    """A lease's state now: {resource, held, owner, expires_at, fence}."""

    resource: str = Field(description=RESOURCE)

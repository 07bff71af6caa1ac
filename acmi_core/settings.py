"""Settings: the only module in acmi_core that reads the environment."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from acmi_core.errors import AcmiValidationError

TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def check_tenant(tenant: str, field_name: str = "tenant") -> str:
    if not isinstance(tenant, str) or not TENANT_RE.fullmatch(tenant):
        raise AcmiValidationError(
            field_name,
            "tenant_format",
            "must match [a-z0-9][a-z0-9_-]{0,63} (lowercase letters, digits, '_' or '-')",
        )
    return tenant


@dataclass(frozen=True)
class Settings:
    """Everything configurable, with defaults that work on a laptop.

    ``store_timeout_s`` bounds one store call *including* its retries, so a backend
    that accepts and never answers fails within it.
    """

    default_tenant: str = "default"
    upstash_url: str | None = None
    upstash_token: str | None = field(default=None, repr=False)
    redis_url: str | None = field(default=None, repr=False)
    store_timeout_s: float = 5.0
    store_max_attempts: int = 4
    retry_base_delay_s: float = 0.05
    retry_max_delay_s: float = 1.0
    # HTTP API
    api_key: str | None = field(default=None, repr=False)  # pre-registered admin key (local)
    auth_cache_s: float = 30.0  # how long a warm process trusts a key lookup
    max_body_bytes: int = 256 * 1024
    max_batch_events: int = 100
    # Idempotency records: explicit keys and Pub/Sub ids outlive Pub/Sub's 7-day retry
    # window; keys derived from the body (n8n, Make) are short-lived, so that a sender
    # posting the same body again tomorrow is a new delivery, not a replay.
    idempotency_ttl_s: int = 7 * 24 * 3600
    derived_idempotency_ttl_s: int = 6 * 3600

    def __post_init__(self) -> None:
        check_tenant(self.default_tenant, "ACMI_DEFAULT_TENANT")
        if self.store_timeout_s <= 0:
            raise AcmiValidationError("ACMI_STORE_TIMEOUT_S", "positive", "must be > 0")
        if self.store_max_attempts < 1:
            raise AcmiValidationError("ACMI_STORE_MAX_ATTEMPTS", "positive", "must be >= 1")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env

        def num(name: str, default: float) -> float:
            raw = env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return float(raw)
            except ValueError:
                raise AcmiValidationError(
                    name, "number", f"must be a number, got {raw!r}"
                ) from None

        return cls(
            default_tenant=env.get("ACMI_DEFAULT_TENANT") or "default",
            upstash_url=env.get("UPSTASH_REDIS_REST_URL") or None,
            upstash_token=env.get("UPSTASH_REDIS_REST_TOKEN") or None,
            redis_url=env.get("ACMI_REDIS_URL") or None,
            store_timeout_s=num("ACMI_STORE_TIMEOUT_S", 5.0),
            store_max_attempts=int(num("ACMI_STORE_MAX_ATTEMPTS", 4)),
            api_key=env.get("ACMI_API_KEY") or None,
            auth_cache_s=num("ACMI_AUTH_CACHE_S", 30.0),
            max_body_bytes=int(num("ACMI_MAX_BODY_BYTES", 256 * 1024)),
            idempotency_ttl_s=int(num("ACMI_IDEMPOTENCY_TTL_S", 7 * 24 * 3600)),
            derived_idempotency_ttl_s=int(num("ACMI_DERIVED_IDEMPOTENCY_TTL_S", 6 * 3600)),
        )

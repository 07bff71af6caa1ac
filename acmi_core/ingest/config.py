"""Per-tenant source configuration: how a webhook source authenticates and maps.

Stored at ``acmi:_source:<tenant>:<source>`` (JSON). The push token is stored only as a
hash, plus a global ``acmi:_pushtoken:<sha256>`` -> {tenant, source} so that a sender
that can only put a token in its URL is found without knowing its tenant. The HMAC
secret must be stored as is: verifying an HMAC needs it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from acmi_core.errors import AcmiValidationError
from acmi_core.ingest.mappers import check_mapping
from acmi_core.ingest.sources import check_source, source_spec
from acmi_core.keys import Keys, internal_global
from acmi_core.model import dumps
from acmi_core.store.base import Store
from acmi_core.writes import WritePlan


class SourceConfig(BaseModel):
    """Everything optional: a source with no config takes API keys and default mapping."""

    model_config = ConfigDict(extra="forbid")

    source: str
    kind: str = Field(description="the source table entry it uses: make, n8n, gmail, generic")
    hmac_secret: str | None = Field(default=None, repr=False)
    push_token_hash: str | None = None
    oidc_audience: str | None = None
    oidc_email: str | None = None
    entity: str | None = None  # default entity for deliveries that name none
    mapping: dict[str, str] | None = None  # generic: field -> dotted path or '=literal'


def _config_key(keys: Keys, source: str) -> str:
    return keys.internal("source", source)


def _push_token_key(digest: str) -> str:
    return internal_global("pushtoken", digest)


def get_config(store: Store, keys: Keys, source: str) -> SourceConfig | None:
    raw = store.execute(("GET", _config_key(keys, source)))
    if not isinstance(raw, bytes):
        return None
    try:
        return SourceConfig.model_validate_json(raw)
    except PydanticValidationError:
        return None


def put_config(
    store: Store,
    keys: Keys,
    source: str,
    *,
    hmac_secret: str | None = None,
    new_push_token: bool = False,
    oidc_audience: str | None = None,
    oidc_email: str | None = None,
    entity: str | None = None,
    mapping: dict[str, str] | None = None,
) -> tuple[SourceConfig, str | None]:
    """Create or replace a source's config. Returns (config, push token shown once)."""
    kind = source_spec(check_source(source)).name
    if (oidc_audience is None) != (oidc_email is None):
        raise AcmiValidationError("oidc", "pair", "give both oidc_audience and oidc_email")
    if hmac_secret is not None and len(hmac_secret) < 16:
        raise AcmiValidationError("hmac_secret", "min_length", "must be at least 16 characters")
    if mapping is not None:
        check_mapping(mapping)
    previous = get_config(store, keys, source)
    token = f"acmipt_{secrets.token_urlsafe(32)}" if new_push_token else None
    digest = hashlib.sha256(token.encode()).hexdigest() if token else None
    config = SourceConfig(
        source=source,
        kind=kind,
        hmac_secret=hmac_secret,
        push_token_hash=digest or (previous.push_token_hash if previous else None),
        oidc_audience=oidc_audience,
        oidc_email=oidc_email,
        entity=entity,
        mapping=mapping,
    )
    plan = WritePlan()
    plan.set(_config_key(keys, source), dumps(config.model_dump(exclude_none=True)))
    if digest:
        if previous and previous.push_token_hash:
            plan.delete(_push_token_key(previous.push_token_hash))
        plan.set(_push_token_key(digest), dumps({"tenant": keys.tenant, "source": source}))
    plan.apply(store)
    return config, token


def resolve_push_token(store: Store, token: str) -> tuple[str, str] | None:
    """(tenant, source) of a push token, or None."""
    raw = store.execute(("GET", _push_token_key(hashlib.sha256(token.encode()).hexdigest())))
    if not isinstance(raw, bytes):
        return None
    data: dict[str, Any] = json.loads(raw)
    return str(data["tenant"]), str(data["source"])

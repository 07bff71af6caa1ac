"""The operator commands' params (the store's own: no API key)."""

from __future__ import annotations

from typing import Any

from acmi_core.operations.params.base import Params


class DoctorParams(Params):
    """Check a keyspace (read-only), one category or all."""

    as_json: bool = False
    category: str | None = None


class MigrateParams(Params):
    """Repair what doctor finds (dry_run: say what it would do)."""

    as_json: bool = False
    dry_run: bool = False
    tenant_id: str | None = None
    category: str | None = None
    layout: str | None = None
    target: str | None = None


class KeysCreateParams(Params):
    """Mint a key of a tenant with a scope and a name (bound to an agent, if given)."""

    tenant: str
    scope: str
    name: str
    agent: str | None = None


class KeysListParams(Params):
    """The keys of a tenant (or every tenant's), never the key itself."""

    tenant: str | None = None


class KeysRevokeParams(Params):
    """Revoke a key by its id."""

    key_id: str


class SourcesSetParams(Params):
    """Configure a source: its secrets, push token, OIDC audience, entity and mapping."""

    source: str
    hmac_secret: str | None = None
    remove_hmac_secret: bool = False
    new_push_token: bool = False
    remove_push_token: bool = False
    oidc_audience: str | None = None
    oidc_email: str | None = None
    remove_oidc: bool = False
    entity: str | None = None
    remove_entity: bool = False
    mapping: dict[str, str] | None = None
    remove_mapping: bool = False
    gmail_credentials_secret: str | None = None
    remove_gmail_credentials_secret: bool = False
    replace: bool = False


class SourcesListParams(Params):
    """The tenant's sources: the senders of the table and every named one configured."""

    configured: bool = False


class SourcesGetParams(Params):
    """One source's configuration, without its secrets."""

    source: str


class JobsRunParams(Params):
    """Run a scheduled job now, by its name (the runner makes its run and its clock)."""

    job: str


class JobsStatusParams(Params):
    """A job's last run and what waits."""

    job: str


class QuotaMonitorParams(Params):
    """Each provider's quota health (record: keep the readings; alert_to: who hears)."""

    record: bool = True
    alert_to: str | None = None
    max_age_ms: int | None = 86_400_000


class QuotaReportParams(Params):
    """Post a quota reading of a provider's meter."""

    provider: str
    meter: str
    remaining: Any
    limit: Any
    unit: str | None = None
    resets_at: str | int | None = None

"""What the deployment itself serves and what its operator runs: the docs, and the
commands that work on the store directly (whoever holds the store's credentials is its
admin: no API key is asked)."""

from __future__ import annotations

from typing import Final

from acmi_core.operations.model import STORED, Access, Operation

_PARAMS: Final = "acmi_core.operations.params.service"


def _operator(
    name: str, summary: str, call: str, cli: str, params: str, result: str | None = None
) -> Operation:
    return Operation(
        name, summary, Access.ADMIN, call, cli=cli, store_only=True,
        params=f"{_PARAMS}:{params}", result=result,
    )  # fmt: skip


DOCS_OPERATIONS: Final[tuple[Operation, ...]] = (
    Operation(
        "docs.openapi",
        "The OpenAPI document of every route",
        Access.PUBLIC,
        method="GET",
        path="/openapi.json",
        function="docs",
    ),
    Operation(
        "docs.page",
        "Swagger UI over the document, its assets served here (no CDN)",
        Access.PUBLIC,
        method="GET",
        path="/docs",
        function="docs",
    ),
)

OPERATOR_OPERATIONS: Final[tuple[Operation, ...]] = (
    _operator(
        "ops.doctor",
        "Check a keyspace other ACMI tools wrote (read-only)",
        "acmi_core.ops.doctor:doctor_report",
        "doctor",
        "DoctorParams",
        result="builtins:int",
    ),
    _operator(
        "ops.migrate",
        "Repair what doctor finds (index, MCP layout, tenant_id)",
        "acmi_core.ops.migrate:migrate_report",
        "migrate",
        "MigrateParams",
        result="builtins:int",
    ),
    _operator(
        "keys.create",
        "Mint a key (printed once; only its hash is stored)",
        "acmi_core.auth.apikeys:mint",
        "keys create",
        "KeysCreateParams",
        result="acmi_core.auth.apikeys:Minted",
    ),
    _operator(
        "keys.list",
        "List keys (never the key itself)",
        "acmi_core.auth.apikeys:list_keys",
        "keys list",
        "KeysListParams",
        result="acmi_core.auth.apikeys:KeyList",
    ),
    _operator(
        "keys.revoke",
        "Revoke a key by id",
        "acmi_core.auth.apikeys:revoke",
        "keys revoke",
        "KeysRevokeParams",
        result="acmi_core.auth.apikeys:ApiKey",
    ),
    _operator(
        "sources.set",
        "Configure a source (auth and mapping)",
        "acmi_core.ingest.config:put_config",
        "sources set",
        "SourcesSetParams",
        result="acmi_core.ingest.config:SourceSet",
    ),
    _operator(
        "sources.list",
        "List the tenant's sources and what each is configured with (never a secret)",
        "acmi_core.ingest.config:list_configs",
        "sources list",
        "SourcesListParams",
        result="acmi_core.ingest.config:SourceList",
    ),
    _operator(
        "sources.get",
        "A source's configuration (never a secret: an HMAC secret shows as ***, a push "
        "token as set)",
        "acmi_core.ingest.config:describe_source",
        "sources get",
        "SourcesGetParams",
        result="acmi_core.ingest.config:ShownSource",
    ),
    _operator(
        "jobs.run",
        "Run a scheduled job now, as its schedule would: once per execution id",
        "acmi_core.jobs.runner:run_job",
        "jobs run",
        "JobsRunParams",
        result=STORED,
    ),
    _operator(
        "jobs.status",
        "Each job's last run and what waits",
        "acmi_core.jobs.runner:job_state",
        "jobs status",
        "JobsStatusParams",
        result=STORED,
    ),
    _operator(
        "quota.monitor",
        "Each provider's quota health; the overall status is the worst",
        "acmi_core.ops.quota:monitor",
        "quota-monitor",
        "QuotaMonitorParams",
        result="acmi_core.ops.results:QuotaMonitor",
    ),
    _operator(
        "quota.report",
        "Post a quota reading",
        "acmi_core.ops.quota:report",
        "quota report",
        "QuotaReportParams",
        result="acmi_core.ops.results:QuotaReport",
    ),
)

OPERATIONS: Final[tuple[Operation, ...]] = (*DOCS_OPERATIONS, *OPERATOR_OPERATIONS)

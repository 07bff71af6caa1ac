"""Operator commands, on the store only: API keys, webhook sources, scheduled jobs,
and doctor/migrate for a keyspace other ACMI tools wrote."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from typing import Annotated, Any

import typer

from acmi_core.auth import apikeys
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.lambdas import FUNCTIONS, FunctionSpec, function
from acmi_core.cli.entities import json_arg
from acmi_core.cli.output import emit, one_of, table
from acmi_core.cli.state import state
from acmi_core.ingest import config as source_configs

app = typer.Typer()
keys = typer.Typer(help="API keys (stored hashed; a key is shown once)", no_args_is_help=True)
sources = typer.Typer(help="webhook sources: auth and mapping", no_args_is_help=True)
jobs = typer.Typer(help="scheduled jobs", no_args_is_help=True)
SCOPES = [s.value for s in apikeys.Scope]

# (what sets it, its flag, what removes it, its flag): one command does one or the other
SOURCE_FLAG_CONFLICTS = (
    ("hmac_secret_env", "--hmac-secret-env", "remove_hmac_secret", "--remove-hmac-secret"),
    ("push_token", "--push-token", "remove_push_token", "--remove-push-token"),
    ("oidc_audience", "--oidc-audience", "remove_oidc", "--remove-oidc"),
    ("oidc_email", "--oidc-email", "remove_oidc", "--remove-oidc"),
    ("entity", "--entity", "remove_entity", "--remove-entity"),
    ("mapping", "--mapping", "remove_mapping", "--remove-mapping"),
    ("map", "--map", "remove_mapping", "--remove-mapping"),
    (
        "gmail_credentials_secret",
        "--gmail-credentials-secret",
        "remove_gmail_credentials_secret",
        "--remove-gmail-credentials-secret",
    ),
)


def map_args(entries: list[str] | None, mapping_json: str | None) -> dict[str, str] | None:
    """The mapping the flags give: --mapping JSON, or --map FIELD=PATH entries (together
    the whole mapping, as --mapping is)."""
    if entries and mapping_json:
        raise AcmiValidationError(
            "--map", "conflict", "conflicts with --mapping: give the mapping one way"
        )
    if mapping_json:
        given: dict[str, str] = json_arg(mapping_json, "--mapping")
        return given
    if not entries:
        return None
    mapping: dict[str, str] = {}
    for entry in entries:
        name, sep, path = entry.partition("=")
        if not sep or not name or not path:
            raise AcmiValidationError(
                "--map", "field_path", f"{entry!r} must be FIELD=PATH (e.g. summary=email.subject)"
            )
        mapping[name] = path
    return mapping


@sources.command("set")
def sources_set(
    source: Annotated[
        str,
        typer.Argument(
            help="make | n8n | gmail | generic | slack | github | vapi, or <one>-<name>"
        ),
    ],
    hmac_secret_env: Annotated[
        str | None, typer.Option(help="env var holding the HMAC secret (not argv)")
    ] = None,
    remove_hmac_secret: Annotated[bool, typer.Option(help="stop requiring an HMAC")] = False,
    push_token: Annotated[
        bool, typer.Option(help="mint a URL token (replaces the previous one)")
    ] = False,
    remove_push_token: Annotated[bool, typer.Option(help="revoke the URL token")] = False,
    oidc_audience: Annotated[
        str | None, typer.Option(help="Gmail/Pub/Sub push: the token's audience")
    ] = None,
    oidc_email: Annotated[
        str | None, typer.Option(help="Gmail/Pub/Sub push: the service account email")
    ] = None,
    remove_oidc: Annotated[bool, typer.Option(help="remove the OIDC audience and email")] = False,
    entity: Annotated[
        str | None, typer.Option(help="default entity for deliveries that name none")
    ] = None,
    remove_entity: Annotated[bool, typer.Option(help="remove the default entity")] = False,
    mapping: Annotated[
        str | None, typer.Option(help='make, n8n, generic: JSON, e.g. {"entity": "customer.id"}')
    ] = None,
    map: Annotated[
        list[str] | None,
        typer.Option(
            metavar="FIELD=PATH",
            help="make, n8n, generic: one mapped field (repeat; together the whole mapping), "
            "e.g. --map summary=email.subject --map kind=event",
        ),
    ] = None,
    remove_mapping: Annotated[bool, typer.Option(help="remove the stored mapping")] = False,
    gmail_credentials_secret: Annotated[
        str | None,
        typer.Option(
            metavar="ARN",
            help="gmail: Secrets Manager ARN of the mailbox's OAuth credentials (Google's "
            "authorized_user JSON); the Lambda then stores one event per new message",
        ),
    ] = None,
    remove_gmail_credentials_secret: Annotated[
        bool, typer.Option(help="gmail: stop fetching messages (store the notification only)")
    ] = False,
    replace: Annotated[
        bool,
        typer.Option(
            help="write the config whole from the flags given, dropping the rest (the way to "
            "overwrite a stored config that cannot be read)"
        ),
    ] = False,
) -> None:
    """Configure a source (auth and mapping): changes what the flags name, keeps the rest."""
    given = dict(locals())
    for setter, set_flag, remover, remove_flag in SOURCE_FLAG_CONFLICTS:
        if given[setter] not in (None, False, []) and given[remover]:
            raise AcmiValidationError(
                remove_flag, "conflict", f"conflicts with {set_flag}: set it or remove it, not both"
            )
    secret = None
    if hmac_secret_env:
        secret = os.environ.get(hmac_secret_env)
        if not secret:
            raise AcmiValidationError("--hmac-secret-env", "set", f"${hmac_secret_env} is not set")
    acmi = state().acmi()
    config, token = source_configs.put_config(
        acmi.store,
        acmi.keys,
        source,
        hmac_secret=secret,
        remove_hmac_secret=remove_hmac_secret,
        new_push_token=push_token,
        remove_push_token=remove_push_token,
        oidc_audience=oidc_audience,
        oidc_email=oidc_email,
        remove_oidc=remove_oidc,
        entity=entity,
        remove_entity=remove_entity,
        mapping=map_args(map, mapping),
        remove_mapping=remove_mapping,
        gmail_credentials_secret=gmail_credentials_secret,
        remove_gmail_credentials_secret=remove_gmail_credentials_secret,
        replace=replace,
    )
    shown = config.model_dump(exclude_none=True)
    if "hmac_secret" in shown:
        shown["hmac_secret"] = "***"
    if token:
        print("# the push token is shown once: add ?token=<it> to the push URL", file=sys.stderr)
        shown["push_token"] = token
    emit(shown, state().output)


@sources.command("list")
def sources_list(
    configured: Annotated[bool, typer.Option(help="only the sources with a config")] = False,
) -> None:
    """Every source of the tenant (the senders, and each named one configured) and what it
    is configured with: never a secret (an HMAC secret shows as ***, a push token as set).
    Finds the named ones by SCAN, as doctor does."""
    acmi = state().acmi()
    listed = source_configs.list_configs(acmi.store, acmi.keys, configured)
    columns = ("source", "kind", "configured", "hmac_secret", "push_token", "entity")
    emit(listed, state().output, lambda rows: table(rows, columns))


@sources.command("get")
def sources_get(
    source: Annotated[str, typer.Argument(help="a source's name, e.g. n8n or n8n-billing")],
) -> None:
    """A source's configuration: what `sources set` stored, never a secret."""
    acmi = state().acmi()
    emit(source_configs.describe_source(acmi.store, acmi.keys, source), state().output)


@keys.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="the key's tenant")],
    scope: Annotated[
        str,
        typer.Option(help=" | ".join(SCOPES), autocompletion=lambda: SCOPES),
    ],
    name: Annotated[str, typer.Option(help="what the key is for")] = "key",
    agent: Annotated[
        str | None,
        typer.Option(help="bind the key to this agent (agent:<id>): it writes only its tier's"),
    ] = None,
) -> None:
    """Mint a key (printed once; only its hash is stored)."""
    one_of("--scope", scope, SCOPES)
    acmi = state().acmi()
    plaintext, record = apikeys.mint(
        acmi.store, tenant=tenant, scope=scope, name=name, now_ms=acmi.clock(), agent=agent
    )
    print("# the key is shown once; only its hash is stored", file=sys.stderr)
    emit({"key": plaintext, **record.to_dict()}, state().output)


@keys.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's keys")] = None,
) -> None:
    """List keys (never the key itself)."""
    records = [r.to_dict() for r in apikeys.list_keys(state().acmi().store, tenant)]
    emit(
        records,
        state().output,
        lambda rows: table(
            rows, ("id", "tenant", "scope", "name", "agent", "created_at", "revoked_at")
        ),
    )


@keys.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="the key's id (from keys list)")],
) -> None:
    """Revoke a key by id."""
    emit({"revoked": apikeys.revoke(state().acmi().store, key_id).to_dict()}, state().output)


Category = Annotated[str | None, typer.Option(help="only keys of this category")]


@app.command()
def doctor(category: Category = None) -> None:
    """Check a keyspace other ACMI tools wrote (read-only); exits 1 when problems are found.
    --json: JSON lines, the last one a summary."""
    from acmi_core.ops.doctor import doctor_report

    status = doctor_report(
        state().acmi(), out=sys.stdout, err=sys.stderr, as_json=_json(), category=category
    )
    if status:
        raise typer.Exit(status)


@app.command()
def migrate(
    dry_run: Annotated[bool, typer.Option(help="print what it would do, write nothing")] = False,
    tenant_id: Annotated[
        str | None, typer.Option(help="set this tenant_id on default-tenant profiles without one")
    ] = None,
    category: Category = None,
    layout: Annotated[
        str | None,
        typer.Option(help="cluster: copy the deployment into the cluster layout at --target"),
    ] = None,
    target: Annotated[
        str | None, typer.Option(help="with --layout: a seed node of the target Redis Cluster")
    ] = None,
    buckets: Annotated[
        str | None,
        typer.Option(help="with --layout: the target's ACMI_CLUSTER_BUCKETS (default 1)"),
    ] = None,
) -> None:
    """Repair what doctor finds (index, MCP layout, tenant_id); exits 1 when conflicts remain.
    --json: JSON lines, the last one a summary. --layout cluster --target URL: copy the
    deployment into a Redis Cluster instead (resumable; verified by doctor there)."""
    from acmi_core.ops.migrate import migrate_report

    status = migrate_report(
        state().acmi(), out=sys.stdout, err=sys.stderr, as_json=_json(),
        dry_run=dry_run, tenant_id=tenant_id, category=category, layout=layout, target=target,
        buckets=buckets,
    )  # fmt: skip
    if status:
        raise typer.Exit(status)


def _json() -> bool:
    from acmi_core.cli.output import Output

    return state().output is Output.JSON


def _job_rows() -> list[FunctionSpec]:
    return [spec for spec in FUNCTIONS if spec.kind == "job"]


@jobs.command("run")
def jobs_run(
    job: Annotated[
        str,
        typer.Argument(
            help=", ".join(s.name for s in _job_rows()),
            autocompletion=lambda: [s.name for s in _job_rows()],
        ),
    ],
    execution_id: Annotated[
        str | None, typer.Option(help="default: a new one (manual-<uuid>)")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option(metavar="NAME=VALUE", help="JSON, else a string")
    ] = None,
) -> None:
    """Run a scheduled job now, as its schedule would: once per --execution-id."""
    from acmi_core.jobs.runner import JobRun, load_job
    from acmi_core.jobs.tenants import run_tenants

    spec = function(one_of("JOB", job, [s.name for s in _job_rows()]))
    assert spec.job is not None  # the choices are jobs only
    event: dict[str, Any] = {"execution_id": execution_id or f"manual-{uuid.uuid4()}"}
    for item in param or []:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise AcmiValidationError("--param", "name_value", f"{item!r}: use NAME=VALUE")
        try:
            event[name] = json.loads(raw)
        except ValueError:
            event[name] = raw  # a plain string
    acmi = state().acmi()
    run = JobRun.parse(spec.name, event, now_ms=acmi.clock())
    emit(run_tenants(acmi, run, load_job(spec.job), clock=time.perf_counter), state().output)


@jobs.command("status")
def jobs_status() -> None:
    """Each job's last run (when, watermark, touched, backlog, cost) and what waits."""
    from acmi_core.jobs.runner import job_state, pending
    from acmi_core.jobs.tenants import tenant_status

    acmi = state().acmi()
    status: dict[str, Any] = {}
    for spec in _job_rows():
        last = job_state(acmi, spec.name)
        status[spec.name] = {"last_run": last or None, "pending": pending(acmi, spec.name, last)}
        others = tenant_status(acmi, spec.name)
        if others:  # the other tenants' backlogs (the default tenant's is the above)
            status[spec.name]["tenants"] = others
    emit(status, state().output)

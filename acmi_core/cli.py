"""The ``acmi`` command line (also ``python -m acmi_core``).

Backend from the environment: UPSTASH_REDIS_REST_URL + UPSTASH_REDIS_REST_TOKEN, or
ACMI_REDIS_URL, else the embedded store, kept in ACMI_HOME and shared with a running
``acmi serve`` (``acmi_core/store/local.py``); ``demo`` and ``invoke`` use a throwaway one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from acmi_core import Acmi, AcmiError, Settings, create_acmi
from acmi_core.auth import apikeys
from acmi_core.ingest import config as source_configs
from acmi_core.lambdas import FUNCTIONS, FunctionSpec, function
from acmi_core.store import describe_store, open_store
from acmi_core.stored import render_json

EXAMPLE_EVENT_KEY = apikeys.EXAMPLE_EVENT_KEY  # the key the events/ samples carry


def _json_arg(raw: str, name: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise AcmiError(f"{name}: is not valid JSON ({exc.msg})", field=name) from None


def _print(value: Any) -> None:
    # render_json: stored values exactly (huge numbers, lone surrogates other clients wrote)
    print(render_json(value, indent=2).decode("utf-8"))


def cmd_demo(acmi: Acmi, args: argparse.Namespace) -> None:
    """The reference's 10-line example, then the one-round-trip context read."""
    entity = "user:mikey"
    acmi.profile.set(entity, {"name": "Mikey", "tz": "America/New_York"})
    acmi.signals.set(entity, "current_task", "shooting ACMI manifesto")
    acmi.timeline.append(
        entity,
        {
            "source": "user:mikey",
            "kind": "started_recording",
            "correlationId": "manifesto-001",
            "summary": "video 1 of 3",
        },
    )
    with acmi.batch() as batch:
        batch.signals.set(entity, "mood", "focused")
        batch.timeline.append(
            entity,
            {
                "source": "agent:claude",
                "kind": "note",
                "correlationId": "manifesto-001",
                "summary": "agent noticed the recording started",
                "payload": {"take": 1, "tags": []},
            },
        )
    print(f"# backend: {acmi.store.name}, tenant: {acmi.tenant}")
    _print(acmi.get(entity).to_dict())


def cmd_profile(acmi: Acmi, args: argparse.Namespace) -> None:
    doc = _json_arg(args.json, "json")
    _print(acmi.profile.merge(f"{args.ns}:{args.id}", doc))


def cmd_signal(acmi: Acmi, args: argparse.Namespace) -> None:
    entity = f"{args.ns}:{args.id}"
    values = _json_arg(args.json, "json")
    acmi.signals.update(entity, values)
    _print(acmi.signals.all(entity))


def cmd_event(acmi: Acmi, args: argparse.Namespace) -> None:
    event: dict[str, Any] = {
        "source": args.source,
        "kind": args.kind,
        "correlationId": args.correlation_id or f"cli-{uuid.uuid4().hex[:12]}",
        "summary": args.summary,
    }
    if args.parent:
        event["parentCorrelationId"] = args.parent
    if args.payload:
        event["payload"] = _json_arg(args.payload, "--payload")
    _print(acmi.timeline.append(f"{args.ns}:{args.id}", event).to_dict())


def cmd_get(acmi: Acmi, args: argparse.Namespace) -> None:
    _print(acmi.get(f"{args.ns}:{args.id}", events=args.events).to_dict())


def cmd_list(acmi: Acmi, args: argparse.Namespace) -> None:
    """Streams: one SSCAN page (one round trip) at a time, never the whole index in
    memory; entities come sorted within a page, in index order across pages."""
    count = 0
    for entity in acmi.iter_list(args.ns, limit=1000):
        print("[\n  " if count == 0 else ",\n  ", json.dumps(entity), sep="", end="")
        count += 1
    print("\n]" if count else "[]")


def cmd_delete(acmi: Acmi, args: argparse.Namespace) -> None:
    acmi.delete(f"{args.ns}:{args.id}")
    _print({"deleted": f"{args.ns}:{args.id}"})


def cmd_doctor(acmi: Acmi, args: argparse.Namespace) -> None:
    """Read-only check of a keyspace other tools wrote; exits 1 when problems are found."""
    from acmi_core.maintenance import doctor_report

    status = doctor_report(
        acmi, out=sys.stdout, err=sys.stderr, as_json=args.json, category=args.category
    )
    if status:
        raise SystemExit(status)


def cmd_migrate(acmi: Acmi, args: argparse.Namespace) -> None:
    """Repair what doctor finds; exits 1 when conflicts remain."""
    from acmi_core.maintenance import migrate_report

    status = migrate_report(
        acmi,
        out=sys.stdout,
        err=sys.stderr,
        as_json=args.json,
        dry_run=args.dry_run,
        tenant_id=args.tenant_id,
        category=args.category,
    )
    if status:
        raise SystemExit(status)


def cmd_keys_create(acmi: Acmi, args: argparse.Namespace) -> None:
    plaintext, record = apikeys.mint(
        acmi.store, tenant=args.key_tenant, scope=args.scope, name=args.name, now_ms=acmi.clock()
    )
    print("# the key is shown once; only its hash is stored", file=sys.stderr)
    _print({"key": plaintext, **record.to_dict()})


def cmd_keys_list(acmi: Acmi, args: argparse.Namespace) -> None:
    _print([r.to_dict() for r in apikeys.list_keys(acmi.store, args.key_tenant)])


def cmd_keys_revoke(acmi: Acmi, args: argparse.Namespace) -> None:
    _print({"revoked": apikeys.revoke(acmi.store, args.key_id).to_dict()})


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


def _map_args(entries: list[str] | None, mapping_json: str | None) -> dict[str, str] | None:
    """The mapping the flags give: --mapping JSON, or --map FIELD=PATH entries (together
    the whole mapping, as --mapping is)."""
    if entries and mapping_json:
        raise AcmiError("--map: conflicts with --mapping: give the mapping one way")
    if mapping_json:
        given: dict[str, str] = _json_arg(mapping_json, "--mapping")
        return given
    if not entries:
        return None
    mapping: dict[str, str] = {}
    for entry in entries:
        name, sep, path = entry.partition("=")
        if not sep or not name or not path:
            raise AcmiError(f"--map: {entry!r} must be FIELD=PATH (e.g. summary=email.subject)")
        mapping[name] = path
    return mapping


def cmd_sources_set(acmi: Acmi, args: argparse.Namespace) -> None:
    """Change what the flags name and keep the rest of the stored config."""
    for setter, set_flag, remover, remove_flag in SOURCE_FLAG_CONFLICTS:
        if getattr(args, setter) not in (None, False) and getattr(args, remover):
            raise AcmiError(
                f"{remove_flag}: conflicts with {set_flag}: set it or remove it, not both"
            )
    secret = None
    if args.hmac_secret_env:
        secret = os.environ.get(args.hmac_secret_env)
        if not secret:
            raise AcmiError(f"--hmac-secret-env: ${args.hmac_secret_env} is not set")
    config, token = source_configs.put_config(
        acmi.store,
        acmi.keys,
        args.source,
        hmac_secret=secret,
        remove_hmac_secret=args.remove_hmac_secret,
        new_push_token=args.push_token,
        remove_push_token=args.remove_push_token,
        oidc_audience=args.oidc_audience,
        oidc_email=args.oidc_email,
        remove_oidc=args.remove_oidc,
        entity=args.entity,
        remove_entity=args.remove_entity,
        mapping=_map_args(args.map, args.mapping),
        remove_mapping=args.remove_mapping,
        gmail_credentials_secret=args.gmail_credentials_secret,
        remove_gmail_credentials_secret=args.remove_gmail_credentials_secret,
        replace=args.replace,
    )
    shown = config.model_dump(exclude_none=True)
    if "hmac_secret" in shown:
        shown["hmac_secret"] = "***"
    if token:
        print("# the push token is shown once: add ?token=<it> to the push URL", file=sys.stderr)
        shown["push_token"] = token
    _print(shown)


# Query parameters that carry credentials, and ACMI's own keys and push tokens wherever
# they appear in a URL (a sender may put one in a path or another parameter).
_SECRET_PARAM = re.compile(
    r"(?i)([?&;](?:[a-z0-9_.-]*token|api_?key|key|secret|password|signature)=)[^&#\s\"]*"
)
_ACMI_SECRET = re.compile(r"\b(acmipt_|acmi_)[A-Za-z0-9_-]{16,}")


def redact_secrets(text: str) -> str:
    """``text`` with credential-carrying query values and ACMI keys replaced by ***."""
    return _ACMI_SECRET.sub(r"\1***", _SECRET_PARAM.sub(r"\1***", text))


class RedactSecrets(logging.Filter):
    """Redacts every str of a log record (uvicorn's access log puts the path with its
    query string in ``args``; its formatter needs the args tuple kept as is)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_secrets(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact_secrets(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {
                k: redact_secrets(v) if isinstance(v, str) else v for k, v in record.args.items()
            }
        return True


def serve_log_config() -> dict[str, Any]:
    """uvicorn's logging configuration, with :class:`RedactSecrets` on its loggers and
    handlers: push tokens travel in the URL (``?token=``) and must not reach a log."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_secrets"] = {"()": RedactSecrets}
    for section in ("loggers", "handlers"):
        for entry in config[section].values():
            entry.setdefault("filters", []).append("redact_secrets")
    return config


SERVE_KEY_NAME = "serve"


def _serve_key(acmi: Acmi) -> None:
    """Mint an admin key named ``serve`` only when the tenant has none: on a persistent
    store every start would otherwise add another never-expiring admin key."""
    existing = [
        r
        for r in apikeys.list_keys(acmi.store, acmi.tenant)
        if r.name == SERVE_KEY_NAME and r.scope is apikeys.Scope.ADMIN
    ]
    if existing:
        print(
            f"# tenant {acmi.tenant!r} already has an admin key named {SERVE_KEY_NAME!r} "
            f"(id {existing[0].id}; shown once, when it was made). Need a key? "
            f"`acmi keys create --tenant {acmi.tenant} --scope admin`",
            file=sys.stderr,
        )
        return
    key, _ = apikeys.mint(
        acmi.store, tenant=acmi.tenant, scope="admin", name=SERVE_KEY_NAME, now_ms=acmi.clock()
    )
    print(f"# admin key for tenant {acmi.tenant!r} (shown once): {key}", file=sys.stderr)


def cmd_mcp(acmi: Acmi, args: argparse.Namespace) -> None:
    """The MCP tools over stdio; tenant and scope from ACMI_API_KEY (acmi_core.mcp)."""
    try:
        from acmi_core.mcp.server import build_server, resolve_scope
    except ModuleNotFoundError as exc:  # the SDK is an extra: say which, not a traceback
        if exc.name is None or not exc.name.startswith("mcp"):
            raise
        raise SystemExit("acmi mcp: needs the MCP SDK: pip install 'acmi[mcp]'") from None

    bound, scope = resolve_scope(acmi, acmi.settings.api_key)
    build_server(bound, scope).run("stdio")


def cmd_serve(acmi: Acmi, args: argparse.Namespace) -> None:
    """The whole HTTP API under uvicorn, on whatever store the environment selects."""
    import uvicorn

    from acmi_core.api.app import ApiContext, create_app

    if acmi.settings.api_key:
        # the same policy as the Lambda kit: sample keys only on the embedded store, and
        # a revoked key is never registered again
        record = apikeys.ensure_admin_key(
            acmi.store, acmi.settings.api_key, tenant=acmi.tenant, now_ms=acmi.clock()
        )
        if record is None:
            print(
                "# ACMI_API_KEY was revoked and is not registered again: unset it and "
                "create a key with `acmi keys create`",
                file=sys.stderr,
            )
        else:
            print("# admin key: the value of ACMI_API_KEY", file=sys.stderr)
    else:
        _serve_key(acmi)
    from acmi_core.store.local import EmbeddedStore

    if isinstance(acmi.store, EmbeddedStore):  # this process owns the local data: share it
        host, port = acmi.store.serve(avoid=args.port)  # the HTTP port is bound later
        print(f"# store: other acmi commands reach it at {host}:{port}", file=sys.stderr)
    print(
        f"# backend: {acmi.store.name}; docs: http://{args.host}:{args.port}/docs", file=sys.stderr
    )
    # offload: uvicorn serves requests concurrently, so store calls go to worker threads
    app = create_app(ApiContext(acmi, offload=True))
    # uvicorn re-raises SIGTERM once it has shut down, which would end the process before
    # main closes the store (the embedded one saves its last writes then): exit via main
    previous = signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        uvicorn.run(
            app, host=args.host, port=args.port, log_level="info", log_config=serve_log_config()
        )
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_signal(signum: int, frame: object) -> NoReturn:
    raise SystemExit(128 + signum)


def _event_file(path: str) -> dict[str, Any]:
    """The event file's JSON object; a one-line error (exit 2) when it cannot be."""
    try:
        with open(path, encoding="utf-8") as handle:
            event = json.load(handle)
    except OSError as exc:
        raise AcmiError(
            f"--event: cannot read {path!r}: {exc.strerror or exc}", field="--event", rule="file"
        ) from None
    except UnicodeDecodeError:
        raise AcmiError(f"--event: {path!r} is not UTF-8", field="--event", rule="utf8") from None
    except json.JSONDecodeError as exc:
        raise AcmiError(
            f"--event: {path!r} is not valid JSON ({exc.msg}, line {exc.lineno})",
            field="--event",
            rule="json",
        ) from None
    if not isinstance(event, dict):
        raise AcmiError(
            f"--event: {path!r} must hold a JSON object (a Lambda event)",
            field="--event",
            rule="object",
        )
    return event


def cmd_invoke(acmi: Acmi, args: argparse.Namespace) -> None:
    """Run one Lambda handler in-process with an event file, like `sam local invoke -e`:
    the handler is found the way SAM finds it, by the Handler path of its function's row
    (acmi_core.lambdas), and runs on this command's store."""
    import importlib
    from types import SimpleNamespace

    spec = function(args.function)
    event = _event_file(args.event)
    env = dict(os.environ)
    if not env.get("ACMI_API_KEY") and acmi.store.name == apikeys.EMBEDDED_STORE:
        # the embedded store starts empty: accept the key the sample events carry
        env["ACMI_API_KEY"] = EXAMPLE_EVENT_KEY
    headers = event.get("headers") if isinstance(event, dict) else None
    credential = str((headers or {}).get("authorization", "")).partition(" ")[2].strip()
    if acmi.store.name != apikeys.EMBEDDED_STORE and apikeys.is_sample_key(credential):
        print(
            f"# this event carries the public sample key, which the {acmi.store.name} store "
            "never accepts: put a key from `acmi keys create` in its authorization header",
            file=sys.stderr,
        )
    context = SimpleNamespace(
        function_name=f"acmi-{spec.name}",
        function_version="$LATEST",
        memory_limit_in_mb=512,
        invoked_function_arn=f"arn:aws:lambda:local:000000000000:function:acmi-{spec.name}",
        aws_request_id=str(uuid.uuid4()),
    )
    module_name, _, attribute = spec.handler.rpartition(".")
    # As with `sam local invoke`: the function's logs on stderr, its response on stdout.
    with contextlib.redirect_stdout(sys.stderr):
        handler = getattr(importlib.import_module(module_name), attribute)
        handler.configure(env=env, store=acmi.store)
        response = handler(event, context)
    _print(response)


def _job_rows() -> list[FunctionSpec]:
    return [spec for spec in FUNCTIONS if spec.kind == "job"]


def cmd_jobs_run(acmi: Acmi, args: argparse.Namespace) -> None:
    """Run one scheduled job now, on this command's store, as its schedule would: once per
    execution id (give the same --execution-id twice and the second run does nothing)."""
    from acmi_core.jobs import JobRun, load_job, run_job

    spec = function(args.job)
    if spec.job is None:
        raise SystemExit(f"acmi jobs run: {spec.name} is an HTTP function, not a scheduled job")
    event: dict[str, Any] = {"execution_id": args.execution_id or f"manual-{uuid.uuid4()}"}
    for item in args.param or []:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"acmi jobs run: --param {item!r}: use NAME=VALUE")
        try:
            event[name] = json.loads(raw)
        except ValueError:
            event[name] = raw  # a plain string
    run = JobRun.parse(spec.name, event, now_ms=acmi.clock())
    _print(run_job(acmi, run, load_job(spec.job), clock=time.perf_counter))


def cmd_jobs_status(acmi: Acmi, args: argparse.Namespace) -> None:
    """Each scheduled job's last run (when, its watermark, what it touched, its backlog,
    what it cost: requests, commands, ms) and what waits for its next run."""
    from acmi_core.jobs import job_state, pending

    status: dict[str, Any] = {}
    for spec in _job_rows():
        state = job_state(acmi, spec.name)
        status[spec.name] = {"last_run": state or None, "pending": pending(acmi, spec.name, state)}
    _print(status)


def cmd_agents_wake(acmi: Acmi, args: argparse.Namespace) -> None:
    """Set (or --clear) an agent's wake slot: the wake tick wakes it at that minute."""
    if args.clear:
        acmi.wake.clear(args.agent)
        _print({"agent": args.agent, "wake": None})
        return
    if args.minute is None:
        raise SystemExit("acmi agents wake: --minute is required (or --clear)")
    target: dict[str, Any] | None = None
    if args.target_url:
        if not args.secret_env:
            raise SystemExit(
                "acmi agents wake: --target-url needs --secret-env NAME (the wake "
                "function's environment variable holding the HMAC secret)"
            )
        target = {"type": "webhook", "url": args.target_url, "secret_env": args.secret_env}
    elif args.target_eventbridge:
        target = {"type": "eventbridge", "bus": args.target_eventbridge}
    _print(acmi.wake.set(args.agent, args.minute, every_hours=args.every_hours, target=target))


def _memory(acmi: Acmi) -> Any:
    from acmi_core.memory.service import MemoryAPI  # only `acmi memory` pays for it

    return MemoryAPI(acmi)


def _progress_bar(done: int, total: int) -> None:
    """An import's progress on stderr (stdout stays the JSON result)."""
    width = 30
    filled = width if not total else width * done // total
    end = "\n" if done >= total else ""
    print(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} writes",
        end=end,
        file=sys.stderr,
        flush=True,
    )


def cmd_memory_status(acmi: Acmi, args: argparse.Namespace) -> None:
    _print(_memory(acmi).status(args.entity))


def cmd_memory_review(acmi: Acmi, args: argparse.Namespace) -> None:
    _print(_memory(acmi).review(args.entity))


# An archive URL's scheme -> the module registering its sink, imported by name when used:
# the SDK glue lives in functions/ and acmi_core has no import of it (ARCHITECTURE: seams).
SINK_MODULES: dict[str, str] = {"s3": "functions.sinks.s3"}


def _archive(acmi: Acmi, url: str | None) -> tuple[Any, str | None]:
    """The destination of ``url`` (default ACMI_ARCHIVE_URL; "" for none) with its sink
    module loaded by name, and why there is none when a URL was given."""
    import importlib

    from acmi_core import hygiene

    url = acmi.settings.archive_url if url is None else url
    scheme = (url or "").partition("://")[0]
    if url and scheme in SINK_MODULES and scheme not in hygiene.SINKS:
        try:
            importlib.import_module(SINK_MODULES[scheme])
        except ImportError as exc:  # boto3 missing: documents only, said so
            return None, f"{scheme}: its sink cannot load ({exc}): nothing trimmed"
    return hygiene.open_destination(url)


def cmd_memory_search(acmi: Acmi, args: argparse.Namespace) -> None:
    from acmi_core.memory_archive import archived_reader

    dest, no_sink = _archive(acmi, args.archive)
    reader = archived_reader(acmi, dest) if dest else None
    found = _memory(acmi).search(
        args.entity, " ".join(args.query), limit=args.limit, archived=reader
    )
    if no_sink:
        found["notes"] = [no_sink]
    _print(found)


def cmd_memory_archive(acmi: Acmi, args: argparse.Namespace) -> None:
    from acmi_core.memory_archive import archive_now

    dest, no_sink = _archive(acmi, args.archive)
    _print(
        archive_now(
            acmi,
            args.entity,
            retention_days=args.retention_days,
            max_events=args.max_events,
            dest=dest,
            no_sink=no_sink,
        )
    )


def cmd_memory_remember(acmi: Acmi, args: argparse.Namespace) -> None:
    _print(
        _memory(acmi).remember(
            args.entity, args.text, layer=args.layer, section=args.section, topic=args.topic
        )
    )


def _read_text(path: str, flag: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise AcmiError(
            f"{flag}: cannot read {path!r}: {exc.strerror or exc}", field=flag
        ) from None
    except UnicodeDecodeError:
        raise AcmiError(f"{flag}: {path!r} is not UTF-8", field=flag, rule="utf8") from None


def cmd_memory_active(acmi: Acmi, args: argparse.Namespace) -> None:
    memory = _memory(acmi)
    if args.set:
        memory.set_active(args.entity, _read_text(args.set, "--set"))
    shown = memory.active(args.entity)
    if args.text:
        print(shown["text"] or "", end="")
        return
    _print(shown)


def cmd_memory_daily_summary(acmi: Acmi, args: argparse.Namespace) -> None:
    _print(_memory(acmi).daily_summary(args.entity, args.date))


def cmd_memory_topic_create(acmi: Acmi, args: argparse.Namespace) -> None:
    _print(_memory(acmi).topic_create(args.entity, args.slug, args.name or args.slug))


def cmd_memory_prune(acmi: Acmi, args: argparse.Namespace) -> None:
    _print(_memory(acmi).prune(args.entity, args.days))


def cmd_memory_handoff(acmi: Acmi, args: argparse.Namespace) -> None:
    memory = _memory(acmi)
    if args.take:
        _print({"handoff": memory.take_handoff(args.entity)})
        return
    if args.file is None:
        raise AcmiError("--file: give the handoff's text file (or --take)", field="--file")
    _print(memory.handoff(args.entity, _read_text(args.file, "--file")))


def cmd_memory_debug(acmi: Acmi, args: argparse.Namespace) -> None:
    report = _memory(acmi).debug(args.entity)
    _print(report)
    if not report["ok"]:
        raise SystemExit(1)


def cmd_memory_export(acmi: Acmi, args: argparse.Namespace) -> None:
    from acmi_core.memory.tree import write_tree

    written = write_tree(_memory(acmi).export_snapshot(args.entity), args.dir)
    _print({"entity": args.entity, "dir": args.dir, "files": written})


def cmd_memory_import(acmi: Acmi, args: argparse.Namespace) -> None:
    """Also `acmi memory migrate`: the seed's tree under --dir into ACMI, idempotent."""
    _print(
        _memory(acmi).migrate(
            args.entity,
            args.dir,
            progress=None if args.quiet else _progress_bar,
            strict=args.strict,
        )
    )


def build_parser() -> argparse.ArgumentParser:
    # the docstring's first line, without its reST literal markup (``acmi``)
    summary = __doc__.splitlines()[0].replace("``", "")
    parser = argparse.ArgumentParser(prog="acmi", description=summary)
    parser.add_argument("--tenant", help="tenant id (default: ACMI_DEFAULT_TENANT or 'default')")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Callable[[Acmi, argparse.Namespace], None], help_: str) -> Any:
        p = sub.add_parser(name, help=help_)
        p.set_defaults(func=func)
        return p

    add("demo", cmd_demo, "write an example entity and print its context")
    add("mcp", cmd_mcp, "serve the MCP tools over stdio (ACMI_API_KEY: tenant, scope)")
    for name, func, help_ in (
        ("profile", cmd_profile, "merge a JSON object into a profile"),
        ("signal", cmd_signal, "set signals from a JSON object"),
    ):
        p = add(name, func, help_)
        p.add_argument("ns")
        p.add_argument("id")
        p.add_argument("json")
    p = add("event", cmd_event, "append a Comms v1.1 event")
    p.add_argument("ns")
    p.add_argument("id")
    p.add_argument("source")
    p.add_argument("summary")
    p.add_argument("--kind", default="note")
    p.add_argument("--correlation-id")
    p.add_argument("--parent", help="parentCorrelationId")
    p.add_argument("--payload", help="JSON payload")
    p = add("get", cmd_get, "profile, signals and the newest events (one round trip)")
    p.add_argument("ns")
    p.add_argument("id")
    p.add_argument("--events", type=int, default=50)
    p = add("list", cmd_list, "entities of a namespace")
    p.add_argument("ns")
    p = add("delete", cmd_delete, "delete an entity (all its keys)")
    p.add_argument("ns")
    p.add_argument("id")
    p = add("doctor", cmd_doctor, "check a keyspace other ACMI tools wrote (read-only)")
    p.add_argument("--json", action="store_true", help="JSON lines, the last one a summary")
    p.add_argument("--category", help="only keys of this category")
    p = add("migrate", cmd_migrate, "repair what doctor finds (index, MCP layout, tenant_id)")
    p.add_argument("--dry-run", action="store_true", help="print what it would do, write nothing")
    p.add_argument("--tenant-id", help="set this tenant_id on default-tenant profiles without one")
    p.add_argument("--json", action="store_true", help="JSON lines, the last one a summary")
    p.add_argument("--category", help="only keys of this category")
    _add_keys(sub)
    _add_sources(sub)

    p = add("serve", cmd_serve, "run the HTTP API locally (uvicorn)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p = add("invoke", cmd_invoke, "run one Lambda handler with an event file")
    p.add_argument("function", choices=[spec.name for spec in FUNCTIONS])
    p.add_argument("--event", required=True, help="e.g. events/ingest.n8n.json")
    _add_jobs(sub)
    _add_agents(sub)
    _add_memory(sub)
    return parser


def _add_memory(sub: Any) -> None:
    memory = sub.add_parser(
        "memory", help="the five memory layers (the seed's memory commands)"
    ).add_subparsers(dest="memory", required=True)

    def add(name: str, func: Callable[[Acmi, argparse.Namespace], None], help_: str) -> Any:
        p = memory.add_parser(name, help=help_)
        p.set_defaults(func=func)
        p.add_argument("entity", help="the memory's owner, e.g. agent:atlas")
        return p

    add("status", cmd_memory_status, "sizes, lines, budgets, staleness, next maintenance")
    add("review", cmd_memory_review, "weekly review: promote lessons and decisions, prune hot")
    p = add("search", cmd_memory_search, "search every layer, fast to slow, ranked")
    p.add_argument("query", nargs="+")
    p.add_argument("--limit", type=int, default=20)
    archive_help = "s3://bucket/prefix (default ACMI_ARCHIVE_URL; '' for none)"
    p.add_argument("--archive", help="also the raw archived events there: " + archive_help)
    p = add(
        "archive",
        cmd_memory_archive,
        "archive now: events older than the retention into the quarter's document and, "
        "with an archive, its verified object, then trimmed",
    )
    p.add_argument("--retention-days", type=int, default=30, help="older events go (30)")
    p.add_argument("--max-events", type=int, default=1000, help="at most this many a run")
    p.add_argument("--archive", help=archive_help)
    p = add("remember", cmd_memory_remember, "write a line now (write-ahead)")
    p.add_argument("text")
    p.add_argument("--layer", default="warm", choices=["daily", "hot", "warm", "topic"])
    p.add_argument("--section", help="a section key of the layer (e.g. lessons, in_progress)")
    p.add_argument("--topic", help="--layer topic: the topic's slug")
    p = add("active", cmd_memory_active, "show (or --set FILE) ACTIVE-CONTEXT.md")
    p.add_argument("--set", metavar="FILE", help="replace the hot layer with this file")
    p.add_argument("--text", action="store_true", help="print the Markdown only")
    p = add("daily-summary", cmd_memory_daily_summary, "a day's note and what it holds")
    p.add_argument("--date", help="YYYY-MM-DD (default today)")
    p = add("topic-create", cmd_memory_topic_create, "a topic file from the seed's template")
    p.add_argument("slug")
    p.add_argument("--name", help="its title (default the slug)")
    p = add("prune", cmd_memory_prune, "move completed and stale hot items to today's note")
    p.add_argument("--days", type=int, default=7, help="dated items older than this move")
    p = add("handoff", cmd_memory_handoff, "write HANDOFF.md (--file) or --take it")
    p.add_argument("--file", help="the handoff's text")
    p.add_argument("--take", action="store_true", help="read and clear the pending handoff")
    add("debug", cmd_memory_debug, "missing pieces, conflicts, stale items (exit 1 if any)")
    p = add("export", cmd_memory_export, "write the seed's file tree")
    p.add_argument("--dir", required=True)
    for name, help_ in (
        ("import", "import a tree (idempotent; progress on stderr)"),
        ("migrate", "migrate a seed workspace into ACMI (= import)"),
    ):
        p = add(name, cmd_memory_import, help_)
        p.add_argument("--dir", required=True)
        p.add_argument("--strict", action="store_true", help="refuse files over budget")
        p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_jobs(sub: Any) -> None:
    jobs = sub.add_parser("jobs", help="scheduled jobs").add_subparsers(dest="jobs", required=True)
    p = jobs.add_parser("run", help="run a scheduled job now (once per --execution-id)")
    p.set_defaults(func=cmd_jobs_run)
    p.add_argument("job", choices=[spec.name for spec in _job_rows()] or None)
    p.add_argument("--execution-id", help="default: a new one (manual-<uuid>)")
    p.add_argument("--param", action="append", help="NAME=VALUE (JSON, else a string)")
    p = jobs.add_parser("status", help="each job's last run, backlog and cost")
    p.set_defaults(func=cmd_jobs_status)


def _add_agents(sub: Any) -> None:
    agents = sub.add_parser("agents", help="agent slots").add_subparsers(
        dest="agents", required=True
    )
    p = agents.add_parser("wake", help="set an agent's wake slot (minute of the hour, UTC)")
    p.set_defaults(func=cmd_agents_wake)
    p.add_argument("agent", help="agent:<id> or <id>")
    p.add_argument("--minute", type=int, help="minute of the hour, 0-59")
    p.add_argument("--every-hours", type=int, default=1, help="1, 2, 3, 4, 6, 8, 12 or 24")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--target-url", help="https:// webhook the bundle is POSTed to")
    target.add_argument("--target-eventbridge", metavar="BUS", help="EventBridge bus name/ARN")
    p.add_argument("--secret-env", help="with --target-url: env var holding the HMAC secret")
    p.add_argument("--clear", action="store_true", help="remove the slot")


def _add_keys(sub: Any) -> None:
    keys = sub.add_parser("keys", help="API keys").add_subparsers(dest="keys", required=True)
    p = keys.add_parser("create", help="mint a key (printed once)")
    p.set_defaults(func=cmd_keys_create)
    p.add_argument("--tenant", dest="key_tenant", required=True)
    p.add_argument("--scope", choices=[s.value for s in apikeys.Scope], required=True)
    p.add_argument("--name", default="key")
    p = keys.add_parser("list", help="list keys (never the key itself)")
    p.set_defaults(func=cmd_keys_list)
    p.add_argument("--tenant", dest="key_tenant")
    p = keys.add_parser("revoke", help="revoke a key by id")
    p.set_defaults(func=cmd_keys_revoke)
    p.add_argument("key_id")


def _add_sources(sub: Any) -> None:
    srcs = sub.add_parser("sources", help="webhook sources").add_subparsers(
        dest="sources", required=True
    )
    p = srcs.add_parser(
        "set",
        help="configure a source (auth and mapping): changes what the flags name, keeps the rest",
    )
    p.set_defaults(func=cmd_sources_set)
    p.add_argument("source", help="make | n8n | gmail | generic | slack | github, or <one>-<name>")
    p.add_argument("--hmac-secret-env", help="env var holding the HMAC secret (not argv)")
    p.add_argument("--remove-hmac-secret", action="store_true", help="stop requiring an HMAC")
    p.add_argument(
        "--push-token", action="store_true", help="mint a URL token (replaces the previous one)"
    )
    p.add_argument("--remove-push-token", action="store_true", help="revoke the URL token")
    p.add_argument("--oidc-audience", help="Gmail/Pub/Sub push: the token's audience")
    p.add_argument("--oidc-email", help="Gmail/Pub/Sub push: the service account email")
    p.add_argument("--remove-oidc", action="store_true", help="remove the OIDC audience and email")
    p.add_argument("--entity", help="default entity for deliveries that name none")
    p.add_argument("--remove-entity", action="store_true", help="remove the default entity")
    p.add_argument("--mapping", help='make, n8n, generic: JSON, e.g. {"entity": "customer.id"}')
    p.add_argument(
        "--map",
        action="append",
        metavar="FIELD=PATH",
        help="make, n8n, generic: one mapped field (repeat; together the whole mapping), "
        "e.g. --map summary=email.subject --map kind=event",
    )
    p.add_argument("--remove-mapping", action="store_true", help="remove the stored mapping")
    p.add_argument(
        "--gmail-credentials-secret",
        metavar="ARN",
        help="gmail: Secrets Manager ARN of the mailbox's OAuth credentials (Google's "
        "authorized_user JSON); the Lambda then stores one event per new message",
    )
    p.add_argument(
        "--remove-gmail-credentials-secret",
        action="store_true",
        help="gmail: stop fetching messages (store the notification only)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="write the config whole from the flags given, dropping the rest (the way to "
        "overwrite a stored config that cannot be read)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        # demo and invoke run samples (invoke registers the public sample key): on a
        # throwaway store, never on the local data every other command shares
        local = args.func not in (cmd_demo, cmd_invoke)
        store = open_store(settings, local=local)
        try:
            shown = describe_store(store)
            if not local and store.name == apikeys.EMBEDDED_STORE:
                from acmi_core.store.local import data_dir

                shown = f"embedded, throwaway (samples stay out of {data_dir(settings)})"
            print(f"# store: {shown}", file=sys.stderr)
            args.func(create_acmi(store, settings, tenant=args.tenant), args)
        finally:
            store.close()
    except AcmiError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    return 0

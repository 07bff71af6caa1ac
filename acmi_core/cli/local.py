"""Commands that run ACMI here: demo, serve (the HTTP API under uvicorn), invoke (one
Lambda handler with an event file, like ``sam local invoke -e``) and mcp (the MCP tools
over stdio). On the store only."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import signal
import sys
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Final, NoReturn
from urllib.parse import unquote_plus

import typer

from acmi_core import Acmi
from acmi_core.auth import apikeys
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.extras import install_hint, missing_extra
from acmi_core.base.lambdas import FUNCTIONS, function
from acmi_core.cli.output import emit, one_of
from acmi_core.cli.state import state

EXAMPLE_EVENT_KEY = apikeys.EXAMPLE_EVENT_KEY  # the key the events/ samples carry
# The signing secrets the events/ slack and github samples are signed with (public, as
# the sample key is): `acmi invoke` gives them to the throwaway store's sources.
SAMPLE_SIGNING_SECRETS: Final = {
    "slack": "8f742231b10e8888abcd99yyyzzz85a5",
    "github": "gh-webhook-secret-acme-2026-0001",
}

app = typer.Typer()


@app.command()
def demo() -> None:
    """The reference's 10-line example, then the one-round-trip context read."""
    acmi = state().acmi(throwaway=True)
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
    emit(acmi.get(entity).to_dict(), state().output)


# Query parameters that carry credentials, and ACMI's own keys and push tokens wherever
# they appear in a URL (a sender may put one in a path or another parameter). A name or a
# value is compared percent-decoded, as the app reads it: `%74oken=` is `token=`.
_PARAM = re.compile(r"([?&;])([^=&;#\s\"?]*)=([^&;#\s\"]*)")
_SECRET_NAME = re.compile(r"(?i)[a-z0-9_.-]*token|api_?key|key|secret|password|signature")
_ACMI_SECRET = re.compile(r"\b(acmipt_|acmi_)[A-Za-z0-9_-]{16,}")
_ENCODED_RUN = re.compile(r"[^\s\"&?=/]*%[0-9A-Fa-f]{2}[^\s\"&?=/]*")


def _mask_param(match: re.Match[str]) -> str:
    name = unquote_plus(match[2])
    if _SECRET_NAME.fullmatch(name):
        return f"{match[1]}{match[2]}=***"
    return match[0]


def _mask_encoded(match: re.Match[str]) -> str:
    found = _ACMI_SECRET.search(unquote_plus(match[0]))
    return f"{found[1]}***" if found else match[0]


def redact_secrets(text: str) -> str:
    """``text`` with credential-carrying query values and ACMI keys replaced by ***."""
    text = _PARAM.sub(_mask_param, text)
    return _ENCODED_RUN.sub(_mask_encoded, _ACMI_SECRET.sub(r"\1***", text))


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


def serve_keys(acmi: Acmi) -> None:
    """The keys ``acmi serve`` starts with: ``ACMI_API_KEY`` registered as an admin key
    when it is no key yet (a key that exists keeps its scope), and an admin key minted and
    printed only when the configured one is not an admin key."""
    admin = False
    if acmi.settings.api_key:
        # the same policy as the Lambda kit: sample keys only on the embedded store, a
        # revoked key is never registered again, and a key keeps the scope it has
        record = apikeys.ensure_admin_key(
            acmi.store, acmi.settings.api_key, tenant=acmi.tenant, now_ms=acmi.clock()
        )
        if record is None:
            print(
                "# ACMI_API_KEY was revoked and is not registered again: unset it and "
                "create a key with `acmi keys create`",
                file=sys.stderr,
            )
        elif record.scope is apikeys.Scope.ADMIN:
            admin = True
            print("# admin key: the value of ACMI_API_KEY", file=sys.stderr)
        else:
            print(
                f"# ACMI_API_KEY is a {record.scope.value} key of tenant {record.tenant!r} "
                f"(id {record.id}) and keeps that scope",
                file=sys.stderr,
            )
    if not admin:  # no admin key configured: mint one (once per tenant)
        _serve_key(acmi)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="the address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="the port to listen on")] = 8000,
) -> None:
    """Run the HTTP API locally (uvicorn), on the store the environment selects."""
    check_port_free(host, port)  # before the store is opened: nothing started, nothing to undo
    serve_on(state().acmi(), host, port)


def check_port_free(host: str, port: int) -> None:
    """Refuse a port something already listens on, as a usage error naming it (uvicorn
    would log the bind error and exit 1 once the app had started). Bound the way uvicorn
    binds (SO_REUSEADDR), so a port in TIME_WAIT is not taken for one in use."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise AcmiValidationError("--host", "address", f"{host!r}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise AcmiValidationError(
                "--port",
                "in_use",
                f"{host}:{port} is in use ({exc.strerror}): stop what listens there "
                "(another acmi serve?) or choose another with --port",
            ) from None


def serve_on(acmi: Acmi, host: str, port: int) -> None:
    """The whole HTTP API under uvicorn, on ``acmi``'s store."""
    try:
        import uvicorn

        from acmi_core.api.app import create_app
        from acmi_core.api.context import ApiContext
    except ModuleNotFoundError as exc:  # the server extra: say which, not a traceback
        raise _missing_extra(exc, "acmi serve") from None

    serve_keys(acmi)
    from acmi_core.store.local import EmbeddedStore

    if isinstance(acmi.store, EmbeddedStore):  # this process owns the local data: share it
        shared = acmi.store.serve(avoid=port)  # the HTTP port is bound later
        print(f"# store: other acmi commands reach it at {shared[0]}:{shared[1]}", file=sys.stderr)
    print(
        f"# backend: {acmi.store.name}; docs: http://{host}:{port}/docs;"
        f" dashboard: http://{host}:{port}/dashboard",
        file=sys.stderr,
    )
    api = serve_app(acmi, create_app(ApiContext(acmi, offload=True)))
    # uvicorn re-raises SIGTERM once it has shut down, which would end the process before
    # main closes the store (the embedded one saves its last writes then): exit via main
    previous = signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        uvicorn.run(api, host=host, port=port, log_level="info", log_config=serve_log_config())
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve_app(acmi: Acmi, api: Any) -> Any:
    """What ``acmi serve`` runs: the HTTP API (its store calls offloaded to worker
    threads: uvicorn serves requests concurrently) and, with the mcp extra, the MCP
    endpoint at ``/mcp`` as the mcp function serves it."""
    try:
        from acmi_core.mcp.http import McpHttpApp, with_mcp
    except ModuleNotFoundError as exc:
        if missing_extra(exc) != "mcp":
            raise
        # without the mcp extra: the API alone, and how to add the endpoint
        print(f"# no /mcp: {install_hint('mcp')}", file=sys.stderr)
        return api
    print("# MCP (streamable HTTP): POST /mcp with Authorization: Bearer <key>", file=sys.stderr)
    # the SDK logs a request's lifecycle at INFO (as in the mcp function, its warnings stay)
    logging.getLogger("mcp").setLevel(logging.WARNING)
    return with_mcp(api, McpHttpApp(acmi))


def _exit_on_signal(signum: int, frame: object) -> NoReturn:
    raise SystemExit(128 + signum)


def _event_file(path: str) -> dict[str, Any]:
    """The event file's JSON object; a one-line error (exit 2) when it cannot be."""
    try:
        with open(path, encoding="utf-8") as handle:
            event = json.load(handle)
    except OSError as exc:
        raise AcmiValidationError(
            "--event", "file", f"cannot read {path!r}: {exc.strerror or exc}"
        ) from None
    except UnicodeDecodeError:
        raise AcmiValidationError("--event", "utf8", f"{path!r} is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise AcmiValidationError(
            "--event", "json", f"{path!r} is not valid JSON ({exc.msg}, line {exc.lineno})"
        ) from None
    if not isinstance(event, dict):
        raise AcmiValidationError(
            "--event", "object", f"{path!r} must hold a JSON object (a Lambda event)"
        )
    return event


@app.command()
def invoke(
    function_name: Annotated[
        str,
        typer.Argument(
            metavar="FUNCTION",
            help=", ".join(spec.name for spec in FUNCTIONS),
            autocompletion=lambda: [spec.name for spec in FUNCTIONS],
        ),
    ],
    event_path: Annotated[str, typer.Option("--event", help="e.g. events/ingest.n8n.json")],
) -> None:
    """Run one Lambda handler with an event file, like `sam local invoke -e`: found the
    way SAM finds it (its function's Handler), on a throwaway embedded store unless the
    environment names one."""
    acmi = state().acmi(throwaway=True)
    from types import SimpleNamespace

    spec = function(one_of("FUNCTION", function_name, [s.name for s in FUNCTIONS]))
    event = _event_file(event_path)
    env = dict(os.environ)
    if not env.get("ACMI_API_KEY") and acmi.store.name == apikeys.EMBEDDED_STORE:
        # the embedded store starts empty: accept the key the sample events carry
        env["ACMI_API_KEY"] = EXAMPLE_EVENT_KEY
    if acmi.store.name == apikeys.EMBEDDED_STORE and isinstance(event, dict):
        event = prepare_sample(acmi, event)
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
        try:
            handler = getattr(functions_module(module_name), attribute)
        except ModuleNotFoundError as exc:  # an extra's package: say which, not a traceback
            raise _missing_extra(exc, f"the {spec.name} function") from None
        handler.configure(env=env, store=acmi.store)
        response = handler(event, context)
    emit(response, state().output)


def prepare_sample(acmi: Acmi, event: dict[str, Any]) -> dict[str, Any]:
    """What a sample assumes on the throwaway store, which starts empty: a signed
    sender's source has the secret the sample is signed with, a Slack sample is signed
    again now (its timestamp must be within 5 minutes), and a work item's sample finds
    the item. Said on stderr; the event file is not changed."""
    from acmi_core.auth.signatures import sign_slack
    from acmi_core.base.errors import Conflict
    from acmi_core.ingest.config import put_config

    parts = str(event.get("rawPath") or "").strip("/").split("/")
    if parts[:2] == ["v1", "ingest"] and len(parts) == 3:
        source = parts[2]
        secret = SAMPLE_SIGNING_SECRETS.get(source.split("-", 1)[0])
        if secret is None:
            return event
        put_config(acmi.store, acmi.keys, source, hmac_secret=secret)
        note = f"# throwaway store: source {source} has the sample's signing secret"
        if source.split("-", 1)[0] == "slack":
            raw = event.get("body") or ""
            body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode()
            signed = {k.lower(): v for k, v in sign_slack(secret, body, int(time.time())).items()}
            headers = {k: signed.get(k.lower(), v) for k, v in (event.get("headers") or {}).items()}
            event = {**event, "headers": {**signed, **headers}}
            note += ", signed again now"
        print(note, file=sys.stderr)
    elif parts[:2] == ["v1", "work"] and len(parts) >= 3:
        try:
            acmi.work.create(parts[2], {"title": f"sample item {parts[2]}"})
            print(
                f"# throwaway store: work item {parts[2]} created for the sample", file=sys.stderr
            )
        except Conflict:
            pass
    return event


@app.command()
def mcp(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="log each request on stderr")
    ] = False,
) -> None:
    """Serve the MCP tools over stdio (tenant and scope: ACMI_API_KEY; the tool set:
    ACMI_MCP_TOOLS, ours, reference or all)."""
    try:
        from acmi_core.mcp.server import build_server, resolve_key
    except ModuleNotFoundError as exc:  # the SDK is an extra: say which, not a traceback
        raise _missing_extra(exc, "acmi mcp") from None
    acmi = state().acmi()
    bound, scope, agent = resolve_key(acmi, acmi.settings.api_key)
    level = "INFO" if verbose else "WARNING"  # the SDK's INFO is a line per request
    logging.getLogger("mcp").setLevel(level)
    server = build_server(bound, scope, acmi.settings.mcp_tools, log_level=level, agent=agent)
    server.run("stdio")


@app.command()
def skill(
    install: Annotated[
        str | None,
        typer.Option(
            metavar="DIR", help="write DIR/acmi/SKILL.md (e.g. .claude/skills) instead of printing"
        ),
    ] = None,
) -> None:
    """The skill file that teaches an agent the wake / claim / heartbeat / release / handoff
    routine with these tools."""
    from importlib import resources
    from pathlib import Path

    text = resources.files("acmi_core").joinpath("skill/SKILL.md").read_text(encoding="utf-8")
    if install is None:
        sys.stdout.write(text)
        return
    target = Path(install) / "acmi" / "SKILL.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"# wrote {target}", file=sys.stderr)


def functions_module(name: str) -> ModuleType:
    """A module of ``functions/`` by name (``functions.ingest``), as SAM finds a handler.
    The folder is not part of the installed package (SAM builds each artifact from it), so
    when it is not importable it is loaded from the checkout this acmi_core runs from; an
    installed wheel has none, and says so."""
    import importlib
    import importlib.util

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != "functions":
            raise
    folder = Path(__file__).resolve().parents[2] / "functions"
    init = folder / "__init__.py"
    if not init.is_file():
        raise AcmiValidationError(
            "functions",
            "checkout",
            f"{name} is a Lambda handler of the functions/ folder, which is not installed "
            f"with acmi (no {folder}): run this from a checkout of the repository "
            "(pip install -e '.[cli,lambda]')",
        )
    package_spec = importlib.util.spec_from_file_location(
        "functions", init, submodule_search_locations=[str(folder)]
    )
    assert package_spec is not None and package_spec.loader is not None  # a file we found
    package = importlib.util.module_from_spec(package_spec)
    sys.modules["functions"] = package
    try:
        package_spec.loader.exec_module(package)
    except BaseException:
        del sys.modules["functions"]
        raise
    return importlib.import_module(name)


def _missing_extra(exc: ModuleNotFoundError, what: str) -> Exception:
    """``exc`` as a usage error saying which extra to install (``base.extras``; boto3 is
    the Lambda runtime's own); a module of our own missing stays the bug it is."""
    package = (exc.name or "").partition(".")[0]
    if not package or package in ("acmi_core", "functions"):
        return exc
    extra = missing_extra(exc)
    install = install_hint(extra) if extra is not None else f"pip install {package}"
    return AcmiValidationError(package, "installed", f"{what} needs {package}: {install}")

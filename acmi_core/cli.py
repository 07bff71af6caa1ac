"""The ``acmi`` command line (also ``python -m acmi_core``).

Backend from the environment: UPSTASH_REDIS_REST_URL + UPSTASH_REDIS_REST_TOKEN, or
ACMI_REDIS_URL, else the embedded store (which lives only as long as the process, so
use ``demo`` there).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from acmi_core import Acmi, AcmiError, create_acmi
from acmi_core.auth import apikeys
from acmi_core.ingest import config as source_configs
from acmi_core.lambdas import FUNCTIONS, function

EXAMPLE_EVENT_KEY = "acmi_local_example_admin_key_0001"  # the key the events/ samples carry


def _json_arg(raw: str, name: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise AcmiError(f"{name}: is not valid JSON ({exc.msg})", field=name) from None


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


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
    _print(acmi.list(args.ns))


def cmd_delete(acmi: Acmi, args: argparse.Namespace) -> None:
    acmi.delete(f"{args.ns}:{args.id}")
    _print({"deleted": f"{args.ns}:{args.id}"})


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


def cmd_sources_set(acmi: Acmi, args: argparse.Namespace) -> None:
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
        new_push_token=args.push_token,
        oidc_audience=args.oidc_audience,
        oidc_email=args.oidc_email,
        entity=args.entity,
        mapping=_json_arg(args.mapping, "--mapping") if args.mapping else None,
    )
    shown = config.model_dump(exclude_none=True)
    if "hmac_secret" in shown:
        shown["hmac_secret"] = "***"
    if token:
        print("# the push token is shown once: add ?token=<it> to the push URL", file=sys.stderr)
        shown["push_token"] = token
    _print(shown)


def cmd_serve(acmi: Acmi, args: argparse.Namespace) -> None:
    """The whole HTTP API under uvicorn, on whatever store the environment selects."""
    import uvicorn

    from acmi_core.api.app import ApiContext, create_app

    if acmi.settings.api_key:
        apikeys.ensure_admin_key(
            acmi.store, acmi.settings.api_key, tenant=acmi.tenant, now_ms=acmi.clock()
        )
        print("# admin key: the value of ACMI_API_KEY", file=sys.stderr)
    else:
        key, _ = apikeys.mint(
            acmi.store, tenant=acmi.tenant, scope="admin", name="serve", now_ms=acmi.clock()
        )
        print(f"# admin key for tenant {acmi.tenant!r} (shown once): {key}", file=sys.stderr)
    print(
        f"# backend: {acmi.store.name}; docs: http://{args.host}:{args.port}/docs", file=sys.stderr
    )
    # offload: uvicorn serves requests concurrently, so store calls go to worker threads
    app = create_app(ApiContext(acmi, offload=True))
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")


def cmd_invoke(acmi: Acmi, args: argparse.Namespace) -> None:
    """Run one Lambda handler in-process with an event file, like `sam local invoke -e`:
    the handler is found the way SAM finds it, by the Handler path of its function's row
    (acmi_core.lambdas), and runs on this command's store."""
    import importlib
    from types import SimpleNamespace

    spec = function(args.function)
    with open(args.event, encoding="utf-8") as handle:
        event = json.load(handle)
    env = dict(os.environ)
    if not env.get("ACMI_API_KEY") and acmi.store.name == "memory":
        # the embedded store starts empty: accept the key the sample events carry
        env["ACMI_API_KEY"] = EXAMPLE_EVENT_KEY
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="acmi", description=__doc__.splitlines()[0])
    parser.add_argument("--tenant", help="tenant id (default: ACMI_DEFAULT_TENANT or 'default')")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Callable[[Acmi, argparse.Namespace], None], help_: str) -> Any:
        p = sub.add_parser(name, help=help_)
        p.set_defaults(func=func)
        return p

    add("demo", cmd_demo, "write an example entity and print its context")
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
    _add_keys(sub)
    _add_sources(sub)

    p = add("serve", cmd_serve, "run the HTTP API locally (uvicorn)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p = add("invoke", cmd_invoke, "run one Lambda handler with an event file")
    p.add_argument("function", choices=[spec.name for spec in FUNCTIONS])
    p.add_argument("--event", required=True, help="e.g. events/ingest.n8n.json")
    return parser


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
    p = srcs.add_parser("set", help="configure a source (auth and mapping)")
    p.set_defaults(func=cmd_sources_set)
    p.add_argument("source", help="make | n8n | gmail | generic, or <one>-<name>")
    p.add_argument("--hmac-secret-env", help="env var holding the HMAC secret (not argv)")
    p.add_argument("--push-token", action="store_true", help="mint a URL token for the source")
    p.add_argument("--oidc-audience", help="Gmail/Pub/Sub push: the token's audience")
    p.add_argument("--oidc-email", help="Gmail/Pub/Sub push: the service account email")
    p.add_argument("--entity", help="default entity for deliveries that name none")
    p.add_argument("--mapping", help='generic: JSON, e.g. {"entity": "customer.id"}')


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with create_acmi(tenant=args.tenant) as acmi:
            args.func(acmi, args)
    except AcmiError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    return 0

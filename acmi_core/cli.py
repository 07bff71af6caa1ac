"""The ``acmi`` command line (also ``python -m acmi_core``).

Backend from the environment: UPSTASH_REDIS_REST_URL + UPSTASH_REDIS_REST_TOKEN, or
ACMI_REDIS_URL, else the embedded store (which lives only as long as the process, so
use ``demo`` there).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from acmi_core import Acmi, AcmiError, create_acmi


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with create_acmi(tenant=args.tenant) as acmi:
            args.func(acmi, args)
    except AcmiError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    return 0

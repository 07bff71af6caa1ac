"""Traces: an OpenTelemetry span per HTTP request, per operation (on every surface: the
HTTP routes, the MCP tools, the CLI's store backend) and per scheduled job run, each
naming the tenant, the operation, the entities it names and what it cost in Redis
(round trips, commands, bytes sent and received).

Behind the ``traces`` extra (``opentelemetry-api``) and ``ACMI_TRACES`` (off by default).
Off, nothing here imports opentelemetry and each call is one settings check, so a cold
start and the Lambda path stay as they are (``python -m bench --only traces``). On, the
spans go to whatever tracer provider the process has: the one an application installs
(``opentelemetry-sdk`` and an exporter), or on Lambda the ADOT layer's; with none, the
API's no-op provider drops them. Never in a span: a key, a token, a query string or a
value written."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from acmi_core import __version__
from acmi_core.base.errors import AcmiError, StoreCommandError
from acmi_core.base.extras import install_hint
from acmi_core.store.base import Arg, Command, Reply, Script
from acmi_core.store.counting import CountingStore

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from acmi_core.base.settings import Settings
    from acmi_core.client.facade import Acmi

SCOPE: Final = "acmi"

# The params naming one entity each, and the one naming several: a span's entity count.
ONE_ENTITY: Final = frozenset({"entity", "agent", "owner", "to", "addressee"})
MANY_ENTITIES: Final = "entities"

# The operation whose span is open in this context: an operation one calls (a shape
# calling a row's core callable, a route's handler its row's) is inside it, not a span
# of its own. Copied into the worker thread a blocking call runs on.
_OPEN: ContextVar[str | None] = ContextVar("acmi_operation_span", default=None)


class MeasuringStore(CountingStore):
    """A :class:`CountingStore` that also adds up the bytes of what it sends (every
    argument) and receives (every bulk reply): a span's Redis cost."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.bytes_sent = 0
        self.bytes_received = 0

    def execute(self, command: Command) -> Reply:
        self.bytes_sent += _size(command)
        reply = super().execute(command)
        self.bytes_received += _size(reply)
        return reply

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        self.bytes_sent += sum(_size(c) for c in commands)
        replies = super().pipeline(commands)
        self.bytes_received += sum(_size(r) for r in replies if not isinstance(r, Exception))
        return replies

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        self.bytes_sent += _size(keys) + _size(args)
        reply = super().eval(script, keys, args)
        self.bytes_received += _size(reply)
        return reply


def _size(value: object) -> int:
    """The bytes of a command's arguments or a reply's bulk strings (integers as their
    digits), walked iteratively: a reply may nest."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bytes | bytearray | memoryview):
            total += len(item)
        elif isinstance(item, str):
            total += len(item.encode("utf-8", "surrogatepass"))
        elif isinstance(item, int | float):
            total += len(repr(item))
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return total


def enabled(settings: Settings) -> bool:
    return settings.traces


@functools.cache
def tracer() -> Tracer:
    """acmi's tracer from the process's provider (imported on the first traced call)."""
    try:
        from opentelemetry import trace
    except ImportError as exc:  # the setting names the extra it needs
        raise AcmiError(
            f"ACMI_TRACES is on but opentelemetry-api is not installed: {install_hint('traces')}"
        ) from exc
    return trace.get_tracer(SCOPE, __version__)


def entity_count(values: Mapping[str, Any]) -> int:
    """How many entities an operation's fields name (``entity``, ``agent``, ... one each;
    ``entities``, a list)."""
    count = sum(1 for name in ONE_ENTITY if values.get(name))
    many = values.get(MANY_ENTITIES)
    if isinstance(many, list | tuple):
        count += len(many)
    return count


@contextmanager
def operation_span(
    acmi: Acmi, operation: str, values: Mapping[str, Any] | None = None
) -> Iterator[Acmi]:
    """A span ``acmi.operation`` around one operation on ``acmi``'s tenant; yields the
    client to run it on: ``acmi`` itself when traces are off, else a view of it whose
    store measures what the operation costs (set on the span when it ends, raised or
    not)."""
    if not acmi.settings.traces or _OPEN.get() is not None:
        yield acmi
        return
    measuring = MeasuringStore(acmi.store)
    view = acmi.__class__(
        measuring, acmi.settings, tenant=acmi.tenant, clock=acmi.clock, bucket=acmi.keys.bucket
    )
    attributes: dict[str, str | int] = {
        "acmi.tenant": acmi.tenant,
        "acmi.operation": operation,
        "acmi.entities": entity_count(values or {}),
    }
    with tracer().start_as_current_span(f"acmi {operation}", attributes=attributes) as span:
        token = _OPEN.set(operation)
        try:
            yield view
        except AcmiError as exc:
            span.set_attribute("acmi.error", type(exc).__name__)
            raise
        finally:
            _OPEN.reset(token)
            cost(span, measuring)


def cost(span: Span, store: CountingStore) -> None:
    """What ``store`` passed to Redis, as the span's attributes."""
    span.set_attribute("acmi.round_trips", store.requests)
    span.set_attribute("acmi.commands", store.commands)
    if isinstance(store, MeasuringStore):
        span.set_attribute("acmi.bytes_sent", store.bytes_sent)
        span.set_attribute("acmi.bytes_received", store.bytes_received)


def traced_call(
    acmi: Acmi, operation: str, bind: Callable[[Acmi], Callable[..., Any]]
) -> Callable[..., Any]:
    """``bind``'s callable, run inside :func:`operation_span` on the measuring view (the
    CLI's store backend: a row's core callable bound on the client); inside an open span,
    the callable itself."""
    if _OPEN.get() is not None:
        return bind(acmi)

    def call(*args: Any, **kwargs: Any) -> Any:
        with operation_span(acmi, operation, kwargs) as view:
            return bind(view)(*args, **kwargs)

    return call


@contextmanager
def job_span(acmi: Acmi, job: str, store: CountingStore | None = None) -> Iterator[Span | None]:
    """A span around a scheduled job: with ``store`` (the run's counting store), one
    tenant's run (``acmi job <job>``, its cost read from the store when it ends); without,
    the whole invocation over its tenants (``acmi jobs <job>``). None when traces are off."""
    if not acmi.settings.traces:
        yield None
        return
    name = f"acmi job {job}" if store is not None else f"acmi jobs {job}"
    attributes = {"acmi.tenant": acmi.tenant, "acmi.job": job}
    with tracer().start_as_current_span(name, attributes=attributes) as span:
        try:
            yield span
        finally:
            if store is not None:
                cost(span, store)


__all__ = [
    "SCOPE",
    "MeasuringStore",
    "cost",
    "enabled",
    "entity_count",
    "job_span",
    "operation_span",
    "traced_call",
    "tracer",
]

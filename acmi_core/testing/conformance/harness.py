"""The harness: the check registry, the per-check :class:`Context`, the ``expect`` helpers,
outcomes, :class:`Report` and the runner. Checks live in the group modules beside this one.

One module: what a check may rely on (its registration, the Context it gets, with its
entities, keys, tenants and buckets, and how the runner reports it) is one contract a
backend author reads in one place; every group module imports it whole."""

from __future__ import annotations

import argparse
import logging
import re
import threading
import traceback
import uuid
import zlib
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, NoReturn, TypeVar

from acmi_core import create_acmi
from acmi_core.base.errors import AcmiValidationError, StoreCommandError, StoreUnavailable
from acmi_core.base.keys import (
    HITL_OPERATOR,
    HITL_SHARED,
    PINNED_CATEGORIES,
    TENANT_INDEXES,
    Keys,
    mentioned,
)
from acmi_core.base.model import EntityId, js_number
from acmi_core.client import Acmi
from acmi_core.entities import api as client
from acmi_core.store.base import Arg, Command, NoStore, Reply, Script
from acmi_core.store.writes import WritePlan

# --- checks and their registry --------------------------------------------------------------

CheckFn = Callable[["Context"], None]
RawWriter = Callable[[Command], object]
"""Runs one Redis command on the same data, outside the backend under test."""


@dataclass(frozen=True)
class Check:
    """One behaviour: ``run`` raises (usually :class:`ConformanceFailure`) when it does not
    hold, or :class:`CheckSkipped` (via :meth:`Context.skip`) when it cannot run here.

    ``store=False`` tags a store-independent check: it never touches the store (input
    rejected before any store call), so its outcome is the same on every backend and a
    caller testing several backends runs it once. It runs against a client whose store
    refuses every call, so a wrong tag fails loudly.
    """

    group: str
    name: str
    run: CheckFn
    store: bool = True

    @property
    def id(self) -> str:
        return f"{self.group}/{self.name}"


_REGISTRY: list[Check] = []


def check(group: str, name: str, *, store: bool = True) -> Callable[[CheckFn], CheckFn]:
    """Register a check under ``group/name`` (unique). ``store=False``: store-independent
    (see :class:`Check`)."""

    def register(fn: CheckFn) -> CheckFn:
        if any(c.group == group and c.name == name for c in _REGISTRY):
            raise ValueError(f"duplicate conformance check {group}/{name}")
        _REGISTRY.append(Check(group, name, fn, store))
        return fn

    return register


def registered() -> tuple[Check, ...]:
    """Every check registered so far, in registration order (the package's own first)."""
    return tuple(_REGISTRY)


# --- assertions -----------------------------------------------------------------------------


class ConformanceFailure(AssertionError):
    """The backend (or the core on top of it) broke the contract."""


class CheckSkipped(Exception):  # an outcome, not an error
    """The check cannot run in this setup (e.g. it needs a raw side door); ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


E = TypeVar("E", bound=BaseException)


def short(value: object, limit: int = 300) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _number_text(number: int | float) -> str:
    return str(number) if isinstance(number, int) else js_number(number)


def same_json(a: object, b: object) -> bool:
    """Equality as JSON carries values: numbers compare by their JSON.stringify text (3
    and 3.0 are one number; 12345678901234567 and 1.2345678901235e+16 are not), ``True``
    is no number, ``[] != {}``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return _number_text(a) == _number_text(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def expect(condition: object, message: str) -> None:
    if not condition:
        raise ConformanceFailure(message)


def _difference(actual: object, expected: object) -> str:
    """Where two unequal values differ, briefly (for big dicts and lists)."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        parts = []
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        changed = [k for k in expected if k in actual and not same_json(actual[k], expected[k])]
        if missing:
            parts.append(f"missing {len(missing)} key(s) {short(missing, 120)}")
        if extra:
            parts.append(f"unexpected key(s) {short(extra, 120)}")
        for k in changed[:3]:
            parts.append(f"[{k!r}] expected {short(expected[k], 120)}, got {short(actual[k], 120)}")
        return "; ".join(parts)
    if isinstance(actual, list) and isinstance(expected, list):
        if len(actual) != len(expected):
            return f"length {len(actual)}, expected {len(expected)}"
        for i, (x, y) in enumerate(zip(actual, expected, strict=True)):
            if not same_json(x, y):
                return f"[{i}] expected {short(y, 120)}, got {short(x, 120)}"
    return ""


def expect_equal(actual: object, expected: object, what: str) -> None:
    """``actual`` equals ``expected``, JSON types included (see :func:`same_json`)."""
    if not same_json(actual, expected):
        message = f"{what}: expected {short(expected)}, got {short(actual)}"
        difference = _difference(actual, expected)
        raise ConformanceFailure(f"{message} ({difference})" if difference else message)


def expect_raises(error: type[E], action: Callable[[], object], what: str) -> E:
    """``action`` raises ``error`` (returned); anything else, or success, is a failure."""
    try:
        action()
    except error as exc:
        return exc
    except Exception as exc:
        raise ConformanceFailure(
            f"{what}: expected {error.__name__}, got {type(exc).__name__}: {exc}"
        ) from exc
    raise ConformanceFailure(f"{what}: succeeded, expected {error.__name__}")


def expect_rejected(action: Callable[[], object], what: str) -> AcmiValidationError:
    """``action`` raises AcmiValidationError (a ValueError) naming a field and a rule."""
    exc = expect_raises(AcmiValidationError, action, what)
    expect(isinstance(exc, ValueError), f"{what}: AcmiValidationError is not a ValueError")
    expect(isinstance(exc.field, str) and exc.field, f"{what}: rejection has no .field")
    expect(isinstance(exc.rule, str) and exc.rule, f"{what}: rejection has no .rule")
    return exc


# --- the per-check context ------------------------------------------------------------------


def new_token() -> str:
    return uuid.uuid4().hex[:10]


class _NoStoreAccess(NoStore):
    """The store a store-independent check sees: every call is refused and recorded."""

    name = "none (store-independent check)"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def _refuse(self, what: str) -> StoreUnavailable:
        self.calls.append(what)
        return StoreUnavailable(f"a store-independent check may not use the store ({what})")

    def _fail(self) -> StoreUnavailable:
        return self._refuse("a store call")

    def execute(self, command: Command) -> Reply:
        raise self._refuse(" ".join(str(arg) for arg in list(command)[:2]))

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        raise self._refuse(f"a pipeline of {len(commands)} command(s)")

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        raise self._refuse("a script")


class Context:
    """What a check works with: the client, a fresh namespace, and cleanup.

    ``entity()`` hands out unique valid ids inside this context's namespace and ``key()``
    raw store keys; ``cleanup()`` deletes every one of them (entities on every tenant this
    context used). With ``store=False`` (a store-independent check) ``acmi`` is a client of
    the same tenant whose store refuses every call (:attr:`store_calls` lists them) and
    cleanup has nothing to do.
    """

    def __init__(
        self,
        acmi: Acmi,
        token: str | None = None,
        *,
        raw: RawWriter | None = None,
        store: bool = True,
    ) -> None:
        self._guard: _NoStoreAccess | None = None
        if not store:
            self._guard = _NoStoreAccess()
            acmi = Acmi(self._guard, acmi.settings, tenant=acmi.tenant, clock=acmi.clock)
            raw = None
        self.acmi = acmi
        self.raw = raw
        """A side door to the same data (e.g. a plain Redis connection), for writing bytes
        the backend's own transport cannot carry (Upstash REST is text only). Optional:
        checks that need it call :meth:`require_raw`, which skips them without one."""
        self.token = token or new_token()
        self.category = f"conf-{self.token}"
        """A category used by nobody else: for checks that read a whole category."""
        self._lock = threading.Lock()
        self._count = 0
        self._entities: list[str] = []
        self._keys: list[str] = []
        self._tenants: dict[str, Acmi] = {}

    @property
    def store_independent(self) -> bool:
        return self._guard is not None

    @property
    def store_calls(self) -> list[str]:
        """Store calls a store-independent context refused (always empty otherwise)."""
        return list(self._guard.calls) if self._guard is not None else []

    def _next(self) -> int:
        with self._lock:
            self._count += 1
            return self._count

    def entity(self, category: str = "user", name: str = "x", *, beside: str | None = None) -> str:
        """A fresh entity id, e.g. ``user:conf-1a2b3c4d5e-x-1``, deleted by cleanup().

        With B > 1 buckets (``ACMI_CLUSTER_BUCKETS``) every entity of one context is in
        one bucket, drawn from the token (so checks cover every bucket), or in the bucket
        of ``beside`` (an agent's: bucket 0): what one atomic write of several entities
        needs. A pinned category (``keys.PINNED_CATEGORIES``) is always in bucket 0."""
        keys = self.acmi.keys
        want = self.bucket if beside is None else keys.bucket_of(beside)
        while True:
            entity = f"{category}:conf-{self.token}-{name}-{self._next()}"
            EntityId.parse(entity)
            if category in PINNED_CATEGORIES or keys.bucket_of(entity) == want:
                return self.track(entity)

    @property
    def bucket(self) -> int:
        """The bucket this context's entities are in (0 when the tenant has one)."""
        return zlib.crc32(self.token.encode()) % self.acmi.keys.buckets

    def track(self, entity: str) -> str:
        """Have cleanup() delete an entity this context did not hand out itself."""
        with self._lock:
            self._entities.append(entity)
        return entity

    def key(self, name: str = "k") -> str:
        """A fresh raw store key in this context's namespace, deleted by cleanup():
        ``acmi:_conformance:{<token>}:<name>-<n>``. ACMI's bookkeeping prefix, which no
        entity key can equal; the ``{token}`` hash tag puts one context's keys in one
        Redis Cluster slot, so a script may touch several of them."""
        key = f"acmi:_conformance:{{{self.token}}}:{name}-{self._next()}"
        with self._lock:
            self._keys.append(key)
        return key

    def track_key(self, key: str) -> str:
        """Have cleanup() delete a key ACMI built itself (a lease, an index of the
        context's own tenant)."""
        with self._lock:
            self._keys.append(key)
        return key

    def tenant(self) -> Acmi:
        """The same store seen as another tenant, ``t-<token>``, unique to this context."""
        name = f"t-{self.token}"
        with self._lock:
            if name not in self._tenants:
                self._tenants[name] = self.acmi.for_tenant(name)
            return self._tenants[name]

    def skip(self, reason: str) -> NoReturn:
        """End the check as skipped: it cannot run in this setup, and ``reason`` says why."""
        raise CheckSkipped(reason)

    def require_raw(self, purpose: str) -> RawWriter:
        """The raw side door, or skip the check (``purpose``: what it would be used for)."""
        if self.raw is None:
            self.skip(
                f"needs a raw side door (run_conformance(..., raw=...)) to {purpose}; none given"
            )
        return self.raw

    def cleanup(self) -> None:
        with self._lock:
            entities, self._entities = self._entities, []
            keys, self._keys = self._keys, []
            clients = [self.acmi, *self._tenants.values()]
        if self._guard is not None:
            return  # the store refused every call: nothing was written
        for acmi in clients:
            for entity in entities:
                acmi.delete(entity)
        for acmi in clients:  # the mentions its coordination events indexed go with them
            thread = acmi.keys.coordination_timeline()
            if thread in keys:
                members = acmi.store.execute(("ZRANGE", thread, 0, -1))
                assert isinstance(members, list)
                for member in members:
                    if isinstance(member, bytes):
                        text = member.decode("utf-8", "replace")
                        for local in mentioned(text):
                            acmi.store.execute(("DEL", acmi.keys.mentions(local)))
        for key in keys:
            self.acmi.store.execute(("DEL", key))
        for tenant in self._tenants:  # its own tenants leave the indexes of tenants with work
            settings = self.acmi.settings
            own = Keys(
                tenant, settings.default_tenant, self.acmi.keys.layout, settings.buckets_for(tenant)
            )
            for kind in TENANT_INDEXES:  # in the cluster layout, the tenant's own marks
                for view in own.every_bucket():  # one per bucket
                    self.acmi.store.execute(("ZREM", view.tenants_with(kind), tenant))
        # the tenant under test keeps its HITL marks only for the items still open
        queues = {
            HITL_SHARED: self.acmi.keys.hitl_queue(None, "open"),
            HITL_OPERATOR: self.acmi.keys.hitl_queue(
                EntityId.parse(self.acmi.settings.operator), "open"
            ),
        }
        plan = WritePlan()
        for kind, queue in queues.items():
            plan.zhead(self.acmi.keys.tenants_with(kind), self.acmi.tenant, queue)
        plan.apply(self.acmi.store)

    def __enter__(self) -> Context:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


# --- outcomes and reports -------------------------------------------------------------------

Status = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True)
class Outcome:
    """What running one check gave: ``message`` says why it failed or was skipped."""

    check: Check
    status: Status
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"


@dataclass
class Report:
    """Checks run (passed, failed, skipped with a reason) and checks not selected."""

    passed: list[Check] = field(default_factory=list)
    failed: list[tuple[Check, str]] = field(default_factory=list)
    skipped: list[tuple[Check, str]] = field(default_factory=list)
    not_selected: list[Check] = field(default_factory=list)
    """Left out by the caller (``groups=``, ``store_independent=False``): not run, not counted."""

    def add(self, outcome: Outcome) -> None:
        if outcome.passed:
            self.passed.append(outcome.check)
        elif outcome.skipped:
            self.skipped.append((outcome.check, outcome.message))
        else:
            self.failed.append((outcome.check, outcome.message))

    @property
    def total(self) -> int:
        """Checks run: passed + failed + skipped."""
        return len(self.passed) + len(self.failed) + len(self.skipped)

    @property
    def ok(self) -> bool:
        """No check failed (skipped ones do not count against it)."""
        return not self.failed

    def __str__(self) -> str:
        head = f"{len(self.passed)} passed, {len(self.failed)} failed, {len(self.skipped)} skipped"
        if self.not_selected:
            head += f" ({len(self.not_selected)} not selected)"
        lines = [head]
        lines += [f"FAILED {c.id}: {message}" for c, message in self.failed]
        lines += [f"SKIPPED {c.id}: {reason}" for c, reason in self.skipped]
        return "\n".join(lines)


# --- running --------------------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" (at {last.filename}:{last.lineno} in {last.name})"
    return text


def _touched(ctx: Context) -> ConformanceFailure | None:
    calls = ctx.store_calls
    if not calls:
        return None
    return ConformanceFailure(
        f"a store-independent check used the store ({len(calls)} call(s), first: "
        f"{calls[0]}): tag it store=True, or reject the input before any store call"
    )


def execute_check(chk: Check, acmi: Acmi, *, raw: RawWriter | None = None) -> None:
    """Run one check in a fresh Context and clean up; raise what it raises.

    :class:`ConformanceFailure` (or the backend's own error) when it failed,
    :class:`CheckSkipped` when it could not run here; returns when it passed. For test
    runners that want the traceback; :func:`run_check` turns this into an :class:`Outcome`.
    """
    ctx = Context(acmi, raw=raw, store=chk.store)
    try:
        chk.run(ctx)
    except CheckSkipped:
        _finish(ctx)
        raise
    except Exception as exc:
        with suppress(Exception):  # the check's own failure is the news
            ctx.cleanup()
        touched = _touched(ctx)
        if touched is not None:
            raise touched from exc
        raise
    _finish(ctx)


def _finish(ctx: Context) -> None:
    touched = _touched(ctx)
    if touched is not None:
        raise touched
    try:
        ctx.cleanup()
    except Exception as exc:
        raise ConformanceFailure(f"cleanup failed: {_describe(exc)}") from exc


def run_check(chk: Check, acmi: Acmi, *, raw: RawWriter | None = None) -> Outcome:
    """Run one check in a fresh Context, then clean up; never raises for the check."""
    try:
        execute_check(chk, acmi, raw=raw)
    except CheckSkipped as exc:
        return Outcome(chk, "skipped", exc.reason)
    except ConformanceFailure as exc:
        return Outcome(chk, "failed", str(exc))
    except Exception as exc:
        return Outcome(chk, "failed", _describe(exc))
    return Outcome(chk, "passed")


def select_checks(
    checks: Iterable[Check] | None = None,
    *,
    groups: Iterable[str] | str | None = None,
    store_dependent: bool = True,
    store_independent: bool = True,
) -> tuple[list[Check], list[Check]]:
    """``(selected, not selected)`` among ``checks`` (default: every registered check).

    ``groups``: only these groups (unknown names raise ValueError naming the known ones);
    ``store_dependent`` / ``store_independent``: whether to keep each kind (see :class:`Check`).
    """
    candidates = list(registered() if checks is None else checks)
    wanted: set[str] | None = None
    if groups is not None:
        wanted = {groups} if isinstance(groups, str) else set(groups)
        known = {c.group for c in registered()} | {c.group for c in candidates}
        unknown = wanted - known
        if unknown:
            raise ValueError(
                f"unknown conformance group(s) {', '.join(sorted(unknown))}; "
                f"known groups: {', '.join(sorted(known))}"
            )
    selected: list[Check] = []
    left_out: list[Check] = []
    for chk in candidates:
        keep = (wanted is None or chk.group in wanted) and (
            store_dependent if chk.store else store_independent
        )
        (selected if keep else left_out).append(chk)
    return selected, left_out


def run_conformance(
    acmi: Acmi,
    checks: Iterable[Check] | None = None,
    *,
    raw: RawWriter | None = None,
    groups: Iterable[str] | str | None = None,
    store_independent: bool = True,
) -> Report:
    """Run the checks (default: every registered one) and report; never raises for a check.

    ``raw``: see :attr:`Context.raw`. ``groups``: only these groups (unknown names raise
    ValueError). ``store_independent=False`` leaves out the store-independent checks (they
    show as "not selected"): run them once, not once per backend.
    """
    selected, left_out = select_checks(checks, groups=groups, store_independent=store_independent)
    report = Report(not_selected=left_out)
    own_corruptions = _OwnCorruptions()
    client.log.addFilter(own_corruptions)
    try:
        for chk in selected:
            report.add(run_check(chk, acmi, raw=raw))
    finally:
        client.log.removeFilter(own_corruptions)
    return report


# A key of an entity the checks made (Context.entity: ``<category>:conf-<token>-<name>-<n>``).
_CHECK_ENTITY_KEY = re.compile(r":conf-[0-9a-f]{10}-")


class _OwnCorruptions(logging.Filter):
    """Drops the client's warnings about the entities the checks corrupted on purpose (the
    tolerance group stores unreadable timeline members, then reads them): expected here,
    not news. Any other record, e.g. about a user's own entity, passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        key = getattr(record, "key", None)
        return not (isinstance(key, str) and _CHECK_ENTITY_KEY.search(key))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m acmi_core.testing.conformance``: run the suite against the store the
    environment selects, print the report; exit status 1 on any failure."""
    parser = argparse.ArgumentParser(
        prog="python -m acmi_core.testing.conformance",
        description="Run the ACMI conformance suite against the store the environment "
        "selects (UPSTASH_REDIS_REST_URL + UPSTASH_REDIS_REST_TOKEN, ACMI_REDIS_URL, "
        "else the embedded store).",
    )
    parser.add_argument(
        "-g",
        "--group",
        action="append",
        dest="groups",
        metavar="GROUP",
        help="run only this group (repeatable); default: every group",
    )
    parser.add_argument(
        "--no-store-independent",
        action="store_true",
        help="leave out the checks that never touch the store (run them once elsewhere)",
    )
    args = parser.parse_args(argv)
    try:
        select_checks(groups=args.groups)  # an unknown group: a usage error, before connecting
    except ValueError as exc:
        parser.error(str(exc))
    acmi = create_acmi()
    try:
        # run_conformance drops the client's warnings about its own deliberate corruptions
        report = run_conformance(
            acmi, groups=args.groups, store_independent=not args.no_store_independent
        )
    finally:
        acmi.close()
    print(f"conformance on {acmi.store.name}: {report}")
    return 0 if report.ok else 1

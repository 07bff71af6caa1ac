"""The ACMI conformance suite: the behaviours every ACMI store backend must show.

Plain Python (no pytest), so anyone writing a backend can run it::

    from acmi_core import Settings, create_acmi
    from acmi_core.testing.conformance import run_conformance

    report = run_conformance(create_acmi(MyStore(), Settings()))
    print(report)                      # "101 passed, 0 failed", then one line per failure

or from a shell, against the store the environment selects::

    python -m acmi_core.testing.conformance

It covers the reference suite's 35 behaviours and closes its gaps (see REFERENCE.md):
key and id lengths, non-object profiles, enums, copies, unknown event fields, concurrent
writers, equal-ts ordering, batch atomicity, corrupt stored members, JSON exactness,
tenants, list/delete/get.

Every check runs in its own :class:`Context`: it writes only to fresh entities inside a
per-run namespace (``user:conf-<token>-<name>-<n>``, categories ``conf-<token>``, tenant
``t-<token>``) and deletes them afterwards, so the suite passes on a non-empty store and
can be re-run. Checks use :func:`expect` helpers rather than ``assert`` (``python -O``
strips asserts). Adding a check: write ``def f(ctx: Context) -> None`` and decorate it
with ``@check("group", "what it shows")``.
"""

from __future__ import annotations

import json
import threading
import traceback
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from types import TracebackType
from typing import Any, Final, TypeVar

from acmi_core import create_acmi
from acmi_core.client import Acmi, Events
from acmi_core.errors import AcmiValidationError, CorruptData, StoreCommandError
from acmi_core.model import EntityId, Event
from acmi_core.store.base import Command

__all__ = [
    "CHECKS",
    "Check",
    "ConformanceFailure",
    "Context",
    "RawWriter",
    "Report",
    "check",
    "expect",
    "expect_equal",
    "expect_raises",
    "expect_rejected",
    "main",
    "run_check",
    "run_conformance",
    "run_together",
    "same_json",
]

# --- checks and their registry --------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One behaviour: ``run`` raises (usually :class:`ConformanceFailure`) when it does not hold."""

    group: str
    name: str
    run: Callable[[Context], None]

    @property
    def id(self) -> str:
        return f"{self.group}/{self.name}"


CheckFn = Callable[["Context"], None]
RawWriter = Callable[[Command], object]
"""Runs one Redis command on the same data, outside the backend under test."""
_REGISTRY: list[Check] = []


def check(group: str, name: str) -> Callable[[CheckFn], CheckFn]:
    """Register a check under ``group/name`` (unique)."""

    def register(fn: CheckFn) -> CheckFn:
        if any(c.group == group and c.name == name for c in _REGISTRY):
            raise ValueError(f"duplicate conformance check {group}/{name}")
        _REGISTRY.append(Check(group, name, fn))
        return fn

    return register


# --- assertions -----------------------------------------------------------------------------


class ConformanceFailure(AssertionError):
    """The backend (or the core on top of it) broke the contract."""


E = TypeVar("E", bound=BaseException)


def _short(value: object, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def same_json(a: object, b: object) -> bool:
    """Equality that also compares JSON types: ``1 != 1.0 != True``, ``[] != {}``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return type(a) is type(b) and a == b
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
            parts.append(f"missing {len(missing)} key(s) {_short(missing, 120)}")
        if extra:
            parts.append(f"unexpected key(s) {_short(extra, 120)}")
        for k in changed[:3]:
            parts.append(
                f"[{k!r}] expected {_short(expected[k], 120)}, got {_short(actual[k], 120)}"
            )
        return "; ".join(parts)
    if isinstance(actual, list) and isinstance(expected, list):
        if len(actual) != len(expected):
            return f"length {len(actual)}, expected {len(expected)}"
        for i, (x, y) in enumerate(zip(actual, expected, strict=True)):
            if not same_json(x, y):
                return f"[{i}] expected {_short(y, 120)}, got {_short(x, 120)}"
    return ""


def expect_equal(actual: object, expected: object, what: str) -> None:
    """``actual`` equals ``expected``, JSON types included (see :func:`same_json`)."""
    if not same_json(actual, expected):
        message = f"{what}: expected {_short(expected)}, got {_short(actual)}"
        difference = _difference(actual, expected)
        raise ConformanceFailure(f"{message} ({difference})" if difference else message)


def expect_raises(error: type[E], action: Callable[[], object], what: str) -> E:
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


class Context:
    """What a check works with: the client, a fresh namespace, and cleanup.

    ``entity()`` hands out unique valid ids inside this context's namespace;
    ``cleanup()`` deletes every one of them (on every tenant this context used).
    """

    def __init__(
        self, acmi: Acmi, token: str | None = None, *, raw: RawWriter | None = None
    ) -> None:
        self.acmi = acmi
        self.raw = raw
        """A side door to the same data (e.g. a plain Redis connection), for writing bytes
        the backend's own transport cannot carry (Upstash REST is text only). Optional."""
        self.token = token or new_token()
        self.category = f"conf-{self.token}"
        """A category used by nobody else: for checks that read a whole category."""
        self._lock = threading.Lock()
        self._count = 0
        self._entities: list[str] = []
        self._tenants: dict[str, Acmi] = {}

    def entity(self, category: str = "user", name: str = "x") -> str:
        """A fresh entity id, e.g. ``user:conf-1a2b3c4d5e-x-1``, deleted by cleanup()."""
        with self._lock:
            self._count += 1
            entity = f"{category}:conf-{self.token}-{name}-{self._count}"
        EntityId.parse(entity)
        return self.track(entity)

    def track(self, entity: str) -> str:
        """Have cleanup() delete an entity this context did not hand out itself."""
        with self._lock:
            self._entities.append(entity)
        return entity

    def tenant(self) -> Acmi:
        """The same store seen as another tenant, ``t-<token>``, unique to this context."""
        name = f"t-{self.token}"
        with self._lock:
            if name not in self._tenants:
                self._tenants[name] = self.acmi.for_tenant(name)
            return self._tenants[name]

    def cleanup(self) -> None:
        with self._lock:
            entities, self._entities = self._entities, []
            clients = [self.acmi, *self._tenants.values()]
        for acmi in clients:
            for entity in entities:
                acmi.delete(entity)

    def __enter__(self) -> Context:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


# --- running --------------------------------------------------------------------------------


@dataclass
class Report:
    passed: list[Check] = field(default_factory=list)
    failed: list[tuple[Check, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.passed) + len(self.failed)

    @property
    def ok(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        lines = [f"{len(self.passed)} passed, {len(self.failed)} failed"]
        lines += [f"FAILED {c.id}: {message}" for c, message in self.failed]
        return "\n".join(lines)


def _describe(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" (at {last.filename}:{last.lineno} in {last.name})"
    return text


def run_check(chk: Check, acmi: Acmi, *, raw: RawWriter | None = None) -> str | None:
    """Run one check in a fresh Context, then clean up. None when it passed, else why not."""
    ctx = Context(acmi, raw=raw)
    failure: str | None = None
    try:
        chk.run(ctx)
    except ConformanceFailure as exc:
        failure = str(exc)
    except Exception as exc:
        failure = _describe(exc)
    try:
        ctx.cleanup()
    except Exception as exc:
        if failure is None:
            failure = f"cleanup failed: {_describe(exc)}"
    return failure


def run_conformance(
    acmi: Acmi, checks: Iterable[Check] | None = None, *, raw: RawWriter | None = None
) -> Report:
    """Run every check (default: all of :data:`CHECKS`); never raises for a failed check.
    ``raw``: see :attr:`Context.raw`."""
    report = Report()
    for chk in CHECKS if checks is None else checks:
        failure = run_check(chk, acmi, raw=raw)
        if failure is None:
            report.passed.append(chk)
        else:
            report.failed.append((chk, failure))
    return report


# --- helpers for the checks -----------------------------------------------------------------

BASE_TS: Final = 1_700_000_000_000


def make_event(n: int = 1, /, **fields: Any) -> dict[str, Any]:
    """A valid Comms v1.1 event; ``fields`` override or add (``ts=`` included)."""
    event: dict[str, Any] = {
        "source": "agent:conformance",
        "kind": "note",
        "correlationId": f"conf-c-{n}",
        "summary": f"event {n}",
    }
    event.update(fields)
    return event


def _ts(events: Sequence[Event]) -> list[Any]:
    return [e.ts for e in events]


def _cids(events: Sequence[Event]) -> list[Any]:
    return [e.correlationId for e in events]


def _append_at(acmi: Acmi, entity: str, stamps: Iterable[int | float]) -> None:
    for n, ts in enumerate(stamps):
        acmi.timeline.append(entity, make_event(n, ts=ts, summary=f"at {ts}"))


def _raw_json(acmi: Acmi, key: str) -> Any:
    raw = acmi.store.execute(("GET", key))
    if not isinstance(raw, bytes):
        raise ConformanceFailure(f"raw GET {key}: expected a string, got {_short(raw)}")
    return json.loads(raw.decode("utf-8"))


def _raw_members(acmi: Acmi, key: str) -> list[Any]:
    raw = acmi.store.execute(("ZRANGE", key, 0, -1))
    if not isinstance(raw, list):
        raise ConformanceFailure(f"raw ZRANGE {key}: expected an array, got {_short(raw)}")
    return [json.loads(m.decode("utf-8")) for m in raw if isinstance(m, bytes)]


def _keys(acmi: Acmi, entity: str) -> tuple[str, str, str]:
    eid = EntityId.parse(entity)
    return acmi.keys.profile(eid), acmi.keys.signals(eid), acmi.keys.timeline(eid)


def _exists(acmi: Acmi, key: str) -> bool:
    return acmi.store.execute(("EXISTS", key)) == 1


def _expect_empty(acmi: Acmi, entity: str, what: str) -> None:
    expect_equal(acmi.profile.get(entity), None, f"{what}: profile")
    expect_equal(acmi.signals.all(entity), {}, f"{what}: signals")
    expect_equal(acmi.timeline.size(entity), 0, f"{what}: timeline size")


def _profile(acmi: Acmi, entity: str, doc: dict[str, Any]) -> dict[str, Any]:
    """What a stored profile of ``entity`` looks like after auto-fill."""
    filled = dict(doc)
    category = EntityId.parse(entity).category
    if category in ("user", "agent"):
        filled.setdefault("actor_type", "human" if category == "user" else "agent")
    filled.setdefault("tenant_id", acmi.tenant)
    return filled


def run_together(count: int, work: Callable[[int], object]) -> None:
    """Run ``work(i)`` for i in range(count) on ``count`` threads released together by a
    barrier; the first exception is raised, and a hung thread fails within 60 s."""
    barrier = threading.Barrier(count)

    def job(i: int) -> object:
        barrier.wait(timeout=30)
        return work(i)

    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(job, i) for i in range(count)]
        for future in futures:
            future.result(timeout=60)


# JSON that lossy encoders break: Redis cjson turns [] into {} and 12345678901234567 into
# 1.2345678901235e+16; naive scanners trip on braces, quotes or escapes inside strings.
TRICKY_JSON: Final[dict[str, Any]] = {
    "empty_array": [],
    "empty_object": {},
    "big_int": 12345678901234567,
    "big_negative": -9007199254740993,
    "floats": [0.1, 1e-07, -2.5, 1.5e300, 0.0],
    "unicode": "héllo wörld, 日本語, emoji 🎉👩‍💻, line sep \u2028 para sep \u2029",
    "escapes": 'quote " backslash \\ slash / newline \n tab \t cr \r nul \u0000 bell \u0007',
    "braces_in_strings": '{not: [an, "object"]} "}" ] , :',
    "nested": {"a": [[], {}, [{}], {"b": []}], "n": None, "t": True, "f": False},
}

TRICKY_NAMES: Final = ('quo"te', "back\\slash", "emoji 🎉", "brace}{]", "line\nbreak", "\u2028")

NOT_OBJECTS: Final[tuple[Any, ...]] = (None, [], [{"a": 1}], "a string", 42, True)

# --- profile ---------------------------------------------------------------------------------


@check("profile", "missing profile is None")
def profile_missing(ctx: Context) -> None:
    expect_equal(ctx.acmi.profile.get(ctx.entity()), None, "profile.get of an unwritten entity")


@check("profile", "set/get round-trip with actor_type and tenant_id auto-filled")
def profile_round_trip(ctx: Context) -> None:
    acmi = ctx.acmi
    for category, actor_type in (("user", "human"), ("agent", "agent")):
        entity = ctx.entity(category)
        doc = {"name": "Mikey", "age": 3, "tags": ["a", "b"]}
        expected = {**doc, "actor_type": actor_type, "tenant_id": acmi.tenant}
        returned = acmi.profile.set(entity, doc)
        expect_equal(returned, expected, f"profile.set({category}:...) return value")
        expect_equal(acmi.profile.get(entity), expected, f"profile.get({category}:...)")
    other = ctx.entity("deal")
    acmi.profile.set(other, {"stage": "won"})
    stored = acmi.profile.get(other) or {}
    expect_equal(stored.get("tenant_id"), acmi.tenant, "tenant_id auto-fill on a deal:")
    expect_equal(stored.get("stage"), "won", "deal profile field")


@check("profile", "set overwrites the whole profile")
def profile_set_overwrites(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.profile.set(entity, {"a": 1, "b": 2})
    ctx.acmi.profile.set(entity, {"c": 3})
    expect_equal(ctx.acmi.profile.get(entity), _profile(ctx.acmi, entity, {"c": 3}), "profile")


@check("profile", "merge combines shallowly, returns and persists the result")
def profile_merge(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.profile.set(entity, {"a": 1, "b": {"x": 1}})
    merged = ctx.acmi.profile.merge(entity, {"b": {"y": 2}, "c": 3})
    expected = _profile(ctx.acmi, entity, {"a": 1, "b": {"y": 2}, "c": 3})
    expect_equal(merged, expected, "profile.merge return value")
    expect_equal(ctx.acmi.profile.get(entity), expected, "profile after merge")


@check("profile", "merge on a missing profile creates it")
def profile_merge_creates(ctx: Context) -> None:
    entity = ctx.entity("agent")
    ctx.acmi.profile.merge(entity, {"a": 1})
    expected = _profile(ctx.acmi, entity, {"a": 1})
    expect_equal(ctx.acmi.profile.get(entity), expected, "profile created by merge")


@check("profile", "delete removes the profile and only the profile")
def profile_delete(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.profile.set(entity, {"a": 1})
    acmi.signals.set(entity, "s", 1)
    acmi.timeline.append(entity, make_event())
    acmi.profile.delete(entity)
    expect_equal(acmi.profile.get(entity), None, "profile after delete")
    expect_equal(acmi.signals.all(entity), {"s": 1}, "signals after profile.delete")
    expect_equal(acmi.timeline.size(entity), 1, "timeline size after profile.delete")
    acmi.profile.delete(entity)  # deleting a missing profile is a no-op


@check("profile", "reads and writes are copies")
def profile_copies(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    doc: dict[str, Any] = {"name": "n", "list": [1], "obj": {"k": "v"}}
    returned = acmi.profile.set(entity, doc) or {}
    expected = _profile(acmi, entity, {"name": "n", "list": [1], "obj": {"k": "v"}})
    doc["name"] = "changed input"
    doc["list"].append(2)
    returned["name"] = "changed return"
    read = acmi.profile.get(entity) or {"list": [], "obj": {}}
    read["name"] = "changed read"
    read["list"].append(3)
    read["obj"]["k"] = "changed nested"
    read["new"] = True
    expect_equal(acmi.profile.get(entity), expected, "profile after mutating dicts")


# --- signals ---------------------------------------------------------------------------------


@check("signals", "missing signal is None")
def signals_missing(ctx: Context) -> None:
    entity = ctx.entity()
    expect_equal(ctx.acmi.signals.get(entity, "nope"), None, "signal of an unwritten entity")
    ctx.acmi.signals.set(entity, "other", 1)
    expect_equal(ctx.acmi.signals.get(entity, "nope"), None, "missing signal beside another")


@check("signals", "missing signal returns the given default")
def signals_default(ctx: Context) -> None:
    entity, sentinel = ctx.entity(), object()
    expect(ctx.acmi.signals.get(entity, "nope", sentinel) is sentinel, "default not returned")
    expect_equal(ctx.acmi.signals.get(entity, "nope", default="d"), "d", "default")
    ctx.acmi.signals.set(entity, "null", None)
    expect_equal(
        ctx.acmi.signals.get(entity, "null", default="d"), None, "a stored null is not missing"
    )


@check("signals", "primitives round-trip: str, int, float, bool, null")
def signals_primitives(ctx: Context) -> None:
    entity = ctx.entity()
    values: dict[str, Any] = {
        "str": "text",
        "empty_str": "",
        "int": 42,
        "negative": -7,
        "zero": 0,
        "float": 3.25,
        "true": True,
        "false": False,
        "null": None,
    }
    for key, value in values.items():
        ctx.acmi.signals.set(entity, key, value)
    for key, value in values.items():
        expect_equal(ctx.acmi.signals.get(entity, key, "MISSING"), value, f"signal {key}")
    expect_equal(ctx.acmi.signals.all(entity), values, "signals.all()")


@check("signals", "nested objects and arrays round-trip")
def signals_nested(ctx: Context) -> None:
    entity = ctx.entity()
    value = {"list": [1, "two", {"three": [3.0, None]}], "obj": {"a": {"b": {"c": []}}}}
    ctx.acmi.signals.set(entity, "nested", value)
    ctx.acmi.signals.set(entity, "array", [[1, 2], [], [{}]])
    expect_equal(ctx.acmi.signals.get(entity, "nested"), value, "nested object signal")
    expect_equal(ctx.acmi.signals.get(entity, "array"), [[1, 2], [], [{}]], "array signal")


@check("signals", "set overwrites one key")
def signals_overwrite(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.signals.set(entity, "k", {"old": True})
    ctx.acmi.signals.set(entity, "k", "new")
    expect_equal(ctx.acmi.signals.all(entity), {"k": "new"}, "signals after overwrite")


@check("signals", "all() is the flat key -> value map")
def signals_all(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.signals.set(entity, "a", 1)
    ctx.acmi.signals.set(entity, "b", {"c": 2})
    ctx.acmi.signals.update(entity, {"d": [3], "e": "four"})
    expected = {"a": 1, "b": {"c": 2}, "d": [3], "e": "four"}
    expect_equal(ctx.acmi.signals.all(entity), expected, "signals.all()")


@check("signals", "all() with no signals is {}")
def signals_all_empty(ctx: Context) -> None:
    entity = ctx.entity()
    expect_equal(ctx.acmi.signals.all(entity), {}, "signals.all() of an unwritten entity")
    ctx.acmi.profile.set(entity, {"a": 1})
    expect_equal(ctx.acmi.signals.all(entity), {}, "signals.all() beside a profile")


@check("signals", "delete removes one key and keeps the others")
def signals_delete(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.signals.update(entity, {"a": 1, "b": 2, "c": 3})
    ctx.acmi.signals.delete(entity, "b")
    expect_equal(ctx.acmi.signals.all(entity), {"a": 1, "c": 3}, "signals after delete")
    ctx.acmi.signals.delete(entity, "never-set")  # a no-op
    expect_equal(ctx.acmi.signals.all(entity), {"a": 1, "c": 3}, "after deleting a missing key")


@check("signals", "update sets several keys at once and keeps the others")
def signals_update(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.signals.set(entity, "keep", 0)
    ctx.acmi.signals.update(entity, {"a": 1, "b": [2]})
    ctx.acmi.signals.update(entity, {"a": "one"})
    expected = {"keep": 0, "a": "one", "b": [2]}
    expect_equal(ctx.acmi.signals.all(entity), expected, "signals after update")


@check("signals", "reads and writes are copies")
def signals_copies(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    value: dict[str, Any] = {"list": [1], "obj": {"k": "v"}}
    acmi.signals.set(entity, "v", value)
    value["list"].append("changed input")
    got = acmi.signals.get(entity, "v")
    got["obj"]["k"] = "changed get"
    everything = acmi.signals.all(entity)
    everything["v"]["list"].append("changed all")
    everything["new"] = 1
    expected = {"v": {"list": [1], "obj": {"k": "v"}}}
    expect_equal(acmi.signals.all(entity), expected, "signals after mutating dicts")


@check("signals", "keys of 1 and 128 characters are accepted")
def signals_key_length_ok(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.signals.set(entity, "k", 1)
    ctx.acmi.signals.set(entity, "k" * 128, 2)
    expect_equal(ctx.acmi.signals.all(entity), {"k": 1, "k" * 128: 2}, "signals")


@check("signals", "keys of 0 and 129 characters are rejected, nothing stored")
def signals_key_length_rejected(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for key in ("", "k" * 129):
        label = f"signal key of {len(key)} characters"
        expect_rejected(partial(acmi.signals.set, entity, key, 1), f"signals.set: {label}")
        expect_rejected(partial(acmi.signals.update, entity, {key: 1}), f"update: {label}")
        expect_rejected(partial(acmi.signals.get, entity, key), f"signals.get: {label}")
        expect_rejected(partial(acmi.signals.delete, entity, key), f"delete: {label}")
    expect_rejected(lambda: acmi.signals.update(entity, {"ok": 1, "": 2}), "update, one bad key")
    expect_equal(acmi.signals.all(entity), {}, "signals after rejected writes")


# --- timeline --------------------------------------------------------------------------------


@check("timeline", "append/read round-trip")
def timeline_round_trip(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    event = make_event(1, ts=BASE_TS)
    stored = acmi.timeline.append(entity, event)
    for name, value in event.items():
        expect_equal(stored.to_dict().get(name), value, f"appended event's {name}")
    events = acmi.timeline.read(entity)
    expect_equal(len(events), 1, "number of events read")
    expect_equal(events[0].to_dict(), stored.to_dict(), "event read back")
    expect(isinstance(events, Events), "timeline.read must return Events")
    expect_equal(events.skipped, [], "skipped members")


@check("timeline", "ts is auto-filled with now in ms")
def timeline_ts_autofill(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    before = acmi.clock()
    stored = acmi.timeline.append(entity, make_event())
    after = acmi.clock()
    expect(before <= stored.ts <= after, f"auto ts {stored.ts} not within [{before}, {after}]")
    events = acmi.timeline.read(entity)
    expect_equal(_ts(events), [stored.ts], "stored ts")


@check("timeline", "read is chronological regardless of insert order")
def timeline_chronological(ctx: Context) -> None:
    entity = ctx.entity()
    _append_at(ctx.acmi, entity, [BASE_TS + 3, BASE_TS + 1, BASE_TS + 5, BASE_TS + 2])
    expected = [BASE_TS + 1, BASE_TS + 2, BASE_TS + 3, BASE_TS + 5]
    expect_equal(_ts(ctx.acmi.timeline.read(entity)), expected, "read order")


@check("timeline", "reverse reads newest first")
def timeline_reverse(ctx: Context) -> None:
    entity = ctx.entity()
    _append_at(ctx.acmi, entity, [BASE_TS + 2, BASE_TS + 1, BASE_TS + 3])
    expected = [BASE_TS + 3, BASE_TS + 2, BASE_TS + 1]
    expect_equal(_ts(ctx.acmi.timeline.read(entity, reverse=True)), expected, "reverse order")


@check("timeline", "limit returns the oldest N, oldest first")
def timeline_limit(ctx: Context) -> None:
    entity = ctx.entity()
    _append_at(ctx.acmi, entity, [BASE_TS + i for i in (5, 1, 4, 2, 3)])
    got = _ts(ctx.acmi.timeline.read(entity, limit=2))
    expect_equal(got, [BASE_TS + 1, BASE_TS + 2], "read(limit=2)")
    got = _ts(ctx.acmi.timeline.read(entity, limit=10))
    expect_equal(got, [BASE_TS + i for i in range(1, 6)], "read(limit above size)")


@check("timeline", "since_ms is inclusive")
def timeline_since(ctx: Context) -> None:
    entity = ctx.entity()
    _append_at(ctx.acmi, entity, [BASE_TS + 1000, BASE_TS + 2000, BASE_TS + 3000])
    got = _ts(ctx.acmi.timeline.read(entity, since_ms=BASE_TS + 2000))
    expect_equal(got, [BASE_TS + 2000, BASE_TS + 3000], "read(since_ms=2nd ts)")


@check("timeline", "until_ms is inclusive")
def timeline_until(ctx: Context) -> None:
    entity = ctx.entity()
    _append_at(ctx.acmi, entity, [BASE_TS + 1000, BASE_TS + 2000, BASE_TS + 3000])
    got = _ts(ctx.acmi.timeline.read(entity, until_ms=BASE_TS + 2000))
    expect_equal(got, [BASE_TS + 1000, BASE_TS + 2000], "read(until_ms=2nd ts)")


@check("timeline", "since, until, reverse and limit combine")
def timeline_combined(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    _append_at(acmi, entity, [BASE_TS + i for i in (9, 0, 8, 1, 7, 2, 6, 3, 5, 4)])
    low, high = BASE_TS + 2, BASE_TS + 7

    def read(**kw: Any) -> list[Any]:
        return [ts - BASE_TS for ts in _ts(acmi.timeline.read(entity, **kw))]

    expect_equal(read(since_ms=low, until_ms=high), [2, 3, 4, 5, 6, 7], "since+until")
    expect_equal(read(since_ms=low, until_ms=high, limit=3), [2, 3, 4], "since+until+limit")
    expect_equal(
        read(since_ms=low, until_ms=high, reverse=True), [7, 6, 5, 4, 3, 2], "since+until+reverse"
    )
    expect_equal(
        read(since_ms=low, until_ms=high, reverse=True, limit=3), [7, 6, 5], "all four combined"
    )
    expect_equal(read(reverse=True, limit=2), [9, 8], "reverse+limit")
    expect_equal(read(since_ms=BASE_TS + 4, limit=2), [4, 5], "since+limit")
    expect_equal(read(until_ms=BASE_TS + 4, reverse=True, limit=2), [4, 3], "until+reverse+limit")
    expect_equal(read(since_ms=high, until_ms=high), [7], "since == until")
    expect_equal(read(since_ms=BASE_TS + 100), [], "since after the newest event")


@check("timeline", "size counts stored events")
def timeline_size(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    expect_equal(acmi.timeline.size(entity), 0, "size of an unwritten timeline")
    _append_at(acmi, entity, [BASE_TS + 1, BASE_TS + 2, BASE_TS + 3])
    expect_equal(acmi.timeline.size(entity), 3, "size after 3 appends")


@check("timeline", "payload is preserved")
def timeline_payload(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    payload = {"text": "hello", "n": 1, "items": [{"id": 1}, {"id": 2}], "flag": False}
    acmi.timeline.append(entity, make_event(payload=payload))
    acmi.timeline.append(entity, make_event(2, payload=[1, "two"]))
    acmi.timeline.append(entity, make_event(3, payload="just a string"))
    by_cid = {e.correlationId: e.payload for e in acmi.timeline.read(entity)}
    expect_equal(by_cid.get("conf-c-1"), payload, "object payload")
    expect_equal(by_cid.get("conf-c-2"), [1, "two"], "array payload")
    expect_equal(by_cid.get("conf-c-3"), "just a string", "string payload")


@check("timeline", "parentCorrelationId is preserved")
def timeline_parent(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.timeline.append(entity, make_event(1, ts=BASE_TS))
    acmi.timeline.append(entity, make_event(2, ts=BASE_TS + 1, parentCorrelationId="conf-c-1"))
    events = acmi.timeline.read(entity)
    expect_equal(
        [e.to_dict().get("parentCorrelationId") for e in events],
        [None, "conf-c-1"],
        "parentCorrelationId",
    )


@check("timeline", "an exact duplicate event is stored once")
def timeline_duplicate(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    event = make_event(1, ts=BASE_TS, payload={"a": [1, 2]})
    acmi.timeline.append(entity, event)
    acmi.timeline.append(entity, dict(event))
    expect_equal(acmi.timeline.size(entity), 1, "size after appending the same event twice")
    acmi.timeline.append(entity, {**event, "summary": "different"})
    expect_equal(acmi.timeline.size(entity), 2, "size after a same-ts, different event")


@check("timeline", "extend appends several events in one call")
def timeline_extend(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    stored = acmi.timeline.extend(entity, [make_event(i, ts=BASE_TS + i) for i in range(3)])
    expect_equal(len(stored), 3, "events returned by extend")
    expect_equal(_cids(acmi.timeline.read(entity)), ["conf-c-0", "conf-c-1", "conf-c-2"], "read")
    expect_rejected(
        lambda: acmi.timeline.extend(entity, [make_event(9, ts=BASE_TS + 9), {"kind": "x"}]),
        "extend with one invalid event",
    )
    expect_equal(acmi.timeline.size(entity), 3, "size after a rejected extend (all or nothing)")


@check("timeline", "fractional ts is preserved")
def timeline_fractional_ts(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.timeline.append(entity, make_event(1, ts=BASE_TS + 0.5))
    acmi.timeline.append(entity, make_event(2, ts=BASE_TS))
    expect_equal(_ts(acmi.timeline.read(entity)), [BASE_TS, BASE_TS + 0.5], "ts values")


@check("timeline", "equal timestamps read in one deterministic order")
def timeline_equal_ts(ctx: Context) -> None:
    acmi = ctx.acmi
    first, second = ctx.entity(), ctx.entity()
    events = [make_event(n, ts=BASE_TS) for n in (3, 1, 4, 0, 2)]
    for event in events:
        acmi.timeline.append(first, event)
    for event in reversed(events):
        acmi.timeline.append(second, event)
    order = _cids(acmi.timeline.read(first))
    expect_equal(sorted(order), sorted(e["correlationId"] for e in events), "events read")
    expect_equal(_cids(acmi.timeline.read(first)), order, "second read of the same timeline")
    expect_equal(_cids(acmi.timeline.read(second)), order, "same events inserted in reverse")
    expect_equal(_cids(acmi.timeline.read(first, reverse=True)), order[::-1], "reverse read")
    expect_equal(_cids(acmi.timeline.read(first, limit=2)), order[:2], "limit")
    expect_equal(
        _cids(acmi.timeline.read(first, reverse=True, limit=2)), order[::-1][:2], "reverse + limit"
    )


@check("timeline", "unknown event fields round-trip, nested too")
def timeline_unknown_fields(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    extra = {
        "channel": "slack",
        "x_flag": True,
        "meta": {"nested": [1, {"deep": {"deeper": [None, 2.5]}}], "empty": {}},
        "tags": [],
    }
    stored = acmi.timeline.append(entity, make_event(ts=BASE_TS, **extra))
    (event,) = acmi.timeline.read(entity)
    for name, value in extra.items():
        expect_equal(stored.to_dict().get(name), value, f"unknown field {name} (append result)")
        expect_equal(event.to_dict().get(name), value, f"unknown field {name} (read)")
    (raw,) = _raw_members(acmi, acmi.keys.timeline(EntityId.parse(entity)))
    for name, value in extra.items():
        expect_equal(raw.get(name), value, f"unknown field {name} in the stored member")


@check("timeline", "reads and writes are copies")
def timeline_copies(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    event = make_event(ts=BASE_TS, payload={"list": [1], "obj": {"k": "v"}})
    acmi.timeline.append(entity, event)
    event["payload"]["list"].append("changed input")
    event["summary"] = "changed input"
    (read,) = acmi.timeline.read(entity)
    read.payload["obj"]["k"] = "changed read"
    as_dict = read.to_dict()
    as_dict["summary"] = "changed dict"
    as_dict["payload"]["list"].append("changed dict")
    (again,) = acmi.timeline.read(entity)
    expect_equal(again.payload, {"list": [1], "obj": {"k": "v"}}, "payload after mutations")
    expect_equal(again.summary, "event 1", "summary after mutations")


# --- batch -----------------------------------------------------------------------------------


@check("batch", "every queued op is visible after the batch")
def batch_all_visible(ctx: Context) -> None:
    acmi = ctx.acmi
    first, second = ctx.entity(), ctx.entity("agent")
    acmi.signals.set(second, "gone", 1)
    with acmi.batch() as batch:
        batch.profile.set(first, {"a": 1})
        batch.profile.merge(second, {"b": 2})
        batch.signals.set(first, "s", "one")
        batch.signals.update(second, {"t": 2, "u": [3]})
        batch.signals.delete(second, "gone")
        batch.timeline.append(first, make_event(1, ts=BASE_TS))
        batch.timeline.extend(second, [make_event(2, ts=BASE_TS), make_event(3, ts=BASE_TS + 1)])
        expect_equal(acmi.profile.get(first), None, "profile before the batch is applied")
    expect_equal(acmi.profile.get(first), _profile(acmi, first, {"a": 1}), "first profile")
    expect_equal(acmi.profile.get(second), _profile(acmi, second, {"b": 2}), "second profile")
    expect_equal(acmi.signals.all(first), {"s": "one"}, "first signals")
    expect_equal(acmi.signals.all(second), {"t": 2, "u": [3]}, "second signals")
    expect_equal(_cids(acmi.timeline.read(first)), ["conf-c-1"], "first timeline")
    expect_equal(_cids(acmi.timeline.read(second)), ["conf-c-2", "conf-c-3"], "second timeline")


@check("batch", "apply() without a with-block applies once")
def batch_apply(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    batch = acmi.batch()
    batch.signals.set(entity, "a", 1)
    batch.profile.delete(entity)
    batch.apply()
    expect_equal(acmi.signals.all(entity), {"a": 1}, "signals after apply()")
    expect_rejected(batch.apply, "applying a batch twice")


@check("batch", "auto-fill applies inside a batch")
def batch_autofill(ctx: Context) -> None:
    acmi, user, agent = ctx.acmi, ctx.entity("user"), ctx.entity("agent")
    before = acmi.clock()
    with acmi.batch() as batch:
        batch.profile.set(user, {"name": "u"})
        batch.profile.merge(agent, {"name": "a"})
        batch.timeline.append(user, make_event(1, source="user:someone"))
    after = acmi.clock()
    expect_equal(acmi.profile.get(user), _profile(acmi, user, {"name": "u"}), "user profile")
    expect_equal(acmi.profile.get(agent), _profile(acmi, agent, {"name": "a"}), "agent profile")
    (event,) = acmi.timeline.read(user)
    expect(before <= event.ts <= after, f"batch ts {event.ts} not within [{before}, {after}]")
    expect_equal(event.to_dict().get("speaker_type"), "human", "speaker_type")
    expect_equal(event.to_dict().get("tenant_id"), acmi.tenant, "event tenant_id")


@check("batch", "later ops in a batch see earlier ones")
def batch_sequential(ctx: Context) -> None:
    acmi, first, second = ctx.acmi, ctx.entity(), ctx.entity()
    with acmi.batch() as batch:
        batch.profile.set(first, {"a": 1})
        batch.profile.merge(first, {"b": 2})
        batch.signals.set(first, "x", 1)
        batch.signals.delete(first, "x")
        batch.signals.set(first, "y", 2)
        batch.profile.set(second, {"gone": True})
        batch.profile.delete(second)
    expect_equal(acmi.profile.get(first), _profile(acmi, first, {"a": 1, "b": 2}), "set+merge")
    expect_equal(acmi.signals.all(first), {"y": 2}, "set, delete, set")
    expect_equal(acmi.profile.get(second), None, "set then delete")


@check("batch", "all or nothing: an op on a wrong-type key fails the whole batch")
def batch_atomic_wrong_type(ctx: Context) -> None:
    acmi, first, second = ctx.acmi, ctx.entity(ctx.category), ctx.entity()
    timeline_key = acmi.keys.timeline(EntityId.parse(second))
    acmi.store.execute(("SET", timeline_key, "x"))
    batch = acmi.batch()
    batch.profile.set(first, {"a": 1})
    batch.timeline.append(second, make_event())
    expect_raises(CorruptData, batch.apply, "batch with an append onto a STRING key")
    expect_equal(acmi.profile.get(first), None, "the batch's first op (profile.set)")
    expect_equal(acmi.list(ctx.category), [], "index entries written by the failed batch")
    expect_equal(acmi.store.execute(("GET", timeline_key)), b"x", "the wrong-type key")
    expect_raises(
        CorruptData, lambda: acmi.timeline.append(second, make_event()), "append onto a STRING"
    )


@check("batch", "all or nothing: an op on a corrupt stored object fails the whole batch")
def batch_atomic_corrupt_object(ctx: Context) -> None:
    acmi, first, second = ctx.acmi, ctx.entity(), ctx.entity()
    _, signals_key, _ = _keys(acmi, second)
    acmi.store.execute(("SET", signals_key, "[1,2]"))
    batch = acmi.batch()
    batch.signals.set(first, "a", 1)
    batch.signals.set(second, "b", 2)
    expect_raises(CorruptData, batch.apply, "batch with a signal set onto a JSON array")
    expect_equal(acmi.signals.all(first), {}, "the batch's first op (signals.set)")
    expect_equal(acmi.store.execute(("GET", signals_key)), b"[1,2]", "the corrupt key")


@check("batch", "a batch whose block raises stores nothing")
def batch_block_raises(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()

    class BoomError(Exception):
        pass

    def run() -> None:
        with acmi.batch() as batch:
            batch.profile.set(entity, {"a": 1})
            batch.signals.set(entity, "s", 1)
            batch.timeline.append(entity, make_event())
            raise BoomError

    expect_raises(BoomError, run, "the block's exception")
    _expect_empty(acmi, entity, "after a block that raised")


@check("batch", "an invalid op is rejected as queued and the batch stores nothing")
def batch_invalid_op(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()

    def run() -> None:
        with acmi.batch() as batch:
            batch.profile.set(entity, {"a": 1})
            batch.signals.set(entity, "s", 1)
            batch.timeline.append(entity, {"source": "agent:x"})

    expect_rejected(run, "queuing an event without kind/correlationId/summary")
    _expect_empty(acmi, entity, "after a batch with an invalid op")


# --- auto-fill (ACMI SPEC v1.3) ---------------------------------------------------------------


@check("autofill", "explicit actor_type and tenant_id on a profile are kept")
def autofill_profile_explicit(ctx: Context) -> None:
    entity = ctx.entity("user")
    doc = {"actor_type": "system", "tenant_id": "other"}
    ctx.acmi.profile.set(entity, doc)
    expect_equal(ctx.acmi.profile.get(entity), doc, "profile with explicit values")


@check("autofill", "speaker_type from the source prefix: agent:, user:, system:")
def autofill_speaker_type(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    cases = {"agent:bot": "agent", "user:mikey": "human", "system:cron": "system"}
    for n, source in enumerate(cases):
        stored = acmi.timeline.append(entity, make_event(n, ts=BASE_TS + n, source=source))
        expect_equal(stored.to_dict().get("speaker_type"), cases[source], f"append ({source})")
    got = [e.to_dict().get("speaker_type") for e in acmi.timeline.read(entity)]
    expect_equal(got, list(cases.values()), "speaker_type read back")


@check("autofill", "tenant_id on an event is auto-filled with the client's tenant")
def autofill_event_tenant(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    stored = acmi.timeline.append(entity, make_event())
    expect_equal(stored.to_dict().get("tenant_id"), acmi.tenant, "tenant_id (append result)")
    (event,) = acmi.timeline.read(entity)
    expect_equal(event.to_dict().get("tenant_id"), acmi.tenant, "tenant_id (read)")


@check("autofill", "explicit speaker_type and tenant_id on an event are kept")
def autofill_event_explicit(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    event = make_event(source="agent:bot", speaker_type="external", tenant_id="other")
    acmi.timeline.append(entity, event)
    (read,) = acmi.timeline.read(entity)
    expect_equal(read.to_dict().get("speaker_type"), "external", "explicit speaker_type")
    expect_equal(read.to_dict().get("tenant_id"), "other", "explicit tenant_id")


@check("autofill", "merge never overwrites a stored explicit actor_type or tenant_id")
def autofill_merge_keeps(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity("user")
    acmi.profile.set(entity, {"actor_type": "system", "tenant_id": "other"})
    merged = acmi.profile.merge(entity, {"x": 1})
    expected = {"actor_type": "system", "tenant_id": "other", "x": 1}
    expect_equal(merged, expected, "merge return value")
    expect_equal(acmi.profile.get(entity), expected, "profile after merge")


@check("autofill", "explicit actor_type or tenant_id in a merge does overwrite")
def autofill_merge_explicit(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity("user")
    acmi.profile.set(entity, {"a": 1})
    acmi.profile.merge(entity, {"actor_type": "external", "tenant_id": "other"})
    expected = {"a": 1, "actor_type": "external", "tenant_id": "other"}
    expect_equal(acmi.profile.get(entity), expected, "profile after an explicit merge")


# --- validation -------------------------------------------------------------------------------

MALFORMED_IDS: Final = ("", "no-colon", ":missing-cat", "cat:", "Cat:Bad")


def _id_operations(acmi: Acmi, entity: Any) -> list[tuple[str, Callable[[], object]]]:
    """Every entity-taking operation, called with ``entity``."""
    return [
        ("profile.get", lambda: acmi.profile.get(entity)),
        ("profile.set", lambda: acmi.profile.set(entity, {"a": 1})),
        ("profile.merge", lambda: acmi.profile.merge(entity, {"a": 1})),
        ("profile.delete", lambda: acmi.profile.delete(entity)),
        ("signals.get", lambda: acmi.signals.get(entity, "k")),
        ("signals.set", lambda: acmi.signals.set(entity, "k", 1)),
        ("signals.all", lambda: acmi.signals.all(entity)),
        ("signals.delete", lambda: acmi.signals.delete(entity, "k")),
        ("timeline.append", lambda: acmi.timeline.append(entity, make_event())),
        ("timeline.read", lambda: acmi.timeline.read(entity)),
        ("timeline.size", lambda: acmi.timeline.size(entity)),
        ("get", lambda: acmi.get(entity)),
        ("delete", lambda: acmi.delete(entity)),
    ]


def _malformed_id_check(raw: str) -> CheckFn:
    def run(ctx: Context) -> None:
        for name, action in _id_operations(ctx.acmi, raw):
            expect_rejected(action, f"{name}({raw!r})")

    return run


for _raw_id in MALFORMED_IDS:
    check("validation", f"malformed entity id {_raw_id!r} is rejected")(
        _malformed_id_check(_raw_id)
    )


@check("validation", "non-string entity ids are rejected")
def validation_id_type(ctx: Context) -> None:
    for raw in (None, 42, b"user:x", ["user", "x"]):
        for name, action in _id_operations(ctx.acmi, raw):
            expect_rejected(action, f"{name}({raw!r})")


@check("validation", "entity ids of up to 256 characters are accepted")
def validation_id_256(ctx: Context) -> None:
    base = ctx.entity(name="long")
    entity = ctx.track(base + "a" * (256 - len(base)))
    expect_equal(len(entity), 256, "id length")
    ctx.acmi.profile.set(entity, {"a": 1})
    expect_equal(ctx.acmi.profile.get(entity), _profile(ctx.acmi, entity, {"a": 1}), "profile")


@check("validation", "entity ids over 256 characters are rejected")
def validation_id_257(ctx: Context) -> None:
    base = ctx.entity(name="long")
    entity = base + "a" * (257 - len(base))
    for name, action in _id_operations(ctx.acmi, entity):
        expect_rejected(action, f"{name}(id of 257 characters)")


@check("validation", "ids with dots, dashes, underscores and capitals work")
def validation_id_charset(ctx: Context) -> None:
    acmi = ctx.acmi
    for category in ("deal", "work_item", "my-cat2"):
        entity = ctx.entity(category, "A.b_C-9")
        acmi.profile.set(entity, {"ok": True})
        acmi.signals.set(entity, "ok", True)
        acmi.timeline.append(entity, make_event())
        expect_equal(acmi.get(entity).profile, _profile(acmi, entity, {"ok": True}), entity)
        expect_equal(acmi.signals.all(entity), {"ok": True}, entity)
        expect_equal(acmi.timeline.size(entity), 1, entity)


REQUIRED_EVENT_FIELDS: Final = ("source", "kind", "correlationId", "summary")


def _missing_field_check(name: str) -> CheckFn:
    def run(ctx: Context) -> None:
        acmi, entity = ctx.acmi, ctx.entity()
        event = make_event()
        del event[name]
        exc = expect_rejected(lambda: acmi.timeline.append(entity, event), f"event without {name}")
        expect(name in str(exc.field), f"field {exc.field!r} does not name {name}")
        if name == "correlationId":
            legacy = {**event, "correlation_id": "c-1"}
            expect_rejected(
                lambda: acmi.timeline.append(entity, legacy), "snake_case correlation_id"
            )
        expect_equal(acmi.timeline.size(entity), 0, "timeline size after rejections")

    return run


for _field_name in REQUIRED_EVENT_FIELDS:
    check("validation", f"event missing {_field_name} is rejected")(
        _missing_field_check(_field_name)
    )


@check("validation", "event required fields must be non-empty strings")
def validation_event_field_types(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for name in REQUIRED_EVENT_FIELDS:
        for bad in ("", None, 5, ["x"], {"x": 1}):
            event = make_event(**{name: bad})
            expect_rejected(partial(acmi.timeline.append, entity, event), f"{name}={bad!r}")
    expect_rejected(
        lambda: acmi.timeline.append(entity, make_event(parentCorrelationId=5)),
        "parentCorrelationId=5",
    )
    bad_event: Any = ["not", "an", "object"]
    expect_rejected(lambda: acmi.timeline.append(entity, bad_event), "an event that is a list")
    expect_equal(acmi.timeline.size(entity), 0, "timeline size after rejections")


@check("validation", "invalid ts is rejected: NaN, infinite, negative, not a number")
def validation_ts(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in (float("nan"), float("inf"), -1, "1700000000000", True, [1], 1e300):
        event = make_event(ts=bad)
        expect_rejected(partial(acmi.timeline.append, entity, event), f"ts={bad!r}")
    expect_equal(acmi.timeline.size(entity), 0, "timeline size after rejections")


@check("validation", "summary of 500 characters is accepted")
def validation_summary_500(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.timeline.append(entity, make_event(summary="s" * 500))
    (event,) = acmi.timeline.read(entity)
    expect_equal(event.summary, "s" * 500, "summary")


@check("validation", "summary over 500 characters is rejected")
def validation_summary_501(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    exc = expect_rejected(
        lambda: acmi.timeline.append(entity, make_event(summary="s" * 501)), "summary of 501"
    )
    expect("summary" in str(exc.field), f"field {exc.field!r} does not name summary")
    expect_equal(acmi.timeline.size(entity), 0, "timeline size after rejection")


@check("validation", "speaker_type outside agent|human|system|external is rejected")
def validation_speaker_type(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in ("robot", "Agent", "", 1):
        event = make_event(speaker_type=bad)
        expect_rejected(partial(acmi.timeline.append, entity, event), f"speaker_type={bad!r}")
    expect_equal(acmi.timeline.size(entity), 0, "timeline size after rejections")


@check("validation", "non-object profiles are rejected by set, nothing stored")
def validation_profile_set(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in NOT_OBJECTS:
        expect_rejected(partial(acmi.profile.set, entity, bad), f"profile.set({bad!r})")
    expect_equal(acmi.profile.get(entity), None, "profile after rejected sets")
    acmi.profile.set(entity, {"kept": True})
    for bad in NOT_OBJECTS:
        expect_rejected(partial(acmi.profile.set, entity, bad), f"profile.set({bad!r})")
    expect_equal(acmi.profile.get(entity), _profile(acmi, entity, {"kept": True}), "profile")


@check("validation", "non-object profiles are rejected by merge, nothing stored")
def validation_profile_merge(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in NOT_OBJECTS:
        expect_rejected(partial(acmi.profile.merge, entity, bad), f"profile.merge({bad!r})")
    expect_equal(acmi.profile.get(entity), None, "profile after rejected merges")
    acmi.profile.set(entity, {"kept": True})
    for bad in NOT_OBJECTS:
        expect_rejected(partial(acmi.profile.merge, entity, bad), f"profile.merge({bad!r})")
    expect_equal(acmi.profile.get(entity), _profile(acmi, entity, {"kept": True}), "profile")


@check("validation", "actor_type outside agent|human|system|external is rejected")
def validation_actor_type(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in ("robot", "Human", "", None, 1):
        doc = {"actor_type": bad}
        expect_rejected(partial(acmi.profile.set, entity, doc), f"set actor_type={bad!r}")
        expect_rejected(partial(acmi.profile.merge, entity, doc), f"merge actor_type={bad!r}")
    expect_equal(acmi.profile.get(entity), None, "profile after rejections")
    for good in ("agent", "human", "system", "external"):
        acmi.profile.merge(entity, {"actor_type": good})
        got = acmi.profile.get(entity) or {}
        expect_equal(got.get("actor_type"), good, f"actor_type={good!r}")


@check("validation", "invalid limit is rejected: 0, -1, True, '5', 1.5")
def validation_limit(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.timeline.append(entity, make_event())
    bads: tuple[Any, ...] = (0, -1, True, "5", 1.5)
    for bad in bads:
        expect_rejected(partial(acmi.timeline.read, entity, limit=bad), f"limit={bad!r}")


@check("validation", "NaN and Infinity are rejected in profile, signals and payload")
def validation_nan(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for bad in (float("nan"), float("inf"), [float("-inf")], {"deep": float("nan")}):
        expect_rejected(partial(acmi.profile.set, entity, {"v": bad}), f"profile {bad!r}")
        expect_rejected(partial(acmi.profile.merge, entity, {"v": bad}), f"merge {bad!r}")
        expect_rejected(partial(acmi.signals.set, entity, "v", bad), f"signal {bad!r}")
        expect_rejected(
            partial(acmi.timeline.append, entity, make_event(payload=bad)), f"payload {bad!r}"
        )
    _expect_empty(acmi, entity, "after rejected NaN writes")


def _rejections(ctx: Context) -> list[tuple[str, Callable[[], object]]]:
    """One of each kind of bad input, for the single-error-type check."""
    acmi, entity = ctx.acmi, ctx.entity()
    bad: Any = None
    bad_list: Any = []
    cases: list[tuple[str, Callable[[], object]]] = [
        (f"entity {raw!r}", partial(acmi.profile.get, raw)) for raw in MALFORMED_IDS
    ]
    for name in REQUIRED_EVENT_FIELDS:
        event = {k: v for k, v in make_event().items() if k != name}
        cases.append((f"event without {name}", partial(acmi.timeline.append, entity, event)))
    cases += [
        ("entity id of 257", lambda: acmi.profile.get("user:" + "a" * 252)),
        ("signal key ''", lambda: acmi.signals.set(entity, "", 1)),
        ("signal key of 129", lambda: acmi.signals.set(entity, "k" * 129, 1)),
        ("profile None", lambda: acmi.profile.set(entity, bad)),
        ("profile list", lambda: acmi.profile.merge(entity, bad_list)),
        ("actor_type", lambda: acmi.profile.set(entity, {"actor_type": "robot"})),
        ("summary of 501", lambda: acmi.timeline.append(entity, make_event(summary="s" * 501))),
        ("limit 0", lambda: acmi.timeline.read(entity, limit=0)),
        ("ts NaN", lambda: acmi.timeline.append(entity, make_event(ts=float("nan")))),
        ("signal NaN", lambda: acmi.signals.set(entity, "k", float("nan"))),
        ("speaker_type", lambda: acmi.timeline.append(entity, make_event(speaker_type="x"))),
        ("get events=-1", lambda: acmi.get(entity, events=-1)),
    ]
    return cases


@check("validation", "every rejection is one type: AcmiValidationError, a ValueError")
def validation_single_type(ctx: Context) -> None:
    for what, action in _rejections(ctx):
        expect_rejected(action, what)  # AcmiValidationError, a ValueError, with field and rule


# --- tolerance: corrupt stored members -------------------------------------------------------


def _expect_one_skipped(acmi: Acmi, entity: str, reason_words: tuple[str, ...]) -> None:
    """Valid events at BASE_TS + 1 and + 3 read around one bad member at + 2."""
    expect_equal(acmi.timeline.size(entity), 3, "stored members")
    reads: list[dict[str, Any]] = [
        {},
        {"reverse": True},
        {"limit": 3},
        {"since_ms": BASE_TS + 2},
    ]
    for kw in reads:
        events = acmi.timeline.read(entity, **kw)
        valid = [ts for ts in (BASE_TS + 1, BASE_TS + 3) if ts >= kw.get("since_ms", 0)]
        if kw.get("reverse"):
            valid.reverse()
        expect_equal(_ts(events), valid, f"valid events read with {kw}")
        expect_equal(len(events.skipped), 1, f"skipped members with {kw}")
        reason = events.skipped[0].reason
        expect(isinstance(reason, str) and reason, "a skipped member needs a reason")
        expect(
            any(w.lower() in reason.lower() for w in reason_words),
            f"reason {reason!r} should mention one of {reason_words}",
        )
    bundle = acmi.get(entity)
    expect_equal(_ts(bundle.timeline), [BASE_TS + 1, BASE_TS + 3], "get(): valid events")
    expect_equal(len(bundle.timeline.skipped), 1, "get(): skipped members")


def _corrupt_member_check(member: bytes, reason_words: tuple[str, ...]) -> CheckFn:
    def run(ctx: Context) -> None:
        acmi, entity = ctx.acmi, ctx.entity()
        _append_at(acmi, entity, [BASE_TS + 1, BASE_TS + 3])
        key = acmi.keys.timeline(EntityId.parse(entity))
        acmi.store.execute(("ZADD", key, BASE_TS + 2, member))
        _expect_one_skipped(acmi, entity, reason_words)

    return run


NOT_UTF8: Final = b'{"summary": "\xff\xfe"}'
CORRUPT_MEMBERS: Final = (
    ("a member that is not JSON", b"not json", ("json",)),
    ("a member that is a JSON array", b'["an","array"]', ("object",)),
    (
        "a legacy member with snake_case correlation_id",
        json.dumps(
            {
                "ts": BASE_TS + 2,
                "source": "agent:old",
                "kind": "note",
                "correlation_id": "c-legacy",
                "summary": "legacy",
            }
        ).encode(),
        ("correlation_id",),
    ),
    (
        "a member missing kind",
        json.dumps(
            {"ts": BASE_TS + 2, "source": "agent:x", "correlationId": "c-x", "summary": "no kind"}
        ).encode(),
        ("kind",),
    ),
)

for _label, _member, _words in CORRUPT_MEMBERS:
    check("tolerance", f"{_label} is skipped and reported")(_corrupt_member_check(_member, _words))


@check("tolerance", "a member that is not UTF-8 is skipped and reported")
def tolerance_not_utf8(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    _append_at(acmi, entity, [BASE_TS + 1, BASE_TS + 3])
    command = ("ZADD", acmi.keys.timeline(EntityId.parse(entity)), BASE_TS + 2, NOT_UTF8)
    if ctx.raw is not None:
        ctx.raw(command)
    else:
        try:
            acmi.store.execute(command)
        except StoreCommandError:
            # This transport cannot carry such bytes (Upstash REST is text only): it must
            # refuse cleanly, writing nothing. Reading a member another client wrote is
            # then checked only when the run has a side door (Context.raw).
            expect_equal(acmi.timeline.size(entity), 2, "members after a refused write")
            return
    _expect_one_skipped(acmi, entity, ("utf-8", "utf8"))


@check("tolerance", "several corrupt members are each reported, valid events still read")
def tolerance_many(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    key = acmi.keys.timeline(EntityId.parse(entity))
    for n, (_, member, _) in enumerate(CORRUPT_MEMBERS):
        acmi.store.execute(("ZADD", key, BASE_TS + 10 * n, member))
    _append_at(acmi, entity, [BASE_TS + 5, BASE_TS + 15])
    events = acmi.timeline.read(entity)
    expect_equal(_ts(events), [BASE_TS + 5, BASE_TS + 15], "valid events")
    expect_equal(len(events.skipped), len(CORRUPT_MEMBERS), "skipped members")
    expect(all(s.reason for s in events.skipped), "every skipped member has a reason")


# --- concurrency ------------------------------------------------------------------------------


@check("concurrency", "50 concurrent signals.set on one entity lose nothing")
def concurrency_signals(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    run_together(50, lambda i: acmi.signals.set(entity, f"key-{i}", i))
    expect_equal(acmi.signals.all(entity), {f"key-{i}": i for i in range(50)}, "signals")


@check("concurrency", "20 concurrent profile.merge on one entity lose nothing")
def concurrency_merge(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    run_together(20, lambda i: acmi.profile.merge(entity, {f"field-{i}": i}))
    expected = _profile(acmi, entity, {f"field-{i}": i for i in range(20)})
    expect_equal(acmi.profile.get(entity), expected, "profile")


@check("concurrency", "20 concurrent appends on one entity lose nothing")
def concurrency_appends(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    run_together(20, lambda i: acmi.timeline.append(entity, make_event(i, ts=BASE_TS + i % 3)))
    expect_equal(acmi.timeline.size(entity), 20, "timeline size")
    got = sorted(_cids(acmi.timeline.read(entity)))
    expect_equal(got, sorted(f"conf-c-{i}" for i in range(20)), "correlationIds read")


@check("concurrency", "concurrent signal deletes and sets lose nothing")
def concurrency_mixed(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.signals.update(entity, {f"old-{i}": i for i in range(10)})

    def work(i: int) -> None:
        if i < 10:
            acmi.signals.delete(entity, f"old-{i}")
        else:
            acmi.signals.set(entity, f"new-{i}", i)

    run_together(30, work)
    expect_equal(acmi.signals.all(entity), {f"new-{i}": i for i in range(10, 30)}, "signals")


# --- JSON exactness ---------------------------------------------------------------------------


def _expect_exact(got: dict[str, Any], what: str) -> None:
    for name, value in TRICKY_JSON.items():
        expect_equal(got.get(name, "<missing>"), value, f"{what}: {name}")


@check("json", "profile values survive set exactly, in the stored bytes too")
def json_profile_set(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.profile.set(entity, TRICKY_JSON)
    got = acmi.profile.get(entity) or {}
    _expect_exact(got, "profile.get")
    raw = _raw_json(acmi, acmi.keys.profile(EntityId.parse(entity)))
    expect_equal(raw, got, "stored profile bytes, decoded")


@check("json", "profile values survive merge exactly, in the stored bytes too")
def json_profile_merge(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.profile.set(entity, {"before": [{"x": []}], "big_int": 1})
    merged = acmi.profile.merge(entity, TRICKY_JSON) or {}
    _expect_exact(merged, "merge return value")
    acmi.profile.merge(entity, {"after": {}})
    got = acmi.profile.get(entity) or {}
    _expect_exact(got, "profile.get after two merges")
    expect_equal(got.get("before"), [{"x": []}], "untouched field")
    raw = _raw_json(acmi, acmi.keys.profile(EntityId.parse(entity)))
    expect_equal(raw, got, "stored profile bytes, decoded")


@check("json", "signal values survive exactly, in the stored bytes too")
def json_signals(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.signals.set(entity, "first", {"keep": []})
    acmi.signals.update(entity, TRICKY_JSON)
    acmi.signals.set(entity, "last", 12345678901234567)
    expected = {"first": {"keep": []}, **TRICKY_JSON, "last": 12345678901234567}
    expect_equal(acmi.signals.all(entity), expected, "signals.all()")
    for name, value in TRICKY_JSON.items():
        expect_equal(acmi.signals.get(entity, name), value, f"signals.get({name!r})")
    raw = _raw_json(acmi, acmi.keys.signals(EntityId.parse(entity)))
    expect_equal(raw, expected, "stored signals bytes, decoded")


@check("json", "event payload and fields survive exactly, in the stored bytes too")
def json_event(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    summary = TRICKY_JSON["unicode"] + TRICKY_JSON["escapes"]
    acmi.timeline.append(entity, make_event(ts=BASE_TS, summary=summary, payload=TRICKY_JSON))
    (event,) = acmi.timeline.read(entity)
    expect_equal(event.payload, TRICKY_JSON, "payload read back")
    expect_equal(event.summary, summary, "summary read back")
    (raw,) = _raw_members(acmi, acmi.keys.timeline(EntityId.parse(entity)))
    expect_equal(raw.get("payload"), TRICKY_JSON, "stored member's payload, decoded")
    expect_equal(raw.get("summary"), summary, "stored member's summary, decoded")


@check("json", "keys with quotes, backslashes, newlines and emoji survive")
def json_tricky_names(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    for n, name in enumerate(TRICKY_NAMES):
        acmi.signals.set(entity, name, n)
        acmi.profile.merge(entity, {name: n})
    for n, name in enumerate(TRICKY_NAMES):  # a second write overwrites, never duplicates
        acmi.signals.set(entity, name, [n])
        acmi.profile.merge(entity, {name: [n]})
    acmi.signals.delete(entity, TRICKY_NAMES[0])
    expected = {name: [n] for n, name in enumerate(TRICKY_NAMES)}
    expected_signals = {k: v for k, v in expected.items() if k != TRICKY_NAMES[0]}
    expect_equal(acmi.signals.all(entity), expected_signals, "signals")
    expect_equal(acmi.profile.get(entity), _profile(acmi, entity, expected), "profile")
    eid = EntityId.parse(entity)
    expect_equal(_raw_json(acmi, acmi.keys.signals(eid)), expected_signals, "stored signals")
    expect_equal(
        _raw_json(acmi, acmi.keys.profile(eid)), _profile(acmi, entity, expected), "stored profile"
    )


# --- tenants ----------------------------------------------------------------------------------


@check("tenant", "tenants never see each other's profile, signals or timeline")
def tenant_isolation(ctx: Context) -> None:
    home, other, entity = ctx.acmi, ctx.tenant(), ctx.entity()
    home.profile.set(entity, {"who": "home"})
    home.signals.set(entity, "who", "home")
    home.timeline.append(entity, make_event(1, summary="home"))
    _expect_empty(other, entity, "the other tenant before it writes")
    other.profile.set(entity, {"who": "other"})
    other.signals.set(entity, "who", "other")
    other.timeline.append(entity, make_event(2, summary="other"))
    other.timeline.append(entity, make_event(3, summary="other"))
    for acmi, who, size in ((home, "home", 1), (other, "other", 2)):
        bundle = acmi.get(entity)
        expect_equal((bundle.profile or {}).get("who"), who, f"{who} tenant's profile")
        expect_equal(bundle.signals, {"who": who}, f"{who} tenant's signals")
        expect_equal([e.summary for e in bundle.timeline], [who] * size, f"{who}'s timeline")
    other.delete(entity)
    expect_equal(home.signals.all(entity), {"who": "home"}, "home signals after other's delete")


@check("tenant", "a tenant's auto-fill uses its own tenant id")
def tenant_autofill(ctx: Context) -> None:
    other, entity = ctx.tenant(), ctx.entity("agent")
    expect_equal(other.tenant, f"t-{ctx.token}", "tenant name")
    other.profile.set(entity, {"a": 1})
    expect_equal(
        other.profile.get(entity),
        {"a": 1, "actor_type": "agent", "tenant_id": other.tenant},
        "profile",
    )
    other.profile.merge(ctx.entity("user"), {"b": 2})
    stored = other.timeline.append(entity, make_event())
    expect_equal(stored.to_dict().get("tenant_id"), other.tenant, "event tenant_id")
    (event,) = other.timeline.read(entity)
    expect_equal(event.to_dict().get("tenant_id"), other.tenant, "event tenant_id read back")


@check("tenant", "list() is per tenant")
def tenant_list(ctx: Context) -> None:
    home, other = ctx.acmi, ctx.tenant()
    mine, theirs = ctx.entity(ctx.category), ctx.entity(ctx.category)
    home.signals.set(mine, "a", 1)
    other.signals.set(theirs, "a", 1)
    expect_equal(home.list(ctx.category), [mine], "home tenant's list")
    expect_equal(other.list(ctx.category), [theirs], "other tenant's list")


# --- entities: list, delete, get ---------------------------------------------------------------


@check("entity", "list includes every entity written through any slot")
def entity_list(ctx: Context) -> None:
    acmi, cat = ctx.acmi, ctx.category
    written = [
        ctx.entity(cat, "p"),
        ctx.entity(cat, "m"),
        ctx.entity(cat, "s"),
        ctx.entity(cat, "t"),
        ctx.entity(cat, "b"),
    ]
    acmi.profile.set(written[0], {"a": 1})
    acmi.profile.merge(written[1], {"a": 1})
    acmi.signals.set(written[2], "a", 1)
    acmi.timeline.append(written[3], make_event())
    with acmi.batch() as batch:
        batch.signals.set(written[4], "a", 1)
    expect_equal(acmi.list(cat), sorted(written), f"list({cat!r})")
    expect_equal(acmi.list(f"{cat}-none"), [], "list of an unused category")


@check("entity", "delete removes the entity from list")
def entity_delete_list(ctx: Context) -> None:
    acmi, cat = ctx.acmi, ctx.category
    keep, gone = ctx.entity(cat), ctx.entity(cat)
    acmi.profile.set(keep, {"a": 1})
    acmi.profile.set(gone, {"a": 1})
    acmi.delete(gone)
    expect_equal(acmi.list(cat), [keep], "list after delete")


@check("entity", "delete removes profile, signals, timeline and extension keys")
def entity_delete_all(ctx: Context) -> None:
    acmi, entity, keep = ctx.acmi, ctx.entity("agent"), ctx.entity("agent")
    eid = EntityId.parse(entity)
    for target in (entity, keep):
        acmi.profile.set(target, {"a": 1})
        acmi.signals.set(target, "s", 1)
        acmi.timeline.append(target, make_event())
    spawn = json.dumps({"ts": BASE_TS, "session_id": "s-1", "model_id": "m"})
    acmi.store.execute(("ZADD", acmi.keys.slot(eid, "spawns"), BASE_TS, spawn))
    acmi.store.execute(
        (
            "HSET",
            acmi.keys.slot(eid, "active_context"),
            "thread:x",
            json.dumps({"role": "r", "joined_at": BASE_TS}),
        )
    )
    acmi.store.execute(
        ("SET", acmi.keys.slot(eid, "rollup:latest"), json.dumps({"ts": BASE_TS, "summary": "s"}))
    )
    keys = [
        *_keys(acmi, entity),
        *(acmi.keys.slot(eid, s) for s in ("spawns", "active_context", "rollup:latest")),
    ]
    expect(all(_exists(acmi, k) for k in keys), "setup: every key exists before delete")
    acmi.delete(entity)
    left = [k for k in keys if _exists(acmi, k)]
    expect_equal(left, [], "keys left after delete")
    _expect_empty(acmi, entity, "after delete")
    expect_equal(acmi.signals.all(keep), {"s": 1}, "another entity after delete")
    expect_equal(acmi.timeline.size(keep), 1, "another entity's timeline after delete")


@check("entity", "delete of a missing entity is a no-op")
def entity_delete_missing(ctx: Context) -> None:
    entity = ctx.entity()
    ctx.acmi.delete(entity)
    ctx.acmi.delete(entity)
    _expect_empty(ctx.acmi, entity, "after deleting a missing entity")


@check("entity", "get returns profile, signals and the newest N events oldest first")
def entity_get(ctx: Context) -> None:
    acmi, entity = ctx.acmi, ctx.entity()
    acmi.profile.set(entity, {"a": 1})
    acmi.signals.set(entity, "s", [1])
    _append_at(acmi, entity, [BASE_TS + i for i in (4, 1, 5, 3, 2)])
    bundle = acmi.get(entity, events=3)
    expect_equal(bundle.entity, entity, "entity")
    expect_equal(bundle.profile, _profile(acmi, entity, {"a": 1}), "profile")
    expect_equal(bundle.signals, {"s": [1]}, "signals")
    expect_equal(_ts(bundle.timeline), [BASE_TS + 3, BASE_TS + 4, BASE_TS + 5], "events=3")
    expect_equal(
        _ts(acmi.get(entity, events=10).timeline),
        [BASE_TS + i for i in range(1, 6)],
        "events above size",
    )
    expect_equal(_ts(acmi.get(entity, events=0).timeline), [], "events=0")
    expect_equal(bundle.problems, [], "problems")


@check("entity", "get on a missing entity is empty")
def entity_get_missing(ctx: Context) -> None:
    bundle = ctx.acmi.get(ctx.entity())
    expect_equal(bundle.profile, None, "profile")
    expect_equal(bundle.signals, {}, "signals")
    expect_equal(list(bundle.timeline), [], "timeline")
    expect_equal(bundle.timeline.skipped, [], "skipped")


# --- isolation between entities -----------------------------------------------------------------


def _siblings(ctx: Context) -> tuple[str, str, str]:
    """Two entities, plus one with the first's local id in another category."""
    first, second = ctx.entity("user", "iso"), ctx.entity("user", "iso")
    cousin = ctx.track("agent:" + EntityId.parse(first).local_id)
    return first, second, cousin


@check("isolation", "two entities never share a profile")
def isolation_profile(ctx: Context) -> None:
    acmi = ctx.acmi
    first, second, cousin = _siblings(ctx)
    acmi.profile.set(first, {"who": "first"})
    expect_equal(acmi.profile.get(second), None, "second's profile")
    expect_equal(acmi.profile.get(cousin), None, "same id, other category")
    acmi.profile.merge(second, {"who": "second"})
    acmi.profile.delete(cousin)
    expect_equal((acmi.profile.get(first) or {}).get("who"), "first", "first's profile")
    expect_equal((acmi.profile.get(second) or {}).get("who"), "second", "second's profile")


@check("isolation", "two entities never share signals")
def isolation_signals(ctx: Context) -> None:
    acmi = ctx.acmi
    first, second, cousin = _siblings(ctx)
    acmi.signals.set(first, "k", "first")
    expect_equal(acmi.signals.all(second), {}, "second's signals")
    expect_equal(acmi.signals.all(cousin), {}, "same id, other category")
    acmi.signals.set(second, "k", "second")
    acmi.signals.set(cousin, "k", "cousin")
    acmi.signals.delete(second, "k")
    expect_equal(acmi.signals.all(first), {"k": "first"}, "first's signals")
    expect_equal(acmi.signals.all(cousin), {"k": "cousin"}, "cousin's signals")


@check("isolation", "two entities never share a timeline")
def isolation_timeline(ctx: Context) -> None:
    acmi = ctx.acmi
    first, second, cousin = _siblings(ctx)
    acmi.timeline.append(first, make_event(1, ts=BASE_TS))
    expect_equal(acmi.timeline.size(second), 0, "second's timeline")
    expect_equal(acmi.timeline.size(cousin), 0, "same id, other category")
    acmi.timeline.append(second, make_event(2, ts=BASE_TS))
    acmi.timeline.append(cousin, make_event(3, ts=BASE_TS))
    expect_equal(_cids(acmi.timeline.read(first)), ["conf-c-1"], "first's timeline")
    expect_equal(_cids(acmi.timeline.read(second)), ["conf-c-2"], "second's timeline")
    expect_equal(_cids(acmi.timeline.read(cousin)), ["conf-c-3"], "cousin's timeline")


CHECKS: Final[tuple[Check, ...]] = tuple(_REGISTRY)
"""Every registered check, in definition order."""


def main() -> int:
    """Run the suite against the store the environment selects; exit 1 on any failure."""
    acmi = create_acmi()
    try:
        report = run_conformance(acmi)
    finally:
        acmi.close()
    print(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

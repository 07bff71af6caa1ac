"""5. The largest allowed object edit, in Redis's own time. A Lua script blocks the whole
Redis (every tenant) while it runs, so an edit is bounded (acmi_core.base.model: at most
MAX_EDIT_FIELDS fields on an object of at most MAX_OBJECT_BYTES). Each case is an object
at that size in a shape that is slow to scan, edited with that many fields; the script's
time is read from SLOWLOG, the server's own figure, not the client's wall clock."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from acmi_core.base.model import MAX_EDIT_FIELDS, MAX_OBJECT_BYTES, dumps
from acmi_core.store.base import Store
from acmi_core.store.redis import RedisStore
from acmi_core.store.writes import FieldMode, WritePlan
from bench import script_limits
from bench._infra import Column, RedisServer, median, table_of

TITLE = "5. The largest allowed object edit, and every script at its limits (server time)"
BUDGET_MS = 50.0  # what one edit may block Redis for; tests/integration/test_write_limits.py
KEY = "acmi:bench:worst:signals"

Field = tuple[FieldMode, str, str]


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    stored: str  # the object before the edit: at most MAX_OBJECT_BYTES
    fields: list[Field]  # MAX_EDIT_FIELDS set fields; the result fits the cap too


def _members(member: Callable[[int], str], budget: int) -> tuple[str, int]:
    """An object of members member(0), member(1), ... as long as it fits ``budget`` bytes."""
    parts: list[str] = []
    size, count = 2, 0
    while size + len(member(count).encode()) + 1 <= budget:
        parts.append(member(count))
        size += len(parts[-1].encode()) + 1
        count += 1
    return "{" + ",".join(parts) + "}", count


def _replacing(count: int, name: Callable[[int], str], value: str = "1") -> list[Field]:
    """Set MAX_EDIT_FIELDS of the ``count`` stored members, spread out, to a value as
    long as theirs: every field is found, the object keeps its size."""
    step = max(1, count // MAX_EDIT_FIELDS)
    return [("set", name(i * step), value) for i in range(MAX_EDIT_FIELDS)]


def _adding() -> tuple[list[Field], int]:
    """MAX_EDIT_FIELDS new fields, and the bytes they add to an object."""
    fields: list[Field] = [("set", f"n{i:04d}", "0") for i in range(MAX_EDIT_FIELDS)]
    return fields, sum(len(dumps(name)) + len(raw) + 2 for _, name, raw in fields)


def _one_value(value: Callable[[int], str]) -> tuple[str, list[Field]]:
    """{"a": value(n)} at the largest n that leaves room for the fields added."""
    fields, room = _adding()
    budget = MAX_OBJECT_BYTES - room - len('{"a":}')
    low, high = 0, 1  # value(n) grows with n: search for the largest that fits
    while len(value(high)) <= budget:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if len(value(mid)) <= budget else (low, mid)
    return '{"a":' + value(low) + "}", fields


def cases() -> list[Case]:
    """Objects at the size cap, in the shapes that cost the scanner most per byte."""
    out: list[Case] = []
    doc, n = _members(lambda i: f'"{i:x}":0', MAX_OBJECT_BYTES)
    out.append(
        Case(
            "many members",
            f"{n:,} members, {MAX_EDIT_FIELDS:,} replaced",
            doc,
            _replacing(n, "{:x}".format),
        )
    )

    # lean.lua's flat edit takes a flat object, scans it all and meets a nested value in its
    # last member: the full edit then runs too (the worst of both)
    doc, n = _members(lambda i: f'"{i:x}":0', MAX_OBJECT_BYTES - len(',"z":[0]'))
    out.append(
        Case(
            "flat, then nested",
            f"{n:,} members, the last nested, {MAX_EDIT_FIELDS:,} replaced",
            doc[:-1] + ',"z":[0]}',
            _replacing(n, "{:x}".format),
        )
    )

    def escaped(i: int) -> str:  # every character of the name as a \u escape
        return "".join(f"\\u{ord(ch):04x}" for ch in f"k{i:x}")

    doc, n = _members(lambda i: f'"{escaped(i)}":0', MAX_OBJECT_BYTES)
    out.append(
        Case("escaped names", f"{n:,} names all \\u escapes", doc, _replacing(n, "k{:x}".format))
    )

    def control(i: int) -> str:  # JSON escapes control characters on both sides
        return "\x01" * 8 + f"{i:x}"

    doc, n = _members(lambda i: f"{json.dumps(control(i))}:0", MAX_OBJECT_BYTES)
    out.append(
        Case(
            "control-char names",
            f"{n:,} names, escaped in the edit too",
            doc,
            _replacing(n, control),
        )
    )
    doc, n = _members(lambda i: f'"{i:x}":"\\"\\n\\u00e9"', MAX_OBJECT_BYTES)
    out.append(
        Case(
            "escaped strings",
            f"{n:,} string values of escapes",
            doc,
            _replacing(n, "{:x}".format, '"\\"\\n\\u00e9"'),
        )
    )
    for name, what, value in (
        ("array of numbers", "one array of single digits", lambda n: "[" + ",".join("0" * n) + "]"),
        ("array of arrays", "one array of []", lambda n: "[" + ",".join(["[]"] * n) + "]"),
        ("nested arrays", "[[[...]]] as deep as it fits", lambda n: "[" * n + "]" * n),
        (
            "nested objects",
            '{"":{"":...}} as deep as it fits',
            lambda n: '{"":' * n + "0" + "}" * n,
        ),
        ("spaced array", "[ 0 , 0 , ... ]", lambda n: "[" + " , ".join("0" * n) + "]"),
    ):
        doc, fields = _one_value(value)
        out.append(Case(name, what, doc, fields))
    for case in out:  # the cases are what they claim: as large as allowed
        assert len(case.stored.encode()) <= MAX_OBJECT_BYTES, case.name
        assert len(case.fields) == MAX_EDIT_FIELDS, case.name
    return out


# --- measuring ------------------------------------------------------------------------------


@contextmanager
def slowlog_everything(store: Store) -> Iterator[None]:
    """Log every command's duration (SLOWLOG), restoring the server's setting after."""
    reply = store.execute(("CONFIG", "GET", "slowlog-log-slower-than"))
    assert isinstance(reply, list) and isinstance(reply[1], bytes)
    store.execute(("CONFIG", "SET", "slowlog-log-slower-than", "0"))
    try:
        yield
    finally:
        store.execute(("CONFIG", "SET", "slowlog-log-slower-than", reply[1]))


def _script_us(store: Store) -> int:
    """The duration of the newest EVAL/EVALSHA in SLOWLOG, in microseconds."""
    entries = store.execute(("SLOWLOG", "GET", "16"))
    assert isinstance(entries, list)
    for entry in entries:  # newest first
        assert isinstance(entry, list) and isinstance(entry[3], list)
        if entry[3][0] in (b"EVAL", b"EVALSHA"):
            duration = entry[2]
            assert isinstance(duration, int)
            return duration
    raise AssertionError("no script run in SLOWLOG")


def server_times_us(store: Store, case: Case, repeats: int) -> list[int]:
    """Run the case's edit ``repeats`` times, each on a fresh copy of its object, and
    return the script's time per run (microseconds). Call inside slowlog_everything."""
    times: list[int] = []
    for _ in range(repeats + 1):  # the first run loads the script (NOSCRIPT, EVAL): not kept
        store.execute(("SET", KEY, case.stored))
        plan = WritePlan()
        plan.edit_object(KEY, case.fields)
        store.execute(("SLOWLOG", "RESET"))
        (doc,) = plan.apply(store)
        assert isinstance(doc, bytes) and len(doc) <= MAX_OBJECT_BYTES, case.name
        times.append(_script_us(store))
    store.execute(("DEL", KEY))
    return times[1:]


def server_runs(store: Store, case: Case, repeats: int) -> list[script_limits.Run]:
    """``server_times_us``, with each run's CPU time in Redis's main thread besides its
    SLOWLOG time (what a run costs whatever else the machine runs)."""
    runs: list[script_limits.Run] = []
    for _ in range(repeats + 1):  # the first run loads the script (NOSCRIPT, EVAL): not kept
        store.execute(("SET", KEY, case.stored))
        plan = WritePlan()
        plan.edit_object(KEY, case.fields)
        store.execute(("SLOWLOG", "RESET"))
        before = script_limits.cpu_us(store)
        (doc,) = plan.apply(store)
        after = script_limits.cpu_us(store)
        assert isinstance(doc, bytes) and len(doc) <= MAX_OBJECT_BYTES, case.name
        runs.append(script_limits.Run(_script_us(store) / 1000, (after - before) / 1000))
    store.execute(("DEL", KEY))
    return runs[1:]


COLUMNS: tuple[Column, ...] = (
    ("case", "case"),
    ("stored object", "what"),
    ("bytes", "bytes"),
    ("fields", "fields"),
    ("median ms", "median_ms"),
    ("max ms", "max_ms"),
)


def measure(store: Store, repeats: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with slowlog_everything(store):
        for case in cases():
            times = server_times_us(store, case, repeats)
            rows.append(
                {
                    "case": case.name,
                    "what": case.what,
                    "bytes": len(case.stored.encode()),
                    "fields": len(case.fields),
                    "median_ms": median(times) / 1000,
                    "max_ms": max(times) / 1000,
                }
            )
    return rows


SCRIPT_COLUMNS: tuple[Column, ...] = (
    ("case", "case"),
    ("script", "script"),
    ("inputs", "what"),
    ("CPU ms (best)", "cpu_best_ms"),
    ("CPU ms (max)", "cpu_max_ms"),
    ("SLOWLOG ms (best)", "slowlog_best_ms"),
    ("SLOWLOG ms (max)", "slowlog_max_ms"),
)

PER_WRITE_COLUMNS: tuple[Column, ...] = (
    ("write", "write"),
    ("apply.lua us", "apply_us"),
    ("lean.lua us", "lean_us"),
    ("lean / apply", "ratio"),
)


def run(server: RedisServer, *, quick: bool) -> dict[str, Any]:
    repeats = 3 if quick else 15
    store = RedisStore.from_url(server.url_for())
    try:
        rows = measure(store, repeats)
    finally:
        store.close()
    # every script at the largest inputs the limits allow (bench/script_limits.py)
    script_rows = script_limits.measure(
        server.url_for(15), 3 if quick else 10
    )  # flushed: its own db
    # the usual writes' Redis time per run, through each write script (same db, flushed)
    per_write = script_limits.per_write_us(server.url_for(15), 500 if quick else 3000)
    worst = max(rows, key=lambda r: r["median_ms"])
    return {
        "repeats": repeats,
        "budget_ms": BUDGET_MS,
        "max_object_bytes": MAX_OBJECT_BYTES,
        "max_edit_fields": MAX_EDIT_FIELDS,
        "largest_edit_median_ms": worst["median_ms"],
        "cases": {r["case"]: r for r in rows},
        "table": table_of(COLUMNS, rows),
        "scripts": {r["case"]: r for r in script_rows},
        "per_write_us": {r["write"]: r for r in per_write},
        "tables": {
            "every_script_at_its_limits": table_of(SCRIPT_COLUMNS, script_rows),
            "redis_time_per_write": table_of(PER_WRITE_COLUMNS, per_write),
        },
        "note": (
            f"Script time per edit from SLOWLOG (n = {repeats} per case): an object of at most "
            f"{MAX_OBJECT_BYTES:,} bytes edited with {MAX_EDIT_FIELDS:,} fields. Slowest case "
            f"({worst['case']}): median {worst['median_ms']:.1f} ms; budget {BUDGET_MS:g} ms. "
            "Every script at its limits: Redis's main-thread CPU time (INFO cpu) and SLOWLOG "
            "per run; SLOWLOG adds whatever the machine ran meanwhile. Redis time per "
            "usual write: INFO commandstats us per EVALSHA of the plan the API sends, "
            "through apply.lua and through lean.lua (where it goes), median of 3 rounds."
        ),
    }

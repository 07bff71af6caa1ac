"""The ACMI conformance suite: the behaviours every ACMI store backend must show.

Plain Python (no pytest), so anyone writing a backend can run it.

Running it on your backend
--------------------------
From Python::

    from acmi_core import Settings, create_acmi
    from acmi_core.testing.conformance import run_conformance

    report = run_conformance(create_acmi(MyStore(), Settings()))
    print(report)      # "N passed, 0 failed, K skipped", then one line per failure and per skip
    if not report.ok:  # a failure (a skip is not one)
        raise SystemExit(1)

Options of :func:`run_conformance`:

- ``raw=``: a side door to the same data, a callable running one Redis command outside your
  backend (e.g. ``lambda cmd: redis.Redis(...).execute_command(*cmd)``). Some checks need it
  to write bytes your transport may not carry (not UTF-8); without it they are *skipped*,
  with the reason in the report.
- ``groups={"store", "profile"}``: only these groups (an unknown name raises ValueError
  naming the known ones).
- ``store_independent=False``: leave out the store-independent checks (below); they are
  listed as "not selected", neither run nor counted. Testing several backends, run them once.
- ``checks=``: an explicit list of :class:`Check` (default: every registered check);
  :func:`select_checks` picks them the way ``groups=`` and ``store_independent=`` do.

From a shell, against the store the environment selects (Upstash when
``UPSTASH_REDIS_REST_URL`` and ``UPSTASH_REDIS_REST_TOKEN`` are set, Redis when
``ACMI_REDIS_URL`` is, else the embedded store)::

    python -m acmi_core.testing.conformance                  # every check
    python -m acmi_core.testing.conformance -g store -g json  # some groups
    python -m acmi_core.testing.conformance --no-store-independent

It prints the report and exits with status 1 when any check failed.

Outcomes
--------
Each check *passed*, *failed* (with what went wrong) or was *skipped* (it cannot run in
this setup, e.g. it needs ``raw=``; the reason is printed). :class:`Report` holds the
three lists plus the checks not selected; ``str(report)`` prints the counts, every failure
and every skip reason. For a test runner, :func:`execute_check` runs one check and raises
(:class:`ConformanceFailure`, :class:`CheckSkipped`) so the traceback is kept.

What it covers
--------------
All 35 checks of the reference TypeScript ACMI's own conformance suite (profile, signals,
timeline, batch, v1.3 auto-fill, rejection of events missing a required field and of
malformed ids, isolation between entities), plus what that suite leaves out: signal key
lengths, non-object profiles, the actor_type enum, summaries over 500 characters, ids over
256, copies for signals and timeline reads, unknown event fields, concurrent writers,
deterministic equal-ts ordering, combined since/until/reverse/limit, invalid limits, batch
atomicity, corrupt stored members, one validation error type, JSON exactness, tenants,
list/delete/get, the store protocol itself, and re-running on a store that holds other data.

By group:

- ``store``: the :class:`~acmi_core.store.base.Store` protocol directly, through
  ``acmi.store``: reply types (bulk strings ``bytes``, integers ``int``, nil ``None``, arrays
  ``list``, status ``b"OK"``), argument encoding, a pipeline that keeps the other results
  around a failed command (its slot holds a ``StoreCommandError``), ``eval`` after
  ``SCRIPT FLUSH``, error replies as ``StoreCommandError`` with their text, bytes that are
  not UTF-8. Every other group goes through the client.
- ``profile``, ``signals``, ``timeline``: round trips, overwrite, merge, delete, read order,
  since/until/limit/reverse, size, payloads, duplicates, equal and fractional timestamps,
  unknown event fields, copies (mutating what went in or came out changes nothing stored).
- ``batch``: every op applied together, all or nothing (a wrong-type key, a corrupt stored
  object, an invalid op or a raising block leaves nothing behind).
- ``autofill``: ``actor_type``, ``speaker_type`` and ``tenant_id`` (ACMI SPEC v1.3).
- ``validation``: entity ids (format, type, 256 characters), signal keys (1-128 characters),
  required event fields, ts, summary length (500), enums, non-object profiles, limits,
  NaN/Infinity: each rejected as ``AcmiValidationError`` naming a field and a rule, with
  nothing stored.
- ``tolerance``: stored members another tool wrote that break a rule (no kind or
  correlationId, snake_case ``correlation_id``, an out-of-range enum, ts or summary, a
  numeric tenant_id, no source or summary: a message, a spawn record) are read verbatim and
  flagged in ``Event.legacy``; only members that are not UTF-8, not JSON, not an object, or
  lack a usable ts are skipped and reported, never raised.
- ``concurrency``: 20-50 concurrent writers on one entity lose nothing (the reference's
  read-modify-write kept 1 of 50).
- ``json``: values Redis's cjson would change (``[]`` vs ``{}``, 12345678901234567,
  escapes, emoji, U+2028) survive exactly, in the stored bytes too.
- ``tenant``, ``isolation``: tenants and entities never see each other's data.
- ``entity``: ``list``, ``delete`` (extension keys included) and ``get``.
- ``locks``: leases exclusive until expiry or release, fencing tokens strictly increasing,
  renew and release only with the owner token, coord-claim/defer/release in the same step
  sharing the lease's correlationId, 20 racing claimants with one winner, ``held_by``.
- ``bootstrap``: every section of the wake bundle from one call (and the spawn it logs), a
  budget kept with its cuts named, no profile in a group bundle.
- ``workflows``: the RL cycle (``acmi.workflows``): execute/assess/improve events and their
  indexes, unassessed steps matched by step and correlationId, lessons of a workflow and of
  an agent's workflows, the lessons feed kept to 1,000, bad scores and steps rejected.
- ``work``: work items (``acmi.work``): create (409 on an existing id), get in one read,
  an event with a session id, and the owner's open index following status changes.
- ``heartbeat``: a heartbeat sets last_heartbeat_ts/status/status_note and moves the agent
  in the activity index, keeping other signals; ``silent_since`` reads that index.
- ``hitl``: HITL queues: idempotent create, deadline order, resolve moving the item to
  closed with ``hitl-resolved`` on the coordination thread, 409 twice, 404 unknown.

Namespacing
-----------
Every check runs in its own :class:`Context`: it writes only to fresh entities inside a
per-run namespace (``user:conf-<token>-<name>-<n>``, categories ``conf-<token>``, tenant
``t-<token>``) and raw keys ``acmi:_conformance:{<token>}:<name>-<n>``, and deletes them
afterwards, so the suite passes on a store that holds other data and can be re-run. The
``store`` tier runs ``SCRIPT FLUSH`` once: on a shared server, every client's next call of
each script costs one extra round trip (NOSCRIPT, then EVAL reloads it).

Store-independent checks
------------------------
Checks tagged ``store=False`` never touch the store: the input is rejected before any store
call, so the outcome is the same on every backend. They run against a client of the same
tenant whose store refuses every call; one that touches it fails, naming the call.

Adding a check
--------------
Write ``def f(ctx: Context) -> None`` in the module of its group (a new group: a new module,
added to ``GROUP_MODULES`` below) and decorate it with ``@check("group", "what it shows")``;
its id is ``group/what it shows``, so keep names stable. Inside:

- use ``ctx.acmi`` (``ctx.acmi.store`` for raw commands), ``ctx.entity()`` and
  ``ctx.key()`` for fresh ids and keys, ``ctx.tenant()`` for a second tenant, ``ctx.category``
  for a category nobody else uses;
- assert with :func:`expect`, :func:`expect_equal` (JSON types compared: ``1 != 1.0``),
  :func:`expect_raises` and :func:`expect_rejected`, never ``assert`` (``python -O`` strips it);
- call ``ctx.require_raw("why")`` for the side door, or ``ctx.skip("why")`` when the
  check cannot run here: it is reported as skipped, never as a silent pass;
- tag it ``store=False`` only when it fails before any store call, every time;
- reuse ``helpers`` (a valid event, raw reads of stored JSON, the auto-filled profile to
  expect, a thread runner) rather than a copy.

Checks registered from your own code with ``@check`` run too (import your module before
calling :func:`run_conformance`); :data:`CHECKS` is the suite's own.
"""

from __future__ import annotations

from importlib import import_module
from typing import Final

from acmi_core.testing.conformance.harness import (
    Check,
    CheckSkipped,
    ConformanceFailure,
    Context,
    Outcome,
    RawWriter,
    Report,
    check,
    execute_check,
    expect,
    expect_equal,
    expect_raises,
    expect_rejected,
    main,
    registered,
    run_check,
    run_conformance,
    same_json,
    select_checks,
)
from acmi_core.testing.conformance.helpers import run_together

GROUP_MODULES: Final = (
    "store",
    "profile",
    "signals",
    "timeline",
    "batch",
    "autofill",
    "validation",
    "tolerance",
    "concurrency",
    "json_exact",  # group "json"
    "isolation",  # groups "tenant" and "isolation"
    "entity",
    "locks",
    "bootstrap",
    "workflows",
    "work",
    "heartbeat",
    "hitl",
)
"""The modules whose import registers the suite's checks, in run (and report) order."""

for _module in GROUP_MODULES:
    import_module(f"{__name__}.{_module}")

CHECKS: Final[tuple[Check, ...]] = registered()
"""Every check of the suite, in run order."""

__all__ = [
    "CHECKS",
    "GROUP_MODULES",
    "Check",
    "CheckSkipped",
    "ConformanceFailure",
    "Context",
    "Outcome",
    "RawWriter",
    "Report",
    "check",
    "execute_check",
    "expect",
    "expect_equal",
    "expect_raises",
    "expect_rejected",
    "main",
    "registered",
    "run_check",
    "run_conformance",
    "run_together",
    "same_json",
    "select_checks",
]

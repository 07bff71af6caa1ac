"""Ours, in a fresh interpreter: the same spec and output as ``bench/contender.cjs``, through
the public API (``Acmi(RedisStore.from_url(...))``), so whatever the store and client do
today is what is measured.

    python -m bench._cpu_worker '<spec>' [--no-hiredis]

``--no-hiredis`` hides the ``hiredis`` module before anything imports redis-py, which then
falls back to its pure-Python reply parser. Only the standard library is imported at the top
for that reason."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acmi_core import Acmi

EVENT: dict[str, Any] = {
    "source": "agent:bench",
    "kind": "note",
    "summary": "hello from the bench",
}

Call = Callable[["Acmi", dict[str, Any], int], object]


def _event(seq: int) -> dict[str, Any]:
    return {**EVENT, "correlationId": f"bench-{seq}"}


def _extend(acmi: Acmi, op: dict[str, Any], seq: int) -> object:
    size: int = op["batch"]
    return acmi.timeline.extend(op["entity"], [_event(seq * size + i) for i in range(size)])


KINDS: dict[str, Call] = {
    "append": lambda a, op, seq: a.timeline.append(op["entity"], _event(seq)),
    "signals.set": lambda a, op, seq: a.signals.set(op["entity"], "k", seq),
    "profile.merge": lambda a, op, seq: a.profile.merge(op["entity"], {"n": seq}),
    "get": lambda a, op, seq: a.get(op["entity"], events=50),
    "batch": _extend,
}


def _loop(acmi: Acmi, op: dict[str, Any], first: int, count: int, out: list[int] | None) -> None:
    call, clock = KINDS[op["kind"]], time.perf_counter_ns
    for i in range(first, first + count):
        t0 = clock()
        call(acmi, op, i)
        if out is not None:
            out.append(clock() - t0)


def _counts(spec: dict[str, Any], op: dict[str, Any]) -> tuple[int, int]:
    """Timed calls and warm-up calls: the op's own when given, else the spec's."""
    return op.get("n", spec["n"]), op.get("warmup", spec["warmup"])


def _single(acmi: Acmi, spec: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    n, warmup = _counts(spec, op)
    _loop(acmi, op, 0, warmup, None)
    ns: list[int] = []
    t0 = time.perf_counter_ns()
    _loop(acmi, op, warmup, n, ns)
    return {"ns": ns, "elapsed_ns": time.perf_counter_ns() - t0, "items": n * op.get("batch", 1)}


def _concurrent(acmi: Acmi, spec: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    """``clients`` threads sharing one Acmi (one store, its connection pool), each appending
    to its own entity; the clock runs from a common start to the last thread's end."""
    (n, warmup), clients = _counts(spec, op), op["clients"]
    ops = [{**op, "entity": f"{op['entity']}-c{i}"} for i in range(clients)]
    per_thread: list[list[int]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []
    start = threading.Barrier(clients + 1)

    def work(i: int) -> None:
        try:
            _loop(acmi, ops[i], 0, warmup, None)  # also opens this thread's connection
            start.wait(timeout=120)
            _loop(acmi, ops[i], warmup, n, per_thread[i])
        except BaseException as exc:  # reported, never silently lost
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait(timeout=120)
    t0 = time.perf_counter_ns()
    for t in threads:
        t.join()
    elapsed = time.perf_counter_ns() - t0
    if errors:
        raise errors[0]
    return {"ns": [x for xs in per_thread for x in xs], "elapsed_ns": elapsed, "items": n * clients}


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    from acmi_core import Acmi, Settings
    from acmi_core.store.redis import RedisStore

    acmi = Acmi(RedisStore.from_url(spec["url"], Settings(store_timeout_s=30.0)))
    try:
        ops = {
            op["name"]: (_concurrent if op.get("clients") else _single)(acmi, spec, op)
            for op in spec["ops"]
        }
    finally:
        acmi.close()
    version = ".".join(map(str, sys.version_info[:3]))
    hiredis = sys.modules.get("hiredis") is not None  # loaded by redis-py (or the store)
    runtime = f"python {version}, " + ("hiredis" if hiredis else "pure-Python parser")
    return {"runtime": runtime, "hiredis": hiredis, "ops": ops}


def main(argv: list[str]) -> int:
    if "--no-hiredis" in argv:
        sys.modules["hiredis"] = None  # type: ignore[assignment]  # `import hiredis` fails
    spec = json.loads(argv[0])
    sys.stdout.write(json.dumps(measure(spec)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

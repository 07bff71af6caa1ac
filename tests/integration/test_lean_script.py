"""lua/lean.lua against lua/apply.lua on every backend: the same plan of plain ops (and a
ONCE record) gives the same results, the same stored keys and the same errors (nothing
written), and WritePlan.apply sends exactly the plans of plain ops, one type a key (a ONCE
key named by that op alone), to lean.lua."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from acmi_core import Acmi, CorruptData
from acmi_core.base.errors import PlanError, StoreCommandError
from acmi_core.store import scripts
from acmi_core.store.base import Arg, Reply
from acmi_core.store.writes import APPLY, LEAN, Replayed, WritePlan, script_error

_counter = itertools.count()

# (op, key slot, arguments): slots name keys of one plan, each of one type
PLANS: list[list[tuple[str, int, tuple[str, ...]]]] = [
    [
        ("ZADD", 0, ("5", "e1")),
        ("ZADD", 0, ("5", "e1")),
        ("ZSET", 1, ("7", "m")),
        ("SADD", 2, ("x",)),
    ],
    [
        ("ZMAX", 1, ("9", "m")),
        ("ZMAX", 1, ("3", "m")),
        ("ZMIN", 3, ("9", "m")),
        ("ZMIN", 3, ("2", "m")),
    ],
    [
        ("ZADD", 0, ("1.5", "a")),
        ("ZREM", 0, ("a",)),
        ("ZADD", 0, ("-inf", "b")),
        ("ZADD", 0, ("+inf", "c")),
    ],
    [
        ("SET", 4, ('{"a":1}',)),
        ("SET", 4, ('{"b":[]}',)),
        ("HSET", 5, ("f", "v")),
        ("HDEL", 5, ("g",)),
    ],
    [("SADD", 2, ("x",)), ("SREM", 2, ("x",)), ("SREM", 2, ("y",)), ("ZADD", 0, ("1e3", "d"))],
    # a webhook delivery: its event, the indexes, its idempotency record (the second run
    # of the same plan is the retried delivery: the record answers, nothing is written)
    [
        ("SADD", 2, ("x",)),
        ("ZSET", 1, ("7", "m")),
        ("ZADD", 0, ("5", "e1")),
        ("ONCE", 4, ("60000", '{"stored":1}')),
    ],
    [("ONCE", 4, ("60000", '{"stored":1}')), ("ZADD", 0, ("5", "e1"))],
]


def _keys(acmi: Acmi) -> list[str]:
    n = next(_counter)
    return [f"acmi:user:lean-{acmi.store.name}-{n}:{slot}" for slot in range(6)]


def _dump(acmi: Acmi, keys: Sequence[str]) -> list[Reply]:
    out: list[Reply] = []
    for key in keys:
        kind = acmi.store.execute(("TYPE", key))
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        read: dict[str, tuple[Arg, ...]] = {
            "zset": ("ZRANGE", key, 0, -1, "WITHSCORES"),
            "set": ("SMEMBERS", key),
            "hash": ("HGETALL", key),
            "string": ("GET", key),
        }
        value = acmi.store.execute(read[kind]) if kind in read else None
        out.append([kind, sorted(value) if kind == "set" and isinstance(value, list) else value])
    return out


def _run(
    acmi: Acmi, script: object, keys: list[str], ops: list[tuple[str, int, tuple[str, ...]]]
) -> object:
    plan_keys: list[str] = []
    args: list[Arg] = []
    for code, slot, op_args in ops:
        if keys[slot] not in plan_keys:
            plan_keys.append(keys[slot])
        args += [code, plan_keys.index(keys[slot]) + 1, *op_args]
    protocol = scripts.LEAN if script is LEAN else scripts.APPLY
    try:
        reply = protocol.eval(
            acmi.store,
            {"plan_keys": plan_keys},
            {"op_count": len(ops), "ops": args},
            script=LEAN if script is LEAN else APPLY,
        )
    except StoreCommandError as exc:
        error = script_error(exc)
        return (type(error).__name__, str(error).replace(keys[0][:-2], "K"))
    if reply.tag == "ACMI_REPLAY":
        return ("replay", reply["stored"])
    return reply["results"]


@pytest.mark.parametrize("ops", PLANS, ids=range(len(PLANS)))
def test_a_plan_gives_what_apply_gives(
    acmi: Acmi, ops: list[tuple[str, int, tuple[str, ...]]]
) -> None:
    lean_keys, apply_keys = _keys(acmi), _keys(acmi)
    assert _run(acmi, LEAN, lean_keys, ops) == _run(acmi, APPLY, apply_keys, ops)
    assert _dump(acmi, lean_keys) == _dump(acmi, apply_keys)
    # run again on what the first run left: duplicates, scores that only rise or fall
    assert _run(acmi, LEAN, lean_keys, ops) == _run(acmi, APPLY, apply_keys, ops)
    assert _dump(acmi, lean_keys) == _dump(acmi, apply_keys)


@pytest.mark.parametrize(
    ("blocker", "ops"),
    [
        (("SET", 2, "text"), PLANS[0]),  # the set index holds a string: after two ZADDs
        (("SADD", 0, "x"), PLANS[0]),  # the timeline holds a set: the first op's key
        (("RPUSH", 4, "x"), PLANS[3]),
        (("SET", 5, "x"), PLANS[3]),
        (("SADD", 4, "x"), PLANS[5]),  # the record's key holds a set
    ],
)
def test_a_key_of_another_type_refuses_the_whole_plan(
    acmi: Acmi, blocker: tuple[str, int, str], ops: list[tuple[str, int, tuple[str, ...]]]
) -> None:
    command, slot, value = blocker
    lean_keys, apply_keys = _keys(acmi), _keys(acmi)
    for keys in (lean_keys, apply_keys):
        acmi.store.execute((command, keys[slot], value))
    lean = _run(acmi, LEAN, lean_keys, ops)
    assert lean == _run(acmi, APPLY, apply_keys, ops)
    assert (
        isinstance(lean, tuple)
        and lean[0] == CorruptData.__name__
        and "nothing was written" in lean[1]
    )
    assert _dump(acmi, lean_keys) == _dump(acmi, apply_keys)
    written = [k for i, k in enumerate(lean_keys) if i != slot]
    assert [acmi.store.execute(("EXISTS", k)) for k in written] == [0] * len(written)


@pytest.mark.parametrize("ttl", ["0", "-5", "1.5", "x", "1" * 16])
def test_a_bad_once_ttl_is_a_plan_error_and_nothing_is_written(acmi: Acmi, ttl: str) -> None:
    ops = [("ZADD", 0, ("1", "a")), ("ONCE", 4, (ttl, "v"))]
    keys = _keys(acmi)
    for script in (LEAN, APPLY):
        outcome = _run(acmi, script, keys, ops)
        assert isinstance(outcome, tuple) and outcome[0] == PlanError.__name__, outcome
        assert "ttl_ms is not a positive integer" in outcome[1]
    assert [acmi.store.execute(("EXISTS", k)) for k in keys] == [0] * len(keys)


def test_a_once_key_named_by_another_op_is_refused_by_lean(acmi: Acmi) -> None:
    """WritePlan never sends such a plan to lean.lua (apply.lua reads a ONCE key as the
    ops before left it); lean.lua refuses one it is sent, nothing written."""
    keys = _keys(acmi)
    for ops in (
        [("SET", 4, ("v",)), ("ONCE", 4, ("1000", "w"))],
        [("ONCE", 4, ("1000", "w")), ("SET", 4, ("v",))],
        [("ONCE", 4, ("1000", "w")), ("ONCE", 4, ("1000", "x"))],
    ):
        outcome = _run(acmi, LEAN, keys, ops)
        assert isinstance(outcome, tuple) and outcome[0] == PlanError.__name__, outcome
        assert "names a ONCE key" in outcome[1]
    assert acmi.store.execute(("EXISTS", keys[4])) == 0


@pytest.mark.parametrize("score", ["nan", "0x10", "1e999", "1e-999", "", "inf5"])
def test_a_bad_score_is_a_plan_error_and_nothing_is_written(acmi: Acmi, score: str) -> None:
    ops = [("SADD", 2, ("x",)), ("ZADD", 0, ("1", "a")), ("ZSET", 1, (score, "m"))]
    keys = _keys(acmi)
    outcome = _run(acmi, LEAN, keys, ops)
    assert isinstance(outcome, tuple) and outcome[0] == PlanError.__name__, outcome
    assert "score is not a number" in outcome[1]
    assert [acmi.store.execute(("EXISTS", k)) for k in keys] == [0] * len(keys)


def test_plain_plans_go_to_lean_and_others_to_apply(acmi: Acmi) -> None:
    keys = _keys(acmi)
    plain = WritePlan()
    plain.zadd(keys[0], 1, "a")
    plain.zset(keys[1], 2, "m")
    plain.sadd(keys[2], "x")
    assert plain._lean is not None
    assert plain.apply(acmi.store) == [1, 0, 0]
    edits = WritePlan()  # object edits are lean too: two of one key, the second sees the first
    edits.sadd(keys[2], "y")
    edits.edit_object(keys[4], [("set", "a", "1")])
    edits.edit_object(keys[4], [("setnx", "a", "2"), ("set", "b", "[]")])
    assert edits._lean is not None
    replies = [r.decode() if isinstance(r, bytes) else r for r in edits.apply(acmi.store)]
    assert replies == [0, '{"a":1}', '{"a":1,"b":[]}']
    mixed_type = WritePlan()
    mixed_type.set(keys[3], "{}")
    mixed_type.zadd(keys[3], 1, "a")  # apply.lua tracks the type the SET leaves
    assert mixed_type._lean is None
    with pytest.raises(CorruptData, match="nothing was written"):
        mixed_type.apply(acmi.store)
    assert acmi.store.execute(("EXISTS", keys[3])) == 0
    for build in (
        lambda p: p.delete(keys[4]),
        # a SET then an edit of one key: apply.lua edits what the SET left
        lambda p: (p.set(keys[4], "{}"), p.edit_object(keys[4], [("set", "a", "1")])),
        lambda p: p.zhead(keys[4], "m", keys[0]),
        lambda p: p.zkeep(keys[4], 3),
        lambda p: p.take(keys[4]),
        # a ONCE key that another op names, or a second ONCE: apply.lua's reading of it
        lambda p: (p.set(keys[4], "{}"), p.once(keys[4], 1000, "v")),
        lambda p: (p.once(keys[4], 1000, "v"), p.sadd(keys[4], "x")),
        lambda p: (p.once(keys[4], 1000, "v"), p.once(keys[3], 1000, "v")),
    ):
        other = WritePlan()
        other.sadd(keys[5], "x")
        build(other)
        assert other._lean is None
    delivery = WritePlan()  # a webhook delivery: its event and its record
    delivery.zadd(keys[0], 1, "b")
    delivery.once(keys[3], 60_000, '{"stored":1}')
    assert delivery._lean is not None
    assert delivery.apply(acmi.store) == [1, 0]
    with pytest.raises(Replayed) as replay:
        delivery.apply(acmi.store)
    assert replay.value.previous == b'{"stored":1}'
    assert acmi.store.execute(("ZCARD", keys[0])) == 2  # a and b, nothing more

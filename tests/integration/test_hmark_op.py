"""WritePlan.hmark (apply.lua's and lean.lua's HMARK) on every backend: the field is set,
and marked "1" in the pass only while the pass exists (never created); a pass of another
type refuses the whole plan; both scripts give the same results and stored keys."""

from __future__ import annotations

import itertools

import pytest

from acmi_core import Acmi, CorruptData
from acmi_core.store.writes import WritePlan

_counter = itertools.count()


def _keys(acmi: Acmi) -> tuple[str, str, str]:
    n = next(_counter)
    base = f"acmi:user:hmark-{acmi.store.name}-{n}"
    return f"{base}:vectors", f"{base}:pass", f"{base}:other"


def _plan(vectors: str, mark: str, field: str, lean: bool, other: str) -> WritePlan:
    plan = WritePlan()
    plan.hmark(vectors, field, "v-" + field, mark)
    if not lean:  # a ZHEAD sends the plan to apply.lua
        plan.zhead(other, "m", other)
    assert (plan._lean is not None) is lean
    return plan


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "apply"])
def test_hmark_marks_only_a_pass_that_exists(acmi: Acmi, lean: bool) -> None:
    vectors, mark, other = _keys(acmi)
    _plan(vectors, mark, "d1", lean, other).apply(acmi.store)
    assert acmi.store.execute(("HGET", vectors, "d1")) == b"v-d1"
    assert acmi.store.execute(("EXISTS", mark)) == 0  # no pass: none created
    acmi.store.execute(("HSET", mark, "~pass", "p1"))
    _plan(vectors, mark, "d2", lean, other).apply(acmi.store)
    assert acmi.store.execute(("HGET", mark, "d2")) == b"1"
    assert acmi.store.execute(("HGET", vectors, "d2")) == b"v-d2"
    acmi.store.execute(("DEL", mark))
    acmi.store.execute(("SET", mark, "text"))
    with pytest.raises(CorruptData, match="nothing was written"):
        _plan(vectors, mark, "d3", lean, other).apply(acmi.store)
    assert acmi.store.execute(("HEXISTS", vectors, "d3")) == 0


def test_a_pass_named_as_another_kind_sends_the_plan_to_apply(acmi: Acmi) -> None:
    vectors, mark, _ = _keys(acmi)
    plan = WritePlan()
    plan.sadd(mark, "x")
    plan.hmark(vectors, "d1", "v", mark)
    assert plan._lean is None
    with pytest.raises(CorruptData, match="nothing was written"):
        plan.apply(acmi.store)  # apply.lua: the SADD left a set where HMARK needs a hash
    assert acmi.store.execute(("EXISTS", vectors)) == 0

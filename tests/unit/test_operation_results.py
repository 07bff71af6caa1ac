"""Every row's declared result type is what its core callable says it returns.

(That real answers are of that type is held where each capability's answers are made,
with ``tests.results.assert_result``.)"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union, get_args, get_origin, is_typeddict

import pytest
from pydantic import BaseModel

from acmi_core.base.stored import StoredObject, StoredValue
from acmi_core.operations import OPERATIONS, Operation
from tests.results import assert_closed, resolve

# The operations that serve stored JSON as written (a profile, the signals, a rollup):
# "JSON" is their whole shape, declared by name, never as Any.
STORED_JSON = (StoredObject, StoredValue)

DECLARED = [row for row in OPERATIONS if row.result is not None]


def _unwrapped(kind: Any) -> set[Any]:
    """The members of a union (an optional answer, or a signal's value or the default the
    caller gave), None aside; anything else is itself."""
    if get_origin(kind) in (Union, types.UnionType):
        return set(get_args(kind)) - {type(None)}
    return {kind}


def _typed(kind: Any) -> bool:
    """A declared shape: a TypedDict, a pydantic model or a dataclass (its fields typed;
    its JSON body, ``to_dict``, a TypedDict of its own), a str/bytes/None answer, or a
    list, tuple or optional of those; never ``Any`` or a bare ``dict[str, Any]``."""
    if kind in (str, bytes, type(None), bool, int, *STORED_JSON) or is_typeddict(kind):
        return True
    if dataclasses.is_dataclass(kind):
        return True
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return True
    origin = get_origin(kind)
    if origin in (list, tuple, Union, types.UnionType):
        return all(_typed(a) for a in get_args(kind) if a is not Ellipsis)
    return False


@pytest.mark.parametrize("row", DECLARED, ids=lambda row: row.name)
def test_the_declared_result_is_the_core_callables_return_type(row: Operation) -> None:
    assert row.call is not None, f"{row.name}: a result type needs a core callable"
    kind = resolve(row.result or "")
    returned = typing.get_type_hints(resolve(row.call))["return"]
    assert returned == kind or kind in _unwrapped(returned), (row.name, returned, kind)
    assert _typed(kind), f"{row.name}: {kind} declares no shape"


def test_every_row_with_a_core_callable_declares_its_result() -> None:
    missing = [row.name for row in OPERATIONS if row.call and row.result is None]
    assert not missing


def test_a_shape_is_declared_and_any_is_not() -> None:
    class Answer(typing.TypedDict):
        id: str

    assert _typed(Answer) and _typed(list[Answer]) and _typed(Answer | None)
    assert not _typed(dict[str, Any]) and not _typed(Any) and not _typed(list[Any])
    assert _typed(StoredObject) and _typed(list[StoredObject]) and _typed(StoredValue)


def test_the_check_refuses_an_undeclared_key_and_a_missing_one() -> None:
    class Answer(typing.TypedDict):
        id: str

    assert_closed(Answer, {"id": "x"}, "answer")
    with pytest.raises(AssertionError, match="not declared"):
        assert_closed(Answer, {"id": "x", "extra": 1}, "answer")
    with pytest.raises(AssertionError, match="requires"):
        assert_closed(Answer, {}, "answer")
    with pytest.raises(AssertionError, match="not declared"):
        assert_closed(list[Answer], [{"id": "x"}, {"id": "y", "z": 0}], "answers")

"""Holds a real answer to the result type its operation row declares (``Operation.result``).

The declared types are TypedDicts, so what the core returns is still the plain dict whose
JSON is the contract; this check makes the declaration true of real answers: every key the
type requires is there, no key it does not declare is, and each value validates (pydantic)
against its declared type, nested TypedDicts held the same way."""

from __future__ import annotations

import functools
import sys
import types
import typing
from typing import Any, Union, get_args, get_origin, is_typeddict

import typing_extensions
from pydantic import TypeAdapter

from acmi_core.operations import operation
from acmi_core.operations.bind import resolve


def declared(row_name: str) -> Any:
    row = operation(row_name)
    assert row.result is not None, f"{row_name} declares no result type"
    return resolve(row.result)


def assert_result(row_name: str, value: Any) -> None:
    """``value`` (a core answer, or the JSON body a surface printed) is of ``row_name``'s
    declared result type."""
    kind = declared(row_name)
    TypeAdapter(portable(kind)).validate_python(value)
    assert_closed(kind, value, row_name)


def portable(kind: Any) -> Any:
    """``kind`` as pydantic validates it on this Python: before 3.12 it refuses a
    ``typing.TypedDict`` (only ``typing_extensions``' will do), so each one, nested ones
    too, is rebuilt as the same ``typing_extensions.TypedDict``."""
    return kind if sys.version_info >= (3, 12) else _portable(kind)


@functools.cache
def _portable(kind: Any) -> Any:
    origin, args = get_origin(kind), get_args(kind)
    if is_typeddict(kind):
        fields: dict[str, Any] = {}
        for name, given in typing.get_type_hints(kind, include_extras=True).items():
            hint = given
            while get_origin(hint) in (typing.Required, typing.NotRequired):
                hint = get_args(hint)[0]
            required = name in kind.__required_keys__
            wrap = typing_extensions.Required if required else typing_extensions.NotRequired
            fields[name] = wrap[_portable(hint)]
        return typing_extensions.TypedDict(kind.__name__, fields)  # type: ignore[operator]
    if origin is typing.Annotated:
        return typing.Annotated[(_portable(args[0]), *kind.__metadata__)]
    if origin in (Union, types.UnionType):
        return Union[tuple(_portable(a) for a in args)]  # noqa: UP007  (built from a tuple)
    if origin in (list, dict, tuple) and args:
        return origin[tuple(a if a is Ellipsis else _portable(a) for a in args)]
    return kind


def assert_closed(kind: Any, value: Any, where: str) -> None:
    """No undeclared key anywhere a TypedDict is declared (pydantic ignores extras)."""
    if value is None:
        return
    origin = get_origin(kind)
    if origin is typing.Annotated:
        assert_closed(get_args(kind)[0], value, where)
    elif origin in (Union, types.UnionType):
        candidates = [a for a in get_args(kind) if a is not type(None)]
        if len(candidates) == 1:
            assert_closed(candidates[0], value, where)
    elif origin in (list, tuple) and isinstance(value, list | tuple):
        (item, *_) = get_args(kind) or (Any,)
        for n, element in enumerate(value):
            assert_closed(item, element, f"{where}[{n}]")
    elif origin is dict and isinstance(value, dict):
        _, item = get_args(kind) or (Any, Any)
        for key, element in value.items():
            assert_closed(item, element, f"{where}.{key}")
    elif is_typeddict(kind):
        assert isinstance(value, dict), f"{where}: {type(value).__name__}, not an object"
        hints = typing.get_type_hints(kind, include_extras=True)
        extra = sorted(set(value) - set(hints))
        assert not extra, f"{where}: keys {extra} are not declared by {kind.__name__}"
        missing = sorted(kind.__required_keys__ - set(value))
        assert not missing, f"{where}: {kind.__name__} requires {missing}"
        for key, element in value.items():
            assert_closed(hints[key], element, f"{where}.{key}")

"""The mapping language of webhook sources: event field -> a dotted path into the body (list
items by index), or ``=literal``; ``category`` is a name. Checked once (:func:`check_mapping`:
stored mappings when set, URL mappings per request), then read per item (:class:`MappedItem`).
Make, n8n and generic sources use it (``ingest/mappers.py``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import check_category
from acmi_core.ingest.webhook import ENTITY_UNSAFE, WebhookBody

# Generic mappings: event field -> dotted path into the body, or '=literal'.
MAPPING_FIELDS: Final = (
    "entity",
    "category",
    "kind",
    "summary",
    "correlationId",
    "parentCorrelationId",
    "ts",
    "payload",
)
# A mapping path: at most this long (a '=literal' too: a mapped summary fits), and at
# most this many dotted segments (bodies nest at most 64 levels: deeper cannot match).
MAX_MAPPING_PATH_LEN: Final = 512
MAX_MAPPING_PATH_SEGMENTS: Final = 64
# A list index in a path: ASCII digits only ('²' is a digit to str.isdigit(), not to
# int()), and at most 9 of them (no body holds a billion items); anything else is only
# ever an object key.
LIST_INDEX_RE: Final = re.compile(r"[0-9]{1,9}")

MISSING: Final = object()  # what a path that finds nothing reads


def check_mapping(mapping: object, field: str = "mapping") -> dict[str, str]:
    """A mapping of event fields to dotted paths or '=literal's, checked once (stored
    mappings when set, URL mappings per request) so that lookups need no checks."""
    if not isinstance(mapping, dict):
        raise AcmiValidationError(field, "object", "must be an object of field -> path")
    for name, path in mapping.items():
        where = f"{field}.{name}"
        if name not in MAPPING_FIELDS:
            raise AcmiValidationError(
                where, "unknown", f"must be one of {', '.join(MAPPING_FIELDS)}"
            )
        if not isinstance(path, str) or not path:
            raise AcmiValidationError(where, "type", "must be a non-empty string")
        if name == "category":
            check_category(path.removeprefix("="), where)
        if len(path) > MAX_MAPPING_PATH_LEN:
            raise AcmiValidationError(
                where, "max_length", f"must be at most {MAX_MAPPING_PATH_LEN} characters"
            )
        if not path.startswith("=") and path.count(".") >= MAX_MAPPING_PATH_SEGMENTS:
            raise AcmiValidationError(
                where,
                "max_segments",
                f"must have at most {MAX_MAPPING_PATH_SEGMENTS} dotted segments",
            )
    return mapping


def merged_mapping(webhook: WebhookBody) -> dict[str, str]:
    """The stored mapping with the URL's ``map.<field>=<path>`` parameters over it."""
    from_query = {k[4:]: v for k, v in webhook.query.items() if k.startswith("map.")}
    return check_mapping({**(webhook.configured_mapping or {}), **from_query}, "mapping")


def generic_mapping(webhook: WebhookBody) -> dict[str, str]:
    """The merged mapping, which a generic source cannot do without."""
    mapping = merged_mapping(webhook)
    if not mapping:
        raise AcmiValidationError(
            "mapping",
            "required",
            "generic sources need a mapping: query map.<field>=<dotted.path> "
            f"(fields: {', '.join(MAPPING_FIELDS)}) or one stored with `acmi sources set`",
        )
    return mapping


def _lookup(data: Any, path: str) -> Any:
    """The value at a dotted path (list items by index), ``=literal``, or MISSING."""
    if path.startswith("="):
        return path[1:]
    if path in ("$", "."):
        return data
    current = data
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif (
            isinstance(current, list) and LIST_INDEX_RE.fullmatch(part) and int(part) < len(current)
        ):
            current = current[int(part)]
        else:
            return MISSING
    return current


# Mapped fields an item must have: naming them in the mapping promises they are there,
# and a path that finds nothing is a mistake (a typo, another sender's shape) to report,
# not to paper over with a derived value. A parent and a payload may be absent.
_REQUIRED_WHEN_MAPPED: Final = frozenset({"entity", "kind", "summary", "correlationId", "ts"})


class MappedItem:
    """One body item read through the mapping."""

    def __init__(self, mapping: Mapping[str, str], item: dict[str, Any], where: str) -> None:
        self.mapping, self.item, self.where = mapping, item, where

    def get(self, name: str) -> Any:
        path = self.mapping.get(name)
        if path is None:
            return MISSING
        if name == "category":
            # A category is a name, never a path: 'customer' (the '=customer' of stored
            # mappings that predate this rule means the same).
            return path.removeprefix("=")
        value = _lookup(self.item, path)
        if value is MISSING and name in _REQUIRED_WHEN_MAPPED:
            raise AcmiValidationError(
                f"{self.where}.{path}", "required", f"mapped to {name} but not in the body"
            )
        return value

    def text(self, name: str) -> str | None:
        """A mapped string, or an integer as its digits (ids are often numbers)."""
        value = self.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value if isinstance(value, str) else None

    def entity(self) -> str | None:
        """The mapped entity; a bare id becomes ``<category>:<id>`` when category is mapped
        (each run of characters outside ``[A-Za-z0-9_.-]`` in the id becomes one ``_``)."""
        entity, category = self.text("entity"), self.get("category")
        if entity is not None and isinstance(category, str):
            return f"{category}:{ENTITY_UNSAFE.sub('_', entity)}"
        return entity

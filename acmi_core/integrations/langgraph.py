"""``AcmiStore``: LangGraph's long-term memory store (``langgraph.store.base.BaseStore``)
over ACMI, one tenant's (the client's). ``pip install 'acmi[langgraph]'``.

    from acmi_core import create_acmi
    from acmi_core.integrations.langgraph import AcmiStore

    store = AcmiStore(create_acmi())
    graph = builder.compile(store=store)

Where things live (``acmi_core.entities.items`` has the layout): a namespace is one
entity, ``ns:<labels escaped, joined by '.'>``, its items one HASH slot of it
(``store:items``), and the tenant's namespaces one sorted set kept by the same script run
as each put and delete. Nothing of it is in a profile or signals.

What each op does, and where it differs from ``InMemoryStore``:

- ``batch`` runs the reads first, on the state before the batch, then every put and
  delete in one script run (the last write of a (namespace, key) wins), as
  ``InMemoryStore`` does; ``abatch`` runs ``batch`` on a worker thread.
- ``GetOp``: the gets of a batch are one pipeline.
- ``PutOp``: the value is guarded by the tenant's secret policy (``Acmi.guard``: redacted
  or refused) and is at most 64 KiB as stored; an overwrite keeps ``created_at``
  (``InMemoryStore`` resets it). ``value=None`` deletes. ``index`` is ignored (no
  embedding index).
- ``SearchOp``: items in namespace order (LangGraph's tuple order), then by key within a
  namespace; ``filter`` as ``InMemoryStore`` reads it (equality, nested dicts, lists,
  ``$eq $ne $gt $gte $lt $lte``); ``query`` ranks the filtered items lexically: the share
  of the query's words found in the value's text (its strings and keys), ties kept in
  order, every filtered item returned with its ``score`` (no embeddings: an index can
  replace ``_score`` later). Without a query, reading stops once ``offset + limit``
  matches are found.
- ``ListNamespacesOp``: prefix and suffix conditions with ``*`` wildcards, ``max_depth``,
  ``limit``, ``offset``, sorted. A namespace is listed while it holds an item (as
  LangGraph's Postgres store; ``InMemoryStore`` keeps listing a namespace once touched,
  even by a get).
- TTL (``supports_ttl``): ``ttl`` on put (minutes), the store's ``ttl`` config
  (``default_ttl``, ``refresh_on_read``), ``refresh_ttl`` per get and search. An expired
  item is never returned (``omit_expired`` always on); ``sweep_ttl()`` deletes expired
  items (a namespace whose items all expired stays listed until then).
  ``sweep_interval_minutes`` is refused rather than ignored: no thread sweeps on its
  own, a Lambda function has none to keep; call ``sweep_ttl()`` from a scheduled job.

Bounds (README limits): one read visits at most ``MAX_SCAN_ITEMS`` items and
``MAX_SCAN_NAMESPACES`` namespaces and refuses past them (413 naming the rule).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from acmi_core.base.errors import AcmiValidationError
from acmi_core.client import Acmi
from acmi_core.entities.items import SWEEP_ITEMS, ItemWrite, StoredItem

_WORD = re.compile(r"\w+")


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _item(stored: StoredItem) -> Item:
    return Item(
        value=stored.value,
        key=stored.key,
        namespace=stored.namespace,
        created_at=_time(stored.created_at),
        updated_at=_time(stored.updated_at),
    )


def _search_item(stored: StoredItem, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=stored.namespace,
        key=stored.key,
        value=stored.value,
        created_at=_time(stored.created_at),
        updated_at=_time(stored.updated_at),
        score=score,
    )


# --- filters, as LangGraph's InMemoryStore reads them ---------------------------------------


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        try:
            left, right = float(value), float(operand)
        except (TypeError, ValueError):
            return False  # a missing or non-numeric field does not match (no 500)
        return {
            "$gt": left > right,
            "$gte": left >= right,
            "$lt": left < right,
            "$lte": left <= right,
        }[operator]
    raise AcmiValidationError("filter", "operator", f"unsupported operator {operator!r}")


def _matches(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_operator(value, k, v) for k, v in wanted.items())
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_matches(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _passes(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    return not filter or all(_matches(value.get(k), v) for k, v in filter.items())


# --- lexical ranking --------------------------------------------------------------------------


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v)
    elif value is not None:
        yield str(value)


def _score(query_words: set[str], value: dict[str, Any]) -> float:
    """The share of the query's distinct words found in the value's text, 0..1."""
    if not query_words:
        return 0.0
    words = {w for text in _texts(value) for w in _WORD.findall(text.lower())}
    return len(query_words & words) / len(query_words)


# --- namespaces -------------------------------------------------------------------------------


def _condition_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise AcmiValidationError(
            "match_conditions", "match_type", f"unsupported match type {condition.match_type!r}"
        )
    return all(p in ("*", n) for n, p in pairs)


def _literal_prefix(conditions: Iterable[MatchCondition]) -> tuple[str, ...]:
    """The longest exact prefix the conditions require: the range of the index to read."""
    best: tuple[str, ...] = ()
    for condition in conditions:
        if condition.match_type != "prefix":
            continue
        labels: list[str] = []
        for label in condition.path:
            if label == "*":
                break
            labels.append(label)
        if len(labels) > len(best):
            best = tuple(labels)
    return best


class AcmiStore(BaseStore):
    """A LangGraph ``BaseStore`` over one ACMI tenant (the module docstring says how)."""

    supports_ttl = True

    def __init__(self, acmi: Acmi, *, ttl: TTLConfig | None = None) -> None:
        if ttl and ttl.get("sweep_interval_minutes"):
            raise AcmiValidationError(
                "ttl.sweep_interval_minutes",
                "unsupported",
                "AcmiStore runs no sweeper thread: expired items are never returned; call "
                "sweep_ttl() from a scheduled job to delete them",
            )
        self.acmi = acmi
        self.ttl_config = ttl

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        gets = [(i, op) for i, op in enumerate(ops) if isinstance(op, GetOp)]
        if gets:
            found = self.acmi.items.get_many([(op.namespace, op.key) for _, op in gets])
            self.acmi.items.refresh(
                [s for (_, op), s in zip(gets, found, strict=True) if s and op.refresh_ttl]
            )
            for (i, _), stored in zip(gets, found, strict=True):
                results[i] = None if stored is None else _item(stored)
        writes: list[ItemWrite] = []
        for i, op in enumerate(ops):
            if isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif isinstance(op, PutOp):
                value = None if op.value is None else dict(op.value)
                writes.append(ItemWrite(tuple(op.namespace), op.key, value, op.ttl))
            elif not isinstance(op, GetOp):
                raise AcmiValidationError("op", "type", f"unknown operation {type(op).__name__}")
        if writes:
            self.acmi.items.write(writes)
        return results

    def sweep_ttl(self, *, max_items: int | None = None) -> int:
        """Delete expired items of the tenant, as LangGraph's Postgres store's
        ``sweep_ttl``: runs of at most ``SWEEP_ITEMS`` (one read and one script run each)
        until none is left or ``max_items`` went. Returns how many were deleted. Run it
        from a scheduled job; reads never return an expired item meanwhile."""
        done = 0
        while max_items is None or done < max_items:
            step = SWEEP_ITEMS if max_items is None else min(SWEEP_ITEMS, max_items - done)
            went = self.acmi.items.sweep(step)
            done += went
            if went < step:
                break
        return done

    async def asweep_ttl(self, *, max_items: int | None = None) -> int:
        return await asyncio.to_thread(self.sweep_ttl, max_items=max_items)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # the client is synchronous and thread-safe: a worker thread keeps the loop free
        return await asyncio.to_thread(self.batch, list(ops))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise AcmiValidationError("limit", "non_negative", "limit and offset are >= 0")
        stop = None if op.query else op.offset + op.limit
        matches: list[StoredItem] = []
        if stop != 0:
            for stored in self.acmi.items.scan(op.namespace_prefix):
                if _passes(stored.value, op.filter):
                    matches.append(stored)
                    if len(matches) == stop:
                        break
        scores: list[float | None] = [None] * len(matches)
        if op.query:
            words = set(_WORD.findall(op.query.lower()))
            ranked = sorted(
                ((_score(words, s.value), n, s) for n, s in enumerate(matches)),
                key=lambda t: (-t[0], t[1]),
            )
            matches = [s for _, _, s in ranked]
            scores = [score for score, _, _ in ranked]
        page = slice(op.offset, op.offset + op.limit)
        kept, kept_scores = matches[page], scores[page]
        if op.refresh_ttl:
            self.acmi.items.refresh(kept)
        return [_search_item(s, score) for s, score in zip(kept, kept_scores, strict=True)]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        if op.limit < 0 or op.offset < 0:
            raise AcmiValidationError("limit", "non_negative", "limit and offset are >= 0")
        conditions = tuple(op.match_conditions or ())
        found: list[tuple[str, ...]] = []
        stop = op.offset + op.limit
        if stop == 0:
            return []
        for namespace in self.acmi.items.namespaces(_literal_prefix(conditions)):
            if not all(_condition_matches(c, namespace) for c in conditions):
                continue
            shown = namespace if op.max_depth is None else namespace[: op.max_depth]
            # the index is in tuple order, so truncated namespaces repeat side by side
            if found and found[-1] == shown:
                continue
            found.append(shown)
            if len(found) == stop:
                break
        return found[op.offset : stop]


__all__ = ["AcmiStore"]

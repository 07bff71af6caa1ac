"""Namespaced items: the long-term memory store's core (``acmi.items``), what the LangGraph
store (``acmi_core.integrations.langgraph``) runs on, per tenant.

The layout (keys built in ``acmi_core/base/keys.py``):

- A namespace, a tuple of labels such as ``("users", "alice", "prefs")``, is one entity:
  ``ns:<labels, each escaped, joined by '.'>``. A label keeps ``A-Z a-z 0-9 -`` and
  writes every other character as ``_`` and two upper-case hex digits per UTF-8 byte
  (``_`` is ``_5F``), so the id passes the entity id rules and decodes back to the tuple
  (``namespace_id`` / ``namespace_of``); it is at most ``MAX_ENTITY_LEN`` characters.
- Its items are one HASH, the entity's ``store:items`` slot: key -> the item's JSON
  ``{"created_at": ms, "updated_at": ms, "ttl": minutes | null, "expires_at": ms | null,
  "value": {...}}``. A slot of its own: never the profile or signals, so no replace of
  those erases an item.
- The entity is in its category's list (``acmi list ns``) from its first put until
  ``acmi delete ns:<id>``, which deletes its items and its index entry too.
- The tenant's namespace index (``keys.store_namespaces``) is a ZSET, every score 0,
  member the labels each followed by NUL (a label holds no NUL): Redis's byte order is
  Python's tuple order, and a prefix is one ZRANGEBYLEX range. A namespace is in it
  while it holds an item: each put and delete keeps it in the same script run
  (apply.lua ``ZHAS``).
- An item with a TTL is also in the tenant's expiry index (``keys.store_expiry``,
  member ``<namespace member><key>``, score the ms it expires at). A read never
  returns an expired item; a read that refreshes moves the expiry forward with
  ``ZADD XX GT`` (a put or delete that landed in between is never undone). ``sweep``
  deletes expired items from that index (apply.lua ``HDUE``: only what is still
  expired in its run), at most ``SWEEP_ITEMS`` a run.

Costs: a batch of puts and deletes is one round trip (one ``WritePlan``, split only past
``WRITES_PER_PLAN`` writes or ``WRITE_PLAN_BYTES``; 200 overwrites of items at the object
cap with TTLs cost Redis ~5 ms, bench/script_limits.py); gets are one pipeline; a
namespace's items are read with HSCAN in pages of ``SCAN_PAGE`` (one round trip each,
plus one ZMSCORE when items have a TTL); the namespace index in pages of
``NAMESPACE_PAGE``. One read visits at most
``MAX_SCAN_ITEMS`` items and ``MAX_SCAN_NAMESPACES`` namespaces, and refuses (413,
naming the rule) past them rather than answer from part of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from acmi_core.base.errors import AcmiValidationError, CorruptData, PayloadTooLarge
from acmi_core.base.model import MAX_ENTITY_LEN, MAX_OBJECT_BYTES, EntityId, json_object_text
from acmi_core.entities.context import Context
from acmi_core.store.writes import WritePlan

NAMESPACE_CATEGORY: Final = "ns"
MAX_KEY_BYTES: Final = 1024  # an item's key, in UTF-8 bytes (a HASH field)
MAX_LABELS: Final = 32  # labels in one namespace
# HSCAN COUNT: items asked for per round trip; at most 8 MiB of items at the object cap
SCAN_PAGE: Final = 128
NAMESPACE_PAGE: Final = 1000  # namespaces read from the index per round trip
MAX_SCAN_ITEMS: Final = 10_000  # items one read may visit
MAX_SCAN_NAMESPACES: Final = 10_000  # namespaces one read may visit
WRITES_PER_PLAN: Final = 200  # puts and deletes per script run (MAX_REQUEST_ARGS)
SWEEP_ITEMS: Final = 200  # expired items one sweep run deletes (6 arguments each)
# bytes of item text per script run: 512 KiB of HSETs is a few ms of Redis time, where 200
# items at the 64 KiB cap (12.5 MiB) would pass MAX_REQUEST_BYTES and block Redis for long
WRITE_PLAN_BYTES: Final = 512 * 1024
_SEP: Final = "\x00"
_KEPT: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")

Namespace = tuple[str, ...]


@dataclass(frozen=True)
class StoredItem:
    """One item as stored: times in epoch ms; ``expires_at`` None without a TTL."""

    namespace: Namespace
    key: str
    value: dict[str, Any]
    created_at: int
    updated_at: int
    ttl: float | None
    expires_at: int | None


@dataclass(frozen=True)
class ItemWrite:
    """A put (``value`` a dict) or a delete (``value`` None) of one item."""

    namespace: Namespace
    key: str
    value: dict[str, Any] | None
    ttl: float | None = None  # minutes


# --- the namespace encodings ----------------------------------------------------------------


def _escape(label: str) -> str:
    return "".join(
        ch if ch in _KEPT else "".join(f"_{b:02X}" for b in ch.encode("utf-8")) for ch in label
    )


def _unescape(text: str) -> str:
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "_":
            out.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(ord(text[i]))
            i += 1
    return out.decode("utf-8")


def check_label(label: object, field: str) -> str:
    """A label as LangGraph allows it (a non-empty string without '.' or NUL), and
    encodable (no lone surrogate)."""
    if not isinstance(label, str):
        raise AcmiValidationError(field, "type", "namespace labels must be strings")
    if not label:
        raise AcmiValidationError(field, "label_empty", "a namespace label cannot be empty")
    if "." in label or _SEP in label:
        raise AcmiValidationError(field, "label_chars", "a namespace label has no '.' or NUL")
    try:
        label.encode("utf-8")
    except UnicodeEncodeError:
        raise AcmiValidationError(
            field, "utf8", "a namespace label must be valid Unicode"
        ) from None
    return label


def check_namespace(namespace: Sequence[object], field: str = "namespace") -> Namespace:
    if not namespace:
        raise AcmiValidationError(field, "namespace_empty", "a namespace has at least one label")
    if len(namespace) > MAX_LABELS:
        raise AcmiValidationError(field, "max_labels", f"at most {MAX_LABELS} labels")
    return tuple(check_label(label, field) for label in namespace)


def namespace_id(namespace: Namespace, field: str = "namespace") -> EntityId:
    """The entity a (checked) namespace is: ``ns:<escaped labels joined by '.'>``."""
    local = ".".join(_escape(label) for label in namespace)
    if len(NAMESPACE_CATEGORY) + 1 + len(local) > MAX_ENTITY_LEN:
        raise AcmiValidationError(
            field,
            "max_length",
            f"the namespace's entity id (labels escaped) is over {MAX_ENTITY_LEN} characters",
        )
    return EntityId(NAMESPACE_CATEGORY, local)


def namespace_of(entity: EntityId) -> Namespace:
    """``namespace_id`` reversed."""
    return tuple(_unescape(part) for part in entity.local_id.split("."))


def index_member(namespace: Namespace) -> str:
    """The namespace index's member: each label followed by NUL."""
    return "".join(label + _SEP for label in namespace)


def namespace_member(entity: EntityId) -> str | None:
    """The namespace index's member of an ``ns:`` entity, or None when its id is no
    namespace's (another writer's entity of that category): what ``acmi delete`` drops."""
    if entity.category != NAMESPACE_CATEGORY:
        return None
    try:
        return index_member(namespace_of(entity))
    except (ValueError, UnicodeDecodeError):
        return None


def _from_member(member: bytes | str) -> Namespace:
    text = member.decode("utf-8") if isinstance(member, bytes) else member
    return tuple(text.split(_SEP)[:-1])


def check_key(key: object, field: str = "key") -> str:
    if not isinstance(key, str):
        raise AcmiValidationError(field, "type", "an item key is a string")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise AcmiValidationError(field, "utf8", "an item key must be valid Unicode") from None
    if size > MAX_KEY_BYTES:
        raise AcmiValidationError(field, "max_key_bytes", f"at most {MAX_KEY_BYTES} bytes")
    if _SEP in key:  # the expiry index's member is the namespace's, NUL-ended, then the key
        raise AcmiValidationError(field, "key_chars", "an item key has no NUL")
    return key


def check_ttl(ttl: object, field: str = "ttl") -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise AcmiValidationError(field, "ttl_positive", "a TTL is a positive number of minutes")
    if ttl > 60 * 24 * 366 * 100:  # a century: past it a unit mistake, not a lifetime
        raise AcmiValidationError(field, "ttl_max", "a TTL is at most 100 years of minutes")
    return float(ttl)


def _ttl_ms(ttl: float) -> int:
    return int(ttl * 60_000)


def _decode(namespace: Namespace, key: str, raw: bytes, expiry: float | None) -> StoredItem:
    try:
        doc = json.loads(raw)
        value = doc["value"]
        created, updated = int(doc["created_at"]), int(doc["updated_at"])
        ttl = doc.get("ttl")
        stored_expiry = doc.get("expires_at")
    except (ValueError, KeyError, TypeError):
        raise CorruptData(
            f"store item {key!r} of {namespace!r} is not an item", field="key"
        ) from None
    expires = None
    if ttl is not None:
        # the later of what the put wrote and what reads refreshed since
        expires = int(max(stored_expiry or 0, expiry or 0))
    return StoredItem(namespace, key, value, created, updated, ttl, expires)


class ItemsAPI:
    """One tenant's namespaced items (the module docstring has the layout and costs)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._index = ctx.keys.store_namespaces()
        self._expiry = ctx.keys.store_expiry()

    # --- writes -------------------------------------------------------------------------

    def write(self, writes: Sequence[ItemWrite]) -> None:
        """Apply puts and deletes (the last write of a (namespace, key) wins, as in
        LangGraph's batch), each with the namespace index and expiry index, in one
        script run (a new one past ``WRITES_PER_PLAN`` writes or ``WRITE_PLAN_BYTES`` of
        item text). Everything is checked, and every value guarded, before anything is
        sent."""
        last: dict[tuple[Namespace, str], ItemWrite] = {}
        for w in writes:
            namespace = check_namespace(w.namespace)
            key = check_key(w.key)
            for label in namespace:
                self._ctx.guard_id(label, "namespace")
            self._ctx.guard_id(key, "key")
            value = None if w.value is None else self._ctx.guard(w.value, "value")
            last.pop((namespace, key), None)  # the later write's place, as dict order
            last[(namespace, key)] = ItemWrite(namespace, key, value, check_ttl(w.ttl))
        now = self._ctx.clock()
        staged = [self._stage(w, now) for w in last.values()]
        plans: list[WritePlan] = []
        count = size = 0
        for stage, stage_bytes in staged:
            if not plans or count == WRITES_PER_PLAN or size + stage_bytes > WRITE_PLAN_BYTES:
                plans.append(WritePlan())
                count = size = 0
            stage(plans[-1])
            count, size = count + 1, size + stage_bytes
        for plan in plans:  # each all-or-nothing: one that fails leaves those before it
            plan.apply(self._ctx.store)

    def _stage(self, w: ItemWrite, now: int) -> tuple[Callable[[WritePlan], None], int]:
        entity = namespace_id(w.namespace)
        namespace_key = self._ctx.keys.store_items(entity)
        member = index_member(w.namespace)
        expiry_member = member + w.key
        text = None
        expires = None
        if w.value is not None:
            value_text = json_object_text(w.value, "value")
            if w.ttl is not None:
                expires = now + _ttl_ms(w.ttl)
            text = (
                f'{{"created_at":{now},"updated_at":{now},'
                f'"ttl":{json.dumps(w.ttl)},"expires_at":{json.dumps(expires)},'
                f'"value":{value_text}}}'
            )
            size = len(text.encode("utf-8"))
            if size > MAX_OBJECT_BYTES:
                raise PayloadTooLarge(
                    "value",
                    "max_object_bytes",
                    f"the item is {size} bytes as stored; at most {MAX_OBJECT_BYTES}",
                )

        def stage(plan: WritePlan) -> None:
            if text is None:
                plan.hdel(namespace_key, w.key)
                plan.zrem(self._expiry, expiry_member)
            else:
                # the entity in its category's list, as every entity written (doctor)
                plan.sadd(self._ctx.index_key(entity), entity.local_id)
                plan.hput(namespace_key, w.key, text)
                if expires is None:
                    plan.zrem(self._expiry, expiry_member)
                else:
                    plan.zset(self._expiry, expires, expiry_member)
            plan.zhas(self._index, member, namespace_key)

        return stage, 0 if text is None else len(text.encode("utf-8"))

    def put(
        self, namespace: Sequence[str], key: str, value: dict[str, Any], *, ttl: float | None = None
    ) -> None:
        """One item, one round trip (``write``)."""
        self.write([ItemWrite(tuple(namespace), key, value, ttl)])

    def delete(self, namespace: Sequence[str], key: str) -> None:
        """One item gone, one round trip; deleting what is absent is no error."""
        self.write([ItemWrite(tuple(namespace), key, None)])

    def refresh(self, items: Sequence[StoredItem]) -> None:
        """Move the expiry of the items read that have a TTL to now + their TTL: one
        round trip, none when none has one."""
        now = self._ctx.clock()
        plan = WritePlan()
        for item in items:
            if item.ttl is not None:
                member = index_member(item.namespace) + item.key
                plan.zbump(self._expiry, now + _ttl_ms(item.ttl), member)
        if len(plan):
            plan.apply(self._ctx.store)

    def sweep(self, limit: int = SWEEP_ITEMS) -> int:
        """Delete up to ``limit`` of the tenant's expired items (and the namespace index
        entries they leave empty): one read of the expiry index, one script run; each
        item only if its expiry is still past in that run. Returns how many went (call
        again while it returns ``limit``)."""
        now = self._ctx.clock()
        limit = max(1, min(limit, SWEEP_ITEMS))
        reply = self._ctx.store.execute(
            ("ZRANGEBYSCORE", self._expiry, "-inf", str(now), "LIMIT", "0", str(limit))
        )
        members = [m for m in reply if isinstance(m, bytes)] if isinstance(reply, list) else []
        if not members:
            return 0
        plan = WritePlan()
        touched: dict[str, str] = {}
        for raw in members:
            text = raw.decode("utf-8")
            cut = text.rindex(_SEP) + 1
            namespace, key = _from_member(text[:cut]), text[cut:]
            items_key = self._ctx.keys.store_items(namespace_id(namespace))
            plan.hdue(items_key, key, self._expiry, text, now)
            touched[items_key] = text[:cut]
        for items_key, member in touched.items():
            plan.zhas(self._index, member, items_key)
        results = plan.apply(self._ctx.store)
        return sum(1 for r in results[: len(members)] if r == 1)

    # --- reads --------------------------------------------------------------------------

    def get_many(self, wanted: Sequence[tuple[Sequence[str], str]]) -> list[StoredItem | None]:
        """Each (namespace, key)'s item, or None when absent or expired: one pipeline."""
        checked = [(check_namespace(ns), check_key(key)) for ns, key in wanted]
        if not checked:
            return []
        commands: list[tuple[str, ...]] = []
        for namespace, key in checked:
            commands.append(("HGET", self._ctx.keys.store_items(namespace_id(namespace)), key))
            commands.append(("ZSCORE", self._expiry, index_member(namespace) + key))
        replies = self._ctx.store.pipeline(commands)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        now = self._ctx.clock()
        found: list[StoredItem | None] = []
        for i, (namespace, key) in enumerate(checked):
            raw, score = replies[2 * i], replies[2 * i + 1]
            item = None
            if isinstance(raw, bytes):
                expiry = float(score) if isinstance(score, bytes | str) else None
                item = _decode(namespace, key, raw, expiry)
                if item.expires_at is not None and item.expires_at <= now:
                    item = None
            found.append(item)
        return found

    def get(self, namespace: Sequence[str], key: str) -> StoredItem | None:
        return self.get_many([(namespace, key)])[0]

    def namespaces(self, prefix: Sequence[str] = ()) -> Iterator[Namespace]:
        """The tenant's namespaces that hold an item and start with ``prefix`` (exact
        labels), in tuple order: the index read in pages of ``NAMESPACE_PAGE``, at most
        ``MAX_SCAN_NAMESPACES`` visited (then 413)."""
        start = index_member(tuple(check_label(x, "prefix") for x in prefix))
        low = "[" + start if start else "-"
        high = "(" + start[:-1] + "\x01" if start else "+"
        seen = 0
        while True:
            reply = self._ctx.store.execute(
                ("ZRANGEBYLEX", self._index, low, high, "LIMIT", "0", str(NAMESPACE_PAGE))
            )
            members = reply if isinstance(reply, list) else []
            for member in members:
                seen += 1
                if seen > MAX_SCAN_NAMESPACES:
                    raise PayloadTooLarge(
                        "namespace_prefix",
                        "max_scan_namespaces",
                        f"a read visits at most {MAX_SCAN_NAMESPACES} namespaces; "
                        "narrow the prefix",
                    )
                assert isinstance(member, bytes)
                yield _from_member(member)
            if len(members) < NAMESPACE_PAGE:
                return
            last = members[-1]
            assert isinstance(last, bytes)
            low = "(" + last.decode("utf-8")

    def items(
        self, namespace: Sequence[str], *, budget: list[int] | None = None
    ) -> list[StoredItem]:
        """Every live item of one namespace, by key: HSCAN pages of ``SCAN_PAGE`` (plus
        one ZMSCORE a page whose items have a TTL). ``budget``: ``[items left]`` shared by
        the namespaces of one read, at most ``MAX_SCAN_ITEMS`` (then 413)."""
        ns = check_namespace(namespace)
        left = budget if budget is not None else [MAX_SCAN_ITEMS]
        key = self._ctx.keys.store_items(namespace_id(ns))
        raw: dict[str, bytes] = {}
        cursor = "0"
        while True:
            reply = self._ctx.store.execute(("HSCAN", key, cursor, "COUNT", str(SCAN_PAGE)))
            assert isinstance(reply, list) and len(reply) == 2
            next_cursor, flat = reply
            assert isinstance(flat, list) and isinstance(next_cursor, bytes)
            for i in range(0, len(flat), 2):
                field, text = flat[i], flat[i + 1]
                assert isinstance(field, bytes) and isinstance(text, bytes)
                name = field.decode("utf-8")
                if name not in raw:  # HSCAN may return a field twice
                    left[0] -= 1
                    if left[0] < 0:
                        raise PayloadTooLarge(
                            "namespace_prefix",
                            "max_scan_items",
                            f"a read visits at most {MAX_SCAN_ITEMS} items; narrow the "
                            "namespace prefix or filter by namespace",
                        )
                raw[name] = text
            cursor = next_cursor.decode()
            if cursor == "0":
                break
        items = [_decode(ns, name, raw[name], None) for name in sorted(raw)]
        timed = [item for item in items if item.ttl is not None]
        if timed:
            member = index_member(ns)
            reply = self._ctx.store.execute(
                ("ZMSCORE", self._expiry, *(member + item.key for item in timed))
            )
            scores = reply if isinstance(reply, list) else []
            refreshed = {
                item.key: float(s)
                for item, s in zip(timed, scores, strict=False)
                if isinstance(s, bytes)
            }
            items = [
                _decode(ns, item.key, raw[item.key], refreshed.get(item.key))
                if item.ttl is not None
                else item
                for item in items
            ]
        now = self._ctx.clock()
        return [item for item in items if item.expires_at is None or item.expires_at > now]

    def scan(self, prefix: Sequence[str] = ()) -> Iterator[StoredItem]:
        """Every live item under ``prefix`` (namespaces in tuple order, keys sorted within
        each), read one namespace at a time: a caller that stops early reads no further.
        At most ``MAX_SCAN_ITEMS`` items and ``MAX_SCAN_NAMESPACES`` namespaces."""
        budget = [MAX_SCAN_ITEMS]
        for namespace in self.namespaces(prefix):
            yield from self.items(namespace, budget=budget)


__all__ = [
    "MAX_KEY_BYTES",
    "MAX_SCAN_ITEMS",
    "MAX_SCAN_NAMESPACES",
    "NAMESPACE_CATEGORY",
    "ItemWrite",
    "ItemsAPI",
    "StoredItem",
    "check_namespace",
    "index_member",
    "namespace_id",
    "namespace_member",
    "namespace_of",
]

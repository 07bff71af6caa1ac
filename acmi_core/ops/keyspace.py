"""The keyspace as ACMI and other tools leave it: which entity slot or index an ``acmi:*``
key is (:func:`parse_key`, the MCP server v2.0 layout ``acmi:<tenant>:<ns>:<id>:<slot>``
included), how a timeline member reads (:func:`member_state`), whether a profile or
signals value is a JSON object, and the SCAN of every key (:func:`scan_batches`: on a
Redis Cluster each primary's, in turn, through redis-py's per-node SCAN). ``acmi doctor``
(``ops/doctor.py``) walks the keyspace with these; ``acmi migrate`` (``ops/migrate.py``)
repairs what it finds.

Both layouts parse (``Layout``): the reference's keys (the MCP server v2.0 layout
included), and the cluster layout's ``acmi:{<tenant>}:...`` (a key without a tenant's tag
is then no entity of this deployment: other tools' keys, the API keys).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from acmi_core.base import keys
from acmi_core.base.errors import AcmiError, AcmiValidationError, StoreCommandError
from acmi_core.base.keys import ALL_SLOTS, INTERNAL_MARK, ROOT, Keys, Layout, Slot
from acmi_core.base.model import (
    LOCAL_ID_RE,
    TENANT_RE,
    EntityId,
    check_category,
    event_from_stored,
)
from acmi_core.base.stored import LONE_SURROGATE, Unreadable, load_stored
from acmi_core.store.base import Reply, Store
from acmi_core.store.cluster import ClusterStore

# Keys per SCAN step (a hint to Redis) and so per pipeline of per-key reads.
SCAN_COUNT: Final = 1000
CORE_SLOTS: Final = tuple(s.value for s in Slot)
# Its acmi_active's SET of "<thread>:<role>:<ts>" members, which migrate copies into the
# agent's :active_context (our joined threads: thread -> {role, joined_at})
MCP_ACTIVE_THREADS: Final = "active_threads"
# The slots the reference MCP server v2.0 writes that migrate copies, and where each goes
# when it is not the slot of the same name
MCP_SLOTS: Final = (*CORE_SLOTS, keys.ROLLUP_LATEST, MCP_ACTIVE_THREADS)
MCP_DESTINATION_SLOT: Final = {MCP_ACTIVE_THREADS: keys.ACTIVE_CONTEXT}
# The Redis type of each slot the key builder can make (keys.ALL_SLOTS): what doctor
# expects when it meets one. A slot added to keys.py is added here too (the keyspace
# test holds the two equal), or doctor and migrate would not know what it should hold.
SLOT_TYPES: Final[dict[str, str]] = {
    Slot.PROFILE.value: "string",
    Slot.SIGNALS.value: "string",
    Slot.TIMELINE.value: "zset",
    keys.SPAWNS: "zset",
    keys.ACTIVE_CONTEXT: "hash",
    keys.ROLLUP_LATEST: "string",
    keys.SESSIONS: "set",
    keys.LAST_BRIEF: "string",
    keys.PERMISSIONS: "string",
    keys.MEMORY_ARCHIVE: "hash",
    keys.MEMORY_HANDOFF: "string",
    keys.MEMORY_STAMPS: "zset",
    keys.MEMORY_HOT: "string",
    keys.MEMORY_WARM: "string",
    keys.MEMORY_HEARTBEAT: "string",
    keys.STORE_ITEMS: "hash",
    keys.MEMORY_VECTORS: "hash",
    keys.MEMORY_SOUL: "string",
    keys.MEMORY_USER: "string",
    keys.MEMORY_AGENTS: "string",
    keys.MEMORY_VECTORS_PASS: "hash",
}
# What the MCP layout's own slots hold (doctor's type check of them)
MCP_SLOT_TYPES: Final[dict[str, str]] = {**SLOT_TYPES, MCP_ACTIVE_THREADS: "set"}
# Longest first: "rollup:latest" must win over any shorter suffix.
_SLOTS_BY_LENGTH: Final = sorted(ALL_SLOTS, key=len, reverse=True)


@dataclass(frozen=True)
class ParsedKey:
    """Where a key sits in the layout. ``tenant`` is ours (for the MCP layout, the
    tenant its first segment names); ``mcp_destination`` is an MCP key's SPEC key."""

    key: bytes
    text: str
    tenant: str
    category: str
    local_id: str
    slot: str | None  # None: the category index acmi:<cat>:list
    entity: EntityId | None  # None: the id is outside our grammar
    mcp_destination: str | None = None


Progress = Callable[[int], None]
"""Called after each SCAN step with the number of keys scanned so far."""


def no_progress(scanned: int) -> None:
    """The default Progress: shows nothing."""
    return None


def _entity(category: str, local_id: str) -> EntityId | None:
    try:
        return EntityId.parse(f"{category}:{local_id}")
    except AcmiValidationError:
        return None


def _mcp_destination(rest: str, keys_for: Callable[[str], Keys]) -> str | None:
    """The SPEC key of ``acmi:<t>:<ns>:<id>:<slot>`` when ``rest`` (after ``acmi:``) has
    that shape with every segment in our grammar, else None."""
    # its rollup-set writes acmi:<t>:agent:<id>:rollup:latest (a slot with a colon)
    rollup = rest.endswith(f":{keys.ROLLUP_LATEST}")
    parts = rest[: -len(keys.ROLLUP_LATEST) - 1].split(":") if rollup else rest.split(":")
    if rollup:
        parts.append(keys.ROLLUP_LATEST)
    if len(parts) != 4 or parts[3] not in MCP_SLOTS:
        return None
    tenant, category, local_id, slot = parts
    if not TENANT_RE.fullmatch(tenant) or not LOCAL_ID_RE.fullmatch(local_id):
        return None
    try:
        check_category(category)
        entity = EntityId.parse(f"{category}:{local_id}")
    except AcmiValidationError:
        return None
    if slot == MCP_ACTIVE_THREADS and category != "agent":
        return None  # only an agent's: acmi_active takes an agentId
    return keys_for(tenant).slot(entity, MCP_DESTINATION_SLOT.get(slot, slot))


def tagged_tenant(rest: str) -> tuple[str, str] | None:
    """The tenant of a cluster-layout key (``rest``: the key after ``acmi:``) and what
    follows its tag, or None when ``rest`` carries no tenant's tag."""
    if not rest.startswith("{"):
        return None
    tag, sep, tail = rest[1:].partition("}:")
    tenant = tag.partition(":")[0]  # a bucket's tag, {<tenant>:<bucket>}, names it first
    return (tenant, tail) if sep and TENANT_RE.fullmatch(tenant) else None


def parse_key(
    raw: bytes,
    default_tenant: str,
    keys_for: Callable[[str], Keys],
    layout: Layout = Layout.REFERENCE,
) -> ParsedKey | None:
    """Classify one ``acmi:*`` key; None for ACMI's own bookkeeping and keys that are no
    entity slot or index (other tools' queues, registries)."""
    text = raw.decode("utf-8", "replace")
    rest = text.removeprefix(f"{ROOT}:")
    if rest == text or rest.startswith(INTERNAL_MARK):
        return None
    tenant = default_tenant
    spec_tenant = rest.startswith("tenant:")
    if layout is Layout.CLUSTER:
        tagged = tagged_tenant(rest)
        if tagged is None or tagged[1].startswith(INTERNAL_MARK):
            return None
        tenant, rest = tagged
        spec_tenant = True  # a tenant named by its tag: no MCP v2.0 key has one
    elif spec_tenant:
        candidate, sep, rest = rest.removeprefix("tenant:").partition(":")
        if not sep or not TENANT_RE.fullmatch(candidate):
            return None
        tenant = candidate
    category, sep, tail = rest.partition(":")
    if not sep:
        return None
    if tail == "list":
        entity = _entity(category, "x")  # the category's grammar only
        return ParsedKey(raw, text, tenant, category, "", None, entity)
    slot = next((s for s in _SLOTS_BY_LENGTH if rest.endswith(f":{s}")), None)
    mcp_only = slot is None and not spec_tenant and rest.endswith(f":{MCP_ACTIVE_THREADS}")
    if mcp_only:  # a slot of ours only in the MCP layout (copied into another)
        slot = MCP_ACTIVE_THREADS
    if slot is None:
        return None
    middle = rest[: -len(slot) - 1]
    category, sep, local_id = middle.partition(":")
    if not sep:
        return None
    if not spec_tenant:
        destination = _mcp_destination(rest, keys_for)
        if destination is not None:
            mcp_tenant, category, local_id = middle.split(":")
            return ParsedKey(
                raw,
                text,
                mcp_tenant,
                category,
                local_id,
                slot,
                _entity(category, local_id),
                destination,
            )
    if mcp_only:
        return None  # not the MCP layout's shape: another tool's key
    valid = raw.isascii()  # a key that is not UTF-8 holds no id we could write
    return ParsedKey(
        raw, text, tenant, category, local_id, slot, _entity(category, local_id) if valid else None
    )


# Slots that mean an entity has memory; not memory:heartbeat, where migrate moves the old
# hygiene job's bookkeeping of webhook entities (which hygiene must not visit).
MEMORY_INDEXED_SLOTS: Final = (keys.MEMORY_HOT, keys.MEMORY_WARM, keys.MEMORY_STAMPS)


def memory_rank(info: ParsedKey) -> int:
    """The position of an entity key's slot in MEMORY_INDEXED_SLOTS (past it: not one)."""
    in_slots = info.slot in MEMORY_INDEXED_SLOTS
    return MEMORY_INDEXED_SLOTS.index(info.slot) if in_slots else len(MEMORY_INDEXED_SLOTS)


def slot_rank(info: ParsedKey) -> int:
    """The position of an entity key's slot in ALL_SLOTS."""
    return ALL_SLOTS.index(info.slot) if info.slot in ALL_SLOTS else len(ALL_SLOTS)


def _event_state(data: dict[str, Any]) -> str:
    """As the client's reads judge it (one rule: model.event_from_stored)."""
    # pydantic refuses lone surrogates in str fields; the client's read replaces them
    clean = {
        LONE_SURROGATE.sub("\ufffd", k): LONE_SURROGATE.sub("\ufffd", v)
        if isinstance(v, str)
        else v
        for k, v in data.items()
    }
    event = event_from_stored(clean)
    if isinstance(event, str):
        return "invalid"
    return "legacy" if event.legacy else "ok"


def member_state(member: Reply) -> str:
    """``ok``, ``legacy`` (an object with a usable ts that is no valid event: missing
    kind/correlationId/source/summary, or a field out of range), ``invalid`` (another object)
    or ``unreadable`` (not UTF-8, not JSON, not an object)."""
    if not isinstance(member, bytes):
        return "unreadable"
    try:
        data = load_stored(member)
    except Unreadable:
        return "unreadable"
    if not isinstance(data, dict):
        return "unreadable"
    return _event_state(data)


# What the reference MCP server's acmi_spawn writes into an agent's timeline (mcp-server.mjs):
# {ts, sessionId?, modelId?}. Ours keep spawns in :spawns, as its CLI does.
_MCP_SPAWN_FIELDS: Final = frozenset({"ts", "sessionId", "modelId"})


def mcp_spawn(member: bytes) -> bytes | None:
    """An MCP spawn record as our spawn member (its CLI's ``{ts, session_id, model_id}``,
    ``unknown`` where it gave none), or None when ``member`` is no spawn record."""
    try:
        data = load_stored(member)
    except Unreadable:
        return None
    if not isinstance(data, dict) or not set(data) <= _MCP_SPAWN_FIELDS:
        return None
    ts = data.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int):
        return None
    spawn = {
        "ts": ts,
        "session_id": str(data.get("sessionId") or "unknown"),
        "model_id": str(data.get("modelId") or "unknown"),
    }
    return json.dumps(spawn, separators=(",", ":"), ensure_ascii=False).encode()


def type_name(reply: Reply | StoreCommandError) -> str:
    """A TYPE reply as text."""
    return reply.decode("ascii", "replace") if isinstance(reply, bytes) else "unknown"


def object_problem(reply: Reply | StoreCommandError) -> str | None:
    """Why a stored profile/signals value is no JSON object, or None when it is one."""
    if reply is None or isinstance(reply, StoreCommandError):
        return None  # gone meanwhile, or the wrong type (reported as such)
    if not isinstance(reply, bytes):
        return "not a string"
    try:
        value = load_stored(reply)
    except Unreadable as exc:
        return exc.reason
    if isinstance(value, dict):
        return None
    name = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
    return f"holds {name}, not a JSON object"


def scan_step(
    store: Store, cursor: int, pattern: str, count: int = SCAN_COUNT
) -> tuple[int, list[bytes]]:
    """One SCAN step over ``pattern``: the next cursor and the keys."""
    reply = store.execute(("SCAN", cursor, "MATCH", pattern, "COUNT", count))
    if (
        isinstance(reply, list)
        and len(reply) == 2
        and isinstance(reply[0], bytes)
        and isinstance(reply[1], list)
    ):
        return int(reply[0]), [k for k in reply[1] if isinstance(k, bytes)]
    raise AcmiError("SCAN gave an unexpected reply", field="scan")


def scan_batches(store: Store, pattern: str) -> Iterator[list[bytes]]:
    """Every key matching ``pattern``, one SCAN step (``SCAN_COUNT`` keys) a batch. On a
    Redis Cluster, each primary's keys in turn (``ClusterStore.scan_primaries``: the
    library's per-node SCAN): every key once, as one node's SCAN gives them."""
    if isinstance(store, ClusterStore):
        yield from store.scan_primaries(pattern, SCAN_COUNT)
        return
    cursor = 0
    while True:
        cursor, found = scan_step(store, cursor, pattern)
        yield found
        if cursor == 0:
            return

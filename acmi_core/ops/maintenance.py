"""`acmi doctor` and `acmi migrate`: check and repair a keyspace other tools wrote.

A deployment of the reference TypeScript ACMI leaves data our reads cannot see or serve:
entities its SDK wrote without an ``acmi:<cat>:list`` entry (so ``acmi.list`` misses
them), legacy timeline members, ids outside our grammar, non-object profiles, keys of
the wrong Redis type, and its MCP server v2.0 layout ``acmi:<tenant>:<ns>:<id>:<slot>``
that nothing else reads.

``Doctor`` walks the keyspace with SCAN (never KEYS: it would block Redis for the whole
keyspace) and never writes. Memory stays bounded: one SCAN step of keys at a time, the
per-key reads of a step in one pipeline, timeline members in chunks; findings stream out
as they are found. Round trips per ``SCAN_COUNT`` keys: one SCAN, one pipeline for the
keys, and one per ``PIPELINE_MEMBERS`` timeline members.

``Migrate`` repairs what can be repaired, each entity in one ``WritePlan`` (one atomic
script): missing index entries, copies of MCP-layout keys into the SPEC layout (never
over an existing key: a differing destination is a conflict, left alone), and, when
asked, a ``tenant_id`` on default-tenant profiles without one. Every repair is
idempotent: a second run finds nothing to do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, TextIO

from acmi_core.base.errors import AcmiError, AcmiValidationError, StoreCommandError
from acmi_core.base.keys import (
    ACTIVE_CONTEXT,
    ALL_SLOTS,
    INTERNAL_MARK,
    ROLLUP_LATEST,
    ROOT,
    SESSIONS,
    SPAWNS,
    Keys,
    Slot,
)
from acmi_core.base.model import (
    LOCAL_ID_RE,
    TENANT_RE,
    EntityId,
    check_category,
    check_tenant,
    dumps,
    event_from_stored,
)
from acmi_core.base.stored import LONE_SURROGATE, Unreadable, load_stored
from acmi_core.client import Acmi
from acmi_core.store.base import Command, Reply, Store
from acmi_core.store.writes import FieldMode, WritePlan

# Keys per SCAN step (a hint to Redis) and so per pipeline of per-key reads.
SCAN_COUNT: Final = 1000
# Timeline members per ZRANGE, and per pipeline: bounds what one reply holds in memory.
MEMBER_CHUNK: Final = 1000
PIPELINE_MEMBERS: Final = 5000
# A copied MCP timeline is one ZADD per member inside one script, which blocks Redis
# while it runs; a longer timeline is reported, not copied.
MAX_COPY_MEMBERS: Final = 10_000
# MCP-layout copies read per pipeline (source and destination values).
COPY_BATCH: Final = 100

# The Redis type each slot holds (keys.py names the slots).
EXPECTED_TYPE: Final[dict[str, str]] = {
    Slot.PROFILE.value: "string",
    Slot.SIGNALS.value: "string",
    Slot.TIMELINE.value: "zset",
    SPAWNS: "zset",
    ACTIVE_CONTEXT: "hash",
    ROLLUP_LATEST: "string",
    SESSIONS: "set",
}
INDEX_TYPE: Final = "set"
CORE_SLOTS: Final = tuple(s.value for s in Slot)
# Longest first: "rollup:latest" must win over any shorter suffix.
_SLOTS_BY_LENGTH: Final = sorted(ALL_SLOTS, key=len, reverse=True)


class Kind(StrEnum):
    """What a finding is about."""

    INDEX_MISSING = "index_missing"  # (a) entity not in its acmi:<cat>:list
    TIMELINE_MEMBERS = "timeline_members"  # (b) legacy / invalid / unreadable members
    BAD_ID = "bad_id"  # (c) an id outside our grammar: reported, never touched
    NOT_OBJECT = "not_object"  # (d) a profile/signals value that is no JSON object
    WRONG_TYPE = "wrong_type"  # (d) a key of another Redis type than its slot's
    MCP_LAYOUT = "mcp_layout"  # (e) acmi:<tenant>:<ns>:<id>:<slot> (MCP server v2.0)
    NO_TENANT_ID = "no_tenant_id"  # a profile without tenant_id (looked for by migrate)


# Kinds that make `acmi doctor` exit 1. NO_TENANT_ID is what the reference writes
# normally; migrate looks for it only when given --tenant-id.
PROBLEMS: Final = frozenset(Kind) - {Kind.NO_TENANT_ID}


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


@dataclass(frozen=True)
class Finding:
    kind: Kind
    key: str
    detail: str
    entity: str | None = None
    tenant: str | None = None
    counts: dict[str, int] | None = None
    destination: str | None = None
    state: str | None = None  # MCP_LAYOUT: an McpState
    # for migrate, not shown: where the key sits, and what an MCP copy would write
    parsed: ParsedKey | None = field(default=None, repr=False, compare=False)
    copy: _Copy | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind.value, "key": self.key, "detail": self.detail}
        for name in ("entity", "tenant", "counts", "destination", "state"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data


Progress = Callable[[int], None]
"""Called after each SCAN step with the number of keys scanned so far."""


def _no_progress(scanned: int) -> None:
    return None


def _entity(category: str, local_id: str) -> EntityId | None:
    try:
        return EntityId.parse(f"{category}:{local_id}")
    except AcmiValidationError:
        return None


def _mcp_destination(rest: str, keys_for: Callable[[str], Keys]) -> str | None:
    """The SPEC key of ``acmi:<t>:<ns>:<id>:<slot>`` when ``rest`` (after ``acmi:``) has
    that shape with every segment in our grammar, else None."""
    parts = rest.split(":")
    if len(parts) != 4 or parts[3] not in CORE_SLOTS:
        return None
    tenant, category, local_id, slot = parts
    if not TENANT_RE.fullmatch(tenant) or not LOCAL_ID_RE.fullmatch(local_id):
        return None
    try:
        check_category(category)
        entity = EntityId.parse(f"{category}:{local_id}")
    except AcmiValidationError:
        return None
    return keys_for(tenant).slot(entity, slot)


def parse_key(raw: bytes, default_tenant: str, keys_for: Callable[[str], Keys]) -> ParsedKey | None:
    """Classify one ``acmi:*`` key; None for ACMI's own bookkeeping and keys that are no
    entity slot or index (other tools' queues, registries)."""
    text = raw.decode("utf-8", "replace")
    rest = text.removeprefix(f"{ROOT}:")
    if rest == text or rest.startswith(INTERNAL_MARK):
        return None
    tenant = default_tenant
    spec_tenant = rest.startswith("tenant:")
    if spec_tenant:
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
    valid = raw.isascii()  # a key that is not UTF-8 holds no id we could write
    return ParsedKey(
        raw, text, tenant, category, local_id, slot, _entity(category, local_id) if valid else None
    )


def _rank(info: ParsedKey) -> int:
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
    """``ok``, ``legacy`` (an object with ts/source/summary that is no valid event:
    missing kind/correlationId, or a field out of range), ``invalid`` (another object)
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


def _type_name(reply: Reply | StoreCommandError) -> str:
    return reply.decode("ascii", "replace") if isinstance(reply, bytes) else "unknown"


def _object_problem(reply: Reply | StoreCommandError) -> str | None:
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


def _scan_step(store: Store, cursor: int, pattern: str) -> tuple[int, list[bytes]]:
    reply = store.execute(("SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT))
    if (
        isinstance(reply, list)
        and len(reply) == 2
        and isinstance(reply[0], bytes)
        and isinstance(reply[1], list)
    ):
        return int(reply[0]), [k for k in reply[1] if isinstance(k, bytes)]
    raise AcmiError("SCAN gave an unexpected reply", field="scan")


class McpState(StrEnum):
    """Where an MCP-layout key stands against its SPEC destination."""

    TO_COPY = "to_copy"  # the destination is absent
    COPIED = "copied"  # the destination holds the same value: nothing to do
    CONFLICT = "conflict"  # the destination holds something else: left as is
    TOO_LARGE = "too_large"  # a timeline over MAX_COPY_MEMBERS
    UNCOPYABLE = "uncopyable"  # not UTF-8, or another Redis type than its slot's


@dataclass(frozen=True)
class _Copy:
    """An MCP key's state and, for TO_COPY, what to write (text, or (score, member)s)."""

    state: McpState
    text: str | None = None
    members: list[tuple[float, str]] = field(default_factory=list)


def _utf8(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _zset_pairs(reply: Reply | StoreCommandError) -> set[tuple[bytes, bytes]]:
    items = reply if isinstance(reply, list) else []
    return {
        (m, s)
        for m, s in zip(items[::2], items[1::2], strict=False)
        if isinstance(m, bytes) and isinstance(s, bytes)
    }


def _same_profile(source: bytes, dest: bytes) -> bool:
    """Whether ``dest`` is ``source`` plus the tenant_id migrate may have added."""
    try:
        before, after = load_stored(source), load_stored(dest)
    except Unreadable:
        return False
    if not isinstance(before, dict) or not isinstance(after, dict) or "tenant_id" in before:
        return False
    after.pop("tenant_id", None)
    return bool(before == after)


def _compare_string(
    source: Reply | StoreCommandError, dest_type: str, dest: Reply, *, profile: bool
) -> _Copy:
    if not isinstance(source, bytes):
        return _Copy(McpState.UNCOPYABLE)
    same = isinstance(dest, bytes) and (dest == source or (profile and _same_profile(source, dest)))
    if dest_type == "string" and same:
        return _Copy(McpState.COPIED)
    if dest_type != "none":
        return _Copy(McpState.CONFLICT)
    text = _utf8(source)
    return _Copy(McpState.UNCOPYABLE) if text is None else _Copy(McpState.TO_COPY, text)


def _compare_timeline(
    size: int, source: Reply | StoreCommandError, dest_type: str, dest: Reply
) -> _Copy:
    if size > MAX_COPY_MEMBERS:
        return _Copy(McpState.TOO_LARGE)
    if not isinstance(source, list):
        return _Copy(McpState.UNCOPYABLE)
    pairs = _zset_pairs(source)
    if dest_type == "zset" and pairs <= _zset_pairs(dest):
        return _Copy(McpState.COPIED)
    if dest_type != "none":
        return _Copy(McpState.CONFLICT)
    members = []
    for member, score in sorted(pairs):
        text = _utf8(member)
        if text is None:
            return _Copy(McpState.UNCOPYABLE)  # a partial copy would be retried forever
        members.append((float(score), text))
    return _Copy(McpState.TO_COPY, members=members)


MCP_DETAIL: Final = {
    McpState.TO_COPY: "MCP server v2.0 layout, read by no other component; `acmi migrate` "
    "copies it to {destination}",
    McpState.CONFLICT: "MCP server v2.0 layout; {destination} exists and differs: a conflict "
    "`acmi migrate` leaves alone (merge by hand)",
    McpState.TOO_LARGE: "MCP server v2.0 layout; more than MAX_COPY_MEMBERS "
    f"({MAX_COPY_MEMBERS}) members: not copied to {{destination}}",
    McpState.UNCOPYABLE: "MCP server v2.0 layout; holds another Redis type than its slot's or "
    "text that is not UTF-8: not copied to {destination}",
}


class Doctor:
    """A read-only walk of the keyspace. ``batches()`` yields the findings of each SCAN
    step as it goes; ``findings()`` flattens them."""

    def __init__(
        self,
        acmi: Acmi,
        *,
        category: str | None = None,
        tenant_id_check: bool = False,
        progress: Progress = _no_progress,
    ) -> None:
        self.acmi = acmi
        self.store = acmi.store
        self.default_tenant = acmi.settings.default_tenant
        self.category = None if category is None else check_category(category, "--category")
        self.tenant_id_check = tenant_id_check
        self.progress = progress
        self.scanned = 0
        self._keys: dict[str, Keys] = {}

    def keys_for(self, tenant: str) -> Keys:
        keys = self._keys.get(tenant)
        if keys is None:
            keys = self._keys[tenant] = Keys(tenant, self.default_tenant)
        return keys

    def findings(self) -> Iterator[Finding]:
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[Finding]]:
        cursor = 0
        while True:
            cursor, raw_keys = _scan_step(self.store, cursor, f"{ROOT}:*")
            self.scanned += len(raw_keys)
            batch = self._check(raw_keys)
            self.progress(self.scanned)
            if batch:
                yield batch
            if cursor == 0:
                return

    def _parse(self, raw_keys: Sequence[bytes]) -> list[ParsedKey]:
        parsed = []
        for raw in dict.fromkeys(raw_keys):  # SCAN may repeat a key
            info = parse_key(raw, self.default_tenant, self.keys_for)
            if info is not None and self.category in (None, info.category):
                parsed.append(info)
        return parsed

    def _plan_reads(
        self, parsed: list[ParsedKey]
    ) -> tuple[list[Command], list[tuple[ParsedKey, str, int]]]:
        """The per-key reads of one SCAN step: TYPE, and GET / ZCARD / SISMEMBER as the
        slot needs; each read is (key, what, position of its reply)."""
        commands: list[Command] = []
        reads: list[tuple[ParsedKey, str, int]] = []  # (key, what, reply index)

        def read(info: ParsedKey, what: str, command: Command) -> None:
            reads.append((info, what, len(commands)))
            commands.append(command)

        # an entity's first slot key in ALL_SLOTS order (of those in this step)
        indexed: dict[tuple[str, EntityId], ParsedKey] = {}
        for info in parsed:
            read(info, "type", ("TYPE", info.key))
            if info.entity is None or info.slot is None:
                continue
            if info.mcp_destination is not None:
                if info.slot == Slot.TIMELINE:
                    read(info, "mcp_zcard", ("ZCARD", info.key))
                continue
            if info.slot in (Slot.PROFILE, Slot.SIGNALS):
                read(info, "get", ("GET", info.key))
            elif info.slot == Slot.TIMELINE:
                read(info, "zcard", ("ZCARD", info.key))
            first = indexed.setdefault((info.tenant, info.entity), info)
            if _rank(info) < _rank(first):
                indexed[(info.tenant, info.entity)] = info
        for (tenant, entity), info in indexed.items():
            # Reported with the entity's first existing slot key, whichever SCAN step
            # holds it: no memory of what was reported, whatever the keyspace's size.
            keys = self.keys_for(tenant)
            read(info, "indexed", ("SISMEMBER", keys.index(entity.category), entity.local_id))
            for slot in ALL_SLOTS[: _rank(info)]:
                read(info, "earlier", ("EXISTS", keys.slot(entity, slot)))
        return commands, reads

    def _check(self, raw_keys: Sequence[bytes]) -> list[Finding]:
        """One pipeline of per-key reads, then timeline members and MCP copies in
        pipelines of their own."""
        commands, reads = self._plan_reads(self._parse(raw_keys))
        replies = self.store.pipeline(commands) if commands else []

        found: list[Finding] = []
        timelines: list[tuple[ParsedKey, int]] = []
        mcp: dict[bytes, tuple[ParsedKey, int]] = {}
        unindexed: dict[bytes, ParsedKey] = {}
        for info, what, at in reads:
            reply = replies[at]
            if what == "type":
                actual = _type_name(reply)
                found.extend(self._key_findings(info, actual))
                if info.mcp_destination is not None and actual != "none":
                    mcp[info.key] = (info, 0)
            elif what == "mcp_zcard" and info.key in mcp:
                mcp[info.key] = (info, reply if isinstance(reply, int) else 0)
            elif what == "get":
                problem = _object_problem(reply)
                if problem is not None:
                    found.append(
                        Finding(Kind.NOT_OBJECT, info.text, problem, str(info.entity), info.tenant)
                    )
                elif self.tenant_id_check:
                    found.extend(self._tenant_id_finding(info, reply))
            elif what == "zcard" and isinstance(reply, int) and reply > 0:
                timelines.append((info, reply))
            elif what == "indexed" and reply == 0:
                unindexed[info.key] = info
            elif what == "earlier" and reply != 0:
                unindexed.pop(info.key, None)  # reported with its earlier key
        for info in unindexed.values():
            index = self.keys_for(info.tenant).index(info.category)
            detail = f"not in {index}: `acmi list {info.category}` misses it"
            found.append(
                Finding(
                    Kind.INDEX_MISSING, index, detail, str(info.entity), info.tenant, parsed=info
                )
            )
        found.extend(self._timeline_findings(timelines))
        found.extend(self._mcp_findings(list(mcp.values())))
        return found

    def _key_findings(self, info: ParsedKey, actual: str) -> list[Finding]:
        if actual == "none":
            return []  # deleted since SCAN returned it
        expected = INDEX_TYPE if info.slot is None else EXPECTED_TYPE[info.slot]
        entity = None if info.entity is None else str(info.entity)
        found = []
        if info.entity is None:
            what = "category" if info.slot is None else "id"
            shown = info.category if info.slot is None else f"{info.category}:{info.local_id}"
            detail = f"{what} {shown!r} is outside the id grammar: reported, never touched"
            found.append(Finding(Kind.BAD_ID, info.text, detail, tenant=info.tenant))
        if actual != expected:
            detail = f"holds a {actual}, expected a {expected}"
            found.append(Finding(Kind.WRONG_TYPE, info.text, detail, entity, info.tenant))
        return found

    def _tenant_id_finding(
        self, info: ParsedKey, reply: Reply | StoreCommandError
    ) -> list[Finding]:
        if info.slot != Slot.PROFILE or info.tenant != self.default_tenant:
            return []
        assert isinstance(reply, bytes)  # _object_problem found a JSON object
        if "tenant_id" in load_stored(reply):
            return []
        detail = "profile has no tenant_id"
        return [
            Finding(
                Kind.NO_TENANT_ID, info.text, detail, str(info.entity), info.tenant, parsed=info
            )
        ]

    def _timeline_findings(self, timelines: list[tuple[ParsedKey, int]]) -> list[Finding]:
        """Members in ZRANGE chunks of MEMBER_CHUNK, PIPELINE_MEMBERS per round trip."""
        chunks = [
            (info, start, min(MEMBER_CHUNK, size - start))
            for info, size in timelines
            for start in range(0, size, MEMBER_CHUNK)
        ]
        counts: dict[bytes, dict[str, int]] = {}
        group: list[tuple[ParsedKey, int, int]] = []
        weight = 0
        for position, chunk in enumerate(chunks):
            group.append(chunk)
            weight += chunk[2]
            last = position == len(chunks) - 1
            if not last and weight + chunks[position + 1][2] <= PIPELINE_MEMBERS:
                continue
            commands: list[Command] = [
                ("ZRANGE", info.key, start, start + MEMBER_CHUNK - 1) for info, start, _ in group
            ]
            for (info, _, _), reply in zip(group, self.store.pipeline(commands), strict=True):
                tally = counts.setdefault(info.key, {"legacy": 0, "invalid": 0, "unreadable": 0})
                for member in reply if isinstance(reply, list) else []:
                    state = member_state(member)
                    if state != "ok":
                        tally[state] += 1
            group, weight = [], 0
        found = []
        for info, _ in timelines:
            tally = counts.get(info.key, {})
            if any(tally.values()):
                detail = ", ".join(f"{n} {state}" for state, n in tally.items() if n)
                found.append(
                    Finding(
                        Kind.TIMELINE_MEMBERS,
                        info.text,
                        f"{detail} member(s): legacy ones lack kind/correlationId or hold a "
                        "field out of range; the others are skipped on read",
                        str(info.entity),
                        info.tenant,
                        counts=tally,
                    )
                )
        return found

    def _mcp_findings(self, keys: list[tuple[ParsedKey, int]]) -> list[Finding]:
        """Each MCP key against its destination: values read in pipelines of at most
        PIPELINE_MEMBERS members (a single timeline of up to MAX_COPY_MEMBERS aside)."""
        found: list[Finding] = []
        group: list[tuple[ParsedKey, int]] = []
        weight = 0
        for item in keys:
            cost = 2 * min(item[1], MAX_COPY_MEMBERS) + 1
            if group and weight + cost > PIPELINE_MEMBERS:
                found.extend(self._mcp_group(group))
                group, weight = [], 0
            group.append(item)
            weight += cost
        if group:
            found.extend(self._mcp_group(group))
        return found

    def _mcp_group(self, group: list[tuple[ParsedKey, int]]) -> list[Finding]:
        commands: list[Command] = []
        for info, size in group:
            assert info.mcp_destination is not None
            dest = info.mcp_destination
            if info.slot == Slot.TIMELINE and size <= MAX_COPY_MEMBERS:
                commands += [
                    ("ZRANGE", info.key, 0, -1, "WITHSCORES"),
                    ("TYPE", dest),
                    ("ZRANGE", dest, 0, MAX_COPY_MEMBERS, "WITHSCORES"),
                ]
            elif info.slot == Slot.TIMELINE:
                commands += [("TYPE", info.key), ("TYPE", dest), ("TYPE", dest)]
            else:
                commands += [("GET", info.key), ("TYPE", dest), ("GET", dest)]
        replies = self.store.pipeline(commands)
        found = []
        for position, (info, size) in enumerate(group):
            assert info.mcp_destination is not None and info.entity is not None
            source, dest_type, dest_raw = replies[3 * position : 3 * position + 3]
            dest_reply = None if isinstance(dest_raw, StoreCommandError) else dest_raw
            if info.slot == Slot.TIMELINE:
                copy = _compare_timeline(size, source, _type_name(dest_type), dest_reply)
            else:
                copy = _compare_string(
                    source,
                    _type_name(dest_type),
                    dest_reply,
                    profile=info.slot == Slot.PROFILE,
                )
            if copy.state is McpState.COPIED:
                continue
            found.append(
                Finding(
                    Kind.MCP_LAYOUT,
                    info.text,
                    MCP_DETAIL[copy.state].format(destination=info.mcp_destination),
                    str(info.entity),
                    self.keys_for(info.tenant).tenant,
                    destination=info.mcp_destination,
                    state=copy.state.value,
                    parsed=info,
                    copy=copy,
                )
            )
        return found


# --- migrate ----------------------------------------------------------------------------------


class Action(StrEnum):
    INDEX_ADD = "index_add"
    COPY = "copy"
    TENANT_ID_SET = "tenant_id_set"
    CONFLICT = "conflict"  # a differing destination exists: nothing written
    NOT_COPIED = "not_copied"  # too large, not UTF-8, or another type: nothing written


# What migrate cannot repair: reported, and `acmi migrate` exits 1.
UNREPAIRED: Final = frozenset({Action.CONFLICT, Action.NOT_COPIED})


@dataclass(frozen=True)
class Step:
    action: Action
    key: str
    detail: str
    entity: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {"action": self.action.value, "key": self.key, "detail": self.detail}
        if self.entity is not None:
            data["entity"] = self.entity
        return data


@dataclass
class _EntityPlan:
    """What one entity needs: applied as one WritePlan (one atomic script)."""

    plan: WritePlan = field(default_factory=WritePlan)
    steps: list[Step] = field(default_factory=list)
    indexed: bool = False


class Migrate:
    """Repairs what ``Doctor`` finds and can be repaired. ``run()`` yields each step
    (done, or with ``dry_run`` what would be done); nothing else is touched."""

    def __init__(
        self,
        acmi: Acmi,
        *,
        dry_run: bool = False,
        tenant_id: str | None = None,
        category: str | None = None,
        progress: Progress = _no_progress,
    ) -> None:
        self.store = acmi.store
        self.dry_run = dry_run
        self.tenant_id = None if tenant_id is None else check_tenant(tenant_id, "--tenant-id")
        self.doctor = Doctor(
            acmi, category=category, tenant_id_check=tenant_id is not None, progress=progress
        )

    def run(self) -> Iterator[Step]:
        for batch in self.doctor.batches():
            plans: dict[tuple[str, EntityId], _EntityPlan] = {}
            unrepaired: list[Step] = []
            for finding in batch:
                info = finding.parsed
                if info is None or info.entity is None:
                    continue  # reported by doctor only: nothing to repair
                if finding.kind is Kind.INDEX_MISSING:
                    self._index(plans, info.tenant, info.entity, announce=True)
                elif finding.kind is Kind.NO_TENANT_ID:
                    self._fill_tenant_id(plans, info)
                elif finding.kind is Kind.MCP_LAYOUT and finding.copy is not None:
                    step = self._copy(plans, finding, finding.copy)
                    if step is not None:
                        unrepaired.append(step)
            yield from unrepaired
            for entity_plan in plans.values():
                if not self.dry_run:
                    entity_plan.plan.apply(self.store)
                yield from entity_plan.steps

    def _index(
        self,
        plans: dict[tuple[str, EntityId], _EntityPlan],
        tenant: str,
        entity: EntityId,
        *,
        announce: bool,
    ) -> _EntityPlan:
        entity_plan = plans.setdefault((tenant, entity), _EntityPlan())
        if not entity_plan.indexed:
            index = self.doctor.keys_for(tenant).index(entity.category)
            entity_plan.plan.sadd(index, entity.local_id)  # idempotent: SADD
            entity_plan.indexed = True
            if announce:
                detail = f"SADD {entity.local_id}"
                entity_plan.steps.append(Step(Action.INDEX_ADD, index, detail, str(entity)))
        return entity_plan

    def _fill_tenant_id(
        self, plans: dict[tuple[str, EntityId], _EntityPlan], info: ParsedKey
    ) -> None:
        assert info.entity is not None and self.tenant_id is not None
        # the normal write path indexes what it writes (already there, or added here)
        entity_plan = self._index(plans, info.tenant, info.entity, announce=False)
        key = self.doctor.keys_for(info.tenant).profile(info.entity)
        # setnx: a tenant_id written meanwhile is never overwritten
        fields: list[tuple[FieldMode, str, str]] = [("setnx", "tenant_id", dumps(self.tenant_id))]
        entity_plan.plan.edit_object(key, fields)
        detail = f"tenant_id = {self.tenant_id!r}"
        entity_plan.steps.append(Step(Action.TENANT_ID_SET, key, detail, str(info.entity)))

    def _copy(
        self, plans: dict[tuple[str, EntityId], _EntityPlan], finding: Finding, copy: _Copy
    ) -> Step | None:
        """Stage the copy of one MCP key; the Step that says why not when it cannot be."""
        info = finding.parsed
        assert info is not None and info.entity is not None and info.mcp_destination is not None
        destination = info.mcp_destination
        if copy.state is McpState.CONFLICT:
            detail = f"exists and differs from {info.text}: left as is (merge by hand)"
            return Step(Action.CONFLICT, destination, detail, finding.entity)
        if copy.state is not McpState.TO_COPY:
            return Step(Action.NOT_COPIED, info.text, finding.detail, finding.entity)
        mapped = self.doctor.keys_for(info.tenant)
        entity_plan = self._index(plans, mapped.tenant, info.entity, announce=False)
        if copy.text is not None:
            entity_plan.plan.set(destination, copy.text)
            if info.slot == Slot.PROFILE and self.tenant_id is not None and mapped.is_default:
                stored = _object_problem(copy.text.encode()) is None
                if stored and "tenant_id" not in load_stored(copy.text.encode()):
                    # in the same script, so a second run finds the copy identical
                    fields: list[tuple[FieldMode, str, str]] = [
                        ("setnx", "tenant_id", dumps(self.tenant_id))
                    ]
                    entity_plan.plan.edit_object(destination, fields)
        for score, member in copy.members:
            entity_plan.plan.zadd(destination, score, member)
        detail = f"from {info.text}"
        entity_plan.steps.append(Step(Action.COPY, destination, detail, finding.entity))
        return None


# --- reports (what `acmi doctor` and `acmi migrate` print) --------------------------------------


def _stderr_progress(err: TextIO) -> Progress:
    ending = "\r" if err.isatty() else "\n"

    def show(scanned: int) -> None:
        print(f"# scanned {scanned} keys", file=err, end=ending, flush=True)

    return show


def _line(item: Finding | Step) -> str:
    name = item.kind.value if isinstance(item, Finding) else item.action.value
    about = f" ({item.entity})" if item.entity else ""
    return f"{name:<16} {item.key}{about}: {item.detail}"


def doctor_report(
    acmi: Acmi, *, out: TextIO, err: TextIO, as_json: bool = False, category: str | None = None
) -> int:
    """Stream doctor's findings to ``out`` (one line each: text, or a JSON object with
    ``as_json``), then a summary; progress on ``err``. Returns the exit code: 0 when
    clean, 1 when problems were found."""
    doctor = Doctor(acmi, category=category, progress=_stderr_progress(err))
    counts: dict[str, int] = {}
    for finding in doctor.findings():
        counts[finding.kind.value] = counts.get(finding.kind.value, 0) + 1
        print(json.dumps(finding.to_dict()) if as_json else _line(finding), file=out, flush=True)
    problems = sum(counts.values())
    summary = {"scanned": doctor.scanned, "problems": problems, "by_kind": counts}
    if as_json:
        print(json.dumps({"summary": summary}), file=out)
    else:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        verdict = f"{problems} problem(s): {kinds}" if problems else "no problems"
        hint = "; `acmi migrate --dry-run` shows what can be repaired" if problems else ""
        print(f"# {doctor.scanned} keys scanned, {verdict}{hint}", file=out)
    return 1 if problems else 0


def migrate_report(
    acmi: Acmi,
    *,
    out: TextIO,
    err: TextIO,
    as_json: bool = False,
    dry_run: bool = False,
    tenant_id: str | None = None,
    category: str | None = None,
) -> int:
    """Run (or with ``dry_run`` only print) the repairs, one line per step, then a
    summary. Returns 0 when everything found was repaired, 1 when conflicts or keys
    that cannot be copied remain."""
    migrate = Migrate(
        acmi,
        dry_run=dry_run,
        tenant_id=tenant_id,
        category=category,
        progress=_stderr_progress(err),
    )
    counts: dict[str, int] = {}
    for step in migrate.run():
        counts[step.action.value] = counts.get(step.action.value, 0) + 1
        line = json.dumps(step.to_dict()) if as_json else _line(step)
        print(line, file=out, flush=True)
    left = sum(n for action, n in counts.items() if Action(action) in UNREPAIRED)
    summary = {
        "scanned": migrate.doctor.scanned,
        "dry_run": dry_run,
        "by_action": counts,
        "unrepaired": left,
    }
    if as_json:
        print(json.dumps({"summary": summary}), file=out)
    else:
        done = ", ".join(f"{n} {action}" for action, n in sorted(counts.items())) or "nothing"
        mode = "would do (dry run, nothing written)" if dry_run else "done"
        print(f"# {migrate.doctor.scanned} keys scanned; {mode}: {done}", file=out)
    return 1 if left else 0

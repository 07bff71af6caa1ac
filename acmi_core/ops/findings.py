"""What `acmi doctor` reports, apart from how it finds it: the kinds, a finding and the
index repairs migrate applies. Its own module so the checks in ``doctor.py`` and
``backfill.py`` build findings without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from acmi_core.ops.keyspace import ParsedKey
from acmi_core.ops.results import FindingLine

# Timeline members per ZRANGE: bounds what one reply holds in memory.
MEMBER_CHUNK: Final = 1000

# An index repair (op, key, score, member): WritePlan's zadd (NX), zmax, zmin or zkeep.
Repair = tuple[str, str, float, str]


class Kind(StrEnum):
    """What a finding is about."""

    INDEX_MISSING = "index_missing"  # (a) entity not in its acmi:<cat>:list
    TIMELINE_MEMBERS = "timeline_members"  # (b) legacy / invalid / unreadable members
    BAD_ID = "bad_id"  # (c) an id outside our grammar: reported, never touched
    NOT_OBJECT = "not_object"  # (d) a profile/signals value that is no JSON object
    WRONG_TYPE = "wrong_type"  # (d) a key of another Redis type than its slot's
    MCP_LAYOUT = "mcp_layout"  # (e) acmi:<tenant>:<ns>:<id>:<slot> (MCP server v2.0)
    NO_TENANT_ID = "no_tenant_id"  # a profile without tenant_id (looked for by migrate)
    # memory fields (hot.*, heartbeat.*, warm.*) in the profile or signals, where a
    # replace of the object erases them: migrate moves them into the memory slots
    MEMORY_OLD_PLACE = "memory_old_place"
    # entries older data lacks in the indexes added since (ops/backfill.py; migrate adds them)
    MENTION_MISSING = "mention_missing"  # keys.mentions: the bootstrap misses the event
    TENANT_UNINDEXED = "tenant_unindexed"  # keys.tenants_with: the jobs skip the tenant
    MEMORY_UNINDEXED = "memory_unindexed"  # keys.memory_index: hygiene skips the entity
    # a work item the reference wrote (its profile names an owner, the owners HASH does
    # not): the owner's `work list --owner` and bootstrap miss it; migrate assigns it
    WORK_UNOWNED = "work_unowned"


# Kinds that make `acmi doctor` exit 1. NO_TENANT_ID is what the reference writes
# normally; migrate looks for it only when given --tenant-id.
PROBLEMS: Final = frozenset(Kind) - {Kind.NO_TENANT_ID}


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
    copy: McpCopy | None = field(default=None, repr=False, compare=False)
    repairs: tuple[Repair, ...] = field(default=(), repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.kind.value

    def to_dict(self) -> FindingLine:
        data: FindingLine = {"kind": self.kind.value, "key": self.key, "detail": self.detail}
        if self.entity is not None:
            data["entity"] = self.entity
        if self.tenant is not None:
            data["tenant"] = self.tenant
        if self.counts is not None:
            data["counts"] = self.counts
        if self.destination is not None:
            data["destination"] = self.destination
        if self.state is not None:
            data["state"] = self.state
        return data


class McpState(StrEnum):
    """Where an MCP-layout key stands against its SPEC destination."""

    TO_COPY = "to_copy"  # the destination is absent
    COPIED = "copied"  # the destination holds the same value: nothing to do
    CONFLICT = "conflict"  # the destination holds something else: left as is
    TOO_LARGE = "too_large"  # a timeline over MAX_COPY_MEMBERS
    UNCOPYABLE = "uncopyable"  # not UTF-8, or another Redis type than its slot's


@dataclass(frozen=True)
class McpCopy:
    """An MCP key's state and, for TO_COPY, what to write (text, or (score, member)s)."""

    state: McpState
    text: str | None = None
    members: list[tuple[float, str]] = field(default_factory=list)
    # an MCP timeline's spawn records, as ours ({ts, session_id, model_id}), for :spawns
    spawns: list[tuple[float, str]] = field(default_factory=list)
    # an MCP active_threads SET's threads, as ours (thread -> {role, joined_at}), for the
    # agent's :active_context
    fields: list[tuple[str, str]] = field(default_factory=list)

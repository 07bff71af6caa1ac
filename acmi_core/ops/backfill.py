"""`acmi doctor`'s checks of the indexes added after the data they cover: a deployment
upgrading from before them holds coordination events no agent's mentions index holds
(``Keys.mentions``), tenants with work no index of tenants with work names
(``Keys.tenants_with``) and entities with memory the memory index misses
(``Keys.memory_index``). Each finding carries the monotone ops (ZADD NX / GT / LT, and a
mention's ZKEEP) that ``acmi migrate`` applies to add what is missing; reads are bounded as
the rest of doctor's (chunks of MEMBER_CHUNK, pipelines of MENTION_AGENTS agents).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from acmi_core.base.errors import StoreCommandError
from acmi_core.base.keys import (
    ACTIVITY,
    CHANGED,
    HITL_OPERATOR,
    HITL_SHARED,
    HYGIENE,
    INTERNAL_MARK,
    MENTIONS_KEPT,
    ROOT,
    TENANT_INDEXES,
    WAKE,
    Keys,
    key_tag,
    mentioned,
)
from acmi_core.base.model import TENANT_RE
from acmi_core.base.stored import scored
from acmi_core.client import Acmi
from acmi_core.jobs.tenants import pruned_through
from acmi_core.ops.findings import MEMBER_CHUNK, Finding, Kind, Repair
from acmi_core.ops.keyspace import ParsedKey
from acmi_core.store.base import Command, Reply, Store


class Doctor(Protocol):
    """The doctor these checks run for (``doctor.Doctor``), by what they use of it."""

    acmi: Acmi
    store: Store

    def keys_for(self, tenant: str) -> Keys: ...


# Agents whose mentions are checked per pipeline (each reads at most MENTIONS_KEPT events).
MENTION_AGENTS: Final = 100
# Per tenant index: the tenant's own index and whether its tenants_with score is the
# latest (ZMAX: changes, heartbeats) or the earliest (ZMIN: dues) of that index.
TENANT_SOURCES: Final = {CHANGED: "max", ACTIVITY: "max", WAKE: "min", HYGIENE: "min"}
# The HITL ones summarize queues (no internal key of a tenant this SCAN check meets): the
# standup-brief job re-syncs them from the queues after each brief
assert set(TENANT_SOURCES) == set(TENANT_INDEXES) - {HITL_SHARED, HITL_OPERATOR}


def memory_index_findings(doctor: Doctor, infos: list[ParsedKey]) -> list[Finding]:
    found = []
    for info in infos:
        index, entity = doctor.keys_for(info.tenant).memory_index(), str(info.entity)
        detail = (
            f"{entity} has memory ({info.slot}) but is not in {index}: the hygiene job "
            "never visits it"
        )
        # now: past the hygiene job's watermark; NX: a memory write's newer time stays
        repair: Repair = ("zadd", index, doctor.acmi.clock(), entity)
        found.append(
            Finding(
                Kind.MEMORY_UNINDEXED,
                index,
                detail,
                entity,
                info.tenant,
                parsed=info,
                repairs=(repair,),
            )
        )
    return found


def mention_findings(doctor: Doctor, info: ParsedKey, size: int) -> list[Finding]:
    """The coordination thread's events, newest first in chunks of MEMBER_CHUNK: each
    agent's MENTIONS_KEPT newest mentions (what its index would hold had every event
    been indexed when written), against the index, MENTION_AGENTS per pipeline. Holds
    at most MENTIONS_KEPT events per agent mentioned."""
    newest: dict[str, list[tuple[int, str]]] = {}
    for start in range(0, size, MEMBER_CHUNK):
        stop = start + MEMBER_CHUNK - 1
        reply = doctor.store.execute(("ZRANGE", info.key, start, stop, "REV", "WITHSCORES"))
        for text, score in scored(reply):
            for local in mentioned(text):
                kept = newest.setdefault(local, [])
                if len(kept) < MENTIONS_KEPT:
                    kept.append((score, text))
    keys = doctor.keys_for(info.tenant)
    agents = list(newest)
    found = []
    for at in range(0, len(agents), MENTION_AGENTS):
        group = agents[at : at + MENTION_AGENTS]
        commands: list[Command] = [
            ("ZRANGE", keys.mentions(local), 0, -1, "WITHSCORES") for local in group
        ]
        for local, held in zip(group, doctor.store.pipeline(commands), strict=True):
            pairs = [(score, text) for text, score in scored(held)]
            found.extend(_mention_gap(keys, local, newest[local], pairs))
    return found


def _mention_gap(
    keys: Keys,
    local: str,
    expected: list[tuple[int, str]],
    held: list[tuple[int, str]],
) -> list[Finding]:
    # what ZKEEP would keep of both (highest score first, ties by member as Redis
    # ranks them): an event a newer one pushed out is no gap
    kept = sorted({*expected, *held}, key=lambda p: (p[0], p[1].encode()), reverse=True)
    have = {text for _, text in held}  # by member: a ZADD NX would not move its score
    missing = [pair for pair in kept[:MENTIONS_KEPT] if pair[1] not in have]
    if not missing:
        return []
    index = keys.mentions(local)
    repairs: list[Repair] = [("zadd", index, score, text) for score, text in missing]
    repairs.append(("zkeep", index, MENTIONS_KEPT, ""))
    detail = (
        f"{len(missing)} coordination event(s) mentioning agent:{local} not in {index}: "
        "its bootstrap does not show them"
    )
    return [
        Finding(
            Kind.MENTION_MISSING,
            index,
            detail,
            f"agent:{local}",
            keys.tenant,
            counts={"missing": len(missing)},
            repairs=tuple(repairs),
        )
    ]


def tenant_findings(doctor: Doctor, raw_keys: Sequence[bytes]) -> list[Finding]:
    """Each tenant index (changes, heartbeats, wakes, hygiene dues) of this SCAN step
    against the index of tenants with work: one pipeline."""
    targets: list[tuple[Keys, str]] = []
    for raw in dict.fromkeys(raw_keys):
        target = _tenant_target(doctor, raw.decode("utf-8", "replace"))
        if target is not None:
            targets.append(target)
    if not targets:
        return []
    commands: list[Command] = []
    for keys, kind in targets:
        end = -1 if TENANT_SOURCES[kind] == "max" else 0
        commands.append(("ZRANGE", _tenant_index(keys, kind), end, end, "WITHSCORES"))
        commands.append(("ZSCORE", keys.tenants_with(kind), keys.tenant))
    replies = doctor.store.pipeline(commands)
    found = []
    pruned: dict[str, int | None] = {}  # the jobs prune what all of them passed: no gap
    for position, (keys, kind) in enumerate(targets):
        head = scored(replies[2 * position])
        score = _score(replies[2 * position + 1])
        if not head:
            continue  # emptied meanwhile, or another type (reported as such)
        ms = head[0][1]
        latest = TENANT_SOURCES[kind] == "max"
        if score is not None and (score >= ms if latest else score <= ms):
            continue
        if score is None and latest:
            if kind not in pruned:
                pruned[kind] = pruned_through(doctor.acmi, kind)
            through = pruned[kind]
            if through is not None and ms <= through:
                continue
        index = keys.tenants_with(kind)
        # a latest-change index: now, past every job's floor, so the next run serves
        # the tenant (ZMAX: a newer write's time stays); a due: its earliest (ZMIN)
        repair: Repair = (
            ("zmax", index, max(ms, doctor.acmi.clock()), keys.tenant)
            if latest
            else ("zmin", index, ms, keys.tenant)
        )
        detail = (
            f"tenant {keys.tenant!r} has work in {_tenant_index(keys, kind)} but is not in "
            f"{index} at its {'latest' if latest else 'earliest'} time: the scheduled jobs "
            "reading it skip the tenant"
        )
        found.append(
            Finding(Kind.TENANT_UNINDEXED, index, detail, tenant=keys.tenant, repairs=(repair,))
        )
    return found


def _tenant_target(doctor: Doctor, text: str) -> tuple[Keys, str] | None:
    """The tenant (and bucket) whose index ``kind`` the key ``text`` is, or None: the
    reference's ``acmi:_<kind>:<t>``, the cluster layout's ``acmi:{t}:_<kind>`` and a
    bucket's ``acmi:{t:b}:_<kind>`` (its tag holds a colon: split around it)."""
    tag = key_tag(text)
    parts = text.replace(tag, "{}").split(":") if tag else text.split(":")
    if len(parts) != 3 or parts[0] != ROOT:
        return None
    bucket = 0
    if parts[1].startswith(INTERNAL_MARK):
        kind, tenant = parts[1][len(INTERNAL_MARK) :], parts[2]
    elif tag and parts[1] == "{}" and parts[2].startswith(INTERNAL_MARK):
        kind = parts[2][len(INTERNAL_MARK) :]
        tenant, _, number = tag[1:-1].partition(":")
        if number and not number.isdigit():
            return None
        bucket = int(number or 0)
    else:
        return None
    if kind not in TENANT_SOURCES or not TENANT_RE.fullmatch(tenant):
        return None
    keys = doctor.keys_for(tenant)
    if bucket:
        if bucket >= keys.buckets:
            return None
        keys = keys.at(bucket)
    return (keys, kind) if _tenant_index(keys, kind) == text else None


def _tenant_index(keys: Keys, kind: str) -> str:
    """The tenant's own index that ``keys.tenants_with(kind)`` summarizes."""
    if kind == CHANGED:
        return keys.changed()
    if kind == ACTIVITY:
        return keys.activity()
    return keys.wake_due() if kind == WAKE else keys.hygiene_due()


def _score(reply: Reply | StoreCommandError) -> int | None:
    if not isinstance(reply, bytes):
        return None
    try:
        return int(float(reply))
    except (ValueError, OverflowError):
        return None

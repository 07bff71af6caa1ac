"""`acmi migrate --layout cluster --target URL`: copy a deployment in the reference key
layout (one Redis node) into the cluster layout on a Redis Cluster, resumably, verified
by ``acmi doctor`` on the target, the source only read.

Each key of the source's SCAN gets its cluster-layout name from ``base/keys.py``'s builders
(``Keys.slot``, ``index``, ``internal``, ``job_tenants``, ``tenants_with``; a key no builder
names, a registry or a HITL queue, keeps what follows its tenant's prefix under the
tenant's tag) and its value byte for byte: ``DUMP`` on the source, ``RESTORE ... REPLACE``
on the target with the key's remaining TTL. A value whose dump is over ``DUMP_MAX_BYTES``
is copied by type in chunks (``ZSCAN`` / ``HSCAN`` / ``SSCAN`` -> ``ZADD`` / ``HSET`` /
``SADD`` of ``CHUNK_MEMBERS``, then its TTL), so no request passes the store's limits
(``MAX_REQUEST_BYTES``, ``MAX_REQUEST_ARGS``). The reference's deployment-wide indexes of
tenants with work (``acmi:_tenants:<kind>``, a ZSET tenant -> ms) become each tenant's
own mark plus the registry (``Keys.tenants_with``, ``tenant_registry``), the typed copy
the cluster layout keeps. API keys and push tokens keep their names (looked up before a
tenant is known, one key a command). A key in the MCP server v2.0 layout is not copied and
is counted (``acmi migrate`` copies it into the SPEC layout first), as is a key whose name
is not UTF-8 or whose large value has no typed copy (``uncopyable``); a key outside
``acmi:*`` is another application's.

Resumable: after each step (``SCAN_COUNT`` keys, or ``count``) the source's SCAN cursor and
the counts so far go to the checkpoint on the target (``keys.RELAYOUT_CHECKPOINT``). A run
stopped anywhere resumes from the last checkpoint: the keys of the step it was in are
written again with the same bytes (``REPLACE``; a typed copy deletes its key first), so
nothing is lost or doubled and the counts are the finished steps'. A first run refuses a
target that holds any ``acmi:*`` key (nothing of another deployment is overwritten); a run
after the last step answers the finished checkpoint. Writers must be stopped on the source
(a key written behind the cursor is not copied); the checkpoint names the source by a hash
of its URL, so a resume from another source is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final, TextIO, TypedDict

from acmi_core.base.errors import AcmiError, AcmiValidationError, StoreCommandError
from acmi_core.base.keys import (
    GLOBAL_KINDS,
    INTERNAL_MARK,
    RELAYOUT_CHECKPOINT,
    ROOT,
    TENANT_INDEXES,
    TENANT_REGISTRY,
    Keys,
    Layout,
)
from acmi_core.base.model import TENANT_RE
from acmi_core.base.settings import Settings
from acmi_core.client import Acmi
from acmi_core.ops.doctor import Doctor
from acmi_core.ops.keyspace import SCAN_COUNT, parse_key, scan_batches, scan_step
from acmi_core.store.base import Command, Reply, Store

# A dump up to this many bytes goes as one RESTORE; a larger value is copied by type.
DUMP_MAX_BYTES: Final = 1024 * 1024
# RESTOREs per pipeline are cut at this many payload bytes (under MAX_REQUEST_BYTES).
PIPELINE_BYTES: Final = 4 * 1024 * 1024
# Members (or fields) per typed-copy command: 2 x 500 + 2 arguments, and events are at
# most a few KiB each, so well under MAX_REQUEST_ARGS and MAX_REQUEST_BYTES.
CHUNK_MEMBERS: Final = 500
_TYPED: Final = {"zset": ("ZSCAN", "ZADD"), "hash": ("HSCAN", "HSET"), "set": ("SSCAN", "SADD")}


class RelayoutCounts(TypedDict):
    copied: int  # keys copied (RESTORE or typed)
    marks: int  # tenants' marks written from the reference's indexes of tenants with work
    mcp_layout: int  # MCP server v2.0 keys, not copied: `acmi migrate` copies them first
    vanished: int  # keys gone between the SCAN and their DUMP
    # a large value of a type with no typed copy (a string, a list), or a key name that is
    # not UTF-8: counted, left on the source
    uncopyable: int


class RelayoutCheckpoint(TypedDict):
    source: str  # a hash of the source's URL
    cursor: int  # the source's SCAN cursor the next step starts from
    steps: int
    done: bool
    counts: RelayoutCounts


class RelayoutResult(TypedDict):
    """What `acmi migrate --layout cluster` answers."""

    done: bool
    resumed: bool  # this run started from a checkpoint a stopped run left
    steps: int
    counts: RelayoutCounts
    verified: bool  # doctor found the same problems on the target as on the source
    source_findings: int
    target_findings: int


def _zero() -> RelayoutCounts:
    return {"copied": 0, "marks": 0, "mcp_layout": 0, "vanished": 0, "uncopyable": 0}


def source_id(url: str) -> str:
    """The checkpoint's name for a source: a hash, no credential of its URL kept."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Mapped:
    """Where a source key goes: ``name`` on the target, or ``split`` (the kind of a
    reference index of tenants with work), or ``skip`` (why it is not copied)."""

    name: str | None = None
    split: str | None = None
    skip: str | None = None


@dataclass
class Relayout:
    """One run (a first or a resumed one) of the copy of ``source`` (reference layout, one
    node) into the cluster layout on ``target``."""

    source: Acmi
    target: Store
    source_url: str
    count: int = SCAN_COUNT
    progress: Callable[[int], None] = field(default=lambda copied: None)
    _keys: dict[tuple[str, Layout], Keys] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if Layout(self.source.settings.key_layout) is not Layout.REFERENCE:
            raise AcmiValidationError(
                "--layout", "source_layout", "copies a deployment in the reference layout"
            )
        self.default = self.source.settings.default_tenant

    def keys(self, tenant: str, layout: Layout = Layout.CLUSTER) -> Keys:
        keys = self._keys.get((tenant, layout))
        if keys is None:
            keys = self._keys[(tenant, layout)] = Keys(tenant, self.default, layout)
        return keys

    # --- names -------------------------------------------------------------------------

    def map_key(self, raw: bytes) -> Mapped | None:
        """The cluster-layout name of a reference-layout key; None: not ACMI's."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            # no builder takes such a name (the ids are text): counted, left on the source
            return Mapped(skip="uncopyable") if raw.startswith(b"acmi:") else None
        rest = text.removeprefix(f"{ROOT}:")
        if rest == text:
            return None  # another application's key
        if rest.startswith(INTERNAL_MARK):
            return self._internal(rest[len(INTERNAL_MARK) :], text)
        info = parse_key(raw, self.default, lambda t: self.keys(t, Layout.REFERENCE))
        if info is not None and info.mcp_destination is not None:
            return Mapped(skip="mcp_layout")
        if info is not None and info.entity is not None:
            keys = self.keys(info.tenant)
            if info.slot is None:
                return Mapped(keys.index(info.category))
            return Mapped(keys.slot(info.entity, info.slot))
        # no builder names it (a registry, a HITL queue, an id outside the grammar): what
        # follows the tenant's reference prefix, under the tenant's tag
        tenant = self.default
        if rest.startswith("tenant:"):
            candidate, sep, tail = rest.removeprefix("tenant:").partition(":")
            if sep and TENANT_RE.fullmatch(candidate):
                tenant, rest = candidate, tail
        return Mapped(self.keys(tenant).prefix + rest)

    def _internal(self, rest: str, text: str) -> Mapped:
        kind, _, tail = rest.partition(":")
        if kind == "tenants" and tail in TENANT_INDEXES:
            return Mapped(split=tail)
        if kind == "jobtenants" and tail:
            return Mapped(self.keys(self.default).job_tenants(tail))
        if kind in GLOBAL_KINDS:
            return Mapped(text)  # API keys, push tokens: the same name in every layout
        tenant, _, parts = tail.partition(":")
        if not TENANT_RE.fullmatch(tenant):
            return Mapped(text)  # no tenant named: kept as it is
        return Mapped(self.keys(tenant).internal(kind, *(parts.split(":") if parts else ())))

    # --- the run -----------------------------------------------------------------------

    def _checkpoint(self) -> RelayoutCheckpoint | None:
        raw = self.target.execute(("GET", RELAYOUT_CHECKPOINT))
        if not isinstance(raw, bytes):
            return None
        data: RelayoutCheckpoint = json.loads(raw)
        return data

    def _save(self, checkpoint: RelayoutCheckpoint) -> None:
        self.target.execute(("SET", RELAYOUT_CHECKPOINT, json.dumps(checkpoint)))

    def copy(self) -> tuple[RelayoutCheckpoint, bool]:
        """Copy every key, step by step from the checkpoint; (the final checkpoint,
        whether this run resumed one)."""
        me = source_id(self.source_url)
        checkpoint = self._checkpoint()
        resumed = checkpoint is not None and not checkpoint["done"]
        if checkpoint is None:
            if any(k != RELAYOUT_CHECKPOINT.encode() for b in self._target_keys() for k in b):
                raise AcmiValidationError(
                    "--target",
                    "empty",
                    "holds acmi:* keys and no checkpoint of a copy: a copy goes into an empty"
                    " cluster (nothing of another deployment is overwritten)",
                )
            checkpoint = {"source": me, "cursor": 0, "steps": 0, "done": False, "counts": _zero()}
        elif checkpoint["source"] != me:
            raise AcmiValidationError(
                "--target", "same_source", "holds the checkpoint of a copy from another source"
            )
        while not checkpoint["done"]:
            cursor, raw_keys = scan_step(
                self.source.store, checkpoint["cursor"], f"{ROOT}:*", self.count
            )
            counts = checkpoint["counts"].copy()
            self._step(list(dict.fromkeys(raw_keys)), counts)
            checkpoint = {
                "source": me,
                "cursor": cursor,
                "steps": checkpoint["steps"] + 1,
                "done": cursor == 0,
                "counts": counts,
            }
            self._save(checkpoint)  # after the step's writes: a stop redoes the step
            self.progress(checkpoint["counts"]["copied"])
        return checkpoint, resumed

    def _target_keys(self) -> Iterator[list[bytes]]:
        for batch in scan_batches(self.target, f"{ROOT}:*"):
            yield batch
            if batch:
                return  # one key is enough to know

    def _step(self, raw_keys: list[bytes], counts: RelayoutCounts) -> None:
        mapped = [(raw, m) for raw in raw_keys if (m := self.map_key(raw)) is not None]
        copies = [(raw, m.name) for raw, m in mapped if m.name is not None]
        for raw, m in mapped:
            if m.skip == "mcp_layout":
                counts["mcp_layout"] += 1
            elif m.skip == "uncopyable":
                counts["uncopyable"] += 1
            elif m.split is not None:
                counts["marks"] += self._split(raw, m.split)
        if not copies:
            return
        reads: list[Command] = []
        for raw, _ in copies:
            reads += [("DUMP", raw), ("PTTL", raw), ("TYPE", raw)]
        replies = self.source.store.pipeline(reads)
        writes: list[Command] = []
        weight = 0
        for position, (raw, name) in enumerate(copies):
            dump, ttl, kind = replies[3 * position : 3 * position + 3]
            if not isinstance(dump, bytes) or not isinstance(ttl, int) or ttl == -2:
                counts["vanished"] += 1
                continue
            keep_ms = max(ttl, 0)  # -1: no TTL (RESTORE's 0)
            if len(dump) > DUMP_MAX_BYTES:
                type_name = kind.decode() if isinstance(kind, bytes) else ""
                if self._typed(raw, name, type_name, keep_ms):
                    counts["copied"] += 1
                else:
                    counts["uncopyable"] += 1
                continue
            if writes and weight + len(dump) > PIPELINE_BYTES:
                self._write(writes)
                writes, weight = [], 0
            writes.append(("RESTORE", name, keep_ms, dump, "REPLACE"))
            weight += len(dump)
            counts["copied"] += 1
        if writes:
            self._write(writes)

    def _write(self, commands: list[Command]) -> None:
        for reply in self.target.pipeline(commands):
            if isinstance(reply, StoreCommandError):
                raise reply  # nothing saved: the step is redone by the next run

    def _typed(self, raw: bytes, name: str, kind: str, keep_ms: int) -> bool:
        """A large ZSET, HASH or SET copied in chunks: deleted first, so a redone step
        copies it whole again. False for another type (counted, not copied)."""
        if kind not in _TYPED:
            return False
        scan, add = _TYPED[kind]
        self.target.execute(("DEL", name))
        cursor = 0
        while True:
            reply = self.source.store.execute((scan, raw, cursor, "COUNT", CHUNK_MEMBERS))
            cursor, items = _scan_reply(reply)
            if items:
                if kind == "zset":  # ZSCAN gives member, score: ZADD takes score, member
                    pairs = list(zip(items[::2], items[1::2], strict=True))
                    items = [x for member, score in pairs for x in (score, member)]
                self.target.execute((add, name, *items))
            if cursor == 0:
                break
        if keep_ms:
            self.target.execute(("PEXPIRE", name, keep_ms))
        return True

    def _split(self, raw: bytes, kind: str) -> int:
        """The reference's index of tenants with work ``kind`` as each tenant's mark and
        the registry (ZADD and SADD: a redone step writes the same)."""
        marks = 0
        cursor = 0
        while True:
            reply = self.source.store.execute(("ZSCAN", raw, cursor, "COUNT", CHUNK_MEMBERS))
            cursor, items = _scan_reply(reply)
            commands: list[Command] = []
            tenants: list[bytes] = []
            for member, score in zip(items[::2], items[1::2], strict=True):
                tenant = member.decode("utf-8", "replace")
                if not TENANT_RE.fullmatch(tenant):
                    continue  # no tenant: nothing a job could serve
                commands.append(("ZADD", self.keys(tenant).tenants_with(kind), score, member))
                tenants.append(member)
            if tenants:
                commands.append(("SADD", TENANT_REGISTRY, *tenants))
                self._write(commands)
                marks += len(tenants)
            if cursor == 0:
                return marks

    # --- verification ------------------------------------------------------------------

    def verify(self, target_settings: Settings) -> tuple[bool, int, int]:
        """Doctor on the source and on the target: the same problems, by kind, entity
        and tenant (their keys are named by each layout)."""
        target = Acmi(self.target, target_settings)
        found_source = _problems(Doctor(self.source))
        found_target = _problems(Doctor(target))
        mcp = {p for p in found_source if p[0] == "mcp_layout"}  # not copied (counted)
        return found_source - mcp == found_target, len(found_source), len(found_target)


def _problems(doctor: Doctor) -> set[tuple[str, str | None, str | None]]:
    return {(f.kind.value, f.entity, f.tenant) for f in doctor.findings()}


def _scan_reply(reply: Reply) -> tuple[int, list[bytes]]:
    if (
        isinstance(reply, list)
        and len(reply) == 2
        and isinstance(reply[0], bytes)
        and isinstance(reply[1], list)
    ):
        return int(reply[0]), [x for x in reply[1] if isinstance(x, bytes)]
    raise AcmiError("a SCAN of a key gave an unexpected reply", field="scan")


def target_settings(source: Settings, url: str) -> Settings:
    """The target deployment's settings: the source's, in the cluster layout on ``url``."""
    return source.model_copy(
        update={"key_layout": Layout.CLUSTER.value, "redis_cluster": True, "redis_url": url}
    )


def relayout(source: Acmi, target: Store, source_url: str, settings: Settings) -> RelayoutResult:
    """Copy (or resume copying) ``source`` into ``target``, then verify it with doctor."""
    run = Relayout(source, target, source_url)
    checkpoint, resumed = run.copy()
    verified, n_source, n_target = run.verify(settings)
    return {
        "done": checkpoint["done"],
        "resumed": resumed,
        "steps": checkpoint["steps"],
        "counts": checkpoint["counts"],
        "verified": verified,
        "source_findings": n_source,
        "target_findings": n_target,
    }


def relayout_report(acmi: Acmi, target_url: str, *, out: TextIO, err: TextIO) -> int:
    """`acmi migrate --layout cluster --target URL`: the copy into a Redis Cluster at
    ``target_url``, its result as one JSON object; exit 0 when done and verified."""
    from acmi_core.store.cluster import ClusterStore

    if not target_url.startswith(("redis://", "rediss://")):
        raise AcmiValidationError("--target", "url", "must be a redis:// or rediss:// seed node")
    source_url = acmi.settings.redis_url
    if not source_url or acmi.settings.redis_cluster:
        raise AcmiValidationError(
            "--layout",
            "source",
            "copies from one Redis node (ACMI_REDIS_URL, the reference layout)",
        )
    settings = target_settings(acmi.settings, target_url)
    target = ClusterStore(target_url, settings)
    try:
        print("# copying into the cluster layout (resumable: run again after a stop)", file=err)
        result = relayout(acmi, target, source_url, settings)
    finally:
        target.close()
    print(json.dumps(result), file=out)
    return 0 if result["done"] and result["verified"] else 1

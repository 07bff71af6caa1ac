"""`acmi doctor`: check a keyspace other tools wrote.

A deployment of the reference TypeScript ACMI leaves data our reads cannot see or serve:
entities its SDK wrote without an ``acmi:<cat>:list`` entry (so ``acmi.list`` misses
them), legacy timeline members, ids outside our grammar, non-object profiles, keys of
the wrong Redis type, and its MCP server v2.0 layout ``acmi:<tenant>:<ns>:<id>:<slot>``
that nothing else reads. And agent memory where an older ACMI kept it: ``hot.*`` and
``heartbeat.*`` (the hygiene job's bookkeeping included) in the signals, ``warm.*`` in the
profile, where any replace of those objects erases it; ``acmi migrate`` moves it into
the memory's own slots (``memory:hot``, ``memory:heartbeat``, ``memory:warm``). And the
entries data older than an index lacks (``ops/backfill.py``).

``Doctor`` walks the keyspace with SCAN (never KEYS: it would block Redis for the whole
keyspace; on a Redis Cluster every primary's SCAN in turn, ``keyspace.scan_batches``) and
never writes. It reads the deployment's key layout (``ACMI_KEY_LAYOUT``): the same data
in either gives the same findings, named by its keys. Memory stays bounded: one SCAN
step of keys at a time, the per-key reads of a step in one pipeline, timeline members in
chunks; findings stream out as they are found. Round trips per ``SCAN_COUNT`` keys: one
SCAN, one pipeline for the keys, and one per ``PIPELINE_MEMBERS`` timeline members.

``acmi migrate`` (``ops/migrate.py``) repairs what this finds; the key layout it reads is
``ops/keyspace.py``'s.

One module: the walk (a SCAN step, its pipeline, its timeline chunks) and the checks it
runs on each key are one pass over the keyspace; a check apart would walk it again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, Protocol, TextIO

from acmi_core.base.errors import AcmiValidationError, StoreCommandError
from acmi_core.base.keys import (
    ALL_SLOTS,
    COORDINATION_THREAD,
    ROOT,
    SPAWNS,
    Keys,
    Layout,
    Slot,
)
from acmi_core.base.model import EntityId, check_category, dumps
from acmi_core.base.stored import Unreadable, load_stored
from acmi_core.client import Acmi
from acmi_core.coordination.work import CATEGORY as WORK
from acmi_core.coordination.work import owner_entity
from acmi_core.memory.slots import memory_slot
from acmi_core.ops import backfill
from acmi_core.ops.findings import (
    MEMBER_CHUNK,
    Finding,
    Kind,
    McpCopy,
    McpState,
)
from acmi_core.ops.keyspace import (
    MCP_ACTIVE_THREADS,
    MCP_SLOT_TYPES,
    MEMORY_INDEXED_SLOTS,
    ParsedKey,
    Progress,
    mcp_spawn,
    member_state,
    memory_rank,
    no_progress,
    object_problem,
    parse_key,
    scan_batches,
    slot_rank,
    type_name,
)
from acmi_core.ops.results import FindingLine, StepLine
from acmi_core.store.base import Command, Reply

# Timeline members per pipeline (MEMBER_CHUNK: per ZRANGE, in findings.py).
PIPELINE_MEMBERS: Final = 5000
# A copied MCP timeline is one ZADD per member inside one script, which blocks Redis
# while it runs; a longer timeline is reported, not copied.
MAX_COPY_MEMBERS: Final = 10_000

# The Redis type each slot holds: keyspace.SLOT_TYPES (one entry per slot keys.py names),
# and the MCP layout's active_threads SET
EXPECTED_TYPE: Final = MCP_SLOT_TYPES
INDEX_TYPE: Final = "set"


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
) -> McpCopy:
    if not isinstance(source, bytes):
        return McpCopy(McpState.UNCOPYABLE)
    same = isinstance(dest, bytes) and (dest == source or (profile and _same_profile(source, dest)))
    if dest_type == "string" and same:
        return McpCopy(McpState.COPIED)
    if dest_type != "none":
        return McpCopy(McpState.CONFLICT)
    text = _utf8(source)
    return McpCopy(McpState.UNCOPYABLE) if text is None else McpCopy(McpState.TO_COPY, text)


def _compare_timeline(
    size: int,
    source: Reply | StoreCommandError,
    dest_type: str,
    dest: Reply,
    spawns_dest: Reply | None = None,
) -> McpCopy:
    """An MCP timeline against its SPEC timeline; with ``spawns_dest`` (an agent's
    :spawns), its spawn records go there instead, as our spawn records."""
    if size > MAX_COPY_MEMBERS:
        return McpCopy(McpState.TOO_LARGE)
    if not isinstance(source, list):
        return McpCopy(McpState.UNCOPYABLE)
    pairs = _zset_pairs(source)
    spawns: set[tuple[bytes, bytes]] = set()
    if spawns_dest is not None:
        for member, score in list(pairs):
            spawn = mcp_spawn(member)
            if spawn is not None:
                pairs.discard((member, score))
                spawns.add((spawn, score))
    spawns_missing = spawns - _zset_pairs(spawns_dest)
    if (not pairs or (dest_type == "zset" and pairs <= _zset_pairs(dest))) and not spawns_missing:
        return McpCopy(McpState.COPIED)
    if pairs and dest_type != "none" and not pairs <= _zset_pairs(dest):
        return McpCopy(McpState.CONFLICT)
    copies: list[list[tuple[float, str]]] = [[], []]
    for target, chosen in ((0, pairs if dest_type == "none" else set()), (1, spawns_missing)):
        for member, score in sorted(chosen):
            text = _utf8(member)
            if text is None:
                return McpCopy(McpState.UNCOPYABLE)  # a partial copy would be retried forever
            copies[target].append((float(score), text))
    return McpCopy(McpState.TO_COPY, members=copies[0], spawns=copies[1])


def _compare_threads(
    size: int, source: Reply | StoreCommandError, dest_type: str, dest: Reply
) -> McpCopy:
    """An MCP ``active_threads`` SET (``<thread>:<role>:<ts>`` members, one a call of its
    acmi_active) against the agent's :active_context: each thread it names, with its
    latest role and ts as ``{role, joined_at}``, is to copy unless our hash has the thread
    (a join written here wins)."""
    if size > MAX_COPY_MEMBERS:
        return McpCopy(McpState.TOO_LARGE)
    if not isinstance(source, list):
        return McpCopy(McpState.UNCOPYABLE)
    if dest_type not in ("none", "hash"):
        return McpCopy(McpState.CONFLICT)
    latest: dict[str, tuple[int, str]] = {}
    for member in source:
        text = _utf8(member) if isinstance(member, bytes) else None
        thread, role, ts = [*text.rsplit(":", 2), "", ""][:3] if text else ("", "", "")
        if not thread or not role or not ts.isdigit():
            return McpCopy(McpState.UNCOPYABLE)  # not its shape: reported, never guessed
        if thread not in latest or int(ts) > latest[thread][0]:
            latest[thread] = (int(ts), role)
    ours = dest if isinstance(dest, list) else []
    have = {f.decode("utf-8", "replace") for f in ours[::2] if isinstance(f, bytes)}
    fields = [
        (thread, dumps({"role": role, "joined_at": ts}))
        for thread, (ts, role) in sorted(latest.items())
        if thread not in have
    ]
    if not fields:
        return McpCopy(McpState.COPIED)
    return McpCopy(McpState.TO_COPY, fields=fields)


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
        progress: Progress = no_progress,
    ) -> None:
        self.acmi = acmi
        self.store = acmi.store
        self.default_tenant = acmi.settings.default_tenant
        self.layout = Layout(acmi.settings.key_layout)  # the deployment's: what is parsed
        self.category = None if category is None else check_category(category, "--category")
        self.tenant_id_check = tenant_id_check
        self.progress = progress
        self.scanned = 0
        self._keys: dict[str, Keys] = {}

    def keys_for(self, tenant: str) -> Keys:
        keys = self._keys.get(tenant)
        if keys is None:
            buckets = self.acmi.settings.buckets_for(tenant)  # the deployment's B for it
            keys = Keys(tenant, self.default_tenant, self.layout, buckets)
            self._keys[tenant] = keys
        return keys

    def findings(self) -> Iterator[Finding]:
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[Finding]]:
        for raw_keys in scan_batches(self.store, f"{ROOT}:*"):
            self.scanned += len(raw_keys)
            batch = self._check(raw_keys)
            self.progress(self.scanned)
            if batch:
                yield batch

    def _parse(self, raw_keys: Sequence[bytes]) -> list[ParsedKey]:
        parsed = []
        for raw in dict.fromkeys(raw_keys):  # SCAN may repeat a key
            info = parse_key(raw, self.default_tenant, self.keys_for, self.layout)
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
        memories: dict[tuple[str, EntityId], ParsedKey] = {}  # first memory slot key
        for info in parsed:
            read(info, "type", ("TYPE", info.key))
            if info.entity is None or info.slot is None:
                continue
            if info.mcp_destination is not None:
                if info.slot == Slot.TIMELINE:
                    read(info, "mcp_zcard", ("ZCARD", info.key))
                elif info.slot == MCP_ACTIVE_THREADS:
                    read(info, "mcp_zcard", ("SCARD", info.key))
                continue
            if info.slot in (Slot.PROFILE, Slot.SIGNALS):
                read(info, "get", ("GET", info.key))
            if info.slot == Slot.PROFILE and info.category == WORK:
                owners = self.keys_for(info.tenant).work_owners()
                read(info, "work_owner", ("HGET", owners, info.entity.local_id))
            elif info.slot == Slot.TIMELINE:
                read(info, "zcard", ("ZCARD", info.key))
            first = indexed.setdefault((info.tenant, info.entity), info)
            if slot_rank(info) < slot_rank(first):
                indexed[(info.tenant, info.entity)] = info
            if info.slot in MEMORY_INDEXED_SLOTS:
                known = memories.setdefault((info.tenant, info.entity), info)
                if memory_rank(info) < memory_rank(known):
                    memories[(info.tenant, info.entity)] = info
        for (tenant, entity), info in indexed.items():
            # Reported with the entity's first existing slot key, whichever SCAN step
            # holds it: no memory of what was reported, whatever the keyspace's size.
            keys = self.keys_for(tenant)
            read(info, "indexed", ("SISMEMBER", keys.index(entity.category), entity.local_id))
            for slot in ALL_SLOTS[: slot_rank(info)]:
                read(info, "earlier", ("EXISTS", keys.slot(entity, slot)))
        for (tenant, entity), info in memories.items():
            # as above: reported with its first memory slot key, whichever step holds it
            keys = self.keys_for(tenant)
            read(info, "memory_indexed", ("ZSCORE", keys.memory_index(), str(entity)))
            for slot in MEMORY_INDEXED_SLOTS[: memory_rank(info)]:
                read(info, "memory_earlier", ("EXISTS", keys.slot(entity, slot)))
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
        memory_unindexed: dict[bytes, ParsedKey] = {}
        owners: dict[bytes, str] = {}  # a work profile's owner, by its key
        for info, what, at in reads:
            reply = replies[at]
            if what == "type":
                actual = type_name(reply)
                found.extend(self._key_findings(info, actual))
                if info.mcp_destination is not None and actual != "none":
                    mcp[info.key] = (info, 0)
            elif what == "mcp_zcard" and info.key in mcp:
                mcp[info.key] = (info, reply if isinstance(reply, int) else 0)
            elif what == "get":
                problem = object_problem(reply)
                if problem is not None:
                    found.append(
                        Finding(Kind.NOT_OBJECT, info.text, problem, str(info.entity), info.tenant)
                    )
                else:
                    found.extend(self._memory_finding(info, reply))
                    if self.tenant_id_check:
                        found.extend(self._tenant_id_finding(info, reply))
                    owner = _work_owner(info, reply)
                    if owner is not None:
                        owners[info.key] = owner
            elif what == "work_owner" and reply is None and info.key in owners:
                found.append(self._unowned_finding(info, owners[info.key]))
            elif what == "zcard" and isinstance(reply, int) and reply > 0:
                timelines.append((info, reply))
            elif what == "indexed" and reply == 0:
                unindexed[info.key] = info
            elif what == "earlier" and reply != 0:
                unindexed.pop(info.key, None)  # reported with its earlier key
            elif what == "memory_indexed" and reply is None:
                memory_unindexed[info.key] = info
            elif what == "memory_earlier" and reply != 0:
                memory_unindexed.pop(info.key, None)
        for info in unindexed.values():
            index = self.keys_for(info.tenant).index(info.category)
            detail = f"not in {index}: `acmi list {info.category}` misses it"
            found.append(
                Finding(
                    Kind.INDEX_MISSING, index, detail, str(info.entity), info.tenant, parsed=info
                )
            )

        found.extend(backfill.memory_index_findings(self, list(memory_unindexed.values())))
        found.extend(self._timeline_findings(timelines))
        for info, size in timelines:
            if str(info.entity) == COORDINATION_THREAD:
                found.extend(backfill.mention_findings(self, info, size))
        found.extend(self._mcp_findings(list(mcp.values())))
        if self.category is None:
            found.extend(backfill.tenant_findings(self, raw_keys))
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

    def _memory_finding(self, info: ParsedKey, reply: Reply | StoreCommandError) -> list[Finding]:
        if not isinstance(reply, bytes) or b"." not in reply:
            return []  # gone meanwhile; or no field name with a prefix at all
        fields = [k for k in load_stored(reply) if memory_slot(k) is not None]
        if not fields:
            return []
        prefixes = sorted({k.split(".", 1)[0] + ".*" for k in fields})
        slots = sorted({str(memory_slot(k)) for k in fields})
        detail = (
            f"{len(fields)} memory fields ({', '.join(prefixes)}) in the {info.slot}, where a "
            f"replace erases them: `acmi migrate` moves them into {', '.join(slots)}"
        )
        return [
            Finding(
                Kind.MEMORY_OLD_PLACE, info.text, detail, str(info.entity), info.tenant, parsed=info
            )
        ]

    def _unowned_finding(self, info: ParsedKey, owner: str) -> Finding:
        index = self.keys_for(info.tenant).work_owners()
        detail = (
            f"owner {owner!r} in the profile but not in {index}: `acmi work list --owner` and "
            "the bootstrap miss it; `acmi migrate` assigns it"
        )
        return Finding(
            Kind.WORK_UNOWNED, info.text, detail, str(info.entity), info.tenant, parsed=info
        )

    def _tenant_id_finding(
        self, info: ParsedKey, reply: Reply | StoreCommandError
    ) -> list[Finding]:
        if info.slot != Slot.PROFILE or info.tenant != self.default_tenant:
            return []
        assert isinstance(reply, bytes)  # object_problem found a JSON object
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
            cost = 3 * min(item[1], MAX_COPY_MEMBERS) + 1  # source, SPEC timeline, :spawns
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
                assert info.entity is not None
                spawns = self.keys_for(info.tenant).slot(info.entity, SPAWNS)
                commands += [
                    ("ZRANGE", info.key, 0, -1, "WITHSCORES"),
                    ("TYPE", dest),
                    ("ZRANGE", dest, 0, MAX_COPY_MEMBERS, "WITHSCORES"),
                    # an agent's spawn records go to its :spawns (read there, bounded)
                    ("ZRANGE", spawns, 0, MAX_COPY_MEMBERS, "WITHSCORES")
                    if info.entity.category == "agent"
                    else ("TYPE", dest),
                ]
            elif info.slot == MCP_ACTIVE_THREADS:
                # its members, and our threads (joined threads are few: read whole)
                members: Command = (
                    ("SMEMBERS", info.key) if size <= MAX_COPY_MEMBERS else ("TYPE", info.key)
                )
                commands += [members, ("TYPE", dest), ("HGETALL", dest), ("TYPE", dest)]
            elif info.slot == Slot.TIMELINE:
                commands += [("TYPE", info.key), ("TYPE", dest), ("TYPE", dest), ("TYPE", dest)]
            else:
                commands += [("GET", info.key), ("TYPE", dest), ("GET", dest), ("TYPE", dest)]
        replies = self.store.pipeline(commands)
        found = []
        for position, (info, size) in enumerate(group):
            assert info.mcp_destination is not None and info.entity is not None
            source, dest_type, dest_raw, spawns_raw = replies[4 * position : 4 * position + 4]
            dest_reply = None if isinstance(dest_raw, StoreCommandError) else dest_raw
            if info.slot == Slot.TIMELINE:
                agent = info.entity.category == "agent"
                spawns_reply = [] if isinstance(spawns_raw, StoreCommandError) else spawns_raw
                copy = _compare_timeline(
                    size,
                    source,
                    type_name(dest_type),
                    dest_reply,
                    spawns_reply if agent else None,
                )
            elif info.slot == MCP_ACTIVE_THREADS:
                copy = _compare_threads(size, source, type_name(dest_type), dest_reply)
            else:
                copy = _compare_string(
                    source,
                    type_name(dest_type),
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


def _work_owner(info: ParsedKey, reply: Reply | StoreCommandError) -> str | None:
    """The owner a work item's profile names (as the reference CLI writes it,
    ``{"owner": "bentley"}``), when it is one ``assign`` takes; else None."""
    if info.slot != Slot.PROFILE or info.category != WORK or not isinstance(reply, bytes):
        return None
    owner = load_stored(reply).get("owner")  # object_problem found a JSON object
    if not isinstance(owner, str):
        return None
    try:
        owner_entity(owner)
    except AcmiValidationError:
        return None  # not an id: left to the profile, as the reference wrote it
    return owner


def stderr_progress(err: TextIO) -> Progress:
    """Progress as a `# scanned N keys` line on ``err`` (rewritten in place on a tty)."""
    ending = "\r" if err.isatty() else "\n"

    def show(scanned: int) -> None:
        print(f"# scanned {scanned} keys", file=err, end=ending, flush=True)

    return show


class Reported(Protocol):
    """What `acmi doctor` and `acmi migrate` print: a Finding, a Step."""

    @property
    def name(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def entity(self) -> str | None: ...

    @property
    def detail(self) -> str: ...

    def to_dict(self) -> FindingLine | StepLine: ...


def report_line(item: Reported) -> str:
    about = f" ({item.entity})" if item.entity else ""
    return f"{item.name:<16} {item.key}{about}: {item.detail}"


def stream(items: Iterable[Reported], out: TextIO, *, as_json: bool) -> dict[str, int]:
    """Each item on ``out`` as it comes (a line of text, or its JSON object); the number
    of items of each name."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.name] = counts.get(item.name, 0) + 1
        print(json.dumps(item.to_dict()) if as_json else report_line(item), file=out, flush=True)
    return counts


def doctor_report(
    acmi: Acmi, *, out: TextIO, err: TextIO, as_json: bool = False, category: str | None = None
) -> int:
    """Stream doctor's findings to ``out`` (one line each: text, or a JSON object with
    ``as_json``), then a summary; progress on ``err``. Returns the exit code: 0 when
    clean, 1 when problems were found."""
    doctor = Doctor(acmi, category=category, progress=stderr_progress(err))
    counts = stream(doctor.findings(), out, as_json=as_json)
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

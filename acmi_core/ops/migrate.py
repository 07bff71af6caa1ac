"""`acmi migrate`: repair what ``acmi doctor`` (``ops/doctor.py``) finds.

``Migrate`` repairs what can be repaired, each entity in one ``WritePlan`` (one atomic
script): missing index entries, copies of MCP-layout keys into the SPEC layout (never
over an existing key: a differing destination is a conflict, left alone), and, when
asked, a ``tenant_id`` on default-tenant profiles without one. Every repair is
idempotent: a second run finds nothing to do.

Memory in the old places (``hot.*``/``heartbeat.*`` signals, ``warm.*`` profile fields) is
moved into the memory slots, an entity at a time in one script that is a check-and-set:
it applies only if the signals and profile still hold exactly what was read (else it
re-reads, ``MOVE_ATTEMPTS`` times), so a concurrent write is never lost. A field the
memory slot already holds keeps the slot's value (written since the upgrade: newer). The
entity joins the memory index (the hygiene job's) unless all it had was the hygiene job's
own bookkeeping (a webhook entity the old job visited).

Index entries doctor finds missing (mentions, tenants with work, memory) are added with the
ops each finding carries, REPAIR_OPS and REPAIR_BYTES a script: only adds or monotone
moves, so live writers lose nothing and a second run adds nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, TextIO

from acmi_core.base.errors import AcmiValidationError, Conflict, StoreCommandError
from acmi_core.base.keys import SPAWNS, Keys, Layout, Slot
from acmi_core.base.model import EntityId, check_tenant, dumps
from acmi_core.base.stored import Unreadable, load_stored
from acmi_core.client import Acmi
from acmi_core.memory.slots import HEARTBEAT, HYGIENE_KEYS, memory_slot
from acmi_core.ops.doctor import Doctor, stderr_progress, stream
from acmi_core.ops.findings import Finding, Kind, McpCopy, McpState, Repair
from acmi_core.ops.keyspace import ParsedKey, Progress, no_progress, object_problem
from acmi_core.ops.results import StepLine
from acmi_core.store.scripts import new_request_id
from acmi_core.store.writes import FieldMode, WritePlan


class Action(StrEnum):
    INDEX_ADD = "index_add"
    COPY = "copy"
    TENANT_ID_SET = "tenant_id_set"
    MEMORY_MOVE = "memory_move"  # memory fields moved into the memory's own slots
    # what older data holds added to the indexes written since the upgrade
    MENTION_ADD = "mention_add"  # coordination events into an agent's mentions index
    TENANT_INDEX_ADD = "tenant_index_add"  # a tenant with work into keys.tenants_with
    MEMORY_INDEX_ADD = "memory_index_add"  # an entity with memory into keys.memory_index
    WORK_ASSIGN = "work_assign"  # a reference work item into its owner's indexes
    CONFLICT = "conflict"  # a differing destination exists: nothing written
    NOT_COPIED = "not_copied"  # too large, not UTF-8, or another type: nothing written


# What migrate cannot repair: reported, and `acmi migrate` exits 1.
UNREPAIRED: Final = frozenset({Action.CONFLICT, Action.NOT_COPIED})
MOVE_ATTEMPTS: Final = 5  # re-reads of an entity whose profile or signals kept changing
# Index repairs per script: ZADD NX / GT / LT (and a mention's ZKEEP), bounded by ops and
# by the bytes of the members (a mention's member is a whole event), so a script stays
# small however many entries are missing.
REPAIR_OPS: Final = 200
REPAIR_BYTES: Final = 512 * 1024
INDEX_REPAIRS: Final = {
    Kind.MENTION_MISSING: Action.MENTION_ADD,
    Kind.TENANT_UNINDEXED: Action.TENANT_INDEX_ADD,
    Kind.MEMORY_UNINDEXED: Action.MEMORY_INDEX_ADD,
}


@dataclass(frozen=True)
class Step:
    action: Action
    key: str
    detail: str
    entity: str | None = None

    @property
    def name(self) -> str:
        return self.action.value

    def to_dict(self) -> StepLine:
        data: StepLine = {"action": self.action.value, "key": self.key, "detail": self.detail}
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
        progress: Progress = no_progress,
    ) -> None:
        self.acmi = acmi
        self.store = acmi.store
        self.clock = acmi.clock
        self.dry_run = dry_run
        self.tenant_id = None if tenant_id is None else check_tenant(tenant_id, "--tenant-id")
        self.doctor = Doctor(
            acmi, category=category, tenant_id_check=tenant_id is not None, progress=progress
        )

    def run(self) -> Iterator[Step]:
        for batch in self.doctor.batches():
            plans: dict[tuple[str, EntityId], _EntityPlan] = {}
            unrepaired: list[Step] = []
            moves: dict[tuple[str, EntityId], None] = {}
            unowned: list[Finding] = []
            repairs = [f for f in batch if f.kind in INDEX_REPAIRS]
            for finding in batch:
                info = finding.parsed
                if info is None or info.entity is None:
                    continue  # reported by doctor only: nothing to repair
                if finding.kind is Kind.INDEX_MISSING:
                    self._index(plans, info.tenant, info.entity, announce=True)
                elif finding.kind is Kind.MEMORY_OLD_PLACE:
                    moves[(info.tenant, info.entity)] = None
                elif finding.kind is Kind.NO_TENANT_ID:
                    self._fill_tenant_id(plans, info)
                elif finding.kind is Kind.WORK_UNOWNED:
                    unowned.append(finding)
                elif finding.kind is Kind.MCP_LAYOUT and finding.copy is not None:
                    step = self._copy(plans, finding, finding.copy)
                    if step is not None:
                        unrepaired.append(step)
            yield from unrepaired
            for entity_plan in plans.values():
                if not self.dry_run:
                    entity_plan.plan.apply(self.store)
                yield from entity_plan.steps
            for tenant, entity in moves:
                yield from self._move_memory(self.doctor.keys_for(tenant), entity)
            yield from self._repair_indexes(repairs)
            yield from self._assign(unowned)

    def _assign(self, findings: list[Finding]) -> Iterator[Step]:
        """Each work item the reference wrote, assigned to the owner its profile names
        (read again here: the owner written meanwhile wins): one script an item, the
        write ``acmi work assign`` makes (profile, owners HASH, the owner's open index)."""
        for finding in findings:
            info = finding.parsed
            assert info is not None and info.entity is not None
            work = self.acmi.for_tenant(info.tenant).work
            profile = self.acmi.for_tenant(info.tenant).profile.get(str(info.entity)) or {}
            owner = profile.get("owner")
            if not isinstance(owner, str):
                continue  # changed since doctor read it: nothing to assign
            index = self.doctor.keys_for(info.tenant).work_owners()
            if not self.dry_run:
                owner = work.assign(info.entity.local_id, owner)
            detail = f"HSET {info.entity.local_id} {owner} (and its open index)"
            yield Step(Action.WORK_ASSIGN, index, detail, str(info.entity))

    def _repair_indexes(self, findings: list[Finding]) -> Iterator[Step]:
        """The index entries doctor found missing, in scripts of at most REPAIR_OPS ops and
        REPAIR_BYTES of members (one larger event alone). Each op only adds (NX) or moves a
        score the way the writes do (GT / LT), so a concurrent write's entry is never
        overwritten, and a second run finds nothing to add. A mention is its ZADD and a
        ZKEEP: any split of an agent's mentions across scripts keeps the same newest ten."""
        plan, steps, size = WritePlan(), list[Step](), 0
        # in the cluster layout a script holds one tenant's repairs: its keys, one slot
        per_tenant = Layout(self.acmi.settings.key_layout) is Layout.CLUSTER
        tenant: str | None = None
        for finding in findings:
            units = _repair_units(finding.repairs)
            moved = per_tenant and tenant is not None and finding.tenant != tenant
            tenant = finding.tenant
            for unit in units:
                cost = sum(len(member) for _, _, _, member in unit)
                full = len(plan) + len(unit) > REPAIR_OPS or size + cost > REPAIR_BYTES
                if len(plan) and (full or moved):
                    moved = False
                    if not self.dry_run:
                        plan.apply(self.store)
                    yield from steps
                    plan, steps, size = WritePlan(), [], 0
                for op, key, score, member in unit:
                    if op == "zadd":
                        plan.zadd(key, score, member)
                    elif op == "zmax":
                        plan.zmax(key, score, member)
                    elif op == "zmin":
                        plan.zmin(key, score, member)
                    else:
                        plan.zkeep(key, int(score))
                size += cost
            added = len(units)
            detail = f"{added} entr{'y' if added == 1 else 'ies'} added"
            steps.append(Step(INDEX_REPAIRS[finding.kind], finding.key, detail, finding.entity))
        if steps:
            if not self.dry_run:
                plan.apply(self.store)
            yield from steps

    def _move_memory(self, keys: Keys, entity: EntityId) -> list[Step]:
        """The entity's memory fields out of its signals and profile into the memory
        slots: one check-and-set script (module docstring)."""
        for _ in range(MOVE_ATTEMPTS):
            plan, steps = self._memory_plan(keys, entity)
            if self.dry_run or not steps:
                return steps
            try:
                plan.apply(self.store)
            except Conflict:
                continue  # written meanwhile: read again
            return steps
        detail = f"changed during {MOVE_ATTEMPTS} attempts: run migrate again"
        return [Step(Action.NOT_COPIED, keys.signals(entity), detail, str(entity))]

    def _memory_plan(self, keys: Keys, entity: EntityId) -> tuple[WritePlan, list[Step]]:
        sources = (keys.signals(entity), keys.profile(entity))
        replies = self.store.pipeline([("GET", key) for key in sources])
        # RECORD: a retry after a lost reply would meet its own move as a change (SAME)
        # and report nothing moved; the record answers with the move's results
        plan, steps = WritePlan(record=keys.request(new_request_id())), []
        moved: dict[str, list[tuple[FieldMode, str, str]]] = {}
        indexed = False
        for key, reply in zip(sources, replies, strict=True):
            if isinstance(reply, StoreCommandError) or not isinstance(reply, bytes):
                continue  # gone, or another type: doctor reports it
            try:
                value = load_stored(reply)
            except Unreadable:
                continue
            if not isinstance(value, dict):
                continue
            fields = {k: v for k, v in value.items() if memory_slot(k) is not None}
            if not fields:
                continue
            plan.expect(key, reply)
            plan.edit_object(key, [("del", k, "null") for k in fields], field=key)
            for name, field_value in fields.items():
                slot = memory_slot(name)
                assert slot is not None
                # setnx: what the slot holds was written since the upgrade, so is newer
                moved.setdefault(slot, []).append(("setnx", name, dumps(field_value, name)))
                own = name.startswith(HEARTBEAT) and name[len(HEARTBEAT) :] in HYGIENE_KEYS
                indexed = indexed or not own
            names = ", ".join(sorted(fields))
            steps.append(Step(Action.MEMORY_MOVE, key, names[:400], str(entity)))
        for slot, edits in moved.items():
            plan.edit_object(keys.slot(entity, slot), edits, field=slot)
        if indexed:
            # now, past the hygiene job's watermark; NX: a newer write's time stays
            plan.zadd(keys.memory_index(), self.clock(), str(entity))
        return plan, steps

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
        self, plans: dict[tuple[str, EntityId], _EntityPlan], finding: Finding, copy: McpCopy
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
                stored = object_problem(copy.text.encode()) is None
                if stored and "tenant_id" not in load_stored(copy.text.encode()):
                    # in the same script, so a second run finds the copy identical
                    fields: list[tuple[FieldMode, str, str]] = [
                        ("setnx", "tenant_id", dumps(self.tenant_id))
                    ]
                    entity_plan.plan.edit_object(destination, fields)
        for score, member in copy.members:
            entity_plan.plan.zadd(destination, score, member)
        for thread, entry in copy.fields:  # an MCP active_threads SET's threads
            entity_plan.plan.hset(destination, thread, entry)
        spawns = mapped.slot(info.entity, SPAWNS)
        for score, member in copy.spawns:  # an MCP timeline's spawn records
            entity_plan.plan.zadd(spawns, score, member)
        detail = f"from {info.text}"
        if copy.spawns:
            detail += f" ({len(copy.spawns)} spawn records into {spawns})"
        if copy.fields:
            detail += f" ({len(copy.fields)} threads)"
        entity_plan.steps.append(Step(Action.COPY, destination, detail, finding.entity))
        return None


def _repair_units(repairs: tuple[Repair, ...]) -> list[list[Repair]]:
    """A finding's repairs in the pieces that must run in one script: each add, with the
    ZKEEP of its key when the finding trims one."""
    keeps = {key: (op, key, score, member) for op, key, score, member in repairs if op == "zkeep"}
    return [
        [repair, *([keeps[repair[1]]] if repair[1] in keeps else [])]
        for repair in repairs
        if repair[0] != "zkeep"
    ]


def migrate_report(
    acmi: Acmi,
    *,
    out: TextIO,
    err: TextIO,
    as_json: bool = False,
    dry_run: bool = False,
    tenant_id: str | None = None,
    category: str | None = None,
    layout: str | None = None,
    target: str | None = None,
) -> int:
    """Run (or with ``dry_run`` only print) the repairs, one line per step, then a
    summary. Returns 0 when everything found was repaired, 1 when conflicts or keys
    that cannot be copied remain. With ``layout`` (``cluster``) and ``target`` (a seed
    node's URL): the copy of the deployment into the cluster layout there instead
    (``ops/relayout.py``)."""
    if layout is not None or target is not None:
        return _relayout(acmi, layout, target, out, err, dry_run, tenant_id, category)
    migrate = Migrate(
        acmi,
        dry_run=dry_run,
        tenant_id=tenant_id,
        category=category,
        progress=stderr_progress(err),
    )
    counts = stream(migrate.run(), out, as_json=as_json)
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


def _relayout(
    acmi: Acmi,
    layout: str | None,
    target: str | None,
    out: TextIO,
    err: TextIO,
    *others: object,
) -> int:
    if layout != "cluster":
        raise AcmiValidationError("--layout", "enum", "must be cluster (with --target)")
    if not target:
        raise AcmiValidationError("--target", "required", "the cluster's seed node URL")
    if any(o not in (None, False) for o in others):
        raise AcmiValidationError(
            "--layout", "alone", "takes no --dry-run, --tenant-id or --category"
        )
    from acmi_core.ops.relayout import relayout_report

    return relayout_report(acmi, target, out=out, err=err)

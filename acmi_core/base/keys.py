"""The only place that builds a Redis key.

Default tenant (wire-compatible with the reference deployment)::

    acmi:<cat>:<id>:profile | signals | timeline      STRING | STRING | ZSET
    acmi:<cat>:list                                    SET of ids
    acmi:agent:<id>:spawns | active_context | rollup:latest
    acmi:<cat>:<id>:memory:hot | memory:warm | memory:heartbeat   STRING JSON (memory)
    acmi:<cat>:<id>:memory:soul | memory:user | memory:agents    STRING JSON (startup files)
    acmi:work:<id>:sessions
    acmi:ns:<labels>:store:items                       HASH (a LangGraph store namespace)
    acmi:hitl:<cat>:<id>:open | closed                 ZSET (SPEC v1.3 §11.6 per-addressee HITL)
    acmi:thread:hitl:open | closed                     ZSET (the shared HITL queue, SPEC v1.2)

Other tenants (ACMI SPEC v1.3 §12.2): the same under ``acmi:tenant:<tenant>:``.
ACMI's own bookkeeping lives under ``acmi:_<kind>:<tenant>:...``: a category must start
with a letter, so no entity key can ever equal one of these.

The cluster layout (``ACMI_KEY_LAYOUT=cluster``, ``Layout.CLUSTER``): every key of a
tenant, the default one included, carries the tenant's hash tag, so each script's keys
share one slot of a Redis Cluster::

    acmi:{<tenant>}:<cat>:<id>:<slot>     the entity slots, the category lists, registries
    acmi:{<tenant>}:_<kind>:...            the tenant's bookkeeping (internal)
    acmi:{<tenant>}:_tenants:<kind>        the tenant's mark in the index of tenants with
                                           work (``tenants_with``): in its own slot
    acmi:{_deployment}:_tenants            SET of the tenants that ever marked one
                                           (``tenant_registry``): what the jobs fan out over

Buckets (``ACMI_CLUSTER_BUCKETS``, B per tenant): one tag per tenant is one bucket (B = 1,
the names above). With B > 1 an entity's keys carry its bucket's tag, ``{<tenant>}`` for
bucket 0 and ``{<tenant>:<b>}`` for b >= 1, b = CRC-32 (zlib) of the entity id
(``<cat>:<id>``) mod B: stable across processes and versions. The coordination categories
(``PINNED_CATEGORIES``: agents, work items, threads, topics, workflows) and every
coordination key (leases, locks, HITL queues and records, open work, mentions, lessons,
activity, wake) stay in bucket 0, so their scripts stay one slot and one round trip. The
tenant-wide indexes a write of any entity keeps (change index, marks, memory index,
hygiene due, category lists, job watermarks, request records) live once per bucket under
that bucket's tag (``Keys.at``, ``Keys.of``): the write keeps its own bucket's, and the
readers that span a tenant fan out over ``Keys.buckets``.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from enum import StrEnum
from typing import Final

from acmi_core.base.model import EntityId, check_category, check_tenant


class Layout(StrEnum):
    """How keys are named (``Settings.key_layout``, ``ACMI_KEY_LAYOUT``)."""

    REFERENCE = "reference"  # the TypeScript reference's keys, byte for byte: one node
    CLUSTER = "cluster"  # one hash tag per tenant: a Redis Cluster, one slot per tenant


class Slot(StrEnum):
    PROFILE = "profile"
    SIGNALS = "signals"
    TIMELINE = "timeline"


# Long-context extension slots (reference layout). `acmi.delete` removes these too;
# a new extension slot is registered here and nowhere else.
SPAWNS: Final = "spawns"  # ZSET score=ts, member JSON {ts, session_id, model_id, host?}
ACTIVE_CONTEXT: Final = "active_context"  # HASH thread -> JSON {role, joined_at}
ROLLUP_LATEST: Final = "rollup:latest"  # STRING JSON {ts, summary, ...}
SESSIONS: Final = "sessions"  # SET (work items)
LAST_BRIEF: Final = "last_brief"  # STRING JSON: the operator's daily standup brief
# STRING JSON {role_tier, allowed_namespaces, write_access, max_tokens_per_hour}: an
# invited agent's tier, where the reference's invite-agent writes it
PERMISSIONS: Final = "permissions"
# The memory layers' own (acmi_core.memory.service, acmi_core.jobs.hygiene):
MEMORY_ARCHIVE: Final = "memory:archive"  # HASH quarter (YYYY-QN) -> archive document JSON
MEMORY_HANDOFF: Final = "memory:handoff"  # STRING JSON {text, ts}: taken (GETDEL) on wake
# ZSET score=ts, member=str(ts): the stamps of the daily-note events on the timeline, kept
# by the write that adds them, so the bootstrap reads a day's note lines, not the day's events
MEMORY_STAMPS: Final = "memory:stamps"
# STRING JSON objects, one per file of the layer, holding its fields under their prefix
# (acmi_core.memory.slots): slots of their own, so no replace of the entity's profile or
# signals (ours, the reference CLI's raw SET) can erase memory.
MEMORY_HOT: Final = "memory:hot"  # ACTIVE-CONTEXT.md: hot.<section>, hot.updated
MEMORY_WARM: Final = "memory:warm"  # MEMORY.md: warm.<section>, warm.topics
# heartbeat-state.json: heartbeat.<key>, the hygiene job's bookkeeping included
MEMORY_HEARTBEAT: Final = "memory:heartbeat"
# HASH item key -> JSON {created_at, updated_at, value, ttl, expires_at}: the items of one
# namespace of the long-term memory store (acmi_core.entities.items, the LangGraph store):
# a slot of its own, never the profile or signals.
STORE_ITEMS: Final = "store:items"
# HASH line digest -> the line's embedding, 6-bit quantised, one ASCII byte a dimension
# (acmi_core.memory.embeddings): written with the line, read whole by memory search
MEMORY_VECTORS: Final = "memory:vectors"
# HASH digest -> "1", plus ~pass/~gen/~prov/~at/~scan: the digests an unfinished prune of
# memory:vectors found needed so far, and where it is (acmi_core.memory.vectors); derived
# only, deleted when the pass ends, its TTL refreshed by each step
MEMORY_VECTORS_PASS: Final = "memory:vectors:pass"
# The startup files (seed §7), each a STRING JSON {"text": <the file, as written>}: loaded
# first at wake, imported and exported byte for byte (acmi_core.memory.startup)
MEMORY_SOUL: Final = "memory:soul"  # SOUL.md: who the agent is
MEMORY_USER: Final = "memory:user"  # USER.md: who it helps
MEMORY_AGENTS: Final = "memory:agents"  # AGENTS.md: the operating manual
EXTENSION_SLOTS: Final = (
    SPAWNS,
    ACTIVE_CONTEXT,
    ROLLUP_LATEST,
    SESSIONS,
    LAST_BRIEF,
    PERMISSIONS,
    MEMORY_ARCHIVE,
    MEMORY_HANDOFF,
    MEMORY_STAMPS,
    MEMORY_HOT,
    MEMORY_WARM,
    MEMORY_HEARTBEAT,
    STORE_ITEMS,
    MEMORY_VECTORS,
    MEMORY_SOUL,
    MEMORY_USER,
    MEMORY_AGENTS,
    MEMORY_VECTORS_PASS,
)
ALL_SLOTS: Final = (*(s.value for s in Slot), *EXTENSION_SLOTS)

# The fleet coordination bus (reference layout): lock claims, releases and deferrals.
COORDINATION_THREAD: Final = "thread:agent-coordination"

# The coordination thread's mentions, found when an event is written (the index
# ``KeyBuilder.mentions``): an event mentions ``agent:<id>`` by its entity id or ``@<id>``,
# the id not part of a longer one. Bounded: the first MENTIONS_PER_EVENT distinct agents an
# event names are indexed, and each agent's index keeps its MENTIONS_KEPT newest events
# (what a bootstrap shows: acmi_core/bootstrap/budget.py CAPS["coordination"]).
# store/lua/mentions.lua finds the same mentions in the events the lock and HITL scripts
# write; tests/integration/test_script_bounds.py holds the two equal.
MENTIONS_PER_EVENT: Final = 16
MENTIONS_KEPT: Final = 10
_MENTION: Final = re.compile(r"(?<![A-Za-z0-9_.@:-])(?:agent:|@)([A-Za-z0-9_.-]+)")
_MENTION_ID_MAX: Final = 250  # an entity id is at most 256 characters, "agent:" included


def mentioned(text: str) -> list[str]:
    """The local ids of the agents ``text`` (an event's JSON) mentions, in order of first
    mention, at most MENTIONS_PER_EVENT."""
    if "agent:" not in text and "@" not in text:
        return []  # most events: no scan
    found: list[str] = []
    for match in _MENTION.finditer(text):
        local = match.group(1)
        if len(local) <= _MENTION_ID_MAX and local not in found:
            found.append(local)
            if len(found) == MENTIONS_PER_EVENT:
                break
    return found


ROOT: Final = "acmi"
INTERNAL_MARK: Final = "_"

# The indexes of tenants with work for the scheduled jobs (``Keys.tenants_with``), each
# a ZSET tenant -> ms, kept in the same script run as the tenant index it summarizes:
CHANGED: Final = "changed"  # latest change of keys.changed (ZMAX, by every timeline write)
ACTIVITY: Final = "activity"  # latest heartbeat of keys.activity (ZMAX, by heartbeats)
WAKE: Final = "wake"  # earliest due of keys.wake_due (ZMIN by schedules, ZHEAD by the tick)
HYGIENE: Final = "hygiene"  # earliest due of keys.hygiene_due (ZHEAD by the hygiene job)
# earliest deadline of the open HITL queues the standup brief reads: the shared one and the
# operator's (ZADD LT by store/lua/hitl.lua's create, ZHEAD by the standup-brief job)
HITL_SHARED: Final = "hitl-shared"
HITL_OPERATOR: Final = "hitl-operator"
TENANT_INDEXES: Final = (CHANGED, ACTIVITY, WAKE, HYGIENE, HITL_SHARED, HITL_OPERATOR)
# those kept by writes of any entity, so once per bucket (B > 1); the others summarize
# bucket 0's coordination indexes (heartbeats, wakes, HITL queues) and live there only
BUCKETED_INDEXES: Final = (CHANGED, HYGIENE)


# The cluster layout's deployment-wide keys: one slot of their own, apart from every tenant.
DEPLOYMENT_TAG: Final = "{_deployment}"
TENANT_REGISTRY: Final = f"{ROOT}:{DEPLOYMENT_TAG}:{INTERNAL_MARK}tenants"


# The categories whose entities live in bucket 0 whatever B: the coordination scripts
# (locks, HITL, work, the bootstrap, workflows) read and write them beside bucket 0's
# coordination keys in one run, so they must share its slot. Few entities, many reads:
# a tenant's many entities (users, contacts, webhook senders) are the ones spread.
# LangGraph store namespaces (``ns``, acmi_core.entities.items) too: the tenant's namespace
# index is kept in the same run as a namespace's items.
PINNED_CATEGORIES: Final = frozenset({"agent", "work", "thread", "topic", "workflow", "ns"})
# B at most this: a reader that spans a tenant sends a command per bucket
MAX_BUCKETS: Final = 256


def bucket_of(entity: EntityId | str, buckets: int) -> int:
    """The bucket of ``entity`` among ``buckets``: CRC-32 of ``<cat>:<id>`` mod B, 0 for
    the pinned categories (and always when B = 1)."""
    if buckets == 1:
        return 0
    text = str(entity)
    if text.partition(":")[0] in PINNED_CATEGORIES:
        return 0
    return zlib.crc32(text.encode("utf-8")) % buckets


class Keys:
    """Key builder bound to one tenant, in one layout, seen from one of its buckets
    (``at``; bucket 0 unless asked): entity keys always take their entity's bucket, the
    per-bucket indexes the view's, the coordination keys bucket 0's."""

    def __init__(
        self,
        tenant: str,
        default_tenant: str,
        layout: Layout | str = Layout.REFERENCE,
        buckets: int = 1,
        *,
        bucket: int = 0,
        zero: Keys | None = None,
    ) -> None:
        """``bucket``: the view's bucket; ``zero``: that tenant's bucket 0 view when there
        is one already (``at``), which holds the coordination keys and the views."""
        self.tenant = check_tenant(tenant)
        self.is_default = tenant == default_tenant
        self.layout = Layout(layout)
        # buckets are hash tags: the reference layout has none, so one bucket there
        self.buckets = buckets if self.layout is Layout.CLUSTER else 1
        if not 1 <= self.buckets <= MAX_BUCKETS or not 0 <= bucket < self.buckets:
            raise ValueError(f"bucket {bucket} of {buckets}: 1 <= B <= {MAX_BUCKETS}")
        self.bucket = bucket
        self._default_tenant = default_tenant
        if bucket == 0:
            self._zero: Keys = self
            self._views: dict[int, Keys] = {}
        else:  # every view of a tenant shares bucket 0's view and its map of views
            self._zero = zero or Keys(tenant, default_tenant, layout, buckets)
            self._views = self._zero._views
        self._views[bucket] = self
        if self.layout is Layout.CLUSTER:
            # a tenant name has no braces (check_tenant), so the tag is exactly the tenant
            self._prefix = f"{ROOT}:{self.tag}:"
        else:
            self._prefix = f"{ROOT}:" if self.is_default else f"{ROOT}:tenant:{tenant}:"

    def at(self, bucket: int) -> Keys:
        """This tenant's keys seen from ``bucket`` (its per-bucket indexes)."""
        view = self._views.get(bucket)
        if view is None:
            z = self._zero
            view = Keys(z.tenant, z._default_tenant, z.layout, z.buckets, bucket=bucket, zero=z)
        return view

    def of(self, entity: EntityId | str) -> Keys:
        """The view of ``entity``'s bucket: the indexes a write of it keeps in its run."""
        return self if self.buckets == 1 else self.at(bucket_of(entity, self.buckets))

    def moved(self, key: str) -> str:
        """``key``, a key of bucket 0 built before the bucket was known (a delivery's
        idempotency record), under this view's tag instead; any other key unchanged."""
        zero = self._zero._prefix
        if self.bucket == 0 or not key.startswith(zero):
            return key
        return self._prefix + key[len(zero) :]

    def beside(self, key: str) -> Keys:
        """The view of the bucket ``key`` (one of this tenant's) is in: where a script's
        own bookkeeping (its request record) goes to share the slot of its keys."""
        tag = key_tag(key) or ""
        _, colon, number = tag[1:-1].partition(":")
        bucket = int(number) if colon and number.isdigit() else 0
        return self.at(bucket) if bucket < self.buckets else self

    def bucket_of(self, entity: EntityId | str) -> int:
        return bucket_of(entity, self.buckets)

    def every_bucket(self) -> list[Keys]:
        """One view per bucket, bucket 0 first: what a reader that spans the tenant reads."""
        return [self.at(b) for b in range(self.buckets)]

    @property
    def tag(self) -> str:
        """The hash tag of this view's bucket in the cluster layout: ``{<tenant>}`` for
        bucket 0 (B = 1: every key of the tenant), ``{<tenant>:<b>}`` for the others."""
        if self.bucket == 0:
            return "{" + self.tenant + "}"
        return "{" + self.tenant + ":" + str(self.bucket) + "}"

    def slot(self, entity: EntityId, slot: str) -> str:
        prefix = self._prefix if self.buckets == 1 else self.of(entity)._prefix
        return f"{prefix}{entity.category}:{entity.local_id}:{slot}"

    def profile(self, entity: EntityId) -> str:
        return self.slot(entity, Slot.PROFILE)

    def signals(self, entity: EntityId) -> str:
        return self.slot(entity, Slot.SIGNALS)

    def timeline(self, entity: EntityId) -> str:
        return self.slot(entity, Slot.TIMELINE)

    def all_slots(self, entity: EntityId) -> list[str]:
        return [self.slot(entity, s) for s in ALL_SLOTS]

    def index(self, category: str) -> str:
        """The namespace index: a SET of the category's ids (with B > 1, of those in this
        view's bucket: a write keeps ``of(entity).index``, a list reads every bucket's)."""
        return f"{self._prefix}{check_category(category)}:list"

    def internal(self, kind: str, *parts: str) -> str:
        """A bookkeeping key of this tenant (idempotency records, sources, leases)."""
        if self.layout is Layout.CLUSTER:
            return ":".join((ROOT, self.tag, INTERNAL_MARK + kind, *parts))
        return internal_global(kind, self.tenant, *parts)

    def lock(self, resource: str) -> str:
        """The lease HASH of ``resource`` (owner, token digest, expiry, fencing counter).
        Resource names are checked by ``acmi_core.coordination.locks`` before they get here."""
        return self._zero.internal("lock", resource)

    def coordination_timeline(self) -> str:
        return self.timeline(EntityId.parse(COORDINATION_THREAD))

    @property
    def prefix(self) -> str:
        """What every entity key of this tenant starts with (``acmi:`` or
        ``acmi:tenant:<t>:``): a script that reads items named by an index builds their
        keys from it (``store/lua/bootstrap.lua``)."""
        return self._prefix

    # coordination bookkeeping: each kept by the write that changes what it indexes,
    # in the same atomic step, so readers and sweeps never scan

    def leases(self) -> str:
        """Every lease with an owner, as a lexicographic ZSET (all scores 0) of
        ``<owner>|<resource>|<expires ms>|<fence>|<cid>``: a ZRANGEBYLEX on ``<owner>|``
        lists what an owner holds. Kept by ``store/lua/locks.lua``."""
        return self._zero.internal("leases")

    def changed(self) -> str:
        """ZSET entity id -> when its timeline last changed (ms, the writer's clock): kept
        by every timeline write, so scheduled jobs visit what changed since their last run
        (ZRANGEBYSCORE) and never scan. One per bucket (``of(entity).changed()``)."""
        return self.internal("changed")

    def tenants_with(self, kind: str) -> str:
        """ZSET tenant -> ms: the tenants with work in their index ``kind`` (one of
        ``TENANT_INDEXES``), shared by every tenant of the deployment: what a scheduled job
        reads to serve each tenant that has work, never a scan of the keyspace.

        In the cluster layout no key can share a slot with every tenant, so this is the
        tenant's own mark (the same ZSET, its one member this tenant) in the tenant's slot,
        still written in the same script run as its writes; the jobs read the marks of
        the tenants in ``tenant_registry``."""
        if kind not in TENANT_INDEXES:
            raise ValueError(f"tenant index {kind!r}: one of {TENANT_INDEXES}")
        if self.layout is Layout.CLUSTER:
            owner = self if kind in BUCKETED_INDEXES else self._zero
            return owner.internal("tenants", kind)
        return internal_global("tenants", kind)

    def tenant_registry(self) -> str:
        """Cluster layout: SET of every tenant that has marked work (``tenants_with``),
        added to once per process and tenant after such a write (``store/writes.py``): the
        tenants whose marks a scheduled job reads. Reference layout: unused."""
        return TENANT_REGISTRY

    def job_tenants(self, job: str) -> str:
        """STRING JSON: which tenants a scheduled job served last and which wait (their
        backlog or failure): the job's state across tenants (``acmi_core.jobs.tenants``)."""
        if self.layout is Layout.CLUSTER:
            return ":".join((ROOT, DEPLOYMENT_TAG, INTERNAL_MARK + "jobtenants", job))
        return internal_global("jobtenants", job)

    def job_state(self, job: str) -> str:
        """STRING JSON: a scheduled job's last run (watermark, counts, backlog)."""
        return self.internal("job", job)

    def job_run(self, job: str, execution_id: str) -> str:
        """The record of one finished execution (WritePlan.once): a retried execution
        id finds it and does nothing. The id is hashed: any id fits in a key."""
        digest = hashlib.sha256(execution_id.encode("utf-8")).hexdigest()[:32]
        return self.internal("jobrun", job, digest)  # per bucket: a run per bucket

    def session_logged(self, entity: EntityId, session_id: str) -> str:
        """STRING: the mark that ``entity``'s session ``session_id`` has its start logged in
        the daily note (a ONCE op, kept ``memory.writes.SESSION_MARK_TTL_MS``), so a session
        start is logged once per session id whatever bootstraps repeat it."""
        return self.internal("session", str(entity), session_id)

    def tier_tokens(self, agent: EntityId, hour: int) -> str:
        """STRING (an INCRBY counter): the bundle tokens served this hour (``hour``: UTC
        hours since the epoch) to keys bound to ``agent``, held to its tier's
        ``max_tokens_per_hour`` (``acmi_core.bootstrap.allowance``); expires after its
        window. In bucket 0, beside the bootstrap's coordination keys."""
        return self._zero.internal("tiertokens", str(agent), str(hour))

    def request(self, request_id: str) -> str:
        """STRING: the recorded reply of one request of a script that is not idempotent
        (``store/lua/locks.lua``, ``hitl.lua``, ``work.lua``, a WritePlan's RECORD op),
        written by its first run for ``scripts.REPLAY_TTL_MS``: the transport's retry of
        that request (same id) answers with it instead of running again."""
        return self.internal("req", request_id)

    def registry(self, name: str) -> str:
        """A registry document the reference's tools keep as a raw STRING (JSON), e.g.
        ``acmi:registry:agent-model-policy``: not an entity slot."""
        return f"{self._zero._prefix}registry:{name}"

    def wake_due(self) -> str:
        """ZSET agent id -> its next wake (ms): the wake tick takes the due ones."""
        return self._zero.internal("wake")

    def drift_report(self) -> str:
        """STRING JSON: drift-diff's latest report (never written into a thread it scans)."""
        return self._zero.internal("drift")

    def mentions(self, local_id: str) -> str:
        """ZSET of the newest coordination-thread events (score ts, member the event JSON,
        a copy) that mention ``agent:<local_id>`` (``mentioned``), at most MENTIONS_KEPT:
        kept by the write that adds the event (entities.api TimelineAPI.stage,
        store/lua/locks.lua, hitl.lua), read by the bootstrap instead of a scan."""
        return self._zero.internal("mentions", local_id)

    def activity(self) -> str:
        """ZSET entity id -> its last heartbeat (ms): the liveness sweep's index."""
        return self._zero.internal("activity")

    def stalled(self) -> str:
        """ZSET entity id -> the change (ms) it was marked STALLED at: the work items and
        projects the sweep marked, which it clears when their timeline changes again."""
        return self.internal("stalled")

    def hitl_queue(self, addressee: EntityId | None, state: str) -> str:
        """A HITL queue (ZSET, score = deadline ms when open, resolution ms when closed;
        member = the ``hitl-required`` event JSON). ``addressee`` None: the shared queue."""
        if state not in ("open", "closed"):
            raise ValueError(f"HITL queue state {state!r}: open or closed")
        prefix = self._zero._prefix  # coordination: bucket 0
        if addressee is None:
            return f"{prefix}thread:hitl:{state}"
        return f"{prefix}hitl:{addressee.category}:{addressee.local_id}:{state}"

    def hitl_items(self) -> str:
        """HASH correlationId -> the HITL item's record: what makes create idempotent and
        lets resolve find the item without scanning a queue."""
        return self._zero.internal("hitl")

    def work_open(self, owner: EntityId) -> str:
        """ZSET work id -> last update (ms): the open work items ``owner`` owns."""
        return self._zero.internal("work-open", str(owner))

    def work_owners(self) -> str:
        """HASH work id -> owner entity id, for the work items that have an owner."""
        return self._zero.internal("work-owner")

    def lessons(self) -> str:
        """ZSET of the tenant's newest ``improvement`` events (score ts), trimmed by the
        write that adds one: what a bootstrap filters by the agent's workflows."""
        return self._zero.internal("lessons")

    def agent_workflows(self, agent: EntityId) -> str:
        """ZSET workflow id -> last time ``agent`` executed, assessed or improved a step."""
        return self._zero.internal("workflows", str(agent))

    def workflow_pending(self, workflow: EntityId, step: str) -> str:
        """ZSET run id (correlationId) -> ts of its earliest execution of ``step`` that no
        assessment covers yet: added by an execute, removed by the run's assessment, in
        the same plan as the event (what an execute checks when an assessment is required).
        Steps are checked by ``acmi_core.coordination.workflows`` before they get here."""
        return self.internal("wfpending", str(workflow), step)

    def hygiene_due(self) -> str:
        """ZSET entity -> when its next memory hygiene task is due (ms), fed from the
        change index by the hygiene job: what it reads instead of scanning entities."""
        return self.internal("hygiene")

    def memory_index(self) -> str:
        """ZSET entity id -> when its memory last changed (ms, the writer's clock): kept by
        every memory write (``acmi_core.memory.state``), so the hygiene job visits the
        entities that have memory (from its watermark) and never a webhook entity."""
        return self.internal("memory")

    def store_items(self, namespace: EntityId) -> str:
        """HASH of one store namespace's items (``STORE_ITEMS``; acmi_core.entities.items)."""
        return self.slot(namespace, STORE_ITEMS)

    def store_namespaces(self) -> str:
        """ZSET (every score 0) of this tenant's store namespaces that hold an item, each
        member the namespace's labels, each followed by NUL: lexicographic order is
        LangGraph's tuple order and a prefix is one ZRANGEBYLEX range. Kept by the write
        that adds or removes an item (apply.lua ``ZHAS``), in the same run."""
        return self._zero.internal("storens")  # beside the ns entities, pinned to bucket 0

    def store_expiry(self) -> str:
        """ZSET of this tenant's store items that have a TTL (member ``<namespace
        member><key>``, score the ms they expire at): set by the put, moved forward by
        a read that refreshes them (``ZADD XX GT``), removed by a put without TTL or a
        delete. What a read of such an item checks and a sweep reads."""
        return self._zero.internal("storettl")

    def hygiene_lease(self) -> str:
        """STRING, SET NX PX: one hygiene run at a time rewrites a quarter's S3 object."""
        return self._zero.internal("hygiene-lease")

    def gmail_history(self, source: str, email: str) -> str:
        """Where a Gmail source keeps the history id the next fetch of ``email`` starts
        from (JSON ``{"historyId": "<id>"}``). A digest of the address: no mail address
        in a key name, and any address fits."""
        digest = hashlib.sha256(email.lower().encode("utf-8")).hexdigest()
        return self.internal("gmail", source, digest)


# `acmi migrate --layout cluster` (ops/relayout.py): where a copy into the cluster layout
# keeps its checkpoint, on the target, in the deployment's slot.
RELAYOUT_CHECKPOINT: Final = f"{ROOT}:{DEPLOYMENT_TAG}:{INTERNAL_MARK}relayout"
# The reference layout's bookkeeping kinds that name no tenant (``internal_global``): API
# keys and push tokens (their names kept in every layout: looked up before a tenant is
# known), the deployment-wide indexes of tenants with work, the jobs' state across tenants.
GLOBAL_KINDS: Final = frozenset(
    {"apikey", "apikeys", "apikeys_revoked", "pushtoken", "tenants", "jobtenants"}
)


def marked_tenant(key: str) -> str | None:
    """The tenant whose mark ``key`` is, when it is one of the cluster layout's marks
    (``Keys.tenants_with``, of any of its buckets), else None."""
    head, sep, rest = key.partition(":{")
    if head != ROOT or not sep:
        return None
    tag, _, tail = rest.partition("}:")
    # a tenant name has no ':' (check_tenant): what follows one is the bucket
    return tag.partition(":")[0] if tail.startswith(INTERNAL_MARK + "tenants:") else None


def key_tag(key: str) -> str | None:
    """The hash tag (``{...}``) a cluster-layout key carries, else None."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start : end + 1] if start >= 0 and end > start + 1 else None


def internal_global(kind: str, *parts: str) -> str:
    """A bookkeeping key looked up before the tenant is known (API keys, push tokens)."""
    return ":".join((ROOT, INTERNAL_MARK + kind, *parts))

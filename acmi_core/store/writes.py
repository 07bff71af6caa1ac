"""WritePlan: every ACMI write is a list of ops run by one Lua script (lua/apply.lua, or
lua/lean.lua for a plan of plain ops and object edits).

One script means one round trip, atomic, all-or-nothing (key types and stored JSON are
checked before the first write), and no lost updates: read-modify-write of a JSON
object happens inside Redis. Values are spliced as raw JSON text, never decoded in
Lua, so they survive exactly. Every op is idempotent (SET, ZADD NX, SADD, field
set), which is what makes a blind retry after a dropped connection safe; a plan whose
retry is not (a ONCE record it would meet as its own replay) starts with a RECORD op,
which answers a retry of the same request with the first run's results.

A script blocks all of Redis while it runs, so an object edit is bounded: at most
model.MAX_EDIT_FIELDS fields (checked here), and the edit, the object it edits and
the result at most model.MAX_OBJECT_BYTES each (checked by the script: 413).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Final, Literal

from acmi_core.base.errors import (
    AcmiError,
    AcmiValidationError,
    Conflict,
    CorruptData,
    PayloadTooLarge,
    Pending,
    PlanError,
    StoreCommandError,
)
from acmi_core.base.keys import CHANGED, ROOT, TENANT_REGISTRY, Keys, marked_tenant
from acmi_core.base.model import check_edit_fields, dumps
from acmi_core.store import scripts
from acmi_core.store.base import Arg, Reply, Store

APPLY: Final = scripts.APPLY.script
LEAN: Final = scripts.LEAN.script

# The ops lean.lua runs, each with the one kind its key holds: a plan of these alone,
# each key named with one kind, needs none of apply.lua's interpreter (about half its
# Redis time for an append, a webhook delivery's with its ONCE record too; ~0.6x for a
# signals.set or a merge; see lua/lean.lua).
_LEAN_TYPES: Final[dict[str, str]] = {
    "ZADD": "zset",
    "ZSET": "zset",
    "ZMAX": "zset",
    "ZMIN": "zset",
    "ZREM": "zset",
    "SADD": "set",
    "SREM": "set",
    "HSET": "hash",
    "HDEL": "hash",
    "HMARK": "hash",  # its pass too (WritePlan.hmark)
    "SET": "string",
    "ONCE": "once",  # a STRING too, but its key is named by that op alone
    "OBJ": "object",  # a STRING too, edited: a key's OBJ ops in lean.lua follow no SET
}
_ONCE: Final = "once"

FieldMode = Literal["set", "setnx", "del"]
_MODE_LETTER: Final[dict[str, str]] = {"set": "s", "setnx": "n", "del": "d"}


def _corrupt(detail: str) -> AcmiError:
    return CorruptData(detail, field=detail.split(" ", 1)[0])  # the detail starts with the key


def _changed(detail: str) -> AcmiError:
    key = detail.split(" ", 1)[0]
    return Conflict(f"{key}: changed since it was read; nothing was written", field=key)


def _pending(detail: str) -> AcmiError:
    key, score, member = [*detail.split(" ", 2), "", ""][:3]
    return Pending(key, score, member)


def _too_large(detail: str) -> AcmiError:
    key, _, what = detail.partition(": ")
    return PayloadTooLarge(key, "max_object_bytes", what)


# apply.lua's error replies start with a marker (and nothing was written); what each means:
SCRIPT_ERRORS: Final[dict[str, Callable[[str], AcmiError]]] = {
    "ACMI_WRONGTYPE": _corrupt,  # a key holds another Redis type than its op needs
    "ACMI_CORRUPT": _corrupt,  # an object key holds text that is not a JSON object
    "ACMI_TOOLARGE": _too_large,  # an object edit, or its object, over MAX_OBJECT_BYTES (413)
    "ACMI_CHANGED": _changed,  # a SAME key changed since its caller read it (check-and-set)
    "ACMI_PENDING": _pending,  # an ONLY key holds another member (a pending item)
    "ACMI_BADOP": PlanError,  # unknown op, key index out of range, bad argument: a bug here
}


def script_error(exc: StoreCommandError) -> AcmiError:
    """What a failed run of apply.lua means: the error its marker maps to, or ``exc``
    itself when it carries none (a script that could not run, a bug in it)."""
    message = str(exc)
    for marker, error in SCRIPT_ERRORS.items():
        _, found, detail = message.partition(f"{marker} ")
        if found:
            return error(detail)
    return exc


# Field names repeat (tenant_id, actor_type, the same signal keys): each JSON text is
# built once. Bounded, as names come from callers.
_NAME_JSON: Final[dict[str, str]] = {}
_NAME_JSON_MAX: Final = 4096


def _name_json(name: str) -> str:
    text = _NAME_JSON.get(name)
    if text is None:
        text = dumps(name)
        if type(name) is str:  # a subclass could compare equal to a name and print otherwise
            if len(_NAME_JSON) >= _NAME_JSON_MAX:
                _NAME_JSON.clear()
            _NAME_JSON[name] = text
    return text


class Replayed(Exception):
    """The plan's idempotency record already existed: nothing was written.
    ``previous`` is the value stored by the first application (its response)."""

    def __init__(self, previous: bytes) -> None:
        super().__init__("replayed")
        self.previous = previous


class WritePlan:
    def __init__(self, *, record: str | None = None) -> None:
        """``record``: the key of the request's record, the plan's first op (:meth:`record`)."""
        self._keys: list[str] = []
        self._key_index: dict[str, int] = {}
        self._args: list[Arg] = []
        self._count = 0
        self._bucket: tuple[str, int] | None = None  # the first entity's, with B > 1
        # key index -> the type its ops need, while every op is one lean.lua runs
        self._lean: dict[int, str] | None = {}
        self._applied: list[Callable[[], None]] = []
        if record is not None:
            self.record(record)

    def __len__(self) -> int:
        return self._count

    @property
    def request_args(self) -> int:
        """The arguments of the request that runs it: EVALSHA, the SHA, the key count,
        the keys, the op count and the ops (held to ``store.base.MAX_REQUEST_ARGS``)."""
        return 4 + len(self._keys) + len(self._args)

    @property
    def keys(self) -> tuple[str, ...]:
        """The plan's keys, in the order its ops index them (apply.lua's KEYS)."""
        return tuple(self._keys)

    @property
    def args(self) -> tuple[Arg, ...]:
        """Its ops, as apply.lua's ARGV after the op count: for a script that runs a
        plan after a prologue of its own (lua/work.lua)."""
        return tuple(self._args)

    def _op(self, code: str, key: str, *args: Arg) -> int:
        index = self._key_index.get(key)
        if index is None:
            self._keys.append(key)
            index = self._key_index[key] = len(self._keys)
        self._args.extend((code, index, *args))
        self._count += 1
        lean = self._lean
        if lean is not None:
            kind = _LEAN_TYPES.get(code)
            if kind is None:
                self._lean = None
            elif kind == _ONCE:  # lean.lua's rule: one a plan, on a key no other op names
                if index in lean or _ONCE in lean.values():
                    self._lean = None
                else:
                    lean[index] = _ONCE
            elif lean.setdefault(index, kind) != kind:
                self._lean = None
        return self._count - 1

    def set(self, key: str, json_text: str) -> int:
        return self._op("SET", key, json_text)

    def delete(self, key: str) -> int:
        return self._op("DEL", key)

    def zadd(self, key: str, score: int | float, member: str) -> int:
        return self._op("ZADD", key, repr(score), member)

    def zset(self, key: str, score: int | float, member: str) -> int:
        """Index upkeep: add ``member``, or move it to ``score`` (ZADD without NX)."""
        return self._op("ZSET", key, repr(score), member)

    def zrem(self, key: str, member: str | bytes) -> int:
        return self._op("ZREM", key, member)

    def zmax(self, key: str, score: int | float, member: str) -> int:
        """Index upkeep: ``member``'s score only rises (ZADD GT): the latest of its writes,
        whatever order writers with skewed clocks land in."""
        return self._op("ZMAX", key, repr(score), member)

    def zmin(self, key: str, score: int | float, member: str) -> int:
        """Index upkeep: ``member``'s score only falls (ZADD LT): the earliest due."""
        return self._op("ZMIN", key, repr(score), member)

    def zhead(self, key: str, member: str, src: str) -> int:
        """``member``'s score in ``key`` becomes the lowest score of the ZSET ``src``, or
        ``member`` leaves ``key`` when ``src`` is empty; both read and written in this
        run, so a write to ``src`` landing around it is never lost."""
        index = self._key_index.get(src)
        if index is None:
            self._keys.append(src)
            index = self._key_index[src] = len(self._keys)
        self._lean = None  # src is read by the op, not typed by it
        return self._op("ZHEAD", key, member, index)

    @property
    def bucket(self) -> int:
        """The bucket of the plan's entities (0 when it names none, or B = 1)."""
        return 0 if self._bucket is None else self._bucket[1]

    def entity_bucket(self, keys: Keys, entity: str, field: str = "entity") -> None:
        """``entity`` joins the plan: with B > 1 every entity of one plan must be in one
        bucket (one hash slot, so one script run, all or nothing). Splitting the plan
        would lose that, so another bucket is refused (400 ``one_bucket``), nothing sent."""
        if keys.buckets == 1:
            return
        bucket = keys.bucket_of(entity)
        if self._bucket is None:
            self._bucket = (entity, bucket)
        elif self._bucket[1] != bucket:
            first, at = self._bucket
            raise AcmiValidationError(
                field,
                "one_bucket",
                f"{entity} is in bucket {bucket} and {first} in bucket {at} of tenant"
                f" {keys.tenant}'s {keys.buckets} (ACMI_CLUSTER_BUCKETS): one atomic write"
                " takes entities of one bucket; write these separately",
            )

    def mark_changed(self, keys: Keys, ms: int | float, entity: str) -> None:
        """``entity``'s timeline changed at ``ms``: the tenant's change index and the
        index of tenants with changes (what every scheduled job starts from), both of
        ``entity``'s bucket."""
        keys = keys.of(entity)
        self.zset(keys.changed(), ms, entity)
        self.zmax(keys.tenants_with(CHANGED), ms, keys.tenant)

    def zkeep(self, key: str, n: int) -> int:
        """Keep the ``n`` highest-scored members (a capped feed); O(log N + removed)."""
        return self._op("ZKEEP", key, n)

    def sadd(self, key: str, member: str) -> int:
        return self._op("SADD", key, member)

    def srem(self, key: str, member: str) -> int:
        return self._op("SREM", key, member)

    def hset(self, key: str, field: str, value: str) -> int:
        return self._op("HSET", key, field, value)

    def hmark(self, key: str, field: str, value: str, mark: str) -> int:
        """HSET ``field`` of ``key``, and ``field`` := "1" in the HASH ``mark`` when it
        exists (never created there): a vector written while a prune pass is under way is
        marked needed in the pass in the same run (memory/vectors.py)."""
        index = self._key_index.get(mark)
        if index is None:
            self._keys.append(mark)
            index = self._key_index[mark] = len(self._keys)
        lean = self._lean
        if lean is not None and lean.setdefault(index, "hash") != "hash":
            self._lean = None
        return self._op("HMARK", key, field, value, index)

    def hdel(self, key: str, field: str) -> int:
        return self._op("HDEL", key, field)

    def hput(self, key: str, field: str, text: str) -> int:
        """HSET of a store item whose ``text`` starts ``{"created_at":<ms>,``: an
        overwrite keeps the created_at already stored (acmi_core.entities.items)."""
        return self._op("HPUT", key, field, text)

    def zhas(self, key: str, member: str, src: str) -> int:
        """``member`` (score 0) is in ``key`` iff the HASH ``src`` has a field once the ops
        before ran: an index of the non-empty hashes, kept in the run that changes them."""
        index = self._key_index.get(src)
        if index is None:
            self._keys.append(src)
            index = self._key_index[src] = len(self._keys)
        return self._op("ZHAS", key, member, index)

    def hdue(self, key: str, field: str, src: str, member: str, now: int) -> int:
        """The TTL sweep of one store item: HDEL ``field`` of ``key`` and ZREM ``member``
        of the expiry ZSET ``src`` when its score there is <= ``now`` in this run (so a
        put that moved the expiry later, after the sweep read it, keeps its item)."""
        index = self._key_index.get(src)
        if index is None:
            self._keys.append(src)
            index = self._key_index[src] = len(self._keys)
        return self._op("HDUE", key, field, index, member, repr(now))

    def zbump(self, key: str, score: int | float, member: str) -> int:
        """ZADD XX GT: move an existing ``member`` later, never add one or move it back."""
        return self._op("ZBUMP", key, repr(score), member)

    def take(self, key: str) -> int:
        """Read and delete the STRING ``key`` (GETDEL): its value (None when absent) is
        this op's result. Not idempotent by itself: put it in a plan with ``record``."""
        return self._op("TAKE", key)

    def once(self, key: str, ttl_ms: int, value: str) -> int:
        """Make the whole plan idempotent: it applies only if ``key`` does not exist,
        and then stores ``value`` there for ``ttl_ms``. Otherwise :class:`Replayed`."""
        return self._op("ONCE", key, ttl_ms, value)

    def expect(self, key: str, text: bytes | None) -> int:
        """Check-and-set: the plan applies only if the STRING ``key`` still holds ``text``
        (None: is still absent) when the script runs; else :class:`Conflict`, nothing
        written. For a write computed from what was read outside the script."""
        if text is None:
            return self._op("SAME", key, "0", "")
        try:  # as text where it is (a REST transport carries text)
            return self._op("SAME", key, "1", text.decode("utf-8"))
        except UnicodeDecodeError:
            return self._op("SAME", key, "1", text)

    def only(self, key: str, member: str, score: int | float) -> int:
        """A check: the plan applies only if the ZSET ``key`` (as stored: no earlier op
        of the plan may name it) is empty or holds just ``member`` at ``score``, which
        is what a retry of the plan that added them meets; else :class:`Pending` (the
        oldest other member), nothing written."""
        return self._op("ONLY", key, member, score)

    def record(self, key: str) -> int:
        """The plan's first op: record its results at ``key`` (``keys.request`` of an id
        drawn once per logical call). A retry of that request (the Upstash transport
        resends one whose reply it lost) answers with the first run's results and writes
        nothing: for plans whose retry is not idempotent by itself (a ONCE op, a work
        create). Kept ``scripts.REPLAY_TTL_MS``, when at most ``REPLAY_MAX_BYTES``."""
        if self._count:
            raise PlanError("RECORD must be a plan's first op")
        return self._op("RECORD", key)

    def edit_object(
        self, key: str, fields: list[tuple[FieldMode, str, str]], *, field: str | None = None
    ) -> int:
        """Edit top-level fields of a JSON object: (mode, name, value as JSON text).

        At most MAX_EDIT_FIELDS set or del fields (the script runs with Redis blocked);
        setnx fields, ACMI's own auto-fill, are not the caller's and are not counted. A
        refusal names ``field`` (default: the key)."""
        check_edit_fields(sum(mode != "setnx" for mode, _, _ in fields), field or key)
        args: list[Arg] = [len(fields)]
        for mode, name, json_text in fields:  # one argument a field (apply.lua's OBJ)
            args.append(f"{_MODE_LETTER[mode]}{_name_json(name)}:{json_text}")
        return self._op("OBJ", key, *args)

    def on_applied(self, callback: Callable[[], None]) -> None:
        """``callback()`` once :meth:`apply` has committed the plan (not when it fails or
        replays): what a process may believe only of a write that landed."""
        self._applied.append(callback)

    def apply(self, store: Store) -> list[Reply]:
        """Run every op in one atomic step. Returns one reply per op, in order."""
        if not self._count:
            return []
        lean = self._lean is not None
        protocol, script = (scripts.LEAN, LEAN) if lean else (scripts.APPLY, APPLY)
        try:
            reply = protocol.eval(
                store,
                {"plan_keys": self._keys},
                {"op_count": self._count, "ops": self._args},
                script=script,
            )
        except StoreCommandError as exc:
            error = script_error(exc)
            if error is exc:
                raise
            raise error from None
        if reply.tag == "ACMI_REPLAY" and isinstance(reply["stored"], bytes):
            raise Replayed(reply["stored"])
        register_marked(store, self._keys)
        for callback in self._applied:
            callback()
        results = reply["results"]
        assert isinstance(results, list)
        return results


# The cluster layout's registry of tenants with marks (Keys.tenant_registry) lives in a slot
# of its own, so it cannot be written in the plan's run: it is a second step, an idempotent
# SADD, once per store object and tenant in this process (a weak map: a store's memory goes
# with it). A process that stops between the two leaves the tenant unregistered until its
# next marked write in another process; the mark itself is never lost.
# a mark's key starts so (marked_tenant's first test): any other key is passed over at once
_TAGGED: Final = ROOT + ":{"
_REGISTERED: Final[weakref.WeakKeyDictionary[Store, set[str]]] = weakref.WeakKeyDictionary()


def register_marked(store: Store, keys: Sequence[str]) -> None:
    """After a script run that wrote ``keys``: the tenants whose marks of work are among
    them into the registry, when this store has not registered them yet. Reference layout
    keys are never marks: nothing to do, no round trip."""
    tenants = {
        tenant
        for key in keys
        if key.startswith(_TAGGED) and (tenant := marked_tenant(key)) is not None
    }
    if not tenants:
        return
    done = _REGISTERED.setdefault(store, set())
    new = sorted(tenants - done)
    if new:
        store.execute(("SADD", TENANT_REGISTRY, *new))
        done.update(new)

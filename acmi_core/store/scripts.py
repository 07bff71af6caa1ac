"""Every Lua script's calling convention, declared once, by name.

A script takes positional ``KEYS`` and ``ARGV`` and answers a positional reply. Each
:class:`ScriptProtocol` below names those positions, so a caller builds ``KEYS``/``ARGV``
from names (a missing or unknown name is an error, not a shifted argument) and reads
the reply by name. Each script names the same positions in its header, one line each::

    --: KEYS[1] profile: what it is            a fixed position
    --: ARGV[5..] ops*: ...                    a run from 5 (the caller passes a list)
    --: ARGV[..] defer_template*               a run after another run
    --: ARGV[#] resource                       the last argument, whatever comes before
    --: claim ARGV[3] owner                    only when ARGV[1] (the op) is claim
    --: reply[1] profile / reply[5..] rest*    a reply of fixed slots (and a run)
    --: reply OK fence                         a reply tagged OK in its first slot
    --: reply released                         a reply that is one value, not a list

and ``tests/unit/test_script_protocols.py`` holds each declaration to its script: the
same names at the same positions, every ``KEYS[n]``/``ARGV[n]`` the script reads
declared, the reply tables it builds of the declared sizes.

A field name ending in ``*`` is a run: the caller passes a sequence, spliced in place.
Scripts that choose their layout by an op (locks, hitl, hygiene) declare one
:class:`Call` per op, chosen by the value of their first argument.

``work`` and ``sweep`` are prologues concatenated with ``apply`` into one script (the
prologue picks or filters a plan, rebinds ``KEYS``/``ARGV`` to it and apply.lua's body
writes it): their protocol declares the prologue's inputs and apply's reply.

Packing costs a dict lookup per field; the sources are read on first use only, so a
function that never runs a script reads none of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import Final, TypeAlias, cast

from acmi_core.store.base import Arg, Reply, Script, Store

# A reply of fixed slots (a name ending in * takes the rest), a tagged reply (tag ->
# the slots after it; "" is the untagged fallback), or one value (its name).
ReplyShape: TypeAlias = tuple[str, ...] | Mapping[str, tuple[str, ...]] | str
Value: TypeAlias = Arg | Sequence[Arg]


class ProtocolError(Exception):
    """A call that does not match its script's declared protocol: a bug in the caller,
    or a reply of another shape than the script declares."""


def is_run(name: str) -> bool:
    return name.endswith("*")


def field_name(name: str) -> str:
    return name.removesuffix("*")


@dataclass(frozen=True)
class Call:
    """One layout of a script: its KEYS, its ARGV and its reply."""

    keys: tuple[str, ...]
    args: tuple[str, ...]
    reply: ReplyShape

    def __post_init__(self) -> None:
        for names in (self.keys, self.args):
            bare = [field_name(n) for n in names]
            if len(set(bare)) != len(bare):
                raise ProtocolError(f"a name is declared twice in {names}")


@dataclass(frozen=True)
class Slots(Mapping[str, Reply]):
    """A decoded reply: its tag (None for an untagged one) and its slots by name."""

    tag: str | None
    named: Mapping[str, Reply]

    def __getitem__(self, name: str) -> Reply:
        return self.named[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.named)

    def __len__(self) -> int:
        return len(self.named)


def _pack(kind: str, names: tuple[str, ...], given: Mapping[str, Value]) -> list[Arg]:
    out: list[Arg] = []
    for name in names:
        bare = field_name(name)
        try:
            value = given[bare]
        except KeyError:
            raise ProtocolError(f"{kind}: {bare!r} is missing") from None
        if is_run(name):
            if not isinstance(value, list | tuple):
                raise ProtocolError(f"{kind}: {bare!r} is a run: pass a list")
            out.extend(value)
        elif isinstance(value, list | tuple):
            raise ProtocolError(f"{kind}: {bare!r} is one value, not a list")
        else:
            out.append(cast(Arg, value))
    if len(given) != len(names):  # every declared name was found: the rest are unknown
        unknown = sorted(given.keys() - {field_name(n) for n in names})
        raise ProtocolError(f"{kind}: unknown name {unknown[0]!r}; declared: {names}")
    return out


def _slots(names: tuple[str, ...], items: list[Reply], what: str) -> dict[str, Reply]:
    fixed = names[:-1] if names and is_run(names[-1]) else names
    if len(items) < len(fixed) or (len(fixed) == len(names) and len(items) != len(names)):
        raise ProtocolError(f"{what}: {len(items)} reply slots, declared {names}")
    values: dict[str, Reply] = dict(zip(fixed, items, strict=False))
    if len(fixed) < len(names):
        values[field_name(names[-1])] = items[len(fixed) :]
    return values


def decode_reply(shape: ReplyShape, reply: Reply, what: str) -> Slots:
    if isinstance(shape, str):
        return Slots(None, {shape: reply})
    if not isinstance(reply, list):
        raise ProtocolError(f"{what}: the reply is not a list")
    if isinstance(shape, tuple):
        return Slots(None, _slots(shape, reply, what))
    head = reply[0] if reply else None
    tag = head.decode("utf-8", "replace") if isinstance(head, bytes) else None
    if tag is not None and tag and tag in shape:
        return Slots(tag, _slots(shape[tag], reply[1:], f"{what} {tag}"))
    if "" in shape:
        return Slots(None, _slots(shape[""], reply, what))
    raise ProtocolError(f"{what}: reply tag {tag!r} is not one of {sorted(shape)}")


@dataclass(frozen=True)
class ScriptProtocol:
    """A Lua script (``store/lua/<sources>.lua``, concatenated) and its calls."""

    name: str
    calls: Mapping[str, Call]  # by op (the value of the first argument); "" for a single one
    sources: tuple[str, ...] = ()
    _single: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_single", tuple(self.calls) == ("",))
        if not self.sources:
            object.__setattr__(self, "sources", (self.name,))
        if not self._single:
            selectors = {call.args[0] for call in self.calls.values()}
            if len(selectors) != 1 or "" in self.calls:
                raise ProtocolError(f"{self.name}: every op's first argument names the op")

    @cached_property
    def script(self) -> Script:
        read = resources.files("acmi_core").joinpath
        return Script("\n".join(read(f"store/lua/{s}.lua").read_text() for s in self.sources))

    @property
    def selector(self) -> str | None:
        """The argument that names the op (None: one layout)."""
        return None if self._single else next(iter(self.calls.values())).args[0]

    def call(self, op: str | None = None) -> Call:
        try:
            return self.calls["" if op is None else op]
        except KeyError:
            raise ProtocolError(f"{self.name}: no op {op!r} (ops: {sorted(self.calls)})") from None

    def pack(
        self, keys: Mapping[str, Value], args: Mapping[str, Value]
    ) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV from names (runs spliced in place)."""
        selector = self.selector
        op = None
        if selector is not None:
            chosen = args.get(selector)
            if not isinstance(chosen, str):
                raise ProtocolError(f"{self.name}: {selector!r} names the op: a string")
            op = chosen
        call = self.call(op)
        packed_keys = _pack(f"{self.name} KEYS", call.keys, keys)
        if not all(isinstance(k, str) for k in packed_keys):
            raise ProtocolError(f"{self.name} KEYS: keys are strings")
        return cast(list[str], packed_keys), _pack(f"{self.name} ARGV", call.args, args)

    def decode(self, reply: Reply, op: str | None = None) -> Slots:
        """The reply by name (of ``op``'s layout, for a script with ops)."""
        return decode_reply(self.call(op).reply, reply, f"{self.name}.lua")

    def eval(
        self,
        store: Store,
        keys: Mapping[str, Value],
        args: Mapping[str, Value],
        *,
        script: Script | None = None,
    ) -> Slots:
        """One run: pack, EVALSHA (``script`` instead of the protocol's own: a module's
        name for it that tests may swap), decode. Store errors propagate unmapped."""
        packed_keys, packed_args = self.pack(keys, args)
        reply = store.eval(script or self.script, packed_keys, packed_args)
        op = args.get(self.selector) if self.selector is not None else None
        return self.decode(reply, op if isinstance(op, str) else None)


def single(keys: tuple[str, ...], args: tuple[str, ...], reply: ReplyShape) -> dict[str, Call]:
    return {"": Call(keys, args, reply)}


# ---- the declarations (each script's header names the same positions) -----------------

# apply.lua's reply: one result per op, or the replay of an idempotency record
APPLY_REPLY: Final[Mapping[str, tuple[str, ...]]] = {
    "ACMI_REPLAY": ("stored",),
    "": ("results*",),
}

APPLY: Final = ScriptProtocol("apply", single(("plan_keys*",), ("op_count", "ops*"), APPLY_REPLY))

WORK: Final = ScriptProtocol(
    "work",
    single(
        ("profile", "signals", "owners", "plan_keys*"),
        ("op", "work_id", "open_base", "mode", "plan_count", "plans*"),
        APPLY_REPLY,
    ),
    sources=("work", "apply"),
)

SWEEP: Final = ScriptProtocol(
    "sweep",
    single(("activity", "plan_keys*"), ("agent_count", "agents*", "ops*"), APPLY_REPLY),
    sources=("sweep", "apply"),
)

PAGE: Final = ScriptProtocol(
    "page",
    single(("timeline",), ("score", "offset", "count", "bound", "reverse"), ("window*",)),
)

_LOCK_KEYS: Final = ("lease", "thread", "index", "leases")
_LOCK_REFUSED: Final = {"NONE": (), "TOKEN": ("owner", "expires"), "EXPIRED": ("owner", "expires")}
LOCKS: Final = ScriptProtocol(
    "locks",
    {
        "claim": Call(
            _LOCK_KEYS,
            (
                "op",
                "now",
                "owner",
                "token_hash",
                "expires",
                "cid",
                "index_member",
                "claim_template*",
                "defer_template*",
                "resource",
            ),
            {"OK": ("fence",), "HELD": ("owner", "expires", "fence")},
        ),
        "renew": Call(
            _LOCK_KEYS,
            ("op", "now", "token_hash", "expires", "resource"),
            {"OK": ("owner", "fence", "cid"), **_LOCK_REFUSED},
        ),
        "release": Call(
            _LOCK_KEYS,
            ("op", "now", "token_hash", "index_member", "release_template*", "resource"),
            {"OK": ("owner", "fence", "cid"), **_LOCK_REFUSED},
        ),
    },
)

_HITL_KEYS: Final = ("items", "thread", "index", "named_open", "named_closed")
HITL: Final = ScriptProtocol(
    "hitl",
    {
        "create": Call(
            ("items", "queue"),
            ("op", "cid", "deadline", "record_header", "member", "prefix"),
            {"OK": (), "EXISTS": ("record",)},
        ),
        "resolve": Call(
            _HITL_KEYS,
            (
                "op",
                "cid",
                "now",
                "resolution",
                "by",
                "thread_member",
                "window",
                "resolved_template*",
                "prefix",
            ),
            {"OK": ("addressee", "score"), "RESOLVED": ("by", "at"), "NONE": ("members*",)},
        ),
        "adopt": Call(
            _HITL_KEYS,
            (
                "op",
                "cid",
                "now",
                "closed_member",
                "by",
                "thread_member",
                "foreign_member",
                "addressee",
                "resolved_template*",
                "prefix",
            ),
            {"OK": ("addressee", "score"), "RESOLVED": ("by", "at"), "GONE": ()},
        ),
    },
)

HYGIENE: Final = ScriptProtocol(
    "hygiene",
    {
        "trim": Call(
            ("timeline", "archive"),
            ("mode", "quarter", "doc", "member_count", "members*"),
            ("trimmed", "count"),
        ),
        "release": Call(("lease",), ("mode", "execution_id"), "released"),
    },
)

BOOTSTRAP: Final = ScriptProtocol(
    "bootstrap",
    single(
        (
            "profile",
            "signals",
            "timeline",
            "spawns",
            "active_context",
            "rollup",
            "hitl",
            "hitl_shared",
            "leases",
            "work_open",
            "workflows",
            "lessons",
            "coordination",
            "agent_index",
            "handoff",
            "archive",
            "topic",
            "stamps",
        ),
        (
            "now",
            "agent",
            "local_id",
            "prefix",
            "events",
            "spawns",
            "hitl",
            "locks",
            "work",
            "lessons",
            "lessons_scanned",
            "workflows",
            "coordination",
            "coordination_scanned",
            "spawn_member",
            "spawn_score",
            "threads",
            "daily_from",
            "daily_to",
            "daily",
            "daily_scanned",
            "handoff",
            "topic",
            "archive",
            "archive_scanned",
            "timeline_scanned",
            "utc_from",
            "utc_to",
        ),
        (
            "profile",
            "signals",
            "timeline",
            "spawns",
            "active",
            "rollup",
            "hitl",
            "shared",
            "leases",
            "work",
            "lessons",
            "coordination",
            "problems",
            "spawned",
            "daily",
            "read",
            "handoff",
            "taken",
            "topic",
            "archive",
        ),
    ),
)

PROTOCOLS: Final = (APPLY, WORK, SWEEP, PAGE, LOCKS, HITL, HYGIENE, BOOTSTRAP)

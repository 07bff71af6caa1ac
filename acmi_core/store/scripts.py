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

Each layout's packer and decoder are generated once from its names (as dataclasses
generate ``__init__``): a call costs a dict lookup and a type check a field over the
list it used to build by hand. Sources are read on first use, so a function that never
runs a script reads none of them. ``--: renew,release`` in a header: those two ops.

One module: every script's protocol is declared here, beside the packer and decoder
generator they share, so tests/unit/test_script_protocols.py holds them all in one place.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import Any, Final, TypeAlias, cast

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


class _Mismatch(Exception):
    """Raised by a packer: a field given as a list where one value goes, or the other
    way round (``run`` says which), or (name None) names that are not declared."""

    def __init__(self, kind: str, name: str | None, run: bool) -> None:
        self.kind, self.name, self.run = kind, name, run


Packer: TypeAlias = Callable[
    [Mapping[str, "str | Sequence[str]"], Mapping[str, Value]], tuple[list[str], list[Arg]]
]


def _check_names(names: tuple[str, ...]) -> list[str]:
    """The names of one layout's KEYS or ARGV, bare; each declared once."""
    bare = [field_name(n) for n in names]
    if len(set(bare)) != len(bare):
        raise ProtocolError(f"a name is declared twice in {names}")
    return bare


def _packer(keys: tuple[str, ...], args: tuple[str, ...]) -> Packer:
    """A function that lays KEYS and ARGV out from two mappings as a hand-written list
    display would: packing a call costs what building its lists did, plus a type check a
    field. Built once per layout (generated, as dataclasses and namedtuple build theirs;
    the source holds declared names only, as string literals)."""
    lines = ["def pack(keys, args):"]
    results = []
    for kind, given, names in (("KEYS", "keys", keys), ("ARGV", "args", args)):
        bare = _check_names(names)
        parts = []
        for i, name in enumerate(names):
            var = f"{given}{i}"
            lines.append(f"    {var} = {given}[{bare[i]!r}]")
            run = is_run(name)
            test = "not in" if run else "in"
            lines.append(
                f"    if type({var}) {test} LISTS: raise Mismatch({kind!r}, {bare[i]!r}, {run})"
            )
            parts.append(f"*{var}" if run else var)
        lines.append(f"    if len({given}) != {len(names)}: raise Mismatch({kind!r}, None, False)")
        results.append(f"[{', '.join(parts)}]")
    lines.append(f"    return {results[0]}, {results[1]}")
    scope: dict[str, Any] = {"LISTS": _LISTS, "Mismatch": _Mismatch}
    exec("\n".join(lines), scope)
    return cast(Packer, scope["pack"])


def _refused(
    what: str, call: Call, exc: Exception, keys: Mapping[str, object], args: Mapping[str, object]
) -> ProtocolError:
    """What a packer's KeyError or _Mismatch means, as the caller's error."""
    if isinstance(exc, KeyError):
        name = exc.args[0]  # KEYS are packed first: a declared key absent from them
        missing_key = name in {field_name(n) for n in call.keys} and name not in keys
        kind = "KEYS" if missing_key else "ARGV"
        return ProtocolError(f"{what} {kind}: {name!r} is missing")
    assert isinstance(exc, _Mismatch)
    names, given = (call.keys, keys) if exc.kind == "KEYS" else (call.args, args)
    if exc.name is None:
        unknown = sorted(given.keys() - {field_name(n) for n in names})
        return ProtocolError(f"{what} {exc.kind}: unknown name {unknown[0]!r}; declared: {names}")
    how = "is a run: pass a list" if exc.run else "is one value, not a list"
    return ProtocolError(f"{what} {exc.kind}: {exc.name!r} {how}")


_LISTS: Final = frozenset((list, tuple))


def _slot_plan(names: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """A reply's fixed slots and the name of its run (None: no run)."""
    if names and is_run(names[-1]):
        return names[:-1], field_name(names[-1])
    if any(is_run(n) for n in names):
        raise ProtocolError(f"only a reply's last slot may be a run: {names}")
    return names, None


@dataclass(frozen=True)
class Call:
    """One layout of a script: its KEYS, its ARGV and its reply."""

    keys: tuple[str, ...]
    args: tuple[str, ...]
    reply: ReplyShape
    # what pack and decode walk: the layouts built once; the generated packer and
    # decoder (``_pack``, ``_decode``) on first use, so a cold start compiles only the
    # few its function runs (~8 ms for all of them)
    _tagged: dict[str, tuple[tuple[str, ...], str | None]] = field(
        init=False, repr=False, compare=False
    )
    _tag_len: int = field(init=False, repr=False, compare=False)  # the longest tag
    _plain: tuple[tuple[str, ...], str | None] | None = field(
        init=False, repr=False, compare=False
    )  # the untagged layout, if any

    def __post_init__(self) -> None:
        for names in (self.keys, self.args):
            _check_names(names)
        shapes = {} if isinstance(self.reply, str | tuple) else self.reply
        object.__setattr__(self, "_tagged", {t: _slot_plan(n) for t, n in shapes.items()})
        if isinstance(self.reply, tuple):
            self._tagged[""] = _slot_plan(self.reply)
        object.__setattr__(self, "_tag_len", max(map(len, self._tagged), default=0))
        object.__setattr__(self, "_plain", self._tagged.pop("", None))

    @cached_property
    def _pack(self) -> Packer:
        return _packer(self.keys, self.args)

    @cached_property
    def _decode(self) -> Callable[[Reply], Slots]:
        return _decoder(self)

    def pack(
        self, keys: Mapping[str, str | Sequence[str]], args: Mapping[str, Value], what: str
    ) -> tuple[list[str], list[Arg]]:
        try:
            return self._pack(keys, args)
        except (KeyError, _Mismatch) as exc:
            raise _refused(what, self, exc, keys, args) from None

    def decode(self, reply: Reply, what: str) -> Slots:
        try:
            return self._decode(reply)
        except _Mismatch:
            return self._explain(reply, what)  # raises ProtocolError: what differs

    def _explain(self, reply: Reply, what: str) -> Slots:
        if type(reply) is not list:
            if isinstance(self.reply, str):
                return Slots(None, {self.reply: reply})
            raise ProtocolError(f"{what}.lua: the reply is not a list")
        tag = None
        if reply and self._tag_len:
            head = reply[0]
            # a tag is short: a long first slot (an OBJ op's new JSON text) is not decoded
            if type(head) is bytes and 0 < len(head) <= self._tag_len:
                tag = head.decode("utf-8", "replace")
                plan = self._tagged.get(tag)
                if plan is not None:
                    return Slots(tag, _slots(plan, reply, 1, what, tag))
        if self._plain is not None:
            return Slots(None, _slots(self._plain, reply, 0, what, ""))
        if isinstance(self.reply, str):
            return Slots(None, {self.reply: reply})
        raise ProtocolError(f"{what}.lua: reply tag {tag!r}, not one of {sorted(self._tagged)}")


class Slots(Mapping[str, Reply]):
    """A decoded reply: its tag (None for an untagged one) and its slots by name."""

    __slots__ = ("named", "tag")

    def __init__(self, tag: str | None, named: dict[str, Reply]) -> None:
        self.tag = tag
        self.named = named

    def __getitem__(self, name: str) -> Reply:
        return self.named[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.named)

    def __len__(self) -> int:
        return len(self.named)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Slots):
            return NotImplemented
        return (self.tag, self.named) == (other.tag, other.named)

    __hash__ = None  # type: ignore[assignment]  # mutable contents, as a dict's

    def __repr__(self) -> str:
        return f"Slots({self.tag!r}, {self.named!r})"


def _decoder(call: Call) -> Callable[[Reply], Slots]:
    """A function that names a reply's slots as a hand-written one would, or raises
    _Mismatch (then ``Call._explain`` says how it differs). Generated, as the packer."""

    def named(plan: tuple[tuple[str, ...], str | None], start: int, indent: str) -> list[str]:
        fixed, run = plan
        size = start + len(fixed)
        test = f"n < {size}" if run is not None else f"n != {size}"
        items = [f"{name!r}: reply[{start + i}]" for i, name in enumerate(fixed)]
        if run is not None:
            items.append(f"{run!r}: reply" if size == 0 else f"{run!r}: reply[{size}:]")
        return [
            f"{indent}if {test}: raise Mismatch('reply', None, False)",
            f"{indent}return {{{', '.join(items)}}}",
        ]

    lines = ["def decode(reply):", "    if type(reply) is not list:"]
    if isinstance(call.reply, str):
        lines.append(f"        return Slots(None, {{{call.reply!r}: reply}})")
    lines.append("        raise Mismatch('reply', None, False)")
    lines.append("    n = len(reply)")
    if call._tagged:
        lines += [
            "    if n:",
            "        head = reply[0]",
            f"        if type(head) is bytes and len(head) <= {call._tag_len}:",
        ]
        for tag, plan in call._tagged.items():
            lines.append(f"            if head == {tag.encode()!r}:")
            body = named(plan, 1, "                ")
            body[-1] = body[-1].replace("return {", f"return Slots({tag!r}, {{") + ")"
            lines += body
    if call._plain is not None:
        body = named(call._plain, 0, "    ")
        body[-1] = body[-1].replace("return {", "return Slots(None, {") + ")"
        lines += body
    elif isinstance(call.reply, str):  # one value that happens to be a list
        lines.append(f"    return Slots(None, {{{call.reply!r}: reply}})")
    else:
        lines.append("    raise Mismatch('reply', None, False)")
    scope: dict[str, Any] = {"Slots": Slots, "Mismatch": _Mismatch}
    exec("\n".join(lines), scope)
    return cast(Callable[[Reply], Slots], scope["decode"])


def _slots(
    plan: tuple[tuple[str, ...], str | None], items: list[Reply], start: int, what: str, tag: str
) -> dict[str, Reply]:
    fixed, run = plan
    if not fixed and not start and run is not None:  # apply.lua's results: no copy
        return {run: items}
    size = len(items) - start
    if size < len(fixed) or (run is None and size != len(fixed)):
        raise ProtocolError(
            f"{what}.lua reply {tag}: {size} slots, declared {fixed} (a run: {run})".strip()
        )
    values: dict[str, Reply] = dict(zip(fixed, items[start:] if start else items, strict=False))
    if run is not None:
        values[run] = items[start + len(fixed) :]
    return values


@dataclass(frozen=True)
class ScriptProtocol:
    """A Lua script (``store/lua/<sources>.lua``, concatenated) and its calls."""

    name: str
    calls: Mapping[str, Call]  # by op (the value of the first argument); "" for a single one
    sources: tuple[str, ...] = ()
    # flagged no-writes (Redis refuses any write it tries) and sent as EVALSHA_RO where
    # the server has it, so a replica or a read region can serve it
    read_only: bool = False
    selector: str | None = field(init=False)  # the argument that names the op (None: one)
    _only: Call | None = field(init=False, repr=False)  # the one layout of a script without ops

    def __post_init__(self) -> None:
        if not self.sources:
            object.__setattr__(self, "sources", (self.name,))
        selectors = {call.args[0] for call in self.calls.values()}
        single = tuple(self.calls) == ("",)
        if not single and (len(selectors) != 1 or "" in self.calls):
            raise ProtocolError(f"{self.name}: every op's first argument names the op")
        object.__setattr__(self, "selector", None if single else selectors.pop())
        object.__setattr__(self, "_only", self.calls[""] if single else None)

    @cached_property
    def script(self) -> Script:
        read = resources.files("acmi_core").joinpath
        source = "\n".join(read(f"store/lua/{s}.lua").read_text() for s in self.sources)
        return Script(source, read_only=self.read_only)

    def call(self, op: str | None = None) -> Call:
        try:
            return self.calls["" if op is None else op]
        except KeyError:
            raise ProtocolError(f"{self.name}: no op {op!r} (ops: {sorted(self.calls)})") from None

    def _call_for(self, args: Mapping[str, Value]) -> Call:
        """The layout ``args`` name (by the op's argument, for a script with ops)."""
        if self._only is not None:
            return self._only
        op = args.get(self.selector or "")
        if not isinstance(op, str):
            raise ProtocolError(f"{self.name}: {self.selector!r} names the op: a string")
        return self.call(op)

    def pack(
        self, keys: Mapping[str, str | Sequence[str]], args: Mapping[str, Value]
    ) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV from names (runs spliced in place)."""
        return self._call_for(args).pack(keys, args, self.name)

    def decode(self, reply: Reply, op: str | None = None) -> Slots:
        """The reply by name (of ``op``'s layout, for a script with ops)."""
        return self.call(op).decode(reply, self.name)

    def eval(
        self,
        store: Store,
        keys: Mapping[str, str | Sequence[str]],
        args: Mapping[str, Value],
        *,
        script: Script | None = None,
    ) -> Slots:
        """One run: pack, EVALSHA (``script`` instead of the protocol's own: a module's
        name for it that tests may swap), decode. Store errors propagate unmapped."""
        call = self._only or self._call_for(args)
        try:
            packed_keys, packed_args = call._pack(keys, args)
        except (KeyError, _Mismatch) as exc:
            raise _refused(self.name, call, exc, keys, args) from None
        reply = store.eval(script or self.script, packed_keys, packed_args)
        try:
            return call._decode(reply)
        except _Mismatch:
            return call._explain(reply, self.name)


def single(keys: tuple[str, ...], args: tuple[str, ...], reply: ReplyShape) -> dict[str, Call]:
    return {"": Call(keys, args, reply)}


# ---- replies recorded per request -------------------------------------------------------

# A script that is not idempotent (locks, hitl, hygiene, work; a RECORD op; the bootstrap's
# spawn) takes its request's record (keys.request of an id drawn once per call, reused by
# its retries): a run that finds it answers with it, writing nothing, else stores its reply
# there. Kept past any call's retries, not when over REPLAY_MAX_BYTES; mirrored by the
# scripts. locks, hitl and hygiene share store/lua/replay.lua: REPLAY_KEY last in each op.
REPLAY_TTL_MS: Final = 60_000
REPLAY_MAX_BYTES: Final = 131_072
REPLAY_KEY: Final = "replay"


def new_request_id() -> str:
    """A request id: drawn once per logical call, reused by every retry of it."""
    return uuid.uuid4().hex


# ---- the declarations (each script's header names the same positions) -----------------

# apply.lua's reply: one result per op, or the replay of an idempotency record
APPLY_REPLY: Final[Mapping[str, tuple[str, ...]]] = {
    "ACMI_REPLAY": ("stored",),
    "": ("results*",),
}

# objedit.lua (the OBJ edit, one function a script builds at its first OBJ op) goes before
# each script that runs OBJ ops
APPLY: Final = ScriptProtocol(
    "apply",
    single(("plan_keys*",), ("op_count", "ops*"), APPLY_REPLY),
    sources=("objedit", "apply"),
)
# apply's layout for plans of plain ops and object edits (WritePlan.apply picks it), and
# its replay
LEAN: Final = ScriptProtocol(
    "lean",
    single(("plan_keys*",), ("op_count", "ops*"), APPLY_REPLY),
    sources=("objedit", "lean"),
)

WORK: Final = ScriptProtocol(
    "work",
    single(
        ("profile", "signals", "owners", "owner_open", "replay", "plan_keys*"),
        ("op", "work_id", "owner", "mode", "plan_count", "plans*"),
        APPLY_REPLY,
    ),
    sources=("work", "objedit", "apply"),
)

SWEEP: Final = ScriptProtocol(
    "sweep",
    single(("activity", "plan_keys*"), ("agent_count", "agents*", "ops*"), APPLY_REPLY),
    sources=("sweep", "objedit", "apply"),
)

PAGE: Final = ScriptProtocol(
    "page",
    single(
        ("timeline",),
        ("score", "offset", "count", "bound", "reverse", "max_bytes", "lead"),
        ("more", "window*"),
    ),
    read_only=True,
)

# a merge of timelines (merge.lua): the range and caps, then the cursor's position
_MERGE_ARGS: Final = ("high", "low", "count", "max_bytes")
_MERGE_AT: Final = ("at", "at_score", "at_run", "at_size", "at_head", "at_tail")
MERGE: Final = ScriptProtocol(
    "merge",
    single(("timelines*",), _MERGE_ARGS + _MERGE_AT, ("more", "resumed", "window*")),
    read_only=True,
)

# the mentions index keys of the agents a coordination event may mention (mentions.lua):
# an event naming another answers REKEY (nothing written) and the client sends it again
MENTIONS_KEYS: Final = "mentions*"
REKEY: Final = {"REKEY": ("ids*",)}
_LOCK_KEYS: Final = ("lease", "thread", "index", "leases", MENTIONS_KEYS, REPLAY_KEY)
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
            {
                "OK": ("fence",),
                "HELD": ("owner", "expires", "fence"),
                "HEDGED": ("owner", "expires", "cid"),
                **REKEY,
            },
        ),
        "renew": Call(
            _LOCK_KEYS,
            ("op", "now", "token_hash", "expires", "resource"),
            {"OK": ("owner", "fence", "cid"), **_LOCK_REFUSED},
        ),
        "release": Call(
            _LOCK_KEYS,
            ("op", "now", "token_hash", "index_member", "release_template*", "resource"),
            {"OK": ("owner", "fence", "cid"), **_LOCK_REFUSED, **REKEY},
        ),
    },
    sources=("mentions", "replay", "locks"),  # the mentions index it keeps; its record
)

_HITL_KEYS: Final = (
    "items",
    "thread",
    "index",
    "named_open",
    "named_closed",
    "record_open",
    "record_closed",
    MENTIONS_KEYS,
    REPLAY_KEY,
)
_HITL_REKEY: Final = {"REKEY": ("addressee", "ids*")}
HITL: Final = ScriptProtocol(
    "hitl",
    {
        "create": Call(
            ("items", "queue", "tenants", REPLAY_KEY),
            ("op", "cid", "deadline", "record_header", "member", "tenant"),
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
                "record_addressee",
            ),
            {
                "OK": ("addressee", "score"),
                "RESOLVED": ("by", "at"),
                "NONE": ("members*",),
                **_HITL_REKEY,
            },
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
                "record_addressee",
            ),
            {"OK": ("addressee", "score"), "RESOLVED": ("by", "at"), "GONE": (), **_HITL_REKEY},
        ),
    },
    sources=("mentions", "replay", "hitl"),  # the mentions index it keeps; its record
)

HYGIENE: Final = ScriptProtocol(
    "hygiene",
    {
        "trim": Call(
            ("timeline", "archive", REPLAY_KEY),
            ("mode", "quarter", "doc", "member_count", "members*"),
            ("trimmed", "count"),
        ),
        "release": Call(("lease", REPLAY_KEY), ("mode", "execution_id"), "released"),
    },
    sources=("replay", "hygiene"),  # a trim's retry answers the trim that ran
)

# one timeline event deleted, audited (unlog.lua): by its ts and id, or its member
UNLOG: Final = ScriptProtocol(
    "unlog",
    single(
        ("timeline", "changed", "tenants", MENTIONS_KEYS, REPLAY_KEY),
        ("now", "entity", "tenant", "thread", "score", "id", "member", "audit"),
        {"DELETED": ("member",), "NONE": (), "CROWDED": ("count",), **REKEY},
    ),
    sources=("mentions", "replay", "unlog"),  # the mentions index it keeps; its record
)

# a prune pass over an entity's vectors (vectors.lua): the pass under way found or begun, a
# batch of needed digests marked, or one HSCAN step's unmarked fields dropped; BUSY when a
# write that does not mark its vectors in the pass stored one since it began
_PASS_MOVED: Final[dict[str, tuple[str, ...]]] = {"BUSY": (), "MOVED": ()}
VECTORS: Final = ScriptProtocol(
    "vectors",
    {
        "begin": Call(
            ("vectors", "pass", "timeline"),
            ("mode", "pass", "provider", "at", "ttl"),
            {"PASS": ("pass", "at", "scan", "end", "fresh", "events", "last", "size")},
        ),
        "mark": Call(
            ("vectors", "pass"),
            ("mode", "pass", "at", "next", "ttl", "digests*"),
            {"MARKED": ("count",), **_PASS_MOVED},
        ),
        "sweep": Call(
            ("vectors", "pass"),
            ("mode", "pass", "cursor", "count", "ttl"),
            {"SWEPT": ("scanned", "dropped", "next"), **_PASS_MOVED},
        ),
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
            "memory_hot",
            "memory_warm",
            "memory_heartbeat",
            "replay",
            "memory_soul",
            "memory_user",
            "memory_agents",
            "session_mark",
            "memory_index",
            "changed",
            "tenants",
            "tier_tokens",
            "work_items*",
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
            "read_bytes",
            "spawn_session",
            "spawn_window",
            "startup",
            "start_zone",
            "start_line",
            "start_ts",
            "start_mark",
            "start_ttl",
            "tenant",
            "token_limit",
            "guessed*",
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
            "hot",
            "warm",
            "heartbeat",
            "capped",
            "startup",
            "start_logged",
            "work_read",
            "start_written",
        ),
    ),
)

PROTOCOLS: Final = (
    APPLY,
    LEAN,
    WORK,
    SWEEP,
    PAGE,
    MERGE,
    LOCKS,
    HITL,
    HYGIENE,
    UNLOG,
    VECTORS,
    BOOTSTRAP,
)
# Lua put before a script's own text (mentions: functions; replay: a record, KEYS[#];
# objedit: the OBJ edit, one function)
LIBRARIES: Final = ("mentions", "replay", "objedit")

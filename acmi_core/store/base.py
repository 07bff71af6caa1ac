"""The one protocol every backend implements: it executes Redis commands.

Because the core speaks plain Redis commands (and one Lua script), the embedded,
redis-py and Upstash REST backends share every line of ACMI logic above this file.
There is no MULTI/EXEC: every write is one Lua script (``acmi_core.store.writes``), which
checks before it writes, where MULTI/EXEC would leave a half-applied transaction.

Replies are normalised the same way on every backend: bulk strings are ``bytes``
(never decoded here, so a non-UTF-8 member cannot break a whole read), integers are
``int``, nil is ``None``, arrays are ``list``. Status replies are ``bytes`` (b"OK").

Error replies are normalised too (:func:`error_reply`): the ones that mean "not now"
(BUSY, LOADING, TRYAGAIN, CLUSTERDOWN, MASTERDOWN) raise :class:`StoreBusy` (a 503 with
Retry-After), whole-call, even from a pipeline slot; every other one is a
:class:`StoreCommandError` carrying Redis's text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeAlias, runtime_checkable

from acmi_core.base.errors import PayloadTooLarge, StoreBusy, StoreCommandError, StoreUnavailable

Arg: TypeAlias = str | bytes | int | float
Command: TypeAlias = Sequence[Arg]
Reply: TypeAlias = int | bytes | list["Reply"] | None

# The largest request any backend takes, so a deployment moved between them keeps working:
# ElastiCache Serverless refuses a command of more than 3,999 arguments (its name included:
# EVALSHA, the SHA, the key count, keys, ARGV), Upstash a request over 10 MB (Free and Pay
# as you go). Bytes count the arguments as sent (UTF-8; on Upstash, the JSON body, checked
# again once built): 8 MiB holds ACMI's largest single write, a coordination event at the
# default 256 KiB body cap copied into 16 agents' mention indexes (4.3 MB). A pipeline:
# each command within the arguments, all of it within the bytes. Every backend checks each
# request here before sending it, and every write path that can grow (an extend, an
# import, a trim, an index feed) splits to stay under, so the whole suite proves it.
MAX_REQUEST_ARGS: Final = 3999
MAX_REQUEST_BYTES: Final = 8 * 1024 * 1024


class RequestTooLarge(PayloadTooLarge):
    """A request over MAX_REQUEST_ARGS or MAX_REQUEST_BYTES: refused before it is sent,
    so nothing was written (a 413)."""


def arg_bytes(arg: Arg) -> int:
    """An argument's bytes as sent (UTF-8 for text)."""
    if isinstance(arg, bytes):
        return len(arg)
    if isinstance(arg, str):
        return len(arg) if arg.isascii() else len(arg.encode("utf-8", "surrogatepass"))
    return len(repr(arg))


def check_request(command: Command, *, prefix: int = 0, extra: Sequence[Arg] = ()) -> int:
    """Refuse ``command`` (with ``prefix`` arguments before it and ``extra`` after, not
    built yet) over the request limits; its bytes."""
    count = prefix + len(command) + len(extra)
    if count > MAX_REQUEST_ARGS:
        raise RequestTooLarge(
            "request",
            "max_request_args",
            f"{count} arguments, over the {MAX_REQUEST_ARGS} one request may carry; nothing "
            "was sent",
        )
    size = sum(map(arg_bytes, command)) + sum(map(arg_bytes, extra))
    if size > MAX_REQUEST_BYTES:
        raise _too_many_bytes(size)
    return size


def check_packed(
    size: int, command: Command, *, prefix: int = 0, extra: Sequence[Arg] = ()
) -> None:
    """:func:`check_request` for a request already packed into ``size`` bytes of wire
    form (RESP: each argument's bytes and its framing). The framing only adds bytes, so
    a wire form within MAX_REQUEST_BYTES holds arguments within it: then only the count
    is checked, and no argument is measured a second time; a larger one gets the exact
    measure, so exactly the requests check_request refuses are refused."""
    count = prefix + len(command) + len(extra)
    if count > MAX_REQUEST_ARGS or size > MAX_REQUEST_BYTES:
        check_request(command, prefix=prefix, extra=extra)


def check_pipeline(commands: Sequence[Command]) -> None:
    """Refuse a pipeline with a command over MAX_REQUEST_ARGS or, all of it, over
    MAX_REQUEST_BYTES (one request: one HTTP body on Upstash)."""
    size = sum(check_request(command) for command in commands)
    if size > MAX_REQUEST_BYTES:
        raise _too_many_bytes(size)


def check_packed_pipeline(size: int, commands: Sequence[Command]) -> None:
    """:func:`check_pipeline` for a pipeline packed into ``size`` bytes of wire form, as
    :func:`check_packed`: the exact measure only for one over the bytes (or a command
    over the arguments), where it decides."""
    if size > MAX_REQUEST_BYTES or any(len(c) > MAX_REQUEST_ARGS for c in commands):
        check_pipeline(commands)


def check_body(size: int) -> None:
    """Refuse a request whose encoded body (Upstash's JSON) is over MAX_REQUEST_BYTES."""
    if size > MAX_REQUEST_BYTES:
        raise _too_many_bytes(size)


def _too_many_bytes(size: int) -> RequestTooLarge:
    return RequestTooLarge(
        "request",
        "max_request_bytes",
        f"{size} bytes of arguments, over the {MAX_REQUEST_BYTES} one request may carry; "
        "nothing was sent",
    )


@dataclass(frozen=True)
class Script:
    """A Lua script, run by SHA (EVALSHA) with a fallback to EVAL on NOSCRIPT.

    ``source`` is the body without a shebang; a store that knows its server's dialect
    (:class:`ScriptDialect`) sends it under a ``#!lua`` shebang with the flags the server
    accepts: ``no-writes`` when ``read_only`` (and then EVALSHA_RO/EVAL_RO where the
    server has them), ``allow-key-locking`` where that store opts in and the server
    takes it. ``sha`` is the body's own (a pipeline that sends EVALSHA itself uses it)."""

    source: str
    read_only: bool = False
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())


@runtime_checkable
class Store(Protocol):
    """Executes Redis commands. Every method is exactly one round trip (EVALSHA's
    one-time NOSCRIPT fallback aside)."""

    name: str

    def execute(self, command: Command) -> Reply:
        """One command. A Redis error reply raises :class:`StoreCommandError`."""
        ...

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        """Several commands in one request, not atomic. A failed command's slot holds
        its :class:`StoreCommandError`; the other results are kept."""
        ...

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        """Run a Lua script atomically (EVALSHA, falling back to EVAL on NOSCRIPT)."""
        ...

    def close(self) -> None: ...


class NoStore:
    """For processes that never touch data (the docs function): every call fails as a
    503, and building one costs no connection, no secret, no import."""

    name = "none"

    def _fail(self) -> StoreUnavailable:
        return StoreUnavailable("this function has no store configured")

    def execute(self, command: Command) -> Reply:
        raise self._fail()

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        raise self._fail()

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        raise self._fail()

    def close(self) -> None:
        return None


# Error codes Redis answers while it cannot run a command for now: a script is running
# past busy-reply-threshold (BUSY), it is loading its dataset (LOADING), a cluster slot is
# moving or down (TRYAGAIN, CLUSTERDOWN), a replica lost its master (MASTERDOWN).
# Matched on the whole first word: BUSYKEY and BUSYGROUP are final errors.
TRANSIENT_ERROR_CODES: Final = frozenset(
    {"BUSY", "LOADING", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN"}
)
# The refused command did not run, so a retry is safe. A second suits BUSY (the script
# ends or is killed); LOADING or CLUSTERDOWN may last longer and earn another 503.
BUSY_RETRY_AFTER_S: Final = 1.0


def error_reply(text: str) -> StoreCommandError | StoreBusy:
    """A Redis error reply (its text, code first) as the error a backend raises."""
    if text.split(" ", 1)[0] in TRANSIENT_ERROR_CODES:
        return StoreBusy(
            f"Redis refused the command for now: {text}", retry_after=BUSY_RETRY_AFTER_S
        )
    return StoreCommandError(text)


def pipeline_slots(
    slots: Sequence[Reply | StoreCommandError | StoreBusy],
) -> list[Reply | StoreCommandError]:
    """A pipeline's results, or its first StoreBusy raised: a command refused for now is
    not a failed command (callers read a failed slot as bad data), it fails the call."""
    results: list[Reply | StoreCommandError] = []
    for slot in slots:
        if isinstance(slot, StoreBusy):
            raise slot
        results.append(slot)
    return results


def is_noscript(error: StoreCommandError) -> bool:
    return str(error).startswith("NOSCRIPT")


KEY_LOCKING: Final = "allow-key-locking"  # Upstash's flag: lock KEYS, not the database
NO_WRITES: Final = "no-writes"


class ScriptDialect:
    """What one store's server accepts of Redis 7's script flags, learnt from its first
    refusal of each, never assumed (a server may run any Redis-speaking engine). Each
    field: None (not known yet: tried), True (accepted), False (refused: not sent again).

    - ``shebang``: ``#!lua flags=...`` (Redis 7+). A server that compiles the text as
      plain Lua refuses it at line 1 ("unexpected symbol near '#'"): fakeredis, Redis 6.
    - ``read_only``: EVAL_RO/EVALSHA_RO ("unknown command" where absent), sent for the
      scripts flagged no-writes, so a replica or a read region may serve them.
    - ``key_locking``: ``allow-key-locking`` (Upstash). OSS Redis 7.0 refuses any flag it
      does not know ("Unexpected flag in script shebang"); False from the start: the
      store does not opt in (its server is not Upstash).

    Each learning is of a refusal at compile time (nothing ran), so sending the script
    again without the refused part is safe for a write. A dialect only ever turns a
    None into True or False, so a call learns at most three times."""

    def __init__(
        self,
        *,
        shebang: bool | None = None,
        read_only: bool | None = None,
        key_locking: bool | None = False,
    ) -> None:
        self.shebang = shebang
        self.read_only = read_only
        self.key_locking = key_locking
        self._rendered: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = {}

    def flags(self, script: Script) -> tuple[str, ...] | None:
        """The shebang's flags for ``script`` now (None: no shebang at all)."""
        if self.shebang is False:
            return None
        flags = (NO_WRITES,) if script.read_only else ()
        return (*flags, KEY_LOCKING) if self.key_locking is not False else flags

    def render(self, script: Script) -> tuple[str, str, tuple[str, ...] | None]:
        """The text to send, its SHA, and the flags in it (cached per script and flags)."""
        flags = self.flags(script)
        if flags is None:
            return script.source, script.sha, None
        cache = (script.sha, flags)
        found = self._rendered.get(cache)
        if found is None:
            head = f"#!lua flags={','.join(flags)}" if flags else "#!lua"
            text = f"{head}\n{script.source}"
            found = self._rendered[cache] = (text, hashlib.sha1(text.encode()).hexdigest())
        return found[0], found[1], flags

    def uses_read_only(self, script: Script) -> bool:
        return script.read_only and self.shebang is not False and self.read_only is not False

    def learn(self, error: StoreCommandError, flags: tuple[str, ...] | None, ro: bool) -> bool:
        """Whether ``error`` is the server refusing a part of the dialect just sent (then
        that part is off and the caller sends the script again)."""
        text = str(error)
        lower = text.lower()
        if ro and "unknown command" in lower and "_ro" in lower:
            self.read_only = False
            return True
        if flags is not None and KEY_LOCKING in flags and KEY_LOCKING in text:
            self.key_locking = False
            return True
        if flags is not None and ":1:" in text and "near '#'" in text:
            self.shebang = False
            return True
        return False

    def accepted(self, flags: tuple[str, ...] | None, ro: bool) -> None:
        if flags is not None:
            self.shebang = True
            if KEY_LOCKING in flags:
                self.key_locking = True
        if ro:
            self.read_only = True


def eval_script(
    execute: Callable[[Command], Reply],
    script: Script,
    keys: Sequence[str],
    args: Sequence[Arg],
    *,
    dialect: ScriptDialect | None = None,
    evalsha: Callable[[str, str, Sequence[str], Sequence[Arg]], Reply] | None = None,
    checked: bool = False,
) -> Reply:
    """EVALSHA, and EVAL once when the server's script cache misses it (which also loads
    it: later calls are one round trip again). With a ``dialect``: the script under its
    shebang, a read-only one as EVALSHA_RO/EVAL_RO, each part the server refuses learnt
    once and left out from then on (that call sends the script again). ``evalsha``: a
    backend's own way to send the EVALSHA (command, sha, keys, args: the RESP store
    packs its head once per script); the EVAL goes through ``execute``. ``checked``:
    ``evalsha`` and ``execute`` hold the request to the limits themselves (the RESP
    store, from the bytes it packed), so it is not measured here first."""
    if not checked:
        check_request(keys, prefix=3, extra=args)  # EVALSHA, its SHA, the key count
    if dialect is None:
        dialect = _PLAIN
    load = False  # a refusal at EVAL: the next try loads at once (its EVALSHA would miss)
    while True:
        text, sha, flags = dialect.render(script)
        ro = dialect.uses_read_only(script)
        if not load:
            name = "EVALSHA_RO" if ro else "EVALSHA"
            try:
                if evalsha is not None:
                    reply = evalsha(name, sha, keys, args)
                else:
                    reply = execute((name, sha, len(keys), *keys, *args))
                dialect.accepted(flags, ro)
                return reply
            except StoreCommandError as exc:
                if dialect.learn(exc, flags, ro):
                    continue
                if not is_noscript(exc):
                    raise
        try:
            reply = execute(("EVAL_RO" if ro else "EVAL", text, len(keys), *keys, *args))
        except StoreCommandError as exc:
            if dialect.learn(exc, flags, ro):
                load = True
                continue
            raise
        dialect.accepted(flags, ro)
        return reply


# no shebang, no EVAL_RO: a caller that names no dialect sends the plain body, as before
_PLAIN: Final = ScriptDialect(shebang=False, read_only=False, key_locking=False)

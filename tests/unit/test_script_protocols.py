"""Each script's declared protocol (acmi_core/store/scripts.py) against the script itself.

Every script names its KEYS, ARGV and reply in its header, one ``--:`` line each (the
form is in scripts.py's docstring). These tests parse that header and the code below it:
the header names the positions the Python declaration names, the code reads no literal
``KEYS[n]``/``ARGV[n]`` the header does not declare, and the reply tables the code builds
have the declared sizes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources

import pytest

from acmi_core.store import scripts
from acmi_core.store.scripts import (
    APPLY_REPLY,
    Call,
    ProtocolError,
    ScriptProtocol,
    Slots,
    is_run,
)

LUA = resources.files("acmi_core").joinpath("store/lua")
HEADER = re.compile(
    r"^--: (?:(?P<ops>[a-z]+(?:,[a-z]+)*) )?(?P<what>KEYS|ARGV|reply)"
    r"(?:\[(?P<at>\d+|\d+\.\.|\.\.|#)\])?(?: (?P<rest>[^:]*))?(?::.*)?$"
)
# a literal index (work.lua and sweep.lua read theirs through WORK_KEYS, SWEEP_ARGV, ...)
LITERAL = re.compile(r"\b(?:[A-Z]+_)?(KEYS|ARGV)\[(\d+)\]")
# for i = 5, 14 do n[i] = tonumber(ARGV[i]) end: ARGV 5..14 read by a loop
LOOP = re.compile(r"\bfor (\w+) = (\d+), (\d+) do [^\n]*?\b(?:[A-Z]+_)?(KEYS|ARGV)\[\1\]")
TAGGED = re.compile(r"\{\s*'([A-Z_]+)'")
# return {...}, or return recorded({...}) (store/lua/replay.lua keeps the reply)
UNTAGGED_RETURN = re.compile(r"\breturn (?:recorded\()?\{(?!\s*')")


@dataclass
class Header:
    """What a script's ``--:`` lines declare, by op ("" = every op)."""

    keys: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    args: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    replies: dict[str, list[str]] = field(default_factory=dict)  # one line each, raw

    def layout(self, kind: str, op: str) -> list[tuple[str, str]]:
        table = self.keys if kind == "KEYS" else self.args
        return ordered([*table.get("", []), *(table.get(op, []) if op else [])])


def ordered(entries: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """By position: n and n.. by n, runs after a run (..) in their order, # last."""

    def key(entry: tuple[str, str]) -> float:
        at = entry[0]
        if at == "#":
            return math.inf
        if at == "..":
            return 1e9
        return float(at.removesuffix(".."))

    return sorted(entries, key=key)


def source(name: str) -> str:
    return LUA.joinpath(f"{name}.lua").read_text()


def parse_header(text: str) -> Header:
    header = Header()
    for line in text.splitlines():
        if not line.startswith("--:"):
            continue
        match = HEADER.match(line)
        assert match, f"not a declaration: {line!r}"
        ops = (match["ops"] or "").split(",")
        what, at, rest = match["what"], match["at"], (match["rest"] or "").split()
        for op in ops:
            if what == "reply":
                spec = f"[{at}] {' '.join(rest)}" if at else " ".join(rest)
                header.replies.setdefault(op, []).append(spec)
            else:
                assert at is not None and len(rest) == 1, f"one position, one name: {line!r}"
                table = header.keys if what == "KEYS" else header.args
                table.setdefault(op, []).append((at, rest[0]))
    return header


def expected(names: tuple[str, ...], last: bool) -> list[tuple[str, str]]:
    """The header entries a declaration needs: n for a fixed position, n.. for a run that
    starts at n, .. for a run after a run, # for the last argument when the script reads
    it as ARGV[#ARGV]."""
    out: list[tuple[str, str]] = []
    after_run = False
    for i, name in enumerate(names, start=1):
        if last and i == len(names) and not is_run(name):
            out.append(("#", name))
        elif after_run:
            assert is_run(name), f"{name}: a fixed field after a run has no position"
            out.append(("..", name))
        else:
            out.append((f"{i}.." if is_run(name) else str(i), name))
        after_run = after_run or is_run(name)
    return out


def reply_lines(shape: scripts.ReplyShape) -> list[str]:
    if isinstance(shape, str):
        return [shape]
    if isinstance(shape, tuple):
        return [f"[{i}..] {n}" if is_run(n) else f"[{i}] {n}" for i, n in enumerate(shape, 1)]
    lines = []
    for tag, names in shape.items():
        lines += reply_lines(names) if tag == "" else [" ".join((tag, *names))]
    return lines


def code_of(text: str) -> str:
    """The script without its comments (a -- inside a string is kept)."""
    out, i, quote = [], 0, ""
    while i < len(text):
        c = text[i]
        if quote:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
            out.append(c)
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def arity(code: str, brace: int) -> int:
    """The number of top-level elements of the table constructor that opens at ``brace``."""
    depth, count, empty, i, quote = 0, 0, True, brace, ""
    while True:
        c = code[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote, empty = c, False
        elif c in "{([":
            depth += 1
            if depth > 1:
                empty = False
        elif c in "})]":
            depth -= 1
            if depth == 0:
                return 0 if empty else count + 1
        elif c == "," and depth == 1:
            count += 1
        elif not c.isspace() and depth >= 1:
            empty = False
        i += 1


def literal_uses(code: str) -> Iterator[tuple[str, int]]:
    for match in LITERAL.finditer(code):
        yield match[1], int(match[2])
    for match in LOOP.finditer(code):
        for n in range(int(match[2]), int(match[3]) + 1):
            yield match[4], n


def fixed_positions(protocol: ScriptProtocol, kind: str) -> set[int]:
    found = set()
    for call in protocol.calls.values():
        names = call.keys if kind == "KEYS" else call.args
        for i, name in enumerate(names, start=1):
            if is_run(name):
                break
            found.add(i)
    return found


def prologue_and_body(protocol: ScriptProtocol) -> tuple[str, str | None]:
    """The file that declares the protocol's inputs, and the one whose reply it is."""
    sources = tuple(s for s in protocol.sources if s not in scripts.LIBRARIES)
    if sources == (protocol.name,):
        return protocol.name, None
    assert sources == (protocol.name, "apply"), "a prologue is followed by apply.lua"
    return protocol.name, "apply"


PROTOCOLS = {p.name: p for p in scripts.PROTOCOLS}


def test_every_script_has_a_protocol() -> None:
    files = {f.name.removesuffix(".lua") for f in LUA.iterdir() if f.name.endswith(".lua")}
    assert set(PROTOCOLS) | set(scripts.LIBRARIES) == files
    assert {s for p in scripts.PROTOCOLS for s in p.sources} == files


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_the_header_names_what_the_declaration_names(name: str) -> None:
    protocol = PROTOCOLS[name]
    file, _ = prologue_and_body(protocol)
    # a library's declarations (replay.lua's KEYS[#] replay) hold for the scripts after it
    libraries = [s for s in protocol.sources if s in scripts.LIBRARIES]
    header = parse_header("\n".join(source(s) for s in (*libraries, file)))
    ops = [op for op in protocol.calls]
    declared_ops = {*header.keys, *header.args, *header.replies} - {""}
    assert declared_ops <= set(ops), f"{file}.lua declares ops {declared_ops - set(ops)}"
    for op in ops:
        call = protocol.call(op or None)
        for kind, names in (("KEYS", call.keys), ("ARGV", call.args)):
            found = header.layout(kind, op)
            last = any(at == "#" for at, _ in found)
            assert found == ordered(expected(names, last)), f"{file}.lua {op or ''} {kind}"
        replies = [*header.replies.get("", []), *(header.replies.get(op, []) if op else [])]
        if protocol.sources[-1] == "apply" and protocol.name != "apply":
            assert not replies, f"{file}.lua: its reply is apply.lua's"
            assert call.reply == APPLY_REPLY
        else:
            assert sorted(replies) == sorted(reply_lines(call.reply)), f"{file}.lua {op} reply"


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_the_script_reads_only_declared_positions(name: str) -> None:
    protocol = PROTOCOLS[name]
    file, _ = prologue_and_body(protocol)
    code = code_of(source(file))
    uses = list(literal_uses(code))
    assert uses, f"{file}.lua: no literal KEYS/ARGV read found (the parser missed them?)"
    for kind in ("KEYS", "ARGV"):
        allowed = fixed_positions(protocol, kind)
        beyond = sorted({n for k, n in uses if k == kind} - allowed)
        assert not beyond, f"{file}.lua reads {kind}{beyond}, not declared at a fixed position"
    if "ARGV[#ARGV]" in code:
        for op, call in protocol.calls.items():
            assert not is_run(call.args[-1]), f"{file}.lua {op}: ARGV[#ARGV] needs a last field"


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_the_reply_tables_have_the_declared_sizes(name: str) -> None:
    protocol = PROTOCOLS[name]
    file, body = prologue_and_body(protocol)
    code = code_of(source(body or file))
    shapes = [call.reply for call in protocol.calls.values()] if body is None else [APPLY_REPLY]
    tags: dict[str, set[int]] = {}
    fixed: set[int] = set()
    for shape in shapes:
        if isinstance(shape, tuple) and not any(is_run(n) for n in shape):
            fixed.add(len(shape))
        elif isinstance(shape, dict):
            for tag, names in shape.items():
                if tag:
                    size = len(names) - sum(is_run(n) for n in names)
                    tags.setdefault(tag, set()).add(size)
    built: dict[str, set[int]] = {}
    for match in TAGGED.finditer(code):
        if match[1] in tags:
            built.setdefault(match[1], set()).add(arity(code, match.start()) - 1)
    assert built == tags, f"{file}.lua: tagged replies built {built}, declared {tags}"
    untagged = {arity(code, m.end() - 1) for m in UNTAGGED_RETURN.finditer(code)}
    assert untagged == fixed, f"{file}.lua: untagged reply tables {untagged}, declared {fixed}"


def test_the_bootstrap_protocol_is_the_one_the_brief_names() -> None:
    call = scripts.BOOTSTRAP.call()
    # + the spawn's session (ARGV 30, 31), the startup files (KEYS 23-25, ARGV 32, reply 25)
    # and the session mark (KEYS 26, reply 26), appended so no earlier position moved;
    # then the session-start line's keys and arguments (KEYS 27-29, ARGV 33-38, reply 28),
    # a bound key's hourly tokens (KEYS 30, ARGV 39) and the guessed work items (KEYS 31..,
    # ARGV 40.., reply 27), likewise
    assert (len(call.keys), len(call.args), len(call.reply)) == (31, 40, 28)
    assert call.keys[-1] == "work_items*" and call.args[-1] == "guessed*"


# ---- packing and decoding ------------------------------------------------------------------


def test_pack_builds_positions_from_names() -> None:
    keys, args = scripts.LOCKS.pack(
        {
            "lease": "l",
            "thread": "t",
            "index": "i",
            "leases": "x",
            "mentions": ["m"],
            "replay": "q",
        },
        {
            "op": "release",
            "now": 5,
            "token_hash": "h",
            "index_member": "m",
            "release_template": [1, "{}"],
            "resource": "r",
        },
    )
    assert keys == ["l", "t", "i", "x", "m", "q"]
    assert args == ["release", 5, "h", "m", 1, "{}", "r"]


def test_a_concatenated_script_is_its_prologue_then_apply() -> None:
    text = scripts.WORK.script.source
    assert text == source("work") + "\n" + source("objedit") + "\n" + source("apply")


@pytest.mark.parametrize(
    ("keys", "args", "message"),
    [
        ({"timeline": "k"}, {"score": 1, "offset": 0, "count": 2, "bound": ""}, "'reverse' is"),
        ({"timeline": "k", "x": "y"}, {}, "unknown name 'x'"),
        ({"timeline": ["k"]}, {}, "one value, not a list"),
    ],
)
def test_a_missing_or_unknown_name_is_an_error(
    keys: dict[str, object], args: dict[str, object], message: str
) -> None:
    with pytest.raises(ProtocolError, match=message):
        scripts.PAGE.pack(keys, args)  # type: ignore[arg-type]


def test_a_run_must_be_a_list_and_an_op_must_be_known() -> None:
    with pytest.raises(ProtocolError, match="is a run"):
        scripts.APPLY.pack({"plan_keys": "k"}, {"op_count": 0, "ops": []})
    with pytest.raises(ProtocolError, match="no op 'steal'"):
        scripts.LOCKS.pack({}, {"op": "steal"})


def test_decode_names_the_slots() -> None:
    held = scripts.LOCKS.decode([b"HELD", b"agent:a", b"9", b"3"], "claim")
    assert held == Slots("HELD", {"owner": b"agent:a", "expires": b"9", "fence": b"3"})
    none = scripts.HITL.decode([b"NONE", b"m1", b"m2"], "resolve")
    assert none.tag == "NONE" and none["members"] == [b"m1", b"m2"]
    assert scripts.APPLY.decode([1, 0]) == Slots(None, {"results": [1, 0]})
    replay = scripts.APPLY.decode([b"ACMI_REPLAY", b"{}"])
    assert replay.tag == "ACMI_REPLAY" and replay["stored"] == b"{}"
    assert scripts.HYGIENE.decode(1, "release")["released"] == 1


@pytest.mark.parametrize(
    ("protocol", "reply", "op"),
    [
        (scripts.BOOTSTRAP, [None] * 19, None),
        (scripts.LOCKS, [b"OK"], "claim"),
        (scripts.LOCKS, [b"NONE"], "claim"),
        (scripts.HYGIENE, [1], "trim"),
    ],
)
def test_a_reply_of_another_shape_is_an_error(
    protocol: ScriptProtocol, reply: list[object], op: str | None
) -> None:
    with pytest.raises(ProtocolError):
        protocol.decode(reply, op)  # type: ignore[arg-type]


def test_a_name_declared_twice_is_refused() -> None:
    with pytest.raises(ProtocolError, match="twice"):
        Call(("a", "a*"), (), ())


def test_a_missing_key_is_named_as_a_key() -> None:
    call = scripts.BOOTSTRAP.call()
    # each run given as an empty list (work_items, guessed)
    all_keys: dict[str, object] = {k.removesuffix("*"): [] if is_run(k) else "k" for k in call.keys}
    all_args: dict[str, object] = {a.removesuffix("*"): [] if is_run(a) else 1 for a in call.args}
    keys = {k: v for k, v in all_keys.items() if k != "hitl"}  # hitl is an ARGV name too
    with pytest.raises(ProtocolError, match="bootstrap KEYS: 'hitl' is missing"):
        scripts.BOOTSTRAP.pack(keys, all_args)  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="bootstrap ARGV: 'hitl' is missing"):
        scripts.BOOTSTRAP.pack(
            all_keys,  # type: ignore[arg-type]
            {a: v for a, v in all_args.items() if a != "hitl"},  # type: ignore[arg-type]
        )

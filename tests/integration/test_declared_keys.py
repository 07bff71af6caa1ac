"""Every key a script touches is one of its KEYS: no script builds a key name.

Checked on a real redis-server, exactly: MONITOR shows each script call (its declared
KEYS) and then every command the script ran ("[db lua]" lines), and the server's own
COMMAND GETKEYS says which arguments of each command are keys. A key that a script
touched and did not declare fails the test, named with its script and command.

The conformance suite drives the scripts (and the few calls below the ones it leaves
out), so the test covers every script the client runs; it also checks that each
script in ``scripts.PROTOCOLS`` ran at least once.

(Redis 7.0 itself refuses an undeclared key only on a cluster and only across slots,
"Script attempted to access keys that do not hash to the same slot": a single-node
cluster would catch a built key in another slot, never one in the same slot. This check
catches both.)"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.jobs import quarterly, sweep
from acmi_core.jobs.runner import JobRun
from acmi_core.store import scripts
from acmi_core.store.redis import RedisStore, RespStore
from acmi_core.testing.conformance import run_conformance
from acmi_core.testing.redis_server import RedisServer, RedisServerError, redis_server
from tests.integration.test_hygiene import DAY, DictSink, dest

_LINE = re.compile(rb"^\+\d+\.\d+ \[(\d+) ([^\]]+)\] (.*)$")
_ARG = re.compile(rb'"((?:[^"\\]|\\.)*)"')
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b"}
_SCRIPT_CALLS = {b"EVAL", b"EVALSHA", b"EVAL_RO", b"EVALSHA_RO"}


def _unquote(raw: bytes) -> bytes:
    """An argument as MONITOR quotes it (sdscatrepr), back to its bytes."""
    out, i = bytearray(), 0
    while i < len(raw):
        c = raw[i : i + 1]
        if c != b"\\":
            out += c
            i += 1
        elif raw[i + 1 : i + 2] == b"x":
            out.append(int(raw[i + 2 : i + 4], 16))
            i += 4
        else:
            nxt = raw[i + 1 : i + 2]
            out += _ESCAPES.get(nxt, nxt)
            i += 2
    return bytes(out)


@dataclass
class Monitor:
    """A MONITOR connection's lines, read on a thread until stopped."""

    port: int
    lines: list[bytes] = field(default_factory=list)
    _sock: socket.socket | None = None
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._sock = socket.create_connection(("127.0.0.1", self.port))
        self._sock.sendall(b"MONITOR\r\n")
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._sock is not None
        buffer = b""
        while True:
            try:
                chunk = self._sock.recv(1 << 20)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            *done, buffer = buffer.split(b"\r\n")
            self.lines.extend(done)

    def stop(self) -> None:
        assert self._sock is not None and self._thread is not None
        self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(timeout=10)


def _sha(text: bytes) -> bytes:
    return hashlib.sha1(text).hexdigest().encode()


def undeclared_keys(lines: list[bytes], store: RespStore) -> tuple[dict[str, set[str]], set[str]]:
    """(script name -> "COMMAND key" touched but not declared, the scripts seen)."""
    # longest first: work.lua and sweep.lua are prologues put before apply.lua's text
    ordered = sorted(scripts.PROTOCOLS, key=lambda p: -len(p.script.source))
    sources = {p.script.source: p.name for p in ordered}
    by_sha: dict[bytes, str] = {}
    for p in scripts.PROTOCOLS:  # as this store sends it, and plain (a read's pipeline)
        by_sha[store.script_dialect.render(p.script)[1].encode()] = p.name
        by_sha[p.script.sha.encode()] = p.name
    runs: list[tuple[str, set[bytes], list[list[bytes]]]] = []
    current: tuple[str, set[bytes], list[list[bytes]]] | None = None
    for line in lines:
        match = _LINE.match(line)
        if not match:
            continue
        who, rest = match.group(2), match.group(3)
        args = [_unquote(a) for a in _ARG.findall(rest)]
        if who == b"lua":
            if current is not None:
                current[2].append(args)
            continue
        if args and args[0].upper() in _SCRIPT_CALLS:
            body = args[1]
            if args[0].upper().startswith(b"EVALSHA"):
                name = by_sha.get(body, "other")  # another script (the suite's own)
            else:
                text = body.decode("utf-8", "replace")
                name = next((n for s, n in sources.items() if text.endswith(s)), "other")
                by_sha[_sha(body)] = name
            numkeys = int(args[2])
            current = (name, set(args[3 : 3 + numkeys]), [])
            runs.append(current)
        else:
            current = None
    found: dict[str, set[str]] = {}
    seen: set[str] = set()
    for name, declared, commands in runs:
        seen.add(name)
        if not commands:
            continue
        replies = store.pipeline([("COMMAND", "GETKEYS", *c) for c in commands])
        for command, keys in zip(commands, replies, strict=True):
            touched = keys if isinstance(keys, list) else []  # a keyless command: none
            for key in touched:
                assert isinstance(key, bytes)
                if key not in declared:
                    found.setdefault(name, set()).add(
                        f"{command[0].decode()} {key.decode('utf-8', 'replace')}"
                    )
    return found, seen


def _the_scripts_the_suite_leaves_out(acmi: Acmi) -> None:
    """merge (cat), sweep (the liveness job), hygiene (an archive's trim), unlog (an
    event deleted: by ts and id on the coordination thread, through its REKEY, and by
    member) and vectors (a forgotten line's vector pruned)."""
    now = acmi.clock()
    note = {"kind": "note", "source": "user:k", "correlationId": "c-k", "summary": "@bob"}
    acmi.timeline.append("user:k", {**note, "ts": now - 200 * DAY})
    acmi.timeline.append("user:j", {**note, "ts": now - 1})
    assert acmi.timeline.cat(["user:k", "user:j"], since_ms=0)
    acmi.agents.heartbeat("agent:quiet", now=now - sweep.STALL_AFTER_MS - 60_000)
    assert sweep.run(acmi, JobRun("sweep", "e1", now))["stalled"] == 1
    sink = DictSink()
    out = quarterly.archive_entity(acmi, "user:k", cutoff_ms=now - 100 * DAY, dest=dest(sink))
    assert out.trimmed == 1, out
    thread = "thread:agent-coordination"
    acmi.timeline.append(thread, {**note, "correlationId": "c-del", "ts": now - 5})
    assert acmi.timeline.delete_event(thread, ts=now - 5, id="c-del")["deleted"]
    kept = acmi.timeline.append("user:j", {**note, "correlationId": "c-del2", "ts": now - 6})
    assert acmi.timeline.delete_event("user:j", member=kept.to_json())["deleted"]
    acmi.memory.remember("agent:k", "a line soon forgotten")
    acmi.memory.forget("agent:k", "MEMORY.md", text="a line soon forgotten")
    assert acmi.memory.prune_vectors("agent:k")["dropped"] == 1


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    """A server of this module's own: MONITOR sees this test's commands only."""
    try:
        with redis_server() as started:
            yield started
    except RedisServerError as exc:
        pytest.fail(str(exc), pytrace=False)


def test_every_script_declares_every_key_it_touches(server: RedisServer) -> None:
    store = RedisStore.from_url(server.url)
    assert isinstance(store, RespStore)
    monitor = Monitor(server.port)
    monitor.start()
    try:
        acmi = create_acmi(store, Settings())
        report = run_conformance(acmi, raw=store.execute)
        assert report.ok, str(report)
        _the_scripts_the_suite_leaves_out(acmi)
    finally:
        monitor.stop()
    found, seen = undeclared_keys(monitor.lines, store)
    store.close()
    print(f"{len(monitor.lines)} MONITOR lines; scripts run: {sorted(seen)}")
    for name, keys in sorted(found.items()):
        print(f"{name}: {len(keys)} undeclared, e.g. {sorted(keys)[:3]}")
    assert not found, sorted(found)
    assert seen >= {p.name for p in scripts.PROTOCOLS}, "a script the suite never ran"

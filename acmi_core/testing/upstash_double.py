"""A faithful Upstash REST test double in front of a real redis-server.

No pip-installable Upstash REST server exists (the official local one needs Docker), so
this bridges the REST protocol to Redis over raw redis-py connections: ``POST /`` (one
command) and ``/pipeline`` (non-atomic batch), bearer auth, ``Upstash-Encoding: base64``
and the read-your-writes ``Upstash-Sync-Token`` header. ``/multi-exec`` is left out: ACMI
never sends it (every write is one Lua script).

Commands go over a raw pooled connection rather than through redis-py's command layer:
redis-py strips the error prefix ("ERR ", "NOSCRIPT ") from known errors and rewrites
pipeline errors, while Upstash sends Redis's error text unchanged.

Fault injection (``fail_next``, ``drop_next``, ``hang_next``, ``lose_reply_next``,
``lose_reply_matching``, ``drip_next``) and request counting let tests assert retries,
round trips and deadlines.
"""

from __future__ import annotations

import base64
import json
import threading
from collections import Counter, deque
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.exceptions import ResponseError


@dataclass(frozen=True)
class _Fault:
    kind: str  # "status" | "drop" | "hang" | "lose_reply" | "drip" | "none" (answer it)
    status: int = 0
    retry_after: float | None = None
    seconds: float = 0.0  # a hang's length; a drip's pause before each byte
    headers: bool = False  # drip: the status line and headers too, not only the body


def _error_text(error: ResponseError) -> str:
    # redis-py keeps a stripped prefix in status_code; put it back ("NOSCRIPT No ...").
    # Since redis-py 8 a code it does not know (ACMI_PENDING) stays in the text as well.
    code = getattr(error, "status_code", None)
    text = str(error.args[0])
    return f"{code} {text}" if code and not text.startswith(f"{code} ") else text


def _encode(value: Any, b64: bool) -> Any:
    """A raw RESP2 reply to Upstash's JSON shape."""
    if isinstance(value, bytes):
        if not b64:
            return value.decode("utf-8", "replace")
        # Upstash sends the status reply OK unencoded (a bulk "OK" is indistinguishable
        # here, and decodes to the same bytes on the client either way).
        return "OK" if value == b"OK" else base64.b64encode(value).decode("ascii")
    if isinstance(value, ResponseError):  # an error nested in an array reply
        return _encode(_error_text(value).encode(), b64)
    if isinstance(value, list):
        return [_encode(item, b64) for item in value]
    return value  # int or None


def _parse_command(raw: Any) -> list[str]:
    if not isinstance(raw, list) or not raw:
        raise ValueError("ERR command must be a non-empty JSON array")
    args: list[str] = []
    for item in raw:
        if isinstance(item, str):
            args.append(item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            args.append(str(item))
        else:
            raise ValueError("ERR failed to parse command: arguments must be strings or numbers")
    return args


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a hung handler must never block shutdown
    # socketserver's default listen backlog of 5 drops SYNs when 50 writers connect at
    # once (resent after 1 s); real Upstash accepts far more.
    request_queue_size = 128
    double: UpstashDouble

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out or vanish are expected here


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real service
    # Headers and body go out in two writes; with Nagle on, delayed ACKs add ~40 ms each.
    disable_nagle_algorithm = True
    server: _Server
    _lose_reply = False
    _drip: _Fault | None = None

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        double = self.server.double
        try:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        except (OSError, ValueError):
            self.close_connection = True
            return
        path = urlsplit(self.path).path.rstrip("/") or "/"
        fault = double._admit(path, self.headers.get("Upstash-Sync-Token"), body)
        if double.delay_s and double._stopping.wait(double.delay_s):
            self.close_connection = True
            return
        self._lose_reply = fault is not None and fault.kind == "lose_reply"
        self._drip = fault if fault is not None and fault.kind == "drip" else None
        if fault is not None and fault.kind in ("drop", "status", "hang"):
            if fault.kind == "drop":
                self.close_connection = True  # no response at all: the client sees EOF
                return
            if fault.kind == "status":
                headers = {}
                if fault.retry_after is not None:
                    headers["Retry-After"] = f"{fault.retry_after:g}"
                self._send(fault.status, {"error": f"injected HTTP {fault.status}"}, headers)
                return
            if double._stopping.wait(fault.seconds):  # "hang": ends when the double stops
                self.close_connection = True
                return
        if self.headers.get("Authorization") != f"Bearer {double.token}":
            self._send(401, {"error": "Unauthorized"})
            return
        b64 = self.headers.get("Upstash-Encoding", "").lower() == "base64"
        try:
            payload = json.loads(body)
        except ValueError:
            self._send(400, {"error": "ERR failed to parse request body as JSON"})
            return
        try:
            if path == "/":
                self._single(double, payload, b64)
            elif path == "/pipeline":
                self._pipeline(double, payload, b64)
            else:
                self._send(404, {"error": "Not Found"})
        except ValueError as exc:
            self._send(400, {"error": str(exc)})
        except redis.RedisError as exc:  # Redis itself unreachable
            self._send(500, {"error": f"ERR backend: {exc}"})

    def _single(self, double: UpstashDouble, payload: Any, b64: bool) -> None:
        (reply,) = double._run([_parse_command(payload)])
        if isinstance(reply, ResponseError):
            self._send(400, {"error": _error_text(reply)})
        else:
            self._send(200, {"result": _encode(reply, b64)})

    def _pipeline(self, double: UpstashDouble, payload: Any, b64: bool) -> None:
        if not isinstance(payload, list) or not payload:
            raise ValueError("ERR body must be a non-empty JSON array of commands")
        replies = double._run([_parse_command(c) for c in payload])
        self._send(200, [_slot(reply, b64) for reply in replies])

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        if self._lose_reply:  # the command ran; the answer is lost on the way back
            self.close_connection = True
            return
        data = json.dumps(body).encode()
        if self._drip is not None:
            self._send_dripping(self._drip, status, data, headers or {})
            return
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Upstash-Sync-Token", self.server.double._next_sync_token())
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout) before we answered
            self.close_connection = True

    def _send_dripping(
        self, fault: _Fault, status: int, data: bytes, headers: dict[str, str]
    ) -> None:
        """The real answer, a byte at a time with a pause before each: every read the
        client makes returns quickly, so only a deadline over the whole call stops it."""
        self.close_connection = True
        lines = [
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
            "Content-Type: application/json",
            f"Content-Length: {len(data)}",
            f"Upstash-Sync-Token: {self.server.double._next_sync_token()}",
            "Connection: close",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        slow = head + data if fault.headers else data
        try:
            if not fault.headers:
                self.wfile.write(head)
            for i in range(len(slow)):
                if self.server.double._stopping.wait(fault.seconds):
                    return
                self.wfile.write(slow[i : i + 1])
        except OSError:  # the client gave up: its deadline passed
            return


def _slot(reply: Any, b64: bool) -> dict[str, Any]:
    if isinstance(reply, ResponseError):
        return {"error": _error_text(reply)}
    return {"result": _encode(reply, b64)}


class UpstashDouble:
    """Start/stop as a context manager; then ``url`` and ``token`` are what a client needs."""

    def __init__(self, redis_url: str, token: str = "double-token", *, delay_s: float = 0.0):
        self.token = token
        self.delay_s = delay_s  # injected per-request latency (latency benchmarks)
        self._redis_url = redis_url
        self._lock = threading.Lock()
        self._faults: deque[_Fault] = deque()
        self._lose_matching: list[bytes] = []  # lose the reply of a request holding one
        self._requests = 0
        self._by_path: Counter[str] = Counter()
        self._sync_counter = 0
        self.sync_tokens_received: list[str | None] = []
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._pool: redis.ConnectionPool | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> UpstashDouble:
        # protocol=2: Upstash answers with RESP2 shapes (redis-py 8 defaults to RESP3, whose
        # doubles, maps and sets would not survive as the JSON Upstash sends).
        self._pool = redis.ConnectionPool.from_url(self._redis_url, protocol=2, socket_timeout=10)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.double = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # ends hangs and injected delays
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._pool is not None:
            self._pool.disconnect()

    def __enter__(self) -> UpstashDouble:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the double first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- counting ----------------------------------------------------------------------
    @property
    def requests(self) -> int:
        with self._lock:
            return self._requests

    @property
    def requests_by_path(self) -> dict[str, int]:
        with self._lock:
            return dict(self._by_path)

    def reset_counts(self) -> None:
        with self._lock:
            self._requests = 0
            self._by_path.clear()
            self.sync_tokens_received.clear()

    # -- fault injection (each applies to the next n requests, in the order queued) -----
    def fail_next(self, n: int, status: int = 429, retry_after: float | None = None) -> None:
        self._queue(n, _Fault("status", status=status, retry_after=retry_after))

    def drop_next(self, n: int) -> None:
        self._queue(n, _Fault("drop"))

    def lose_reply_next(self, n: int, *, after: int = 0) -> None:
        """Run the next n requests, then close the connection without answering (the
        write happened but the client cannot know). ``after``: answer that many requests
        first (the second step of a two-request operation)."""
        self._queue(after, _Fault("none"))
        self._queue(n, _Fault("lose_reply"))

    def lose_reply_matching(self, text: str, n: int = 1) -> None:
        """Lose the reply of the next n requests whose body contains ``text`` (run them,
        then close the connection), whatever requests come before: one step of a job."""
        with self._lock:
            self._lose_matching.extend([text.encode()] * n)

    def lose_reply_pending(self) -> int:
        """How many ``lose_reply_matching`` faults have not met their request yet."""
        with self._lock:
            return len(self._lose_matching)

    def hang_next(self, n: int, seconds: float) -> None:
        self._queue(n, _Fault("hang", seconds=seconds))

    def drip_next(self, n: int, seconds_per_byte: float, *, headers: bool = False) -> None:
        """Run the next n requests, then send each answer slowly: the headers at once
        and the body a byte every ``seconds_per_byte`` (with ``headers=True``, the status
        line and headers drip too)."""
        self._queue(n, _Fault("drip", seconds=seconds_per_byte, headers=headers))

    def clear_faults(self) -> None:
        """The outage is over: drop every fault still queued."""
        with self._lock:
            self._faults.clear()
            self._lose_matching.clear()

    def _queue(self, n: int, fault: _Fault) -> None:
        with self._lock:
            self._faults.extend([fault] * n)

    # -- used by the handler -----------------------------------------------------------
    def _admit(self, path: str, sync_token: str | None, body: bytes = b"") -> _Fault | None:
        with self._lock:
            self._requests += 1
            self._by_path[path] += 1
            self.sync_tokens_received.append(sync_token)
            for i, text in enumerate(self._lose_matching):
                if text in body:
                    del self._lose_matching[i]
                    return _Fault("lose_reply")
            return self._faults.popleft() if self._faults else None

    def _next_sync_token(self) -> str:
        with self._lock:
            self._sync_counter += 1
            return f"sync-{self._sync_counter}"

    def _run(self, commands: list[list[str]]) -> list[Any]:
        """Send all commands on one connection, read every reply; errors as values."""
        assert self._pool is not None
        conn: Any = self._pool.get_connection()  # redis-py leaves these methods untyped
        try:
            conn.send_packed_command(conn.pack_commands(commands))
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except ResponseError as exc:
                    replies.append(exc)
            return replies
        except BaseException:
            conn.disconnect()  # the socket may be mid-reply: never reuse it
            raise
        finally:
            self._pool.release(conn)

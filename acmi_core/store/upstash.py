"""UpstashStore: the Upstash REST API, spoken on httpcore's public API (httpx's, for a
transport a test injects).

The protocol is small: ``POST /`` with one command as a JSON array of strings, ``POST
/pipeline`` with an array of them (not atomic), ``Authorization: Bearer <token>``,
``Upstash-Encoding: base64`` (every bulk reply base64, so bytes survive) and the
read-your-writes ``Upstash-Sync-Token`` (each reply's token sent back on the next request).
Every write is one Lua script, so ``/multi-exec`` is never needed. upstash-redis is not
used: its client has no request timeout, retries any exception after a fixed 3 s sleep,
ignores HTTP status codes, raises on a pipeline's first failed command (dropping the
results of commands that did run) and decodes base64 to ``str`` (breaking on non-UTF-8),
and its public API offers no way to replace that client.

One module: the transport below (deadlines on every socket operation, the proxy rules,
the error mapping) exists only for UpstashStore, and the store's retry policy is written
against exactly what it raises; kept together, the two are read and changed as one.

TLS: one ``ssl.SSLContext`` per process (``tls_context``), trusting what httpx would.
Loading certifi's CA bundle is ~30-40 ms of a cold start (OpenSSL 3 parsing ~140
certificates; DER instead of PEM does not change it): it is paid once, not per client,
and in a Lambda artifact not at all (a hashed directory: only the root used is read).

Retries: a request is retried on HTTP 429, 5xx and network errors only. A command that
reached Redis before the connection dropped may therefore run twice; writes above this
layer are idempotent for that reason. An error reply Redis gives while it cannot run a
command for now (BUSY, LOADING, ...) is not retried here: it fails the call as StoreBusy.

The deadline: ``settings.store_timeout_s`` bounds a whole call, retries and backoff
included, not each read. httpx's timeouts apply per socket operation, so a reply that
arrives a byte a second would never trip them. Two guards end a call at its deadline:
every socket operation (connect, TLS, each write, each read of the headers or the body)
is given only what is left of it, by the network backend of our connection pool
(``_DeadlineBackend`` in ``_Network``: httpcore's public pool and backend interfaces, as
httpx's own transport but for that backend), and no read of the body starts after it
(which also covers an injected transport). The connection of an abandoned reply is
closed, never reused.

The network is httpcore's connection pool, called directly: httpx (~30 ms of a cold start,
its client, models and cookie jar) would only translate each request and reply to
httpcore's and back. The requests are the ones httpx's client sends by default (its
limits, its headers, a gzip reply decoded). A test that replaces the network
(``transport=httpx.MockTransport(...)``) gets an httpx client instead, under the same
retry policy and deadline.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import os
import random
import time
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import httpcore

from acmi_core.base.errors import (
    AcmiValidationError,
    StoreAuthError,
    StoreBusy,
    StoreCommandError,
    StoreError,
    StoreUnavailable,
    Throttled,
)
from acmi_core.base.settings import Settings
from acmi_core.store.base import (
    Arg,
    Command,
    Reply,
    Script,
    ScriptDialect,
    check_body,
    check_pipeline,
    check_request,
    error_reply,
    eval_script,
    pipeline_slots,
)

if TYPE_CHECKING:
    import ssl

    import httpx

_SYNC_TOKEN_HEADER = "Upstash-Sync-Token"


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The process's TLS client context, built on first use and shared by every HTTPS
    client that passes it as ``verify=`` (a context is safe to share between threads).

    It trusts what httpx's default trusts: certifi's roots, or SSL_CERT_FILE/SSL_CERT_DIR
    when set. In a Lambda artifact certifi's roots are also there one file each, named by
    subject hash (``certifi/hashed``, written by the Makefile): on that directory OpenSSL
    reads only the root a handshake needs (context + first handshake ~8 ms instead of
    ~37 ms). Without it (a source checkout), the bundle is loaded as httpx loads it."""
    if not (os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR")):
        import ssl

        import certifi

        hashed = os.path.join(os.path.dirname(certifi.where()), "hashed")
        if os.path.isdir(hashed):
            return ssl.create_default_context(capath=hashed)
    import httpx  # a source checkout's path only

    return httpx.create_ssl_context()


def _encode_arg(arg: Arg, position: int) -> str:
    # Everything goes as a JSON string: Redis stores strings anyway, and a JSON number
    # may be parsed as a double on the way (big ints, float precision).
    if isinstance(arg, str):
        return arg
    if isinstance(arg, bytes):
        try:
            return arg.decode("utf-8")
        except UnicodeDecodeError:
            raise StoreCommandError(
                f"argument {position} is not UTF-8; the Upstash REST API only carries text"
            ) from None
    if isinstance(arg, bool):  # bool is an int: send 1/0, never JSON true/false
        return str(int(arg))
    if isinstance(arg, int):
        return str(arg)
    if isinstance(arg, float):
        return repr(arg)  # shortest exact round-trip form
    raise StoreCommandError(f"argument {position} has unsupported type {type(arg).__name__}")


def _encode_command(command: Sequence[Arg]) -> list[str]:
    if not command:
        raise StoreCommandError("empty command")
    return [_encode_arg(arg, i) for i, arg in enumerate(command)]


def _decode(raw: object) -> Reply:
    """Base64 (``Upstash-Encoding: base64``) result to bytes; never to str."""
    if raw is None:
        return None
    if isinstance(raw, bool):  # check before int: JSON true is not a Redis reply
        raise StoreError("unexpected boolean in Upstash reply")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        # Upstash sends the status reply OK unencoded; "OK" is never valid base64.
        if raw == "OK":
            return b"OK"
        try:
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise StoreError("Upstash reply is not valid base64") from None
    if isinstance(raw, list):
        return [_decode(item) for item in raw]
    raise StoreError(f"unexpected {type(raw).__name__} in Upstash reply")


def _slot(item: object) -> Reply | StoreCommandError | StoreBusy:
    """One entry of a /pipeline answer: ``{"result": ..}`` or ``{"error": ..}``."""
    if not isinstance(item, dict):
        raise StoreError("malformed Upstash pipeline reply")
    error = item.get("error")
    if error is not None:
        return error_reply(str(error))
    if "result" not in item:
        raise StoreError("malformed Upstash pipeline reply")
    return _decode(item["result"])


# -- the deadline ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Deadline:
    at: float
    clock: Callable[[], float]

    def left(self) -> float:
        return self.at - self.clock()


# The deadline of the store call running in this thread (or context), read by every
# socket operation of our transport; None outside a call.
_DEADLINE: ContextVar[_Deadline | None] = ContextVar("acmi_store_deadline", default=None)


def _bounded(timeout: float | None, expired: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` cut to what is left of the call's deadline; raises once none is."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline.left()
    if left <= 0:
        raise expired("the store call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write ends by the call's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend, with connections bounded by the call's deadline."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(
            self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        timeout = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


# -- the network -------------------------------------------------------------------------

# What a network failure raises, as httpx's transport errors are httpcore's (httpx maps
# each to its class of the same name): retried, named by that name.
_NETWORK_ERRORS: tuple[type[Exception], ...] = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)
# The headers httpx's client adds by default, but the Accept-Encoding httpx would send
# for packages a Lambda artifact lacks (brotli, zstd): gzip is decoded below.
_DEFAULT_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"Accept", b"*/*"),
    (b"Accept-Encoding", b"gzip"),
    (b"Connection", b"keep-alive"),
    (b"User-Agent", b"acmi"),
)


def _environment_proxy(url: str) -> str | None:
    """The HTTP(S) proxy the environment names for ``url`` (HTTPS_PROXY, HTTP_PROXY,
    ALL_PROXY; NO_PROXY: ``*`` or hosts and their subdomains), as an httpx client
    would use by default; None to connect directly."""
    proxies = urllib.request.getproxies()
    host = (urlsplit(url).hostname or "").lower()
    for raw in proxies.get("no", "").lower().split(","):
        entry = raw.strip().lstrip(".")
        if entry == "*" or (entry and (host == entry or host.endswith("." + entry))):
            return None
    proxy = proxies.get(urlsplit(url).scheme) or proxies.get("all")
    if proxy and not proxy.startswith(("http://", "https://")):
        raise AcmiValidationError(
            "HTTPS_PROXY", "scheme", "the Upstash store needs an HTTP(S) proxy"
        )
    return proxy or None


class _Reply:
    """One reply: its status, its headers by lower-case name, and its body read by the
    call's deadline."""

    __slots__ = ("_chunks", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], chunks: Iterator[bytes]) -> None:
        self.status, self.headers, self._chunks = status, headers, chunks

    def read_by(self, deadline: _Deadline) -> bytes:
        """The reply body, no read of it started after the deadline."""
        body = bytearray()
        while deadline.left() > 0:
            chunk = next(self._chunks, None)
            if chunk is None:
                return bytes(body)
            body += chunk
        raise httpcore.ReadTimeout("the store call's deadline passed with its reply unread")


class _Network:
    """The pool ``httpx.HTTPTransport`` builds by default (its limits, no retries of its
    own), but whose every socket operation ends by the call's deadline: httpx has no
    option for that, httpcore's pool takes a network backend (``_DeadlineBackend``
    around httpcore's own). Certificates are checked against ``tls_context()``."""

    def __init__(self, url: str) -> None:
        backend = _DeadlineBackend(httpcore.SyncBackend())
        proxy = _environment_proxy(url)
        # httpx's default limits (those of httpx.HTTPTransport()); no retries of its own.
        self._pool = (
            httpcore.ConnectionPool(
                ssl_context=tls_context(),
                max_connections=100,
                max_keepalive_connections=20,
                keepalive_expiry=5.0,
                network_backend=backend,
            )
            if proxy is None
            else httpcore.HTTPProxy(
                proxy,
                ssl_context=tls_context(),
                max_connections=100,
                max_keepalive_connections=20,
                keepalive_expiry=5.0,
                network_backend=backend,
            )
        )

    @contextmanager
    def post(
        self, url: str, headers: dict[str, str], content: bytes, timeout: float
    ) -> Iterator[_Reply]:
        """POST ``content``; the reply while the block runs, its connection released (or,
        after a partial read, dropped) at its end. Raises httpcore's errors."""
        target = httpcore.URL(url)
        raw = [(b"Host", _host_header(target)), *_DEFAULT_HEADERS]
        raw += [
            (name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
        ]
        raw.append((b"Content-Length", b"%d" % len(content)))
        each = {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
        request = httpcore.Request(
            b"POST", target, headers=raw, content=content, extensions={"timeout": each}
        )
        response = self._pool.handle_request(request)
        try:
            names = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers}
            stream = response.stream
            if not isinstance(stream, Iterable):  # a sync pool's reply always is
                raise StoreError("unexpected async reply stream")
            chunks = iter(stream)
            if names.get("content-encoding", "").strip().lower() == "gzip":
                chunks = _gunzipped(chunks)
            yield _Reply(response.status, names, chunks)
        finally:
            response.close()

    def close(self) -> None:
        self._pool.close()


_DEFAULT_PORTS: Final = {b"http": 80, b"https": 443}


def _host_header(url: httpcore.URL) -> bytes:
    """The Host header of ``url``, as httpx writes it (no default port, IPv6 bracketed)."""
    host = b"[" + url.host + b"]" if b":" in url.host else url.host
    if url.port is None or _DEFAULT_PORTS.get(url.scheme) == url.port:
        return host
    return b"%b:%d" % (host, url.port)


def _gunzipped(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """A gzip body, decoded as it is read (as httpx decodes one)."""
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
    try:
        for chunk in chunks:
            yield decoder.decompress(chunk)
        yield decoder.flush()
    except zlib.error as exc:
        raise StoreError(f"Upstash sent an undecodable gzip reply ({exc})") from None


def _httpx_transport_error(exc: Exception) -> bool:
    import httpx

    return isinstance(exc, httpx.TransportError)


def _httpx_reply(response: httpx.Response) -> _Reply:
    """An injected transport's reply, read as ours."""
    return _Reply(
        response.status_code,
        {name.lower(): value for name, value in response.headers.items()},
        response.iter_bytes(),
    )


def _json_body(body: object) -> bytes:
    try:
        return json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a str with a lone surrogate
        raise StoreCommandError("command is not valid Unicode text") from None


def _error_text(body: bytes) -> str | None:
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    if isinstance(payload, dict) and isinstance(payload.get("error"), str):
        return str(payload["error"])
    return None


def _retry_after(reply: _Reply) -> float | None:
    # Numeric seconds only; an HTTP-date is ignored (our own backoff applies).
    raw = reply.headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


# -- the store ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Failure:
    """An attempt worth retrying: HTTP 429, a 5xx or a network error."""

    text: str
    throttled: bool = False
    retry_after: float | None = None  # the server's Retry-After, in seconds


class UpstashStore:
    """:class:`~acmi_core.store.base.Store` over the Upstash REST API.

    One request per ``execute``/``pipeline`` call (retries aside); every call, retries
    and backoff included, ends within ``settings.store_timeout_s``. ``sleep``, ``rng``
    and ``clock`` (monotonic seconds) drive the retry policy, and ``transport`` replaces
    the network (e.g. ``httpx.MockTransport``): tests inject them.
    """

    name = "upstash"

    def __init__(
        self,
        url: str,
        token: str,
        *,
        settings: Settings | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not url.startswith(("https://", "http://")):
            raise AcmiValidationError(
                "UPSTASH_REDIS_REST_URL", "url", "must start with https:// (or http://)"
            )
        if not token:
            raise AcmiValidationError("UPSTASH_REDIS_REST_TOKEN", "required", "must not be empty")
        self._url = url.rstrip("/")
        self._token = token
        self._settings = settings or Settings()
        self._sleep = sleep
        self._rng = rng
        self._clock = clock
        # Bulk replies base64 (bytes survive), no telemetry headers.
        self._auth = {"Authorization": f"Bearer {token}", "Upstash-Encoding": "base64"}
        self._sync_token = ""  # read-your-writes: the last token a reply carried
        # Upstash's engine takes allow-key-locking (a script locks its KEYS, not the
        # database): tried, and dropped for good if this server refuses it (a server
        # behind the same REST API that is OSS Redis does)
        self.script_dialect = ScriptDialect(key_locking=None)
        self._network: _Network | None = None
        self._client: httpx.Client | None = None
        if transport is None:
            self._network = _Network(self._url)
        else:
            import httpx

            self._client = httpx.Client(
                transport=transport, timeout=httpx.Timeout(self._settings.store_timeout_s)
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> UpstashStore:
        if not settings.upstash_url or not settings.upstash_token:
            raise AcmiValidationError(
                "UPSTASH_REDIS_REST_URL",
                "required",
                "UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN must both be set",
            )
        return cls(settings.upstash_url, settings.upstash_token, settings=settings)

    def execute(self, command: Command) -> Reply:
        check_request(command)
        body = _json_body(_encode_command(command))
        check_body(len(body))
        payload = self._post(self._url, body)
        if not isinstance(payload, dict):
            raise StoreError("malformed Upstash reply")
        if payload.get("error") is not None:
            raise error_reply(self._scrub(str(payload["error"])))
        return _decode(payload.get("result"))

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        """One POST /pipeline (not atomic). A failed slot holds its StoreCommandError."""
        if not commands:
            return []
        check_pipeline(commands)
        body = _json_body([_encode_command(c) for c in commands])
        check_body(len(body))
        payload = self._post(f"{self._url}/pipeline", body)
        if isinstance(payload, dict) and payload.get("error") is not None:
            raise error_reply(self._scrub(str(payload["error"])))
        if not isinstance(payload, list) or len(payload) != len(commands):
            raise StoreError("malformed Upstash pipeline reply")
        return pipeline_slots([_slot(item) for item in payload])

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        return eval_script(self.execute, script, keys, args, dialect=self.script_dialect)

    # -- one call: attempts, backoff, the deadline ---------------------------------------

    def _post(self, url: str, content: bytes) -> object:
        """POST with bounded, jittered retries on 429/5xx/network errors; return the JSON."""
        deadline = _Deadline(self._clock() + self._settings.store_timeout_s, self._clock)
        reset = _DEADLINE.set(deadline)
        try:
            headers = {
                **self._auth,
                _SYNC_TOKEN_HEADER: self._sync_token,
                "Content-Type": "application/json",
            }
            failure = _Failure("no attempt made")
            attempts = 0
            while attempts < self._settings.store_max_attempts:
                remaining = deadline.left()
                if remaining <= 0:
                    break
                attempts += 1
                outcome = self._attempt(url, headers, content, deadline, timeout=remaining)
                if not isinstance(outcome, _Failure):
                    return self._interpret(*outcome)
                failure = outcome
                delay = self._delay_before_retry(attempts, failure, deadline.at)
                if delay is None:
                    break
                self._sleep(delay)
            raise self._gave_up(failure, attempts)
        finally:
            _DEADLINE.reset(reset)

    def _attempt(
        self,
        url: str,
        headers: dict[str, str],
        content: bytes,
        deadline: _Deadline,
        *,
        timeout: float,
    ) -> tuple[int, bytes] | _Failure:
        """One POST: the status and body to act on, or the failure to retry."""
        try:
            with self._post_once(url, headers, content, timeout) as reply:
                sync_token = reply.headers.get(_SYNC_TOKEN_HEADER.lower())
                if sync_token:
                    self._sync_token = sync_token
                body = reply.read_by(deadline)
        except _NETWORK_ERRORS as exc:
            return _Failure(f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            if self._client is not None and _httpx_transport_error(exc):  # an injected one's
                return _Failure(f"{type(exc).__name__}: {exc}")
            raise
        response = reply
        status = response.status
        if status != 429 and status < 500:
            return status, body
        text = _error_text(body)
        return _Failure(
            f"HTTP {status}" + (f": {text}" if text else ""),
            throttled=status == 429,
            retry_after=_retry_after(response),
        )

    @contextmanager
    def _post_once(
        self, url: str, headers: dict[str, str], content: bytes, timeout: float
    ) -> Iterator[_Reply]:
        """One POST on the network, or on the injected transport."""
        if self._network is not None:
            with self._network.post(url, headers, content, timeout) as reply:
                yield reply
            return
        assert self._client is not None
        import httpx

        request = self._client.build_request(
            "POST", url, headers=headers, content=content, timeout=httpx.Timeout(timeout)
        )
        response = self._client.send(request, stream=True)
        try:
            yield _httpx_reply(response)
        finally:
            response.close()  # after a partial read: drops the connection

    def _delay_before_retry(
        self, attempts: int, failure: _Failure, deadline: float
    ) -> float | None:
        """Seconds to wait before the next attempt; None to stop trying."""
        settings = self._settings
        if attempts >= settings.store_max_attempts:
            return None
        if failure.retry_after is not None:
            delay = failure.retry_after  # the server's word, even past retry_max_delay_s
        else:  # full jitter: spreads a burst of clients over the whole window
            cap = min(settings.retry_max_delay_s, settings.retry_base_delay_s * 2 ** (attempts - 1))
            delay = self._rng() * cap
        if self._clock() + delay >= deadline:
            return None  # the wait would overrun the deadline: fail now, not later
        return delay

    def _gave_up(self, failure: _Failure, attempts: int) -> StoreUnavailable:
        """The error for a call whose attempts or deadline ran out: transient (503)."""
        kind = "throttled" if failure.throttled else "unavailable"
        message = self._scrub(
            f"Upstash {kind} after {attempts} attempt(s) within "
            f"{self._settings.store_timeout_s:g}s: {failure.text}"
        )
        # The API answers 503 with this as Retry-After; 1 s when the server named none.
        retry_after = 1.0 if failure.retry_after is None else failure.retry_after
        error = Throttled if failure.throttled else StoreUnavailable
        return error(message, retry_after=retry_after)

    def _interpret(self, status: int, body: bytes) -> object:
        if status in (401, 403):
            # Never echo the body or headers: nothing here may carry the token.
            raise StoreAuthError(f"Upstash rejected the credentials (HTTP {status})")
        if 200 <= status < 300:
            try:
                return json.loads(body)
            except ValueError:
                raise StoreError(f"Upstash answered HTTP {status} with invalid JSON") from None
        text = _error_text(body)
        if 400 <= status < 500:
            raise error_reply(self._scrub(text if text else f"Upstash HTTP {status}"))
        raise StoreError(f"unexpected Upstash HTTP {status}")

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def close(self) -> None:
        if self._network is not None:
            self._network.close()
        if self._client is not None:
            self._client.close()

    def __enter__(self) -> UpstashStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

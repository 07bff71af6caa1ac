"""UpstashStore: the Upstash REST API through upstash-redis 1.8.0, with our own transport.

One module: the transport below exists only for UpstashStore, and both lean on the same
pinned private attributes of upstash-redis 1.8.0 (named below); kept together, that
dependency has one place to check when the pin moves.

We keep what upstash-redis does right (URL, bearer/encoding headers, the read-your-writes
sync token) and replace its ``SyncHttpClient`` (never built: ``_Redis``), because in
1.8.0 it has no request timeout, retries on any exception with a fixed 3 s sleep, ignores
HTTP status codes, raises on a pipeline's first failed command (dropping results of
commands that did run) and decodes base64 to ``str`` (breaking on non-UTF-8). The version
is pinned because we rely on these private attributes of ``upstash_redis.Redis``:
``_url``, ``_headers``, ``_http`` (ours), ``_maybe_set_sync_token_header`` and
``_update_sync_token`` (via ``_http._sync_token_cb``), and on what its ``__init__`` sets
(``_Redis``, held to it by a test). Only ``/`` and ``/pipeline`` are used: every write is
one Lua script, so there is no ``/multi-exec``.

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
every socket operation of our own transport (connect, TLS, each write, each read of the
headers or the body) is given only what is left of it (``_DeadlineBackend``, installed
into httpx's connection pool), and the body is streamed with no read started after it
(``_Paced``, which also covers an injected transport). The connection of an abandoned
reply is closed, never reused.
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

import httpcore
import httpx
import upstash_redis
from upstash_redis.commands import JsonCommands, SearchCommands
from upstash_redis.http import SyncHttpClient, make_headers

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
    error_reply,
    eval_script,
    pipeline_slots,
)

if TYPE_CHECKING:
    import ssl

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
    return httpx.create_ssl_context()


class _Redis(upstash_redis.Redis):
    """``upstash_redis.Redis`` (1.8.0) without an HTTP client of its own: its ``__init__``
    minus ``SyncHttpClient(...)``, whose ``httpx.Client`` would load the CA bundle for a
    context never used. The store installs its transport as ``_http``. Base64 replies,
    our retries, no telemetry headers, read-your-writes on (tests hold these attributes
    to those the real ``__init__`` sets)."""

    def __init__(self, url: str, token: str) -> None:  # super().__init__ builds the client
        self._url = url
        self._read_your_writes = True
        self._sync_token = ""
        self._allow_telemetry = False
        self._headers = make_headers(token, "base64", False)
        self._json = JsonCommands(self)
        self._search = SearchCommands(self)


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


def _retry_after(response: httpx.Response) -> float | None:
    # Numeric seconds only; an HTTP-date is ignored (our own backoff applies).
    raw = response.headers.get("Retry-After")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _error_text(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])
    return None


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


def _install_deadline(client: httpx.Client) -> None:
    """Bound every socket operation of ``client``'s own transports by the call's deadline.

    httpx has no public hook for it: this wraps the network backend of each transport's
    httpcore pool (``Client._transport``/``_mounts``, ``HTTPTransport._pool``,
    ``ConnectionPool._network_backend``, stable across httpx 0.2x and httpcore 1.x; a unit
    test fails if they move). An injected transport without a pool (``MockTransport``)
    is left alone: ``_Paced`` bounds its body.
    """
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        if isinstance(pool, httpcore.ConnectionPool) and not isinstance(
            pool._network_backend, _DeadlineBackend
        ):
            pool._network_backend = _DeadlineBackend(pool._network_backend)


class _Paced(httpx.SyncByteStream):
    """A reply body read against the deadline: no read starts once it has passed."""

    def __init__(self, inner: httpx.SyncByteStream, deadline: _Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._inner)
        while True:
            if self._deadline.left() <= 0:
                raise httpx.ReadTimeout("the store call's deadline passed with its reply unread")
            chunk = next(chunks, None)
            if chunk is None:
                return
            yield chunk

    def close(self) -> None:
        self._inner.close()


# -- the transport -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Failure:
    """An attempt worth retrying: HTTP 429, a 5xx or a network error."""

    text: str
    throttled: bool = False
    retry_after: float | None = None  # the server's Retry-After, in seconds


class _Transport(SyncHttpClient):
    """Installed as ``upstash_redis.Redis._http``: bounded, status-aware, bytes-preserving.

    ``execute(url, headers, command)`` returns a decoded :data:`Reply`;
    with ``from_pipeline=True`` a list of ``Reply | StoreCommandError`` (never raising on
    one failed command). Every call, retries and backoff included, ends within
    ``settings.store_timeout_s``.
    """

    def __init__(
        self,
        *,
        sync_token_cb: Callable[[str], None],
        token: str,
        settings: Settings,
        sleep: Callable[[float], None],
        rng: Callable[[], float],
        clock: Callable[[], float],
        transport: httpx.BaseTransport | None,
    ) -> None:
        # The parent's state, without its __init__ (which builds an httpx.Client with a
        # TLS context of its own): base64 replies, no retries of its own, our client on
        # the process's TLS context (an injected transport replaces the network).
        self._encoding = "base64"
        self._retries = 0
        self._retry_interval = 0.0
        self._sync_token_cb = sync_token_cb
        self._client = httpx.Client(
            transport=transport,
            verify=tls_context(),
            timeout=httpx.Timeout(settings.store_timeout_s),
        )
        _install_deadline(self._client)
        self._token = token
        self._settings = settings
        self._sleep = sleep
        self._rng = rng
        self._clock = clock

    def execute(  # type: ignore[override]  # returns bytes-based replies, not RESTResultT
        self,
        url: str,
        headers: dict[str, str],
        command: list[Any],
        from_pipeline: bool = False,
    ) -> Reply | list[Reply | StoreCommandError]:
        if from_pipeline:
            body: object = [_encode_command(c) for c in command]
        else:
            body = _encode_command(command)
        try:
            content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a str with a lone surrogate
            raise StoreCommandError("command is not valid Unicode text") from None
        payload = self._post(url, headers, content)
        if from_pipeline:
            if isinstance(payload, dict) and payload.get("error") is not None:
                raise error_reply(self._scrub(str(payload["error"])))
            if not isinstance(payload, list) or len(payload) != len(command):
                raise StoreError("malformed Upstash pipeline reply")
            return pipeline_slots([_slot(item) for item in payload])
        if not isinstance(payload, dict):
            raise StoreError("malformed Upstash reply")
        if payload.get("error") is not None:
            raise error_reply(self._scrub(str(payload["error"])))
        return _decode(payload.get("result"))

    def _post(self, url: str, headers: dict[str, str], content: bytes) -> object:
        """POST with bounded, jittered retries on 429/5xx/network errors; return the JSON."""
        deadline = _Deadline(self._clock() + self._settings.store_timeout_s, self._clock)
        reset = _DEADLINE.set(deadline)
        try:
            headers = {**headers, "Content-Type": "application/json"}
            failure = _Failure("no attempt made")
            attempts = 0
            while attempts < self._settings.store_max_attempts:
                remaining = deadline.left()
                if remaining <= 0:
                    break
                attempts += 1
                outcome = self._attempt(url, headers, content, deadline, timeout=remaining)
                if isinstance(outcome, httpx.Response):
                    return self._interpret(outcome)
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
    ) -> httpx.Response | _Failure:
        """One POST: the response (its body read) to act on, or the failure to retry."""
        request = self._client.build_request(
            "POST", url, headers=headers, content=content, timeout=httpx.Timeout(timeout)
        )
        try:
            response = self._client.send(request, stream=True)
            try:
                sync_token = response.headers.get(_SYNC_TOKEN_HEADER)
                if sync_token and self._sync_token_cb is not None:
                    self._sync_token_cb(sync_token)
                if isinstance(response.stream, httpx.SyncByteStream):
                    response.stream = _Paced(response.stream, deadline)
                response.read()
            finally:
                response.close()  # after a partial read: drops the connection
        except httpx.TransportError as exc:
            return _Failure(f"{type(exc).__name__}: {exc}")
        status = response.status_code
        if status != 429 and status < 500:
            return response
        text = _error_text(response)
        return _Failure(
            f"HTTP {status}" + (f": {text}" if text else ""),
            throttled=status == 429,
            retry_after=_retry_after(response),
        )

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

    def _interpret(self, response: httpx.Response) -> object:
        status = response.status_code
        if status in (401, 403):
            # Never echo the body or headers: nothing here may carry the token.
            raise StoreAuthError(f"Upstash rejected the credentials (HTTP {status})")
        if 200 <= status < 300:
            try:
                return response.json()
            except ValueError:
                raise StoreError(f"Upstash answered HTTP {status} with invalid JSON") from None
        text = _error_text(response)
        if 400 <= status < 500:
            raise error_reply(self._scrub(text if text else f"Upstash HTTP {status}"))
        raise StoreError(f"unexpected Upstash HTTP {status}")

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def close(self) -> None:
        self._client.close()


class UpstashStore:
    """:class:`~acmi_core.store.base.Store` over the Upstash REST API.

    ``sleep``, ``rng`` and ``clock`` (monotonic seconds) drive the retry policy, and
    ``transport`` replaces the network (e.g. ``httpx.MockTransport``): tests inject them.
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
        settings = settings or Settings()
        # The retry policy is ours; the base64 encoding is decoded by us.
        self._redis = _Redis(url.rstrip("/"), token)
        self._transport = _Transport(
            sync_token_cb=self._redis._update_sync_token,
            token=token,
            settings=settings,
            sleep=sleep,
            rng=rng,
            clock=clock,
            transport=transport,
        )
        self._redis._http = self._transport
        self._url: str = self._redis._url

    @classmethod
    def from_settings(cls, settings: Settings) -> UpstashStore:
        if not settings.upstash_url or not settings.upstash_token:
            raise AcmiValidationError(
                "UPSTASH_REDIS_REST_URL",
                "required",
                "UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN must both be set",
            )
        return cls(settings.upstash_url, settings.upstash_token, settings=settings)

    def _headers(self) -> dict[str, str]:
        # upstash-redis keeps the sync token in its shared header dict; copy after
        # updating so a concurrent call cannot change our headers mid-request.
        headers: dict[str, str] = self._redis._headers
        self._redis._maybe_set_sync_token_header(headers)
        return dict(headers)

    def execute(self, command: Command) -> Reply:
        # Single mode returns one Reply (the list arm of the union is pipeline mode's).
        return cast(Reply, self._transport.execute(self._url, self._headers(), list(command)))

    def pipeline(self, commands: Sequence[Command]) -> list[Reply | StoreCommandError]:
        """One POST /pipeline (not atomic). A failed slot holds its StoreCommandError."""
        if not commands:
            return []
        result = self._transport.execute(
            f"{self._url}/pipeline",
            self._headers(),
            [list(c) for c in commands],
            from_pipeline=True,
        )
        if not isinstance(result, list):  # cannot happen: pipeline mode returns a list
            raise StoreError("malformed Upstash pipeline reply")
        return cast("list[Reply | StoreCommandError]", result)

    def eval(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        return eval_script(self.execute, script, keys, args)

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> UpstashStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

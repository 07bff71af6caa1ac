"""UpstashStore's transport policy, driven by httpx.MockTransport: which answers are
retried, backoff and Retry-After, the attempt and deadline bounds, how failures map onto
ACMI's errors, reply decoding and the sync token. No sockets, no Redis, no real waiting:
an injected sleep records each wait and advances a fake clock.

What only a real server shows (reply shapes from Redis, bytes Redis stored, a dropped
socket, a hang) is in tests/integration/test_upstash_store.py."""

from __future__ import annotations

import base64
import json
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import pytest

from acmi_core.base.errors import (
    StoreAuthError,
    StoreBusy,
    StoreCommandError,
    StoreError,
    StoreUnavailable,
    Throttled,
    Unavailable,
)
from acmi_core.base.settings import Settings
from acmi_core.store.base import Store
from acmi_core.store.upstash import UpstashStore

URL = "https://unit-test.upstash.io"
TOKEN = "unit-secret-token-7f3a9c"
SETTINGS = Settings(
    store_timeout_s=10.0, store_max_attempts=4, retry_base_delay_s=0.1, retry_max_delay_s=0.5
)
HTTP_DATE = "Wed, 21 Oct 2015 07:28:00 GMT"


class Clock:
    """A fake monotonic clock: only sleeps and the server's latency move it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sleeps:
    """Injected sleep: records each wait and advances the clock by it."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.clock.now += seconds


Answer = httpx.Response | Exception


class Server:
    """The MockTransport handler: answers from a script (the last answer repeats) and
    keeps every request. Each request costs ``latency_s`` on the clock."""

    def __init__(self, answers: list[Answer], clock: Clock, latency_s: float) -> None:
        self.answers = answers
        self.clock = clock
        self.latency_s = latency_s
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.clock.now += self.latency_s
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def timeouts(self) -> list[float]:
        """The read timeout each attempt was given."""
        return [request.extensions["timeout"]["read"] for request in self.requests]


@dataclass
class Rig:
    store: UpstashStore
    server: Server
    sleeps: Sleeps


class MakeRig(Protocol):
    def __call__(
        self,
        *answers: Answer,
        settings: Settings = ...,
        rng: Callable[[], float] = ...,
        latency_s: float = ...,
    ) -> Rig: ...


@pytest.fixture
def rig() -> Iterator[MakeRig]:
    stores: list[UpstashStore] = []

    def make(
        *answers: Answer,
        settings: Settings = SETTINGS,
        rng: Callable[[], float] = lambda: 0.5,
        latency_s: float = 0.0,
    ) -> Rig:
        clock = Clock()
        sleeps = Sleeps(clock)
        server = Server(list(answers), clock, latency_s)
        store = UpstashStore(
            URL,
            TOKEN,
            settings=settings,
            sleep=sleeps,
            rng=rng,
            clock=clock,
            transport=httpx.MockTransport(server),
        )
        stores.append(store)
        return Rig(store, server, sleeps)

    yield make
    for store in stores:
        store.close()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def ok(result: Any = "OK", headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(200, json={"result": result}, headers=headers)


def http(status: int, error: str | None = None, **headers: str) -> httpx.Response:
    body = {"error": error if error is not None else f"HTTP {status}"}
    return httpx.Response(status, json=body, headers=headers)


def retry_after(value: str) -> dict[str, str]:
    return {"Retry-After": value}


# -- wiring ---------------------------------------------------------------------------------


def test_every_request_goes_through_the_injected_transport(rig: MakeRig) -> None:
    r = rig(ok(), httpx.Response(200, json=[{"result": 1}]))
    assert isinstance(r.store, Store)
    assert r.store.name == "upstash"
    assert r.store.execute(("SET", "k", b"v", 3, 0.1, True)) == b"OK"
    assert r.store.pipeline([("INCR", "n")]) == [1]
    single, batch = r.server.requests
    assert (single.method, str(single.url)) == ("POST", URL)
    assert str(batch.url) == f"{URL}/pipeline"
    for request in (single, batch):
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        assert request.headers["Upstash-Encoding"] == "base64"
        assert request.headers["Content-Type"] == "application/json"
        assert not [name for name in request.headers if name.startswith("upstash-telemetry")]
    # Every argument goes as a JSON string: numbers exact, bools as 1/0.
    assert json.loads(single.content) == ["SET", "k", "v", "3", "0.1", "1"]
    assert json.loads(batch.content) == [["INCR", "n"]]
    assert r.server.timeouts() == [SETTINGS.store_timeout_s] * 2


def test_empty_pipeline_sends_nothing(rig: MakeRig) -> None:
    r = rig(ok())
    assert r.store.pipeline([]) == []
    assert r.server.requests == []


@pytest.mark.parametrize(("arg", "rule"), [(b"\xff", "not UTF-8"), ("\ud800", "not valid Unicode")])
def test_text_the_rest_api_cannot_carry_is_refused_before_sending(
    rig: MakeRig, arg: str | bytes, rule: str
) -> None:
    r = rig(ok())
    with pytest.raises(StoreCommandError, match=rule):
        r.store.execute(("SET", "k", arg))
    assert r.server.requests == []


# -- what is retried, what is not ----------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_429_and_5xx_are_retried(rig: MakeRig, status: int) -> None:
    r = rig(http(status), ok())
    assert r.store.execute(("SET", "k", "v")) == b"OK"
    assert len(r.server.requests) == 2
    assert r.sleeps.delays == [0.5 * 0.1]  # rng 0.5 of the first cap


@pytest.mark.parametrize(
    "error",
    [
        httpx.ConnectError("connection refused"),
        httpx.ConnectTimeout("connect timed out"),
        httpx.ReadError("connection reset"),
        httpx.ReadTimeout("read timed out"),
        httpx.WriteError("broken pipe"),
        httpx.RemoteProtocolError("server disconnected"),
        httpx.PoolTimeout("no connection free"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_network_errors_are_retried(rig: MakeRig, error: httpx.TransportError) -> None:
    r = rig(error, ok())
    assert r.store.execute(("SET", "k", "v")) == b"OK"
    assert len(r.server.requests) == 2
    assert len(r.sleeps.delays) == 1


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        (http(400, "ERR syntax error"), StoreCommandError, "^ERR syntax error$"),
        (http(401, "Unauthorized"), StoreAuthError, r"rejected the credentials \(HTTP 401\)"),
        (http(403, "Forbidden"), StoreAuthError, r"rejected the credentials \(HTTP 403\)"),
        (httpx.Response(404), StoreCommandError, "^Upstash HTTP 404$"),
        # a Redis error reply, in either shape Upstash uses
        (http(400, "WRONGTYPE Operation against a key"), StoreCommandError, "^WRONGTYPE"),
        (http(200, "WRONGTYPE Operation against a key"), StoreCommandError, "^WRONGTYPE"),
    ],
    ids=["400", "401", "403", "404", "400-redis-error", "200-redis-error"],
)
def test_other_answers_are_final_at_once(
    rig: MakeRig, answer: httpx.Response, error: type[StoreError], message: str
) -> None:
    r = rig(answer, ok())
    with pytest.raises(error, match=message) as info:
        r.store.execute(("GET", "k"))
    assert not isinstance(info.value, Unavailable)  # never a 503: retrying cannot help
    assert len(r.server.requests) == 1
    assert r.sleeps.delays == []


def test_a_failed_pipeline_command_is_not_retried_and_keeps_the_others(rig: MakeRig) -> None:
    r = rig(
        httpx.Response(
            200,
            json=[
                {"result": b64(b"1")},
                {"error": "WRONGTYPE Operation against a key"},
                {"result": 3},
                {"result": None},
            ],
        )
    )
    results = r.store.pipeline([("GET", "a"), ("LPUSH", "a", "x"), ("INCR", "n"), ("GET", "z")])
    assert results[0] == b"1"
    assert isinstance(results[1], StoreCommandError)
    assert str(results[1]).startswith("WRONGTYPE")
    assert results[2:] == [3, None]
    assert len(r.server.requests) == 1


def test_a_pipeline_refused_as_a_whole_is_a_command_error(rig: MakeRig) -> None:
    r = rig(http(400, "ERR body must be a non-empty JSON array of commands"))
    with pytest.raises(StoreCommandError, match=r"^ERR body"):
        r.store.pipeline([("GET", "a")])
    assert len(r.server.requests) == 1


# -- backoff ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2.5", 2.5), ("0", 0.0), ("1", 1.0)],
)
def test_numeric_retry_after_is_honoured(rig: MakeRig, value: str, expected: float) -> None:
    # The server's word beats our backoff, even beyond retry_max_delay_s (0.5 here).
    r = rig(http(429, **retry_after(value)), ok())
    assert r.store.execute(("PING",)) == b"OK"
    assert r.sleeps.delays == [expected]


@pytest.mark.parametrize("value", [HTTP_DATE, "soon", "-1", "inf", "nan", ""])
def test_other_retry_after_values_are_ignored(rig: MakeRig, value: str) -> None:
    r = rig(http(503, **retry_after(value)), ok())
    assert r.store.execute(("PING",)) == b"OK"
    assert r.sleeps.delays == [0.5 * 0.1]  # our own backoff applies


def test_retry_after_beyond_the_deadline_fails_at_once(rig: MakeRig) -> None:
    r = rig(http(429, **retry_after("30")), ok())
    with pytest.raises(Throttled) as info:
        r.store.execute(("PING",))
    assert len(r.server.requests) == 1
    assert r.sleeps.delays == []
    assert info.value.retry_after == 30  # passed on to the caller (503 Retry-After)


@pytest.mark.parametrize(
    "draws",
    [[0.0] * 5, [0.999999] * 5, [0.25, 0.5, 0.75, 1.0, 0.1]],
    ids=["low", "high", "mixed"],
)
def test_backoff_is_full_jitter_of_a_capped_exponential(rig: MakeRig, draws: list[float]) -> None:
    settings = Settings(
        store_timeout_s=60.0, store_max_attempts=6, retry_base_delay_s=0.1, retry_max_delay_s=0.5
    )
    rng = iter(draws)
    r = rig(http(503), settings=settings, rng=lambda: next(rng))
    with pytest.raises(StoreUnavailable):
        r.store.execute(("GET", "k"))
    caps = [0.1, 0.2, 0.4, 0.5, 0.5]  # base * 2^i, at most retry_max_delay_s
    assert r.sleeps.delays == pytest.approx([d * c for d, c in zip(draws, caps, strict=True)])
    assert all(0 <= d <= settings.retry_max_delay_s for d in r.sleeps.delays)


# -- bounds: attempts and the deadline -----------------------------------------------------


@pytest.mark.parametrize("max_attempts", [1, 2, 5])
def test_attempts_are_bounded_by_store_max_attempts(rig: MakeRig, max_attempts: int) -> None:
    settings = Settings(
        store_timeout_s=60.0,
        store_max_attempts=max_attempts,
        retry_base_delay_s=0.1,
        retry_max_delay_s=0.5,
    )
    r = rig(http(503), settings=settings)
    with pytest.raises(StoreUnavailable, match=f"after {max_attempts} attempt"):
        r.store.execute(("GET", "k"))
    assert len(r.server.requests) == max_attempts
    assert len(r.sleeps.delays) == max_attempts - 1  # no wait after the last attempt


def test_the_deadline_bounds_the_whole_call(rig: MakeRig) -> None:
    # 3 s per answer, a 10 s budget: attempts at 0, 3, 6 and 9 s, never a fifth.
    settings = Settings(
        store_timeout_s=10.0, store_max_attempts=50, retry_base_delay_s=0.1, retry_max_delay_s=0.5
    )
    r = rig(http(503), settings=settings, rng=lambda: 0.0, latency_s=3.0)
    with pytest.raises(StoreUnavailable, match="after 4 attempt"):
        r.store.execute(("GET", "k"))
    # each attempt may use only what is left of the budget, so the last ends by 10 s
    assert r.server.timeouts() == [10.0, 7.0, 4.0, 1.0]


class Drip(httpx.SyncByteStream):
    """A reply body that arrives a byte per second of the fake clock."""

    def __init__(self, body: bytes, clock: Clock) -> None:
        self.body = body
        self.clock = clock
        self.sent = 0
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        for i in range(len(self.body)):
            self.clock.now += 1.0
            self.sent += 1
            yield self.body[i : i + 1]

    def close(self) -> None:
        self.closed = True


def test_a_reply_that_drips_is_abandoned_at_the_deadline(rig: MakeRig) -> None:
    # Every read returns within a second, so a per-read timeout never fires; the deadline
    # over the whole call must. 3 s budget: 3 bytes of ~40 arrive, then the call fails.
    settings = Settings(
        store_timeout_s=3.0, store_max_attempts=4, retry_base_delay_s=0.1, retry_max_delay_s=0.5
    )
    r = rig(ok(b64(b"x" * 20)), settings=settings)
    drip = Drip(json.dumps({"result": b64(b"x" * 20)}).encode(), r.server.clock)
    r.server.answers = [httpx.Response(200, stream=drip)]
    with pytest.raises(
        StoreUnavailable, match=r"after 1 attempt\(s\) within 3s: ReadTimeout"
    ) as info:
        r.store.execute(("GET", "k"))
    assert type(info.value) is StoreUnavailable
    assert drip.sent == 3  # no read was started after the deadline
    assert drip.closed  # the connection is given up, never reused mid-reply
    assert len(r.server.requests) == 1
    assert r.sleeps.delays == []


def test_a_wait_that_would_pass_the_deadline_is_not_taken(rig: MakeRig) -> None:
    settings = Settings(
        store_timeout_s=1.0, store_max_attempts=10, retry_base_delay_s=0.6, retry_max_delay_s=5.0
    )
    r = rig(http(503), settings=settings, rng=lambda: 1.0)
    with pytest.raises(StoreUnavailable, match="after 2 attempt"):
        r.store.execute(("GET", "k"))
    assert r.sleeps.delays == [0.6]  # the next wait, 1.2 s, would end past 1 s


# -- how giving up is reported -------------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "error", "retry_after_s"),
    [
        ([http(429)], Throttled, 1.0),
        ([http(429, **retry_after("0.25"))], Throttled, 0.25),
        ([http(503)], StoreUnavailable, 1.0),
        ([http(503, **retry_after("0.25"))], StoreUnavailable, 0.25),
        ([httpx.ReadError("reset")], StoreUnavailable, 1.0),
        ([http(503), http(429)], Throttled, 1.0),  # the last failure decides
        ([http(429), httpx.ConnectError("refused")], StoreUnavailable, 1.0),
    ],
    ids=["429", "429-retry-after", "503", "503-retry-after", "network", "503-429", "429-net"],
)
def test_throttled_or_unavailable_with_retry_after(
    rig: MakeRig, answers: list[Answer], error: type[StoreUnavailable], retry_after_s: float
) -> None:
    r = rig(*answers)
    with pytest.raises(StoreUnavailable) as info:
        r.store.execute(("GET", "k"))
    assert type(info.value) is error
    assert isinstance(info.value, Unavailable)  # the API's 503 with Retry-After
    assert info.value.retry_after == retry_after_s
    assert f"after {SETTINGS.store_max_attempts} attempt(s)" in str(info.value)


def test_the_final_error_names_the_last_failure(rig: MakeRig) -> None:
    r = rig(http(500, "ERR backend down"), httpx.ReadTimeout("timed out"))
    with pytest.raises(StoreUnavailable, match=r"ReadTimeout: timed out$"):
        r.store.execute(("GET", "k"))
    r = rig(http(502, "ERR backend down"))
    with pytest.raises(StoreUnavailable, match=r"HTTP 502: ERR backend down$"):
        r.store.execute(("GET", "k"))


@pytest.mark.parametrize(
    "answer",
    [
        http(500, f"ERR auth {TOKEN} failed"),
        http(429, f"slow down {TOKEN}"),
        http(400, f"ERR wrong arg {TOKEN}"),
        http(401, f"Unauthorized {TOKEN}"),
        http(200, f"ERR wrong arg {TOKEN}"),
        httpx.ConnectError(f"cannot connect with Bearer {TOKEN}"),
    ],
    ids=["500", "429", "400", "401", "200-error", "network"],
)
def test_the_token_never_appears_in_an_error(rig: MakeRig, answer: Answer) -> None:
    r = rig(answer)
    with pytest.raises(StoreError) as info:
        r.store.execute(("GET", "k"))
    shown = "".join(traceback.format_exception(info.value)) + repr(info.value)
    assert TOKEN not in shown  # chained causes included


# -- Redis refusing for now: BUSY and friends -----------------------------------------------

TRANSIENT = [
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
    "LOADING Redis is loading the dataset in memory",
    "TRYAGAIN Multiple keys request during rehashing of slot",
    "CLUSTERDOWN The cluster is down",
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
]


@pytest.mark.parametrize("text", TRANSIENT, ids=lambda text: text.split()[0])
@pytest.mark.parametrize("status", [400, 200])
def test_transient_redis_errors_are_busy_not_command_errors(
    rig: MakeRig, text: str, status: int
) -> None:
    r = rig(http(status, text), ok())
    with pytest.raises(StoreBusy) as info:
        r.store.execute(("GET", "k"))
    assert isinstance(info.value, Unavailable)  # 503 + Retry-After
    assert info.value.retry_after == 1.0
    assert str(info.value).endswith(text)
    assert len(r.server.requests) == 1  # answered at once: the caller decides when to retry


@pytest.mark.parametrize("text", TRANSIENT, ids=lambda text: text.split()[0])
def test_a_transient_error_in_a_pipeline_fails_the_whole_call(rig: MakeRig, text: str) -> None:
    # A busy slot is not a command that failed (the client would map it to corrupt data):
    # the pipeline as a whole is refused for now.
    r = rig(httpx.Response(200, json=[{"result": 1}, {"error": text}]))
    with pytest.raises(StoreBusy, match=text.split(maxsplit=1)[0]):
        r.store.pipeline([("INCR", "n"), ("GET", "k")])
    r = rig(http(400, text))
    with pytest.raises(StoreBusy):
        r.store.pipeline([("INCR", "n")])


@pytest.mark.parametrize(
    "text",
    ["BUSYKEY Target key name already exists.", "BUSYGROUP Consumer Group name already exists"],
)
def test_errors_that_merely_start_like_busy_stay_command_errors(rig: MakeRig, text: str) -> None:
    r = rig(http(400, text))
    with pytest.raises(StoreCommandError) as info:
        r.store.execute(("RESTORE", "k", 0, "x"))
    assert not isinstance(info.value, Unavailable)


# -- replies --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "reply"),
    [
        (b64(b"\xff\xfe\x00"), b"\xff\xfe\x00"),  # not UTF-8: bytes, never a decode error
        (b64("héllo".encode()), "héllo".encode()),
        ("", b""),
        ("OK", b"OK"),  # Upstash sends the OK status unencoded
        (b64(b"OK"), b"OK"),
        (42, 42),
        (None, None),
        ([b64(b"a"), 1, None, [b64(b"\x80")]], [b"a", 1, None, [b"\x80"]]),
    ],
    ids=["non-utf8", "utf8", "empty", "ok-status", "ok-bulk", "int", "nil", "nested"],
)
def test_replies_decode_to_bytes(rig: MakeRig, result: Any, reply: Any) -> None:
    r = rig(ok(result), httpx.Response(200, json=[{"result": result}]))
    assert r.store.execute(("GET", "k")) == reply
    assert r.store.pipeline([("GET", "k")]) == [reply]


@pytest.mark.parametrize(
    ("command", "answer"),
    [
        ("single", ok("not base64!")),
        ("single", ok(True)),
        ("single", ok(1.5)),
        ("single", ok({"a": 1})),
        ("single", httpx.Response(200, json=["OK"])),
        ("single", httpx.Response(200, text="<html>gateway</html>")),
        ("pipeline", httpx.Response(200, json=[{"result": 1}])),  # 2 commands, 1 reply
        ("pipeline", httpx.Response(200, json=[{"result": 1}] * 3)),
        ("pipeline", httpx.Response(200, json={"result": [1, 2]})),
        ("pipeline", httpx.Response(200, json=[{"result": 1}, "OK"])),
        ("pipeline", httpx.Response(200, json=[{"result": 1}, {}])),
        ("pipeline", httpx.Response(200, text="not json")),
    ],
)
def test_a_malformed_reply_is_a_store_error(rig: MakeRig, command: str, answer: Answer) -> None:
    r = rig(answer)
    with pytest.raises(StoreError) as info:
        if command == "single":
            r.store.execute(("GET", "k"))
        else:
            r.store.pipeline([("GET", "a"), ("GET", "b")])
    assert type(info.value) is StoreError  # not a command error, not transient
    assert len(r.server.requests) == 1


# -- read-your-writes ----------------------------------------------------------------------


def test_the_sync_token_is_sent_back(rig: MakeRig) -> None:
    r = rig(
        ok(headers={"Upstash-Sync-Token": "sync-1"}),
        httpx.Response(200, json=[{"result": 1}], headers={"Upstash-Sync-Token": "sync-2"}),
        ok(),  # no token: the last one stays
        ok(),
    )
    r.store.execute(("SET", "k", "v"))
    r.store.pipeline([("INCR", "n")])
    r.store.execute(("GET", "k"))
    r.store.execute(("GET", "k"))
    sent = [request.headers.get("Upstash-Sync-Token") for request in r.server.requests]
    assert sent == ["", "sync-1", "sync-2", "sync-2"]

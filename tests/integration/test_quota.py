"""acmi_core.ops.quota (the reference's quota-monitor) on every backend: the thresholds
exactly, the number rule, reported readings (ours and the reference's snapshots), the
recorded verdict and its change events, and the billable probe against a local server."""

from __future__ import annotations

import json
import math
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import EntityId
from acmi_core.ops import quota
from acmi_core.ops.quota import AnthropicProbe, Reading, ReportedQuota
from acmi_core.store.upstash import UpstashStore
from acmi_core.testing.upstash_double import UpstashDouble
from tests.kit import START, FakeClock, fresh_tenant, requests_per_step

HOUR = 3_600_000


@pytest.fixture
def ops(acmi: Acmi, clock: FakeClock) -> Acmi:
    """A tenant of its own: the ``quota:*`` index is per tenant."""
    return fresh_tenant(acmi, clock)


class Fixed:
    """A provider that says what it is told (or fails)."""

    def __init__(self, name: str, readings: Sequence[Reading] = (), error: Exception | None = None):
        self.name = name
        self._readings = list(readings)
        self._error = error

    def read(self) -> Sequence[Reading]:
        if self._error is not None:
            raise self._error
        return self._readings


def _status(remaining: object, limit: object) -> tuple[str, Any]:
    result = quota.check_provider(Fixed("p", [Reading("m", remaining, limit)]), START)
    return result["status"], result["ratio"]


# --- thresholds and numbers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("remaining", "limit", "status", "ratio"),
    [
        (26, 100, "green", 0.26),
        (25, 100, "yellow", 0.25),  # at 25 %: yellow
        (11, 100, "yellow", 0.11),
        (10, 100, "red", 0.1),  # at 10 %: red
        (0, 100, "red", 0.0),
        (100, 100, "green", 1.0),
        (150, 100, "green", 1.0),  # more than the limit: full, as the reference clamps
        (2.5, 10, "yellow", 0.25),
        (1, 10, "red", 0.1),
        (250_001, 1_000_000, "green", 0.25),  # one above the line
        (2**51, 2**53, "yellow", 0.25),  # large exact integers, no float drift
        (2**51 + 1, 2**53, "green", 0.25),  # 0.25000000000000011: green, shown rounded
        (0, 0, "unknown", None),  # a zero limit says nothing
        (5, 0, "unknown", None),
    ],
)
def test_thresholds_are_exact(remaining: object, limit: object, status: str, ratio: Any) -> None:
    assert _status(remaining, limit) == (status, ratio)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 0),
        (2**53, 2**53),
        (12.5, 12.5),
        (100.0, 100),  # a whole float is an int
        ("100", 100),
        (" 42 ", 42),
        ("1e3", 1000),  # what JSON.stringify and Number() read
        ("2.5", 2.5),
        (1e15, 10**15),
    ],
)
def test_numbers_a_reading_may_hold(value: object, expected: object) -> None:
    got = quota.quota_number(value, "tokens.remaining")
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        (-1, "range"),
        ("-1", "range"),
        (-0.5, "range"),
        (1e21, "range"),  # JSON.stringify's 1e21: far beyond any quota, and inexact in JS
        ("1e21", "range"),
        (2**53 + 1, "range"),
        (math.nan, "finite"),
        (math.inf, "finite"),
        (-math.inf, "finite"),
        ("NaN", "number"),
        ("Infinity", "number"),
        ("0x10", "number"),
        ("", "number"),
        ("1,000", "number"),
        (True, "type"),
        (None, "type"),
        ([1], "type"),
    ],
)
def test_numbers_refused_name_the_field_and_rule(value: object, rule: str) -> None:
    with pytest.raises(AcmiValidationError) as refused:
        quota.quota_number(value, "tokens.remaining")
    assert (refused.value.field, refused.value.rule) == ("tokens.remaining", rule)
    # inside a check the same value makes the reading unknown, with the same problem
    result = quota.check_provider(Fixed("p", [Reading("tokens", value, 100)]), START)
    assert result["status"] == "unknown"
    assert result["problems"][0]["field"] == "tokens.remaining"
    assert result["problems"][0]["rule"] == rule


def test_worst_orders_unknown_between_green_and_yellow() -> None:
    assert quota.worst([]) == "unknown"
    assert quota.worst(["green", "green"]) == "green"
    assert quota.worst(["green", "unknown"]) == "unknown"
    assert quota.worst(["unknown", "yellow"]) == "yellow"
    assert quota.worst(["yellow", "red", "green"]) == "red"


# --- reported readings and the record --------------------------------------------------------


def test_reported_readings_are_checked_recorded_and_announced_on_change(
    ops: Acmi, clock: FakeClock
) -> None:
    stored = quota.report(
        ops, "anthropic", "tokens", remaining=20_000, limit=100_000, unit="tokens"
    )
    assert stored == {
        "provider": "anthropic",
        "meter": "tokens",
        "reading": {"remaining": 20_000, "limit": 100_000, "unit": "tokens", "observed_ms": START},
    }
    quota.report(ops, "anthropic", "requests", remaining="45", limit="50")  # text from a tool
    quota.report(ops, "gemini", "requests", remaining=900, limit=1000)
    ops.signals.set("quota:anthropic", "note", "kept")

    first = quota.monitor(ops)
    assert first["status"] == "yellow"
    assert first["checked_at_ms"] == START
    assert first["recorded"] is True
    anthropic, gemini = first["providers"]
    assert anthropic["provider"] == "anthropic"
    assert anthropic["status"] == "yellow"
    assert anthropic["ratio"] == 0.2
    assert anthropic["headline"] == "tokens 20,000/100,000 (20% remaining)"
    assert anthropic["previous"] is None
    assert anthropic["changed"] is True  # a first verdict that is a shortage is news
    assert anthropic["problems"] == []
    assert {r["meter"]: (r["status"], r["remaining"]) for r in anthropic["readings"]} == {
        "tokens": ("yellow", 20_000),
        "requests": ("green", 45),
    }
    assert (gemini["status"], gemini["changed"]) == ("green", False)  # fine: not news
    assert json.loads(json.dumps(first, allow_nan=False)) == first

    signals = ops.signals.all("quota:anthropic")
    assert signals["note"] == "kept"
    assert signals["tokens"]["remaining"] == 20_000  # the reading itself is not rewritten
    assert {k: signals[k] for k in quota.VERDICT_SIGNALS} == {
        "severity": "yellow",
        "ratio": 0.2,
        "headline": "tokens 20,000/100,000 (20% remaining)",
        "checked_at_ms": START,
    }
    [event] = ops.timeline.read("quota:anthropic").to_dicts()
    assert event["kind"] == "quota-status-changed"
    assert event["source"] == "system:acmi-quota"
    assert event["summary"] == "[YELLOW] anthropic: tokens 20,000/100,000 (20% remaining)"
    assert event["payload"]["previous"] is None
    assert ops.timeline.size("quota:gemini") == 0

    clock.now += HOUR
    assert quota.monitor(ops)["providers"][0]["changed"] is False  # same: no event
    assert ops.timeline.size("quota:anthropic") == 1

    clock.now += HOUR
    quota.report(ops, "anthropic", "tokens", remaining=10_000, limit=100_000)
    third = quota.monitor(ops, alert_to="thread:ops")
    assert third["status"] == "red"
    assert (third["providers"][0]["previous"], third["providers"][0]["changed"]) == ("yellow", True)
    events = ops.timeline.read("quota:anthropic").to_dicts()
    assert [e["payload"]["status"] for e in events] == ["yellow", "red"]
    assert ops.timeline.read("thread:ops").to_dicts() == events[1:]

    clock.now += HOUR
    quota.report(ops, "anthropic", "tokens", remaining=90_000, limit=100_000)
    recovered = quota.monitor(ops)
    assert recovered["status"] == "green"
    assert ops.timeline.read("quota:anthropic").to_dicts()[-1]["summary"].startswith("[GREEN]")


def test_unknown_cases(ops: Acmi, clock: FakeClock) -> None:
    quota.report(ops, "stale", "tokens", remaining=90, limit=100)
    ops.signals.set("quota:empty", "note", "nothing reported yet")
    clock.now += quota.DEFAULT_MAX_AGE_MS + 1
    quota.report(ops, "zero", "tokens", remaining=0, limit=0)
    quota.report(ops, "fine", "tokens", remaining=90, limit=100)
    result = quota.monitor(ops, record=False)
    by_name = {p["provider"]: p for p in result["providers"]}
    assert by_name["fine"]["status"] == "green"
    assert by_name["zero"]["status"] == "unknown"
    assert by_name["zero"]["problems"][0]["rule"] == "non_zero"
    assert by_name["stale"]["status"] == "unknown"
    assert by_name["stale"]["problems"][0]["rule"] == "stale"
    assert by_name["empty"]["headline"] == "unknown: no reading"
    assert result["status"] == "unknown"  # not knowing is worse than fine
    assert result["recorded"] is False
    assert "severity" not in ops.signals.all("quota:fine")
    # a longer max age takes the stale reading
    assert (
        quota.monitor(ops, record=False, max_age_ms=2 * quota.DEFAULT_MAX_AGE_MS)["providers"][2][
            "status"
        ]
        == "green"
    )
    assert quota.monitor(ops, [], record=True) == {
        "status": "unknown",
        "checked_at_ms": clock.now,
        "providers": [],
        "recorded": False,
    }


def test_json_stringify_style_values_from_other_writers(ops: Acmi, raw: Any) -> None:
    """What a Node tool writes with JSON.stringify lands in the signals as is."""
    key = ops.keys.signals(EntityId.parse("quota:node"))
    raw.set(
        key,
        '{"huge":{"remaining":1e21,"limit":2e21},"text":{"remaining":"40","limit":"50"},'
        '"exp":{"remaining":2.5e5,"limit":1e6,"reset":"2026-12-01T00:00:00Z"},'
        '"neg":{"remaining":-3,"limit":10},"nan":{"remaining":"NaN","limit":10}}',
    )
    result = quota.check_provider(ReportedQuota(ops, "node"), START)
    readings = {r["meter"]: r for r in result["readings"]}
    assert readings["text"]["status"] == "green"
    assert readings["exp"]["status"] == "yellow"
    assert readings["exp"]["resets_at"] == "2026-12-01T00:00:00Z"  # the reference's `reset`
    assert readings["exp"]["remaining"] == 250_000
    assert [(p["field"], p["rule"]) for p in result["problems"]] == [
        ("huge.remaining", "range"),
        ("neg.remaining", "range"),
        ("nan.remaining", "number"),
    ]
    assert result["status"] == "yellow"


def test_the_reference_snapshots_read_as_readings(ops: Acmi, raw: Any) -> None:
    """The reference's quota-monitor SETs whole snapshots (and never indexes them): its
    zai counter snapshot and its Anthropic headers snapshot."""
    raw.set(
        ops.keys.signals(EntityId.parse("quota:zai")),
        json.dumps(
            {
                "ts": 1_777_000_000_000,
                "source": "client_side_counter",
                "cap": 10_000_000,
                "used": 9_500_000,
                "remaining": 500_000,
                "ratio": 0.05,
                "severity": "red",
                "headline": "~5% remaining",
            }
        ),
    )
    raw.set(
        ops.keys.signals(EntityId.parse("quota:anthropic")),
        json.dumps(
            {
                "ts": 1_777_000_000_000,
                "status": 200,
                "requests": {"remaining": 49, "limit": 50, "reset": "2026-05-01T00:00:10Z"},
                "tokens": {"remaining": 30_000, "limit": 100_000, "reset": None},
                "ratio": 0.3,
                "severity": "green",
                "headline": "req 49/50 · tok 30000/100000",
            }
        ),
    )
    result = quota.monitor(ops, [ReportedQuota(ops, "zai"), ReportedQuota(ops, "anthropic")])
    zai, anthropic = result["providers"]
    assert (zai["status"], zai["ratio"], zai["previous"], zai["changed"]) == (
        "red",
        0.05,
        "red",  # what the reference recorded: no change, no event
        False,
    )
    assert ops.timeline.size("quota:zai") == 0
    assert (anthropic["status"], anthropic["ratio"]) == ("green", 0.3)
    assert ops.signals.get("quota:zai", "used") == 9_500_000  # its other fields kept


def test_a_failing_provider_is_unknown_and_the_others_are_checked(ops: Acmi) -> None:
    result = quota.monitor(
        ops,
        [
            Fixed("broken", error=TimeoutError("read timed out")),
            Fixed("ok", [Reading("requests", 10, 100)]),
        ],
    )
    broken, ok = result["providers"]
    assert broken["status"] == "unknown"
    assert broken["problems"] == [
        {"field": "broken", "rule": "read", "message": "TimeoutError: read timed out"}
    ]
    assert ok["status"] == "red"
    assert result["status"] == "red"
    # a live provider's readings are kept as signals: the next check without it has them
    assert ops.signals.get("quota:ok", "requests") == {
        "remaining": 10,
        "limit": 100,
        "observed_ms": START,
    }
    assert quota.check_provider(ReportedQuota(ops, "ok"), START)["status"] == "red"


def test_registered_providers_join_the_default_check(
    ops: Acmi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quota, "_FACTORIES", {})
    quota.report(ops, "gemini", "requests", remaining=1, limit=100)
    quota.register_provider("gemini", lambda a: Fixed("gemini", [Reading("requests", 99, 100)]))
    quota.register_provider("local", lambda a: Fixed("local", [Reading("gpu_hours", 5, 10)]))
    assert quota.registered() == ("gemini", "local")
    result = quota.monitor(ops, record=False)
    assert [(p["provider"], p["status"]) for p in result["providers"]] == [
        ("gemini", "green"),  # the registered one replaces the reported one
        ("local", "green"),
    ]


@pytest.mark.parametrize(
    ("call", "field", "rule"),
    [
        (lambda a: quota.report(a, "bad:name", "t", remaining=1, limit=2), "provider", "format"),
        (lambda a: quota.report(a, "", "t", remaining=1, limit=2), "provider", "id_format"),
        (lambda a: quota.report(a, "p", "severity", remaining=1, limit=2), "meter", "reserved"),
        (lambda a: quota.report(a, "p", "", remaining=1, limit=2), "meter", "length"),
        (lambda a: quota.report(a, "p", "t", remaining=-1, limit=2), "t.remaining", "range"),
        (lambda a: quota.report(a, "p", "t", remaining=1, limit=math.nan), "t.limit", "finite"),
        (lambda a: quota.report(a, "p", "t", remaining=1, limit=1e21), "t.limit", "range"),
        (lambda a: quota.report(a, "p", "t", remaining=1, limit=2, unit=""), "t.unit", "string"),
        (
            lambda a: quota.report(a, "p", "t", remaining=1, limit=2, resets_at=True),
            "t.resets_at",
            "type",
        ),
        (lambda a: quota.monitor(a, max_age_ms=0), "max_age_ms", "range"),
        (lambda a: quota.monitor(a, [Fixed("x"), Fixed("x")]), "providers", "unique"),
        (lambda a: quota.monitor(a, [], alert_to="nope"), "alert_to", "format"),
    ],
)
def test_bad_input_is_refused_and_stores_nothing(
    ops: Acmi, call: Any, field: str, rule: str
) -> None:
    with pytest.raises(AcmiValidationError) as refused:
        call(ops)
    assert (refused.value.field, refused.value.rule) == (field, rule)
    assert ops.list("quota") == []


# --- the billable probe, against a local server --------------------------------------------


class _Anthropic(BaseHTTPRequestHandler):
    status = 200
    headers_out: dict[str, str] = {}
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        type(self).seen.append(
            {"path": self.path, "key": self.headers["x-api-key"], "body": json.loads(body)}
        )
        self.send_response(self.status)
        for name, value in self.headers_out.items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def anthropic() -> Iterator[tuple[str, type[_Anthropic]]]:
    handler = type("Handler", (_Anthropic,), {"seen": [], "headers_out": {}, "status": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_the_probe_is_billable_and_refuses_to_exist_without_the_opt_in() -> None:
    for flag in (False, "yes", 1):
        with pytest.raises(AcmiValidationError) as refused:
            AnthropicProbe("sk-test", billable=flag)  # type: ignore[arg-type]
        assert (refused.value.field, refused.value.rule) == ("billable", "opt_in")
    with pytest.raises(AcmiValidationError) as refused:
        AnthropicProbe("", billable=True)
    assert (refused.value.field, refused.value.rule) == ("api_key", "required")


def test_the_probe_reads_the_rate_limit_headers(
    ops: Acmi, anthropic: tuple[str, type[_Anthropic]]
) -> None:
    url, server = anthropic
    server.status = 429  # a throttled answer still carries the headers
    server.headers_out = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "5",
        "anthropic-ratelimit-requests-reset": "2026-11-30T16:00:00Z",
        "anthropic-ratelimit-tokens-limit": "100000",
        "anthropic-ratelimit-tokens-remaining": "60000",
    }
    probe = AnthropicProbe("sk-test-" + uuid.uuid4().hex, billable=True, base_url=url + "/")
    result = quota.monitor(ops, [probe])
    [checked] = result["providers"]
    assert checked["status"] == "red"
    assert {r["meter"]: r["ratio"] for r in checked["readings"]} == {"requests": 0.1, "tokens": 0.6}
    [request] = server.seen
    assert request["path"] == "/v1/messages"
    assert request["key"].startswith("sk-test-")
    assert request["body"]["max_tokens"] == 1
    # kept as readings: the next free check knows what the paid one saw
    assert ops.signals.get("quota:anthropic", "requests") == {
        "remaining": 5,
        "limit": 50,
        "unit": "requests",
        "resets_at": "2026-11-30T16:00:00Z",
        "observed_ms": START,
    }
    assert quota.monitor(ops, record=False)["providers"][0]["status"] == "red"
    assert len(server.seen) == 1  # the default providers made no call


def test_a_probe_answer_without_headers_or_with_bad_ones_is_unknown(
    ops: Acmi, anthropic: tuple[str, type[_Anthropic]]
) -> None:
    url, server = anthropic
    server.status = 401
    probe = AnthropicProbe("sk-wrong", billable=True, base_url=url)
    [checked] = quota.monitor(ops, [probe], record=False)["providers"]
    assert checked["status"] == "unknown"
    assert checked["problems"][0]["rule"] == "rate_limit_headers"
    assert "sk-wrong" not in json.dumps(checked)
    server.status = 200
    server.headers_out = {
        "anthropic-ratelimit-tokens-limit": "Infinity",
        "anthropic-ratelimit-tokens-remaining": "10",
    }
    [checked] = quota.monitor(ops, [probe], record=False)["providers"]
    assert checked["status"] == "unknown"
    assert (checked["problems"][0]["field"], checked["problems"][0]["rule"]) == (
        "tokens.limit",
        "number",
    )


def test_nothing_is_sent_anywhere_by_default(ops: Acmi, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default providers read the store only: any HTTP client use fails the test."""

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the default check made an HTTP request")

    monkeypatch.setattr(httpx.Client, "post", no_network)  # what the probe sends with
    quota.report(ops, "anthropic", "tokens", remaining=1, limit=2)
    assert quota.monitor(ops)["status"] == "green"


def test_round_trips_of_a_check(upstash_store: UpstashStore, upstash_double: UpstashDouble) -> None:
    acmi = fresh_tenant(create_acmi(upstash_store, Settings()), FakeClock())
    for name in ("a", "b", "c"):
        quota.report(acmi, name, "tokens", remaining=50, limit=100)  # also loads the script
    steps: dict[str, Callable[[], object]] = {
        "report": lambda: quota.report(acmi, "a", "tokens", remaining=5, limit=100),
        # the list, one read per reported provider, the previous verdicts, the record
        "monitor": lambda: quota.monitor(acmi),
        "monitor, no record": lambda: quota.monitor(acmi, record=False),
    }
    assert requests_per_step(upstash_double, steps) == {
        "report": 1,
        "monitor": 1 + 3 + 1 + 1,
        "monitor, no record": 1 + 3 + 1,
    }

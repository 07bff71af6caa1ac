"""Quota health of model providers (the reference's ``quota-monitor``): read what each
provider has left, classify it, record it, announce a change.

    result = quota.monitor(acmi)               # every reported provider, no paid call
    quota.report(acmi, "anthropic", "tokens", remaining=20_000, limit=100_000)

Status of one reading, ``remaining / limit``: **red** at or below 10 %, **yellow** at or
below 25 %, else **green** (the reference's thresholds, compared exactly: ``10 *
remaining <= limit``, so 10 of 100 is red and 25 of 100 is yellow); **unknown** when the
limit is 0, the reading is older than ``max_age_ms``, its numbers break the rule below,
or a provider has no reading or fails to read. A provider's status and the overall one
are the worst of theirs, in the order green < unknown < yellow < red: not knowing is
worse than fine, never better than a known shortage.

Numbers: a finite number from 0 to 2^53 (the largest integer JavaScript, the reference's
runtime, reads exactly), or a decimal string of one (rate-limit headers are text, and
no-code tools post numbers as text); ``1e21``, NaN, Infinity and negatives are refused
with the field and the rule (``range``, ``finite``, ``number``, ``type``).

Where readings live (entity ``quota:<provider>``, the reference's keys
``acmi:quota:<provider>:signals``): each signal whose value is an object with
``remaining`` and ``limit`` is a reading named by its key, ``{remaining, limit, unit?,
resets_at?, observed_ms?}``; a pipeline or an agent posts one with ``report`` (or any
signal write). The reference's own snapshots read the same way (its ``requests`` and
``tokens`` objects; its top-level ``remaining``/``cap`` is the ``quota`` reading; its
``reset`` is ``resets_at``). ``monitor`` records its verdict beside them in the signals
``severity`` (the reference's name), ``ratio``, ``headline`` and ``checked_at_ms``, and
when a provider's severity changes, a ``quota-status-changed`` event on its timeline
(and on ``alert_to``, e.g. ``thread:ops``). The reference posts ``alert-yellow`` /
``alert-red`` on every hourly run; one event per change says the same without the noise.

Providers are pluggable (``QuotaProvider``: a ``name`` and ``read()``); ``ReportedQuota``
reads the signals above and costs nothing. ``AnthropicProbe`` sends a real one-token
Messages request to read the rate-limit headers, as the reference does: it is billed,
so it refuses to exist without ``billable=True``. ``register_provider`` adds a factory
that ``default_providers`` builds (an SDK or a paid probe wired by the caller).

Round trips of ``monitor``: 1 (the provider list) + 1 per reported provider + 1 (the
previous verdicts) + 1 (the record), whatever the number of readings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, Protocol

import httpx

from acmi_core.base.errors import AcmiError, AcmiValidationError
from acmi_core.base.model import (
    MAX_SUMMARY_LEN,
    EntityId,
    Event,
    check_signal_key,
    dumps,
    encode_event,
)
from acmi_core.base.stored import decode_object
from acmi_core.client import Acmi  # at run time too: the operation table reads the hints
from acmi_core.ops.results import (
    CheckedReading,
    Problem,
    ProviderCheck,
    ProviderVerdict,
    QuotaMonitor,
    QuotaReport,
    ReadingDoc,
)
from acmi_core.store.writes import WritePlan

GREEN: Final = "green"
YELLOW: Final = "yellow"
RED: Final = "red"
UNKNOWN: Final = "unknown"
STATUSES: Final = (GREEN, UNKNOWN, YELLOW, RED)  # best to worst
_RANK: Final = {status: rank for rank, status in enumerate(STATUSES)}
YELLOW_AT: Final = Fraction(25, 100)  # remaining / limit at or below: yellow
RED_AT: Final = Fraction(10, 100)  # at or below: red

MAX_QUOTA_VALUE: Final = 2**53
CATEGORY: Final = "quota"
STATUS_CHANGED: Final = "quota-status-changed"
SOURCE: Final = "system:acmi-quota"
DEFAULT_MAX_AGE_MS: Final = 24 * 60 * 60 * 1000  # the reference checks hourly
# The verdict's signals: never readings, and no reading may take their names.
VERDICT_SIGNALS: Final = ("severity", "ratio", "headline", "checked_at_ms")
MAX_UNIT_LEN: Final = 64
MAX_RESETS_AT_LEN: Final = 64
_NOT_STORED: Final = frozenset({"meter", "status", "ratio"})  # the check's, not the reading's
_NUMBER_TEXT: Final = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


# --- numbers and classification --------------------------------------------------------------


def quota_number(value: object, field: str) -> int | float:
    """A reading's number (module docstring), as an int when it is a whole one."""
    if isinstance(value, str):
        text = value.strip()
        if not _NUMBER_TEXT.fullmatch(text):
            raise AcmiValidationError(field, "number", "must be a decimal number")
        value = float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AcmiValidationError(field, "type", "must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise AcmiValidationError(field, "finite", "must be a finite number")
    if not 0 <= value <= MAX_QUOTA_VALUE:
        raise AcmiValidationError(field, "range", f"must be from 0 to {MAX_QUOTA_VALUE} (2^53)")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def classify(remaining: int | float, limit: int | float) -> tuple[str, float | None]:
    """``(status, ratio)`` of checked numbers; the ratio is clamped to [0, 1] (more left
    than the limit is full) and None when the limit is 0. Exact at the thresholds."""
    if limit == 0:
        return UNKNOWN, None
    share = min(Fraction(remaining) / Fraction(limit), Fraction(1))
    if share <= RED_AT:
        status = RED
    elif share <= YELLOW_AT:
        status = YELLOW
    else:
        status = GREEN
    return status, round(float(share), 4)


def worst(statuses: Iterable[str]) -> str:
    """The worst status (green < unknown < yellow < red); unknown when there is none."""
    return max(statuses, key=_RANK.__getitem__, default=UNKNOWN)


# --- readings and providers ------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """What a provider says is left of one meter, as the provider gave it: ``monitor``
    checks the numbers (so a header's text or a stored string goes through one rule)."""

    meter: str  # e.g. "requests", "tokens"
    remaining: object
    limit: object
    unit: str | None = None
    resets_at: str | int | None = None  # RFC 3339 text as providers send it, or ms
    observed_ms: int | None = None  # when it was read; None: now


class QuotaProvider(Protocol):
    """A source of readings. ``read`` may raise: the provider is then unknown, with the
    error as its problem, and the other providers are still checked."""

    @property
    def name(self) -> str: ...

    def read(self) -> Sequence[Reading]: ...


ProviderFactory = Callable[["Acmi"], QuotaProvider]
_FACTORIES: Final[dict[str, ProviderFactory]] = {}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Add (or replace) a provider ``default_providers`` builds for every check: its
    readings win over the reported ones of the same name."""
    _FACTORIES[provider_id(name).local_id] = factory


def registered() -> tuple[str, ...]:
    return tuple(sorted(_FACTORIES))


def provider_id(name: object, field: str = "provider") -> EntityId:
    """``quota:<name>``: a provider name is an entity id's local part."""
    if not isinstance(name, str) or ":" in name:
        raise AcmiValidationError(field, "format", "must be a name of [A-Za-z0-9_.-]")
    return EntityId.parse(f"{CATEGORY}:{name}", field)


def _readings_of(signals: Mapping[str, Any]) -> list[Reading]:
    readings = []
    for meter, value in signals.items():
        if isinstance(value, dict) and "remaining" in value and "limit" in value:
            resets = value.get("resets_at", value.get("reset"))
            observed = value.get("observed_ms")
            readings.append(
                Reading(
                    meter,
                    value["remaining"],
                    value["limit"],
                    value.get("unit") if isinstance(value.get("unit"), str) else None,
                    resets if isinstance(resets, str | int) else None,
                    observed if isinstance(observed, int) and observed >= 0 else None,
                )
            )
    if "remaining" in signals and "cap" in signals:  # the reference's zai counter snapshot
        readings.append(Reading("quota", signals["remaining"], signals["cap"], "tokens"))
    return readings


class ReportedQuota:
    """Readings already reported into ACMI (module docstring): no provider call at all."""

    def __init__(self, acmi: Acmi, name: str) -> None:
        self._acmi = acmi
        self._entity = provider_id(name)
        self.name = self._entity.local_id

    def read(self) -> Sequence[Reading]:
        return _readings_of(self._acmi.signals.all(self._entity))


ANTHROPIC_URL: Final = "https://api.anthropic.com"
ANTHROPIC_METERS: Final = ("requests", "tokens", "input-tokens", "output-tokens")


class AnthropicProbe:
    """The reference's probe: a one-token Messages request, for its
    ``anthropic-ratelimit-<meter>-{limit,remaining,reset}`` headers. Every read is a
    billed API call, hence ``billable=True`` or nothing. ``base_url`` and ``client`` let
    a test answer it locally."""

    name = "anthropic"

    def __init__(
        self,
        api_key: str,
        *,
        billable: bool = False,
        base_url: str = ANTHROPIC_URL,
        model: str = "claude-haiku-4-5",
        timeout_s: float = 10.0,
        client: httpx.Client | None = None,
    ) -> None:
        if billable is not True:
            raise AcmiValidationError(
                "billable",
                "opt_in",
                "the Anthropic probe sends a billed request; pass billable=True to allow it",
            )
        if not isinstance(api_key, str) or not api_key:
            raise AcmiValidationError("api_key", "required", "is required")
        self._key = api_key
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._model = model
        self._timeout = timeout_s
        self._client = client

    def read(self) -> Sequence[Reading]:
        request = {
            "model": self._model,
            "max_tokens": 1,
            "messages": [{"role": "user", "content": "."}],
        }
        headers = {
            "x-api-key": self._key,
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        }
        if self._client is None:
            with httpx.Client(timeout=self._timeout) as client:
                response = client.post(self._url, json=request, headers=headers)
        else:
            response = self._client.post(
                self._url, json=request, headers=headers, timeout=self._timeout
            )
        readings = []
        for meter in ANTHROPIC_METERS:
            prefix = f"anthropic-ratelimit-{meter}-"
            if prefix + "limit" in response.headers:
                unit = "requests" if meter == "requests" else "tokens"
                reset = response.headers.get(prefix + "reset")
                readings.append(
                    Reading(
                        meter,
                        response.headers.get(prefix + "remaining"),
                        response.headers[prefix + "limit"],
                        unit,
                        reset[:MAX_RESETS_AT_LEN] if reset else None,
                    )
                )
        if not readings:  # a 429 still carries them; a 401 or an outage does not
            raise AcmiError(
                f"HTTP {response.status_code} without rate-limit headers",
                field="anthropic",
                rule="rate_limit_headers",
            )
        return readings


def default_providers(acmi: Acmi) -> list[QuotaProvider]:
    """One ``ReportedQuota`` per ``quota:*`` entity, then the registered factories (a
    registered provider replaces the reported one of its name)."""
    providers: dict[str, QuotaProvider] = {
        name: ReportedQuota(acmi, name)
        for name in (entity.split(":", 1)[1] for entity in acmi.list(CATEGORY))
    }
    for name, factory in sorted(_FACTORIES.items()):
        providers[name] = factory(acmi)
    return [providers[name] for name in sorted(providers)]


# --- reporting -------------------------------------------------------------------------------


def _unit(unit: object, field: str) -> str | None:
    if unit is None:
        return None
    if not isinstance(unit, str) or not 1 <= len(unit) <= MAX_UNIT_LEN:
        raise AcmiValidationError(field, "string", f"must be 1-{MAX_UNIT_LEN} characters")
    return unit


def _resets_at(value: object, field: str) -> str | int | None:
    if value is None:
        return None
    if isinstance(value, str) and 1 <= len(value) <= MAX_RESETS_AT_LEN:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise AcmiValidationError(
        field, "type", f"must be a time as text (1-{MAX_RESETS_AT_LEN} characters) or ms"
    )


def reading_doc(reading: Reading, field: str) -> ReadingDoc:
    """A reading as its signal stores it; numbers checked (AcmiValidationError)."""
    doc: ReadingDoc = {
        "remaining": quota_number(reading.remaining, f"{field}.remaining"),
        "limit": quota_number(reading.limit, f"{field}.limit"),
    }
    if (unit := _unit(reading.unit, f"{field}.unit")) is not None:
        doc["unit"] = unit
    if (resets := _resets_at(reading.resets_at, f"{field}.resets_at")) is not None:
        doc["resets_at"] = resets
    if reading.observed_ms is not None:
        doc["observed_ms"] = reading.observed_ms
    return doc


def _meter(meter: object, field: str = "meter") -> str:
    name = check_signal_key(meter, field)
    if name in VERDICT_SIGNALS or name in ("remaining", "cap"):
        raise AcmiValidationError(field, "reserved", f"{name!r} is the monitor's own signal")
    return name


def _storable(meter: str) -> bool:
    try:
        _meter(meter)
    except AcmiValidationError:
        return False
    return True


def report(
    acmi: Acmi,
    provider: str,
    meter: str,
    *,
    remaining: object,
    limit: object,
    unit: str | None = None,
    resets_at: str | int | None = None,
) -> QuotaReport:
    """Post a reading (what a pipeline or an agent saw): the ``<meter>`` signal of
    ``quota:<provider>``, other signals kept; one round trip. Returns
    ``{provider, meter, reading}`` with the reading as stored."""
    entity = provider_id(provider)
    name = _meter(meter)
    doc = reading_doc(Reading(name, remaining, limit, unit, resets_at, acmi.clock()), name)
    acmi.signals.update(entity, {name: doc})
    return {"provider": entity.local_id, "meter": name, "reading": doc}


# --- the check -------------------------------------------------------------------------------


def _num(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"


def _problem(exc: AcmiError, default_field: str) -> Problem:
    field = exc.field if isinstance(exc, AcmiValidationError) else default_field
    return {"field": field, "rule": exc.rule, "message": exc.message}


def _check_reading(reading: Reading, now: int, max_age_ms: int | None) -> CheckedReading:
    """One reading classified: ``{meter, status, ratio, remaining, limit, unit,
    resets_at, observed_ms, problem?}``; a reading that breaks a rule is unknown."""
    out: CheckedReading = {"meter": reading.meter, "status": UNKNOWN, "ratio": None}
    try:
        doc = reading_doc(reading, reading.meter)
    except AcmiValidationError as exc:
        out["problem"] = _problem(exc, reading.meter)
        return out
    # the reading's keys after the check's, in the reading's order
    out["remaining"], out["limit"] = doc["remaining"], doc["limit"]
    if "unit" in doc:
        out["unit"] = doc["unit"]
    if "resets_at" in doc:
        out["resets_at"] = doc["resets_at"]
    if "observed_ms" in doc:
        out["observed_ms"] = doc["observed_ms"]
    observed = doc.get("observed_ms")
    if max_age_ms is not None and observed is not None and now - observed > max_age_ms:
        out["problem"] = {
            "field": f"{reading.meter}.observed_ms",
            "rule": "stale",
            "message": f"read {now - observed} ms ago, over max_age_ms {max_age_ms}",
        }
        return out
    out["status"], out["ratio"] = classify(doc["remaining"], doc["limit"])
    if doc["limit"] == 0:
        out["problem"] = {
            "field": f"{reading.meter}.limit",
            "rule": "non_zero",
            "message": "a limit of 0 says nothing about what is left",
        }
    return out


def _headline(status: str, readings: list[CheckedReading], problems: list[Problem]) -> str:
    # a ratio is set only once the reading's numbers passed (remaining and limit are there)
    known = [(r["ratio"], r) for r in readings if r["ratio"] is not None]
    if known:
        ratio, low = min(known, key=lambda pair: pair[0])
        return (
            f"{low['meter']} {_num(low['remaining'])}/{_num(low['limit'])} ({ratio:.0%} remaining)"
        )
    if problems:
        first = problems[0]
        return f"{status}: {first['field']}: {first['rule']}"
    return f"{status}: no reading"


def check_provider(
    provider: QuotaProvider, now: int, max_age_ms: int | None = DEFAULT_MAX_AGE_MS
) -> ProviderCheck:
    """``{provider, status, ratio, headline, readings, problems}`` of one provider."""
    name = provider.name
    problems: list[Problem] = []
    readings: list[CheckedReading] = []
    try:
        raw = list(provider.read())
    except AcmiError as exc:
        problems.append(_problem(exc, name))
        raw = []
    except Exception as exc:  # a plug-in's failure (HTTP, a timeout) stays its own
        problems.append({"field": name, "rule": "read", "message": f"{type(exc).__name__}: {exc}"})
        raw = []
    for reading in raw:
        checked = _check_reading(reading, now, max_age_ms)
        if "problem" in checked:
            problems.append(checked["problem"])
        readings.append(checked)
    status = worst(r["status"] for r in readings) if readings else UNKNOWN
    ratios = [r["ratio"] for r in readings if r["ratio"] is not None]
    return {
        "provider": name,
        "status": status,
        "ratio": min(ratios) if ratios else None,
        "headline": _headline(status, readings, problems),
        "readings": readings,
        "problems": problems,
    }


def monitor(
    acmi: Acmi,
    providers: Sequence[QuotaProvider] | None = None,
    *,
    record: bool = True,
    alert_to: str | None = None,
    max_age_ms: int | None = DEFAULT_MAX_AGE_MS,
) -> QuotaMonitor:
    """Check every provider (``default_providers`` when None) and, with ``record``,
    write each verdict and the events of the changes in one WritePlan.

    Returns ``{status, checked_at_ms, providers: [{provider, status, previous, changed,
    ratio, headline, readings: [{meter, status, ratio, remaining, limit, unit?,
    resets_at?, observed_ms?, problem?}], problems: [{field, rule, message}]}],
    recorded}``."""
    if max_age_ms is not None and (
        isinstance(max_age_ms, bool) or not isinstance(max_age_ms, int) or max_age_ms < 1
    ):
        raise AcmiValidationError("max_age_ms", "range", "must be an integer >= 1 or None")
    alert = None if alert_to is None else EntityId.parse(alert_to, "alert_to")
    chosen = default_providers(acmi) if providers is None else list(providers)
    names = [provider_id(p.name, "providers").local_id for p in chosen]
    if len(set(names)) != len(names):
        raise AcmiValidationError("providers", "unique", "each provider name at most once")
    now = acmi.clock()
    checks = [check_provider(p, now, max_age_ms) for p in chosen]
    previous = _previous(acmi, names)
    results: list[ProviderVerdict] = [
        {
            **check,
            "previous": before,
            # a first verdict that is fine or unknown is not news; every other change is
            "changed": before != check["status"]
            and (before is not None or check["status"] in (YELLOW, RED)),
        }
        for check, before in zip(checks, previous, strict=True)
    ]
    if record and results:
        _record(acmi, chosen, results, now, alert)
    return {
        "status": worst(r["status"] for r in results),
        "checked_at_ms": now,
        "providers": results,
        "recorded": bool(record and results),
    }


def _previous(acmi: Acmi, names: list[str]) -> list[str | None]:
    """The severity each provider's last recorded verdict says: one round trip."""
    if not names:
        return []
    keys = [acmi.keys.signals(provider_id(name)) for name in names]
    replies = acmi.store.pipeline([("GET", key) for key in keys])
    found: list[str | None] = []
    for reply, key in zip(replies, keys, strict=True):
        try:
            signals = None if isinstance(reply, Exception) else decode_object(reply, key)
        except AcmiError:
            signals = None  # unreadable: the new verdict is recorded over it as a change
        severity = (signals or {}).get("severity")
        found.append(severity if severity in _RANK else None)
    return found


def _record(
    acmi: Acmi,
    providers: list[QuotaProvider],
    results: list[ProviderVerdict],
    now: int,
    alert: EntityId | None,
) -> None:
    plan = WritePlan()
    for provider, result in zip(providers, results, strict=True):
        entity = provider_id(result["provider"])
        fields: list[tuple[Any, str, str]] = [
            ("set", "severity", dumps(result["status"])),
            ("set", "ratio", dumps(result["ratio"])),
            ("set", "headline", dumps(result["headline"])),
            ("set", "checked_at_ms", dumps(now)),
        ]
        if not isinstance(provider, ReportedQuota):
            # what a live read saw is kept, so the next check without it has a reading
            for reading in result["readings"]:
                if "problem" not in reading and _storable(reading["meter"]):
                    doc = {k: v for k, v in reading.items() if k not in _NOT_STORED}
                    doc.setdefault("observed_ms", now)
                    fields.append(("set", reading["meter"], dumps(doc)))
        plan.edit_object(acmi.keys.signals(entity), fields, field="signals")
        plan.sadd(acmi.index_key(entity), entity.local_id)
        if result["changed"]:
            event = _event(acmi, result, now)
            acmi.timeline.stage(plan, entity, [event[0]], [event[1]])
            if alert is not None:
                acmi.timeline.stage(plan, alert, [event[0]], [event[1]])
    plan.apply(acmi.store)


def _event(acmi: Acmi, result: ProviderVerdict, now: int) -> tuple[Event, str]:
    name, status, before = result["provider"], result["status"], result["previous"]
    summary = f"[{status.upper()}] {name}: {result['headline']}"
    return encode_event(
        {
            "source": SOURCE,
            "kind": STATUS_CHANGED,
            "correlationId": f"quota-{name}-{now}",
            "summary": summary[: MAX_SUMMARY_LEN // 2],  # a code point: 2 UTF-16 units at most
            "payload": {
                "provider": name,
                "status": status,
                "previous": before,
                "ratio": result["ratio"],
                "readings": result["readings"],
            },
        },
        now_ms=now,
        tenant=acmi.keys.tenant,
    )

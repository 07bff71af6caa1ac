"""What the operator tools return, key by key: the quota check and a posted reading,
and the lines ``acmi doctor --json`` and ``acmi migrate --json`` print.

TypedDicts, so an answer is still the plain dict the CLI prints as JSON; mypy checks
each key the tool writes and each key a caller reads."""

# No `from __future__ import annotations`: on Python 3.11 a TypedDict's NotRequired keys
# are only seen as such when the annotation is evaluated at class creation.
from typing import NotRequired, TypedDict


class Problem(TypedDict):
    """Why a reading or a provider could not be judged."""

    field: str
    rule: str
    message: str


class ReadingDoc(TypedDict):
    """A reading as its ``<meter>`` signal stores it (numbers checked)."""

    remaining: int | float
    limit: int | float
    unit: NotRequired[str]
    resets_at: NotRequired[str | int]  # RFC 3339 text as providers send it, or ms
    observed_ms: NotRequired[int]


class QuotaReport(TypedDict):
    """``quota.report``: the reading as stored, under its provider and meter."""

    provider: str
    meter: str
    reading: ReadingDoc


class CheckedReading(TypedDict):
    """One reading classified. A reading whose numbers break a rule has no numbers and
    a ``problem``; one that is stale or has a limit of 0 has both."""

    meter: str
    status: str  # green | unknown | yellow | red
    ratio: float | None
    remaining: NotRequired[int | float]
    limit: NotRequired[int | float]
    unit: NotRequired[str]
    resets_at: NotRequired[str | int]
    observed_ms: NotRequired[int]
    problem: NotRequired[Problem]


class ProviderCheck(TypedDict):
    """One provider's verdict (``check_provider``): the worst of its readings."""

    provider: str
    status: str
    ratio: float | None
    headline: str
    readings: list[CheckedReading]
    problems: list[Problem]


class ProviderVerdict(ProviderCheck):
    """A verdict of ``monitor``: with the severity last recorded, and whether it is news."""

    previous: str | None
    changed: bool


class QuotaMonitor(TypedDict):
    """``quota.monitor``: every provider's verdict, and the worst of them."""

    status: str
    checked_at_ms: int
    providers: list[ProviderVerdict]
    recorded: bool


class FindingLine(TypedDict):
    """A doctor finding as ``--json`` prints it (``Finding.to_dict()``): unset values
    are left out."""

    kind: str  # a findings.Kind value
    key: str
    detail: str
    entity: NotRequired[str]
    tenant: NotRequired[str]
    counts: NotRequired[dict[str, int]]  # timeline members: legacy, invalid, unreadable
    destination: NotRequired[str]
    state: NotRequired[str]  # an MCP key's McpState value


class StepLine(TypedDict):
    """A migrate step as ``--json`` prints it (``Step.to_dict()``)."""

    action: str  # a migrate.Action value
    key: str
    detail: str
    entity: NotRequired[str]

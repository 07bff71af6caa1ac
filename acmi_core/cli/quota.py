"""``acmi quota-monitor`` (the reference's): each model provider's quota, green /
yellow (<= 25 % left) / red (<= 10 %); ``acmi quota report``: post a reading. On the
store; no provider is called unless ``--probe`` opts into a billed request."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from acmi_core.base.durations import parse_duration
from acmi_core.base.errors import AcmiValidationError
from acmi_core.cli.output import EXIT_PROBLEMS, emit, one_of, table
from acmi_core.cli.state import state
from acmi_core.ops import quota as core

app = typer.Typer()
report_app = typer.Typer(help="quota readings of model providers", no_args_is_help=True)
FAIL_ON = ("red", "yellow", "never")


@app.command("quota-monitor")
def quota_monitor(
    provider: Annotated[
        list[str] | None, typer.Option(help="only these providers (repeat); default: all reported")
    ] = None,
    record: Annotated[
        bool, typer.Option(help="store each verdict; post an event when one changes")
    ] = True,
    alert_to: Annotated[
        str | None, typer.Option(help="also post changes here, e.g. thread:ops")
    ] = None,
    max_age: Annotated[str, typer.Option(help="older readings count as unknown")] = "24h",
    probe: Annotated[
        bool,
        typer.Option(
            help="also ask Anthropic for its rate-limit headers: a BILLED one-token request "
            "(key: ANTHROPIC_API_KEY)"
        ),
    ] = False,
    fail_on: Annotated[
        str, typer.Option(help="exit 1 at this status: red | yellow | never")
    ] = "red",
) -> None:
    """Each provider's quota health; the overall status is the worst."""
    one_of("--fail-on", fail_on, FAIL_ON)
    acmi = state().acmi()
    providers: list[core.QuotaProvider] | None = None
    if provider:
        providers = [core.ReportedQuota(acmi, name) for name in provider]
    if probe:
        key = os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise AcmiValidationError("ANTHROPIC_API_KEY", "required", "--probe needs it set")
        chosen = core.default_providers(acmi) if providers is None else providers
        # the probe's fresh reading replaces what was reported for anthropic
        providers = [p for p in chosen if p.name != "anthropic"]
        providers.append(core.AnthropicProbe(key, billable=True))
    result = core.monitor(
        acmi,
        providers,
        record=record,
        alert_to=alert_to,
        max_age_ms=parse_duration(max_age, "--max-age"),
    )
    emit(result, state().output, _render)
    failing = {"red": ("red",), "yellow": ("yellow", "red"), "never": ()}[fail_on]
    if result["status"] in failing:
        raise typer.Exit(EXIT_PROBLEMS)


def _render(result: dict[str, Any]) -> Any:
    rows = [
        {
            "provider": p["provider"],
            "status": p["status"],
            "left": "" if p.get("ratio") is None else f"{p['ratio']:.0%}",
            "headline": p.get("headline"),
        }
        for p in result["providers"]
    ]
    return table(rows, ("provider", "status", "left", "headline"), f"quota: {result['status']}")


@report_app.command("report")
def report(
    provider: Annotated[str, typer.Argument(help="e.g. anthropic, gemini, openai")],
    meter: Annotated[str, typer.Argument(help="what is counted, e.g. tokens, requests")],
    remaining: Annotated[str, typer.Option(help="what is left")],
    limit: Annotated[str, typer.Option(help="the allowance")],
    unit: Annotated[str | None, typer.Option(help="e.g. tokens/min")] = None,
    resets_at: Annotated[str | None, typer.Option(help="when it refills (ISO 8601)")] = None,
) -> None:
    """Post a reading (what a pipeline does after reading a provider's usage page)."""
    posted = core.report(
        state().acmi(),
        provider,
        meter,
        remaining=core.quota_number(remaining, "--remaining"),
        limit=core.quota_number(limit, "--limit"),
        unit=unit,
        resets_at=resets_at,
    )
    emit(posted, state().output)

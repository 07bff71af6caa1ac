"""What the secret guard does not catch, as the README's limits table states it: each
case here is a real secret the scanner lets through. When a rule learns one, this test
fails and the table is updated with it."""

from __future__ import annotations

import base64

import pytest

from acmi_core.guard.secrets import scan

# Built at run time, so this file holds no literal credential for scanners to flag.
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"


def test_the_whole_value_is_caught() -> None:
    assert [f.rule for f in scan(STRIPE)] == ["stripe_secret_key"]


@pytest.mark.parametrize(
    "value",
    [
        {"key": STRIPE[:8], "rest": STRIPE[8:]},  # split across fields
        [STRIPE[:12], STRIPE[12:]],  # split across values
        base64.b64encode(STRIPE.encode()).decode(),  # base64
        STRIPE.encode().hex(),  # hex
        "password%3Dhunter2hunter2",  # percent-encoded key/value form
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",  # unnamed hex
    ],
    ids=["split-fields", "split-values", "base64", "hex", "percent-encoded", "unnamed-hex"],
)
def test_what_the_guard_does_not_catch(value: object) -> None:
    assert scan(value) == []

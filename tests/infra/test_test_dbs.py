"""Each test module that needs a Redis database of its own gets one from tests/kit.py's
tables, never a number of its own: two modules on one database flush or scan each other's
data when one pytest worker runs both."""

from __future__ import annotations

import re
from pathlib import Path

from acmi_core.testing.redis_server import DATABASES
from tests.kit import DB, TEST_DBS

TESTS = Path(__file__).resolve().parents[1]
# a module-level database constant with a literal number, or a literal database in a URL
HAND_NUMBERED = re.compile(r"^\w*DB\w* = \d+|url_for\(\d+\)", re.MULTILINE)


def test_every_database_is_from_the_table() -> None:
    numbered = [
        f"{path.relative_to(TESTS)}: {match.group(0)}"
        for path in sorted(TESTS.rglob("*.py"))
        for match in HAND_NUMBERED.finditer(path.read_text(encoding="utf-8"))
    ]
    assert numbered == []


def test_the_tables_share_no_database_and_fit_the_server() -> None:
    numbers = [*DB.values(), *TEST_DBS.values()]
    assert len(set(numbers)) == len(numbers)
    assert max(numbers) < DATABASES

"""The request record's limits, declared once in store/scripts.py, mirrored by each script
that keeps one."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from acmi_core.store import scripts

LUA = resources.files("acmi_core").joinpath("store/lua")
MIRROR = re.compile(r"local REPLAY_TTL_MS, REPLAY_MAX_BYTES = (\d+), (\d+)\n")


@pytest.mark.parametrize("name", ["apply", "bootstrap", "hitl", "locks"])
def test_each_script_mirrors_the_record_limits(name: str) -> None:
    (found,) = MIRROR.findall(LUA.joinpath(f"{name}.lua").read_text())
    assert tuple(map(int, found)) == (scripts.REPLAY_TTL_MS, scripts.REPLAY_MAX_BYTES)


def test_request_ids_are_fresh_per_call() -> None:
    ids = {scripts.new_request_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)

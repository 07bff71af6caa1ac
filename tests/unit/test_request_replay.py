"""The request record's limits, declared once in store/scripts.py, mirrored by each script
that keeps one."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from acmi_core.store import scripts

LUA = resources.files("acmi_core").joinpath("store/lua")
MIRROR = re.compile(r"local REPLAY_TTL_MS, REPLAY_MAX_BYTES = (\d+), (\d+)\n")


@pytest.mark.parametrize("name", ["apply", "bootstrap", "replay"])
def test_each_script_mirrors_the_record_limits(name: str) -> None:
    (found,) = MIRROR.findall(LUA.joinpath(f"{name}.lua").read_text())
    assert tuple(map(int, found)) == (scripts.REPLAY_TTL_MS, scripts.REPLAY_MAX_BYTES)


def test_request_ids_are_fresh_per_call() -> None:
    ids = {scripts.new_request_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


def test_the_record_code_is_written_once() -> None:
    """locks.lua, hitl.lua and hygiene.lua share replay.lua (put before each by
    scripts.py): no script carries its own copy of the record's limits or its writer."""
    for script in LUA.iterdir():
        text = script.read_text()
        if script.name not in ("apply.lua", "bootstrap.lua", "replay.lua"):
            assert not MIRROR.search(text), script.name
            assert "local function recorded" not in text, script.name
    for protocol in (scripts.LOCKS, scripts.HITL, scripts.HYGIENE, scripts.UNLOG):
        assert protocol.sources[-2:] == ("replay", protocol.name)
        assert all(c.keys[-1] == scripts.REPLAY_KEY for c in protocol.calls.values())

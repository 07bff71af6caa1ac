"""Every Python snippet in the README, run exactly as printed, as a reader pastes it: each
in a fresh interpreter on the embedded default store (no Upstash, no Redis URL, an empty
ACMI_HOME), and it must end with exit 0."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
SNIPPETS = re.findall(r"^```python\n(.*?)^```$", README, flags=re.DOTALL | re.MULTILINE)
# what would point a snippet at a real store (or another home) instead of the embedded one
STORE_VARIABLES = ("UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ACMI_REDIS_URL")


def test_the_readme_has_python_snippets() -> None:
    assert len(SNIPPETS) >= 3, "the README's Python snippets were not found"


@pytest.mark.parametrize("code", SNIPPETS, ids=lambda code: code.splitlines()[-1][:40])
def test_a_readme_python_snippet_runs_as_printed(code: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in STORE_VARIABLES}
    env.update(ACMI_HOME=str(tmp_path / "home"), ACMI_CONFIG=str(tmp_path / "absent.toml"))
    ran = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]


def test_the_first_snippet_writes_where_the_acmi_command_reads(tmp_path: Path) -> None:
    """Its comment says "else embedded": the data the `acmi` command and `acmi serve`
    share, so what the snippet left (it deletes user:mikey) is there for `acmi`."""
    env = {k: v for k, v in os.environ.items() if k not in STORE_VARIABLES}
    env.update(ACMI_HOME=str(tmp_path / "home"), ACMI_CONFIG=str(tmp_path / "absent.toml"))
    assert "else embedded" in SNIPPETS[0]
    for argv in (["-c", SNIPPETS[0]], ["-m", "acmi_core", "list", "agent", "--json"]):
        ran = subprocess.run(
            [sys.executable, *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr[-3000:]
    assert "agent:claude" in json.loads(ran.stdout)
    assert f"# store: embedded, {tmp_path / 'home'}" in ran.stderr

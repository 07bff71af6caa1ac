"""Big modules: a module of acmi_core over ``MAX_LINES`` lines says, at the top of its
docstring, why it is one module, in a paragraph starting "One module:". A module that
mixes concerns is split instead (ARCHITECTURE.md's "Where things go" names the parts)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

PACKAGE: Final = Path(__file__).resolve().parents[2] / "acmi_core"
MAX_LINES: Final = 600
MARK: Final = "One module:"
# Fewer words than this after the mark is a label, not a reason.
MIN_REASON_WORDS: Final = 8


def one_module_reason(source: str) -> str | None:
    """The text of the module docstring's paragraph that starts with MARK (after it), or
    None when the docstring has no such paragraph."""
    docstring = ast.get_docstring(ast.parse(source), clean=True) or ""
    for paragraph in docstring.split("\n\n"):
        text = " ".join(paragraph.split())
        if text.startswith(MARK):
            return text.removeprefix(MARK).strip()
    return None


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def _big_modules() -> dict[str, str]:
    """Every module of acmi_core over MAX_LINES lines: its name -> its source."""
    big = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if len(source.splitlines()) > MAX_LINES:
            big[_name(path)] = source
    return big


def test_every_big_module_says_why_it_is_one_module() -> None:
    missing = []
    for name, source in _big_modules().items():
        reason = one_module_reason(source)
        if reason is None or len(reason.split()) < MIN_REASON_WORDS:
            lines = len(source.splitlines())
            missing.append(f"{name} ({lines} lines)")
    assert not missing, (
        f"over {MAX_LINES} lines with no '{MARK} <why>' paragraph in the module docstring "
        f"(split the module where it mixes concerns, or say why it is one): {missing}"
    )


def test_the_reason_is_a_paragraph_of_the_module_docstring() -> None:
    said = '"""Summary.\n\nOne module: its parts change\n    together, always.\n"""\nx = 1\n'
    assert one_module_reason(said) == "its parts change together, always."
    # inside another paragraph, in a comment, or in a function's docstring: not said
    inline = '"""Summary. One module: because."""\n'
    comment = '"""Summary."""\n# One module: because.\n'
    nested = '"""Summary."""\n\n\ndef f() -> None:\n    """One module: because."""\n'
    assert [one_module_reason(s) for s in (inline, comment, nested)] == [None, None, None]

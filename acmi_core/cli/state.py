"""Where a command works, from the global options: the store (the same configuration
as ``create_acmi()``, including the shared local store) or a deployed API (``--api URL``
with ``ACMI_API_KEY``, or a profile of the config file).

The config file (``$ACMI_CONFIG``, else ``$XDG_CONFIG_HOME/acmi/config.toml``, else
``~/.config/acmi/config.toml``)::

    default_profile = "prod"

    [profiles.prod]
    api = "https://abc123.execute-api.eu-west-1.amazonaws.com"
    key_env = "ACMI_PROD_KEY"      # the key is read from this variable

A profile may hold ``key = "acmi_..."`` instead, only in a file nobody else can read
(mode 0600), the rule ssh applies to private keys.
"""

from __future__ import annotations

import os
import stat
import tomllib
from contextlib import ExitStack
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acmi_core import Acmi, Settings, create_acmi
from acmi_core.auth import apikeys
from acmi_core.base.errors import AcmiValidationError
from acmi_core.cli.backend import Backend, LocalBackend
from acmi_core.cli.output import Output, note
from acmi_core.store import describe_store, open_store

KEY_ENV = "ACMI_API_KEY"


@dataclass
class Remote:
    url: str
    key: str = field(repr=False)  # never shown


@dataclass
class CliState:
    """The global options of one invocation, and what they open (closed at exit)."""

    output: Output = Output.AUTO
    tenant: str | None = None
    api: str | None = None
    profile: str | None = None
    preset: Acmi | None = None  # a client to use instead of opening the store (tests)
    resources: ExitStack = field(default_factory=ExitStack)

    def remote(self) -> Remote | None:
        """The API to call, from ``--api`` or the profile; None: the store."""
        settings = self._profile()
        url = self.api or settings.get("api")
        if not url:
            return None
        if self.tenant is not None:
            raise AcmiValidationError(
                "--tenant", "remote_tenant", "cannot be chosen with --api: the key decides it"
            )
        from acmi_core.cli.remote import check_api_url

        check_api_url(str(url))  # an unsafe URL is refused before the key is even looked for
        key = os.environ.get(settings.get("key_env") or KEY_ENV) or settings.get("key")
        if not key:
            raise AcmiValidationError(
                KEY_ENV,
                "required",
                f"set {settings.get('key_env') or KEY_ENV} to an API key for {url}",
            )
        return Remote(str(url), str(key))

    def backend(self) -> Backend:
        """The store or the API, whichever the options name."""
        remote = self.remote()
        if remote is None:
            return LocalBackend(self.acmi(), "store")
        from acmi_core.cli.remote import HttpBackend

        backend = HttpBackend(remote.url, remote.key)
        self.resources.callback(backend.close)
        note(f"# {backend.label}")
        return backend

    def acmi(self, *, throwaway: bool = False) -> Acmi:
        """The client on the configured store; ``throwaway``: a fresh embedded store (the
        samples of ``demo`` and ``invoke`` never land in the data others share)."""
        if self.api is not None or self._profile().get("api"):
            raise AcmiValidationError(
                "--api", "store_only", "this command works on the store directly, not an API"
            )
        if self.preset is not None:
            return self.preset if self.tenant is None else self.preset.for_tenant(self.tenant)
        settings = Settings.from_env()
        store = open_store(settings, local=not throwaway)
        self.resources.callback(store.close)
        shown = describe_store(store)
        if throwaway and store.name == apikeys.EMBEDDED_STORE:
            from acmi_core.store.local import data_dir

            shown = f"embedded, throwaway (samples stay out of {data_dir(settings)})"
        note(f"# store: {shown}")
        return create_acmi(store, settings, tenant=self.tenant)

    def _profile(self) -> dict[str, Any]:
        name = self.profile or os.environ.get("ACMI_PROFILE")
        path = config_path()
        if not path.exists():
            if name:
                raise AcmiValidationError("--profile", "exists", f"{name!r}: no {path}")
            return {}
        config = read_config(path)
        name = name or config.get("default_profile")
        if not name:
            return {}
        profiles = config.get("profiles", {})
        if not isinstance(profiles, dict) or not isinstance(profiles.get(name), dict):
            raise AcmiValidationError("--profile", "exists", f"{name!r} is not in {path}")
        profile: dict[str, Any] = profiles[name]
        if "key" in profile and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise AcmiValidationError(
                f"profiles.{name}.key",
                "private_file",
                f"{path} holds a key and others can read it: chmod 600 it, or use key_env",
            )
        return profile


def config_path() -> Path:
    if os.environ.get("ACMI_CONFIG"):
        return Path(os.environ["ACMI_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "acmi" / "config.toml"


def read_config(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise AcmiValidationError("ACMI_CONFIG", "toml", f"{path}: {exc}") from None


CURRENT: ContextVar[CliState] = ContextVar("acmi_cli_state")


def state() -> CliState:
    """The invocation's state (the root callback sets it before any command runs)."""
    return CURRENT.get()

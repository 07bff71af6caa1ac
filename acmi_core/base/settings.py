"""Settings: the one environment model. Every variable ACMI is configured by is listed in
:data:`ENVIRONMENT` and parsed there, and a bad value raises an error that names the
variable. Nothing in acmi_core writes the environment; entry points (the CLI, the Lambda
kit) pass a mapping in where they need another one."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import EntityId, check_tenant


@dataclass(frozen=True)
class Settings:
    """Everything configurable, with defaults that work on a laptop.

    ``store_timeout_s`` bounds one store call *including* its retries, so a backend
    that accepts and never answers fails within it.
    """

    default_tenant: str = "default"
    upstash_url: str | None = None
    upstash_token: str | None = field(default=None, repr=False)
    # Lambda: the token lives in Secrets Manager; functions/ resolves it on a cold start.
    upstash_token_secret_arn: str | None = None
    redis_url: str | None = field(default=None, repr=False)
    # the embedded store's data directory (None: $XDG_DATA_HOME/acmi or ~/.local/share/acmi)
    home: str | None = None
    store_timeout_s: float = 5.0
    store_max_attempts: int = 4
    retry_base_delay_s: float = 0.05
    retry_max_delay_s: float = 1.0
    # HTTP API
    api_key: str | None = field(default=None, repr=False)  # pre-registered admin key (local)
    auth_cache_s: float = 30.0  # how long a warm process trusts a key or source lookup
    max_body_bytes: int = 256 * 1024
    max_batch_events: int = 100
    # Idempotency records: explicit keys and Pub/Sub ids outlive Pub/Sub's 7-day retry
    # window; keys derived from the body (n8n, Make) are short-lived, so that a sender
    # posting the same body again tomorrow is a new delivery, not a replay.
    idempotency_ttl_s: int = 7 * 24 * 3600
    derived_idempotency_ttl_s: int = 6 * 3600
    # scheduled jobs: who escalations and the daily brief go to
    operator: str = "user:operator"
    # rollups (acmi_core.jobs.summarizers): extractive, anthropic:<model>, openai:<model> or
    # bedrock:<model-id>
    summarizer: str = "extractive"
    anthropic_api_key: str | None = field(default=None, repr=False)
    openai_api_key: str | None = field(default=None, repr=False)
    llm_base_url: str | None = None  # an OpenAI-compatible (or Anthropic) endpoint
    # memory hygiene: where raw archived events go (s3://bucket/prefix; None: nowhere, and
    # then nothing is trimmed from a live timeline)
    archive_url: str | None = None
    # what a write carrying a secret gets (acmi_core.guard.secrets): refused, or stored redacted
    secret_policy: str = "reject"

    def __post_init__(self) -> None:
        for var in ENVIRONMENT:
            var.check(getattr(self, var.field))
        if self.retry_base_delay_s < 0 or self.retry_max_delay_s < 0:
            raise AcmiValidationError("retry_delay_s", "non_negative", "must be >= 0")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``env`` (default: the process environment). Unset or empty
        variables keep their defaults."""
        env = os.environ if env is None else env
        values = {var.field: var.parse(env[var.name]) for var in ENVIRONMENT if env.get(var.name)}
        return cls(**values)

    def secret_policy_for(self, tenant: str) -> str:
        """The secret policy of ``tenant``: its override in ``secret_policy``, else the
        default there (``reject`` or ``redact``)."""
        default, overrides = secret_policies(self.secret_policy)
        return overrides.get(tenant, default)

    @property
    def needs_token_secret(self) -> bool:
        return bool(self.upstash_token_secret_arn) and not self.upstash_token


# --- the variables ---------------------------------------------------------------------------


def _text(name: str, raw: str) -> str:
    return raw


def _integer(name: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise AcmiValidationError(name, "integer", f"must be an integer, got {raw!r}") from None


def _number(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise AcmiValidationError(name, "number", f"must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise AcmiValidationError(name, "number", f"must be a finite number, got {raw!r}")
    return value


def _at_least(minimum: float, *, exclusive: bool = False) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value < minimum or (exclusive and value == minimum):
            bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
            raise AcmiValidationError(name, "range", f"must be {bound}, got {value!r}")

    return check


def _tenant(name: str, value: Any) -> None:
    check_tenant(value, name)


def _entity_id(name: str, value: Any) -> None:
    EntityId.parse(value, name)


def _url(*schemes: str) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value is not None and not str(value).startswith(schemes):
            raise AcmiValidationError(name, "url", f"must start with {' or '.join(schemes)}")

    return check


def _arn(name: str, value: Any) -> None:
    if value is not None and not str(value).startswith("arn:"):
        raise AcmiValidationError(name, "arn", "must be a Secrets Manager ARN (arn:...)")


def _secret_length(name: str, value: Any) -> None:
    if value is not None and len(value) < 24:
        raise AcmiValidationError(name, "min_length", "must be at least 24 characters")


def _anything(name: str, value: Any) -> None:
    return None


# A Bedrock model id is "<provider>.<model>", with an inference profile's geography in
# front ("us.anthropic.claude-..."): lowercase, as Bedrock spells them. ARNs are refused
# (the function's policy allows foundation models and inference profiles only).
SUMMARIZER: Final = re.compile(
    r"extractive|(anthropic|openai):[A-Za-z0-9._:/@-]{1,100}"
    r"|bedrock:[a-z0-9-]{1,32}\.[a-z0-9][a-z0-9.:-]{0,99}"
)
SUMMARIZER_RULE: Final = (
    "must be extractive, anthropic:<model>, openai:<model> or bedrock:<model-id>"
)


def _summarizer(name: str, value: Any) -> None:
    if not SUMMARIZER.fullmatch(str(value)):
        raise AcmiValidationError(name, "summarizer", SUMMARIZER_RULE)


ARCHIVE_URL: Final = re.compile(r"([a-z][a-z0-9+.-]*)://([^/\s]+)(?:/(\S*))?")
ARCHIVE_URL_RULE: Final = "must be <scheme>://<bucket>[/<prefix>], e.g. s3://my-bucket/acmi-archive"
SECRET_POLICIES: Final = ("reject", "redact")


def _archive_url(name: str, value: Any) -> None:
    if value is not None and not ARCHIVE_URL.fullmatch(str(value)):
        raise AcmiValidationError(name, "archive_url", ARCHIVE_URL_RULE)


SECRET_POLICY_RULE: Final = (
    "must be reject or redact, optionally followed by per-tenant overrides:"
    " <default>,<tenant>=<policy>,... e.g. reject,acme=redact"
)


def secret_policies(spec: str, name: str = "ACMI_SECRET_POLICY") -> tuple[str, dict[str, str]]:
    """``reject`` | ``redact`` | ``<default>,<tenant>=<policy>,...`` (a default is
    optional when overrides are given: ``acme=redact`` keeps ``reject`` for the others)
    -> (the default, {tenant: policy}). A bad part raises an error naming ``name``."""
    default: str | None = None
    overrides: dict[str, str] = {}
    for raw in str(spec).split(","):
        part = raw.strip()
        tenant, eq, policy = part.rpartition("=")
        policy = policy.strip()
        if policy not in SECRET_POLICIES:
            raise AcmiValidationError(name, "secret_policy", f"{SECRET_POLICY_RULE}; got {part!r}")
        if not eq:
            if default is not None:
                raise AcmiValidationError(name, "secret_policy", "names the default twice")
            default = policy
            continue
        tenant = check_tenant(tenant.strip(), name)
        if tenant in overrides:
            raise AcmiValidationError(name, "secret_policy", f"names tenant {tenant} twice")
        overrides[tenant] = policy
    return default or SECRET_POLICIES[0], overrides


def _secret_policy(name: str, value: Any) -> None:
    secret_policies(value, name)


@dataclass(frozen=True)
class EnvVar:
    """One environment variable: the Settings field it sets, its parser and its rule."""

    name: str
    field: str
    doc: str
    parser: Callable[[str, str], Any] = _text
    rule: Callable[[str, Any], None] = _anything

    def parse(self, raw: str) -> Any:
        value = self.parser(self.name, raw)
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        self.rule(self.name, value)


ENVIRONMENT: Final[tuple[EnvVar, ...]] = (
    EnvVar(
        "ACMI_DEFAULT_TENANT",
        "default_tenant",
        "tenant whose keys use the reference layout",
        rule=_tenant,
    ),
    EnvVar(
        "UPSTASH_REDIS_REST_URL",
        "upstash_url",
        "Upstash REST URL (with a token: the Upstash store)",
        rule=_url("https://", "http://"),
    ),
    EnvVar("UPSTASH_REDIS_REST_TOKEN", "upstash_token", "Upstash REST token"),
    EnvVar(
        "ACMI_UPSTASH_TOKEN_SECRET_ARN",
        "upstash_token_secret_arn",
        "Secrets Manager ARN holding the Upstash token (Lambda)",
        rule=_arn,
    ),
    EnvVar(
        "ACMI_REDIS_URL",
        "redis_url",
        "redis:// or rediss:// URL (the Redis store)",
        rule=_url("redis://", "rediss://", "unix://"),
    ),
    EnvVar(
        "ACMI_HOME",
        "home",
        "data directory of the embedded store (default $XDG_DATA_HOME/acmi or ~/.local/share/acmi)",
    ),
    EnvVar(
        "ACMI_STORE_TIMEOUT_S",
        "store_timeout_s",
        "deadline of one store call, retries included",
        _number,
        _at_least(0, exclusive=True),
    ),
    EnvVar(
        "ACMI_STORE_MAX_ATTEMPTS",
        "store_max_attempts",
        "attempts per store call (429/5xx/network)",
        _integer,
        _at_least(1),
    ),
    EnvVar(
        "ACMI_API_KEY",
        "api_key",
        "an admin key of the default tenant, registered on start (local runs)",
        rule=_secret_length,
    ),
    EnvVar(
        "ACMI_AUTH_CACHE_S",
        "auth_cache_s",
        "how long a warm process trusts a key or source-config lookup",
        _number,
        _at_least(0),
    ),
    EnvVar(
        "ACMI_MAX_BODY_BYTES",
        "max_body_bytes",
        "request body cap (413 beyond)",
        _integer,
        _at_least(1),
    ),
    EnvVar(
        "ACMI_IDEMPOTENCY_TTL_S",
        "idempotency_ttl_s",
        "how long explicit and Pub/Sub delivery ids are remembered",
        _integer,
        _at_least(1),
    ),
    EnvVar(
        "ACMI_OPERATOR",
        "operator",
        "entity id of the human operator: escalations (HITL) and the daily brief go there",
        rule=_entity_id,
    ),
    EnvVar(
        "ACMI_SUMMARIZER",
        "summarizer",
        "how rollup-cron summarizes: extractive (offline), anthropic:<model>, openai:<model>,"
        " bedrock:<model-id>",
        rule=_summarizer,
    ),
    EnvVar("ANTHROPIC_API_KEY", "anthropic_api_key", "API key of the anthropic summarizer"),
    EnvVar("OPENAI_API_KEY", "openai_api_key", "API key of the openai summarizer"),
    EnvVar(
        "ACMI_LLM_BASE_URL",
        "llm_base_url",
        "base URL of the LLM API (an OpenAI-compatible server; default: the provider's)",
        rule=_url("https://", "http://"),
    ),
    EnvVar(
        "ACMI_ARCHIVE_URL",
        "archive_url",
        "where memory hygiene writes raw archived events (s3://bucket/prefix); unset: the"
        " live timeline is never trimmed",
        rule=_archive_url,
    ),
    EnvVar(
        "ACMI_SECRET_POLICY",
        "secret_policy",
        "a write carrying a secret (API key, token, password, card, id number): reject"
        " (422, the default) or redact, then per-tenant overrides: reject,acme=redact",
        rule=_secret_policy,
    ),
    EnvVar(
        "ACMI_DERIVED_IDEMPOTENCY_TTL_S",
        "derived_idempotency_ttl_s",
        "how long body-derived delivery ids are remembered",
        _integer,
        _at_least(1),
    ),
)

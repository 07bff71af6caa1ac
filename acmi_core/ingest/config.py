"""Per-tenant source configuration: how a webhook source authenticates and maps.

Stored at ``acmi:_source:<tenant>:<source>`` (JSON). The push token is stored only as a
hash, plus a global ``acmi:_pushtoken:<sha256>`` -> {tenant, source} so that a sender
that can only put a token in its URL is found without knowing its tenant. The HMAC
secret must be stored as is: verifying an HMAC needs it.

A stored config that cannot be read (not JSON, unknown or mistyped fields, a secret too
short to be one, another Redis type) is never taken for "no config": that would skip its
HMAC check. Reading it raises :class:`SourceConfigUnreadable` (a 503: senders retry
while the operator fixes it), and updating it needs ``replace=True``.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from typing import Any, Final, TypedDict, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from acmi_core.base.errors import AcmiValidationError, CorruptData, StoreCommandError, Unavailable
from acmi_core.base.keys import Keys, internal_global
from acmi_core.base.model import EntityId, dumps
from acmi_core.ingest.mapping import check_mapping
from acmi_core.ingest.sources import SOURCES, check_source, source_spec
from acmi_core.store.base import Store
from acmi_core.store.writes import WritePlan

MIN_HMAC_SECRET: Final = 16  # characters
# A Secrets Manager secret ARN (any partition and region): the Gmail OAuth credentials are
# named by it and fetched by the Lambda at push time, never stored here. Secret names are
# at most 512 characters (plus the 7 Secrets Manager appends).
GMAIL_SECRET_ARN_PATTERN: Final = (
    r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]{1,32}:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]{1,519}$"
)
UNREADABLE_RETRY_AFTER_S: Final = 60.0


class SourceConfig(BaseModel):
    """Everything optional: a source with no config takes API keys and default mapping."""

    model_config = ConfigDict(extra="forbid")

    source: str
    kind: str = Field(
        description="the source table entry it uses: make, n8n, gmail, generic, slack, github,"
        " vapi",
    )
    hmac_secret: str | None = Field(default=None, repr=False, min_length=MIN_HMAC_SECRET)
    push_token_hash: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    oidc_audience: str | None = Field(default=None, min_length=1)
    oidc_email: str | None = Field(default=None, min_length=1)
    entity: str | None = Field(default=None, min_length=1)  # for deliveries that name none
    # make, n8n, generic: event field -> dotted path or '=literal' (category: a name);
    # mapped fields win over the well-known names make and n8n look for.
    mapping: dict[str, str] | None = None
    # gmail: the Secrets Manager ARN of the mailbox's OAuth credentials (Google's
    # authorized_user JSON); the ARN only, never the secret.
    gmail_credentials_secret: str | None = Field(default=None, pattern=GMAIL_SECRET_ARN_PATTERN)

    @field_validator("mapping")
    @classmethod
    def _valid_mapping(cls, mapping: dict[str, str] | None) -> dict[str, str] | None:
        return None if mapping is None else check_mapping(mapping)


# ``sources.set``'s answer: the config as stored, and a new push token (shown once) or None
SourceSet = tuple[SourceConfig, str | None]


class SourceConfigUnreadable(Unavailable):
    """The stored config of a source cannot be read: its deliveries are refused (503)
    rather than accepted without the checks it may hold. ``problems`` says what is wrong
    (field locations and error kinds, never a value) for the log."""

    code = "source_config_unreadable"

    def __init__(self, tenant: str, source: str, problems: list[str]) -> None:
        super().__init__(
            f"source: the stored configuration of source {source!r} cannot be read, so "
            "no delivery is accepted until the operator sets it again; retry later",
            retry_after=UNREADABLE_RETRY_AFTER_S,
            field="source",
            rule="readable_config",
        )
        self.tenant = tenant
        self.source = source
        self.problems = problems


def _config_key(keys: Keys, source: str) -> str:
    return keys.internal("source", source)


def _push_token_key(digest: str) -> str:
    return internal_global("pushtoken", digest)


def push_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _problems(exc: PydanticValidationError) -> list[str]:
    # locations and error types only: pydantic's messages and inputs may hold the secret
    return [
        f"{'.'.join(str(p) for p in error['loc']) or '<root>'}: {error['type']}"
        for error in exc.errors(include_input=False, include_context=False, include_url=False)
    ]


def _parse(raw: object, keys: Keys, source: str) -> SourceConfig | None:
    if raw is None:
        return None
    if not isinstance(raw, bytes):
        raise SourceConfigUnreadable(keys.tenant, source, [f"<root>: {type(raw).__name__}"])
    try:
        config = SourceConfig.model_validate_json(raw)
    except PydanticValidationError as exc:
        raise SourceConfigUnreadable(keys.tenant, source, _problems(exc)) from None
    if config.source != source or config.kind != source_spec(source).name:
        raise SourceConfigUnreadable(keys.tenant, source, ["source/kind: another source's"])
    return config


def get_config(store: Store, keys: Keys, source: str) -> SourceConfig | None:
    """The source's config; None when it has none. :class:`SourceConfigUnreadable` when
    one is stored but cannot be read."""
    try:
        raw = store.execute(("GET", _config_key(keys, source)))
    except StoreCommandError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        # another Redis type sits at the key
        raise SourceConfigUnreadable(keys.tenant, source, ["<root>: wrong_type"]) from None
    return _parse(raw, keys, source)


def _stray_push_token_hash(raw: object) -> str | None:
    """The push token hash an unreadable config may still show, to delete its record."""
    try:
        data = json.loads(raw) if isinstance(raw, bytes) else None
    except ValueError:
        return None
    found = data.get("push_token_hash") if isinstance(data, dict) else None
    return found if isinstance(found, str) and len(found) == 64 else None


def _check_not_both(setting: bool, removing: bool, field: str) -> None:
    if setting and removing:
        raise AcmiValidationError(
            f"remove_{field}", "conflict", f"conflicts with {field}: set it or remove it"
        )


def put_config(
    store: Store,
    keys: Keys,
    source: str,
    *,
    hmac_secret: str | None = None,
    remove_hmac_secret: bool = False,
    new_push_token: bool = False,
    remove_push_token: bool = False,
    oidc_audience: str | None = None,
    oidc_email: str | None = None,
    remove_oidc: bool = False,
    entity: str | None = None,
    remove_entity: bool = False,
    mapping: dict[str, str] | None = None,
    remove_mapping: bool = False,
    gmail_credentials_secret: str | None = None,
    remove_gmail_credentials_secret: bool = False,
    replace: bool = False,
) -> SourceSet:
    """Create or update a source's config. What is given changes, what a ``remove_*``
    flag names is removed, everything else stays as stored. ``replace``: start from an
    empty config instead (the way to overwrite one that cannot be read). Returns
    (config, push token shown once)."""
    kind = source_spec(check_source(source)).name
    _check_not_both(hmac_secret is not None, remove_hmac_secret, "hmac_secret")
    _check_not_both(new_push_token, remove_push_token, "push_token")
    _check_not_both(oidc_audience is not None or oidc_email is not None, remove_oidc, "oidc")
    _check_not_both(entity is not None, remove_entity, "entity")
    _check_not_both(mapping is not None, remove_mapping, "mapping")
    if hmac_secret is not None and len(hmac_secret) < MIN_HMAC_SECRET:
        raise AcmiValidationError(
            "hmac_secret", "min_length", f"must be at least {MIN_HMAC_SECRET} characters"
        )
    if entity is not None:
        EntityId.parse(entity, "entity")
    if mapping is not None:
        check_mapping(mapping)
        if not source_spec(source).mapping:
            readers = ", ".join(spec.name for spec in SOURCES if spec.mapping)
            raise AcmiValidationError(
                "mapping", "unsupported", f"{kind} sources read no mapping (only {readers})"
            )

    _check_gmail_args(gmail_credentials_secret, remove_gmail_credentials_secret, kind)

    key = _config_key(keys, source)
    raw = store.execute(("GET", key))
    previous: SourceConfig | None = None
    old_token_hash: str | None
    if replace:
        old_token_hash = _stray_push_token_hash(raw)
    else:
        try:
            previous = _parse(raw, keys, source)
        except SourceConfigUnreadable:
            raise CorruptData(
                f"source {source!r}: the stored config is unreadable (corrupted or written "
                "by another tool); nothing was changed. Write a new one whole with "
                f"`acmi sources set {source} --replace ...` (replace=True)",
                field="source",
            ) from None
        old_token_hash = previous.push_token_hash if previous else None

    data: dict[str, Any] = previous.model_dump() if previous else {}
    data.update(source=source, kind=kind)
    for field, given, remove in (
        ("hmac_secret", hmac_secret, remove_hmac_secret),
        ("oidc_audience", oidc_audience, remove_oidc),
        ("oidc_email", oidc_email, remove_oidc),
        ("entity", entity, remove_entity),
        ("mapping", mapping, remove_mapping),
        ("gmail_credentials_secret", gmail_credentials_secret, remove_gmail_credentials_secret),
    ):
        if given is not None:
            data[field] = given
        elif remove:
            data[field] = None
    if (data.get("oidc_audience") is None) != (data.get("oidc_email") is None):
        raise AcmiValidationError(
            "oidc", "pair", "give both oidc_audience and oidc_email (or remove both)"
        )
    token = f"acmipt_{secrets.token_urlsafe(32)}" if new_push_token else None
    if token is not None:
        data["push_token_hash"] = push_token_hash(token)
    elif remove_push_token or replace:
        data["push_token_hash"] = None
    config = SourceConfig(**data)

    plan = WritePlan()
    plan.set(key, dumps(config.model_dump(exclude_none=True)))
    if old_token_hash and old_token_hash != config.push_token_hash:
        plan.delete(_push_token_key(old_token_hash))
    if token is not None and config.push_token_hash:
        plan.set(
            _push_token_key(config.push_token_hash),
            dumps({"tenant": keys.tenant, "source": source}),
        )
    plan.apply(store)
    return config, token


def _check_gmail_args(arn: str | None, remove: bool, kind: str) -> None:
    _check_not_both(arn is not None, remove, "gmail_credentials_secret")
    if arn is not None:
        check_gmail_credentials_secret(arn, kind)


def check_gmail_credentials_secret(arn: str, kind: str) -> None:
    """A Secrets Manager ARN, for a gmail source. The refusal never repeats the value:
    someone may have pasted the secret itself."""
    if kind != "gmail":
        raise AcmiValidationError(
            "gmail_credentials_secret", "unsupported", f"{kind} sources fetch no Gmail mail"
        )
    if not re.fullmatch(GMAIL_SECRET_ARN_PATTERN, arn):
        raise AcmiValidationError(
            "gmail_credentials_secret",
            "arn",
            "must be a Secrets Manager secret ARN "
            "(arn:aws:secretsmanager:<region>:<account>:secret:<name>), never the secret itself",
        )


def resolve_push_token(store: Store, token: str) -> tuple[str, str] | None:
    """(tenant, source) of a push token, or None (also for a record that cannot be read:
    the token is then unknown, never accepted)."""
    raw = store.execute(("GET", _push_token_key(push_token_hash(token))))
    try:
        data = json.loads(raw) if isinstance(raw, bytes) else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    tenant, source = data.get("tenant"), data.get("source")
    if not isinstance(tenant, str) or not isinstance(source, str):
        return None
    return tenant, source


# --- what the operator sees: configs without their secrets ---------------------------------


class ShownSource(TypedDict, total=False):
    """``sources.get``'s answer (and each of ``sources.list``'s): a source as shown, what
    is set of it and never a secret; ``readable`` is false for a config that cannot be
    read (``source`` alone beside it)."""

    source: str
    kind: str
    configured: bool
    readable: bool
    hmac_secret: str  # "***"
    push_token: str  # "set"
    oidc_audience: str
    oidc_email: str
    entity: str
    mapping: dict[str, str]
    gmail_credentials_secret: str


ShownSources = list[ShownSource]
# A SCAN step of `list_configs` (run by hand, as doctor is: O(the keyspace))
LIST_SCAN_COUNT: Final = 1000


def shown_config(source: str, config: SourceConfig | None) -> ShownSource:
    """A source as ``acmi sources get`` shows it: what is configured, never a secret (an
    HMAC secret is ``"***"``; a push token, stored as its hash only, is ``"set"``)."""
    if config is None:
        return {"source": source, "kind": source_spec(source).name, "configured": False}
    stored = config.model_dump(exclude_none=True)
    shown: dict[str, Any] = {"source": stored.pop("source"), "kind": stored.pop("kind")}
    shown |= {"configured": True, **stored}
    if "hmac_secret" in shown:
        shown["hmac_secret"] = "***"
    if shown.pop("push_token_hash", None) is not None:
        shown["push_token"] = "set"
    return cast(ShownSource, shown)


def describe_source(store: Store, keys: Keys, source: str) -> ShownSource:
    """One source of the tenant, configured or not (one GET)."""
    check_source(source)
    return shown_config(source, get_config(store, keys, source))


def list_configs(store: Store, keys: Keys, configured: bool = False) -> ShownSources:
    """Every source of the tenant: each sender of the table (configured or not; with
    ``configured``, only those that are) and every named one configured
    (``n8n-billing``), sorted by name; a config that cannot be read is listed as
    ``{"source", "readable": false}``. Finds the named ones by SCAN (an operator's
    command, run by hand as doctor is: O(the keyspace)), through ``ops/keyspace.py``
    ``scan_batches``, so on a Redis Cluster each primary's SCAN in turn (the cluster
    client's per-node scan: the store refuses a SCAN with no single answer)."""
    from acmi_core.ops.keyspace import scan_batches  # an operator's: not on a cold start

    prefix = _config_key(keys, "")
    names = set() if configured else {spec.name for spec in SOURCES}
    for found in scan_batches(store, prefix + "*"):
        for key in found:
            name = key.decode("utf-8", "replace")[len(prefix) :]
            if ":" not in name:  # another kind whose prefix this one is: not a source
                names.add(name)
    shown: ShownSources = []
    for name in sorted(names):
        try:
            shown.append(describe_source(store, keys, name))
        except SourceConfigUnreadable:
            shown.append({"source": name, "readable": False})
        except AcmiValidationError:
            continue  # a key another tool wrote that names no source of ours
    return shown

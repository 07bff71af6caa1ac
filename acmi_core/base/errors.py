"""One exception family. Every message names the field (or key) and the rule broken.

HTTP mapping lives in one place (the API layer); here only the meaning:

- AcmiValidationError: the caller's input breaks a rule (4xx). Nothing was stored.
- Unauthenticated / Forbidden: no or unknown credentials / not allowed (401 / 403).
- RateLimited: allowed, but not again before ``retry_after`` seconds (a key's hourly
  allowance spent: 429 + Retry-After). Nothing was written.
- NotFound: the thing asked for does not exist.
- Conflict: a concurrent writer won and the retry deadline passed; Pending: a write that
  needs nothing pending found something pending (a workflow step's unassessed run).
- CorruptData: stored data (often written by another tool) cannot be used as asked.
- Unavailable: something we depend on failed for now (the store, Google's keys); the
  caller should retry after ``retry_after`` seconds (503 + Retry-After).
- StoreError and its kinds: the backend failed; Throttled, StoreBusy and StoreUnavailable
  are Unavailable, StoreAuthError is a misconfiguration.
- PlanError: the write script refused a plan. Only a bug in the code that built the plan
  can cause it, never the caller's input.
"""

from __future__ import annotations


class AcmiError(Exception):
    """Base of every error ACMI raises on purpose.

    Every error names a ``field`` (what the caller or operator should look at) and a
    ``rule`` (the name of what failed); a raise site gives both where it knows better
    than the class defaults, so every HTTP error body carries all four keys."""

    code = "acmi_error"
    default_field = "request"
    default_rule = "acmi_error"

    def __init__(self, message: str, *, field: str | None = None, rule: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field: str = field if field is not None else self.default_field
        self.rule: str = rule if rule is not None else self.default_rule


class AcmiValidationError(AcmiError, ValueError):
    """Input breaks a rule: ``field`` is a dotted path (``event.summary``), ``rule`` a name."""

    code = "validation_error"

    def __init__(self, field: str, rule: str, message: str) -> None:
        super().__init__(f"{field}: {message}", field=field, rule=rule)


class PayloadTooLarge(AcmiValidationError):
    """The request body is over the documented cap."""

    code = "payload_too_large"


class IdempotencyKeyReused(AcmiValidationError):
    """An Idempotency-Key sent again with a different request (another body, entity or
    URL): HTTP 422, as the IETF Idempotency-Key draft asks, instead of a silent replay
    of another request's response. Nothing was stored."""

    code = "idempotency_key_reused"

    def __init__(self, message: str) -> None:
        super().__init__("Idempotency-Key", "reused", message)


class SecretDetected(AcmiValidationError):
    """A value to be stored holds a secret (an API key, a password, a card number: the
    rules of ``acmi_core.guard.secrets``) and the tenant's policy is ``reject``: HTTP 422.
    ``field`` is the JSON path of the first finding, ``rule`` its rule id; ``findings``
    holds them all. Neither the message nor the findings contain the secret. Nothing
    was stored."""

    code = "secret_detected"

    def __init__(self, field: str, rule: str, message: str, findings: tuple[object, ...]) -> None:
        super().__init__(field, rule, message)
        self.findings = findings


class BudgetTooSmall(AcmiValidationError):
    """A bootstrap budget (``max_tokens`` or ``max_bytes``) below what the bundle's skeleton
    alone costs (its header and a note per section, everything cut): HTTP 400 with
    ``min_budget``, the smallest budget that fits. Refused before anything is read or
    written (no spawn logged, no handoff taken)."""

    def __init__(self, field: str, asked: int, min_budget: int) -> None:
        unit = "tokens" if field == "max_tokens" else "bytes"
        super().__init__(
            field,
            "min_budget",
            f"{asked} {unit} cannot hold this bundle with everything cut; "
            f"min_budget is {min_budget} {unit}",
        )
        self.min_budget = min_budget


class Unauthenticated(AcmiError):
    """No credentials, or credentials we do not know (HTTP 401)."""

    code = "unauthorized"
    default_field = "authorization"
    default_rule = "authenticated"


class Forbidden(AcmiError):
    """Known credentials that may not do this (wrong scope or tenant; HTTP 403)."""

    code = "forbidden"
    default_field = "authorization"
    default_rule = "allowed"


class RateLimited(AcmiError):
    """Known credentials that have spent an allowance (a bound key's tokens this hour):
    HTTP 429 with Retry-After, ``retry_after`` seconds (the next window). Refused before
    anything is read or written."""

    code = "rate_limited"
    default_field = "authorization"
    default_rule = "rate_limited"

    def __init__(
        self, message: str, *, retry_after: float, field: str | None = None, rule: str | None = None
    ) -> None:
        super().__init__(message, field=field, rule=rule)
        self.retry_after = retry_after


class NotFound(AcmiError):
    code = "not_found"
    default_field = "path"
    default_rule = "exists"


class Conflict(AcmiError):
    code = "conflict"
    default_field = "entity"
    default_rule = "no_concurrent_writer"


class Pending(Conflict):
    """A write that needs a set of pending items empty found one there (apply.lua's ONLY
    op: the oldest other ``member``, pending since ``score``, in ``key``). Nothing was
    written; the caller says what the member means (a workflow run with no assessment)."""

    default_rule = "pending"

    def __init__(self, key: str, score: str, member: str) -> None:
        super().__init__(f"{key}: {member} is pending; nothing was written", field=key)
        self.key, self.score, self.member = key, score, member


class CorruptData(AcmiError):
    """Stored data cannot be used as asked (e.g. a profile that is not a JSON object)."""

    code = "corrupt_data"
    default_field = "stored_data"
    default_rule = "readable"


class Unavailable(AcmiError):
    """Transient: a dependency failed for now; retry after ``retry_after`` seconds."""

    code = "unavailable"
    default_field = "dependency"
    default_rule = "available"

    def __init__(
        self,
        message: str,
        *,
        retry_after: float = 1.0,
        field: str | None = None,
        rule: str | None = None,
    ) -> None:
        super().__init__(message, field=field, rule=rule)
        self.retry_after = retry_after


class PlanError(AcmiError):
    """The write script refused a plan (unknown op, bad argument): a bug, not input."""

    code = "plan_error"
    default_field = "server"
    default_rule = "valid_plan"


class StoreError(AcmiError):
    """The backend failed."""

    code = "store_error"
    default_field = "store"
    default_rule = "store_ok"


class StoreCommandError(StoreError):
    """Redis answered a command with an error reply (e.g. WRONGTYPE)."""

    code = "store_command_error"
    default_rule = "command_ok"


class StoreAuthError(StoreError):
    """The backend refused our credentials (HTTP 401/403). Never retried."""

    code = "store_auth_error"
    default_rule = "store_credentials"


class StoreUnavailable(StoreError, Unavailable):
    """Network failure, timeout or 5xx after bounded retries. Transient."""

    code = "store_unavailable"
    default_field = "store"
    default_rule = "available"


class Throttled(StoreUnavailable):
    """The backend kept answering 429 until the retry budget ran out. Transient."""

    code = "throttled"
    default_rule = "throttled"


class StoreBusy(StoreUnavailable):
    """Redis refused a command for now (BUSY running a script, LOADING, TRYAGAIN,
    CLUSTERDOWN, MASTERDOWN): the refused command did not run; retry shortly. Transient."""

    code = "store_busy"
    default_rule = "busy"

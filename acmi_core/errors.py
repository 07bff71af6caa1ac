"""One exception family. Every message names the field (or key) and the rule broken.

HTTP mapping lives in one place (the API layer); here only the meaning:

- AcmiValidationError: the caller's input breaks a rule (4xx). Nothing was stored.
- Unauthenticated / Forbidden: no or unknown credentials / not allowed (401 / 403).
- NotFound: the thing asked for does not exist.
- Conflict: a concurrent writer won and the retry deadline passed.
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
    """Base of every error ACMI raises on purpose."""

    code = "acmi_error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class AcmiValidationError(AcmiError, ValueError):
    """Input breaks a rule: ``field`` is a dotted path (``event.summary``), ``rule`` a name."""

    code = "validation_error"

    def __init__(self, field: str, rule: str, message: str) -> None:
        super().__init__(f"{field}: {message}", field=field)
        self.rule = rule


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


class Unauthenticated(AcmiError):
    """No credentials, or credentials we do not know (HTTP 401)."""

    code = "unauthorized"


class Forbidden(AcmiError):
    """Known credentials that may not do this (wrong scope or tenant; HTTP 403)."""

    code = "forbidden"


class NotFound(AcmiError):
    code = "not_found"


class Conflict(AcmiError):
    code = "conflict"


class CorruptData(AcmiError):
    """Stored data cannot be used as asked (e.g. a profile that is not a JSON object)."""

    code = "corrupt_data"


class Unavailable(AcmiError):
    """Transient: a dependency failed for now; retry after ``retry_after`` seconds."""

    code = "unavailable"

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PlanError(AcmiError):
    """The write script refused a plan (unknown op, bad argument): a bug, not input."""

    code = "plan_error"


class StoreError(AcmiError):
    """The backend failed."""

    code = "store_error"


class StoreCommandError(StoreError):
    """Redis answered a command with an error reply (e.g. WRONGTYPE)."""

    code = "store_command_error"


class StoreAuthError(StoreError):
    """The backend refused our credentials (HTTP 401/403). Never retried."""

    code = "store_auth_error"


class StoreUnavailable(StoreError, Unavailable):
    """Network failure, timeout or 5xx after bounded retries. Transient."""

    code = "store_unavailable"


class Throttled(StoreUnavailable):
    """The backend kept answering 429 until the retry budget ran out. Transient."""

    code = "throttled"


class StoreBusy(StoreUnavailable):
    """Redis refused a command for now (BUSY running a script, LOADING, TRYAGAIN,
    CLUSTERDOWN, MASTERDOWN): the refused command did not run; retry shortly. Transient."""

    code = "store_busy"

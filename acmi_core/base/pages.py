"""Pages and their cursors: one page of a list or a timeline is one round trip, and a
cursor is opaque to callers and validated on the way back (a bad one is a 400 naming
``cursor``, never a 500)."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.model import MAX_ENTITY_LEN

DEFAULT_PAGE_SIZE: Final = 100
MAX_PAGE_SIZE: Final = 1000
# Stored bytes of events per page: keeps a page well under Lambda's 6 MB response limit
# (re-rendering can lengthen a number's text; 1 MiB leaves room for it).
MAX_PAGE_BYTES: Final = 1024 * 1024
MAX_CURSOR_LEN: Final = 1024


def page_size(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise AcmiValidationError("limit", "range", f"must be an integer from 1 to {MAX_PAGE_SIZE}")
    return limit


def encode_cursor(*fields: object) -> str:
    text = json.dumps(fields, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _bad_cursor(why: str = "is not a cursor this API returned") -> AcmiValidationError:
    return AcmiValidationError("cursor", "cursor", f"{why}; pass next_cursor back unchanged")


def decode_cursor(cursor: object, kind: str, size: int) -> list[Any]:
    """The fields of a cursor of ``kind`` (after the kind), exactly ``size`` of them."""
    if not isinstance(cursor, str) or not 0 < len(cursor) <= MAX_CURSOR_LEN:
        raise _bad_cursor(f"must be a string of 1-{MAX_CURSOR_LEN} characters")
    try:
        text = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        fields = json.loads(text)
    except (ValueError, RecursionError):  # binascii.Error is a ValueError
        raise _bad_cursor() from None
    if not isinstance(fields, list) or len(fields) != size + 1 or fields[0] != kind:
        raise _bad_cursor()
    return fields[1:]


def _is_int(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def member_digest(member: bytes) -> str:
    return hashlib.blake2b(member, digest_size=8).hexdigest()


@dataclass(frozen=True)
class TimelinePosition:
    """After the ``run``-th member (in read order) of those scored ``score``; that member's
    digest tells whether it is still there."""

    reverse: bool
    score: float
    run: int
    digest: str

    def encode(self) -> str:
        return encode_cursor("t", int(self.reverse), repr(self.score), self.run, self.digest)

    @classmethod
    def decode(cls, cursor: object, reverse: bool) -> TimelinePosition:
        direction, score_text, run, digest = decode_cursor(cursor, "t", 4)
        try:
            score = float(score_text) if isinstance(score_text, str) else math.nan
        except ValueError:
            score = math.nan
        if (
            direction not in (0, 1)
            or math.isnan(score)
            or not _is_int(run, 1, 2**53)
            or not isinstance(digest, str)
            or not re.fullmatch(r"[0-9a-f]{16}", digest)
        ):
            raise _bad_cursor()
        if bool(direction) != reverse:
            raise _bad_cursor(f"was issued for reverse={bool(direction)}, not reverse={reverse}")
        return cls(reverse, score, run, digest)

    def behind(self, bound: float | None) -> bool:
        """The query's start bound lies past this position (the caller moved it)."""
        if bound is None:
            return False
        return bound < self.score if self.reverse else bound > self.score


def entity_cursor(cursor: object) -> tuple[int, int, bytes | None]:
    """(SSCAN cursor, its COUNT, the last id returned from that SSCAN step or None)."""
    scan, count, after = decode_cursor(cursor, "e", 3)
    return _entity_step(scan, count, after)


def bucket_cursor(cursor: object, buckets: int) -> tuple[int, int, int, bytes | None]:
    """A list cursor of a tenant with B > 1 buckets: (the bucket, then ``entity_cursor``'s
    three) -- a list walks the buckets' category indexes one after another."""
    bucket, scan, count, after = decode_cursor(cursor, "b", 4)
    if not _is_int(bucket, 0, buckets - 1):
        raise _bad_cursor()
    return (bucket, *_entity_step(scan, count, after))


def _entity_step(scan: Any, count: Any, after: Any) -> tuple[int, int, bytes | None]:
    if not _is_int(scan, 0, 2**64 - 1) or not _is_int(count, 1, MAX_PAGE_SIZE):
        raise _bad_cursor()
    if after is None:
        return scan, count, None
    if not isinstance(after, str) or len(after) > 2 * MAX_ENTITY_LEN:
        raise _bad_cursor()
    try:
        last = base64.b64decode(after + "=" * (-len(after) % 4), altchars=b"-_", validate=True)
    except ValueError:  # binascii.Error is one
        raise _bad_cursor() from None
    if not 0 < len(last) <= MAX_ENTITY_LEN:
        raise _bad_cursor()
    return scan, count, last

"""newest_members reads a page.lua reply's members without pairing every score: the
members (oldest first) and the cursor are what pairing them all gave, for any reply
(an odd length, scores that are not numbers, a capped read)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from acmi_core.base.pages import TimelinePosition, member_digest
from acmi_core.entities.api import _score_pairs, newest_members
from acmi_core.store.memory import MemoryStore

_items = st.lists(
    st.one_of(st.binary(max_size=6), st.sampled_from([b"1", b"2.5", b"x", b"inf"])),
    max_size=12,
)


def paired(window_items: list[bytes], more: int) -> tuple[list[object], str | None]:
    """What newest_members gave before: every (member, score) pair built first."""
    window = _score_pairs(window_items)
    cursor = None
    if more == 1 and window:
        member, score = window[-1]
        run = sum(1 for _, other in window if other == score)
        digest = member_digest(member) if isinstance(member, bytes) else "0" * 16
        cursor = TimelinePosition(True, score, run, digest).encode()
    return [member for member, _ in reversed(window)], cursor


STORE = MemoryStore()  # not called: the reply is given


@settings(deadline=None)
@given(_items, st.sampled_from([0, 1]))
def test_the_members_and_cursor_are_what_pairing_gave(items: list[bytes], more: int) -> None:
    got = newest_members(STORE, [more, *items], "acmi:user:x:timeline", 50)
    assert got == paired(items, more)

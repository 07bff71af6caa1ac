"""The memory hygiene job's checks of one entity: the monthly audit (the seed's budgets
over its layers) and the weekly review (``MemoryAPI.review``, when this build has it)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from acmi_core.base.errors import AcmiValidationError
from acmi_core.base.keys import MEMORY_HOT, MEMORY_WARM
from acmi_core.base.model import EntityId
from acmi_core.base.stored import decode_event, load_object
from acmi_core.jobs.quarters import DAY_MS
from acmi_core.memory.budgets import check_snapshot
from acmi_core.memory.layers import MemorySnapshot
from acmi_core.memory.markdown import MemoryFormatError
from acmi_core.memory.slots import (
    TOPIC_LINKS,
    daily_from_events,
    from_profile,
    from_signals,
    topic_from_profile,
)

if TYPE_CHECKING:
    from acmi_core.client import Acmi

AUDIT_EVENTS: Final = 2_000  # the newest events of the last 30 days an audit renders
MAX_TOPICS: Final = 50  # topics an audit measures


def audit(acmi: Acmi, entity: EntityId, now_ms: int) -> dict[str, Any]:
    """The seed's budgets over the entity's layers: hot and warm (their slots),
    the daily notes of the last 30 days, its topics. Returns the findings: ``files``
    measured, ``over`` (each with the seed's fix), ``unreadable`` layers,
    ``memory_md_lines``, ``daily_notes_count``."""
    hot_raw, profile_raw, recent = acmi.store.pipeline(
        [
            ("GET", acmi.keys.slot(entity, MEMORY_HOT)),
            ("GET", acmi.keys.slot(entity, MEMORY_WARM)),
            (
                "ZRANGE",
                acmi.keys.timeline(entity),
                now_ms,
                now_ms - 30 * DAY_MS,
                "BYSCORE",
                "REV",
                "LIMIT",
                0,
                AUDIT_EVENTS,
            ),
        ]
    )
    profile = load_object(profile_raw) or {}
    signals = load_object(hot_raw) or {}
    unreadable: list[str] = []
    hot = warm = None
    try:
        hot = from_signals(signals)
    except (MemoryFormatError, AcmiValidationError) as exc:
        unreadable.append(f"hot: {str(exc)[:160]}")
    try:
        warm = from_profile(profile)
    except (MemoryFormatError, AcmiValidationError) as exc:
        unreadable.append(f"warm: {str(exc)[:160]}")
    events = []
    for member in reversed(recent if isinstance(recent, list) else []):
        decoded = decode_event(member)
        if not isinstance(decoded, str):
            events.append(decoded[0])
    try:
        daily = tuple(daily_from_events(events))
    except (MemoryFormatError, AcmiValidationError) as exc:
        unreadable.append(f"daily: {str(exc)[:160]}")
        daily = ()
    links = profile.get(TOPIC_LINKS)
    slugs = [
        str(link).split(":", 1)[1]
        for link in (links if isinstance(links, list) else [])[:MAX_TOPICS]
        if isinstance(link, str) and link.startswith("topic:")
    ]
    topics = []
    if slugs:
        replies = acmi.store.pipeline(
            [("GET", acmi.keys.profile(EntityId.parse(f"topic:{s}"))) for s in slugs]
        )
        for slug, raw in zip(slugs, replies, strict=True):
            try:
                topic = topic_from_profile(slug, load_object(raw) or {})
            except (MemoryFormatError, AcmiValidationError) as exc:
                unreadable.append(f"topic:{slug}: {str(exc)[:160]}")
                continue
            if topic is not None:
                topics.append(topic)
    snapshot = MemorySnapshot(active_context=hot, memory=warm, daily=daily, topics=tuple(topics))
    reports = check_snapshot(snapshot)
    warm_report = next((r for r in reports if r.layer == "warm"), None)
    return {
        "files": len(reports),
        "over": [r.to_dict() for r in reports if not r.ok][:20],
        "unreadable": unreadable,
        "memory_md_lines": warm_report.lines if warm_report else 0,
        "daily_notes_count": len(daily),
    }


def review(acmi: Acmi, entity: EntityId, now_ms: int) -> tuple[str, Any]:
    """The weekly review through ``acmi_core.memory.service`` when this build has it:
    ("done", its result) or ("pending", why)."""
    try:
        service = importlib.import_module("acmi_core.memory.service")
    except ImportError:
        return "pending", "acmi_core.memory.service is not in this build"
    api = getattr(service, "MemoryAPI", None)
    if api is None:
        return "pending", "acmi_core.memory.service has no MemoryAPI"
    return "done", api(acmi.context).review(str(entity), now_ms)

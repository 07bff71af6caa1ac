"""The fleet dashboard's params."""

from __future__ import annotations

from acmi_core.operations.params.base import Params, bounded


class DashboardReadParams(Params):
    """What the fleet dashboard shows, for the key's tenant: agents (heartbeat age,
    STALLED), held locks, open HITL items, work by owner and status, assessment scores,
    lessons and the newest coordination events, each part capped."""

    events: int = bounded(
        25, description="newest coordination events, 1-100", minimum=1, maximum=100
    )

"""The calls both the reference MCP server (recorded once, ``record_reference_mcp.py``)
and ours (``test_mcp_reference.py``) answer: every one of the 17 tools with realistic
arguments, in an order where each read sees the writes before it."""

from __future__ import annotations

from typing import Any, Final

SCENARIO: Final[tuple[tuple[str, dict[str, Any]], ...]] = (
    (
        "acmi_profile",
        {
            "namespace": "user",
            "id": "mikey",
            "profile": '{"name": "Mikey", "tz": "America/New_York"}',
        },
    ),
    (
        "acmi_signal",
        {
            "namespace": "user",
            "id": "mikey",
            "signals": '{"current_task": "shooting ACMI manifesto", "takes": 3}',
        },
    ),
    (
        "acmi_event",
        {
            "namespace": "user",
            "id": "mikey",
            "source": "user:mikey",
            "summary": "video 1 of 3",
            "kind": "started_recording",
            "correlationId": "manifesto-001",
        },
    ),
    (
        "acmi_event",
        {
            "namespace": "user",
            "id": "mikey",
            "source": "agent:claude",
            "summary": "agent noticed the recording started",
        },
    ),
    ("acmi_get", {"namespace": "user", "id": "mikey"}),
    ("acmi_list", {"namespace": "user", "limit": 10}),
    ("acmi_cat", {"keys": ["user:mikey"], "since": "24h", "limit": 5}),
    (
        "acmi_profile",
        {"namespace": "agent", "id": "claude", "profile": '{"name": "Claude", "role": "builder"}'},
    ),
    ("acmi_spawn", {"agentId": "claude", "sessionId": "sess-42", "modelId": "claude-opus"}),
    ("acmi_active", {"agentId": "claude", "threadKey": "agent-coordination", "role": "lead"}),
    (
        "acmi_rollup_set",
        {"agentId": "claude", "rollup": '{"summary": "shipped the reference tool set"}'},
    ),
    ("acmi_bootstrap", {"agentId": "claude"}),
    ("acmi_work_create", {"id": "ship-mcp", "title": "Ship the reference MCP tools"}),
    (
        "acmi_work_event",
        {
            "id": "ship-mcp",
            "source": "agent:claude",
            "summary": "golden file recorded",
            "kind": "progress",
        },
    ),
    ("acmi_work_signal", {"id": "ship-mcp", "signals": '{"priority": "high"}'}),
    ("acmi_work_get", {"id": "ship-mcp"}),
    ("acmi_work_list", {}),
    ("acmi_tenant_list", {}),
    ("acmi_profile", {"namespace": "user", "id": "mikey", "profile": "{not json"}),
    ("acmi_delete", {"key": "acmi:registry:agents"}),
    ("acmi_delete", {"key": "KEY:user:mikey:profile"}),
    ("acmi_delete", {"key": "KEY:user:mikey:profile", "confirm": True}),
    ("acmi_get", {"namespace": "user", "id": "mikey"}),
)


def resolved(arguments: dict[str, Any], reported: dict[str, str]) -> dict[str, Any]:
    """``arguments`` with a ``KEY:<ns>:<id>:<slot>`` placeholder replaced by the key the
    server itself reported for that slot (each server stores under its own layout)."""
    key = arguments.get("key")
    if isinstance(key, str) and key.startswith("KEY:"):
        return {**arguments, "key": reported[key.removeprefix("KEY:")]}
    return arguments


def report(tool: str, arguments: dict[str, Any], answer: Any, reported: dict[str, str]) -> None:
    """Remember the key a profile write reported, for ``resolved``."""
    if tool == "acmi_profile" and isinstance(answer, dict) and "key" in answer:
        reported[f"{arguments['namespace']}:{arguments['id']}:profile"] = answer["key"]

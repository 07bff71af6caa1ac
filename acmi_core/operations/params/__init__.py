"""Each operation's parameters as a typed model: the field names, types and defaults every
surface takes (an MCP tool's arguments and input schema are derived from its model:
``acmi_core.mcp.server``). A row names its model as ``"<module>:<qualname>"``
(``Operation.params``), as it names its core callable, so importing the table imports no
pydantic model; the models live in a module per capability beside this one (building a
model costs a cold start time: a command imports only its capability's), and each is
also this package's attribute, imported with its module on first use.

The rules beyond a field's type (formats, the secret guard) are the core's, so a surface
cannot disagree with the core; a model carries only the bounds the HTTP routes checked
before the core (a path's length, a query's range, finite numbers), so that every surface
checks them and the OpenAPI document shows them (``acmi_core.api.params`` derives a
route's path, query and body from its model). A failure names the field and the rule the
core or the type check gives (``pydantic_rule``). A
model's docstring is its MCP tool's description (whitespace collapsed to single spaces,
the tenancy sentence appended); ``tool_function`` keeps the name today's input schema's
title is made of (``<tool_function>Arguments``) where it is not the tool's.

``writes`` says when a read operation's call writes after all (a bundle that logs a spawn,
a hot layer replaced before it is read): the surface then asks for write access.

The models below the MCP ones are the rows without a tool: the same rule, their fields
the core callable's parameters (what the surface supplies itself, such as the client, a
clock or an output stream, is not a field), their defaults the core's
(``tests/unit/test_params.py`` holds each to its callable's signature)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from acmi_core.operations.params.base import BUNDLE_EVENTS, PRUNE_DAYS, Params

if TYPE_CHECKING:  # at run time each name is imported with its module, on first use
    from acmi_core.operations.params.agents import (
        AgentsHeartbeatParams,
        AgentsInviteParams,
        AgentsJoinParams,
        AgentsLeaveParams,
        AgentsRollupGetParams,
        AgentsRollupPutParams,
        AgentsSpawnParams,
        AgentsSpawnsParams,
        AgentsThreadsParams,
        AgentsWakeParams,
    )
    from acmi_core.operations.params.dashboard import DashboardReadParams
    from acmi_core.operations.params.entities import (
        CatParams,
        DeleteParams,
        EventDeleteParams,
        EventsAppendParams,
        GetParams,
        IngestWebhookParams,
        ListParams,
        ProfileDeleteParams,
        ProfileGetParams,
        ProfilePatchParams,
        ProfilePutParams,
        SignalDeleteParams,
        SignalGetParams,
        SignalPutParams,
        SignalsDeleteParams,
        SignalsGetParams,
        SignalsPatchParams,
        SignalsPutParams,
        TenantsListParams,
        TimelineParams,
    )
    from acmi_core.operations.params.hitl import (
        HitlCreateParams,
        HitlListParams,
        HitlResolveParams,
    )
    from acmi_core.operations.params.locks import (
        LocksClaimParams,
        LocksGetParams,
        LocksReleaseParams,
        LocksRenewParams,
    )
    from acmi_core.operations.params.memory import (
        BootstrapReadParams,
        BootstrapSpawnParams,
        MemoryActiveGetParams,
        MemoryActivePutParams,
        MemoryArchiveParams,
        MemoryDailySummaryParams,
        MemoryDebugParams,
        MemoryExportParams,
        MemoryForgetParams,
        MemoryGetParams,
        MemoryHandoffParams,
        MemoryHandoffTakeParams,
        MemoryImportParams,
        MemoryPruneParams,
        MemoryRememberParams,
        MemoryReviewParams,
        MemorySearchParams,
        MemoryStatusParams,
        MemoryTopicsCreateParams,
    )
    from acmi_core.operations.params.service import (
        DoctorParams,
        JobsRunParams,
        JobsStatusParams,
        KeysCreateParams,
        KeysListParams,
        KeysRevokeParams,
        MigrateParams,
        QuotaMonitorParams,
        QuotaReportParams,
        SourcesGetParams,
        SourcesListParams,
        SourcesSetParams,
    )
    from acmi_core.operations.params.work import (
        WorkCreateParams,
        WorkEventParams,
        WorkGetParams,
        WorkListParams,
        WorkOwnerParams,
        WorkSessionsParams,
        WorkSignalsParams,
    )
    from acmi_core.operations.params.workflows import (
        WorkflowsAssessmentsParams,
        WorkflowsAssessParams,
        WorkflowsExecuteParams,
        WorkflowsImproveParams,
        WorkflowsLessonsParams,
        WorkflowsUnassessedParams,
    )

__all__ = [
    "BUNDLE_EVENTS",
    "PRUNE_DAYS",
    "AgentsHeartbeatParams",
    "AgentsInviteParams",
    "AgentsJoinParams",
    "AgentsLeaveParams",
    "AgentsRollupGetParams",
    "AgentsRollupPutParams",
    "AgentsSpawnParams",
    "AgentsSpawnsParams",
    "AgentsThreadsParams",
    "AgentsWakeParams",
    "BootstrapReadParams",
    "BootstrapSpawnParams",
    "CatParams",
    "DashboardReadParams",
    "DeleteParams",
    "DoctorParams",
    "EventDeleteParams",
    "EventsAppendParams",
    "GetParams",
    "HitlCreateParams",
    "HitlListParams",
    "HitlResolveParams",
    "IngestWebhookParams",
    "JobsRunParams",
    "JobsStatusParams",
    "KeysCreateParams",
    "KeysListParams",
    "KeysRevokeParams",
    "ListParams",
    "LocksClaimParams",
    "LocksGetParams",
    "LocksReleaseParams",
    "LocksRenewParams",
    "MemoryActiveGetParams",
    "MemoryActivePutParams",
    "MemoryArchiveParams",
    "MemoryDailySummaryParams",
    "MemoryDebugParams",
    "MemoryExportParams",
    "MemoryForgetParams",
    "MemoryGetParams",
    "MemoryHandoffParams",
    "MemoryHandoffTakeParams",
    "MemoryImportParams",
    "MemoryPruneParams",
    "MemoryRememberParams",
    "MemoryReviewParams",
    "MemorySearchParams",
    "MemoryStatusParams",
    "MemoryTopicsCreateParams",
    "MigrateParams",
    "Params",
    "ProfileDeleteParams",
    "ProfileGetParams",
    "ProfilePatchParams",
    "ProfilePutParams",
    "QuotaMonitorParams",
    "QuotaReportParams",
    "SignalDeleteParams",
    "SignalGetParams",
    "SignalPutParams",
    "SignalsDeleteParams",
    "SignalsGetParams",
    "SignalsPatchParams",
    "SignalsPutParams",
    "SourcesGetParams",
    "SourcesListParams",
    "SourcesSetParams",
    "TenantsListParams",
    "TimelineParams",
    "WorkCreateParams",
    "WorkEventParams",
    "WorkGetParams",
    "WorkListParams",
    "WorkOwnerParams",
    "WorkSessionsParams",
    "WorkSignalsParams",
    "WorkflowsAssessParams",
    "WorkflowsAssessmentsParams",
    "WorkflowsExecuteParams",
    "WorkflowsImproveParams",
    "WorkflowsLessonsParams",
    "WorkflowsUnassessedParams",
]

# Each model's module, by name (``params.GetParams`` imports ``params.entities`` only).
_MODULE_OF: Final = {
    "ProfilePutParams": "entities",
    "ProfileGetParams": "entities",
    "ProfilePatchParams": "entities",
    "SignalsPutParams": "entities",
    "SignalsGetParams": "entities",
    "SignalPutParams": "entities",
    "EventsAppendParams": "entities",
    "GetParams": "entities",
    "ListParams": "entities",
    "CatParams": "entities",
    "DeleteParams": "entities",
    "TenantsListParams": "entities",
    "IngestWebhookParams": "entities",
    "ProfileDeleteParams": "entities",
    "SignalsPatchParams": "entities",
    "SignalsDeleteParams": "entities",
    "SignalGetParams": "entities",
    "SignalDeleteParams": "entities",
    "TimelineParams": "entities",
    "EventDeleteParams": "entities",
    "BootstrapReadParams": "memory",
    "MemoryRememberParams": "memory",
    "MemorySearchParams": "memory",
    "MemoryGetParams": "memory",
    "MemoryForgetParams": "memory",
    "MemoryStatusParams": "memory",
    "MemoryActiveGetParams": "memory",
    "MemoryReviewParams": "memory",
    "MemoryPruneParams": "memory",
    "MemoryDailySummaryParams": "memory",
    "MemoryTopicsCreateParams": "memory",
    "MemoryDebugParams": "memory",
    "MemoryExportParams": "memory",
    "MemoryImportParams": "memory",
    "MemoryHandoffParams": "memory",
    "BootstrapSpawnParams": "memory",
    "MemoryActivePutParams": "memory",
    "MemoryHandoffTakeParams": "memory",
    "MemoryArchiveParams": "memory",
    "AgentsSpawnParams": "agents",
    "AgentsThreadsParams": "agents",
    "AgentsRollupPutParams": "agents",
    "AgentsRollupGetParams": "agents",
    "AgentsHeartbeatParams": "agents",
    "WorkCreateParams": "work",
    "WorkEventParams": "work",
    "WorkSignalsParams": "work",
    "WorkGetParams": "work",
    "WorkListParams": "work",
    "WorkSessionsParams": "work",
    "LocksClaimParams": "locks",
    "LocksRenewParams": "locks",
    "LocksReleaseParams": "locks",
    "LocksGetParams": "locks",
    "HitlCreateParams": "hitl",
    "HitlListParams": "hitl",
    "HitlResolveParams": "hitl",
    "WorkflowsAssessParams": "workflows",
    "WorkflowsImproveParams": "workflows",
    "WorkOwnerParams": "work",
    "AgentsSpawnsParams": "agents",
    "AgentsJoinParams": "agents",
    "AgentsLeaveParams": "agents",
    "AgentsInviteParams": "agents",
    "AgentsWakeParams": "agents",
    "WorkflowsExecuteParams": "workflows",
    "WorkflowsLessonsParams": "workflows",
    "WorkflowsUnassessedParams": "workflows",
    "WorkflowsAssessmentsParams": "workflows",
    "DoctorParams": "service",
    "MigrateParams": "service",
    "KeysCreateParams": "service",
    "KeysListParams": "service",
    "KeysRevokeParams": "service",
    "SourcesSetParams": "service",
    "SourcesListParams": "service",
    "SourcesGetParams": "service",
    "JobsRunParams": "service",
    "JobsStatusParams": "service",
    "QuotaMonitorParams": "service",
    "QuotaReportParams": "service",
    "DashboardReadParams": "dashboard",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)

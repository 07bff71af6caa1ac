"""The wake bundle and the five memory layers."""

from __future__ import annotations

from typing import Final

from acmi_core.operations.model import Capability, Operation

BOOTSTRAP: Final = Capability("bootstrap", reads="Bootstraps", writes="Bootstraps")
MEMORY: Final = Capability("memory", reads="MemoryReads", writes="MemoryWrites")

_BUNDLE: Final = "acmi_core.bootstrap.bootstrapper:Bootstrapper.__call__"
_MEMORY: Final = "acmi_core.memory.service:MemoryAPI"
_AT: Final = "/v1/memory/{entity}"

BOOTSTRAP_OPERATIONS: Final[tuple[Operation, ...]] = (
    BOOTSTRAP.read(
        "bootstrap.read",
        "GET",
        "/v1/agents/{agent}/bootstrap",
        "The agent's wake bundle, every section labelled: one round trip",
        _BUNDLE,
        mcp="bootstrap",
        params="acmi_core.operations.params.memory:BootstrapReadParams",
        cli="bootstrap",
        result="acmi_core.bootstrap.bundle:Bundle",
    ),
    BOOTSTRAP.write(
        "bootstrap.spawn",
        "POST",
        "/v1/agents/{agent}/bootstrap",
        "Log a spawn and read the wake bundle in the same step: one round trip",
        _BUNDLE,
        params="acmi_core.operations.params.memory:BootstrapSpawnParams",
        result="acmi_core.bootstrap.bundle:Bundle",
    ),
)

MEMORY_OPERATIONS: Final[tuple[Operation, ...]] = (
    MEMORY.read(
        "memory.status",
        "GET",
        f"{_AT}/status",
        "Sizes, lines, tokens and budget verdict per layer, staleness, next maintenance",
        f"{_MEMORY}.status",
        mcp="memory_status",
        params="acmi_core.operations.params.memory:MemoryStatusParams",
        cli="memory status",
        result="acmi_core.memory.results:MemoryStatus",
    ),
    MEMORY.write(
        "memory.review",
        "POST",
        f"{_AT}/review",
        "The weekly review: promote the last 7 days' lessons and decisions, prune hot",
        f"{_MEMORY}.review",
        mcp="memory_review",
        params="acmi_core.operations.params.memory:MemoryReviewParams",
        cli="memory review",
        result="acmi_core.memory.results:Reviewed",
    ),
    MEMORY.read(
        "memory.search",
        "GET",
        f"{_AT}/search",
        "Lines of every layer holding the query's terms, fast to slow, ranked (archived "
        "raw events last)",
        f"{_MEMORY}.search",
        mcp="memory_search",
        params="acmi_core.operations.params.memory:MemorySearchParams",
        cli="memory search",
        result="acmi_core.memory.results:MemorySearch",
    ),
    MEMORY.read(
        "memory.get",
        "GET",
        f"{_AT}/lines",
        "Lines of one memory file by path and range, numbered as search numbers its hits",
        f"{_MEMORY}.get",
        mcp="memory_get",
        params="acmi_core.operations.params.memory:MemoryGetParams",
        cli="memory get",
        result="acmi_core.memory.results:MemoryGot",
    ),
    MEMORY.write(
        "memory.forget",
        "POST",
        f"{_AT}/forget",
        "Forget one memory line (by path and line, or its text), audited on the timeline",
        f"{_MEMORY}.forget",
        mcp="memory_forget",
        params="acmi_core.operations.params.memory:MemoryForgetParams",
        cli="memory forget",
        result="acmi_core.memory.results:Forgot",
    ),
    MEMORY.write(
        "memory.remember",
        "POST",
        f"{_AT}/remember",
        "Write a line to a layer before acting (write-ahead): stored when this answers",
        f"{_MEMORY}.remember",
        mcp="memory_remember",
        params="acmi_core.operations.params.memory:MemoryRememberParams",
        cli="memory remember",
        result="acmi_core.memory.results:Remembered",
    ),
    MEMORY.read(
        "memory.active.get",
        "GET",
        f"{_AT}/active",
        "ACTIVE-CONTEXT.md: its text, sections and budget",
        f"{_MEMORY}.active",
        mcp="memory_active",
        params="acmi_core.operations.params.memory:MemoryActiveGetParams",
        cli="memory active",
        result="acmi_core.memory.results:ActiveRead",
    ),
    MEMORY.write(
        "memory.active.put",
        "PUT",
        f"{_AT}/active",
        "Replace ACTIVE-CONTEXT.md (checked against its 50 lines / 2 KB budget)",
        f"{_MEMORY}.set_active",
        params="acmi_core.operations.params.memory:MemoryActivePutParams",
        result="acmi_core.memory.results:ActiveSet",
    ),
    MEMORY.read(
        "memory.daily_summary",
        "GET",
        f"{_AT}/daily-summary",
        "A day's note (default today) and its entries, decisions, lessons, open tasks",
        f"{_MEMORY}.daily_summary",
        mcp="memory_daily_summary",
        params="acmi_core.operations.params.memory:MemoryDailySummaryParams",
        cli="memory daily-summary",
        result="acmi_core.memory.results:DailySummary",
    ),
    MEMORY.write(
        "memory.topics.create",
        "POST",
        f"{_AT}/topics",
        "Create a topic:<slug> from the seed's template and link it (201; 200 if linked "
        "an existing one)",
        f"{_MEMORY}.topic_create",
        mcp="memory_topic_create",
        params="acmi_core.operations.params.memory:MemoryTopicsCreateParams",
        cli="memory topic-create",
        result="acmi_core.memory.results:TopicCreated",
    ),
    MEMORY.write(
        "memory.prune",
        "POST",
        f"{_AT}/prune",
        "Move completed and stale hot items to today's note",
        f"{_MEMORY}.prune",
        mcp="memory_prune",
        params="acmi_core.operations.params.memory:MemoryPruneParams",
        cli="memory prune",
        result="acmi_core.memory.results:Pruned",
    ),
    MEMORY.write(
        "memory.handoff",
        "PUT",
        f"{_AT}/handoff",
        "Write HANDOFF.md for the next session (replaces a pending one)",
        f"{_MEMORY}.handoff",
        mcp="memory_handoff",
        params="acmi_core.operations.params.memory:MemoryHandoffParams",
        cli="memory handoff",
        result="acmi_core.memory.results:Handoff",
    ),
    MEMORY.write(
        "memory.handoff.take",
        "POST",
        f"{_AT}/handoff/take",
        "Read and clear the pending handoff, atomically (null when none)",
        f"{_MEMORY}.take_handoff",
        params="acmi_core.operations.params.memory:MemoryHandoffTakeParams",
        result="acmi_core.memory.results:StoredHandoff",
    ),
    MEMORY.read(
        "memory.debug",
        "GET",
        f"{_AT}/debug",
        "Missing pieces, hot/warm conflicts, stale items, files over budget",
        f"{_MEMORY}.debug",
        mcp="memory_debug",
        params="acmi_core.operations.params.memory:MemoryDebugParams",
        cli="memory debug",
        result="acmi_core.memory.results:MemoryDebug",
    ),
    MEMORY.read(
        "memory.export",
        "GET",
        f"{_AT}/export",
        "The seed's file tree: {files: {relative path: text}}",
        f"{_MEMORY}.export_snapshot",
        mcp="memory_export",
        params="acmi_core.operations.params.memory:MemoryExportParams",
        cli="memory export",
        result="acmi_core.memory.layers:MemorySnapshot",
    ),
    MEMORY.write(
        "memory.import",
        "POST",
        f"{_AT}/import",
        "Migrate a tree ({files: {path: text}}) into ACMI; idempotent",
        f"{_MEMORY}.import_snapshot",
        mcp="memory_import",
        params="acmi_core.operations.params.memory:MemoryImportParams",
        cli="memory import",
        result="acmi_core.memory.results:Imported",
    ),
    MEMORY.write(
        "memory.archive",
        "POST",
        f"{_AT}/archive",
        "Archive now: events older than the retention into the quarter's document and, "
        "with ACMI_ARCHIVE_URL, its verified object, then trimmed",
        "acmi_core.jobs.archive:archive_now",
        cli="memory archive",
        store_only=True,  # the command may name its own archive; the API never lets it
        params="acmi_core.operations.params.memory:MemoryArchiveParams",
        result="acmi_core.jobs.archive:ArchivedNow",
    ),
)

OPERATIONS: Final[tuple[Operation, ...]] = (*BOOTSTRAP_OPERATIONS, *MEMORY_OPERATIONS)

"""``acmi memory``: the five memory layers of an entity (the seed's memory commands).
Every command works on the store or a deployed API (``--api``: ``export`` and ``import``
carry the tree's files in one request each) but ``archive`` (an archive sink of this
machine's) and ``search --archive`` (on a deployed API, search reads the API's own)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from acmi_core.base.errors import AcmiValidationError
from acmi_core.cli.output import EXIT_PROBLEMS, emit
from acmi_core.cli.state import state

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from acmi_core import Acmi
    from acmi_core.memory.service import MemoryAPI

app = typer.Typer(
    help="the five memory layers (hot, warm, daily, topic, cold)", no_args_is_help=True
)

Entity = Annotated[str, typer.Argument(help="the memory's owner, e.g. agent:atlas")]
ARCHIVE_HELP = "s3://bucket/prefix (default ACMI_ARCHIVE_URL; '' for none)"
# how long a local import embeds its lines for, in all (a request's is EMBED_BUDGET_S, 3 s):
# a local model takes ~15-20 ms a line, so a workspace of ~30,000 lines is indexed whole
LOCAL_EMBED_S = 600.0
Archive = Annotated[str | None, typer.Option(help=ARCHIVE_HELP)]
Dir = Annotated[str, typer.Option(help="the tree's folder")]

# An archive URL's scheme -> the module registering its sink, imported by name when used:
# the SDK glue lives in functions/ and acmi_core has no import of it (ARCHITECTURE: seams).
SINK_MODULES: dict[str, str] = {"s3": "functions.sinks.s3"}


def _memory() -> tuple[Acmi, MemoryAPI]:
    acmi = state().acmi()
    return acmi, acmi.memory


@app.command()
def status(entity: Entity) -> None:
    """Sizes, lines, budgets, staleness and the next maintenance of each layer."""
    emit(state().backend().call("memory.status", entity=entity), state().output)


@app.command()
def review(entity: Entity) -> None:
    """The weekly review: promote lessons and decisions, prune the hot layer."""
    emit(state().backend().call("memory.review", entity=entity), state().output)


def _archive(acmi: Acmi, url: str | None) -> tuple[Any, str | None]:
    """The destination of ``url`` (default ACMI_ARCHIVE_URL; "" for none) with its sink
    module loaded by name, and why there is none when a URL was given."""
    from acmi_core.cli.local import functions_module
    from acmi_core.jobs import sink as archive_sink

    url = acmi.settings.archive_url if url is None else url
    scheme = (url or "").partition("://")[0]
    if url and scheme in SINK_MODULES and scheme not in archive_sink.SINKS:
        try:
            functions_module(SINK_MODULES[scheme])
        # boto3 missing, or no functions/ (an installed wheel): documents only, said so
        except (ImportError, AcmiValidationError) as exc:
            return None, f"{scheme}: its sink cannot load ({exc}): nothing trimmed"
    return archive_sink.open_destination(url)


@app.command()
def search(
    entity: Entity,
    query: Annotated[list[str], typer.Argument(help="words to find")],
    limit: Annotated[int, typer.Option(help="at most this many hits")] = 20,
    archive: Annotated[
        str | None, typer.Option(help="also the raw archived events there: " + ARCHIVE_HELP)
    ] = None,
    mode: Annotated[
        str, typer.Option(help="hybrid (words and meaning: BM25 + embeddings) or keyword")
    ] = "hybrid",
) -> None:
    """Search every layer by words and meaning, fast to slow, ranked (with --api: the
    API's own archive)."""
    if state().remote() is not None:
        if archive is not None:
            raise AcmiValidationError(
                "--archive", "store_only", "the API searches its own archive: give no --archive"
            )
        found = (
            state()
            .backend()
            .call("memory.search", entity=entity, query=" ".join(query), limit=limit, mode=mode)
        )
        emit(found, state().output)
        return
    from acmi_core.jobs.archive import archived_reader

    acmi, memory = _memory()
    dest, no_sink = _archive(acmi, archive)
    reader = archived_reader(acmi, dest) if dest else None
    found = memory.search(entity, " ".join(query), limit=limit, archived=reader, mode=mode)
    if no_sink:
        found["notes"] = [no_sink]
    emit(found, state().output)


@app.command()
def get(
    entity: Entity,
    path: Annotated[str, typer.Argument(help="e.g. MEMORY.md, memory/2026-05-01.md")],
    from_line: Annotated[int, typer.Option("--from", help="the first line, from 1")] = 1,
    to_line: Annotated[
        int | None, typer.Option("--to", help="the last line (at most 500 a call)")
    ] = None,
) -> None:
    """Lines of one memory file by path and range, numbered as search numbers its hits."""
    got = (
        state()
        .backend()
        .call("memory.get", entity=entity, path=path, from_line=from_line, to_line=to_line)
    )
    emit(got, state().output)


@app.command()
def forget(
    entity: Entity,
    path: Annotated[str, typer.Argument(help="e.g. MEMORY.md, memory/2026-05-01.md")],
    line: Annotated[int | None, typer.Option(help="the line's number (memory get)")] = None,
    text: Annotated[str | None, typer.Option(help="the line's text, exactly")] = None,
) -> None:
    """Forget one line (by --line, or --text; both: that line if it holds that text),
    recorded on the timeline as an audit event."""
    gone = state().backend().call("memory.forget", entity=entity, path=path, line=line, text=text)
    emit(gone, state().output)


@app.command("archive")
def archive_(
    entity: Entity,
    retention_days: Annotated[int, typer.Option(help="older events go")] = 30,
    max_events: Annotated[int, typer.Option(help="at most this many a run")] = 1000,
    archive: Archive = None,
) -> None:
    """Archive now: events older than the retention into the quarter's document and, with
    an archive, its verified object, then trimmed."""
    from acmi_core.jobs.archive import archive_now

    acmi = state().acmi()
    dest, no_sink = _archive(acmi, archive)
    done = archive_now(
        acmi, entity, retention_days=retention_days, max_events=max_events, dest=dest,
        no_sink=no_sink,
    )  # fmt: skip
    emit(done, state().output)


@app.command()
def remember(
    entity: Entity,
    text: Annotated[str, typer.Argument(help="the line to keep")],
    layer: Annotated[str, typer.Option(help="daily | hot | warm | topic")] = "warm",
    section: Annotated[
        str | None, typer.Option(help="a section of the layer, e.g. lessons")
    ] = None,
    topic: Annotated[str | None, typer.Option(help="--layer topic: the topic's slug")] = None,
    ttl: Annotated[
        str | None, typer.Option(help="time to live: 30m, 24h, 7d (not --layer daily)")
    ] = None,
) -> None:
    """Write a line now (write-ahead: before the answer, not after)."""
    if layer not in ("daily", "hot", "warm", "topic"):
        raise AcmiValidationError("--layer", "enum", "must be daily, hot, warm or topic")
    kept = (
        state()
        .backend()
        .call(
            "memory.remember",
            entity=entity,
            text=text,
            layer=layer,
            section=section,
            topic=topic,
            ttl=ttl,
        )
    )
    emit(kept, state().output)


def _read_text(path: str, flag: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise AcmiValidationError(
            flag, "file", f"cannot read {path!r}: {exc.strerror or exc}"
        ) from None
    except UnicodeDecodeError:
        raise AcmiValidationError(flag, "utf8", f"{path!r} is not UTF-8") from None


@app.command()
def active(
    entity: Entity,
    set_: Annotated[
        str | None,
        typer.Option("--set", metavar="FILE", help="replace the hot layer with this file"),
    ] = None,
    text: Annotated[bool, typer.Option("--text", help="print the Markdown only")] = False,
) -> None:
    """Show (or --set FILE) ACTIVE-CONTEXT.md, the hot layer."""
    given = None if set_ is None else _read_text(set_, "--set")
    shown = state().backend().call("memory.active.get", entity=entity, text=given)
    if text:
        print(shown["text"] or "", end="")
        return
    emit(shown, state().output)


@app.command("daily-summary")
def daily_summary(
    entity: Entity,
    date: Annotated[str | None, typer.Option(help="YYYY-MM-DD (default today)")] = None,
) -> None:
    """A day's note and what it holds."""
    emit(state().backend().call("memory.daily_summary", entity=entity, date=date), state().output)


@app.command("topic-create")
def topic_create(
    entity: Entity,
    slug: Annotated[str, typer.Argument(help="the topic's slug, e.g. pricing")],
    name: Annotated[str | None, typer.Option(help="its title (default the slug)")] = None,
) -> None:
    """A topic file from the seed's template."""
    created = (
        state().backend().call("memory.topics.create", entity=entity, slug=slug, name=name or slug)
    )
    emit(created, state().output)


@app.command()
def prune(
    entity: Entity, days: Annotated[int, typer.Option(help="dated items older than this move")] = 7
) -> None:
    """Move completed and stale hot items to today's note."""
    emit(state().backend().call("memory.prune", entity=entity, days=days), state().output)


@app.command()
def handoff(
    entity: Entity,
    file: Annotated[str | None, typer.Option(help="the handoff's text file")] = None,
    take: Annotated[bool, typer.Option(help="read and clear the pending handoff")] = False,
    done: Annotated[list[str] | None, typer.Option(help="what was done (repeatable)")] = None,
    in_progress: Annotated[
        list[str] | None, typer.Option(help="what is in progress (repeatable)")
    ] = None,
    next_step: Annotated[list[str] | None, typer.Option(help="a next step (repeatable)")] = None,
    decision: Annotated[list[str] | None, typer.Option(help="a key decision (repeatable)")] = None,
    gotcha: Annotated[list[str] | None, typer.Option(help="a gotcha (repeatable)")] = None,
) -> None:
    """Write HANDOFF.md for the next session: --file as written, or the seed's template
    filled from --done, --in-progress, --next-step, --decision, --gotcha; or --take it."""
    if take:
        taken = state().backend().call("memory.handoff.take", entity=entity)
        emit({"handoff": taken}, state().output)
        return
    parts = {
        "done": done,
        "in_progress": in_progress,
        "next_steps": next_step,
        "decisions": decision,
        "gotchas": gotcha,
    }
    given = {name: value for name, value in parts.items() if value}
    if file is None and not given:
        raise AcmiValidationError(
            "--file", "required", "give the handoff's text file, its parts (--done ...), or --take"
        )
    text = _read_text(file, "--file") if file is not None else None
    fields: dict[str, object] = {"text": text} if text is not None else {}
    answer = state().backend().call("memory.handoff", entity=entity, **fields, **given)
    emit(answer, state().output)


@app.command()
def debug(entity: Entity) -> None:
    """Missing pieces, conflicts, stale items (exit 1 if any)."""
    report = state().backend().call("memory.debug", entity=entity)
    emit(report, state().output)
    if not report["ok"]:
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def export(entity: Entity, dir: Dir) -> None:
    """Write the seed's file tree."""
    from acmi_core.memory.tree import write_files

    written = write_files(state().backend().call("memory.export", entity=entity), dir)
    emit({"entity": entity, "dir": dir, "files": written}, state().output)


@app.command("import")
def import_(
    entity: Entity,
    dir: Dir,
    strict: Annotated[bool, typer.Option(help="refuse files over budget")] = False,
    quiet: Annotated[bool, typer.Option(help="no progress bar")] = False,
) -> None:
    """Import a tree (idempotent; progress on stderr)."""
    if state().remote() is not None:  # one request: the API writes it as the store does
        from acmi_core.memory.tree import read_files

        files = read_files(dir)
        imported = (
            state().backend().call("memory.import", entity=entity, files=files, strict=strict)
        )
        emit(imported, state().output)
        return
    memory = _memory()[1]
    with _Progress(quiet) as progress:
        # no request to answer in time: the lines are embedded for up to LOCAL_EMBED_S
        done = memory.migrate(
            entity, dir, progress=progress, strict=strict, embed_budget_s=LOCAL_EMBED_S
        )
        emit(done, state().output)


# the seed's name for the same thing
app.command("migrate", help="Migrate a seed workspace into ACMI (= import).")(import_)


class _Progress:
    """The import's progress on stderr (stdout stays the result): a rich bar on a
    terminal, a one-line text bar otherwise, nothing with --quiet."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __enter__(self) -> Callable[[int, int], None] | None:
        if self.quiet:
            return None
        if not sys.stderr.isatty():
            return _text_bar
        from rich.console import Console
        from rich.progress import Progress

        self.bar = Progress(transient=True, console=Console(stderr=True))
        self.bar.__enter__()
        self.task = self.bar.add_task("writes", total=None)
        return self._update

    def _update(self, done: int, total: int) -> None:
        assert self.bar is not None and self.task is not None
        self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def _text_bar(done: int, total: int) -> None:
    width = 30
    filled = width if not total else width * done // total
    end = "\n" if done >= total else ""
    print(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} writes",
        end=end, file=sys.stderr, flush=True,
    )  # fmt: skip

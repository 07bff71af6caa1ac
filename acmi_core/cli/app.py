"""The root of the ``acmi`` command: its global options, its command groups, and
``main`` (the console script), which maps every outcome to an exit code."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from acmi_core import __version__
from acmi_core.base.errors import AcmiError
from acmi_core.cli import (
    agents,
    coordination,
    entities,
    local,
    memory,
    operator,
    quota,
    work,
    workflows,
)
from acmi_core.cli.output import EXIT_CODES, EXIT_USAGE, Output, error_text, exit_code
from acmi_core.cli.state import CURRENT, CliState

HELP = f"""ACMI: profiles, signals and timelines for agents, from the command line.

Works on the store the environment names (UPSTASH_REDIS_REST_URL + _TOKEN, or
ACMI_REDIS_URL, else the embedded store kept in ACMI_HOME and shared with a running
`acmi serve`), or on a deployed API with --api URL and ACMI_API_KEY (or a profile of
~/.config/acmi/config.toml). Output: a table on a terminal, JSON when piped or with --json
(`cat` prints the reference's lines and `bootstrap` its bundle either way).

{EXIT_CODES}"""

app = typer.Typer(
    name="acmi",
    help=HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # errors are one line on stderr, never a traceback
    # plain text: markdown read `agent:<id>` as a tag and `:id:` as an emoji, and rich
    # boxes cut option names at 80 columns
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
for commands in (entities.app, agents.app, local.app, operator.app, quota.app):
    app.add_typer(commands)
app.add_typer(work.app, name="work")
app.add_typer(workflows.app, name="workflow")
app.add_typer(coordination.locks, name="lock")
app.add_typer(coordination.hitl, name="hitl")
app.add_typer(agents.agents, name="agents")
app.add_typer(memory.app, name="memory")
app.add_typer(operator.keys, name="keys")
app.add_typer(operator.sources, name="sources")
app.add_typer(operator.jobs, name="jobs")
app.add_typer(quota.report_app, name="quota")


def _print_version(value: bool) -> None:
    if value:
        print(f"acmi {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
    tenant: Annotated[
        str | None, typer.Option(help="tenant id on the store (default: ACMI_DEFAULT_TENANT)")
    ] = None,
    api: Annotated[
        str | None,
        typer.Option(envvar="ACMI_API_URL", help="a deployed API's URL (key: ACMI_API_KEY)"),
    ] = None,
    profile: Annotated[
        str | None, typer.Option(envvar="ACMI_PROFILE", help="a profile of the config file")
    ] = None,
    output: Annotated[
        Output, typer.Option("--output", "-o", help="auto: a table on a terminal, else JSON")
    ] = Output.AUTO,
    json_: Annotated[
        bool, typer.Option("--json", help="JSON output (--json and -o also work after the command)")
    ] = False,
) -> None:
    given = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    given.tenant, given.api, given.profile = tenant, api, profile
    given.output = Output.JSON if json_ else output
    ctx.obj = given
    ctx.call_on_close(given.resources.close)
    CURRENT.set(given)


def _hoist_output(argv: list[str]) -> list[str]:
    """The output options after the command (``acmi get user x --json``, ``-o table``)
    mean the global ones: moved to the front; after ``--`` everything is an argument."""
    end = argv.index("--") if "--" in argv else len(argv)
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < end:
        arg = argv[i]
        if arg == "--json" or arg.startswith("--output="):
            front.append(arg)
        elif arg in ("-o", "--output") and i + 1 < end:
            front += [arg, argv[i + 1]]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return [*front, *rest, *argv[end:]]


def main(argv: Sequence[str] | None = None, *, state: CliState | None = None) -> int:
    """Run one command; ``state`` presets the invocation (tests pass a client this way).
    Returns the exit code (``output.EXIT_CODES``)."""
    args = _hoist_output(list(sys.argv[1:] if argv is None else argv))
    command = typer.main.get_command(app)
    try:
        try:
            # standalone: typer reports usage errors (exit 2) and runs shell completion
            command.main(args, prog_name="acmi", obj=state)
        finally:
            # here, not at exit: a closed pipe is caught below; `acmi mcp`'s stdio
            # transport closes stdout itself when the client leaves
            if not sys.stdout.closed:
                sys.stdout.flush()
    except AcmiError as exc:
        print(f"error: {error_text(exc)}", file=sys.stderr)
        return exit_code(exc)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    except BrokenPipeError:  # `acmi list user | head`: the reader left, not an error
        # what is still buffered cannot be written: point stdout at /dev/null so the
        # interpreter's own flush at exit does not fail again (the Python docs' recipe)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return 0

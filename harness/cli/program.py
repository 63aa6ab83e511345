"""The ``harness`` program: the typer app with every command's module registered in the order
``--help`` lists them, and ``main``, the entry point (``harness`` console script, ``python -m
harness.cli``)."""

from __future__ import annotations

import typer

from harness.cli import (
    backends,
    bench,
    compare,
    diffusers,
    env,
    history,
    ingest,
    kernels,
    lightx2v,
    report,
    run,
    scenarios,
)
from harness.cli.common import need_subcommand, run_app
from harness.errors import EXIT_CODES_HELP, Exit

app = typer.Typer(
    add_completion=False,
    invoke_without_command=True,
    rich_markup_mode="rich",
    help="A/B benchmark and accuracy harness for attention backends in video+audio generation.",
    epilog=EXIT_CODES_HELP,
)
app.callback()(need_subcommand)
for command in (
    run, compare, report, ingest, history, env, backends, kernels, scenarios, bench, lightx2v, diffusers,
):  # fmt: skip
    command.register(app)


def main(args: list[str] | None = None, prog_name: str | None = None) -> None:
    """The ``harness`` command (``args``: the command line after the program name; default sys.argv).

    Exit codes: see ``harness.errors`` (one contract for every command). As the program, the
    process ends through ``end_program``; as a library, ``SystemExit`` carries the code.
    """
    from harness.cli_startup import HANDLED, IS_PROGRAM, end_program

    try:
        run_app(app, args, prog_name or "harness", HANDLED)
    except SystemExit as stop:
        if not IS_PROGRAM:
            raise
        end_program(stop.code)
    except KeyboardInterrupt:  # a second signal while the first interruption was being said
        if not IS_PROGRAM:
            raise
        end_program(Exit.INTERRUPTED)
    if IS_PROGRAM:
        end_program(0)

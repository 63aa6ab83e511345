"""The ``harness`` program: the typer app with every command registered in ``--help``'s order, and
``main``, the entry point."""

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
from harness.cli.common import group, need_subcommand, run_app
from harness.errors import EXIT_CODES_HELP, Exit


def version_line() -> str:
    """``harness <version>``: the installed distribution's (else the package's own)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"harness {version('harness')}"
    except PackageNotFoundError:
        from harness import __version__

        return f"harness {__version__}"


def _say_version(ctx: typer.Context, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        print(version_line())
        raise typer.Exit(0)


def top(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_say_version, is_eager=True, help="Print the harness version and exit."
    ),
) -> None:
    need_subcommand(ctx)


def hide_flag_metavars() -> None:
    """Flags take no value, so their help shows none (typer 0.29 printed ``<bool>`` after each)."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "hides_flags", False):
        return

    def display_type_rich(self, ctx):
        if (self.is_flag or getattr(self, "count", False)) and self.metavar is None:
            return None
        return shown(self, ctx)

    display_type_rich.hides_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


hide_flag_metavars()
app = typer.Typer(
    add_completion=False,
    invoke_without_command=True,
    rich_markup_mode="rich",
    help="A/B benchmark and accuracy harness for attention backends in video+audio generation.",
    epilog=EXIT_CODES_HELP,
)
app.callback()(top)
for command in (run, compare, report, ingest, history, env, backends, kernels):  # in --help's order
    app.command(epilog=getattr(command, "EPILOG", None))(
        getattr(command, command.__name__.rpartition(".")[2])
    )
for module in (scenarios, bench, lightx2v, diffusers):  # groups: a HELP line and their COMMANDS
    sub = group(module.HELP)
    for name, (command, epilog) in module.COMMANDS.items():
        sub.command(name, epilog=epilog)(command)
    app.add_typer(sub, name=module.__name__.rpartition(".")[2])


def main(args: list[str] | None = None, prog_name: str | None = None) -> None:
    """The ``harness`` command: as the program it ends through ``end_program``, as a library by SystemExit."""
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

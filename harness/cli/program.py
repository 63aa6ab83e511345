"""The ``harness`` program: the typer app with every command registered in ``--help``'s order, the
small ``env``, ``backends`` and ``kernels`` commands, and ``main``, the entry point."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from harness.cli import bench, compare, diffusers, history, ingest, lightx2v, report, run, scenarios
from harness.cli.common import err, group, need_subcommand, out, print_paths, run_app
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

    shown = TyperOption.display_type_rich

    def display_type_rich(self, ctx):
        if (self.is_flag or getattr(self, "count", False)) and self.metavar is None:
            return None
        return shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


def env(as_json: bool = typer.Option(False, "--json", help="Print the full fingerprint as JSON.")):
    """Show the environment fingerprint recorded into every campaign."""
    from harness.envinfo import fingerprint, summary_lines

    fp = fingerprint()
    if as_json:
        sys.stdout.write(json.dumps(fp, indent=2) + "\n")
        return
    from rich.table import Table

    table = Table(show_header=False)
    for k, v in summary_lines(fp):
        table.add_row(k, v)
    out.print(table)


def backends(
    scenario: str | None = typer.Argument(
        None, help="A scenario file: its plugins are imported first, so their backends are listed."
    ),
):
    """List the attention backends: what each runs, whether it is available here (and why not)."""
    from rich.table import Table

    from harness.attention.registry import BACKENDS
    from harness.scenario.load import load_scenario
    from harness.scenario.plugins import entry_point_plugins

    plugins = load_scenario(scenario).plugin_refs if scenario is not None else entry_point_plugins()
    labels = [(label.rpartition(" "), plugin.ref) for plugin in plugins for label in plugin.registers]
    origin = {name: ref for (what, _, name), ref in labels if what == "attention backend"}
    table = Table()
    for col in ("backend", "runs", "available", "note"):
        table.add_column(col, overflow="fold")
    for name in BACKENDS.names():
        cls = BACKENDS.get(name)
        ok, why = cls.availability()
        badge = default_badge(cls)
        runs = cls.description + (f"; by default {badge}" if badge else "")
        runs += f" (plugin {origin[name]})" if name in origin else ""
        table.add_row(name, runs, "yes" if ok else "no", why)
    out.print(table)


def default_badge(cls) -> str:
    """An emulator's provenance with its default options ('' for kernels, or where it will not build)."""
    if not cls.emulated:
        return ""
    try:
        provenance = cls().provenance
    except Exception:  # a plugin emulator that needs more than its defaults: its description says it
        return ""
    return provenance.badge() if provenance is not None else ""


KERNELS_EPILOG = "Example: harness kernels scenarios/kernels_smoke.yaml"


def kernels(
    scenario: str = typer.Argument(..., help="Scenario of kind `kernels`."),
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Root folder of results."),
):
    """Kernel-level accuracy and speed of attention backends on the model's shapes."""
    from harness.kernels.report import kernels_summary
    from harness.kernels.run import run_kernels_scenario
    from harness.text_table import terminal_text

    result, paths = run_kernels_scenario(scenario, out_root=out_dir, console=err)
    sys.stdout.write(terminal_text([kernels_summary(result)], []))
    print_paths(paths)


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
    function = getattr(command, command.__name__.rpartition(".")[2], command)  # a module: its command
    app.command(epilog=KERNELS_EPILOG if command is kernels else getattr(command, "EPILOG", None))(function)
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

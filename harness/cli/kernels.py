"""``harness kernels``: kernel-level accuracy and speed of attention backends on a model's shapes."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from harness.cli.common import err, print_paths

EPILOG = "Example: harness kernels scenarios/kernels_smoke.yaml"


def kernels(
    scenario: str = typer.Argument(..., help="Scenario of kind `kernels`."),
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Root folder of results."),
):
    """Kernel-level accuracy and speed of attention backends on the model's shapes."""
    import shutil

    from harness.kernels.report import kernels_summary
    from harness.kernels.run import run_kernels_scenario
    from harness.text_table import terminal_text

    result, paths = run_kernels_scenario(scenario, out_root=out_dir, console=err)
    width = max(60, shutil.get_terminal_size((100, 40)).columns)
    sys.stdout.write(terminal_text([kernels_summary(result)], [], width))
    print_paths(paths)

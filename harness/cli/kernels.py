"""``harness kernels``: kernel-level accuracy and speed of attention backends on a model's shapes."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.cli.common import err, print_paths

EPILOG = "Example: harness kernels scenarios/kernels_smoke.yaml"


def kernels(
    scenario: str = typer.Argument(..., help="Scenario of kind `kernels`."),
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Root folder of results."),
):
    """Kernel-level accuracy and speed of attention backends on the model's shapes."""
    from harness.kernels.run import run_kernels_scenario

    print_paths(run_kernels_scenario(scenario, out_root=out_dir, console=err))

"""``harness compare A B``: two runs or media files as a table, markdown or JSON, optionally gated.
Two files import no campaign machinery, renderer, pandas nor torch (``tests/test_cli_lean.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from harness.cli.common import err, say_err
from harness.errors import Exit, UsageError

EPILOG = "Example: harness compare reports/e2e_3step/3step:torch_sdpa reports/e2e_3step/3step:sage_emul_aiter"


def compare(
    run_a: str = typer.Argument(
        ...,
        help="Reference: a run directory, CAMPAIGN:ARM (one of several runs: ARM@SEED, ARM@SEED~rN) or an mp4 file.",
    ),
    run_b: str = typer.Argument(..., help="Compared against A: the same forms as A."),
    fmt: str = typer.Option("table", "--format", "-f", help="table, md or json."),
    gate: Path | None = typer.Option(
        None,
        help="YAML/JSON thresholds (schema: harness scenarios schema --gate); exit 1 when one is violated.",
    ),
    truncate: bool = typer.Option(False, help="Compare up to the shorter video (recorded)."),
    resample_audio: bool = typer.Option(False, help="Resample B's audio to A's rate (recorded)."),
):
    """Compare two runs or mp4 files (A is the reference): speed, accuracy, statistics, bitwise, attention calls."""
    if fmt not in ("table", "md", "json"):
        raise UsageError(f"--format: expected table, md or json (got {fmt!r})")
    from harness.compare.gates import judge_gate, load_gate
    from harness.compare.inputs import compare_inputs
    from harness.report.comparison import format_compare_output

    # Every refusal of the inputs (gate file, runs, media) comes before anything is printed.
    the_gate = load_gate(gate) if gate else None
    cmp = compare_inputs(run_a, run_b, truncate=truncate, resample_audio=resample_audio)
    if cmp.errors:  # found only while decoding (a file corrupt past its header): still no table
        for problem in cmp.errors:
            say_err(f"error: {problem}")
        raise typer.Exit(Exit.BAD_INPUT)
    outcome = judge_gate(cmp, the_gate, gate) if the_gate is not None else None
    # Laid out already: printed as is, never re-wrapped or styled.
    sys.stdout.write(format_compare_output(cmp, fmt, outcome))
    for v in outcome.violations if outcome is not None else ():
        say_err(f"gate: {v}")
    if not cmp.measured:
        why = "; ".join(n.removeprefix("no accuracy metrics: ") for n in cmp.notes if "accuracy" in n)
        say_err(f"error: not measured: {why or 'no accuracy metrics'}")
        raise typer.Exit(Exit.RUN_FAILED)
    if outcome is not None and outcome.violations:
        raise typer.Exit(Exit.GATE_FAILED)
    if outcome is not None:
        err.print(f"gate {gate}: passed")

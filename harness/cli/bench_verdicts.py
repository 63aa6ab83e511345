"""``harness bench verdicts``: the false-alarm rate and the power of every verdict rule on campaigns
drawn from measured distributions (``harness.bench.verdicts`` does the work; this prints its
markdown), and ``--measure``, which makes those distributions from a calibration campaign."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from harness.errors import UsageError

EPILOG = (
    "Examples: harness bench verdicts   |   harness bench verdicts --measure "
    "reports/verdict_calibration/3step --write harness/bench/verdict_calibration.json"
)


def register(bench_app: typer.Typer) -> None:
    bench_app.command("verdicts", epilog=EPILOG)(bench_verdicts)


def bench_verdicts(
    draws: int = typer.Option(500, min=10, help="Campaigns drawn per row."),
    seed: int = typer.Option(0, min=0, help="Seed of the draws (the same seed, the same table)."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the rows (JSON) here."),
    measure: Path | None = typer.Option(
        None, help="A calibration campaign (scenarios/verdict_calibration.yaml): measure its distributions."
    ),
    write: Path | None = typer.Option(None, help="With --measure: the fixture file to write."),
    workdir: Path = typer.Option(
        Path("reports/bench-verdicts"), help="With --measure: where defects are made."
    ),
):
    """False alarms and power of the verdict rules on campaigns drawn from measured distributions."""
    from harness.store import write_record

    if measure is not None:
        if write is None:
            raise UsageError("--measure: give --write FILE for the fixture it makes")
        from harness.bench.verdict_fixture import measure_fixture

        write_record(write, measure_fixture(measure, workdir, say=lambda m: print(m, file=sys.stderr)))
        print(f"fixture: {write}")
        return
    if write is not None:
        raise UsageError("--write: only with --measure")
    from harness.bench.verdicts import markdown, run_bench

    result = run_bench(draws=draws, seed=seed)
    sys.stdout.write(markdown(result))
    if json_path is not None:
        write_record(json_path, result)

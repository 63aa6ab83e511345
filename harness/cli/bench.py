"""``harness bench metrics`` (the metric suite against a naive scikit-image loop) and ``harness bench
verdicts`` (false alarms and power of the verdict rules; ``--measure`` makes their distributions)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from harness.errors import UsageError

HELP = "Benchmarks of the harness itself."
VERDICTS_EPILOG = (
    "Examples: harness bench verdicts   |   harness bench verdicts --measure "
    "reports/verdict_calibration/3step --write harness/bench/verdict_calibration.json"
)


def bench_metrics(
    workdir: Path = typer.Option(Path("reports/bench-metrics"), help="Where the test videos are made."),
    frames: int = typer.Option(362, help="Frames of the pair (the pull request's size: 362)."),
    height: int = typer.Option(768),
    width: int = typer.Option(1344),
    naive: bool = typer.Option(True, help="Also time the naive scikit-image loop."),
    double: bool = typer.Option(True, help="Also time a video twice as long."),
    device: str = typer.Option("cpu", help="cpu, cuda or auto: where the suite computes."),
    naive_frames: int = typer.Option(24, help="Frames the naive loop runs (fewer: extrapolated, marked ~)."),
    profile: bool | None = typer.Option(None, help="Time split of the CPU stages (default: on for cpu)."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the result record (JSON) here."),
):
    """Time the full metric suite against a naive per-frame scikit-image loop, side by side."""
    from harness.bench.run import bench_metrics as run_bench
    from harness.store import write_record

    result = run_bench(
        workdir, frames=frames, height=height, width=width, naive=naive, double=double,
        device=device, naive_frames=naive_frames, profile=profile,
    )  # fmt: skip
    sys.stdout.write(result.markdown() + "\n")
    if json_path is not None:
        write_record(json_path, result)


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
        from harness.bench.verdict_draws import measure_fixture

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


COMMANDS = {
    "metrics": (bench_metrics, "Example: harness bench metrics --frames 362"),
    "verdicts": (bench_verdicts, VERDICTS_EPILOG),
}

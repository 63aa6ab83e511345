"""``harness bench metrics``: the metric suite timed against a naive per-frame scikit-image loop,
side by side (``harness.bench`` does the work; this prints its markdown); ``harness bench verdicts``
is ``cli.bench_verdicts``'s."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from harness.cli import bench_verdicts
from harness.cli.common import group


def register(app: typer.Typer) -> None:
    bench_app = group("Benchmarks of the harness itself.")
    bench_app.command("metrics", epilog="Example: harness bench metrics --frames 362")(bench_metrics)
    bench_verdicts.register(bench_app)
    app.add_typer(bench_app, name="bench")


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
    from harness.bench import bench_metrics as run_bench
    from harness.store import write_record

    result = run_bench(
        workdir, frames=frames, height=height, width=width, naive=naive, double=double,
        device=device, naive_frames=naive_frames, profile=profile,
    )  # fmt: skip
    sys.stdout.write(result.markdown() + "\n")
    if json_path is not None:
        write_record(json_path, result)

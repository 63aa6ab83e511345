"""``harness history``: every results.json under some folders as one table over time, and its gate."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.cli.common import err, say_err
from harness.errors import Exit

EPILOG = (
    "Example: harness history reports/ci-builds --out reports/history --last 5 --gate   "
    "(exit 1: the newest campaign regressed against the ones before it)"
)


def history(
    dirs: list[Path] = typer.Argument(
        ..., help="Folders searched for results.json (campaigns, scenarios, builds)."
    ),
    out_dir: Path = typer.Option(
        Path("reports/history"), "--out", help="Where history.csv and history.html go."
    ),
    last: int = typer.Option(5, min=1, help="Each campaign is tested against the N campaigns before it."),
    gate: bool = typer.Option(
        False, "--gate", help="Exit 1 when the newest campaign regressed significantly."
    ),
):
    """Every results.json under the folders as one table over time: history.csv and history.html."""
    from harness.history import build_history
    from harness.safe_write import check_writable_dir

    check_writable_dir(out_dir, "--out")  # a place that cannot be written: exit 2, before any reading
    h = build_history(dirs, out_dir, last=last)
    print(f"{h.campaigns} campaign(s), {h.runs} run(s), scenario(s): {', '.join(h.scenarios)}")
    for line in h.moved:
        print(line)
    if not h.moved:
        print(
            "no metric moved more than its noise (runs as samples, Holm over every test of the history, alpha 0.05)"
        )
    print(f"history.csv: {h.csv_path}")
    print(f"history.html: {h.html_path}")
    for line in h.skipped:  # the others are in the history; exit 3 as a report with an unreadable run
        say_err(f"error: {line}")
    if gate:
        for line in h.regressions:
            say_err(f"regression: {line}")
        if h.regressions and not h.skipped:
            raise typer.Exit(Exit.GATE_FAILED)
        if not h.regressions:
            err.print(f"history gate: passed (newest campaign against the last {last})")
    if h.skipped:
        raise typer.Exit(Exit.RUN_FAILED)

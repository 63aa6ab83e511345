"""``harness report``: a campaign's report, or the pages again from a results.json alone
(``--from-results``), and the CI job's summary where asked or $GITHUB_STEP_SUMMARY is set."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from harness.cli.common import fail_on_report_errors, print_paths, waiting_line
from harness.errors import UsageError

EPILOG = (
    "Examples: harness report reports/e2e_3step/3step   |   "
    "harness report --from-results reports/e2e_3step/3step/results.json --out pages"
)


def report(
    campaign: Path | None = typer.Argument(
        None, help="Campaign directory (or reports/<scenario> for its newest)."
    ),
    single_file: bool | None = typer.Option(
        None,
        "--single-file/--with-assets",
        help="index.html with every image inlined (one file), or beside assets/ (default: the scenario's "
        "report.single_file, else beside assets/).",
    ),
    from_results: Path | None = typer.Option(
        None, "--from-results", help="Render the pages from this results.json only (no campaign, no media)."
    ),
    out_dir: Path | None = typer.Option(
        None, "--out", help="With --from-results: where the pages go (default: the results file's folder)."
    ),
    github_summary: bool | None = typer.Option(
        None,
        "--github-summary/--no-github-summary",
        help="The CI job summary (markdown, verdicts first, under 1 MiB): appended to $GITHUB_STEP_SUMMARY "
        "when that is set, else written to github-summary.md beside the report. Default: appended when "
        "$GITHUB_STEP_SUMMARY is set.",
    ),
):
    """Write report.md, pr.md, index.html, results.json and assets/ for a campaign."""
    if from_results is not None:
        if campaign is not None:
            raise UsageError(
                f"--from-results: not with a campaign directory ({campaign}); give one of the two"
            )
        from harness.report import render_results
        from harness.safe_write import check_writable_dir

        # A place for the pages that cannot be written: exit 2, before anything is read.
        if out_dir is not None or from_results.is_file():
            check_writable_dir(out_dir if out_dir is not None else from_results.parent, "--out")
        paths = render_results(from_results, out_dir, single_file=single_file)
    else:
        if campaign is None:
            raise UsageError("harness report: Missing argument 'CAMPAIGN' (or give --from-results FILE).")
        if out_dir is not None:
            raise UsageError("--out: only with --from-results (a campaign's report is written into it)")
        from harness.report import build_report
        from harness.store import find_campaign

        camp = find_campaign(campaign)
        # One writer at a time (a report waits for a run, an ingest or another report).
        paths = build_report(
            camp, single_file=single_file, on_wait=waiting_line(camp.path, "the report is built")
        )
    print_paths(paths)
    from harness.report.github_summary import publish_summary, run_url, summary_target

    target, append = summary_target(github_summary, dict(os.environ), paths.index_html.parent)
    if target is not None:
        try:
            written = publish_summary(paths, target, append=append, run_url=run_url(dict(os.environ)))
        except OSError as err:
            raise UsageError(f"$GITHUB_STEP_SUMMARY {target}: cannot write ({err.strerror or err})") from None
        print(f"job summary: {written}{' (appended)' if append else ''}")
    fail_on_report_errors(paths)

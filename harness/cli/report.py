"""``harness report``: a campaign's report, or the pages again from a results.json alone (``--from-results``),
the CI job's summary; ``--fail-on WORD``: exit 1 when a candidate's verdict is one of the words named."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from harness.cli.common import fail_on_report_errors, print_paths, say_err, waiting_line
from harness.errors import Exit, UsageError, visible
from harness.rule import WORDS

EPILOG = (
    "Examples: harness report reports/e2e_3step/3step   |   "
    "harness report --from-results reports/e2e_3step/3step/results.json --out pages   |   "
    "harness report reports/e2e_3step/3step --fail-on outside,inconclusive"
)


def fail_words(values: list[str] | None) -> set[str]:
    """``--fail-on a,b --fail-on c``: the verdict words named; an unknown one (or none) is a usage error."""
    words = {w.strip() for v in values or [] for w in v.split(",") if w.strip()}
    bad = sorted(words - set(WORDS)) or ([""] if values and not words else [])
    if bad:
        raise UsageError(f"--fail-on: {bad[0]!r} is not a verdict word (known: {', '.join(WORDS)})")
    return words


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
    fail_on: list[str] | None = typer.Option(
        None,
        "--fail-on",
        metavar="<word[,word]>",
        help=f"After writing the report, exit 1 when a candidate's verdict is one of these words "
        f"({', '.join(WORDS)}; comma-separated or repeated), one line per such arm on stderr.",
    ),
):
    """Write report.md, pr.md, index.html, results.json and assets/ for a campaign."""
    words = fail_words(fail_on)  # a word no verdict has: exit 2 before anything is read
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
    failing = []
    if words:
        from harness.analysis.model import read_results

        failing = [r for r in read_results(paths.results_json).review if r.word in words]
    for r in failing:
        say_err(f"fail-on {r.word}: {visible(r.line or f'{r.arm}: {r.word}')}")
    fail_on_report_errors(paths)  # exit 3 before 1
    if failing:
        raise typer.Exit(Exit.GATE_FAILED)

"""Campaign report: report.md (every table, a summary first), pr.md (the pull request's compact
tables), index.html (static CI page, beside assets/ or one file) and the figures.

The report renders results.json only: ``build_report`` analyses the campaign first
(``harness.analysis.analyze``, cached: an unchanged campaign is not analysed again) and renders
what it wrote; ``render_results`` renders a results.json alone (a CI artifact, anywhere), without
the campaign's media. Nothing here reads media, compares runs or judges them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.analysis.model import ReportResults
from harness.report.render import ReportPaths, load_results, render
from harness.safe_write import restored_on_failure
from harness.scenario.verdict import VerdictRules
from harness.store import CampaignDir

Progress = Callable[[str], None]
REPORT_FILES = (
    "results.json",
    "report.md",
    "pr.md",
    "index.html",
    "benchmark.json",
    "assets",
)  # written together


def build_report(
    campaign: CampaignDir,
    *,
    progress: Progress | None = None,
    rules: VerdictRules | None = None,
    single_file: bool | None = None,
) -> ReportPaths:
    """Analyse the campaign (cached) and write report.md, pr.md, index.html and the figures beside its
    results.json.

    ``rules``: how verdicts and speed tests judge (default: the campaign's scenario's).
    ``single_file``: index.html with every image inlined (one file that opens anywhere); None
    takes the scenario's ``report.single_file`` (default: a page beside its assets/ folder).
    """
    from harness.analysis.analyze import RESULTS_JSON, analyze_campaign

    # Ctrl-C (or any failure) midway puts the old report back whole: never new assets under old pages.
    with restored_on_failure(campaign.path, REPORT_FILES):
        res = analyze_campaign(campaign, progress=progress, rules=rules)
        return render(res, campaign.path / RESULTS_JSON, single_file=single_file, progress=progress)


def render_results(
    results_path: Path, out_dir: Path | None = None, *, single_file: bool | None = None
) -> ReportPaths:
    """Render a results.json (and the assets beside it) into ``out_dir`` (default: its folder).

    Assets it names that are missing are named in the page as missing; ``single_file`` inlines
    the images that exist.
    """
    results_path = Path(results_path)
    return render(load_results(results_path), results_path, out_dir, single_file=single_file)


__all__ = ["ReportPaths", "ReportResults", "build_report", "render_results"]

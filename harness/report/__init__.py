"""Campaign report: report.md, pr.md, index.html and the figures, from results.json only: ``build_report``
analyses the campaign (cached) and renders what it wrote; ``render_results`` renders a results.json alone."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

from harness.analysis.model import read_results
from harness.errors import Exit, HarnessError
from harness.report.render import Progress, ReportPaths, render
from harness.safe_write import WriteError, failed_writes, restored_on_failure
from harness.store import CampaignDir
from harness.writer_lock import CampaignLock, LockHolder

# written together
REPORT_FILES = ("results.json", "report.md", "pr.md", "index.html", "benchmark.json", "assets")


def build_report(
    campaign: CampaignDir,
    *,
    progress: Progress | None = None,
    single_file: bool | None = None,
    on_wait: Callable[[LockHolder], None] | None = None,
) -> ReportPaths:
    """Analyse the campaign and write the report beside its results.json, holding its writer lock (``on_wait``
    is told whom it waits for); ``single_file``: every image inlined (None: the scenario's). Any failed write,
    even one the analysis rode over, fails it (exit 3), the old one kept."""
    from harness.analysis.analyze import RESULTS_JSON, analyze_campaign

    if not campaign.campaign_json.exists():
        campaign.record()  # one line naming the campaign.json that is not there
    with _report_lock(campaign, on_wait), failed_writes(campaign.path) as failed:
        try:
            # Ctrl-C (or any failure) midway puts the old report back whole: never new assets under old pages.
            with restored_on_failure(campaign.path, REPORT_FILES):
                res = analyze_campaign(campaign, progress=progress)
                paths = render(res, campaign.path / RESULTS_JSON, single_file=single_file, progress=progress)
                if failed:
                    raise failed[0]
                return paths
        except WriteError as err:
            raise HarnessError(f"{err}; the report is left as it was before", Exit.RUN_FAILED) from None


def _report_lock(campaign: CampaignDir, on_wait: Callable[[LockHolder], None] | None) -> CampaignLock:
    """The report's writer lock; a campaign that cannot be written is one line before anything is read."""
    try:
        return CampaignLock(campaign, "report", on_wait).acquire()
    except WriteError as err:
        if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise HarnessError(
                f"{campaign.path}: cannot write the report there ({err.strerror}); `harness report "
                f"--from-results {campaign.path / 'results.json'} --out DIR` renders it elsewhere",
                Exit.RUN_FAILED,
            ) from None
        raise


def render_results(
    results_path: Path, out_dir: Path | None = None, *, single_file: bool | None = None
) -> ReportPaths:
    """Render a results.json (and the assets beside it) into ``out_dir`` (default: its folder)."""
    results_path = Path(results_path)
    return render(read_results(results_path), results_path, out_dir, single_file=single_file)


__all__ = ["ReportPaths", "build_report", "render_results"]

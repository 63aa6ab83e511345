"""Renderer tests from records: a committed results.json read once, copied and edited in memory
(``model_copy``), and rendered to the texts a reader meets (report.md, pr.md, the page, the job
summary), without a campaign, media or figures. The real path (runs -> analysis -> report) keeps its
own end-to-end tests (test_report.py)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from harness.analysis.model import ReportResults, read_results
from harness.analysis.verdict_model import Verdict

EXAMPLES = Path(__file__).resolve().parents[2] / "reports" / "examples"
# Two seeds x two repeats on the CPU: three exact floors, emulators (outside, in situ too), two arms
# skipped, a hybrid, a shadowed copy of the reference (identical), latents.
CPU = EXAMPLES / "cpu" / "e2e_3step" / "results.json"
# One seed, one run, one floor run (K/V reversed) on an H200: two kernels, each inconclusive.
ONE_SEED = EXAMPLES / "h200" / "minimax_h3_tiny" / "gpu_prod_sageattention2" / "results.json"
# Two seeds x three repeats on an H200: in situ decides two candidates, failed and interrupted runs.
H200 = EXAMPLES / "h200" / "e2e_gpu" / "3step" / "results.json"


@cache
def _read(path: Path) -> ReportResults:
    return read_results(path)


def example(path: Path = ONE_SEED) -> ReportResults:
    """A fresh deep copy of the committed results.json at ``path`` (read once per process)."""
    return _read(path).model_copy(deep=True)


def verdict(res: ReportResults, arm: str) -> Verdict:
    return next(v for v in res.verdicts if v.arm == arm)


def edited(res: ReportResults, arm: str, **fields) -> tuple[ReportResults, Verdict]:
    """A copy of ``res`` with ``arm``'s verdict changed by ``fields`` (and that verdict)."""
    out = res.model_copy(deep=True)
    v = verdict(out, arm)
    for k, x in fields.items():
        setattr(v, k, x)
    return out, v


def voiced(res: ReportResults) -> ReportResults:
    """A copy of ``res`` worded again as the analysis words it (``analysis.sentences.voice``): the
    sentences results.json stores follow the records a test edited."""
    from harness.analysis.sentences import voice

    out = res.model_copy(deep=True)
    voice(out)
    return out


def rendered(res: ReportResults, figure: str | None = None) -> dict[str, str]:
    """report.md ("md"), pr.md ("pr"), the page ("html") and the job summary ("job") of ``res`` worded
    again (``voiced``: an arm that did not end ok makes it INCOMPLETE), as ``report.render`` writes them, without figures,
    frame grids or assets; ``figure``: where the page shows the speed-accuracy figure (with its
    caption), as if drawn there."""
    from harness.report.cells import review_view
    from harness.report.figures import figure_captions
    from harness.report.github_summary import github_summary
    from harness.report.html import render_html
    from harness.report.pr import render_pr
    from harness.report.render import render_markdown, summary_section
    from harness.report.tables import build_sections

    res = voiced(res)
    sections = [summary_section(res), *build_sections(res, [], {})]
    return {
        "md": render_markdown(res, sections),
        "pr": render_pr(res),
        "html": render_html(res, sections, review=review_view(res, figure), captions=figure_captions(res)),
        "job": github_summary(res),
    }


def line_of(text: str, prefix: str) -> str:
    """The first line of ``text`` that starts with ``prefix``."""
    return next(ln for ln in text.splitlines() if ln.startswith(prefix))


def section(md: str, title: str) -> str:
    """The body of report.md's section whose heading starts with ``title`` (up to the next ``## ``)."""
    return md.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def badge_of(html: str, arm: str) -> str:
    """The page's badge of ``arm``, its apostrophes unescaped (what a reader sees)."""
    m = re.search(rf'<div class="badge [^"]*" data-arm="{arm}".*?\n</div>', html, re.S)
    assert m, f"no badge for {arm}"
    return m.group(0).replace("&#39;", "'")

"""`harness report --from-results FILE [--out DIR]`: the pages rendered again from a results.json
alone, into the file's folder or DIR (the usage errors are in test_cli_exit_codes)."""

from __future__ import annotations

import sys
from pathlib import Path

from cli_testutil import harness

import harness.report as report_pkg

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))
from campaign_factory import ArmSpec, make_campaign  # noqa: E402


def test_report_from_results_writes_the_pages_where_asked(tmp_path):
    arms = [ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand", noise=1.0)]
    camp = make_campaign(tmp_path / "camp", arms)
    built = report_pkg.build_report(camp)
    pages = tmp_path / "pages"
    res = harness("report", "--from-results", built.results_json, "--out", pages, "--single-file")
    assert res.returncode == 0, res.stderr
    assert f"index.html: {pages / 'index.html'}" in res.stdout
    assert (pages / "index.html").is_file() and (pages / "report.md").is_file()
    # The same report, its images linked from where it now lies (the campaign's assets/ stay put).
    moved = (pages / "report.md").read_text()
    assert "](../camp/tiny/c1/assets/frames/" in moved
    assert moved.replace("](../camp/tiny/c1/assets/", "](assets/") == built.report_md.read_text()

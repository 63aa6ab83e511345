"""harness.report.render_results: a results.json rendered alone (a CI artifact, anywhere), with its
assets or without them; and one of an older schema refused in one line that says how to re-analyse."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from records_testutil import ONE_SEED

from harness.errors import HarnessError
from harness.report import render_results

ROOT = Path(__file__).resolve().parents[2]


def body(md: str) -> str:
    """report.md without its first lines (title, generation time) and its image links."""
    return re.sub(r"!\[[^]]*\]\([^)]*\)", "IMG", md.split("## 1. Speed", 1)[1])


def test_a_copy_with_its_assets_renders_the_same_report(single_report, tmp_path):
    src = single_report.campaign.path
    art = tmp_path / "artifact"
    art.mkdir()
    shutil.copy(src / "results.json", art / "results.json")
    shutil.copytree(src / "assets", art / "assets", ignore=shutil.ignore_patterns("*.png", "figures.json"))
    for png in (src / "assets" / "frames").glob("*.png"):
        shutil.copy(png, art / "assets" / "frames" / png.name)
    for folder in ("audio", "diff"):
        for png in (src / "assets" / folder).glob("*.png"):
            shutil.copy(png, art / "assets" / folder / png.name)
    paths = render_results(art / "results.json")
    assert (
        paths.report_md == art / "report.md"
        and paths.pr_md.read_text() == single_report.paths.pr_md.read_text()
    )
    assert body(paths.report_md.read_text()) == body(single_report.paths.report_md.read_text())
    assert set(paths.figures) == set(single_report.paths.figures)  # drawn here from the numbers and assets
    assert "asset missing" not in paths.report_md.read_text()


def test_without_the_pages_own_assets_report_md_is_whole(single_report, tmp_path):
    """The difference thumbnails, audio clips and spectrogram differences are the page's: a copy
    without them (a committed example keeps no media) renders report.md as with them, no note, and
    the page names a missing clip where it would play (a missing difference is not drawn)."""
    src = single_report.campaign.path
    kept = tmp_path / "kept"
    page_only = ("diff", "*.webm", "*.specdiff.*", "spectrogram_diff.png", "*.html", "*.md")
    shutil.copytree(src, kept, ignore=shutil.ignore_patterns(*page_only, "runs", "metrics"))
    assert not list(kept.rglob("*.webm")) and not (kept / "assets" / "diff").exists()
    paths = render_results(kept / "results.json")
    md = paths.report_md.read_text()
    assert "asset missing" not in md
    assert body(md) == body(single_report.paths.report_md.read_text())
    assert re.search(r"missing: assets/audio/[^<]*\.webm", paths.index_html.read_text())


def test_without_its_assets_the_page_names_them_missing(tmp_path):
    """The committed one-seed results.json copied alone (its assets left behind)."""
    alone = tmp_path / "alone" / "results.json"
    alone.parent.mkdir()
    shutil.copy(ONE_SEED, alone)
    out = tmp_path / "out"
    paths = render_results(alone, out, single_file=True)
    assert paths.index_html == out / "index.html" and not (alone.parent / "index.html").exists()
    md = paths.report_md.read_text()
    assert "asset missing: assets/series/sage_attn2.json" in md and "missing: assets/frames/" in md
    assert "per_frame" not in paths.figures and "step_times" in paths.figures  # drawn from results.json alone
    html = paths.index_html.read_text()
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)  # what exists is inlined
    assert "asset missing: assets/audio/torch_sdpa.json" in html


def test_a_results_json_of_an_older_schema_is_refused_in_one_line(tmp_path):
    """No older schema is migrated: the committed H200 example (/5) written as /4 is one line naming
    the file, both schemas and the command that analyses its campaign again (exit 2, nothing
    written); that command does, as a results.json of another schema is never reused."""
    from cli_testutil import harness

    from harness.analysis.analyze import reusable

    example = ROOT / "reports" / "examples" / "h200" / "e2e_gpu" / "3step"
    campaign = tmp_path / "my campaign"
    shutil.copytree(example, campaign)
    results = campaign / "results.json"
    raw = json.loads(results.read_text())
    digest = raw["inputs_digest"]
    assert raw["schema"] == "harness.report/6" and reusable(results, digest) is not None
    results.write_text(json.dumps({**raw, "schema": "harness.report/4"}))
    out = tmp_path / "pages"
    res = harness("report", "--from-results", results, "--out", out)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.splitlines() == [
        f"error: {results}: schema harness.report/4 is older than this harness reads (harness.report/6); "
        f"re-analyse its campaign with this harness: harness report {shlex.quote(str(campaign))}"
    ]
    assert shlex.quote(str(campaign)) == f"'{campaign}'"  # a folder with a space: quoted for the shell
    assert not out.exists()
    assert reusable(results, digest) is None  # `harness report CAMPAIGN` analyses it again


def test_not_a_results_json_is_one_line(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text('{"schema": "harness.report/1", "campaign_id": "c"}')
    with pytest.raises(
        HarnessError,
        match=r"results.json: schema harness.report/1 is older than this harness reads \(harness.report/6\); "
        f"re-analyse its campaign with this harness: harness report {re.escape(shlex.quote(str(tmp_path)))}$",
    ):
        render_results(bad)
    bad.write_text("{}")
    with pytest.raises(HarnessError, match="not a harness results.json"):
        render_results(bad)
    with pytest.raises(HarnessError, match="results.json not found"):
        render_results(tmp_path / "absent.json")

"""harness.report.render_results: a results.json rendered alone (a CI artifact, anywhere), with its
assets or without them; and a committed results.json of the schema before."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

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


def test_without_its_assets_the_page_names_them_missing(single_report, tmp_path):
    alone = tmp_path / "alone" / "results.json"
    alone.parent.mkdir()
    shutil.copy(single_report.campaign.path / "results.json", alone)
    out = tmp_path / "out"
    paths = render_results(alone, out, single_file=True)
    assert paths.index_html == out / "index.html" and not (alone.parent / "index.html").exists()
    md = paths.report_md.read_text()
    assert "asset missing: assets/series/sage_far.json" in md and "missing: assets/frames/" in md
    assert "per_frame" not in paths.figures and "step_times" in paths.figures  # drawn from results.json alone
    html = paths.index_html.read_text()
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)  # what exists is inlined
    assert "asset missing: assets/audio/torch_sdpa.json" in html


def test_a_results_json_of_the_schema_before_renders(tmp_path):
    """A /2 file (the committed H200 example) is migrated on read (/2 -> /3 -> /4): its tables as they
    were, its speed tests read again as speed-ups, its verdict's word from its booleans."""
    example = ROOT / "tests" / "fixtures" / "h200_e2e_gpu_report2"  # the H200 example of 2026-11-30
    paths = render_results(example / "results.json", tmp_path)
    md = paths.report_md.read_text()
    assert '"schema": "harness.report/2"' in (example / "results.json").read_text()
    assert "| sage_attn2 |" in md and "(schema harness.report/5)" in md
    assert "| sage_attn2 | within |" in md and "within (an older harness's verdict, no intervals)" in md
    old, new = (example / "pr.md").read_text().splitlines(), paths.pr_md.read_text().splitlines()
    start = [next(i for i, ln in enumerate(x) if ln.startswith("| decoded output vs")) for x in (old, new)]
    rows = [[ln for ln in x[i:] if ln.startswith("|")] for x, i in zip((old, new), start, strict=True)]
    assert rows[0] == rows[1]  # the accuracy and statistics tables as they were
    assert "- 🟢 **sage_attn2**: within (an older harness's verdict, no intervals)" in "\n".join(new)


def test_not_a_results_json_is_one_line(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text('{"schema": "harness.report/1", "campaign_id": "c"}')
    with pytest.raises(
        HarnessError, match=r"results.json: schema harness.report/1 is older than this harness reads"
    ):
        render_results(bad)
    bad.write_text("{}")
    with pytest.raises(HarnessError, match="not a harness results.json"):
        render_results(bad)
    with pytest.raises(HarnessError, match="results.json not found"):
        render_results(tmp_path / "absent.json")

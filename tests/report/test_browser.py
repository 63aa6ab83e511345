"""index.html in a real headless chromium: it loads from disk with no console error, fetches
nothing but its own files, shows its tables, and leaves a screenshot behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import load_page
from campaign_factory import keep_artifact

pytestmark = [pytest.mark.browser, pytest.mark.slow]
XSS = "<script>alert(1)</script>"


def _check_local_only(requests: list[str], root: Path) -> None:
    root_url = root.resolve().as_uri()
    for url in requests:
        assert url.startswith(root_url + "/") or url.startswith("data:"), f"page fetched {url}"


def test_index_html_loads_without_console_errors(chromium, single_report, tmp_path: Path):
    camp, paths = single_report.campaign, single_report.paths
    page = load_page(chromium, paths.index_html.resolve().as_uri())
    shot = tmp_path / "report.png"
    shot.write_bytes(page.screenshot)
    kept = keep_artifact(shot, "report_single_seed.png")
    assert page.errors == [], page.console
    assert page.failed == [], page.failed
    _check_local_only(page.requests, camp.path)
    # the page asked for its figures and thumbnails, and they all loaded (no failure above)
    assert sum(u.endswith(".png") for u in page.requests) >= 3 + 16
    assert page.title.startswith("tiny / c1")
    for text in ("1. Speed", "6. Verdicts", "noise floor", "backend unavailable: no GPU here"):
        assert text in page.body_text
    # the hostile reason is shown as text, never run as script
    assert XSS in page.body_text
    assert page.screenshot[:8] == b"\x89PNG\r\n\x1a\n" and kept.exists()


def test_multi_seed_page_loads(chromium, multi_report, tmp_path: Path):
    camp, paths = multi_report.campaign, multi_report.paths
    page = load_page(chromium, paths.index_html.resolve().as_uri())
    shot = tmp_path / "report_multi_seed.png"
    shot.write_bytes(page.screenshot)
    keep_artifact(shot, "report_multi_seed.png")
    assert page.errors == [] and page.failed == [], page.console
    _check_local_only(page.requests, camp.path)
    assert "Latent PSNR per step" in page.body_text and "Noise floor band" in page.body_text


def test_detector_sees_console_errors_and_missing_files(chromium, tmp_path: Path):
    """The checks above would pass vacuously if the client heard nothing: prove it hears errors."""
    page_file = tmp_path / "bad.html"
    page_file.write_text(
        '<html><body><p>x</p><img src="missing.png"><script>console.error("boom")</script></body></html>'
    )
    page = load_page(chromium, page_file.as_uri(), height=400)
    assert any("boom" in e for e in page.errors)
    assert any("missing.png" in e or "ERR_FILE_NOT_FOUND" in e for e in page.errors)
    assert page.failed


def test_in_situ_heatmaps_render_in_the_page(chromium, shadowed_campaign, tmp_path: Path):
    page = load_page(chromium, (shadowed_campaign / "index.html").resolve().as_uri(), height=6000)
    shot = tmp_path / "report_insitu.png"
    shot.write_bytes(page.screenshot)
    keep_artifact(shot, "report_insitu.png")
    assert page.errors == [] and page.failed == [], page.console
    assert page.images_broken == 0
    _check_local_only(page.requests, shadowed_campaign)
    for name in ("insitu_heatmap_sage_emul_thuml", "insitu_heatmap_sage_emul_aiter", "insitu_steps"):
        assert any(u.endswith(f"/assets/{name}.png") for u in page.requests), name
    for text in ("In-situ attention accuracy", "Hybrid schedules", "a shadowed run's timing", "exact floor"):
        assert text in page.body_text, text

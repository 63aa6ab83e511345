"""index.html in a real headless chromium, as a reviewer opens it: it loads from disk with no console
error and fetches nothing but its own files (the one-file form: nothing at all), the verdicts and the
speed-against-accuracy figure are at the top, the compare control and the audio players work, every
image has an alt text, and it reads at desktop and phone widths; screenshots are left behind.

One browser serves the module (a chromium start costs seconds on a 2-core machine)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from browser import Browser
from campaign_factory import keep_artifact

from harness.report import render_results

pytestmark = [pytest.mark.browser, pytest.mark.slow]
XSS = "<script>alert(1)</script>"
DESKTOP, NARROW = (1280, 900), (390, 844)


@pytest.fixture(scope="module")
def session(chromium):
    with Browser(chromium) as b:
        yield b


@pytest.fixture(scope="module")
def one_file(single_report, tmp_path_factory) -> Path:
    """The single-seed campaign's page as one file, written elsewhere (as CI uploads it)."""
    out = tmp_path_factory.mktemp("one_file")
    paths = render_results(single_report.paths.results_json, out, single_file=True)
    alone = out / "page.html"
    alone.write_text(paths.index_html.read_text())
    return alone


def _check_local_only(requests: list[str], root: Path) -> None:
    root_url = root.resolve().as_uri()
    for url in requests:
        assert url.startswith(root_url + "/") or url.startswith("data:"), f"page fetched {url}"


def _pixels(png: bytes) -> np.ndarray:
    from matplotlib.image import imread

    return imread(io.BytesIO(png), format="png")


def test_index_html_loads_without_console_errors(session, single_report, tmp_path: Path):
    camp, paths = single_report.campaign, single_report.paths
    page = session.open(paths.index_html.resolve().as_uri())
    shot = tmp_path / "report.png"
    shot.write_bytes(page.screenshot)
    kept = keep_artifact(shot, "report_single_seed.png")
    assert page.errors == [], page.console
    assert page.failed == [], page.failed
    _check_local_only(page.requests, camp.path)
    # the page asked for its figures, thumbnails, difference images and clips, and they all loaded
    assert sum(u.endswith(".png") for u in page.requests) >= 5 + 16 + 12
    assert page.images_broken == 0
    assert page.title.startswith("tiny / c1")
    for text in ("1. Speed", "6. Verdicts", "noise floor", "backend unavailable: no GPU here"):
        assert text in page.body_text
    # the hostile reason is shown as text, never run as script
    assert XSS in page.body_text
    assert page.screenshot[:8] == b"\x89PNG\r\n\x1a\n" and kept.exists()


def test_the_one_file_page_opens_the_review_and_fetches_nothing(session, one_file, tmp_path: Path):
    page = session.open(one_file.as_uri(), width=DESKTOP[0], height=DESKTOP[1])
    shot = tmp_path / "top.png"
    shot.write_bytes(page.screenshot)
    keep_artifact(shot, "report_top_desktop.png")
    assert page.errors == [] and page.failed == [], page.console
    assert all(u.startswith("data:") for u in page.requests[1:]), [
        u[:80] for u in page.requests
    ]  # the page alone
    assert page.images_broken == 0
    p = page.page
    # what shows in the first screen: the badges with their words, the figure beside them
    top = p.evaluate(
        """() => Array.from(document.querySelectorAll('.badge')).map(b => [b.dataset.arm, b.dataset.word,
             b.getBoundingClientRect().top < innerHeight])"""
    )
    assert [t[:2] for t in top] == [["sage_close", "inconclusive"], ["sage_far", "invalid"], ["broken", "not run"],
                                    ["sage_triton", "not run"]]  # fmt: skip
    assert all(t[2] for t in top[:2])
    fig = p.locator("figure.speed-accuracy img")
    assert fig.evaluate("i => i.naturalWidth > 300 && i.getBoundingClientRect().top < innerHeight")
    colour = p.locator(".badge.inconclusive .word").evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour == "rgb(178, 106, 0)"  # #b26a00: each word its colour
    # every image says what it shows
    alts = p.evaluate("Array.from(document.images).map(i => i.getAttribute('alt') || '')")
    assert len(alts) == 5 + 16 + 12 + 1 + 3 and all(a.strip() for a in alts)  # + the compare stage's three
    assert _folding(p) == []


FOLDING = """() => Array.from(document.querySelectorAll('section table:not(.frames):not(.players)'))
  .map(t => [t.tBodies[0].rows.length, !!t.closest('details.long')])"""


def _folding(p) -> list:
    """Tables folded that should not be, or open that should be (more than LONG_ROWS rows: folded)."""
    from harness.report.html import LONG_ROWS

    return [(n, folded) for n, folded in p.evaluate(FOLDING) if folded != (n > LONG_ROWS)]


def test_the_page_reads_at_a_phone_width(session, one_file, tmp_path: Path):
    page = session.open(one_file.as_uri(), width=NARROW[0], height=NARROW[1])
    shot = tmp_path / "narrow.png"
    shot.write_bytes(page.screenshot)
    keep_artifact(shot, "report_top_narrow.png")
    assert page.errors == [], page.console
    p = page.page
    # nothing wider than the screen but the tables' own scrolling boxes
    assert p.evaluate("document.documentElement.scrollWidth") <= NARROW[0]
    first = p.locator(".badge").first.bounding_box()
    assert first["x"] >= 0 and first["x"] + first["width"] <= NARROW[0]
    fig = p.locator("figure.speed-accuracy img").bounding_box()
    assert fig["width"] <= NARROW[0] and fig["y"] > first["y"]  # the figure goes below the badges


def test_the_compare_control_slides_flips_and_shows_the_difference(session, one_file, tmp_path: Path):
    p = session.open(one_file.as_uri(), width=DESKTOP[0], height=DESKTOP[1]).page
    box = p.locator(".compare").first
    assert box.is_visible()  # the script ran and showed it
    box.locator("select.run").select_option("sage_far")
    frame = box.locator("select.frame option").nth(1).get_attribute("value")
    box.locator("select.frame").select_option(frame)
    stage = box.locator(".stage")
    grid_src = p.evaluate(
        """([run, frame, kind]) => document.querySelector(
             `table.frames img[data-run="${run}"][data-frame="${frame}"][data-kind="${kind}"]`).src""",
        ["sage_far", frame, "frame"],
    )
    ref_src = p.evaluate(
        """(frame) => document.querySelector(`table.frames img[data-run="torch_sdpa"][data-frame="${frame}"]`).src""",
        frame,
    )
    assert stage.locator("img.top").get_attribute("src") == grid_src
    assert stage.locator("img.base").get_attribute("src") == ref_src

    def seen() -> np.ndarray:
        """The stage as shown, but the slider's line at the edges."""
        return _pixels(stage.locator("img.base").screenshot())[:, 4:-4]

    def slide(value: int) -> np.ndarray:
        box.locator("input.pos").fill(str(value))
        return seen()

    slide(20)
    assert "20%" in stage.locator("img.top").evaluate("i => getComputedStyle(i).clipPath")
    run_view, ref_view = slide(0), slide(100)
    assert np.abs(run_view - ref_view).mean() > 0.01  # the slider's two ends show two different frames

    box.locator("input.mode[value=flip]").check()
    assert box.locator("button.flip").is_visible() and not box.locator("input.pos").is_visible()
    flipped_run = seen()
    box.locator("button.flip").click()
    assert "torch_sdpa (reference)" in box.locator(".state").inner_text()
    flipped_ref = seen()
    # flip shows the very frames the slider's two ends show (up to the screenshot's resampling)
    apart = np.abs(run_view - ref_view).mean()
    assert (
        np.abs(flipped_run - run_view).mean() < apart / 4
        and np.abs(flipped_ref - ref_view).mean() < apart / 4
    )
    box.press("f")
    assert "showing sage_far" in box.locator(".state").inner_text()

    box.locator("input.mode[value=diff]").check()
    diff = stage.locator("img.diffview")
    assert diff.is_visible() and diff.get_attribute("alt").startswith("difference of sage_far")
    shown = _pixels(diff.screenshot())
    # the grey image is shown through the colour map: not grey, not blank
    assert np.abs(shown[..., 0] - shown[..., 2]).mean() > 0.02 and shown.std() > 0.01
    shot = tmp_path / "compare.png"
    shot.write_bytes(box.screenshot())
    keep_artifact(shot, "report_compare.png")
    # a thumbnail in the grid opens in the control
    p.locator('table.frames img[data-run="torch_sdpa_kv_reversed"][data-kind="diff"]').first.click()
    assert box.locator("select.run").input_value() == "torch_sdpa_kv_reversed"


def test_the_audio_players_play_each_runs_clip(session, one_file):
    p = session.open(one_file.as_uri(), width=DESKTOP[0], height=DESKTOP[1]).page
    players = p.locator("table.players audio")
    assert players.count() == 4
    state = p.evaluate(
        """async () => {
             const out = [];
             for (const a of document.querySelectorAll('table.players audio')) {
               if (a.readyState < 1) await new Promise(r => a.addEventListener('loadedmetadata', r, {once: true}));
               await a.play();
               for (let i = 0; i < 40 && a.currentTime === 0; i++) await new Promise(r => setTimeout(r, 50));
               a.pause();
               out.push([a.dataset.run, a.duration, a.currentTime, a.error ? a.error.code : 0]);
             }
             return out;
           }"""
    )
    assert [s[0] for s in state] == ["torch_sdpa", "torch_sdpa_kv_reversed", "sage_close", "sage_far"]
    for run, duration, current, error in state:
        assert error == 0 and 0.2 < duration < 10 and current > 0, (run, duration, current)


def test_long_tables_are_folded(session, repeats_report):
    page = session.open(repeats_report.paths.index_html.resolve().as_uri())
    assert page.errors == [], page.console
    tables = page.page.evaluate(FOLDING)
    assert any(folded for _, folded in tables) and _folding(page.page) == []
    summary = page.page.locator("details.long summary").first
    assert summary.inner_text().endswith("rows)")
    body = page.page.locator("details.long").first.locator("table")
    assert not body.is_visible()
    summary.click()  # a person unfolds it
    assert body.is_visible()


def test_multi_seed_page_loads(session, multi_report, tmp_path: Path):
    camp, paths = multi_report.campaign, multi_report.paths
    page = session.open(paths.index_html.resolve().as_uri())
    shot = tmp_path / "report_multi_seed.png"
    shot.write_bytes(page.screenshot)
    keep_artifact(shot, "report_multi_seed.png")
    assert page.errors == [] and page.failed == [], page.console
    _check_local_only(page.requests, camp.path)
    assert "Latent PSNR per step" in page.body_text and "Noise floor band" in page.body_text
    assert page.page.locator(".compare").count() == 2  # one control per seed's grid


def test_detector_sees_console_errors_and_missing_files(session, tmp_path: Path):
    """The checks above would pass vacuously if the client heard nothing: prove it hears errors."""
    page_file = tmp_path / "bad.html"
    page_file.write_text(
        '<html><body><p>x</p><img src="missing.png"><script>console.error("boom")</script></body></html>'
    )
    page = session.open(page_file.as_uri(), height=400)
    assert any("boom" in e for e in page.errors)
    assert any("missing.png" in e or "ERR_FILE_NOT_FOUND" in e for e in page.errors)
    assert page.failed


def test_in_situ_heatmaps_render_in_the_page(session, shadowed_campaign, tmp_path: Path):
    page = session.open((shadowed_campaign / "index.html").resolve().as_uri(), height=6000)
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

"""index.html in a real headless chromium, as a reviewer opens it: it loads from disk with no console
error and fetches nothing but its own files (the one-file form: nothing at all, and small), the
verdicts and the speed-against-accuracy figure are at the top, the compare control (each candidate's
worst frames among its frames, a link that opens it there) and the audio players work, every image
has an alt text, and it reads at desktop and phone widths, never scrolling sideways; screenshots are
left behind.

One browser serves the module (a chromium start costs seconds on a 2-core machine)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from browser import Browser
from campaign_factory import keep_artifact, make_campaign, near_and_far_arms
from records_testutil import H200

from harness.analysis.model import read_results as load_results
from harness.report import build_report, render_results

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
    assert sum(u.endswith(".png") for u in page.requests) >= 5 + 12
    assert sum(u.endswith(".webp") for u in page.requests) >= 16
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


def test_long_tables_are_folded(session, tmp_path: Path):
    """The committed H200 campaign (two seeds, three repeats: tables of 30 runs), rendered from its
    results.json and the assets it keeps."""
    paths = render_results(H200, tmp_path)
    page = session.open(paths.index_html.resolve().as_uri())
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


@pytest.fixture(scope="module")
def worst_page(tmp_path_factory) -> tuple[Path, object]:
    """A one-file page whose candidates' worst frames are off the evenly spaced ones (9 frames: rows
    0/3/5/8), and its results."""
    camp = make_campaign(tmp_path_factory.mktemp("worst"), near_and_far_arms())
    paths = build_report(camp, single_file=True)
    return paths.index_html, load_results(paths.results_json)


def test_each_candidates_worst_frames_are_offered_and_labelled(session, worst_page, tmp_path: Path):
    page_file, res = worst_page
    p = session.open(page_file.as_uri(), width=DESKTOP[0], height=DESKTOP[1]).page
    box = p.locator(".compare").first
    off_even = 0
    for run in ("near", "far"):
        v = res.comparison_for(run).video
        box.locator("select.run").select_option(run)
        options = box.locator("select.frame option").evaluate_all(
            "os => os.map(o => [o.value, o.textContent, o.disabled])"
        )
        offered = {int(value): (text, disabled) for value, text, disabled in options}
        for metric, frame in (("PSNR", v.psnr_min_frame), ("SSIM", v.ssim_min_frame)):
            text, disabled = offered[frame]
            assert not disabled and re.fullmatch(rf"{frame} \(worst .*{metric}.*\)", text), (
                run,
                metric,
                offered,
            )
            row = p.locator(f"table.frames tr:has(img[data-run='{run}'][data-frame='{frame}'])").first
            assert f"worst {metric}: {run}" in row.locator("th").inner_text()
            off_even += frame not in res.frame_indices
        # another candidate's worst frame has no image of this run: not offered for it
        theirs = {i for k, marks in _worst(res).items() if k != run for i in marks} - set(_worst(res)[run])
        assert all(offered[i][1] for i in theirs - set(res.frame_indices))
    assert off_even, "every worst frame on the even spacing: the test proves nothing"


def _worst(res) -> dict:
    from harness.analysis.frames import worst_frames

    return worst_frames(res, res.primary_seed)


def test_a_link_opens_the_compare_control_at_the_worst_frame(session, worst_page, tmp_path: Path):
    page_file, res = worst_page
    v = res.comparison_for("far").video
    url = page_file.as_uri() + "#compare?run=far&frame=worst-ssim&mode=diff"
    p = session.open(url, width=DESKTOP[0], height=DESKTOP[1]).page
    box = p.locator(".compare.linked")
    assert box.count() == 1 and box.locator("select.run").input_value() == "far"
    assert box.locator("select.frame").input_value() == str(v.ssim_min_frame)
    assert box.locator("input.mode:checked").get_attribute("value") == "diff"
    grid_diff = p.evaluate(
        """(f) => document.querySelector(`table.frames img[data-run="far"][data-frame="${f}"][data-kind="diff"]`).src""",
        v.ssim_min_frame,
    )
    assert (
        box.locator("img.diffview").get_attribute("src") == grid_diff
        and box.locator("img.diffview").is_visible()
    )
    assert f"frame {v.ssim_min_frame} (worst" in box.locator(".state").inner_text()
    assert box.evaluate("b => b.getBoundingClientRect().top < innerHeight")  # scrolled to it
    shot = tmp_path / "worst.png"
    shot.write_bytes(box.screenshot())
    keep_artifact(shot, "report_compare_worst.png")
    # with no run named: the first control's run at its worst frame by PSNR (the page's default)
    p = session.open(page_file.as_uri() + "#compare", width=DESKTOP[0], height=DESKTOP[1]).page
    box = p.locator(".compare.linked")
    run = box.locator("select.run").input_value()
    assert box.locator("select.frame").input_value() == str(res.comparison_for(run).video.psnr_min_frame)


@pytest.mark.parametrize("width", [DESKTOP[0], NARROW[0]])
def test_no_page_scrolls_sideways(session, one_file, shadowed_campaign, multi_report, width):
    """Wide tables scroll inside their own box, long names and paths in text wrap: the page itself is
    never wider than the screen, at a desktop's width or a phone's."""
    pages = [one_file, shadowed_campaign / "index.html", multi_report.paths.index_html]
    wide = 0
    for page_file in pages:
        p = session.open(page_file.resolve().as_uri(), width=width, height=900).page
        assert p.evaluate("document.documentElement.scrollWidth") <= width, page_file
        assert (
            p.evaluate(
                "Array.from(document.querySelectorAll('table')).filter(t => !t.closest('.scroll')).length"
            )
            == 0
        )
        boxes = p.evaluate(
            """() => Array.from(document.querySelectorAll('.scroll')).filter(b => b.offsetParent)
                 .map(b => [b.getBoundingClientRect().right, b.scrollWidth > b.clientWidth])"""
        )
        assert all(right <= width for right, _ in boxes)
        wide += sum(scrolls for _, scrolls in boxes)
    assert wide, "no table wider than its box: the test proves nothing"


def test_the_one_file_page_is_small_and_plays_and_shows_everything(session, one_file):
    """Opus clips and WebP thumbnails: the one-file page of a small campaign stays under 500 kB (WAV
    clips and PNG thumbnails made it 950 kB); every clip has a finite duration and every image decodes."""
    assert one_file.stat().st_size < 500_000
    html = one_file.read_text()
    assert "data:audio/webm;base64," in html and "data:image/webp;base64," in html
    load = session.open(one_file.as_uri(), width=DESKTOP[0], height=DESKTOP[1])
    assert load.images_broken == 0 and load.errors == []
    durations = load.page.evaluate(
        """async () => Promise.all(Array.from(document.querySelectorAll('audio')).map(a =>
             a.readyState >= 1 ? a.duration : new Promise(r => a.addEventListener('loadedmetadata', () => r(a.duration)))))"""
    )
    assert durations and all(0 < d < 10 for d in durations), durations

"""The report's opening summary and pr.md: every figure of pr.md is report.md's (the same value,
rounded as the pull request did), checked on a fresh campaign and on a committed H200 campaign;
the single-file page carries every image inside it."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from records_testutil import H200, ONE_SEED, edited, example, line_of, rendered, section

from harness.analysis.model import read_results as load_results
from harness.number_format import fmt_time
from harness.report import build_report
from harness.report.pr import render_pr

ROOT = Path(__file__).resolve().parents[2]


def md_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table of ``text`` as (headers, rows); escaped pipes stay inside cells."""
    out, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]])
        elif block:
            out.append((block[0], [r for r in block[2:]]))
            block = []
    return out


def table(text: str, *first_headers: str) -> dict[str, dict[str, str]]:
    """The table whose headers start with ``first_headers``, as {first cell: {header: cell}}."""
    for headers, rows in md_tables(text):
        if tuple(headers[: len(first_headers)]) == first_headers:
            return {r[0]: dict(zip(headers, r, strict=True)) for r in rows}
    raise AssertionError(f"no table with headers {first_headers}")


def rounded(cell: str, digits: int) -> str:
    """report.md's figure rounded as pr.md rounds it ('inf (identical)' is 'identical' there)."""
    return "identical" if cell.startswith("inf") else f"{float(cell.split()[0]):.{digits}f}"


def db(cell: str) -> str:
    r = rounded(cell, 2)
    return r if r == "identical" else f"{r} dB"


def first(cell: str) -> str:
    """The mean of a per-arm cell ('0.450 ± 0.001 (n=4)', '40.39 dB [40.36 dB..40.42 dB]')."""
    return cell.split(" ± ")[0].split(" [")[0].split(" (n=")[0]


def check_pr_against_report(pr: str, md: str) -> int:
    """Assert each pr.md figure equals report.md's; returns how many figures were checked."""
    checked = 0
    heads, pr_speed = next((h, t) for h, t in md_tables(pr) if h[0] in ("attn_type", "attention"))
    over_runs = "mean over runs" in heads[1]
    if over_runs:  # the per-arm table: means over runs
        speed = table(md, "arm", "role", "runs ok")
        cols, total_col = ["s/step"], "pipeline total (s)"
    else:
        speed = table(md, "run", "role", "repeat", "DiT steps")
        cols = ["step 1", "step 2", "step 3"] if heads[0] == "attn_type" else ["s/step"]
        total_col = "pipeline total (s)"
    for row in pr_speed:
        ref = speed[row[0]]
        for cell, col in zip(row[1].split(" / "), cols, strict=True):
            assert cell == fmt_time(float(first(ref[col]))), (row, col)
            checked += 1
        assert row[2] == f"{fmt_time(float(first(ref[total_col])))} s"
        checked += 1
    try:
        acc, names = table(md, "arm", "role", "seeds measured"), ("video PSNR (pooled)", "video PSNR min frame",
                                                                   "SSIM mean", "SSIM min frame")  # fmt: skip
    except AssertionError:
        acc, names = table(md, "run", "role", "PSNR (pooled)"), ("PSNR (pooled)", "PSNR min (frame)",
                                                                 "SSIM mean", "SSIM min (frame)")  # fmt: skip
    for row in next(t for h, t in md_tables(pr) if h[0].startswith("decoded output vs")):
        r = {k: first(v) for k, v in acc[re.sub(r" \((noise floor|shadowed copy)\)$", "", row[0])].items()}
        m = re.fullmatch(r"(.+) \((.+)\)", row[1])
        assert m and m.group(1) == db(r[names[0]]) and m.group(2) == rounded(r[names[1]], 2)
        m = re.fullmatch(r"([\d.]+) \(([\d.]+)\)", row[2])
        assert m and m.group(1) == rounded(r[names[2]], 3) and m.group(2) == rounded(r[names[3]], 3)
        snr, cos = row[3].split(" / ")
        assert snr == db(r["audio SNR"]) and cos == rounded(r["audio cosine"], 3)
        checked += 6
    stats = table(md, "run", "role", "frames", "size")
    cells = {  # pr.md's statistics columns (those that differ between runs), from report.md's
        "luma mean / std": lambda s: f"{rounded(s['luma_mean'], 1)} / {rounded(s['luma_std'], 1)}",
        "sharpness (Laplacian var.)": lambda s: rounded(s["sharpness"], 1),
        "mean frame-to-frame abs diff": lambda s: rounded(s["motion"], 2),
        "audio RMS / peak": lambda s: f"{rounded(s['audio_rms'], 3)} / {rounded(s['audio_peak'], 3)}",
    }
    for heads, rows in md_tables(pr):
        for row in rows if heads[0] == "run" else []:
            for head, cell in zip(heads[1:], row[1:], strict=True):
                assert cell == cells[head](stats[row[0]]), (row, head)
                checked += 1
    if "## Summary" in md:  # the speed-ups are the summary's
        summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
        for row in pr_speed:
            if row[3] in ("reference", "noise floor"):
                continue
            step_up = row[3].split(" / ")[0]
            line = next(
                ln for ln in summary.splitlines() if ln.startswith((f"- {row[0]}: ", f"- {row[0]} ("))
            )
            # an emulator's or a shadowed copy's timing is no kernel's: the summary gives no speed-up
            if " (emulator): " in line or " (shadowed copy, " in line:
                assert not re.search(r"speed-up [0-9.]+x", line), line
                continue
            m = re.search(r"DiT s/step speed-up ([0-9.]+)x", line)  # the summary's one speed-up
            assert m and f"{float(m.group(1)):.2f}x" == step_up, (line, step_up)
            checked += 2
    return checked


def test_pr_md_figures_are_report_md_figures(single_report):
    md = single_report.paths.report_md.read_text()
    pr = single_report.paths.pr_md.read_text()
    assert single_report.paths.pr_md == single_report.campaign.path / "pr.md"
    assert check_pr_against_report(pr, md) >= 40
    # the pull request's layout: three steps, a total, the speed-ups; the noise floor row last
    assert (
        "| attn_type | DiT s/step (steps 1/2/3) | pipeline total | speed-up vs torch_sdpa (s/step / total) |"
        in pr
    )
    assert "| sage_far | 1.500 / 0.500 / 0.500 | 3.000 s | 2.00x / 1.50x |" in pr
    acc_rows = [r[0] for r in next(t for h, t in md_tables(pr) if h[0].startswith("decoded output vs"))]
    assert acc_rows[-1] == "torch_sdpa_kv_reversed (noise floor)"
    assert (
        "- sage_far: 60 / 57 DiT attention calls per rank went through sage_far, 3 fallbacks (2 rank(s))"
        in pr
    )
    assert (
        "- sage_close: 60 DiT attention calls per rank went through sage_close, 0 fallbacks (2 rank(s))" in pr
    )
    assert "- frames 0 / 3 / 5 / 8 side by side" in pr
    assert (
        "- sage_close: backend output vs a direct op call: bitwise identical (first call, q 1x24x4096x128)"
        in pr
    )
    far = "sage_far: backend output vs a direct op call: differs by up to 0.0039; the backend changes the result"
    assert f"- {far} (first call, q 1x24x4096x128) (2 rank(s))" in pr
    # the same reading, rank by rank, in report.md's attention table
    assert (
        md.count("differs by up to 0.0039; the backend changes the result (first call, q 1x24x4096x128)") == 2
    )
    assert "not checked" in md  # the reference's ranks carry no check in this fixture


def test_pr_md_of_the_committed_h200_campaign(tmp_path):
    """A real H200 campaign (2 seeds, repeats, in situ): pr.md from its results.json against its report.md."""
    from harness.report import render_results

    example = ROOT / "reports" / "examples" / "h200" / "e2e_gpu" / "3step"  # the H200 example of 2026-12-01
    res = load_results(example / "results.json")
    pr = render_pr(res)
    assert "DiT s/step (mean of steps 2-3, mean over runs)" in pr
    md = render_results(example / "results.json", tmp_path).report_md.read_text()
    assert check_pr_against_report(pr, md) >= 40
    assert "| sage_attn2 | 0.542 | 5.239 s | 0.85x / 0.79x |" in pr
    assert (
        "- sage_attn2: DiT s/step speed-up 0.851x (95 % CI 0.823 to 0.880; n=2/2 runs, paired by seed and "
        "repeat): slower (p=0.01, Holm 0.02 over 2 tests" in pr
    )
    # runs that read alike are one line each; the real kernel writes into K (SageAttention 1.0.6)
    direct = "bitwise identical; the call changes k in place (first call, q 1x24x48719x128)"
    assert f"- sage_attn2 (each of its 2 runs): backend output vs a direct op call: {direct}" in pr


def test_report_opens_with_the_summary():
    """The committed one-seed campaign (one run a side), with one candidate's attention edited to be
    invalid and one run edited to have failed; and the H200 one (its runs that did not end ok, an arm
    skipped, a shadowed copy)."""
    res, _ = edited(example(ONE_SEED), "sage_attn2_1_0_6", word="invalid", attention_ok=False,
                    attention="NOT all attention calls were served by the requested op: 3 fell back")  # fmt: skip
    run = next(r for r in res.runs if r.arm == "torch_sdpa_kv_reversed")
    run.status, run.reason = "failed", "exit code 1"
    out = rendered(res)
    md = out["md"]
    first = md.split("\n## ", 2)
    assert first[1].startswith("Summary\n")
    bullets = [ln for ln in first[1].splitlines() if ln.startswith("- ")]
    # the campaign, INCOMPLETE (the failed run), the file scored, then each of its two candidates
    assert len(bullets) == 5 and bullets[2].startswith("- scored on ")
    assert bullets[0].startswith(
        "- minimax_h3_tiny / gpu_prod: reference torch_sdpa, noise floor torch_sdpa_kv_"
    )
    assert (
        bullets[1] == "- INCOMPLETE: 1 problem(s): torch_sdpa_kv_reversed: ended failed, not ok: not measured"
    )
    bad = next(b for b in bullets if b.startswith("- sage_attn2_1_0_6:"))
    # one run a side: the speed-up is printed, no speed word without an interval (the speed section says why)
    assert bad.endswith("; DiT s/step speed-up 0.84x: too few runs")  # the pipeline total: below
    assert "too few runs for an interval (n=1/1 runs; 2 a side needed)" in md
    assert bad.startswith(
        "- sage_attn2_1_0_6: invalid: NOT all attention calls were served by the requested op; as measured "
    ), bad
    assert all(len(b) <= 202 for b in bullets), [len(b) for b in bullets]  # '- ' and 200: at a glance
    kernel = next(b for b in bullets if b.startswith("- sage_attn2:"))
    assert "tolerance 2x" in kernel and kernel.endswith("DiT s/step speed-up 0.87x: too few runs")
    assert out["html"].index('<section id="summary">') < out["html"].index('<section id="overview">')
    md = rendered(example(H200))["md"]
    bullets = [ln for ln in section(md, "Summary").splitlines() if ln.startswith("- ")]
    assert bullets[1].startswith("- INCOMPLETE: 15 problem(s): sage_emul_thuml@43: ended interrupted, not ok")
    assert "- aiter_sage_attn: not run (skipped: backend aiter_sage_attn unavailable here" in md
    assert all(len(b) <= 202 for b in bullets), [len(b) for b in bullets]


def test_summary_with_two_runs_a_side_carries_the_test():
    """The committed H200 campaign: two seeds, repeats; sage_attn2 measured slower with an interval."""
    res = example(H200)
    out = rendered(res)
    kernel = line_of(out["md"], "- sage_attn2: ")
    assert kernel.startswith("- sage_attn2: outside in situ: ") and kernel.endswith(
        "; DiT s/step speed-up 0.85x (0.823 to 0.880): slower"
    ), kernel
    assert "| sage_attn2 | 0.542 | 5.239 s | 0.85x / 0.79x |" in out["pr"]
    assert check_pr_against_report(out["pr"], out["md"]) >= 20
    # the summary says the test's word, whatever it is
    res.arm("sage_attn2").speed["s_per_step"].word = "no difference detected"
    kernel = line_of(rendered(res)["md"], "- sage_attn2: ")
    assert kernel.endswith("; DiT s/step speed-up 0.85x (0.823 to 0.880): no difference detected"), kernel


def test_single_file_page_inlines_every_image(single_report, tmp_path):
    paths = build_report(single_report.campaign, single_file=True)
    try:
        html = paths.index_html.read_text()
        srcs = re.findall(r'<img [^>]*src="([^"]+)"', html)
        # 5 figures, the difference images beside the thumbnails shown and their colour scale (PNG);
        # the thumbnails (4 frames x 4 runs, and the candidates' worst frames) lossy WebP
        [grid] = load_results(paths.results_json).frame_grids
        thumbs = sum(len(cells) for cells in grid.cells.values())
        diffs = sum(len(set(d) & set(grid.cells.get(k, {}))) for k, d in grid.diffs.items())
        kinds = Counter(s.split(";base64,", 1)[0] for s in srcs)
        assert kinds == {"data:image/png": 5 + diffs + 1, "data:image/webp": thumbs} and thumbs >= 16
        clips = re.findall(r'<audio [^>]*src="([^"]+)"', html)
        assert len(clips) == 4 and all(s.startswith("data:audio/webm;base64,") for s in clips)
        assert "every figure is inlined" in html
        moved = tmp_path / "alone.html"  # one file that opens anywhere: nothing else beside it
        moved.write_text(html)
        assert 'src="assets/' not in moved.read_text()
    finally:
        build_report(single_report.campaign)  # the shared fixture keeps its default form
    assert 'src="assets/' in paths.index_html.read_text()


def test_scenario_option_makes_the_page_one_file(tmp_path):
    """`report: {single_file: true}` in a scenario: the campaign's page is one file by default."""
    from campaign_factory import ArmSpec, make_campaign

    from harness.scenario.load import parse_scenario

    text = (ROOT / "scenarios" / "e2e_3step.yaml").read_text() + "report:\n  single_file: true\n"
    folder = {"SCENARIO_DIR": str(ROOT / "scenarios")}  # as load_scenario sets it for a file
    assert parse_scenario(text, "e2e_3step.yaml", folder).report.single_file is True
    camp = make_campaign(tmp_path, [ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand", noise=2.0)])
    rec = camp.record()
    rec.scenario["report"] = {"single_file": True}
    camp.write(rec)
    html = build_report(camp).index_html.read_text()
    assert 'src="assets/' not in html and 'src="data:image/png;base64,' in html
    html = build_report(camp, single_file=False).index_html.read_text()  # --with-assets wins
    assert 'src="assets/' in html

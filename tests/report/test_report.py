"""build_report on small real campaigns: tables, noise floor, failures, seeds, caching, escaping."""

from __future__ import annotations

import json
import math

import pytest
from campaign_factory import ArmSpec

from harness.errors import HarnessError
from harness.report import ReportResults, build_report
from harness.store import CampaignDir

XSS = "<script>alert(1)</script>"


def _results(built) -> ReportResults:
    return ReportResults.model_validate_json(built.paths.results_json.read_bytes())


def test_report_files_and_sections(single_report):
    paths, single = single_report.paths, single_report.campaign
    labels = dict(paths.items())
    assert set(labels) == {"report.md", "pr.md", "index.html", "results.json"}
    for p in labels.values():
        assert p.exists() and p.stat().st_size > 0
    md = paths.report_md.read_text()
    for heading in ("## 1. Speed", "## 2. Accuracy against the reference", "## 3. Global statistics",
                    "## 4. Attention calls and environment", "## 5. Frames side by side", "## 6. Verdicts"):  # fmt: skip
        assert heading in md
    # every planned arm appears, including the failed and the skipped one, with its reason
    for arm in ("torch_sdpa", "torch_sdpa_kv_reversed", "sage_close", "sage_far", "broken", "sage_triton"):
        assert f"| {arm} |" in md
    assert "backend unavailable: no GPU here" in md
    assert "RuntimeError: kernel failed" in md  # log tail of the failed run
    # the noise floor row is marked
    assert "| torch_sdpa_kv_reversed | noise floor (K/V reversed) |" in md
    assert "| torch_sdpa | reference | reference |" in md
    # figures and frames exist where the report points
    res = ReportResults.model_validate_json(paths.results_json.read_bytes())
    for name in ("per_frame", "audio", "step_times"):
        assert (single.path / res.assets[name]).exists(), name
    assert res.frame_indices == [0, 3, 5, 8]  # round(linspace(0, 8, 4))
    thumbs = [v for k, v in res.assets.items() if k.startswith("frame:")]
    assert len(thumbs) == 4 * 4  # 4 runs with output x 4 frames
    assert all((single.path / t).exists() for t in thumbs)
    assert "frame:broken:0" not in res.assets


def test_results_json_numbers(single_report):
    paths = single_report.paths
    raw = json.loads(paths.results_json.read_text())
    assert raw["schema"] == "harness.report/1"
    assert set(raw["conventions"]) >= {"video", "audio", "stats", "timing", "stats_tolerance"}
    assert raw["env"]["hostname"] == "test-host"
    assert raw["scenario"]["name"] == "tiny"
    res = ReportResults.model_validate(raw)
    assert res.reference_arm == "torch_sdpa" and res.noise_floor_arms == ["torch_sdpa_kv_reversed"]
    by_b = {c.b.key: c for c in res.comparisons}
    assert set(by_b) == {"torch_sdpa_kv_reversed", "sage_close", "sage_far", "broken", "sage_triton"}
    floor, close, far = by_b["torch_sdpa_kv_reversed"], by_b["sage_close"], by_b["sage_far"]
    assert close.video.psnr_mean > floor.video.psnr_mean > far.video.psnr_mean
    assert by_b["broken"].video is None and by_b["sage_triton"].video is None
    assert by_b["sage_triton"].b.status == "skipped"
    # speed: steps [1.5, .5, .5] vs [2, 1, 1] -> s/step ratio 0.5
    assert far.speed.s_per_step_ratio == pytest.approx(0.5)
    # every run with output has statistics, the others have none
    stats = {r.key: r.stats for r in res.runs}
    assert all(
        stats[k] is not None for k in ("torch_sdpa", "torch_sdpa_kv_reversed", "sage_close", "sage_far")
    )
    assert stats["broken"] is None and stats["sage_triton"] is None


def test_verdicts_in_plain_words(single_report):
    paths = single_report.paths
    res = ReportResults.model_validate_json(paths.results_json.read_bytes())
    v = {x.arm: x for x in res.verdicts}
    assert set(v) == {"sage_close", "sage_far", "broken", "sage_triton"}
    assert v["sage_close"].within_noise_floor is True and v["sage_close"].attention_ok is True
    assert v["sage_far"].within_noise_floor is False
    assert v["sage_far"].attention_ok is False  # 3 calls fell back on rank 1
    assert v["broken"].measured == 0 and "not measured" in v["broken"].summary
    assert "backend unavailable" in " ".join(v["sage_triton"].sentences)
    md = paths.report_md.read_text()
    far_psnr = next(d for d in v["sage_far"].distance if d.metric == "psnr_mean")
    assert "dB below the floor" in far_psnr.text and far_psnr.text in md.replace("\\|", "|")
    assert "max(max(exact) - min(exact), 0.01 * \\|mean(exact)\\|)" in md
    assert "exact runs (torch_sdpa, torch_sdpa_kv_reversed): all" in res.exact_attention


def test_untrusted_strings_are_escaped(single_report):
    paths = single_report.paths
    html = paths.index_html.read_text()
    assert XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()  # the page has no script at all
    md = paths.report_md.read_text()
    table_lines = [line for line in md.splitlines() if line.startswith("| broken |")]
    assert table_lines and all(XSS not in line for line in table_lines)
    assert any("&lt;script&gt;" in line for line in table_lines)


def test_second_report_reuses_cached_metrics(single_report):
    paths = build_report(single_report.campaign)
    res = ReportResults.model_validate_json(paths.results_json.read_bytes())
    measured = [c for c in res.comparisons if c.measured]
    assert measured and all(c.metrics_cached for c in measured)


def test_progress_callback_and_missing_campaign(single_report, tmp_path):
    seen = single_report.progress
    assert any(m.startswith("compare sage_far against torch_sdpa") for m in seen)
    assert seen[-1] == "write report"
    with pytest.raises(HarnessError, match="campaign.json"):
        build_report(CampaignDir(tmp_path / "nowhere"))


def test_multi_seed_aggregation_and_band(multi_report):
    paths, camp = multi_report.paths, multi_report.campaign
    res = _results(multi_report)
    assert res.multi_seed and res.seeds == [42, 43]
    assert {c.b.key: c.a.key for c in res.comparisons} == {
        "nf@42": "torch_sdpa@42", "cand@42": "torch_sdpa@42",
        "nf@43": "torch_sdpa@43", "cand@43": "torch_sdpa@43",
    }  # fmt: skip
    agg = {a.arm: a for a in res.arms}
    per_seed = [c.video.psnr_mean for c in res.comparisons if c.b.arm == "cand"]
    psnr = agg["cand"].metrics["psnr_mean"]
    assert psnr.n == 2 and psnr.mean == pytest.approx(sum(per_seed) / 2)
    assert psnr.min == min(per_seed) and psnr.max == max(per_seed)
    assert psnr.std == pytest.approx(abs(per_seed[0] - per_seed[1]) / math.sqrt(2))
    assert agg["cand"].metrics["s_per_step"].mean == pytest.approx(0.5)
    v = res.verdicts[0]
    assert v.arm == "cand" and v.seeds == [42, 43] and v.within_noise_floor is False
    psnr_check = next(d for d in v.distance if d.metric == "psnr_mean")
    assert [s.seed for s in psnr_check.per_seed] == [42, 43]
    assert "below the floor in 2 of 2 seeds" in psnr_check.text
    md = paths.report_md.read_text()
    assert "noise floor band" in md and "Per arm over seeds" in md
    floor = agg["nf"].metrics["psnr_mean"]
    assert f"{floor.min:.2f} dB..{floor.max:.2f} dB" in md
    assert (camp.path / res.assets["seeds"]).exists()
    assert "#### seed 42" in md and "#### seed 43" in md


def test_latents_section_when_runs_saved_latents(multi_report):
    res = _results(multi_report)
    assert [s.key for s in res.latents] == ["nf@42", "cand@42", "nf@43", "cand@43"]
    assert [p.step for p in res.latents[1].points] == [1, 2, 3]
    # the candidate's trajectory parts from the reference more than the noise floor's
    nf, cand = res.latents[0].points, res.latents[1].points
    assert all(c.psnr < f.psnr for c, f in zip(cand, nf, strict=True))
    md = multi_report.paths.report_md.read_text()
    assert "## 2b. Latent PSNR per step" in md and "nf@42 (noise floor)" in md
    assert (multi_report.campaign.path / res.assets["latents"]).exists()


def test_no_latents_no_section(single_report):
    md = single_report.paths.report_md.read_text()
    assert "Latent PSNR" not in md


def test_campaign_without_reference_still_reports_speed(campaign_factory):
    camp = campaign_factory([ArmSpec("a", steps=[1.0, 1.0]), ArmSpec("b", steps=[1.0, 2.0])])
    paths = build_report(camp)
    md = paths.report_md.read_text()
    assert "no arm has role reference" in md
    assert "| a | candidate | 2 | 1.000 |" in md

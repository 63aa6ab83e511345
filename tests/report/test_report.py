"""build_report on small real campaigns: tables, noise floor, failures, seeds, caching, escaping."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re

import pytest
from campaign_factory import ArmSpec

from harness.analysis.model import ReportResults
from harness.errors import HarnessError
from harness.report import build_report
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
        assert paths.figures[name].is_file() and f"assets/{name}.png" in md, name
    assert res.frame_indices == [0, 3, 5, 8]  # round(linspace(0, 8, 4))
    thumbs = [v for k, v in res.assets.items() if k.startswith("frame:")]
    assert len(thumbs) == 4 * 4  # 4 runs with output x 4 frames
    assert all((single.path / t).exists() for t in thumbs)
    assert "frame:broken:0" not in res.assets


def test_results_json_numbers(single_report):
    paths = single_report.paths
    raw = json.loads(paths.results_json.read_text())
    assert raw["schema"] == "harness.report/7"
    assert set(raw["conventions"]) >= {"video", "audio", "stats", "timing", "stats_tolerance"}
    assert raw["env"]["hostname"] == "test-host"
    assert raw["scenario"]["name"] == "tiny"
    res = ReportResults.model_validate(raw)
    assert res.reference_arm == "torch_sdpa" and res.noise_floor_arms == ["torch_sdpa_kv_reversed"]
    by_b = {c.b.key: c for c in res.comparisons}
    assert set(by_b) == {"torch_sdpa_kv_reversed", "sage_close", "sage_far", "broken", "sage_triton"}
    floor, close, far = by_b["torch_sdpa_kv_reversed"], by_b["sage_close"], by_b["sage_far"]
    assert close.video.psnr_pooled > floor.video.psnr_pooled > far.video.psnr_pooled
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
    # one floor run of one seed: a candidate close to it cannot be shown within, only not outside
    assert v["sage_close"].word in ("within", "inconclusive") and v["sage_close"].attention_ok is True
    assert v["sage_far"].word == "invalid" and not v["sage_far"].equivalent
    assert v["sage_far"].attention_ok is False  # 3 calls fell back on rank 1
    assert v["broken"].measured == 0 and v["broken"].word == "not run" and "not run" in v["broken"].summary
    assert "backend unavailable" in " ".join(v["sage_triton"].sentences)
    md = paths.report_md.read_text()
    far_mse = next(d for d in v["sage_far"].energy if d.metric == "video_mse")
    # one floor run of one seed and no stated spread: a ratio, no interval, so never more than inconclusive
    assert (
        far_mse.ratio > 2 and far_mse.word == "inconclusive" and "tolerance 2x: inconclusive" in far_mse.text
    )
    assert "the spread of a run is not measured (and the scenario states none)" in far_mse.text
    assert far_mse.text in md.replace("\\|", "|")
    assert "as measured: inconclusive: error energy" in v["sage_far"].summary
    assert "prediction interval from their within-seed variance" in md  # the statistics rule is printed
    assert "| sage_far | invalid |" in md
    assert "exact runs (torch_sdpa, torch_sdpa_kv_reversed): all" in res.exact_attention


def test_untrusted_strings_are_escaped(single_report):
    paths = single_report.paths
    html = paths.index_html.read_text()
    assert XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # one script, the page's own (the compare control), and the policy runs that one alone
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    assert html.lower().count("<script") == 1 and len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in html
    md = paths.report_md.read_text()
    table_lines = [line for line in md.splitlines() if line.startswith("| broken |")]
    assert table_lines and all(XSS not in line for line in table_lines)
    assert any("&lt;script&gt;" in line for line in table_lines)


def test_second_report_reuses_the_analysis(single_report):
    before = single_report.paths.results_json.read_bytes()
    seen: list[str] = []
    paths = build_report(single_report.campaign, progress=seen.append)
    assert seen[0] == "analysis unchanged: results.json reused" and not any("compare" in m for m in seen)
    assert paths.results_json.read_bytes() == before


def test_progress_callback_and_missing_campaign(single_report, tmp_path):
    seen = single_report.progress
    assert any(m.startswith("compare sage_far against torch_sdpa") for m in seen)
    assert seen[-1] == "write report"
    with pytest.raises(HarnessError, match="campaign.json"):
        build_report(CampaignDir(tmp_path / "nowhere"))


def test_multi_seed_aggregation_and_band(multi_report):
    paths = multi_report.paths
    res = _results(multi_report)
    assert res.multi_seed and res.seeds == [42, 43]
    assert {c.b.key: c.a.key for c in res.comparisons} == {
        "nf@42": "torch_sdpa@42", "cand@42": "torch_sdpa@42",
        "nf@43": "torch_sdpa@43", "cand@43": "torch_sdpa@43",
    }  # fmt: skip
    agg = {a.arm: a for a in res.arms}
    per_seed = [c.video.psnr_pooled for c in res.comparisons if c.b.arm == "cand"]
    psnr = agg["cand"].metrics["psnr"]
    assert psnr.n == 2 and psnr.mean == pytest.approx(sum(per_seed) / 2)
    assert psnr.min == min(per_seed) and psnr.max == max(per_seed)
    assert psnr.std == pytest.approx(abs(per_seed[0] - per_seed[1]) / math.sqrt(2))
    assert agg["cand"].metrics["s_per_step"].mean == pytest.approx(0.5)
    v = res.verdicts[0]
    assert v.arm == "cand" and v.seeds == [42, 43] and v.word in ("outside", "invalid")
    mse = next(d for d in v.energy if d.metric == "video_mse")
    assert [s.seed for s in mse.per_seed] == [42, 43] and all(s.n_floor == 1 for s in mse.per_seed)
    by = {c.b.key: c.video.mse_mean for c in res.comparisons}
    per = [by[f"cand@{s}"] / by[f"nf@{s}"] for s in (42, 43)]  # each seed against its own floor
    assert [s.ratio for s in mse.per_seed] == pytest.approx(per)
    assert mse.ratio == pytest.approx(math.sqrt(per[0] * per[1]))  # the geometric mean over seeds
    md = paths.report_md.read_text()
    assert "Noise floor band" in md and "Per arm over seeds" in md
    floor = sorted(c.video.psnr_pooled for c in res.comparisons if c.b.arm == "nf")
    assert res.floor.band["psnr"] == pytest.approx([floor[0], sum(floor) / 2, floor[1]])
    assert f"{floor[0]:.2f} dB / {sum(floor) / 2:.2f} dB / {floor[1]:.2f} dB" in md
    assert multi_report.paths.figures["seeds"].is_file()
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
    assert multi_report.paths.figures["latents"].is_file()


def test_no_latents_no_section(single_report):
    md = single_report.paths.report_md.read_text()
    assert "Latent PSNR" not in md


def test_campaign_without_reference_still_reports_speed(campaign_factory):
    camp = campaign_factory([ArmSpec("a", steps=[1.0, 1.0]), ArmSpec("b", steps=[1.0, 2.0])])
    paths = build_report(camp)
    md = paths.report_md.read_text()
    assert "no arm has role reference" in md
    assert "| a | candidate | 1 | 2 | 1.000 |" in md


def test_repeats_speed_significance_and_floor_distribution(repeats_report):
    res, md = _results(repeats_report), repeats_report.paths.report_md.read_text()
    assert res.repeats == 3
    keys = [r.key for r in res.runs]
    assert "torch_sdpa@42~r2" in keys and "fast@43~r3" in keys and "nf_reversed@42~r2" not in keys
    # accuracy: first repeats only; the floor is every perturbation x seed
    assert all("~r" not in c.b.key for c in res.comparisons)
    assert res.floor is not None and sorted(res.floor.keys) == ["nf_chunks@42", "nf_chunks@43",
                                                                 "nf_reversed@42", "nf_reversed@43"]  # fmt: skip
    assert "4 floor run(s) (2 perturbation(s) x 2 seed(s))" in md
    assert res.floor.perturbations == {"nf_reversed": "K/V reversed", "nf_chunks": "K/V in 2 chunks"}
    # speed over runs (repeats x seeds), paired by seed and repeat, Holm over the report
    arms = {a.arm: a for a in res.arms}
    fast, same = arms["fast"].speed["s_per_step"], arms["same"].speed["s_per_step"]
    assert fast.n_ref == fast.n_arm == 6 and fast.design == "paired by seed and repeat"
    assert (
        fast.word == "faster" and fast.speedup == pytest.approx(1.33, rel=0.02) and fast.speedup_ci[0] > 1.01
    )
    assert same.word in ("no meaningful difference", "no difference detected")
    assert (
        "fast vs torch_sdpa: DiT s/step: 0.998 ± 0.006 s (n=6) -> 0.751" in md
        and "speed-up 1.33x (95 % CI" in md
    )
    assert "same vs torch_sdpa: DiT s/step:" in md
    # every speed word in the report carries its interval and its test
    for line in md.splitlines():
        for word in (": faster (", ": slower ("):
            if word in line:
                assert "% CI" in line and "runs" in line and "p=" in line, line
    # the floors' timings are no baseline, and say why
    assert not arms["nf_reversed"].timing_baseline and not arms["nf_chunks"].timing_baseline
    assert "noise floor (not a timing baseline: the K/V-reversed wrapper copies K and V" in md
    assert "not a timing baseline; " in md and "[not a timing baseline]" in md
    assert "n=6/2 runs, blocked by seed" in md  # the floors ran once per seed
    assert any("byte-identical in every repeat" in n for n in res.repeat_notes)
    # the scenario's tolerance is the one stated in every verdict
    assert res.rules.tolerance == 2.5
    for v in res.verdicts:
        assert "tolerance 2.5x" in v.summary, v.summary
        mse = next(c for c in v.energy if c.metric == "video_mse")
        assert [s.n_floor for s in mse.per_seed] == [2, 2]


def test_a_floor_arm_names_its_perturbation_or_its_other_kernel():
    from harness.analysis.floor import floor_kind
    from harness.compare.pairwise import Comparison
    from harness.compare.summary import RunSummary

    ref = RunSummary(key="ref", path="r", arm="ref", attn_type="torch_sdpa", role="reference")

    def floor(**kw) -> str:
        b = RunSummary(key="f", path="f", arm="f", role="noise_floor", **kw)
        return floor_kind(Comparison(a=ref, b=b))

    assert floor(attn_type="torch_sdpa", kv_reversed=True, kv_chunks=2) == "K/V reversed, K/V in 2 chunks"
    assert floor(attn_type="torch_sdpa", attn_options={"sdpa_backend": "math"}) == "sdpa_backend=math"
    assert floor(attn_type="flash_attn3") == "another exact kernel: flash_attn3"

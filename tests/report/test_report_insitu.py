"""The in-situ and schedule sections of a real shadowed campaign's report: what results.json says,
the heatmaps drawn under the names it gives, the shadowed arm's timing marked, a re-render from
results.json alone."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.report import build_report, render_results
from harness.store import CampaignDir

pytestmark = pytest.mark.slow


def results(camp) -> dict:
    return json.loads((camp / "results.json").read_text())


def test_results_json_carries_the_readings_and_names_the_heatmaps(shadowed_campaign):
    ins = results(shadowed_campaign)["insitu"]
    readings = {r["candidate"]: r for r in ins["readings"]}
    assert set(readings) == {"sage_emul_thuml", "sage_emul_aiter"}  # exact shadows form the floor
    assert set(ins["floor_ops"]) == {"ref_insitu", "floor", "bf16_insitu"}
    for name, r in readings.items():
        assert r["heatmap"] == f"insitu_heatmap_{name}"
        assert (shadowed_campaign / "assets" / f"{r['heatmap']}.png").read_bytes()[:4] == b"\x89PNG"
        assert r["word"] in ("within", "outside", "inconclusive") and r["ratio_ci"][0] <= r["ratio"]
        assert len(r["cells"]) == 6 and [s["step"] for s in r["per_step"]] == [1, 2, 3]
    # FP32 floor ~1e-7 against INT8-QK kernels ~1e-2: far outside the floor
    assert readings["sage_emul_thuml"]["parts"][0]["word"] == "outside"
    aiter = {p["against"]: p for p in readings["sage_emul_aiter"]["parts"]}
    assert aiter["accepted baseline sage_emul_thuml"]["value"] > 1.1  # FP8 PV: more error than thu-ml's
    assert aiter["max rel L1"]["word"] == "within"  # ~0.02 < 0.05


def test_a_shadowed_arm_is_no_timing_baseline_and_its_cost_is_given(shadowed_campaign):
    res = results(shadowed_campaign)
    arm = next(a for a in res["arms"] if a["arm"] == "ref_insitu")
    assert not arm["timing_baseline"] and arm["timing_label"] == "a shadowed run's timing"
    info = next(i for i in res["insitu"]["runs"] if i["key"] == "ref_insitu")
    assert info["twin"] == "torch_sdpa" and info["measure_s_per_step"] > 0
    assert "without shadows (torch_sdpa, the same attention)" in info["cost_text"]
    report = (shadowed_campaign / "report.md").read_text()
    speed = report.split("## 1. Speed", 1)[1].split("\n## ", 1)[0]
    assert "a shadowed run's timing: never a timing baseline" in speed


def test_the_report_has_the_sections_and_schedules(shadowed_campaign):
    report = (shadowed_campaign / "report.md").read_text()
    section = report.split("## In-situ attention accuracy", 1)[1].split("\n## ", 1)[0]
    for text in ("vs floor (at most 2x)", "vs sage_emul_thuml (at most 1.1x)", "Worst calls",
                 "assets/insitu_heatmap_sage_emul_aiter.png", "assets/insitu_steps.png", "captured q/k/v"):  # fmt: skip
        assert text in section, text
    rows = {r["arm"]: r for r in results(shadowed_campaign)["schedules"]}
    assert rows["hybrid"]["routing"] == "proven" and rows["hybrid"]["exact_steps"] == [1, 3]
    assert rows["sage_emul_thuml"]["schedule"] == "none (every step)"
    # the estimate: the candidate's in-situ error on step 2 only, the floor's on 1 and 3
    assert rows["hybrid"]["insitu_estimate"] < rows["sage_emul_thuml"]["insitu_estimate"]
    assert "## Hybrid schedules" in report and "torch_sdpa on the first 1 and last 1 step(s)" in report


def test_rendering_from_results_json_alone_draws_the_heatmaps(shadowed_campaign, tmp_path):
    paths = render_results(shadowed_campaign / "results.json", out_dir=tmp_path)
    assert "insitu_heatmap_sage_emul_thuml" in paths.figures and "insitu_steps" in paths.figures
    assert (tmp_path / "assets" / "insitu_heatmap_sage_emul_thuml.png").is_file()


def test_the_shadowed_copy_of_the_reference_is_no_candidate(shadowed_campaign):
    """Its output is the reference's: no badge, no point in the figure, its own summary line."""
    from harness.analysis.model import ReportResults
    from harness.analysis.sentences import readings

    raw = results(shadowed_campaign)
    roles = {v["arm"]: v["role"] for v in raw["verdicts"]}
    assert roles["ref_insitu"] == "insitu" and roles["sage_emul_thuml"] == "candidate"
    res = ReportResults.model_validate(raw)
    assert "ref_insitu" not in {r.arm for r in readings(res)}
    summary = (shadowed_campaign / "report.md").read_text().split("\n## ", 2)[1]
    line = next(
        ln for ln in summary.splitlines() if ln.startswith("- ref_insitu (shadowed copy, not a candidate): ")
    )
    assert "not a candidate" in line and "output bitwise the reference's on 1 of 1 seed(s)" in line
    assert "candidate(s)" in summary and "ref_insitu: DiT s/step" not in summary


def test_a_campaign_kept_without_its_media_still_reads_in_situ(shadowed_campaign, tmp_path):
    """In-situ records are written during the run, never derived from its output: a campaign kept
    without its media (a CI artifact, a copy from the GPU machine) keeps its readings, and the
    shadowed copy's output reads "not compared", never "bitwise on 0 of 1 seed(s)"."""
    copy = tmp_path / "campaign"
    shutil.copytree(
        shadowed_campaign, copy, ignore=shutil.ignore_patterns("output.mp4", "results.json", "metrics")
    )
    build_report(CampaignDir(copy))
    kept, before = results(copy), results(shadowed_campaign)
    assert kept["errors"] and all("output.mp4 is missing" in e for e in kept["errors"])

    def ratios(res: dict) -> dict:
        return {r["candidate"]: (r["word"], r["ratio"]) for r in res["insitu"]["readings"]}

    assert ratios(kept) == ratios(before) and len(ratios(kept)) == 2
    summary = (copy / "report.md").read_text().split("\n## ", 2)[1]
    assert "ref_insitu (shadowed copy, not a candidate): output not compared;" in summary
    assert "In-situ attention accuracy" in (copy / "report.md").read_text()

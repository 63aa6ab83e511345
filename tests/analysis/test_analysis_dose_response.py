"""harness.analysis.dose_response: curves from planted arms' readings, the tolerated dose they give,
and an in-situ per-call error placed on them; the scenario block that plants the arms."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.analysis.dose_response import dose_response, measured_readings, predict
from harness.analysis.intervals import RatioReading
from harness.analysis.model import read_results
from harness.analysis.verdict_model import Verdict
from harness.compare.summary import RunSummary
from harness.errors import ScenarioError
from harness.rule import word as rule_word
from harness.scenario.load import parse_scenario

DOSES = [1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2]


def campaign(ratio_of, spread: float = 1.5, shape: str = "noise", metric: str = "video_mse"):
    """Verdicts and runs of planted arms whose reading at dose d is ratio_of(d), interval x/÷ spread."""
    verdicts, runs = [], []
    for d in DOSES:
        arm = f"dose_{shape}_{d:g}"
        r = ratio_of(d)
        ci = [r / spread, r * spread]
        word = rule_word(*ci, 2.0)  # the harness's own rule: at the bound counts as within
        reading = RatioReading(metric=metric, label="video MSE", ratio=r, ratio_ci=ci, word=word, bound=2.0)
        verdicts.append(Verdict(arm=arm, word=word, energy=[reading]))
        runs.append(
            RunSummary(key=arm, path=arm, arm=arm, attn_type="planted_error",
                       attn_options={"dose": d, "shape": shape, "seed": 0})
        )  # fmt: skip
    return verdicts, runs


@settings(max_examples=60, deadline=None)
@example(d0=1e-3, slope=1.0, spread=2.0)  # the upper bound exactly at the tolerance on a grid dose
@given(
    d0=st.floats(1e-7, 1e-2),
    slope=st.floats(0.5, 2.0),
    spread=st.floats(1.01, 2.5),
)
def test_the_tolerated_dose_is_where_the_upper_bound_reaches_the_tolerance(d0, slope, spread):
    """A power law through (d0, 1x): the upper bound r x spread reaches 2x at d0 (2/spread)^(1/slope)."""
    verdicts, runs = campaign(lambda d: (d / d0) ** slope, spread)
    (c,) = dose_response(verdicts, runs).curves
    expected = d0 * (2 / spread) ** (1 / slope)
    if not DOSES[0] < expected < DOSES[-1]:
        return  # outside the grid: read as such by the other tests
    assert c.tolerated == pytest.approx(expected, rel=1e-6)  # the log-log line is the power law itself
    limit = d0 * (2 * spread) ** (1 / slope)  # where the lower bound reaches 2x
    assert c.limit_hi == (pytest.approx(limit, rel=1e-6) if limit <= DOSES[-1] else None)
    # consistent with its points: every grid dose below it within, every one beyond its limit outside
    assert all(p.word == "within" for p in c.points if p.dose < c.tolerated)
    assert all(p.word == "outside" for p in c.points if p.dose > limit)
    assert f"tolerated per-call rel L1 {c.tolerated:.2g}" in c.text


def test_a_curve_is_read_monotone_and_its_ends_are_said():
    # a dip at 1e-4 (noise of the measurement) does not move the limit back below it
    dip = {1e-7: 0.5, 1e-6: 0.9, 1e-5: 1.5, 1e-4: 0.6, 1e-3: 30.0, 1e-2: 300.0}
    (c,) = dose_response(*campaign(dip.__getitem__)).curves
    assert 1e-6 < c.tolerated < 1e-5 and 1e-4 < c.tolerated_point < 1e-3
    (never,) = dose_response(*campaign(lambda d: 0.1)).curves
    assert never.tolerated is None and "within the tolerance at every dose" in never.text
    (always,) = dose_response(*campaign(lambda d: 50.0)).curves
    assert always.tolerated is None and "no dose measured is tolerated with confidence" in always.text


def test_an_in_situ_error_predicts_the_end_to_end_ratio_and_a_far_larger_one_is_named():
    dr = dose_response(*campaign(lambda d: d / 1e-6))  # 1x at a per-call 1e-6, 10x at 1e-5
    measured = RatioReading(metric="video_mse", label="video MSE", ratio=12.0, ratio_ci=[8.0, 18.0])
    (p,) = predict(dr, "cand", 1e-5, {"video_mse": measured})
    assert p.predicted == pytest.approx(10.0) and p.agrees
    assert (
        p.text
        == "cand: per call 1e-05: predicted video MSE 10x the floor's (6.67x to 15x); measured 12x: agrees"
    )
    far = measured.model_copy(update={"ratio": 500.0})
    (q,) = predict(dr, "cand", 1e-5, {"video_mse": far})
    assert not q.agrees and "far above: something the planted error does not model" in q.text
    (out,) = predict(dr, "cand", 0.5, {})
    assert out.predicted is None and "outside the doses measured (1e-07 to 0.01)" in out.text


def test_no_planted_arm_no_dose_response():
    verdicts, runs = campaign(lambda d: 1.0)
    runs = [r.model_copy(update={"attn_type": "torch_sdpa"}) for r in runs]
    assert dose_response(verdicts, runs) is None


def test_the_final_latent_reads_doses_the_decoded_output_rounds_away():
    """A floor whose decoded output is bitwise the reference's gives no video curve; the final latents
    (error energy over the floor runs' at the same step, MSE = peak^2 10^(-PSNR/10)) still read one,
    with an interval from the two floor runs' spread, and a dose that left the latent equal is 0x."""
    from harness.analysis.model import LatentSeries
    from harness.compare.latents import LatentPoint
    from harness.scenario.verdict import VerdictRules

    def series(key, role, psnr):
        return LatentSeries(key=key, arm=key, seed=7, role=role, points=[
            LatentPoint(step=1, psnr=psnr + 5, max_abs_diff=0.0), LatentPoint(step=3, psnr=psnr, max_abs_diff=0.0)
        ])  # fmt: skip

    verdicts, runs = campaign(lambda d: 1.0)
    for v in verdicts:  # every output bitwise the reference's: no end-to-end reading
        v.energy, v.identical_seeds, v.seeds = [], [7], [7]
    floor_db = 60.0
    latents = [series("floor_a", "noise_floor", floor_db), series("floor_b", "noise_floor", floor_db - 0.5)]
    # the planted latent's MSE grows as dose / 1e-5 times the floor's; the smallest dose leaves it equal
    latents += [
        series(f"dose_noise_{d:g}", "candidate", floor_db - 10 * math.log10(d / 1e-5)) for d in DOSES[1:]
    ]
    latents.append(series(f"dose_noise_{DOSES[0]:g}", "candidate", math.inf))
    dr = dose_response(verdicts, runs, measured_readings(verdicts, latents, VerdictRules()))
    (c,) = dr.curves
    assert c.metric == "latent_mse" and c.label == "final latent MSE"
    floor = (10 ** (-floor_db / 10) + 10 ** (-(floor_db - 0.5) / 10)) / 2
    ratios = {p.dose: p.ratio for p in c.points}
    assert ratios[DOSES[0]] == 0.0
    assert ratios[1e-4] == pytest.approx(10 * 10 ** (-floor_db / 10) / floor)
    assert all(p.ratio_ci and p.ratio_ci[0] < p.ratio < p.ratio_ci[1] for p in c.points[1:])
    assert 1e-6 <= c.tolerated < 1e-4 and "tolerated per-call rel L1" in c.text
    # a grid that is already outside at its first measured dose: the dose that left it equal is the limit
    steep = [lat.model_copy(update={"points": [p.model_copy(update={"psnr": p.psnr - 30}) for p in lat.points]})
             if lat.role == "candidate" else lat for lat in latents]  # fmt: skip
    (s,) = dose_response(verdicts, runs, measured_readings(verdicts, steep, VerdictRules())).curves
    assert s.tolerated == DOSES[0] and s.limit_hi == DOSES[1]
    assert f"tolerated per-call rel L1 {DOSES[0]:g} (the largest dose that left it equal" in s.text
    assert dr.unread and "bitwise the reference's at every dose" in dr.unread[0]  # the video still says so
    assert dose_response(verdicts, runs).curves == []  # without latents: nothing to read


SCENARIO = """\
name: dr
runner: builtin
builtin: {preset: tiny}
dose_response: {doses: [0.01, 0.001], shapes: [noise, scale], seed: 3}
arms:
  - {name: ref, attn_type: torch_sdpa, role: reference}
"""


def test_the_block_plants_one_arm_per_shape_and_dose_and_reads_back_the_same():
    s = parse_scenario(SCENARIO, "s.yaml", {})
    planted = [a for a in s.arms if a.attn_type == "planted_error"]
    assert [a.name for a in planted] == [
        "dose_noise_0.001",
        "dose_noise_0.01",
        "dose_scale_0.001",
        "dose_scale_0.01",
    ]
    assert planted[1].attn_options == {"dose": 0.01, "shape": "noise", "seed": 3} and planted[1].repeats == 1
    # a resolved scenario (campaign.json) lists them already: reading it back adds none
    again = type(s).model_validate(s.model_dump(mode="json"))
    assert [a.name for a in again.arms] == [a.name for a in s.arms]


def test_sites_plant_one_arm_per_shape_site_and_dose_and_every_call_keeps_its_names():
    text = SCENARIO.replace(
        "shapes: [noise, scale], seed: 3}", "sites: {all: {}, late: {steps: [3], kinds: [dit_self]}}}"
    )
    planted = [a for a in parse_scenario(text, "s.yaml", {}).arms if a.attn_type == "planted_error"]
    assert [a.name for a in planted] == [
        "dose_noise_0.001",
        "dose_noise_0.01",
        "dose_noise_late_0.001",
        "dose_noise_late_0.01",
    ]
    assert "site" not in planted[0].attn_options
    assert planted[3].attn_options["site"] == {"kinds": ["dit_self"], "steps": [3]}
    assert planted[3].description.endswith("on dit_self; steps 3")


@pytest.mark.parametrize(
    ("block", "msg"),
    [
        ("{doses: [0.01, 0.1], sites: {}}", "at least one site"),
        ("{doses: [0.01, 0.1], sites: {a-b: {}}}", "site name 'a-b': letters, digits and _ only"),
        ("{doses: [0.01, 0.1], sites: {a: {kinds: [vae]}}}", "sites.a.kinds.0"),
        ("{doses: [0.01]}", "at least 2 distinct doses"),
        ("{doses: [0.01, 1.5]}", r"every dose is a rel L1 in \(0, 1\)"),
        ("{doses: [0.01, 0.1], shapes: [tilt]}", "shapes"),
    ],
)
def test_a_bad_block_is_one_line_naming_it(block, msg):
    text = SCENARIO.replace("{doses: [0.01, 0.001], shapes: [noise, scale], seed: 3}", block)
    with pytest.raises(ScenarioError, match=rf"s\.yaml:4: dose_response.*{msg}"):
        parse_scenario(text, "s.yaml", {})


def test_interpolation_is_log_log():
    dr = dose_response(*campaign(lambda d: math.sqrt(d / 1e-6)))
    (p,) = predict(dr, "c", 1e-4, {})
    assert p.predicted == pytest.approx(10.0)


FROM = """\
name: from_curve
runner: builtin
seed: 42
builtin: {preset: tiny, save_latents: false}
profiles:
  t: {infer_steps: 4}
dose_response_from: {results: "@RESULTS@", sha256: "@SHA@"}
arms:
  - {name: ref, attn_type: torch_sdpa, role: reference}
  - {name: rev, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor}
  - {name: sage, attn_type: sage_emul_thuml}
  - {name: ref_insitu, attn_type: torch_sdpa, shadows: [sage]}
"""


@pytest.mark.slow
def test_a_dose_response_measured_before_predicts_an_in_situ_candidate_and_another_file_is_refused(tmp_path):
    import hashlib
    import json

    from harness.campaign import execute, lock_campaign, plan_campaign
    from harness.errors import UsageError

    global DOSES
    grid, DOSES = DOSES, [1e-4, 1e-3, 1e-2, 1e-1]  # around the emulator's per-call 0.013
    try:
        curves = dose_response(*campaign(lambda d: d / 1e-4)).model_dump(mode="json")
    finally:
        DOSES = grid
    results = tmp_path / "curves" / "results.json"
    results.parent.mkdir()
    results.write_text(json.dumps({"dose_response": curves}))
    sha = hashlib.sha256(results.read_bytes()).hexdigest()
    scenario = tmp_path / "s.yaml"
    scenario.write_text(FROM.replace("@RESULTS@", str(results)).replace("@SHA@", "0" * 64))
    with pytest.raises(
        UsageError, match=r"^dose_response_from\.results: .*results\.json has sha256 [0-9a-f]{64}, not"
    ):
        plan_campaign(scenario, out_root=tmp_path / "out")
    scenario.write_text(FROM.replace("@RESULTS@", str(results)).replace("@SHA@", sha))
    plan = plan_campaign(scenario, out_root=tmp_path / "out")
    outcome = execute(plan, lock=lock_campaign(plan.campaign))
    res = json.loads((outcome.campaign.path / "results.json").read_text())
    (p,) = res["dose_response"]["predictions"]
    assert p["candidate"] == "sage" and 1e-3 < p["per_call"] < 1e-1 and p["predicted"] > 1
    report = (outcome.campaign.path / "report.md").read_text()
    assert res["dose_response"]["source"] == f"{results} (sha256 {sha[:12]})"
    assert p["text"] in report and f"measured in another campaign: {results} (sha256 {sha[:12]})" in report
    # the analysis reads the copy inside the campaign: the named file may go, the reading stays
    results.unlink()
    (outcome.campaign.path / "results.json").unlink()
    from harness.analysis.analyze import analyze_campaign

    again = analyze_campaign(outcome.campaign)
    assert again.dose_response.predictions[0].text == p["text"]
    # a copy of another file (an edited campaign) is not read, and the report says so
    copy = outcome.campaign.path / "dose_response_source.json"
    copy.write_text(copy.read_text().replace(sha, "0" * 64))
    (outcome.campaign.path / "results.json").unlink()
    tampered = analyze_campaign(outcome.campaign)
    assert tampered.dose_response is None
    assert any("is of another file than the scenario names: not used" in n for n in tampered.notes)
    # with no dose-response read, the in-situ limits say they are the defaults, not measured
    assert any("are the defaults, not measured: no dose-response says" in n for n in tampered.insitu.notes)
    assert not any("not measured: no dose-response" in n for n in again.insitu.notes)


EXAMPLES = Path(__file__).resolve().parents[2] / "reports" / "examples" / "cpu"


def test_the_committed_cpu_dose_response_is_consistent_with_its_points():
    """reports/examples/cpu/dose_response (scenarios/dose_response.yaml): at least six doses, each with
    its ratio and interval, on every call and on each of the 3 DiT steps alone; video MSE's tolerated
    dose within, three times it outside, at every site."""
    res = read_results(EXAMPLES / "dose_response" / "results.json")
    curves = {(c.shape, c.site.text(), c.metric): c for c in res.dose_response.curves}
    sites = ["every call", "steps 1", "steps 2", "steps 3"]
    assert {k[1] for k in curves} == set(sites)
    for site in sites:
        c = curves["noise", site, "video_mse"]
        assert len(c.points) >= 6 and all(p.ratio and p.ratio_ci for p in c.points)
        assert (
            c.tolerated is not None and c.limit_hi is not None and c.tolerated < c.limit_hi < 3 * c.tolerated
        )
        assert all(p.word == "within" for p in c.points if p.dose <= c.tolerated)
        assert all(p.word == "outside" for p in c.points if p.dose >= 3 * c.tolerated)
    # one step alone tolerates more than every call; the sensitivity line orders the steps so
    assert all(curves["noise", s, "video_mse"].tolerated > curves["noise", "every call", "video_mse"].tolerated
               for s in sites[1:])  # fmt: skip
    order = sorted(sites[1:], key=lambda s: curves["noise", s, "video_mse"].tolerated)
    line = next(x for x in res.dose_response.sensitivity if x.startswith("noise, video MSE,"))
    assert line.endswith(", ".join(f"{s} {curves['noise', s, 'video_mse'].tolerated:.2g}" for s in order))
    # the run's own quantised candidate is placed on the curve it was measured beside
    (p,) = [p for p in res.dose_response.predictions if p.metric == "video_mse"]
    assert p.predicted_ci[0] <= p.predicted <= p.predicted_ci[1] and p.measured
    # its hybrid arm (the middle step only) predicted from its per-step errors, and measured
    (h,) = [x for x in res.dose_response.schedules if x.arm and x.metric == "video_mse"]
    assert h.arm == "sage_emul_thuml_hybrid" and h.exact_steps == [1, 3] and h.measured and h.agrees
    assert h.predicted < p.predicted  # one step of three costs less than all three


def test_the_committed_cpu_e2e_example_reads_its_in_situ_candidates_on_the_dose_response():
    res = read_results(EXAMPLES / "e2e_3step" / "results.json")
    dr = res.dose_response
    assert dr is not None and dr.source.startswith(
        "scenarios/../reports/examples/cpu/dose_response/results.json"
    )
    said = {p.candidate for p in dr.predictions if p.predicted is not None and p.measured is not None}
    assert "sage_emul_thuml" in said
    report = (EXAMPLES / "e2e_3step" / "report.md").read_text()
    assert all(p.text in report for p in dr.predictions)


def test_the_statistics_that_move_are_read_at_the_first_dose_a_seed_reads_outside():
    from harness.analysis.stat_rule import StatCheck

    verdicts, runs = campaign(lambda d: d / 1e-6)
    for v, d in zip(verdicts, DOSES, strict=True):
        v.stats = [
            StatCheck(seed=s, stat="sharpness", word="outside" if d >= 1e-3 and s == 42 else "within")
            for s in (42, 43)
        ] + [StatCheck(seed=s, stat="luma_mean", word="within") for s in (42, 43)]
        v.stats.append(StatCheck(seed=42, stat="audio_peak", word="shown", judged=False))
    dr = dose_response(verdicts, runs)
    moves = {m.stat: m for m in dr.statistics}
    assert set(moves) == {"sharpness", "luma_mean"}  # a statistic only shown is not read
    assert moves["sharpness"].first_outside == 1e-3 and moves["sharpness"].seeds_outside == 1
    assert moves["luma_mean"].first_outside is None
    assert dr.statistics_text == [
        "noise, statistics: sharpness outside from 0.001 (1 of 2 seeds); within at every dose up to 0.01: luma_mean"
    ]


def test_the_committed_h100_h3_refiner_dose_response_reads_the_padded_key_defect_end_to_end():
    """reports/examples/h100/minimax_h3_dose_response/gpu_prod: the real LightX2V H3 at production
    shapes (synthetic weights), the padded-key shape planted on the text refiner's calls alone, 6 doses
    with 0.307 (SageAttention 1.0.6's per-call error there): every dose's video reading has its
    interval and lies within 2x, so no limit lies below 0.5; the smallest dose leaves the output
    bitwise the reference's."""
    res = read_results(EXAMPLES.parent / "h100" / "minimax_h3_dose_response" / "gpu_prod" / "results.json")
    curves = {(c.site.text(), c.metric): c for c in res.dose_response.curves}
    c = curves["refiner", "video_mse"]
    assert c.shape == "scale" and 0.307 in [p.dose for p in c.points] and len(c.points) >= 5
    assert all(p.ratio_ci and p.word == "within" for p in c.points) and c.tolerated is None
    assert "within the tolerance at every dose" in c.text and "no limit found below 0.5" in c.text
    (v,) = [v for v in res.verdicts if v.arm == "dose_scale_refiner_0.001"]
    assert v.word == "identical"


def test_the_committed_h100_h3_dit_dose_response_reads_a_limit_consistent_with_its_points():
    """reports/examples/h100/minimax_h3_dose_response/gpu_prod_dit: the same pipeline, the DiT's calls
    and every call as sites. Each curve reads a tolerated dose within the grid, consistent with its
    points (within below it, outside from 3x it); the final latent tolerates less than the decoded
    video; every call reads as the DiT's calls alone (the refiner adds nothing measurable)."""
    res = read_results(
        EXAMPLES.parent / "h100" / "minimax_h3_dose_response" / "gpu_prod_dit" / "results.json"
    )
    curves = {(c.site.text(), c.metric): c for c in res.dose_response.curves}
    for site in ("dit_self", "every call"):
        video, latent = curves[site, "video_mse"], curves[site, "latent_mse"]
        assert len(video.points) >= 5 and 0.307 in [p.dose for p in video.points]
        for c in (video, latent):
            assert c.tolerated is not None and c.limit_hi is not None and c.tolerated <= c.limit_hi
            assert all(p.word == "within" for p in c.points if p.dose <= c.tolerated)
            assert all(p.word == "outside" for p in c.points if p.dose >= 3 * c.tolerated)
        assert latent.tolerated < video.tolerated / 5
    dit, every = curves["dit_self", "video_mse"], curves["every call", "video_mse"]
    assert dit.tolerated == pytest.approx(every.tolerated, rel=0.05)
    assert [v.word for v in res.verdicts if v.arm.endswith("_0.001")] == ["identical", "identical"]


def test_the_committed_cpu_h3_dose_response_reads_the_kinds_on_the_final_latent_and_a_finding():
    """reports/examples/cpu/minimax_h3_dose_kinds: the real LightX2V tiny H3 on the CPU, whose
    K/V-reversed floor's 64x64 mp4 is bitwise the reference's: no decoded reading has an interval,
    the final latent reads both kinds (0.001 leaves it equal: the limit lies in [0.001, 0.003]), the
    DiT's calls far more sensitive than the refiner's. The emulated SageAttention 1.0.6, placed on
    the kinds' curves by its in-situ errors, is predicted far above what its run measured: its
    refiner error is a scale (in situ: most of it divides out), gentler than planted noise."""
    res = read_results(EXAMPLES / "minimax_h3_dose_kinds" / "results.json")
    curves = {(c.site.text(), c.metric): c for c in res.dose_response.curves}
    assert not any(curves[kind, "video_mse"].usable()[0] for kind in ("refiner", "dit_self"))
    latent = {kind: curves[kind, "latent_mse"] for kind in ("refiner", "dit_self")}
    for c in latent.values():
        assert c.tolerated == 0.001 and c.limit_hi == 0.003 and c.points[0].ratio == 0.0
    at = {kind: next(p.ratio for p in c.points if p.dose == 0.003) for kind, c in latent.items()}
    assert at["dit_self"] > 10 * at["refiner"] > 10
    (line,) = [s for s in res.dose_response.sensitivity if "final latent" in s]
    assert line.index("dit_self") < line.index("refiner")
    (p,) = [p for p in res.dose_response.predictions if p.metric == "latent_mse"]
    assert set(p.kinds) == {"refiner", "dit_self"} and p.measured < p.predicted_ci[0] / 3 and not p.agrees
    assert "far below: the kernel's error is gentler than the planted noise" in p.text
    (kind,) = [k for k in res.insitu.readings[0].per_kind if k.kind == "refiner"]
    assert kind.rel_l1 > 0.3 and kind.rel_l1_unscaled < kind.rel_l1 / 5  # a scale, not noise


def test_a_site_whose_output_never_moves_is_said_not_dropped():
    """A site no call reaches (a refiner site on a pipeline without one): every dose bitwise the
    reference's, so no reading and no curve; the dose-response says so instead of leaving it out."""
    verdicts, runs = campaign(lambda d: d / 1e-6)
    for d in DOSES[:2]:
        arm = f"dose_noise_refiner_{d:g}"
        verdicts.append(Verdict(arm=arm, word="identical", seeds=[42], identical_seeds=[42]))
        opts = {"dose": d, "shape": "noise", "seed": 0, "site": {"kinds": ["refiner"]}}
        runs.append(RunSummary(key=arm, path=arm, arm=arm, attn_type="planted_error", attn_options=opts))
    dr = dose_response(verdicts, runs)
    assert len(dr.curves) == 1 and dr.unread == [
        "noise on refiner: the output is bitwise the reference's at every dose up to 1e-06 (2 doses): "
        "the error reached no call of the site, or none that reaches the output"
    ]
    alone = dose_response(verdicts[-2:], runs[-2:])  # the only site: the section stays, with the line
    assert alone is not None and alone.curves == [] and len(alone.unread) == 1

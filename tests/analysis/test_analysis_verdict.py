"""harness.analysis.verdict (and .judge): per seed against that seed's floor, per modality, with
intervals; missing and non-finite values; the chaotic regime's latents and in-situ reading; the
accepted baseline.

The pull request's 3-step and 29-step cases are computed from its summary numbers alone (no
media), as the pull request reports them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from campaign_factory import ArmSpec, base_content, write_run

from harness.analysis.energy import PairErrors, mse_from_psnr, psnr_from_mse
from harness.analysis.intervals import SeedValues, ratio_reading
from harness.analysis.stat_rule import StatsSample
from harness.analysis.verdict import InsituReading, judge, judge_numbers, video_regime
from harness.compare.pairwise import compare_runs
from harness.scenario.verdict import VerdictRules
from harness.store import sha256_file

STATS = ("luma_mean", "luma_std", "sharpness", "motion", "audio_rms", "audio_peak")


def stats(key: str, *values: float, seed: int = 42) -> StatsSample:
    return StatsSample(key=key, seed=seed, values=dict(zip(STATS, values, strict=True)))


# The pull request's 29-step table: decoded output against BF16 SDPA (PSNR, min frame, SSIM, audio SNR,
# then luma mean / std, sharpness, motion, audio RMS / peak).
SEED_TABLE = {
    "code_object": (13.59, 10.93, 0.578, 6.13, (69.3, 56.9, 40.6, 23.51, 0.238, 0.91)),
    "hip_kernel": (13.04, 9.58, 0.551, 7.02, (69.4, 57.3, 42.6, 23.51, 0.238, 0.93)),
    "sage_attn2_triton": (14.09, 10.20, 0.597, 7.13, (69.4, 57.2, 41.9, 22.92, 0.238, 0.93)),
}
SEED_FLOOR = (14.64, 10.30, 0.629, 9.16)
SEED_EXACT = [
    stats("sdpa", 68.6, 56.2, 40.4, 23.24, 0.240, 0.96),
    stats("floor", 69.0, 56.7, 42.3, 23.12, 0.233, 0.91),
]


def _pair(key: str, psnr: float, psnr_min: float, ssim: float, snr: float, seed: int = 42) -> PairErrors:
    return PairErrors.from_psnr(
        psnr, {"ssim_mean": ssim, "psnr_min": psnr_min, "audio_snr": snr}, key=key, seed=seed
    )


H200_SPREAD = VerdictRules(floor_log_sd={"video_mse": 0.04, "audio_error": 0.45},
                           floor_log_sd_source="H200 example, 3 seeds x 3 floor runs")  # fmt: skip


def test_three_step_case_reads_outside_the_floor_with_a_stated_spread():
    one = ([PairErrors.from_psnr(32.28, key="k", seed=42)], [PairErrors.from_psnr(35.94, key="f", seed=42)])
    v = judge_numbers("kernel", *one, rules=H200_SPREAD)
    r = next(c for c in v.energy if c.metric == "video_mse")
    assert r.ratio == pytest.approx(10**0.366, rel=1e-6)  # 3.66 dB = 2.32x the energy
    assert r.ratio_ci[0] > 2.0 and r.word == "outside"
    assert "stated by the scenario: sd 0.04 of the log energy (source: H200 example, 3 seeds x 3" in r.spread
    assert v.word == "outside" and v.ratio == pytest.approx(r.ratio) and v.ratio_ci == r.ratio_ci
    assert v.text.startswith("outside: error energy 2.32x the floor's (95 % CI 2.")
    assert v.per_seed[0].regime == {"video": "pixel", "audio": "no audio"}
    # no borrowed confidence: one floor run, one seed and no stated spread give no interval
    bare = judge_numbers("kernel", *one)
    assert bare.word == "inconclusive" and bare.ratio_ci is None
    assert "no interval (one floor run per seed, no stated spread)" in bare.text


@pytest.mark.parametrize("arm", sorted(SEED_TABLE))
def test_seed_table_at_29_steps_judges_the_audio_and_the_statistics(arm):
    psnr, psnr_min, ssim, snr, st = SEED_TABLE[arm]
    v = judge_numbers(arm, [_pair(arm, psnr, psnr_min, ssim, snr)], [_pair("floor", *SEED_FLOOR)],
                      cand_stats=[stats(arm, *st)], exact_stats=SEED_EXACT)  # fmt: skip
    sv = v.per_seed[0]
    assert sv.regime == {"video": "chaotic", "audio": "waveform"} and sv.floor_psnr == pytest.approx(14.64)
    # the chaotic video floor no longer switches the audio off: its waveform error energy is judged
    audio = next(r for r in v.energy if r.metric == "audio_error")
    assert audio.ratio == pytest.approx(10 ** ((9.16 - snr) / 10))
    assert {r.metric for r in v.energy} == {"audio_error"}  # pixel metrics: shown, not judged
    assert any("not judged (the video floor is chaotic)" in s for s in v.shown)
    # one floor run and two exact runs of one seed cannot decide: neither within nor outside
    assert v.word == "inconclusive" and v.stats_word == "inconclusive"
    assert "pixel metrics uninformative (floor 14.64 dB < 18 dB)" in v.text
    assert "could detect a change of" in v.stats_text
    peak = next(s for s in v.stats if s.stat == "audio_peak")
    assert not peak.judged


def test_a_candidate_of_one_seed_is_judged_against_that_seeds_floor():
    # seed 42's floor is far noisier than seed 43's: pooled, the candidate (seed 43 only) read 0.9x
    floors = [PairErrors.from_psnr(30.0, seed=42, key="f42"), PairErrors.from_psnr(30.1, seed=42, key="f42b"),
              PairErrors.from_psnr(45.0, seed=43, key="f43"), PairErrors.from_psnr(45.1, seed=43, key="f43b")]  # fmt: skip
    cand = PairErrors(seed=43, key="c", values={"video_mse": 5 * mse_from_psnr(45.05)})
    pooled = cand.value("video_mse") / np.mean([f.value("video_mse") for f in floors])
    assert pooled < 1.0  # what the pooled floor said
    v = judge_numbers("c", [cand], floors)
    r = next(c for c in v.energy if c.metric == "video_mse")
    assert (
        r.ratio == pytest.approx(5.0, rel=0.01)
        and v.word == "outside"
        and [s.seed for s in v.per_seed] == [43]
    )


def test_a_failure_on_a_chaotic_seed_is_judged():
    # fine on seed 42 (pixel floor); on seed 43 the floor is chaotic and the candidate's audio is noise
    floors = [_pair("f42", 40.0, 38.0, 0.99, 30.0, 42), _pair("f42b", 40.2, 38.0, 0.99, 30.5, 42),
              _pair("f43", 14.0, 10.0, 0.6, 25.0, 43), _pair("f43b", 14.2, 10.0, 0.6, 25.5, 43)]  # fmt: skip
    cands = [_pair("c42", 40.1, 38.0, 0.99, 30.2, 42), _pair("c43", 13.9, 10.0, 0.6, 0.0, 43)]
    v = judge_numbers("c", cands, floors)
    assert [sv.regime["video"] for sv in v.per_seed] == ["pixel", "chaotic"]
    assert [sv.word for sv in v.per_seed][1] == "outside" and v.per_seed[0].word != "outside"
    assert v.word == "outside" and "audio error energy" in v.text


def test_chaotic_video_and_audio_at_0_db_is_not_equivalent():
    floor = _pair("f", 14.6, 10.0, 0.63, 20.0)
    v = judge_numbers("c", [_pair("c", 14.0, 10.0, 0.62, 0.0)], [floor], rules=H200_SPREAD,
                      cand_stats=[stats("c", 69.1, 56.6, 41.0, 23.2, 0.236, 0.9)], exact_stats=SEED_EXACT)  # fmt: skip
    assert v.word == "outside" and not v.equivalent


@pytest.mark.parametrize(
    "field, value, why",
    [("ssim_mean", math.nan, "video 1 - SSIM"), ("audio_snr", -math.inf, "audio error energy"),
     ("video_mse", math.nan, "video MSE")],
)  # fmt: skip
def test_non_finite_values_fail(field, value, why):
    floors = [_pair("f", 36.0, 34.0, 0.98, 25.0), _pair("g", 36.1, 34.0, 0.98, 25.2)]
    cand = _pair("c", 36.0, 34.0, 0.98, 25.1)
    cand.values[field] = value
    v = judge_numbers("c", [cand], floors)
    r = next(c for c in v.energy if c.label == why)
    assert r.word == "outside" and "not finite" in r.text and v.word == "outside"


def test_a_metric_the_floor_has_and_the_candidate_lacks_is_incomplete():
    floors = [_pair("f", 36.0, 34.0, 0.98, 25.0), _pair("g", 36.1, 34.0, 0.98, 25.2)]
    cand = PairErrors.from_psnr(36.0, {"ssim_mean": 0.98}, key="c", seed=42)  # no audio
    v = judge_numbers("c", [cand], floors)
    assert v.word == "incomplete"
    assert any("the candidate has no audio error energy (the floor has)" in m for m in v.missing)
    assert "missing:" in v.text


def test_statistics_of_a_seed_with_no_exact_run_are_incomplete():
    floors = [_pair("f", 36.0, 34.0, 0.98, 25.0)]
    v = judge_numbers("c", [_pair("c", 36.0, 34.0, 0.98, 25.0)], floors,
                      cand_stats=[stats("c", 69.0, 56.0, 40.0, 23.0, 0.24, 0.9, seed=43)],
                      exact_stats=SEED_EXACT)  # fmt: skip
    assert v.stats_word == "incomplete" and v.word == "incomplete"
    assert any("no exact run of this seed has it" in m for m in v.missing)


def test_no_floor_is_incomplete_not_passing():
    v = judge_numbers("c", [PairErrors.from_psnr(30.0, seed=1)], [])
    assert v.word == "incomplete" and "no noise-floor run" in v.text


def test_intervals_give_inconclusive_with_the_seeds_that_would_decide():
    rng = np.random.default_rng(2)
    floors = [PairErrors(seed=s, key=f"f{s}{k}", values={"video_mse": float(np.exp(rng.normal(0, 0.3)))}) for s in (1, 2)
              for k in range(2)]  # fmt: skip
    cands = [PairErrors(seed=s, key=f"c{s}", values={"video_mse": 2.1}) for s in (1, 2)]
    v = judge_numbers("c", cands, floors)
    r = v.energy[0]
    assert r.word == "inconclusive" and r.ratio_ci[0] < 2.0 < r.ratio_ci[1]
    assert r.seeds_to_decide is None or r.seeds_to_decide > 2
    assert v.word == "inconclusive" and "within" not in v.text.split(":")[0]


def test_the_chaotic_threshold_is_no_cliff():
    rules = VerdictRules()
    assert video_regime(20.0, rules) == video_regime(19.999, rules) == "transitional"
    assert video_regime(22.0, rules) == "pixel" and video_regime(17.99, rules) == "chaotic"
    floors = [PairErrors.from_psnr(p, seed=1, key=f"f{p}") for p in (20.0, 20.01)]
    for floor_psnr in (20.0, 19.999):
        fl = [
            f.model_copy(update={"values": {**f.values, "video_mse": mse_from_psnr(floor_psnr)}})
            for f in floors
        ]
        v = judge_numbers("c", [PairErrors.from_psnr(floor_psnr - 0.1, seed=1)], fl)
        assert v.per_seed[0].regime["video"] == "transitional" and v.energy[0].metric == "video_mse"


def test_early_latents_are_judged_absolutely_or_against_the_baseline_never_the_round_off_floor():
    # step-1 latents of the exact floor differ by round-off only (156 dB); an approximate kernel's by 76 dB
    floor = PairErrors.from_psnr(14.6, seed=1, key="f", latent_psnr={1: 156.0, 2: 120.0})
    cand = PairErrors.from_psnr(14.0, seed=1, key="c", latent_psnr={1: 76.0, 2: 60.0, 3: 30.0})
    v = judge_numbers("c", [cand], [floor])
    assert (
        v.latent is not None and v.latent.judged and v.latent.word == "within" and v.latent.steps == {"1": 1}
    )
    assert "absolute bound 40 dB" in v.latent.text
    broken = cand.model_copy(update={"latent_psnr": {1: 25.0}})
    assert judge_numbers("c", [broken], [floor]).latent.word == "outside"
    # against the accepted baseline, at matched steps (the baseline saved steps 2 and 3 only)
    base = PairErrors.from_psnr(14.1, seed=1, key="b", latent_psnr={2: 60.0, 3: 31.0})
    unstated = judge_numbers(
        "c", [cand], [floor], rules=VerdictRules(accepted_baseline="sage"), baseline=[base]
    )
    assert unstated.latent.word == "inconclusive"  # one seed, one run a side, no spread: no interval
    rules = H200_SPREAD.model_copy(update={"accepted_baseline": "sage"})
    vb = judge_numbers("c", [cand], [floor], rules=rules, baseline=[base])
    assert vb.latent.steps == {"1": 2} and vb.latent.reading.ratio == pytest.approx(1.0)
    assert vb.latent.word == "within" and "sage's" in vb.latent.text
    worse = base.model_copy(update={"latent_psnr": {2: 70.0}})  # the candidate 10x the baseline's error
    assert judge_numbers("c", [cand], [floor], rules=rules, baseline=[worse]).latent.word == "outside"


def test_an_insitu_reading_judges_the_chaotic_regime():
    floor = _pair("f", 14.6, 10.0, 0.63, 9.0)
    cand = _pair("c", 14.0, 10.0, 0.62, 9.1)
    bad = InsituReading(word="outside", ratio=5.0, ratio_ci=[3.0, 8.0], text="in-situ error 5x the floor's")
    v = judge_numbers("c", [cand], [floor], insitu=bad)
    assert v.word == "outside" and v.insitu == bad and "in-situ error 5x" in v.text
    assert v.ratio == pytest.approx(9.1 and v.ratio)  # the audio ratio is judged and reported
    good = InsituReading(word="within", ratio=1.1, ratio_ci=[0.9, 1.3], text="in-situ 1.1x")
    assert judge_numbers("c", [cand], [floor], insitu=good).insitu.word == "within"
    # in the pixel regime too: a second reading beside the end-to-end one, and it decides when outside
    floors = [
        _pair("f", 40.0, 38, 0.99, 30),
        _pair("g", 40.1, 38, 0.9905, 30.2),
        _pair("h", 39.9, 38, 0.9895, 29.9),
    ]  # floor runs that differ in every measure: equal ones would measure no spread
    pixel = judge_numbers("c", [_pair("c", 40.0, 38, 0.99, 30)], floors, insitu=bad)
    assert pixel.insitu == bad and pixel.word == "outside" and pixel.decided_by == "insitu"
    assert pixel.end_to_end_word == "within" and pixel.ratio == 5.0
    assert pixel.text.startswith("outside: in-situ: in-situ error 5x the floor's (end to end: within)")


def test_the_accepted_baseline_gives_a_non_inferiority_reading():
    rules = VerdictRules(accepted_baseline="sage_attn2")
    floors = [
        PairErrors.from_psnr(42.5 + 0.15 * (k - 1), seed=s, key=f"f{s}{k}")
        for s in (1, 2, 3)
        for k in range(3)
    ]
    cands = [PairErrors.from_psnr(40.6, seed=s, key=f"c{s}") for s in (1, 2, 3)]
    base = [PairErrors.from_psnr(40.4, seed=s, key=f"b{s}") for s in (1, 2, 3)]
    v = judge_numbers("c", cands, floors, rules=rules, baseline=base)
    assert v.baseline.ratio == pytest.approx(10 ** (-0.02), rel=1e-6) and v.baseline.word == "not worse"
    assert (
        "error energy 0.95x sage_attn2's (95 % CI 0.89 to 1.02)" in v.text
        and "margin 1.25x: not worse" in v.text
    )


def test_one_identical_frame_neither_lifts_a_candidate_nor_sinks_the_floor():
    frames = 10
    floor_mse = [0.0] + [4.0] * (frames - 1)
    cand_mse = [0.0] + [40.0] * (frames - 1)
    floor = PairErrors(
        key="floor",
        seed=1,
        frames=frames,
        values={"video_mse": float(np.mean(floor_mse))},
        identical_frames=1,
    )
    cand = PairErrors(
        key="cand", seed=1, frames=frames, values={"video_mse": float(np.mean(cand_mse))}, identical_frames=1
    )
    v = judge_numbers("cand", [cand], [floor], rules=H200_SPREAD)
    assert v.per_seed[0].floor_psnr == pytest.approx(psnr_from_mse(3.6)) and math.isfinite(
        v.per_seed[0].floor_psnr
    )
    assert v.energy[0].ratio == pytest.approx(10.0) and v.word == "outside"
    assert "identical frames: 1 of 10, counted in the pooled MSE" in " ".join(v.sentences)


def test_verdict_on_real_media_against_the_noise_floor(tmp_path: Path, ref_run):
    content = base_content(42)
    nf = write_run(tmp_path / "a" / "nf", ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True,
                                                  noise=2.0), content=content, salt=1)  # fmt: skip
    nf2 = write_run(tmp_path / "a" / "nf2", ArmSpec("nf2", role="noise_floor", attn_type="torch_sdpa", kv_chunks=2,
                                                    noise=2.0), content=content, salt=4)  # fmt: skip
    close = write_run(tmp_path / "a" / "close", ArmSpec("close", noise=2.0), content=content, salt=2)
    far = write_run(tmp_path / "a" / "far", ArmSpec("far", noise=15.0, fallbacks=1), content=content, salt=3)
    floors = [compare_runs(ref_run, nf), compare_runs(ref_run, nf2)]
    c_close, c_far = compare_runs(ref_run, close), compare_runs(ref_run, far)

    good = judge("close", [c_close], floors)
    assert good.word in ("within", "inconclusive") and good.attention_ok is True
    mse = next(d for d in good.energy if d.metric == "video_mse")
    want = c_close.video.mse_mean / np.mean([f.video.mse_mean for f in floors])
    assert mse.ratio == pytest.approx(want)

    bad = judge("far", [c_far], floors)
    assert bad.word == "invalid" and bad.attention_ok is False and "fell back" in bad.attention
    assert "outside" in bad.text and "attention INVALID" in bad.summary
    sharp = next(s for s in bad.stats if s.stat == "sharpness")
    assert sharp.judged and sharp.word == "outside"  # 15 grey levels of noise raise the Laplacian variance

    no_floor = judge("close", [c_close], [])
    assert no_floor.word == "incomplete" and "no noise-floor run" in no_floor.summary


def test_the_headline_ratio_is_the_one_that_decides_the_word():
    """An outside video MSE and a wider, larger, inconclusive audio ratio: the badge and the one line
    lead with the video's (the e2e-3step page once showed the audio's 44x [0.2-9.9e3] on an
    "outside" badge)."""
    from harness.analysis.intervals import RatioReading
    from harness.analysis.verdict import Verdict, decisive_reading

    video = RatioReading(
        metric="video_mse", label="video MSE", ratio=14.3, ratio_ci=[6.98, 29.5], word="outside"
    )
    audio = RatioReading(metric="audio_error", label="audio error energy", ratio=44.3, ratio_ci=[0.2, 9.9e3],
                         word="inconclusive")  # fmt: skip
    assert decisive_reading(Verdict(arm="k", word="outside", energy=[audio, video])) is video
    assert decisive_reading(Verdict(arm="k", word="inconclusive", energy=[audio, video])) is audio
    assert decisive_reading(Verdict(arm="k", word="incomplete")) is None


EQUAL = {"video_mse": 0.0, "ssim_mean": 1.0, "audio_snr": math.inf}  # output equal to the reference's


def _seeded(psnr: float, seed: int, key: str, snr: float = 30.0, **kw) -> PairErrors:
    ssim = 1 - 0.01 * 10 ** ((40 - psnr) / 20)  # 1 - SSIM grows with the error's amplitude (0.99 at 40 dB)
    return PairErrors.from_psnr(psnr, {"ssim_mean": ssim, "audio_snr": snr}, key=key, seed=seed, **kw)


def _floors(seeds=(42, 43), psnrs=(40.0, 40.3, 39.8)) -> list[PairErrors]:
    return [_seeded(p, s, f"f{i}@{s}", 30.0 + 0.2 * i) for s in seeds for i, p in enumerate(psnrs)]


def test_identical_output_on_every_seed_reads_identical_first_and_alone():
    same = [PairErrors(key=f"c@{s}", seed=s, values=EQUAL,
                       identical=True) for s in (42, 43)]  # fmt: skip
    v = judge_numbers("c", same, _floors())
    assert (
        v.word == "identical"
        and v.text == "identical (2 of 2 seed(s)): output bitwise equal to the reference's"
    )
    assert v.energy == [] and v.ratio is None and v.sentences == [v.text]
    one = judge_numbers("c", same[:1], _floors()[:1])  # one floor run: still identical, never "inconclusive"
    assert one.word == "identical"


def test_identical_on_one_seed_is_said_and_the_other_seeds_are_judged():
    cands = [PairErrors(key="c@42", seed=42, values=EQUAL, identical=True),
             _seeded(30.0, 43, "c@43")]  # fmt: skip
    v = judge_numbers("c", cands, _floors())
    assert v.identical_seeds == [42] and v.word == "outside"  # seed 43 is 10x its floor
    assert v.text.startswith("outside: identical on seed(s) 42; error energy")
    assert [r.per_seed[0].seed for r in v.energy] == [43] * len(v.energy)
    assert v.sentences[0].startswith("identical on seed(s) 42 (1 of 2)")
    assert [sv.word for sv in v.per_seed] == ["outside", "identical"]


def test_a_broken_floor_run_is_left_out_and_named():
    floors = _floors()
    # one floor run of seed 43 is really a quantised kernel's output (13x the others)
    broken = [f if f.key != "f1@43" else _seeded(40.3 - 10 * math.log10(13), 43, "f1@43") for f in floors]
    cand = [_seeded(40.0 - 10 * math.log10(13), s, f"c@{s}") for s in (42, 43)]  # 13x the intact floor
    v = judge_numbers("c", cand, broken)
    assert v.word == "outside", v.text
    assert "floor run(s) left out: f1@43" in v.text
    assert any(s.startswith("floor run f1@43 left out: video MSE 11.9x the other floor runs' of seed 43 (margin 5")
               for s in v.sentences)  # fmt: skip
    near = [
        _seeded(40.0, s, f"n@{s}") for s in (42, 43)
    ]  # as exact as the floor: never below it by a bad run
    assert judge_numbers("n", near, broken).energy[0].ratio == pytest.approx(1.0, rel=0.15)


def test_a_floor_identical_to_the_reference_is_left_out_never_inf():
    floors = _floors(seeds=(42,))
    same = PairErrors(key="same@42", seed=42, values=EQUAL, identical=True)
    v = judge_numbers("c", [_seeded(40.1, 42, "c")], [*floors, same])
    assert "floor run same@42 left out: identical to the reference (no perturbation)" in v.sentences
    assert v.word == "within" and "inf" not in v.text
    only = judge_numbers("c", [_seeded(40.1, 42, "c")], [same])
    assert only.word == "incomplete" and "floor invalid (every floor run was left out)" in only.text


def test_a_candidates_lag_is_judged_against_the_floors_lag_never_dropped():
    floors = [
        f.model_copy(update={"audio_residual_lag": 1, "audio_rate": 32000}) for f in _floors(seeds=(42,))
    ]
    cand = _seeded(40.1, 42, "c", audio_residual_lag=640, audio_rate=32000)  # 20 ms
    v = judge_numbers("c", [cand], floors)
    assert v.word == "outside" and v.decided_by == "lag"
    assert v.text.startswith("outside: seed 42: audio residual lag +640 samples (+20.0 ms), B late, where the "
                             "floor's largest is 1 sample(s)")  # fmt: skip
    small = cand.model_copy(update={"audio_residual_lag": 2})  # within the floor's lag and the margin
    assert judge_numbers("c", [small], floors).audio_lag == []


def test_the_per_seed_cell_quotes_the_figure_the_headline_quotes():
    # video reads within, audio inconclusive: the headline's reading and every seed cell are the same kind
    floors = _floors()
    cands = [_seeded(40.0, s, f"c@{s}", snr=30.0 - 10 * math.log10(2.0)) for s in (42, 43)]
    v = judge_numbers("c", cands, floors)
    top = next(r for r in v.energy if r.metric == v.ratio_metric)
    assert v.decided_by == top.metric
    assert [sv.ratio for sv in v.per_seed] == [s.ratio for s in top.per_seed]


def test_a_mirrored_video_under_a_chaotic_floor_is_outside():
    # exact runs differ pixel-wise (floor 14.6 dB) but keep the coarse layout; the candidate is mirrored
    layout = {"layout_var_a": {4: 400.0, 8: 500.0}, "layout_mirror_lr_mse": {4: 300.0, 8: 380.0}}
    floors = [_pair(f"f{i}", 14.6 + 0.1 * i, 10.0, 0.63, 9.0 + 0.1 * i).model_copy(
        update={**layout, "layout_mse": {4: 8.0 + i, 8: 30.0 + i}}) for i in range(3)]  # fmt: skip
    same_stats = _pair("c", 14.5, 10.0, 0.63, 9.1)
    mirrored = same_stats.model_copy(
        update={**layout, "layout_mse": {4: 300.0, 8: 380.0}, "layout_mirror_lr_mse": {4: 9.0, 8: 31.0}}
    )
    v = judge_numbers("c", [mirrored], floors)
    assert v.per_seed[0].regime["video"] == "chaotic"
    assert v.word == "outside" and v.decided_by == "structure"
    assert "layout mirrored left-right" in v.text
    honest = same_stats.model_copy(update={**layout, "layout_mse": {4: 9.0, 8: 31.0}})
    assert judge_numbers("c", [honest], floors).structure.word == "within"


def test_one_frozen_frame_no_exact_run_has_is_outside():
    from harness.analysis.structure import FrameCounts

    floors = _floors(seeds=(42,))
    exact = [
        FrameCounts(key=k, seed=42, frozen=0, frozen_first=[]) for k in ("ref@42", *(f.key for f in floors))
    ]
    frozen = FrameCounts(key="c", seed=42, frozen=1, frozen_first=[60])
    v = judge_numbers("c", [_seeded(40.1, 42, "c")], floors, cand_frames=[frozen], exact_frames=exact)
    assert v.word == "outside" and "frame 60" in v.text, v.text


def test_an_approximate_kernel_identical_to_the_reference_is_warned_with_its_call_counts(
    tmp_path: Path, ref_run
):
    import shutil

    sage = write_run(tmp_path / "a" / "sage", ArmSpec("sage", attn_type="sage_attn2"))
    shutil.copyfile(Path(ref_run.path) / "output.mp4", Path(sage.path) / "output.mp4")  # the same bytes
    rec = sage.record()  # as its run would have recorded them
    rec.outputs["output.mp4"] = sha256_file(sage.output)
    sage.write(rec)
    nf = write_run(tmp_path / "a" / "nf", ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True,
                                                  noise=2.0), salt=1)  # fmt: skip
    cmp = compare_runs(ref_run, sage)
    assert cmp.bitwise.files is True
    v = judge("sage", [cmp], [compare_runs(ref_run, nf)])
    assert v.word == "identical" and v.warnings
    assert v.warnings[0].startswith(
        "sage_attn2 is not the reference's backend (torch_sdpa), yet its output is bitwise the reference's on "
        "seed(s) 42: its kernel may not have run;"
    )
    assert "WARNING: sage_attn2 is not the reference's backend" in v.summary


# Every override of a word its parts combine to, written out: (word, missing, ran, measured, attention_ok) -> word.
OVERRIDES = [
    ("within", False, True, True, None, "within"),
    ("inconclusive", False, True, True, True, "inconclusive"),
    ("within", True, True, True, None, "incomplete"),
    ("inconclusive", True, True, True, None, "incomplete"),
    ("outside", True, True, True, None, "outside"),  # a missing value never hides an outside part
    (
        "identical",
        True,
        True,
        True,
        None,
        "incomplete",
    ),  # a seed not measured: the others' identity is not all
    ("outside", False, True, False, None, "incomplete"),  # nothing measured
    ("within", False, False, False, False, "not run"),  # no run ended ok: nothing else to say
    ("outside", False, True, True, False, "invalid"),  # another kernel was measured
    ("within", True, True, False, False, "invalid"),
]


@pytest.mark.parametrize(("parts", "missing", "ran", "measured", "attention_ok", "want"), OVERRIDES)
def test_every_override_of_the_parts_word_is_one_function(parts, missing, ran, measured, attention_ok, want):
    from harness.analysis.verdict import overriding_word

    got = overriding_word(parts, missing=missing, ran=ran, measured=measured, attention_ok=attention_ok)
    assert got == want


def test_the_settled_line_says_the_word_the_runs_leave():
    from harness.analysis.verdict import Verdict
    from harness.analysis.verdict_model import settled_text

    v = Verdict(arm="a", word="within", text="within: error energy 1.1x", attention="calls served by x")
    kw = {"first": None, "measured": True, "head": []}
    assert settled_text(v, "within", unmeasured=[], **kw) == v.text
    assert settled_text(v, "incomplete", unmeasured=[7, 8], **kw) == (
        "incomplete: seed(s) 7, 8 not measured; error energy 1.1x"
    )
    assert (
        settled_text(v, "invalid", unmeasured=[], **kw)
        == "invalid: calls served by x; as measured: " + v.text
    )
    assert settled_text(v, "not run", unmeasured=[], **kw) == "not run"
    v.warnings = ["kernel may not have run"]
    assert settled_text(v, "within", unmeasured=[], **kw).endswith("; WARNING: kernel may not have run")
    assert "WARNING" not in settled_text(v, "invalid", unmeasured=[], **kw)


def _armed(psnr: float, seed: int, arm: str, snr: float = 30.0, digest: str | None = None) -> PairErrors:
    return _seeded(psnr, seed, f"{arm}@{seed}", snr, arm=arm, digest=digest)


def test_a_seed_set_aside_as_identical_still_lends_its_floor_runs_spread():
    # two floor runs a seed that spread (sd ~0.25 of the log energy): one seed's alone gives df 1
    floors = [_armed(40.0 + d, s, arm) for s in (42, 43) for arm, d in (("f", 0.0), ("g", 1.5))]
    cands = [PairErrors(key="c@42", seed=42, values=EQUAL, identical=True), _seeded(20.8, 43, "c@43", 12.0)]
    v = judge_numbers("c", cands, floors)
    video = next(r for r in v.energy if r.metric == "video_mse")
    assert "over 4 floor runs (df 2)" in video.spread
    assert v.word == "outside" and video.ratio_ci[0] > 2, v.text  # 90x on seed 43, decided
    alone = judge_numbers("c", cands[1:], [f for f in floors if f.seed == 43])
    assert alone.word != "outside"  # the same seed's two runs alone (df 1) decide nothing: the test bites


def test_a_floor_arm_that_is_a_kernels_output_on_every_seed_invalidates_each_seeds_floor():
    seeds = (42, 43, 44)
    floors = [_armed(40.0 + 0.1 * (s - 43), s, "kv_reversed") for s in seeds]
    floors += [_armed(30.0 + 0.2 * (s - 43), s, "quantised", 22.0) for s in seeds]  # 10x, on every seed
    exact_stats = [stats(f"{k}@{s}", 68.6 + j, 56.2, 40.4, 23.24, 0.240, 0.96, seed=s)
                   for s in seeds for j, k in enumerate(("ref", "kv_reversed", "quantised"))]  # fmt: skip
    cand_stats = [stats(f"c@{s}", 69.6, 56.2, 40.4, 23.24, 0.240, 0.96, seed=s) for s in seeds]
    v = judge_numbers("c", [_seeded(39.9, s, f"c@{s}") for s in seeds], floors,
                      cand_stats=cand_stats, exact_stats=exact_stats)  # fmt: skip
    assert v.word == "incomplete"
    # statistics within on a seed with no floor never make the seed's cell read within
    assert [s.word for s in v.per_seed] == ["incomplete"] * 3, [s.text for s in v.per_seed]
    assert v.text.startswith(
        "incomplete: seed 42: floor invalid; seed 43: floor invalid; seed 44: floor invalid"
    )
    assert "floor runs (kv_reversed@43, quantised@43) disagree: video MSE 10" in v.text
    intact = [f for f in floors if f.arm == "kv_reversed"] + [_armed(40.2, s, "other", 30.4) for s in seeds]
    exact = [_seeded(39.9, s, f"c@{s}", 30.0 + 0.1 * (s - 43)) for s in seeds]
    assert judge_numbers("c", exact, intact).word == "within"


def test_floor_runs_bitwise_equal_to_each_other_count_once_and_measure_no_spread():
    seeds = (42, 43, 44, 45, 46)
    floors = [_armed(40.0 + 0.4 * (s % 3), s, arm, digest=f"out{s}") for s in seeds for arm in ("f", "g")]
    exact = [_seeded(40.0 + 0.4 * ((s + 1) % 3), s, f"c@{s}") for s in seeds]  # an exact run as candidate
    v = judge_numbers("c", exact, floors)
    assert "floor run g@42 left out: bitwise equal to floor run f@42: one sample, counted once" in v.sentences
    assert v.word != "outside" and all(sv.word != "outside" for sv in v.per_seed), v.text
    assert all("sd 0 " not in r.spread for r in v.energy)
    # the same runs with no digests (a table's numbers): equal in every figure is equal
    bare = [f.model_copy(update={"digest": None}) for f in floors]
    assert "floor run g@43 left out" in " ".join(judge_numbers("c", exact, bare).sentences)


def test_a_spread_of_zero_is_never_a_measured_spread():
    seeds = [SeedValues(seed=s, candidate=0.2, floors=[0.1, 0.1]) for s in (1, 2)]
    r = ratio_reading("video_mse", "video MSE", seeds, bound=2.0, alpha=0.05, prior_sd=None)
    assert r.log_sd is None and r.word == "inconclusive" and r.ratio_ci is None
    assert "4 floor runs agree exactly (sd 0): the spread of a run is not measured" in r.text


def test_one_bad_seed_of_five_leads_the_line_and_each_seed_quotes_its_deciding_figure():
    seeds = (42, 43, 44, 45, 46)
    floors = [
        _armed(40.0 + 0.3 * ((s * 7 + i) % 5) / 4, s, a, 30 + 0.2 * i)
        for s in seeds
        for i, a in enumerate("fgh")
    ]
    cands = [_seeded(40.1 - (10 * math.log10(30) if s == 44 else 0), s, f"c@{s}", 30.1) for s in seeds]
    v = judge_numbers("c", cands, floors)
    assert v.word == "outside" and v.text.startswith("outside: error energy 30.5x the floor's (99.5 % CI ")
    assert "; seed 44's video MSE; 5 seed(s) combined 2" in v.text
    assert [sv.text.split("run(s))")[1] for sv in v.per_seed][1:3] == [
        "; video MSE 1.01x: within",
        "; video MSE 30.5x: outside",
    ]
    # audio damaged on seed 43 alone: its cell quotes the audio figure that makes it outside, not video's
    loud = [c if c.seed != 43 else _seeded(40.1, 43, "c@43", 10.0) for c in cands]
    cell = next(sv for sv in judge_numbers("c", loud, floors).per_seed if sv.seed == 43)
    assert cell.word == "outside" and "; audio error energy " in cell.text and "video MSE" not in cell.text


def test_the_reading_quoted_first_is_the_clearest_not_the_largest():
    from harness.analysis.intervals import RatioReading
    from harness.analysis.verdict_model import clearest

    audio = RatioReading(
        metric="audio_error", label="audio", ratio=54.8, ratio_ci=[5.69, 528.0], word="outside"
    )
    video = RatioReading(metric="video_mse", label="video", ratio=14.2, ratio_ci=[8.15, 24.9], word="outside")
    assert clearest([audio, video], "outside") is video and clearest([audio, video], "inconclusive") is audio

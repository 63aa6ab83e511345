"""harness.analysis.verdict (and .energy): error energy against the floor's, the chaotic regime, statistics.

The seed-table and 3-step cases are computed from summary numbers alone (no media), as a
pull request reports them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from campaign_factory import ArmSpec, base_content, write_run

from harness.analysis.energy import PairErrors, mse_from_psnr, psnr_from_mse
from harness.analysis.verdict import StatsSample, judge, judge_numbers
from harness.compare.pairwise import compare_runs
from harness.scenario.verdict import VerdictRules

STATS = ("luma_mean", "luma_std", "sharpness", "motion", "audio_rms", "audio_peak")


def stats(key: str, *values: float, seed: int = 42) -> StatsSample:
    return StatsSample(key=key, seed=seed, values=dict(zip(STATS, values, strict=True)))


# The pull request's 29-step table: decoded output against BF16 SDPA.
SEED_TABLE = {  # PSNR (min frame), SSIM (min frame), audio SNR / cosine, statistics
    "code_object": (13.59, 10.93, 0.578, 6.13, (69.3, 56.9, 40.6, 22.92, 0.234, 0.91)),
    "hip_kernel": (13.04, 9.58, 0.551, 7.02, (69.4, 57.3, 42.6, 23.51, 0.238, 0.93)),
    "sage_attn2_triton": (14.09, 10.20, 0.597, 7.13, (69.35, 57.1, 41.6, 23.2, 0.236, 0.92)),
}
SEED_FLOOR = (14.64, 10.30, 0.629, 9.16)
SEED_EXACT = [
    stats("sdpa", 68.6, 56.2, 40.4, 23.24, 0.240, 0.96),
    stats("floor", 69.0, 56.7, 42.3, 23.12, 0.233, 0.91),
]


def _pair(key: str, psnr: float, psnr_min: float, ssim: float, snr: float) -> PairErrors:
    return PairErrors.from_psnr(psnr, key=key, seed=42, ssim_mean=ssim, psnr_min=psnr_min, audio_snr_db=snr)


@pytest.mark.parametrize("arm", sorted(SEED_TABLE))
def test_seed_table_at_29_steps_is_equivalent_in_the_chaotic_regime(arm):
    psnr, psnr_min, ssim, snr, st = SEED_TABLE[arm]
    v = judge_numbers(
        arm,
        [_pair(arm, psnr, psnr_min, ssim, snr)],
        [_pair("floor", *SEED_FLOOR)],
        cand_stats=[stats(arm, *st)],
        exact_stats=SEED_EXACT,
    )
    assert v.regime == "chaotic" and v.floor_psnr == pytest.approx(14.64)
    assert v.accuracy == (
        "pixel metrics uninformative (floor 14.64 dB); statistics within the exact runs' spread; "
        "equivalent at this tolerance"
    )
    assert v.equivalent is True and v.within_noise_floor is None
    assert all(not c.judged for c in v.energy)  # shown, not judged
    assert {c.metric for c in v.energy} >= {"video_mse", "video_1_ssim", "audio_error"}
    # audio_peak (one sample) is shown, never judged
    peak = [s for s in v.stats if s.stat == "audio_peak"]
    assert peak and not peak[0].judged
    assert "uninformative" in " ".join(v.sentences)


def test_seed_table_statistics_far_outside_the_spread_are_not_equivalent():
    psnr, psnr_min, ssim, snr, st = SEED_TABLE["hip_kernel"]
    dark = (60.0, *st[1:])  # luma mean 12 % below the exact runs
    v = judge_numbers(
        "dark",
        [_pair("dark", psnr, psnr_min, ssim, snr)],
        [_pair("floor", *SEED_FLOOR)],
        cand_stats=[stats("dark", *dark)],
        exact_stats=SEED_EXACT,
    )
    assert v.stats_inside is False and v.equivalent is False
    assert "statistics OUTSIDE the exact runs' spread" in v.accuracy
    assert "NOT equivalent at this tolerance" in v.accuracy
    assert "luma_mean 60 outside" in " ".join(v.sentences)


def test_a_louder_peak_alone_does_not_fail_the_statistics():
    psnr, psnr_min, ssim, snr, st = SEED_TABLE["code_object"]
    loud = (*st[:5], 1.0)  # audio peak far above the exact runs: shown, not judged
    v = judge_numbers("loud", [_pair("loud", psnr, psnr_min, ssim, snr)], [_pair("floor", *SEED_FLOOR)],
                      cand_stats=[stats("loud", *loud)], exact_stats=SEED_EXACT)  # fmt: skip
    peak = next(s for s in v.stats if s.stat == "audio_peak")
    assert not peak.ok and not peak.judged
    assert v.stats_inside is True and v.equivalent is True


def test_three_step_case_is_outside_the_floor():
    v = judge_numbers(
        "kernel",
        [PairErrors.from_psnr(32.28, key="k", seed=42)],
        [PairErrors.from_psnr(35.94, key="f", seed=42)],
    )
    assert v.regime == "pixel"
    chk = next(c for c in v.energy if c.metric == "video_mse")
    assert chk.ratio == pytest.approx(10 ** (0.366), rel=1e-6)  # 3.66 dB = 2.32x the energy
    assert chk.judged and chk.within is False
    assert v.accuracy.startswith(
        "error energy 2.32x the floor's (video MSE), tolerance 2x: outside the floor"
    )
    assert "NOT equivalent at this tolerance" in v.accuracy
    assert v.within_noise_floor is False and v.equivalent is False


def test_tolerance_is_stated_and_moves_the_verdict():
    cands, floors = [PairErrors.from_psnr(32.28, seed=1)], [PairErrors.from_psnr(35.94, seed=1)]
    v = judge_numbers("k", cands, floors, rules=VerdictRules(tolerance=3.0))
    assert "tolerance 3x: within" in v.accuracy and v.equivalent is True


def test_one_identical_frame_neither_lifts_a_candidate_nor_sinks_the_floor():
    frames = 10
    floor_mse = [0.0] + [4.0] * (frames - 1)  # the floor's first frame equals the reference
    cand_mse = [0.0] + [40.0] * (frames - 1)  # so does the candidate's: still 10x the floor's error
    per_frame_psnr = [psnr_from_mse(m) for m in cand_mse]
    assert math.isinf(np.mean(per_frame_psnr))  # what the old mean of per-frame PSNR reported
    floor = PairErrors(
        key="floor", seed=1, frames=frames, video_mse=float(np.mean(floor_mse)), identical_frames=1
    )
    cand = PairErrors(
        key="cand", seed=1, frames=frames, video_mse=float(np.mean(cand_mse)), identical_frames=1
    )
    close = PairErrors(key="close", seed=1, frames=frames, video_mse=float(np.mean(floor_mse)) * 1.2)
    v = judge_numbers("cand", [cand], [floor])
    assert v.floor_psnr == pytest.approx(psnr_from_mse(3.6)) and math.isfinite(v.floor_psnr)
    assert v.energy[0].ratio == pytest.approx(10.0) and v.within_noise_floor is False
    assert "identical frames: 1 of 10, counted in the pooled MSE" in " ".join(v.sentences)
    assert judge_numbers("close", [close], [floor]).within_noise_floor is True


def test_floor_noise_a_candidate_equal_to_the_floor_passes():
    """Candidate and floor drawn from the same distribution of error energies (per-seed spread of
    a chaotic-ish trajectory, 30 % in log): within nearly always; 3x the energy: outside nearly always."""
    rng = np.random.default_rng(0)
    seeds, perturbations, trials = (42, 43, 44), 3, 2000
    base = mse_from_psnr(36.0)

    def draw(scale: float, n: int) -> list[float]:
        return list(base * scale * np.exp(rng.normal(0, 0.3, n)))

    within_equal = within_bad = old_rule_fails = 0
    for _ in range(trials):
        floors = [PairErrors(seed=s, video_mse=m) for s in seeds for m in draw(1.0, perturbations)]
        equal = [PairErrors(seed=s, video_mse=m) for s, m in zip(seeds, draw(1.0, 3), strict=True)]
        bad = [PairErrors(seed=s, video_mse=m) for s, m in zip(seeds, draw(3.0, 3), strict=True)]
        within_equal += judge_numbers("eq", equal, floors).within_noise_floor is True
        within_bad += judge_numbers("bad", bad, floors).within_noise_floor is True
        # the rule this replaces: below one K/V-reversed floor run in any seed, zero margin
        one_floor = floors[::perturbations]
        old_rule_fails += any(c.video_mse > f.video_mse for c, f in zip(equal, one_floor, strict=True))
    assert within_equal / trials > 0.99
    assert within_bad / trials < 0.05
    assert old_rule_fails / trials > 0.8


def test_audio_judged_by_log_mel_when_the_floors_snr_is_low():
    floor = PairErrors.from_psnr(
        38.4, seed=1, ssim_mean=0.949, audio_snr_db=17.7, audio_logmel_cosine=0.99921
    )
    cand = PairErrors.from_psnr(37.4, seed=1, ssim_mean=0.946, audio_snr_db=12.8, audio_logmel_cosine=0.99894)
    v = judge_numbers("c", [cand], [floor])
    by = {c.metric: c for c in v.energy}
    assert by["audio_logmel"].judged and not by["audio_error"].judged
    assert "log-mel cosine judges the audio" in by["audio_error"].text
    assert by["audio_logmel"].ratio == pytest.approx((1 - 0.99894) / (1 - 0.99921))
    assert v.within_noise_floor is True  # 1.26x MSE, 1.06x 1-SSIM, 1.34x log-mel


def test_chaotic_regime_judges_the_earliest_latent():
    floor = PairErrors.from_psnr(14.6, seed=1, latent_step=1, latent_psnr=80.7)
    good = PairErrors.from_psnr(13.6, seed=1, latent_step=1, latent_psnr=79.5)
    bad = PairErrors.from_psnr(13.6, seed=1, latent_step=1, latent_psnr=70.0)
    v_good, v_bad = judge_numbers("g", [good], [floor]), judge_numbers("b", [bad], [floor])
    assert v_good.accuracy.startswith(
        "pixel metrics uninformative (floor 14.60 dB); step-1 latent error energy 1.32x"
    )
    assert v_good.equivalent is True
    assert "outside the floor" in v_bad.accuracy and v_bad.equivalent is False


def test_no_floor_is_not_judged():
    v = judge_numbers("c", [PairErrors.from_psnr(30.0, seed=1)], [])
    assert v.regime == "no floor" and v.equivalent is None
    assert "no noise floor" in v.accuracy


def test_verdict_on_real_media_against_the_noise_floor(tmp_path: Path, ref_run):
    content = base_content(42)
    nf = write_run(tmp_path / "a" / "nf", ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True,
                                                  noise=2.0), content=content, salt=1)  # fmt: skip
    close = write_run(tmp_path / "a" / "close", ArmSpec("close", noise=0.5), content=content, salt=2)
    far = write_run(tmp_path / "a" / "far", ArmSpec("far", noise=15.0, fallbacks=1), content=content, salt=3)
    floor = compare_runs(ref_run, nf)
    c_close, c_far = compare_runs(ref_run, close), compare_runs(ref_run, far)
    assert c_close.video.psnr_pooled > floor.video.psnr_pooled > c_far.video.psnr_pooled

    good = judge("close", [c_close], [floor])
    assert good.within_noise_floor is True and good.attention_ok is True
    mse = next(d for d in good.energy if d.metric == "video_mse")
    assert mse.ratio == pytest.approx(c_close.video.mse_mean / floor.video.mse_mean)
    assert "tolerance 2x: within" in mse.text

    bad = judge("far", [c_far], [floor])
    assert bad.within_noise_floor is False and bad.equivalent is False
    assert bad.attention_ok is False and "fell back" in bad.attention
    assert "outside the floor" in bad.summary and "attention INVALID" in bad.summary
    # 15 grey levels of noise raise the Laplacian variance far beyond the exact runs' spread
    sharp = next(s for s in bad.stats if s.stat == "sharpness")
    assert sharp.judged and not sharp.ok
    assert bad.stats_inside is False
    assert "0.02|mean(exact)|" in bad.stats_tolerance

    no_floor = judge("close", [c_close], [])
    assert no_floor.within_noise_floor is None and no_floor.equivalent is None
    assert "no noise floor" in no_floor.summary

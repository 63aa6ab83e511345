"""harness.compare.verdict: a candidate judged against the noise floor."""

from __future__ import annotations

from pathlib import Path

import pytest
from campaign_factory import ArmSpec, base_content, write_run

from harness.compare.pairwise import compare_runs
from harness.compare.verdict import judge


def test_verdict_against_the_noise_floor(tmp_path: Path, ref_run):
    content = base_content(42)
    nf = write_run(tmp_path / "a" / "nf", ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True,
                                                  noise=2.0), content=content, salt=1)  # fmt: skip
    close = write_run(tmp_path / "a" / "close", ArmSpec("close", noise=0.5), content=content, salt=2)
    far = write_run(tmp_path / "a" / "far", ArmSpec("far", noise=15.0, fallbacks=1), content=content, salt=3)
    floor = compare_runs(ref_run, nf)
    c_close, c_far = compare_runs(ref_run, close), compare_runs(ref_run, far)
    assert c_close.video.psnr_mean > floor.video.psnr_mean > c_far.video.psnr_mean

    good = judge("close", [c_close], {42: floor})
    assert good.within_noise_floor is True
    assert good.attention_ok is True
    psnr_check = next(d for d in good.distance if d.metric == "psnr_mean")
    delta = c_close.video.psnr_mean - floor.video.psnr_mean
    assert f"{delta:.2f} dB above" in psnr_check.text

    bad = judge("far", [c_far], {42: floor})
    assert bad.within_noise_floor is False
    psnr_check = next(d for d in bad.distance if d.metric == "psnr_mean")
    gap = floor.video.psnr_mean - c_far.video.psnr_mean
    assert f"{gap:.2f} dB below the floor" in psnr_check.text
    assert bad.attention_ok is False and "fell back" in bad.attention
    assert "outside the noise floor" in bad.summary and "attention INVALID" in bad.summary
    # 15 grey levels of noise raise the Laplacian variance far beyond two exact runs' spread
    sharp = next(s for s in bad.stats if s.stat == "sharpness")
    assert not sharp.ok and sharp.tol == pytest.approx(max(sharp.spread, 0.01 * abs(sharp.center)))
    assert bad.stats_inside is False
    assert "0.01 * |mean(exact)|" in bad.stats_tolerance

    no_floor = judge("close", [c_close], {})
    assert no_floor.within_noise_floor is None
    assert "no noise floor" in no_floor.summary

"""harness.compare.latents: latent PSNR per step (.npy, .pt, .npz with named parts)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from campaign_factory import ArmSpec, latent_array, write_run

from harness.compare.latents import latent_psnr
from harness.compare.pairwise import compare_runs
from harness.errors import HarnessError
from harness.report.comparison import format_comparison


def test_latent_psnr_per_step_npy_and_pt(tmp_path: Path):
    a = write_run(tmp_path / "x" / "ref", ArmSpec("ref", role="reference", latents="npy"))
    b = write_run(tmp_path / "x" / "cand", ArmSpec("cand", noise=2.0, latents="pt"), salt=5)
    cmp = compare_runs(a, b)
    assert [p.step for p in cmp.latents] == [1, 2, 3]
    for p in cmp.latents:
        ref = latent_array(42, p.step, 0.0, 0).astype(np.float64)
        test = latent_array(42, p.step, 2.0, 5).astype(np.float64)
        rng = float(ref.max() - ref.min())
        mse = float(np.mean((ref - test) ** 2))
        assert p.psnr == pytest.approx(10 * math.log10(rng**2 / mse), rel=1e-9)
    # noise grows with the step in the factory, so PSNR falls step after step
    assert cmp.latents[0].psnr > cmp.latents[1].psnr > cmp.latents[2].psnr
    assert math.isinf(latent_psnr(np.ones(4), np.ones(4))[0])
    with pytest.raises(HarnessError, match="shapes differ"):
        latent_psnr(np.ones(4), np.ones(5))


def test_latent_npz_parts_and_sigmas_ignored(tmp_path: Path):
    a = write_run(tmp_path / "x" / "ref", ArmSpec("ref", role="reference", latents="npz"))
    b = write_run(tmp_path / "x" / "cand", ArmSpec("cand", noise=2.0, latents="npz"), salt=5)
    same = write_run(tmp_path / "x" / "same", ArmSpec("same", latents="npz"), copy_output_from=a)
    cmp = compare_runs(a, b)
    assert [p.step for p in cmp.latents] == [1, 2, 3]
    for p in cmp.latents:
        assert set(p.parts) == {"video", "audio"}  # the scalar sigmas are not latents
        ref = latent_array(42, p.step, 0.0, 0).astype(np.float64)
        test = latent_array(42, p.step, 2.0, 5).astype(np.float64)
        mse = float(np.mean((ref - test) ** 2))
        assert p.parts["video"] == pytest.approx(
            10 * math.log10(float(ref.max() - ref.min()) ** 2 / mse), rel=1e-9
        )
        both_r = np.concatenate([ref.ravel(), ref[0, 0].ravel() * 0.5])
        both_t = np.concatenate([test.ravel(), test[0, 0].ravel() * 0.5])
        mse_all = float(np.mean((both_r - both_t) ** 2))
        rng_all = float(both_r.max() - both_r.min())
        assert p.psnr == pytest.approx(10 * math.log10(rng_all**2 / mse_all), rel=1e-9)
    assert all(math.isinf(p.psnr) for p in compare_runs(a, same).latents)
    assert "PSNR video" in format_comparison(cmp, "table")

from __future__ import annotations

import numpy as np
import pytest
import torch
from collect_testutil import ssim, ssim_sum
from skimage import data
from skimage.metrics import structural_similarity

from harness.collect.ssim import Workspace, gaussian_kernel, ssim_sse, ssim_torch


def skimage_ssim(a: np.ndarray, b: np.ndarray) -> float:
    return float(
        structural_similarity(
            a,
            b,
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
            data_range=255,
            channel_axis=-1 if a.ndim == 3 else None,
        )
    )


def _noisy(a: np.ndarray, sigma: float, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(a + rng.normal(0, sigma, a.shape), 0, 255).astype(np.uint8)


def _pairs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    photo = np.ascontiguousarray(data.astronaut()[40:232, 120:376])  # 192x256 real photo crop
    yy, xx = np.mgrid[0:67, 0:93]
    smooth = np.clip(np.stack([xx * 2.5, yy * 3.0, xx + yy], -1), 0, 255).astype(np.uint8)
    flat = np.full((40, 52, 3), 250, np.uint8)
    flat_b = flat.copy()
    flat_b[10:20, 10:30] = 247
    flat_b[::3, ::5] = 251
    half = np.zeros((48, 64, 3), np.uint8)
    half[:, 32:] = 255
    half_b = half.copy()
    half_b[20:24, 5:60] = 128
    yy, xx = np.mgrid[0:120, 0:160]
    grad = np.clip(np.stack([xx * 1.8, yy * 2.2, 255 - xx], -1), 0, 255).astype(np.uint8)
    box = np.full((90, 130, 3), 2, np.uint8)
    box[30:60, 40:90] = 253
    return {
        "random": (rng.integers(0, 256, (64, 96, 3), np.uint8), rng.integers(0, 256, (64, 96, 3), np.uint8)),
        "smooth-odd-size": (smooth, _noisy(smooth, 2.0)),
        "photo": (photo, _noisy(photo, 8.0)),
        "photo-odd-crop": (photo[:101, :133], _noisy(photo[:101, :133], 1.0)),
        "photo-inverted": (photo, 255 - photo),
        "near-white-flat": (flat, flat_b),
        "black-white-halves": (half, half_b),
        "dark": (
            _noisy(np.full((50, 70, 3), 3, np.uint8), 1.0, 5),
            _noisy(np.full((50, 70, 3), 3, np.uint8), 1.0, 6),
        ),
        "min-size-11x11": (
            rng.integers(0, 256, (11, 11, 3), np.uint8),
            rng.integers(0, 256, (11, 11, 3), np.uint8),
        ),
        "gray-2d": (photo[..., 1].copy(), _noisy(photo[..., 1], 6.0)),
        # large smooth differences over flat areas: the worst case for float32 rounding
        "gradient-vs-its-flip": (grad, np.ascontiguousarray(grad[::-1])),
        "gradient-shifted": (grad, np.clip(grad + rng.integers(38, 43, grad.shape), 0, 255).astype(np.uint8)),
        "dark-with-bright-box": (box, _noisy(box, 0.7, 9)),
        "tall-several-bands": (np.tile(photo, (2, 1, 1)), _noisy(np.tile(photo, (2, 1, 1)), 3.0)),
    }


@pytest.mark.parametrize("name", list(_pairs()))
def test_matches_skimage(name: str) -> None:
    a, b = _pairs()[name]
    want = skimage_ssim(a, b)
    assert ssim(a, b) == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("name", [n for n in _pairs() if n != "gray-2d"])
def test_torch_matches_skimage_and_cpu(name: str) -> None:
    a, b = _pairs()[name]
    want = skimage_ssim(a, b)
    ta, tb = torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b))
    f64 = ssim_torch(ta, tb).item()  # float64 by default
    f32 = ssim_torch(ta, tb, dtype=torch.float32).item()  # what the GPU path runs
    assert f64 == pytest.approx(want, abs=1e-12)
    assert f32 == pytest.approx(f64, abs=1e-6)  # the issue asks 1e-5 of float64; we hold 1e-6
    assert f64 == pytest.approx(ssim(a, b), abs=1e-6)


@pytest.mark.parametrize("level", [0, 3, 128, 252, 255])
def test_flat_areas_cost_no_precision(level: int) -> None:
    """Flat areas far from the band's mean, next to a difference: exact with the
    centre-compensated filters (plain float32 filters were off by ~1e-6 here)."""
    a = np.full((60, 80, 3), level, np.uint8)
    a[:, 40:] = 255 - level
    b = a.copy()
    b[24:30, 6:74] = 128
    want = skimage_ssim(a, b)
    assert abs(ssim(a, b) - want) < 2e-7
    assert abs(ssim_torch(torch.from_numpy(a), torch.from_numpy(b), dtype=torch.float32).item() - want) < 2e-7


def test_sse_is_exact_and_comes_with_ssim() -> None:
    for name, (a, b) in _pairs().items():
        total, count, err = ssim_sse(a, b)
        assert err == int(np.sum((a.astype(np.int64) - b.astype(np.int64)) ** 2)), name
        assert (total, count) == ssim_sum(a, b)


def test_torch_batch_is_per_frame() -> None:
    a, b = _pairs()["photo"]
    a2, b2 = a[::-1].copy(), _noisy(a[::-1], 20.0)
    got = ssim_torch(torch.from_numpy(np.stack([a, a2, a])), torch.from_numpy(np.stack([b, b2, a])))
    assert got.shape == (3,)
    assert got[0].item() == pytest.approx(skimage_ssim(a, b), abs=1e-6)
    assert got[1].item() == pytest.approx(skimage_ssim(a2, b2), abs=1e-6)
    assert got[2].item() == 1.0


def test_identical_is_exactly_one() -> None:
    a, _ = _pairs()["photo"]
    assert ssim(a, a.copy()) == 1.0
    assert ssim_torch(torch.from_numpy(a), torch.from_numpy(a.copy())).item() == 1.0


def test_band_split_does_not_change_the_result() -> None:
    a, b = _pairs()["photo"]
    want = skimage_ssim(a, b)
    for rows in (1, 2, 7, 64, 100, 500):  # band edges move; each band picks its own offsets
        total, count = ssim_sum(a, b, band_rows=rows)
        assert count == (a.shape[0] - 10) * (a.shape[1] - 10) * 3
        assert total / count == pytest.approx(want, abs=1e-6)


def test_partly_identical_frames_use_the_shortcut_and_stay_exact() -> None:
    a, b = _pairs()["photo"]
    b = b.copy()
    b[:120] = a[:120]  # top bands identical (skipped), bottom bands computed
    assert ssim(a, b) == pytest.approx(skimage_ssim(a, b), abs=1e-6)


def test_workspace_reuse_across_sizes() -> None:
    pairs = _pairs()
    ws = Workspace(96, 3)
    a, b = pairs["random"]
    assert ssim(a, b, ws=ws) == pytest.approx(skimage_ssim(a, b), abs=1e-6)
    a, b = pairs["photo"]  # different width: a fresh workspace is made
    assert ssim(a, b, ws=ws) == pytest.approx(skimage_ssim(a, b), abs=1e-6)
    a, b = pairs["tall-several-bands"]  # same width, taller: the row buffer grows
    ws = Workspace(a.shape[1], 3)
    assert ssim(a, b, ws=ws) == pytest.approx(skimage_ssim(a, b), abs=1e-6)
    assert ssim(*pairs["photo"], ws=ws) == pytest.approx(skimage_ssim(*pairs["photo"]), abs=1e-6)


def test_non_contiguous_views_are_accepted() -> None:
    a, b = _pairs()["photo"]
    va, vb = a[::2, ::3], b[::2, ::3]  # strided views, as a crop or a padded decoder row gives
    assert ssim(va, vb) == pytest.approx(skimage_ssim(va, vb), abs=1e-6)


def test_kernel_is_scipy_gaussian() -> None:
    k = gaussian_kernel()
    assert k.shape == (11,) and k.sum() == pytest.approx(1.0, abs=1e-15)
    assert k[5] / k[0] == pytest.approx(np.exp(25 / (2 * 1.5**2)))


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        (np.zeros((10, 20, 3), np.uint8), np.zeros((10, 20, 3), np.uint8), "at least 11x11"),
        (np.zeros((20, 20, 3), np.uint8), np.zeros((20, 21, 3), np.uint8), "equal shapes"),
        (np.zeros((20, 20, 3), np.float32), np.zeros((20, 20, 3), np.float32), "uint8"),
    ],
)
def test_bad_input(a: np.ndarray, b: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ssim(a, b)

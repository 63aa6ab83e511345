from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio

from harness.collect.ssim import PairReducer, sse_torch, ssim_sse
from harness.metrics.metric import psnr_from_mse


def _pair(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (33, 47, 3), np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-9, 10, a.shape), 0, 255).astype(np.uint8)
    return a, b


def _sse(a: np.ndarray, b: np.ndarray) -> int:
    """The suite's exact SSE on a CPU (the compiled kernel's, beside its SSIM)."""
    return ssim_sse(a, b)[2]


def test_mse_psnr_match_numpy_and_skimage() -> None:
    a, b = _pair()
    want_mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    assert _sse(a, b) == int(np.sum((a.astype(np.int64) - b.astype(np.int64)) ** 2))  # exact
    assert _sse(a, b) / a.size == pytest.approx(want_mse, rel=1e-15)
    psnr = psnr_from_mse(_sse(a, b) / a.size)
    assert psnr == pytest.approx(peak_signal_noise_ratio(a, b, data_range=255), abs=1e-10)


def test_identical_is_inf_and_psnr_formula() -> None:
    a, _ = _pair()
    assert psnr_from_mse(_sse(a, a.copy()) / a.size) == math.inf
    assert psnr_from_mse(0.0) == math.inf
    assert psnr_from_mse(255.0**2) == 0.0
    assert psnr_from_mse(1.0) == pytest.approx(20 * math.log10(255))


def test_sse_torch_is_exact() -> None:
    pairs = [_pair(s) for s in range(3)]
    a = torch.from_numpy(np.stack([p[0] for p in pairs]))
    b = torch.from_numpy(np.stack([p[1] for p in pairs]))
    want = [int(np.sum((x.astype(np.int64) - y.astype(np.int64)) ** 2)) for x, y in pairs]
    assert sse_torch(a, b).tolist() == want == [_sse(x, y) for x, y in pairs]


def test_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="shape"):
        _sse(np.zeros((12, 12, 3), np.uint8), np.zeros((12, 13, 3), np.uint8))


def test_reducer_mean_min_and_csv(tmp_path: Path) -> None:
    r = PairReducer()
    values = [(0, 4.0, 0.91), (1, 0.0, 1.0), (2, 16.0, 0.80), (3, 16.0, 0.80), (4, 1.0, 0.95)]
    for i, m, s in values:
        r.add(i, m, s)
    res = r.result()
    psnrs = [psnr_from_mse(m) for _, m, _ in values]
    assert res["psnr_mean"] == math.inf  # one identical frame
    finite = [p for p in psnrs if not math.isinf(p)]
    assert res["psnr_mean_finite"] == pytest.approx(sum(finite) / len(finite))
    assert (
        res["psnr_min"] == pytest.approx(psnr_from_mse(16.0)) and res["psnr_min_frame"] == 2
    )  # first of the ties
    assert res["ssim_min"] == 0.80 and res["ssim_min_frame"] == 2
    assert res["ssim_mean"] == pytest.approx(np.mean([s for *_, s in values]))
    assert res["mse_mean"] == pytest.approx(37.0 / 5)
    assert res["psnr_pooled"] == pytest.approx(psnr_from_mse(37.0 / 5))
    assert res["identical_frames"] == 1

    out = tmp_path / "pf.csv"
    r.write_csv(out)
    rows = list(csv.DictReader(out.open()))
    assert [int(x["frame"]) for x in rows] == [0, 1, 2, 3, 4]
    assert rows[1]["psnr"] == "inf" and float(rows[1]["ssim"]) == 1.0
    assert float(rows[2]["mse"]) == 16.0 and float(rows[0]["psnr"]) == pytest.approx(psnrs[0])
    assert [p.name for p in tmp_path.iterdir()] == ["pf.csv"]


def test_reducer_all_identical() -> None:
    r = PairReducer()
    for i in range(3):
        r.add(i, 0.0, 1.0)
    res = r.result()
    assert res["psnr_mean"] == math.inf and res["psnr_mean_finite"] is None
    assert res["ssim_mean"] == 1.0 and res["identical_frames"] == 3

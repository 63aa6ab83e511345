from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from collect_testutil import luma

from harness.collect.stats import StatsReducer, frame_stats, frame_stats_torch


def _frames(n: int = 4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (29, 41, 3), np.uint8)
    out = [np.roll(base, 2 * t, axis=1) for t in range(n)]
    return np.stack(out)


def _numpy_luma(f: np.ndarray) -> np.ndarray:
    r, g, b = (f[..., i].astype(np.int64) for i in range(3))
    return ((9798 * r + 19235 * g + 3735 * b + 16384) >> 15).astype(np.uint8)


def _numpy_laplacian_var(y: np.ndarray) -> float:
    z = y.astype(np.float64)
    lap = z[:-2, 1:-1] + z[2:, 1:-1] + z[1:-1, :-2] + z[1:-1, 2:] - 4 * z[1:-1, 1:-1]
    return float(lap.var())


def test_luma_is_bt601_rounded() -> None:
    f = _frames(1)[0]
    y = luma(f)
    assert np.array_equal(y, _numpy_luma(f))
    exact = 0.299 * f[..., 0] + 0.587 * f[..., 1] + 0.114 * f[..., 2]
    assert np.abs(y - exact).max() <= 0.5 + 1e-3  # rounding of the BT.601 float formula


def test_frame_stats_and_motion() -> None:
    f = _frames(2)
    st0 = frame_stats(f[0])
    st1 = frame_stats(f[1], f[0])
    y = _numpy_luma(f[0]).astype(np.float64)
    assert st0.y_sum == y.sum() and st0.y_sumsq == (y * y).sum() and st0.pixels == y.size
    assert st0.diff_l1 is None and not st0.frozen
    assert st1.diff_l1 == float(np.abs(f[1].astype(int) - f[0].astype(int)).sum())
    assert st0.extreme_values == int(np.isin(f[0], (0, 255)).sum())
    assert frame_stats(f[0], f[0].copy()).frozen


def test_reducer_totals_and_failure_counts() -> None:
    rng = np.random.default_rng(3)
    good = rng.integers(30, 220, (24, 32, 3), np.uint8)
    frames = [
        good,
        good.copy(),  # frozen
        np.zeros((24, 32, 3), np.uint8),  # black + flat
        np.full((24, 32, 3), (255, 0, 255), np.uint8),  # saturated (flat too)
        np.where(rng.random((24, 32, 3)) < 0.5, 0, 255).astype(np.uint8),  # saturated noise, not flat
        np.full((24, 32, 3), 128, np.uint8),  # flat grey
    ]
    r = StatsReducer()
    prev = None
    for f in frames:
        r.push(f, prev)
        prev = f
    res = r.result()
    ys = np.stack([_numpy_luma(f) for f in frames]).astype(np.float64)
    assert res["frames"] == 6
    assert res["luma_mean"] == pytest.approx(ys.mean(), rel=1e-12)
    assert res["luma_std"] == pytest.approx(ys.std(), rel=1e-9)
    assert res["sharpness"] == pytest.approx(np.mean([_numpy_laplacian_var(y) for y in ys.astype(np.uint8)]))
    diffs = [np.abs(frames[t].astype(int) - frames[t - 1].astype(int)).mean() for t in range(1, 6)]
    assert res["motion"] == pytest.approx(np.mean(diffs), rel=1e-12)
    assert res["black_frames"] == 1
    assert res["frozen_frames"] == 1
    assert res["nan_like_frames"] == 4
    assert res["video_hash"] == hashlib.sha256(b"".join(f.tobytes() for f in frames)).hexdigest()


def test_single_frame_has_undefined_motion() -> None:
    r = StatsReducer()
    r.push(_frames(1)[0], None)
    assert r.result()["motion"] is None and r.result()["frozen_frames"] == 0  # no pair of frames: no motion


@pytest.mark.parametrize("with_prev", [False, True])
def test_torch_stats_equal_cpu_exactly(with_prev: bool) -> None:
    f = _frames(5)
    f[3] = f[2]  # a frozen frame inside the batch
    prev = np.roll(f[0], 5, axis=0) if with_prev else None
    got = frame_stats_torch(torch.from_numpy(f), torch.from_numpy(prev) if with_prev else None)
    want = []
    p = prev
    for x in f:
        want.append(frame_stats(x, p))
        p = x
    assert got == want


def _numpy_stats(f: np.ndarray, prev: np.ndarray | None) -> dict:
    """Every FrameStats field from plain integer numpy: the independent check of the kernel."""
    y = _numpy_luma(f).astype(np.int64)
    out = {
        "pixels": y.size,
        "y_sum": float(y.sum()),
        "y_sumsq": float((y * y).sum()),
        "lap_var": _numpy_laplacian_var(y) if min(y.shape) >= 3 else 0.0,
        "extreme_values": int(np.isin(f, (0, 255)).sum()),
        "diff_l1": None if prev is None else float(np.abs(f.astype(np.int64) - prev).sum()),
    }
    out["frozen"] = out["diff_l1"] == 0.0
    return out


@pytest.mark.parametrize("shape", [(1, 1), (2, 5), (3, 3), (29, 41), (120, 333), (240, 1031)])
def test_kernel_equals_numpy_on_every_field(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[1])
    prev = rng.integers(0, 256, (*shape, 3), np.uint8)
    f = np.clip(prev.astype(int) + rng.integers(-40, 41, prev.shape), 0, 255).astype(np.uint8)
    f[: shape[0] // 2, : shape[1] // 3] = 255  # some saturation
    for p in (None, prev):
        st = frame_stats(f, p)
        want = _numpy_stats(f, p)
        got = {k: getattr(st, k) for k in want}
        assert got == pytest.approx(want, rel=1e-12, abs=0)
    assert frame_stats(f[:, ::2], prev[:, ::2]) == frame_stats(f[:, ::2].copy(), prev[:, ::2].copy())


def test_bad_frames_are_rejected() -> None:
    f = _frames(1)[0]
    with pytest.raises(ValueError, match="uint8 HxWx3"):
        frame_stats(f[..., 0])
    with pytest.raises(ValueError, match="does not match"):
        frame_stats(f, f[1:])

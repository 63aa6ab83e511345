"""Frozen, black and flat frames with their indices, and the coarse layout of a pair (collect.layout),
measured by the suite on real mp4s (64x48, 12 frames) and checked against plain numpy."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from collect_testutil import grid_means, luma, luma_grid, make_video, scene

from harness.collect.layout import SCALES, TRACK, LayoutPair, scales_for
from harness.collect.models import RunStats
from harness.collect.stats import FIRST_FRAMES, StatsReducer, frame_stats, frame_stats_torch
from harness.collect.suite import measure_pair, measure_run
from harness.media import iter_frames

N, H, W = 12, 48, 64


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("structure")
    ref = scene(N, H, W)
    frozen = ref.copy()
    frozen[6] = frozen[5]  # one frozen frame
    broken = ref.copy()
    broken[3] = 0  # black (and flat)
    broken[8] = (90, 140, 200)  # flat, not black: a NaN output decoded to one colour
    crf = {"crf": 0}  # lossless H.264: the frozen frame decodes bitwise equal to the one before
    return {
        "ref": make_video(d / "ref.mp4", ref, **crf),
        "frozen": make_video(d / "frozen.mp4", frozen, **crf),
        "broken": make_video(d / "broken.mp4", broken, **crf),
        "mirror": make_video(d / "mirror.mp4", ref[:, :, ::-1], **crf),
        "noisy": make_video(d / "noisy.mp4", scene(N, H, W, noise=20.0, seed=4)),
    }


@pytest.mark.parametrize("device", ["cpu", "torch:cpu"])
def test_frozen_black_and_flat_frames_with_their_indices(runs: dict[str, Path], device: str) -> None:
    res = measure_pair(runs["ref"], runs["frozen"], device=device)
    assert (res.stats_a.frozen_frames, res.stats_a.frozen_first) == (0, [])
    assert (res.stats_b.frozen_frames, res.stats_b.frozen_first) == (1, [6])
    st = measure_pair(runs["ref"], runs["broken"], device=device).stats_b
    assert (st.blank_frames, st.blank_first) == (1, [3])
    assert (st.flat_frames, st.flat_first) == (2, [3, 8])
    assert (st.black_frames, st.black_first) == (1, [3])
    assert st.nan_like_first == [3, 8] and st.frozen_frames == 0
    assert measure_run(runs["broken"], device=device) == measure_run(runs["broken"]).model_copy(
        update={"file": str(runs["broken"])}
    )


def test_reducer_keeps_only_the_first_indices() -> None:
    r = StatsReducer()
    black = np.zeros((20, 20, 3), np.uint8)
    for i in range(FIRST_FRAMES + 4):
        r.push(black, black if i else None)
    res = r.result()
    assert res["blank_frames"] == FIRST_FRAMES + 4 and res["blank_first"] == list(range(FIRST_FRAMES))
    assert res["frozen_frames"] == FIRST_FRAMES + 3 and res["frozen_first"] == list(
        range(1, FIRST_FRAMES + 1)
    )


def test_dark_frame_with_a_light_is_not_blank() -> None:
    f = np.full((24, 32, 3), 4, np.uint8)
    f[3, 5] = 200  # mean Y < 10 (black by the mean), yet not blank (max Y > 16)
    r = StatsReducer()
    r.push(f, None)
    assert (r.result()["black_frames"], r.result()["blank_frames"], r.result()["flat_frames"]) == (1, 0, 0)


@pytest.mark.parametrize("shape", [(1, 1), (15, 17), (48, 64), (29, 41), (240, 1031)])
def test_kernel_grid_and_max_equal_numpy_and_torch(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[0])
    f = rng.integers(0, 256, (*shape, 3), np.uint8)
    st = frame_stats(f)
    y = luma(f)
    assert st.y_max == int(y.max())
    sums = np.array(st.grid).reshape(16, 16)
    assert sums.sum() == y.astype(np.int64).sum()
    for s in scales_for(*shape):
        assert np.allclose(grid_means(sums, *shape, s), luma_grid(y, s), rtol=1e-12, atol=0)
    assert frame_stats_torch(torch.from_numpy(f[None]), None) == [st]


def test_grid_is_the_block_mean_when_sizes_divide() -> None:
    y = np.random.default_rng(1).integers(0, 256, (48, 64)).astype(np.uint8)
    for s in SCALES:
        block = y.reshape(s, 48 // s, s, 64 // s).mean(axis=(1, 3))
        assert np.allclose(luma_grid(y, s), block, rtol=1e-12)
    assert scales_for(6, 100) == (4,) and scales_for(3, 100) == ()


def _numpy_layout(a: Path, b: Path, scale: int) -> tuple[float, float, float, float, float]:
    terms = []
    for fa, fb in zip(iter_frames(a), iter_frames(b), strict=True):
        ga, gb = luma_grid(luma(fa), scale), luma_grid(luma(fb), scale)
        terms.append(
            (
                np.mean((gb - ga) ** 2),
                np.mean((gb - np.fliplr(ga)) ** 2),
                np.mean((gb - np.flipud(ga)) ** 2),
                ga.var(),
                gb.var(),
            )
        )
    return tuple(float(x) for x in np.mean(terms, axis=0))  # type: ignore[return-value]


def test_layout_of_a_pair_equals_numpy(runs: dict[str, Path]) -> None:
    """(The torch path's layout equals this one's exactly: test_suite's torch:cpu comparison.)"""
    device = "cpu"
    for other in ("noisy", "mirror"):
        v = measure_pair(runs["ref"], runs[other], device=device).video
        assert sorted(v.layout_mse) == list(SCALES)
        for s in SCALES:
            got = (v.layout_mse[s], v.layout_mirror_lr_mse[s], v.layout_mirror_ud_mse[s],
                   v.layout_var_a[s], v.layout_var_b[s])  # fmt: skip
            assert got == pytest.approx(_numpy_layout(runs["ref"], runs[other], s), rel=1e-9)
    mirror = measure_pair(runs["ref"], runs["mirror"], device=device).video
    for s in SCALES:
        assert mirror.layout_mirror_lr_mse[s] < 0.05 * mirror.layout_mse[s]  # B is A's mirror
    same = measure_pair(runs["ref"], runs["ref"], device=device).video
    assert all(same.layout_mse[s] == 0.0 and same.layout_var_a[s] > 100 for s in SCALES)


def test_layout_pair_is_independent_of_delivery_order() -> None:
    rng = np.random.default_rng(5)
    grids = [(rng.integers(0, 255 * 12, 256), rng.integers(0, 255 * 12, 256)) for _ in range(6)]
    results = []
    for order in (range(6), reversed(range(6))):
        lp = LayoutPair(H, W)
        for i in order:
            lp.add(1, i, grids[i][1])
            lp.add(0, i, grids[i][0])
        results.append(lp.result())
        assert lp.frames == 6
    assert results[0] == results[1]
    assert LayoutPair(H, W).result()["layout_mse"] == {}
    assert math.isfinite(results[0]["layout_var_b"][16])


@pytest.mark.parametrize("shape", [(3, 40), (29, 41), (48, 64)])
def test_track_is_the_cells_ycbcr_means_on_both_paths(shape: tuple[int, int]) -> None:
    """Y, Cb, Cr of each 4x4 layout cell's RGB mean (unequal cells where 4 does not divide), per frame."""
    h, w = shape
    frames = np.random.default_rng(h).integers(0, 256, (3, h, w, 3), np.uint8)
    r = StatsReducer()
    for i, f in enumerate(frames):
        r.push(f, frames[i - 1] if i else None)
    track = r.result()["track"]
    if h < TRACK:
        assert track is None and frame_stats(frames[0]).track == ()
        return
    rows, cols = (np.arange(n) * TRACK // n for n in (h, w))  # cell floor(4 r / H), as the layout's
    to_ycc = np.array([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]])
    for i, f in enumerate(frames):
        ycc = f.astype(np.float64) @ to_ycc.T + (0, 128, 128)
        want = [[ycc[rows == a][:, cols == b][..., k].mean() for a in range(TRACK) for b in range(TRACK)]
                for k in range(3)]  # fmt: skip
        assert np.allclose([track.y[i], track.cb[i], track.cr[i]], want, atol=6e-4, rtol=0)
    got = frame_stats_torch(torch.from_numpy(frames), None)
    assert [g.track for g in got] == [frame_stats(f).track for f in frames]


def test_measured_runs_carry_their_track(runs: dict[str, Path]) -> None:
    stats = measure_run(runs["ref"])
    assert stats.track is not None and len(stats.track.y) == stats.frames == len(stats.track.cr)
    assert RunStats.model_validate_json(stats.model_dump_json()).track == stats.track

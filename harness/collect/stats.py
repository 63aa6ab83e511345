"""Global statistics of one run's video: luma, sharpness, motion and failure-mode counts
(``models.STATS_CONVENTION``), in exact integer sums of OpenCV's BT.601 luma, so the GPU path matches
the CPU path bit for bit. A blank frame (max Y <= 16) is stricter than a black one (mean Y < 10).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from harness.collect.layout import (
    GRID,
    TRACK,
    LayoutPair,
    cell_rows,
    cell_starts,
    rgb_cell_sums,
    track_cells,
    track_of,
)

if TYPE_CHECKING:
    import torch

BLACK_Y_MEAN = 10.0
BLANK_Y_MAX = 16
FLAT_Y_STD = 1.0
FIRST_FRAMES = 8  # frame indices kept per failure kind
SATURATED_FRACTION = 0.95
# cv2's fixed-point BT.601 weights (sum 2^15), applied with rounding: (9798 R + 19235 G + 3735 B + 2^14) >> 15.
Y_WEIGHTS = (9798, 19235, 3735)
Y_SHIFT = 15


@dataclass(frozen=True)
class FrameStats:
    """Exact integer sums for one frame (floats hold them exactly below 2^53)."""

    pixels: int
    y_sum: float
    y_sumsq: float
    lap_var: float
    extreme_values: int  # RGB values equal to 0 or 255
    diff_l1: float | None  # sum |F(t) - F(t-1)| over RGB, None for the first frame
    frozen: bool
    y_max: int = 0
    grid: tuple[int, ...] = ()  # Y sums over GRID x GRID cells, row-major (collect.layout)
    track: tuple[float, ...] = ()  # Y, Cb, Cr of the TRACK x TRACK cells (collect.layout.track_cells)


def _var(s: float, ss: float, n: int) -> float:
    """Population variance from exact sums (shared by the CPU and GPU paths)."""
    return max(ss / n - (s / n) ** 2, 0.0)


def frame_stats(frame: np.ndarray, prev: np.ndarray | None = None) -> FrameStats:
    """Sums for one uint8 RGB frame (``prev``: the frame before it), exact: ``jit.frame_sums``."""
    from harness.collect import jit

    f = np.ascontiguousarray(frame)
    if f.dtype != np.uint8 or f.ndim != 3 or f.shape[2] != 3:
        raise ValueError(f"statistics need uint8 HxWx3 RGB frames, got {f.dtype} {f.shape}")
    p = f if prev is None else np.ascontiguousarray(prev)  # f itself passes the check below
    if p.shape != f.shape or p.dtype != np.uint8:
        raise ValueError(f"previous frame {p.dtype} {p.shape} does not match {f.shape}")
    h, w = f.shape[:2]
    grid = np.zeros((GRID, GRID), np.int64)
    y_sum, y_sumsq, lap_s, lap_ss, extreme, diff, y_max = jit.frame_sums(
        f,
        p,
        prev is not None,
        np.empty((3, w), np.int32),
        cell_rows(h),
        cell_starts(w),
        grid,
        np.empty(w, np.int32),
    )
    lap_var = _var(float(lap_s), float(lap_ss), (h - 2) * (w - 2)) if h >= 3 and w >= 3 else 0.0
    return FrameStats(
        pixels=h * w,
        y_sum=float(y_sum),
        y_sumsq=float(y_sumsq),
        lap_var=lap_var,
        extreme_values=int(extreme),
        diff_l1=float(diff) if prev is not None else None,
        frozen=prev is not None and diff == 0,
        y_max=int(y_max),
        grid=tuple(grid.ravel().tolist()),
        track=() if (cells := rgb_cell_sums(f)) is None else track_cells(cells, h, w),
    )


COUNTS = ("black", "frozen", "nan_like", "blank", "flat")  # failure kinds counted, with first indices


class StatsReducer:
    """Accumulates one run's FrameStats in order and the sha256 of its frames; hands grid sums to a layout."""

    def __init__(self) -> None:
        self.frames = 0
        self.pixels = 0
        self.y_sum = 0.0
        self.y_sumsq = 0.0
        self.lap_sum = 0.0
        self.diff_sum = 0.0
        self.diff_frames = 0
        self.counts = dict.fromkeys(COUNTS, 0)
        self.first: dict[str, list[int]] = {k: [] for k in COUNTS}
        self.layout: LayoutPair | None = None
        self.track: list[tuple[float, ...]] = []
        self.side = 0
        self._hash = hashlib.sha256()

    def update_hash(self, frame: np.ndarray) -> None:
        self._hash.update(np.ascontiguousarray(frame).data)

    def add(self, st: FrameStats, values_per_frame: int) -> None:
        index = self.frames
        self.frames += 1
        self.pixels += st.pixels
        self.y_sum += st.y_sum
        self.y_sumsq += st.y_sumsq
        self.lap_sum += st.lap_var
        if st.diff_l1 is not None:
            self.diff_sum += st.diff_l1 / values_per_frame
            self.diff_frames += 1
        mean = st.y_sum / st.pixels
        std = math.sqrt(max(st.y_sumsq / st.pixels - mean * mean, 0.0))
        flat = std < FLAT_Y_STD
        hits = {
            "black": mean < BLACK_Y_MEAN,
            "frozen": st.frozen,
            "nan_like": flat or st.extreme_values >= SATURATED_FRACTION * values_per_frame,
            "blank": st.y_max <= BLANK_Y_MAX,
            "flat": flat,
        }
        for kind, hit in hits.items():
            if hit:
                self.counts[kind] += 1
                if len(self.first[kind]) < FIRST_FRAMES:
                    self.first[kind].append(index)
        self.track.append(st.track)
        if self.layout is not None and st.grid:
            self.layout.add(self.side, index, np.array(st.grid, np.int64))

    def push(self, frame: np.ndarray, prev: np.ndarray | None) -> None:
        self.update_hash(frame)
        self.add(frame_stats(frame, prev), frame.size)

    def result(self) -> dict:
        n = max(self.pixels, 1)
        mean = self.y_sum / n
        return {
            "frames": self.frames,
            "luma_mean": mean,
            "luma_std": math.sqrt(max(self.y_sumsq / n - mean * mean, 0.0)),
            "sharpness": self.lap_sum / max(self.frames, 1),
            "motion": self.diff_sum / self.diff_frames if self.diff_frames else None,
            **{f"{kind}_frames": self.counts[kind] for kind in COUNTS},
            **{f"{kind}_first": list(self.first[kind]) for kind in COUNTS},
            "video_hash": self._hash.hexdigest(),
            "track": track_of(self.track),
        }


def frame_stats_torch(frames: torch.Tensor, prev: torch.Tensor | None) -> list[FrameStats]:
    """FrameStats of a uint8 batch [N, H, W, 3] on any device, in integers: equal to the CPU kernel's."""
    import torch

    x = frames.to(torch.int32)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    y = (r * Y_WEIGHTS[0] + g * Y_WEIGHTS[1] + b * Y_WEIGHTS[2] + (1 << (Y_SHIFT - 1))) >> Y_SHIFT
    n, h, w = y.shape
    y64 = y.to(torch.int64)
    y_sum = y64.sum(dim=(1, 2))
    y_sumsq = (y64 * y64).sum(dim=(1, 2))
    y_max = y.amax(dim=(1, 2))
    # Y sums over GRID x GRID cells: R^T Y C with 0/1 cell-membership matrices (the kernel's cells) in
    # float64, exact since every partial sum is an integer far below 2^53 (in any order, on any device)
    r, c = (
        torch.nn.functional.one_hot(torch.from_numpy(cell_rows(k).copy()), GRID).to(y64.device, torch.float64)
        for k in (h, w)
    )
    grid = (r.T @ y64.to(torch.float64) @ c).to(torch.int64).reshape(n, GRID * GRID)
    track: list[tuple[float, ...]] = [()] * n
    if h >= TRACK and w >= TRACK:  # the track's RGB cell sums, exact in float64 as the grid's
        r4, c4 = (m.reshape(len(m), TRACK, GRID // TRACK).sum(dim=2) for m in (r, c))  # cell // 4
        rgb = torch.stack([r4.T @ x[..., k].to(torch.float64) @ c4 for k in range(3)], dim=-1)
        rgb = rgb.to(torch.int64).cpu().numpy()
        track = [track_cells(rgb[i], h, w) for i in range(n)]
    if h >= 3 and w >= 3:
        # Shifted integer sums: exact, and no convolution algorithm (or TF32) involved.
        lap = (y[:, :-2, 1:-1] + y[:, 2:, 1:-1] + y[:, 1:-1, :-2] + y[:, 1:-1, 2:] - 4 * y[:, 1:-1, 1:-1]).to(
            torch.int64
        )
        m = lap.shape[1] * lap.shape[2]
        lap_sums = list(zip(lap.sum(dim=(1, 2)).tolist(), (lap * lap).sum(dim=(1, 2)).tolist(), strict=True))
        lap_var = [_var(float(s), float(ss), m) for s, ss in lap_sums]
    else:
        lap_var = [0.0] * n
    extreme = ((frames == 0) | (frames == 255)).flatten(1).sum(dim=1)
    if prev is None:
        cur, prevs, offset = frames[1:], frames[:-1], 1
    else:
        cur, prevs, offset = frames, torch.cat([prev[None], frames[:-1]]), 0
    diffs = (cur.to(torch.int32) - prevs.to(torch.int32)).abs().flatten(1).sum(dim=1)
    sums, sumsqs, extremes, diff_list, maxima, grids = (
        t.tolist() for t in (y_sum, y_sumsq, extreme, diffs, y_max, grid)
    )
    diff = [float(diff_list[i - offset]) if i >= offset else None for i in range(n)]
    return [
        FrameStats(
            pixels=h * w,
            y_sum=float(sums[i]),
            y_sumsq=float(sumsqs[i]),
            lap_var=lap_var[i],
            extreme_values=int(extremes[i]),
            diff_l1=diff[i],
            frozen=diff[i] == 0.0,
            y_max=int(maxima[i]),
            grid=tuple(grids[i]),
            track=track[i],
        )
        for i in range(n)
    ]

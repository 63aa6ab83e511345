"""Coarse layout of a run pair: low-resolution luma grids of A and B compared frame by frame, directly
and against A mirrored left-right and up-down (``LAYOUT_CONVENTION``). The 16 x 16 cell sums come exact
from the statistics kernel, the coarser scales add its blocks; the means over frames are ``math.fsum``'s.
A mirrored B has mirror_lr ~ 0 while mse is about 2 var_a; a shared layout has mse well under var_a.
A run's ``FrameTrack`` keeps its TRACK x TRACK cells' Y, Cb and Cr per frame: colour and time order.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from harness.records import Record

GRID = 16  # the finest scale; the kernel sums Y over GRID x GRID cells
SCALES = (4, 8, 16)
FIELDS = ("layout_mse", "layout_mirror_lr_mse", "layout_mirror_ud_mse", "layout_var_a", "layout_var_b")
LAYOUT_CONVENTION = (
    "layout=Y (bt601) area means over SxS cells (row r in cell floor(rS/H), column x in floor(xS/W)), "
    "S=4,8,16 (S<=H,W); per frame mse=mean(b-a)^2, mirror_lr=mean(b-fliplr a)^2, mirror_ud=mean(b-flipud a)^2, "
    "var=population variance of a grid's cells; pair value=mean over frames; A=reference"
)

TRACK = 4  # the per-frame track's grid: the layout's 4 x 4 cells (floor(r 4 / H) = floor(r 16 / H) // 4)
TRACK_CONVENTION = (
    "track=per frame, Y Cb Cr of the 4x4 layout cells' RGB means (BT.601 full range: Y=.299R+.587G+.114B, "
    "Cb=128-.168736R-.331264G+.5B, Cr=128+.5R-.418688G-.081312B), row-major, rounded to 1e-3"
)
# Rows of (R, G, B) -> (Y, Cb, Cr), with 128 added to Cb and Cr.
YCC = np.array([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]])


class FrameTrack(Record):
    """One run's coarse colour per frame (``TRACK_CONVENTION``): what colour and time order are judged on."""

    convention: str = TRACK_CONVENTION
    y: list[list[float]]  # per frame, TRACK * TRACK cell means
    cb: list[list[float]]
    cr: list[list[float]]


def track_cells(rgb_sums: np.ndarray, h: int, w: int) -> tuple[float, ...]:
    """(Y..., Cb..., Cr...) of one frame's [TRACK, TRACK, 3] integer RGB cell sums, as the track keeps them."""
    counts = grid_counts(h, w, TRACK)
    ycc = (rgb_sums.astype(np.float64) / counts[..., None]) @ YCC.T + np.array([0.0, 128.0, 128.0])
    return tuple(np.round(ycc.reshape(-1, 3).T.ravel(), 3).tolist())


def rgb_cell_sums(frame: np.ndarray) -> np.ndarray | None:
    """[TRACK, TRACK, 3] int64 RGB sums of a uint8 HxWx3 frame's track cells (None: under TRACK pixels)."""
    h, w = frame.shape[:2]
    if h < TRACK or w < TRACK:
        return None
    # columns first (in int32), then rows: the fastest order
    cols = np.add.reduceat(frame, cell_starts(w, TRACK)[:-1], axis=1, dtype=np.int32)
    return np.add.reduceat(cols, cell_starts(h, TRACK)[:-1], axis=0, dtype=np.int64)


def track_of(cells: list[tuple[float, ...]]) -> FrameTrack | None:
    """A run's track from its frames' ``track_cells`` (None: a frame had none)."""
    k = TRACK * TRACK
    if not cells or any(len(c) != 3 * k for c in cells):
        return None
    return FrameTrack(
        **{name: [list(c[i * k : (i + 1) * k]) for c in cells] for i, name in enumerate(("y", "cb", "cr"))}
    )


@functools.lru_cache(maxsize=32)
def cell_rows(n: int, cells: int = GRID) -> np.ndarray:
    """The cell of each of n rows (or columns): floor(i cells / n)."""
    out = (np.arange(n, dtype=np.int64) * cells) // n
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=32)
def cell_starts(n: int, cells: int = GRID) -> np.ndarray:
    """The first index of each cell, then n: cell c covers [starts[c], starts[c + 1])."""
    out = (np.arange(cells + 1, dtype=np.int64) * n + cells - 1) // cells
    out.flags.writeable = False
    return out


def grid_counts(h: int, w: int, cells: int = GRID) -> np.ndarray:
    """Pixels per cell of the ``cells`` x ``cells`` grid of an h x w frame."""
    return np.outer(np.diff(cell_starts(h, cells)), np.diff(cell_starts(w, cells)))


def scales_for(h: int, w: int) -> tuple[int, ...]:
    return tuple(s for s in SCALES if h >= s and w >= s)


def coarsen(sums: np.ndarray, scale: int) -> np.ndarray:
    """[..., GRID, GRID] float64 cell sums added up into [..., scale, scale] (exact: integers below 2^53)."""
    # [scale, GRID] 0/1: which GRID cells make up each of the scale cells along one axis.
    p = (np.arange(GRID)[None, :] // (GRID // scale) == np.arange(scale)[:, None]).astype(np.float64)
    return p @ sums @ p.T


@functools.lru_cache(maxsize=8)
def mirror_index(scale: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each cell of a flattened scale x scale grid comes from, mirrored left-right and up-down."""
    cells = np.arange(scale * scale).reshape(scale, scale)
    return cells[:, ::-1].ravel(), cells[::-1, :].ravel()


def frame_terms(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[N, 5]: (mse, mirror_lr, mirror_ud, var_a, var_b) of N frames' grids [N, S, S] at one scale."""
    n, s = a.shape[0], a.shape[1]
    a2, b2 = a.reshape(n, s * s), b.reshape(n, s * s)
    lr, ud = mirror_index(s)
    d = b2 - np.stack([a2, a2[:, lr], a2[:, ud]])  # [3, N, S*S]
    ab = np.stack([a2, b2])
    c = ab - np.add.reduce(ab, axis=2, keepdims=True) / (s * s)
    return (np.concatenate([np.add.reduce(d * d, axis=2), np.add.reduce(c * c, axis=2)]) / (s * s)).T


class LayoutPair:
    """Pairs the two runs' per-frame grid sums (two threads, any order) and keeps each scale's per-frame
    terms until ``result``; blocks of ``BLOCK`` frame indices are reduced once complete, so the numbers
    never depend on the order in which the threads delivered the frames."""

    BLOCK = 32

    def __init__(self, h: int, w: int):
        self._counts = {s: coarsen(grid_counts(h, w).astype(np.float64), s) for s in scales_for(h, w)}
        self._pending: tuple[dict[int, np.ndarray], dict[int, np.ndarray]] = ({}, {})
        self._blocks: dict[int, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        self._terms: dict[int, list[np.ndarray]] = {s: [] for s in self._counts}
        self._lock = threading.Lock()
        self.frames = 0

    def add(self, side: int, index: int, sums: np.ndarray) -> None:
        """Frame ``index`` of side 0 (A) or 1 (B): its GRID x GRID int64 cell sums."""
        with self._lock:
            other = self._pending[1 - side].pop(index, None)
            if other is None:
                self._pending[side][index] = sums
                return
            block = self._blocks.setdefault(index // self.BLOCK, {})
            block[index] = (sums, other) if side == 0 else (other, sums)
            if len(block) < self.BLOCK:
                return
            del self._blocks[index // self.BLOCK]
        self._reduce(block)

    def _reduce(self, block: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        order = sorted(block)
        a = np.stack([block[i][0] for i in order]).astype(np.float64).reshape(-1, GRID, GRID)
        b = np.stack([block[i][1] for i in order]).astype(np.float64).reshape(-1, GRID, GRID)
        terms = {s: frame_terms(coarsen(a, s) / n, coarsen(b, s) / n) for s, n in self._counts.items()}
        with self._lock:
            self.frames += len(order)
            for s, t in terms.items():
                self._terms[s].append(t)

    def result(self) -> dict[str, dict[int, float]]:
        """The pair's fields (``FIELDS``), each scale -> mean over the frames paired; empty when none."""
        with self._lock:
            rest = list(self._blocks.values())
            self._blocks.clear()
        for block in rest:  # the last, incomplete block
            self._reduce(block)
        out: dict[str, dict[int, float]] = {f: {} for f in FIELDS}
        for s, parts in self._terms.items():
            if not parts:
                continue
            rows = np.concatenate(parts)
            for k, name in enumerate(FIELDS):
                out[name][s] = math.fsum(rows[:, k].tolist()) / len(rows)
        return out

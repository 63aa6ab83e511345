"""Small synthetic videos and audio for the collector tests (fast: a few frames of 64x96)."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np

from harness.collect.audio import (
    MelFrames,
    _cosine,
    _snr,
    _sums,
    lag_search,
    mel_figures,
    mel_power,
)
from harness.collect.layout import GRID, cell_rows, coarsen, grid_counts
from harness.collect.ssim import BAND_ROWS, ssim_sse
from harness.media import write_av

H, W, FPS, RATE = 64, 96, 24, 32000


def scene(n: int = 10, h: int = H, w: int = W, *, seed: int = 0, noise: float = 0.0) -> np.ndarray:
    """Gradient background with texture and a moving block; ``noise`` adds Gaussian noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    tex = np.random.default_rng(123).normal(0, 12, (h, w, 3)).astype(np.float32)
    out = np.empty((n, h, w, 3), np.uint8)
    for t in range(n):
        f = (
            np.stack([xx * 200 / w + 20, yy * 180 / h + 30, 120 + 40 * np.sin((xx + 3 * t) / 9)], axis=-1)
            + tex
        )
        x0 = 4 + 5 * t % max(w - 20, 1)
        f[h // 4 : h // 4 + 16, x0 : x0 + 16] = (230, 60, 40)
        if noise:
            f = f + rng.normal(0, noise, f.shape)
        out[t] = np.clip(np.rint(f), 0, 255).astype(np.uint8)
    return out


def tone(n_frames: int, *, rate: int = RATE, fps: int = FPS, seed: int = 0, noise: float = 0.0) -> np.ndarray:
    """Stereo test signal: two chirps and broadband noise (like music/voice, not a pure sine)."""
    n = int(round(n_frames / fps * rate))
    t = np.arange(n) / rate
    rng = np.random.default_rng(seed)
    base = np.random.default_rng(99).normal(0, 0.05, (2, n))
    left = 0.3 * np.sin(2 * np.pi * (300 + 400 * t) * t)
    right = 0.2 * np.sin(2 * np.pi * (500 + 900 * t) * t)
    x = np.stack([left, right]) + base
    if noise:
        x = x + rng.normal(0, noise, x.shape)
    return np.clip(x, -1, 1).astype(np.float32)


def make_video(
    path: Path,
    frames: np.ndarray,
    audio: np.ndarray | None = None,
    *,
    fps: int = FPS,
    rate: int = RATE,
    crf: int = 18,
) -> Path:
    write_av(path, frames, audio, fps=fps, sample_rate=rate, crf=crf, preset="ultrafast")
    return path


def grid_means(sums: np.ndarray, h: int, w: int, scale: int) -> np.ndarray:
    """Mean Y per cell at ``scale`` from the GRID x GRID sums of an h x w frame."""
    sums = np.asarray(sums, np.float64).reshape(GRID, GRID)
    return coarsen(sums, scale) / coarsen(grid_counts(h, w).astype(np.float64), scale)


def luma_grid(y: np.ndarray, scale: int) -> np.ndarray:
    """Mean Y per cell from a whole luma frame: the slow yardstick of the kernel's grid sums."""
    h, w = y.shape
    sums = np.zeros((GRID, GRID), np.float64)
    np.add.at(sums, (cell_rows(h)[:, None], cell_rows(w)[None, :]), y.astype(np.float64))
    return grid_means(sums, h, w, scale)


# The whole-array forms of the metrics (the harness measures streams): yardsticks for the tests.


def snr_db(ref: np.ndarray, test: np.ndarray) -> float:
    signal, _, _, noise = _sums(ref, test)
    return _snr(signal, noise)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    aa, bb, ab, _ = _sums(a, b)
    return _cosine(aa, bb, ab)


def rms(x: np.ndarray) -> float:
    n = np.size(x)
    return math.sqrt(_sums(x)[0] / n) if n else 0.0


def peak(x: np.ndarray) -> float:
    return float(np.max(np.abs(x))) if np.size(x) else 0.0


def logmel_cosine(a: np.ndarray, b: np.ndarray, sample_rate: int) -> float:
    return mel_figures(*(MelFrames([mel_power(x, sample_rate)]) for x in (a, b)))[0]


def spectral_error(a: np.ndarray, b: np.ndarray, sample_rate: int) -> float:
    return mel_figures(*(MelFrames([mel_power(x, sample_rate)]) for x in (a, b)))[1]


def best_lag(a: np.ndarray, b: np.ndarray) -> int:
    """The residual lag of B against A (``lag_search``); 0 for silent or too-short tracks."""
    return lag_search(a, b)[0]


def ssim_sum(a: np.ndarray, b: np.ndarray, *, ws=None, band_rows: int = BAND_ROWS) -> tuple[float, int]:
    """Sum of the SSIM map over the valid region of all channels, and the number of terms."""
    total, count, _ = ssim_sse(a, b, ws=ws, band_rows=band_rows)
    return total, count


def ssim(a: np.ndarray, b: np.ndarray, *, ws=None) -> float:
    """Mean SSIM of two uint8 frames (HxW or HxWxC); exactly 1.0 for identical frames."""
    total, count = ssim_sum(a, b, ws=ws)
    return total / count


def luma(frame: np.ndarray) -> np.ndarray:
    """BT.601 Y (uint8) from a uint8 RGB frame, as OpenCV's RGB2GRAY computes it."""
    return cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)

"""SSIM in Wang et al. 2004's definition (``models.SSIM_CONVENTION``: scikit-image's, Gaussian weights),
on CPU (a compiled kernel that also gives the exact SSE) and on GPU (torch), in sums and differences:
with s = a + b - 255 and d = a - b, SSIM = (Ms^2 - Md^2 + 2 C1)(Vs - Vd + 2 C2) / ((Ms^2 + Md^2 + 2 C1)
(Vs + Vd + 2 C2)) (M local mean, V local variance): four blurred maps, and float32 is enough because
the rounding of Ms and Vs drops out of the ratio. Within 1.3e-7 of scikit-image's float64 result on
every pair the tests try; ``ssim_torch`` in float64 within ~1e-12. ``PairReducer`` reduces the frames'
MSE/PSNR (uint8 RGB, L = 255) and SSIM over a pair: ``psnr_mean`` is +inf once one frame is identical
(``psnr_mean_finite`` averages the others), ``psnr_pooled`` the PSNR of the mean MSE (ffmpeg's summary).
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.metrics.metric import psnr_from_mse
from harness.safe_write import atomic_write_text

if TYPE_CHECKING:
    import torch

WIN = 11
SIGMA = 1.5
PAD = WIN // 2
K1, K2, DATA_RANGE = 0.01, 0.03, 255.0
C1 = (K1 * DATA_RANGE) ** 2
C2 = (K2 * DATA_RANGE) ** 2
BAND_ROWS = 128  # output rows per band: each band has its own offsets and identity check


def gaussian_kernel(size: int = WIN, sigma: float = SIGMA) -> np.ndarray:
    """Normalised 1-D Gaussian taps (float64), as scipy.ndimage builds them."""
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    k = np.exp(-0.5 * (x / sigma) ** 2)
    return k / k.sum()


_KERNEL = gaussian_kernel()
# The kernel's float32 taps from the edge inwards; the centre tap is implied (1 - the rest),
# so the taps the CPU kernel uses sum to exactly 1.
_TAPS32 = np.ascontiguousarray(_KERNEL[:PAD].astype(np.float32))


class Workspace:
    """Scratch buffers of the CPU kernel for one thread (~0.5 MB at 1344x3), reused per frame."""

    def __init__(self, width: int, channels: int, band_rows: int = BAND_ROWS):
        self.key = (width, channels, band_rows)
        self.ring = np.empty((4, WIN + 1, width - 2 * PAD), np.float32)
        self.rows = np.empty((4, width), np.float32)
        self.pa = np.empty((channels, band_rows + 2 * PAD, width), np.uint8)
        self.pb = np.empty_like(self.pa)
        self.row_sse = np.empty(0, np.int64)  # grown to the frame's height on first use


def ssim_sse(
    a: np.ndarray,
    b: np.ndarray,
    *,
    ws: Workspace | None = None,
    band_rows: int = BAND_ROWS,
    mode: int = 0,
) -> tuple[float, int, int]:
    """(sum of the SSIM map over the valid region of all channels, number of terms, the exact SSE
    over the whole frame): ``jit.ssim_sse``; ``mode`` other than 0 does part of the work (profiling)."""
    from harness.collect import jit

    if a.shape != b.shape:
        raise ValueError(f"SSIM needs equal shapes, got {a.shape} and {b.shape}")
    if a.dtype != np.uint8 or b.dtype != np.uint8:
        raise ValueError(f"SSIM needs uint8 frames, got {a.dtype} and {b.dtype}")
    if a.ndim not in (2, 3) or a.shape[0] < WIN or a.shape[1] < WIN:
        raise ValueError(f"SSIM needs HxW or HxWxC frames of at least {WIN}x{WIN}, got {a.shape}")
    if a.ndim == 2:
        a, b = a[:, :, None], b[:, :, None]
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    h, w, c = a.shape
    if ws is None or ws.key != (w, c, band_rows):
        ws = Workspace(w, c, band_rows)
    if ws.row_sse.shape[0] < h:
        ws.row_sse = np.empty(h, np.int64)
    total, count, err = jit.ssim_sse(
        a, b, _TAPS32, band_rows, ws.ring, ws.rows, ws.pa, ws.pb, ws.row_sse, mode
    )
    return float(total), int(count), int(err)


def _pass(x: torch.Tensor, k: list[float], dim: int) -> torch.Tensor:
    """One centre-compensated 11-tap pass along ``dim`` (as in the CPU kernel), valid region only, as
    shifted multiply-adds: no TF32 or convolution algorithm can change the digits, and the work is
    small and memory-bound."""
    n = x.shape[dim] - 2 * PAD
    c = x.narrow(dim, PAD, n)
    acc = None
    for i in range(PAD):
        term = ((x.narrow(dim, i, n) - c) + (x.narrow(dim, WIN - 1 - i, n) - c)) * k[i]
        acc = term if acc is None else acc + term
    return c + acc


def ssim_torch(a: torch.Tensor, b: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Per-frame mean SSIM of uint8 batches [N, H, W, C] (or one [H, W, C] frame) -> float64 [N], as
    the CPU kernel computes it but with per-frame offsets; float64 by default, float32 on request (the
    GPU path: consumer GPUs have slow float64)."""
    import torch

    if a.shape != b.shape:
        raise ValueError(f"SSIM needs equal shapes, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dim() == 3:
        a, b = a[None], b[None]
    n, h, w, c = a.shape
    if h < WIN or w < WIN:
        raise ValueError(f"SSIM needs frames of at least {WIN}x{WIN}, got {h}x{w}")
    dtype = dtype or torch.float64
    x = a.permute(0, 3, 1, 2).to(dtype)
    y = b.permute(0, 3, 1, 2).to(dtype)
    # Per-frame integer offsets (any integer is exact; near the means keeps magnitudes small).
    mx, my = x.mean(dim=(1, 2, 3), keepdim=True), y.mean(dim=(1, 2, 3), keepdim=True)
    cs = torch.round(mx + my) - 255.0
    cd = torch.round(mx - my)
    s = x + y - (255.0 + cs)
    d = x - y - cd
    del x, y
    k = [float(v) for v in _KERNEL]
    maps = torch.cat([s, d, s * s, d * d], dim=1)  # all four in one pass
    del s, d
    blurred = _pass(_pass(maps, k, -1), k, -2)
    del maps
    ms, md, es, ed = blurred.split(c, dim=1)
    vs, vd = es - ms * ms, ed - md * md
    qs = (ms + (255.0 + cs)) ** 2
    qd = (md + cd) ** 2
    smap = ((qs - qd + 2 * C1) * (vs - vd + 2 * C2)) / ((qs + qd + 2 * C1) * (vs + vd + 2 * C2))
    means = smap.to(torch.float64).mean(dim=(1, 2, 3))
    # Identical frames are exactly 1.0 (float rounding could otherwise leave 1 - 1e-16).
    same = (a == b).flatten(1).all(dim=1)
    return torch.where(same, torch.ones_like(means), means)


def sse_torch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-frame SSE of uint8 batches [N, ...] as int64 (exact)."""
    import torch

    d = a.to(torch.int32) - b.to(torch.int32)
    return (d * d).flatten(1).sum(dim=1, dtype=torch.int64)


@dataclass
class PairReducer:
    """Streams per-frame (mse, ssim) values in frame order: 4 numbers a frame, summed in that order."""

    rows: list[tuple[int, float, float, float]] = field(default_factory=list)  # frame, mse, psnr, ssim

    @property
    def frames(self) -> int:
        return len(self.rows)

    @property
    def identical(self) -> int:
        return sum(mse == 0.0 for _, mse, _, _ in self.rows)

    def add(self, index: int, frame_mse: float, frame_ssim: float) -> None:
        self.rows.append((index, frame_mse, psnr_from_mse(frame_mse), frame_ssim))

    def result(self) -> dict:
        n, identical = max(self.frames, 1), self.identical
        mse_mean = sum(r[1] for r in self.rows) / n
        # the lowest value at its first frame (as a running minimum finds it); no frame: inf at frame 0
        worst_psnr = min(self.rows, key=lambda r: r[2], default=(0, 0.0, math.inf, math.inf))
        worst_ssim = min(self.rows, key=lambda r: r[3], default=(0, 0.0, math.inf, math.inf))
        finite = sum(r[2] for r in self.rows if not math.isinf(r[2]))
        return {
            "psnr_mean": sum(r[2] for r in self.rows) / n,
            "psnr_mean_finite": finite / (self.frames - identical) if self.frames > identical else None,
            "psnr_min": worst_psnr[2],
            "psnr_min_frame": worst_psnr[0],
            "ssim_mean": sum(r[3] for r in self.rows) / n,
            "ssim_min": worst_ssim[3],
            "ssim_min_frame": worst_ssim[0],
            "mse_mean": mse_mean,
            "psnr_pooled": psnr_from_mse(mse_mean),
            "identical_frames": identical,
        }

    def write_csv(self, path: str | os.PathLike) -> None:
        """frame, mse, psnr, ssim (psnr 'inf' for identical frames); written atomically."""
        buf = io.StringIO(newline="")
        w = csv.writer(buf)
        w.writerow(["frame", "mse", "psnr", "ssim"])
        for i, m, p, s in sorted(self.rows):
            w.writerow([i, repr(m), "inf" if math.isinf(p) else repr(p), repr(s)])
        atomic_write_text(Path(path), buf.getvalue())  # the one write path: guarded, no temp left

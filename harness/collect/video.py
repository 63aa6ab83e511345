"""Pairwise video metrics: per-frame MSE/PSNR (uint8 RGB, L = 255) reduced over a pair's frames.
The mean of per-frame PSNR is +inf as soon as one frame is identical (``psnr_mean_finite`` averages
the others); ``psnr_pooled`` is the PSNR of the mean MSE (ffmpeg's summary), ``psnr_min`` the worst.
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.metrics.metric import psnr_from_mse
from harness.safe_write import atomic_write_text

if TYPE_CHECKING:
    import torch


def sse_torch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-frame SSE of uint8 batches [N, ...] as int64 (exact)."""
    import torch

    d = a.to(torch.int32) - b.to(torch.int32)
    return (d * d).flatten(1).sum(dim=1, dtype=torch.int64)


@dataclass
class PairReducer:
    """Streams per-frame (mse, ssim) values in frame order; keeps only running sums and minima."""

    frames: int = 0
    mse_sum: float = 0.0
    psnr_sum: float = 0.0
    psnr_finite_sum: float = 0.0
    ssim_sum: float = 0.0
    identical: int = 0
    psnr_min: float = math.inf
    psnr_min_frame: int = 0
    ssim_min: float = math.inf
    ssim_min_frame: int = 0
    rows: list[tuple[int, float, float, float]] = field(default_factory=list)

    def add(self, index: int, frame_mse: float, frame_ssim: float) -> None:
        p = psnr_from_mse(frame_mse)
        self.frames += 1
        self.mse_sum += frame_mse
        self.psnr_sum += p
        if not math.isinf(p):
            self.psnr_finite_sum += p
        self.ssim_sum += frame_ssim
        self.identical += frame_mse == 0.0
        if p < self.psnr_min or self.frames == 1:
            self.psnr_min, self.psnr_min_frame = p, index
        if frame_ssim < self.ssim_min or self.frames == 1:
            self.ssim_min, self.ssim_min_frame = frame_ssim, index
        self.rows.append((index, frame_mse, p, frame_ssim))  # 4 numbers a frame: tiny

    def result(self) -> dict:
        n = max(self.frames, 1)
        mse_mean = self.mse_sum / n
        return {
            "psnr_mean": self.psnr_sum / n,
            "psnr_mean_finite": (
                self.psnr_finite_sum / (self.frames - self.identical)
                if self.frames > self.identical
                else None
            ),
            "psnr_min": self.psnr_min,
            "psnr_min_frame": self.psnr_min_frame,
            "ssim_mean": self.ssim_sum / n,
            "ssim_min": self.ssim_min,
            "ssim_min_frame": self.ssim_min_frame,
            "mse_mean": mse_mean,
            "psnr_pooled": psnr_from_mse(mse_mean),
            "identical_frames": self.identical,
        }

    def write_csv(self, path: str | os.PathLike) -> None:
        """frame, mse, psnr, ssim (psnr 'inf' for identical frames); written atomically."""
        buf = io.StringIO(newline="")
        w = csv.writer(buf)
        w.writerow(["frame", "mse", "psnr", "ssim"])
        for i, m, p, s in sorted(self.rows):
            w.writerow([i, repr(m), "inf" if math.isinf(p) else repr(p), repr(s)])
        atomic_write_text(Path(path), buf.getvalue())  # the one write path: guarded, no temp left

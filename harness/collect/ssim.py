"""SSIM in Wang et al. 2004's definition, fast on CPU (OpenCV) and on GPU (torch).

Convention: 11x11 Gaussian window (sigma 1.5, truncated at 3.5 sigma, normalised),
K1 = 0.01, K2 = 0.03, L = 255, population covariance, valid region only (5 px cropped on
each side after filtering), mean over all pixels of all channels. This equals
``skimage.metrics.structural_similarity(a, b, gaussian_weights=True, sigma=1.5,
use_sample_covariance=False, data_range=255, channel_axis=-1)``.

Why it is written in sums and differences: with s = a + b - 255 and d = a - b,

    SSIM = (Ms^2 - Md^2 + 2 C1)(Vs - Vd + 2 C2) / ((Ms^2 + Md^2 + 2 C1)(Vs + Vd + 2 C2))

(M = local mean of s+255 or d, V = local variance). Four blurs instead of five, and float32
is enough: for similar frames d is small, so Md and Vd carry few rounding errors, and the
rounding errors of Ms and Vs (which do cancel catastrophically in E[x^2] - E[x]^2) hit the
numerator and the denominator alike and drop out of the ratio. Each band is also shifted by
integer offsets (its mean s and d) before squaring. Measured against scikit-image's float64
result: within 3e-7 on random, smooth, odd-size, photo, flat, saturated, inverted, shifted,
JPEG'd, blurred, warped and brightness-changed pairs (the tests hold 1e-6); the worst case
found is 1.7e-6, a clipped synthetic gradient against its own vertical flip (large, smooth
differences over flat areas). ``ssim_reference`` (float64 numpy) and ``ssim_torch``
(float64 by default) are exact to ~1e-12.

The frame is processed in bands of rows so that every intermediate stays in the CPU cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import cv2
import numpy as np

if TYPE_CHECKING:
    import torch

WIN = 11
SIGMA = 1.5
PAD = WIN // 2
K1, K2, DATA_RANGE = 0.01, 0.03, 255.0
C1 = (K1 * DATA_RANGE) ** 2
C2 = (K2 * DATA_RANGE) ** 2
BAND_ROWS = 64  # output rows per band: ~1 MB per float32 buffer at 1344x3, fits in L2


def gaussian_kernel(size: int = WIN, sigma: float = SIGMA) -> np.ndarray:
    """Normalised 1-D Gaussian taps (float64), as scipy.ndimage builds them."""
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    k = np.exp(-0.5 * (x / sigma) ** 2)
    return k / k.sum()


_KERNEL = gaussian_kernel()
# The float32 taps OpenCV will use, with the centre tap set so that they sum to 1 as
# closely as float32 allows: a kernel sum of 1 + e biases every variance by about -2e E[x]^2.
_KERNEL32 = _KERNEL.astype(np.float32)
_KERNEL32[PAD] = np.float32(1.0 - (_KERNEL32.astype(np.float64).sum() - float(_KERNEL32[PAD])))


def _check_pair(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ValueError(f"SSIM needs equal shapes, got {a.shape} and {b.shape}")
    if a.dtype != np.uint8 or b.dtype != np.uint8:
        raise ValueError(f"SSIM needs uint8 frames, got {a.dtype} and {b.dtype}")
    if a.ndim not in (2, 3) or a.shape[0] < WIN or a.shape[1] < WIN:
        raise ValueError(f"SSIM needs HxW or HxWxC frames of at least {WIN}x{WIN}, got {a.shape}")


class Workspace:
    """Reusable float32 buffers for one thread (fresh allocations would page-fault every band)."""

    def __init__(self, width: int, channels: int, band_rows: int = BAND_ROWS):
        self.key = (width, channels, band_rows)
        n = band_rows + 2 * PAD
        self.full = [np.empty((n, width, channels), np.float32) for _ in range(4)]
        self.out = np.empty((band_rows, width, channels), np.float32)


def _band_sum(a: np.ndarray, b: np.ndarray, ws: Workspace) -> float:
    """Sum of the SSIM map over the valid rows/columns of one band (a, b include the halo).

    Five buffers, reused in place, and whole rows (contiguous) until the final sum, which
    drops the 5 border columns: the working set stays small enough for the L2 cache.
    """
    n = a.shape[0]
    m = n - 2 * PAD
    # Band-wide integer offsets keep |s|, |d| small, so E[x^2] - E[x]^2 cancels less and the
    # float32 rounding of the kernel does not bias the variances (variance ignores a shift).
    mean_a, mean_b = np.mean(cv2.mean(a)[: a.shape[2]]), np.mean(cv2.mean(b)[: b.shape[2]])
    cs = float(round(mean_a + mean_b - 255.0))
    cd = float(round(mean_a - mean_b))
    s, d, s2, d2 = (x[:n] for x in ws.full)
    cv2.addWeighted(a, 1.0, b, 1.0, -255.0 - cs, dst=s, dtype=cv2.CV_32F)
    cv2.addWeighted(a, 1.0, b, -1.0, -cd, dst=d, dtype=cv2.CV_32F)
    # Negated squares: adding Ms^2 to their blur then gives -Vs in one fused pass.
    cv2.multiply(s, s, dst=s2, scale=-1.0)
    cv2.multiply(d, d, dst=d2, scale=-1.0)
    for z in (s, d, s2, d2):
        cv2.sepFilter2D(z, cv2.CV_32F, _KERNEL32, _KERNEL32, dst=z)  # in place
    r = slice(PAD, n - PAD)  # rows whose 11 taps all lie inside the band
    ms, md, nvs, nvd = s[r], d[r], s2[r], d2[r]
    x = ws.out[:m]
    cv2.accumulateSquare(ms, nvs)  # -Vs = Ms^2 - E[s^2]
    cv2.accumulateSquare(md, nvd)  # -Vd
    cv2.addWeighted(md, 1.0, md, 0.0, cd, dst=md)  # mean of a - b ...
    cv2.multiply(md, md, dst=md)  # ... squared
    cv2.addWeighted(ms, 1.0, ms, 0.0, 255.0 + cs, dst=ms)  # mean of a + b ...
    cv2.multiply(ms, ms, dst=ms)  # ... squared
    cv2.addWeighted(ms, 1.0, md, -1.0, 2 * C1, dst=x)  # 2 (2 mu_a mu_b + C1)
    cv2.addWeighted(ms, 1.0, md, 1.0, 2 * C1, dst=ms)  # 2 (mu_a^2 + mu_b^2 + C1)
    cv2.addWeighted(nvs, -1.0, nvd, 1.0, 2 * C2, dst=md)  # 2 (2 sigma_ab + C2)
    cv2.addWeighted(nvs, -1.0, nvd, -1.0, 2 * C2, dst=nvs)  # 2 (sigma_a^2 + sigma_b^2 + C2)
    cv2.multiply(x, md, dst=x)
    cv2.multiply(ms, nvs, dst=ms)
    cv2.divide(x, ms, dst=x)
    return float(sum(cv2.sumElems(x[:, PAD:-PAD])))


def ssim_sum(
    a: np.ndarray, b: np.ndarray, *, ws: Workspace | None = None, band_rows: int = BAND_ROWS
) -> tuple[float, int]:
    """Sum of the SSIM map over the valid region of all channels, and the number of terms.

    Bands whose rows (halo included) are identical contribute exactly 1.0 per pixel
    without being computed.
    """
    _check_pair(a, b)
    if a.ndim == 2:
        a, b = a[:, :, None], b[:, :, None]
    h, w, c = a.shape
    per_row = (w - 2 * PAD) * c
    if ws is None or ws.key != (w, c, band_rows):
        ws = Workspace(w, c, band_rows)
    total = 0.0
    for o0 in range(PAD, h - PAD, band_rows):
        o1 = min(o0 + band_rows, h - PAD)
        ba, bb = a[o0 - PAD : o1 + PAD], b[o0 - PAD : o1 + PAD]
        if cv2.norm(ba, bb, cv2.NORM_INF) == 0:
            total += float((o1 - o0) * per_row)
        else:
            total += _band_sum(ba, bb, ws)
    return total, (h - 2 * PAD) * per_row


def ssim(a: np.ndarray, b: np.ndarray, *, ws: Workspace | None = None) -> float:
    """Mean SSIM of two uint8 frames (HxW or HxWxC); exactly 1.0 for identical frames."""
    total, count = ssim_sum(a, b, ws=ws)
    return total / count


def ssim_reference(a: np.ndarray, b: np.ndarray) -> float:
    """Textbook float64 formula (five blurs, no tricks): the slow yardstick for tests."""
    _check_pair(a, b)
    x, y = a.astype(np.float64), b.astype(np.float64)

    def blur(z: np.ndarray) -> np.ndarray:
        return cv2.sepFilter2D(z, cv2.CV_64F, _KERNEL, _KERNEL)

    mx, my = blur(x), blur(y)
    vx, vy, vxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    smap = ((2 * mx * my + C1) * (2 * vxy + C2)) / ((mx * mx + my * my + C1) * (vx + vy + C2))
    return float(smap[PAD:-PAD, PAD:-PAD].mean())


# --- torch (GPU, or CPU for tests) ---------------------------------------------------------


def _blur_valid(x: torch.Tensor, k: list[float]) -> torch.Tensor:
    """Separable Gaussian over the last two dims, valid region only, as shifted sums.

    Plain multiply-adds instead of a convolution: no TF32 or algorithm choice can change the
    digits, and it runs in float64 on any GPU (the work is small and memory-bound).
    """
    h, w = x.shape[-2], x.shape[-1]
    rows = sum(k[i] * x[..., :, i : w - WIN + 1 + i] for i in range(WIN))
    return sum(k[i] * rows[..., i : h - WIN + 1 + i, :] for i in range(WIN))


def ssim_torch(a: torch.Tensor, b: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Per-frame mean SSIM of uint8 batches [N, H, W, C] (or one [H, W, C] frame) -> float64 [N].

    The sums-and-differences formula of the CPU path; float64 by default (exact to ~1e-12 of
    scikit-image), float32 on request (the CPU path's precision).
    """
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
    s = x + y - 255.0
    d = x - y
    del x, y
    k = [float(v) for v in _KERNEL]
    blurred = _blur_valid(torch.cat([s, d, s * s, d * d], dim=1), k)  # all four in one pass
    ms, md, bss, bdd = blurred.split(c, dim=1)
    md2 = md * md
    vs, vd = bss - ms * ms, bdd - md2
    q = (ms + 255.0) ** 2
    smap = ((q - md2 + 2 * C1) * (vs - vd + 2 * C2)) / ((q + md2 + 2 * C1) * (vs + vd + 2 * C2))
    means = smap.to(torch.float64).mean(dim=(1, 2, 3))
    # Identical frames are exactly 1.0 (float rounding could otherwise leave 1 - 1e-16).
    same = (a == b).flatten(1).all(dim=1)
    return torch.where(same, torch.ones_like(means), means)

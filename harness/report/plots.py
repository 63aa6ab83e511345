"""Report figures as small PNGs (matplotlib's object API: no pyplot state, no display needed).

Each function takes numbers of results.json or of its assets (per-frame series, audio views),
writes one PNG atomically and returns its path, or None when there is nothing to draw.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from harness.analysis.model import AudioView, FrameSeries
from harness.store import atomic_write_bytes

DPI = 90
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _save(fig: Figure, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    atomic_write_bytes(Path(path), buf.getvalue())
    return Path(path)


def per_frame_plot(series: Sequence[tuple[str, FrameSeries]], path: Path) -> Path | None:
    """PSNR (top) and SSIM (bottom) per frame, one line per (label, series)."""
    data = [(label, d) for label, d in series if d.psnr or d.ssim]
    if not data:
        return None
    fig = Figure(figsize=(9, 5.2), layout="constrained")
    ax_p, ax_s = fig.subplots(2, 1, sharex=True)
    finite = [np.asarray(d.psnr, dtype=np.float64) for _, d in data if d.psnr]
    finite = [f[np.isfinite(f)] for f in finite]
    top = max((float(f.max()) for f in finite if f.size), default=60.0) + 3.0
    any_inf = False
    for i, (label, d) in enumerate(data):
        color = PALETTE[i % len(PALETTE)]
        frames = np.asarray(d.frame, dtype=np.float64)
        if d.psnr:
            y = np.asarray(d.psnr, dtype=np.float64)
            inf = ~np.isfinite(y)
            any_inf |= bool(inf.any())
            y[inf] = top  # identical frames drawn at the top edge
            ax_p.plot(frames, y, label=label, color=color, lw=1.2)
        if d.ssim:
            ax_s.plot(frames, d.ssim, label=label, color=color, lw=1.2)
    ax_p.set_ylabel("PSNR (dB)")
    ax_p.set_title(
        "per-frame PSNR and SSIM against the reference"
        + (" (identical frames at the top)" if any_inf else "")
    )
    ax_s.set_ylabel("SSIM")
    ax_s.set_xlabel("frame")
    for ax in (ax_p, ax_s):
        ax.grid(alpha=0.3)
    ax_p.legend(fontsize=8, loc="lower left")
    return _save(fig, path)


def audio_plot(tracks: Sequence[tuple[str, AudioView, np.ndarray | None]], path: Path) -> Path | None:
    """Waveform envelope (with the difference to the first track) and spectrogram, one row per track.

    ``tracks``: (label, view, spectrogram in dB or None); the first is the reference.
    """
    tracks = [t for t in tracks if t[1].signal.t]
    if not tracks:
        return None
    n = len(tracks)
    fig = Figure(figsize=(10, 1.9 * n + 0.4), layout="constrained")
    axes = fig.subplots(n, 2, squeeze=False)
    for i, (label, view, spec_db) in enumerate(tracks):
        ax_w, ax_s = axes[i]
        ax_w.fill_between(
            view.signal.t, view.signal.lo, view.signal.hi, color=PALETTE[0], lw=0, label="signal"
        )
        if i > 0 and view.minus_reference is not None:
            d = view.minus_reference
            ax_w.fill_between(d.t, d.lo, d.hi, color=PALETTE[1], lw=0, alpha=0.8, label="minus reference")
            ax_w.legend(fontsize=7, loc="upper right")
        ax_w.set_ylim(-1.05, 1.05)
        ax_w.set_ylabel(label, fontsize=8)
        if spec_db is not None:
            lo, hi = view.spectrogram_hz
            ax_s.imshow(spec_db, aspect="auto", extent=(0.0, view.seconds, lo, hi), cmap="magma",
                        vmin=view.spectrogram_db[0], vmax=view.spectrogram_db[1], interpolation="nearest")  # fmt: skip
        ax_s.set_ylabel("Hz", fontsize=8)
        if i == 0:
            ax_w.set_title("waveform (mono mix) and difference to the reference", fontsize=9)
            ax_s.set_title("spectrogram (mono mix, dB)", fontsize=9)
    axes[-1][0].set_xlabel("s")
    axes[-1][1].set_xlabel("s")
    return _save(fig, path)


def _label_per_step(ax, xlabel: str, ylabel: str, title: str) -> None:
    """Axes of a one-point-per-step figure: integer steps on x, a grid, the legend."""
    ax.set_xlabel(xlabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def step_times_plot(series: Sequence[tuple[str, Sequence[float]]], path: Path) -> Path | None:
    series = [(label, list(s)) for label, s in series if s]
    if not series:
        return None
    fig = Figure(figsize=(8, 3.2), layout="constrained")
    ax = fig.subplots()
    for i, (label, secs) in enumerate(series):
        ax.plot(range(1, len(secs) + 1), secs, marker="o", label=label, color=PALETTE[i % len(PALETTE)])
    _label_per_step(ax, "DiT step", "seconds", "seconds per DiT step (step 1 carries warm-up)")
    return _save(fig, path)


def latent_plot(series: Sequence[tuple[str, Sequence[tuple[int, float]]]], path: Path) -> Path | None:
    series = [(label, list(p)) for label, p in series if p]
    if not series:
        return None
    finite = [v for _, pts in series for _, v in pts if math.isfinite(v)]
    top = (max(finite) if finite else 100.0) + 5.0
    fig = Figure(figsize=(8, 3.4), layout="constrained")
    ax = fig.subplots()
    for i, (label, pts) in enumerate(series):
        xs = [s for s, _ in pts]
        ys = [v if math.isfinite(v) else top for _, v in pts]
        ax.plot(xs, ys, marker="o", label=label, color=PALETTE[i % len(PALETTE)])
    _label_per_step(
        ax, "step", "latent PSNR (dB)", "latent PSNR against the reference per step (identical at the top)"
    )
    return _save(fig, path)


def seeds_plot(
    series: Sequence[tuple[str, Sequence[tuple[int, float]]]],
    band: tuple[float, float] | None,
    path: Path,
    ylabel: str = "video PSNR, pooled (dB)",
) -> Path | None:
    """A metric per seed for each candidate, with the noise floor's range (perturbations x seeds) as a band."""
    series = [(label, [(s, v) for s, v in pts if math.isfinite(v)]) for label, pts in series]
    series = [(label, pts) for label, pts in series if pts]
    if not series and band is None:
        return None
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.subplots()
    seeds = sorted({s for _, pts in series for s, _ in pts})
    pos = {s: i for i, s in enumerate(seeds)}
    if band is not None and all(math.isfinite(b) for b in band):
        ax.axhspan(
            band[0],
            band[1] if band[1] > band[0] else band[0] + 1e-9,
            color="#999999",
            alpha=0.35,
            label="noise floor (min..max over perturbations x seeds)",
        )
        ax.axhline(band[0], color="#666666", lw=0.8)
    for i, (label, pts) in enumerate(series):
        ax.plot(
            [pos[s] for s, _ in pts],
            [v for _, v in pts],
            marker="o",
            label=label,
            color=PALETTE[i % len(PALETTE)],
        )
    ax.set_xticks(range(len(seeds)), [str(s) for s in seeds])
    ax.set_xlabel("seed")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)

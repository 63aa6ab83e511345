"""Report figures as small PNGs (matplotlib's object API: no pyplot state, no display needed).

Each function takes plain data, writes one PNG atomically and returns its path, or None when
there is nothing to draw.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from harness.store import atomic_write_bytes

DPI = 90
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _save(fig: Figure, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    atomic_write_bytes(Path(path), buf.getvalue())
    return Path(path)


def read_frames_csv(path: Path) -> dict[str, np.ndarray]:
    """Per-frame columns of a metrics CSV: 'frame', 'psnr', 'ssim' (matched by name)."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return {}
    cols = {name.strip().lower(): name for name in rows[0]}

    def pick(*needles: str) -> str | None:
        for low, orig in cols.items():
            if any(n == low for n in needles):
                return orig
        for low, orig in cols.items():
            if any(n in low for n in needles):
                return orig
        return None

    out: dict[str, np.ndarray] = {}
    for key, needles in (("frame", ("frame", "index")), ("psnr", ("psnr",)), ("ssim", ("ssim",))):
        col = pick(*needles)
        if col is not None:
            out[key] = np.array([float(r[col]) for r in rows], dtype=np.float64)
    if "frame" not in out and out:
        out["frame"] = np.arange(len(rows), dtype=np.float64)
    return out


def per_frame_plot(series: Sequence[tuple[str, Path]], path: Path) -> Path | None:
    """PSNR (top) and SSIM (bottom) per frame, one line per (label, frames CSV)."""
    data = [(label, read_frames_csv(p)) for label, p in series if Path(p).exists()]
    data = [(label, d) for label, d in data if "psnr" in d or "ssim" in d]
    if not data:
        return None
    fig = Figure(figsize=(9, 5.2), layout="constrained")
    ax_p, ax_s = fig.subplots(2, 1, sharex=True)
    finite = [d["psnr"][np.isfinite(d["psnr"])] for _, d in data if "psnr" in d]
    top = max((float(f.max()) for f in finite if f.size), default=60.0) + 3.0
    any_inf = False
    for i, (label, d) in enumerate(data):
        color = PALETTE[i % len(PALETTE)]
        if "psnr" in d:
            y = d["psnr"].copy()
            inf = ~np.isfinite(y)
            any_inf |= bool(inf.any())
            y[inf] = top  # identical frames drawn at the top edge
            ax_p.plot(d["frame"], y, label=label, color=color, lw=1.2)
        if "ssim" in d:
            ax_s.plot(d["frame"], d["ssim"], label=label, color=color, lw=1.2)
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


def _envelope(x: np.ndarray, bins: int = 1500) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Min/max per bin so long tracks plot quickly and still show peaks."""
    n = x.size
    bins = max(1, min(bins, n))
    edges = np.linspace(0, n, bins + 1).astype(int)
    lo = np.minimum.reduceat(x, edges[:-1])
    hi = np.maximum.reduceat(x, edges[:-1])
    return edges[:-1], lo, hi


def audio_plot(tracks: Sequence[tuple[str, np.ndarray, int]], path: Path) -> Path | None:
    """Waveform (with the difference to the first track) and spectrogram, one row per track.

    ``tracks``: (label, float32 [C, S], rate); the first is the reference.
    """
    tracks = [(label, a, r) for label, a, r in tracks if a is not None and a.size]
    if not tracks:
        return None
    ref_mono = tracks[0][1].mean(axis=0)
    n = len(tracks)
    fig = Figure(figsize=(10, 1.9 * n + 0.4), layout="constrained")
    axes = fig.subplots(n, 2, squeeze=False)
    for i, (label, audio, rate) in enumerate(tracks):
        mono = audio.mean(axis=0).astype(np.float64)
        ax_w, ax_s = axes[i]
        idx, lo, hi = _envelope(mono)
        t = idx / float(rate)
        ax_w.fill_between(t, lo, hi, color=PALETTE[0], lw=0, label="signal")
        if i > 0 and rate == tracks[0][2]:
            m = min(mono.size, ref_mono.size)
            diff = mono[:m] - ref_mono[:m]
            didx, dlo, dhi = _envelope(diff)
            ax_w.fill_between(
                didx / float(rate), dlo, dhi, color=PALETTE[1], lw=0, alpha=0.8, label="minus reference"
            )
            ax_w.legend(fontsize=7, loc="upper right")
        ax_w.set_ylim(-1.05, 1.05)
        ax_w.set_ylabel(label, fontsize=8)
        nfft = 1024 if mono.size >= 2048 else max(16, 2 ** int(math.log2(max(mono.size // 2, 16))))
        ax_s.specgram(mono, NFFT=nfft, Fs=rate, noverlap=nfft // 2, cmap="magma", scale="dB", vmin=-140)
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

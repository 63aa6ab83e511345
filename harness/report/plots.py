"""Report figures as small PNGs (matplotlib's object API: no pyplot state); each ``*_figure`` returns the
figure, or None: nothing to draw (``save_png`` writes it)."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FuncFormatter, MaxNLocator

from harness.analysis.model import (
    AudioView,
    DoseCurve,
    FrameSeries,
    InSituReading,
    Prediction,
    SpectrogramDiff,
)
from harness.number_format import ratio_text
from harness.report.cells import WORD_COLOURS, drawn_points
from harness.safe_write import atomic_write_bytes

DPI = 90
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
DASHES = ("-", "--", ":", "-.")


def line_style(i: int) -> dict[str, str]:
    """The ``i``-th line's colour and dash: past the palette's colours the dash tells lines apart."""
    return {"color": PALETTE[i % len(PALETTE)], "ls": DASHES[(i // len(PALETTE)) % len(DASHES)]}


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes with no date in it, every text drawn as written (records' text: a pair of
    ``$`` would be typeset as mathtext, ``$\\foo$`` fails the figure): the one way a figure is rendered."""
    for t in fig.findobj(Text):
        t.set_text(t.get_text().replace("$", r"\$"))
    for axis in (a for ax in fig.axes for a in (ax.xaxis, ax.yaxis)):
        # Tick labels given as text (set_xticks(ticks, labels)) are a FixedFormatter or, from
        # matplotlib 3.10, a FuncFormatter over them: escaped as they are drawn.
        for fmt, put in ((axis.get_major_formatter(), axis.set_major_formatter),
                         (axis.get_minor_formatter(), axis.set_minor_formatter)):  # fmt: skip
            if isinstance(fmt, FixedFormatter | FuncFormatter) and not getattr(fmt, "escaped", False):
                plain = FuncFormatter(lambda x, pos, f=fmt: str(f(x, pos)).replace("$", r"\$"))
                plain.escaped = True  # type: ignore[attr-defined]
                put(plain)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    # 8-bit palette, no dithering: a third of the size of matplotlib's RGBA, which a one-file page
    # carries, and no difference a reader sees in lines, text or the colour maps (256 levels each)
    from PIL import Image

    with Image.open(io.BytesIO(buf.getvalue())) as im:
        quantized = im.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    quantized.save(out, format="PNG", optimize=True)
    return out.getvalue()


def save_png(fig: Figure | None, path: Path) -> Path | None:
    """``fig`` written atomically as ``png_bytes`` at ``path`` (None: nothing to draw, nothing written)."""
    if fig is None:
        return None
    atomic_write_bytes(Path(path), png_bytes(fig))
    return Path(path)


def per_frame_figure(series: Sequence[tuple[str, FrameSeries]]) -> Figure | None:
    """PSNR (top) and SSIM (bottom) per frame, one line per (label, series)."""
    data = [(label, d) for label, d in series if d.psnr or d.ssim]
    if not data:
        return None
    fig = legend_figure(9, 5.2, [label for label, _ in data])
    ax_p, ax_s = fig.subplots(2, 1, sharex=True)
    top = max((v for _, d in data for v in d.psnr if math.isfinite(v)), default=60.0) + 3.0
    any_inf = False
    for i, (label, d) in enumerate(data):
        style = line_style(i)
        frames = np.asarray(d.frame, dtype=np.float64)
        if d.psnr:
            y = np.asarray(d.psnr, dtype=np.float64)
            inf = ~np.isfinite(y)
            any_inf |= bool(inf.any())
            y[inf] = top  # identical frames drawn at the top edge
            ax_p.plot(frames, y, label=label, lw=1.2, **style)
        if d.ssim:
            # labelled once (the PSNR axes' line), so the figure's legend names each run once
            ax_s.plot(frames, d.ssim, label=None if d.psnr else label, lw=1.2, **style)
    ax_p.set_ylabel("PSNR (dB)")
    ax_p.set_title(
        "per-frame PSNR and SSIM against the reference"
        + (" (identical frames at the top)" if any_inf else "")
    )
    ax_s.set_ylabel("SSIM")
    ax_s.set_xlabel("frame")
    for ax in (ax_p, ax_s):
        ax.grid(alpha=0.3)
    legend_below(fig)
    return fig


def audio_figure(tracks: Sequence[tuple[str, AudioView, np.ndarray | None]]) -> Figure | None:
    """Waveform envelope (and its difference to the first track's) and spectrogram, one row per track
    (label, view, spectrogram in dB or None), the reference first, each named above its waveform."""
    tracks = [t for t in tracks if t[1].signal.t]
    if not tracks:
        return None
    n = len(tracks)
    fig = Figure(figsize=(10, 2.1 * n + 0.5), layout="constrained")
    axes = fig.subplots(n, 2, squeeze=False)
    for i, (label, view, spec_db) in enumerate(tracks):
        ax_w, ax_s = axes[i]
        s = view.signal
        ax_w.fill_between(s.t, s.lo, s.hi, color=PALETTE[0], lw=0, label="signal")
        if i > 0 and view.minus_reference is not None:
            d = view.minus_reference
            ax_w.fill_between(d.t, d.lo, d.hi, color=PALETTE[1], lw=0, alpha=0.8, label="minus reference")
            ax_w.legend(fontsize=7, loc="upper right")
        ax_w.set_ylim(-1.05, 1.05)
        ax_w.set_title(label, loc="left", fontsize=8)
        if spec_db is not None:
            lo, hi = view.spectrogram_hz
            ax_s.imshow(spec_db, aspect="auto", extent=(0.0, view.seconds, lo, hi), cmap="magma",
                        vmin=view.spectrogram_db[0], vmax=view.spectrogram_db[1], interpolation="nearest")  # fmt: skip
        ax_s.set_ylabel("Hz", fontsize=8)
    fig.suptitle(
        "left: waveform (mono mix) and difference to the reference; right: spectrogram (mono mix, dB)",
        fontsize=9,
    )
    axes[-1][0].set_xlabel("s")
    axes[-1][1].set_xlabel("s")
    return fig


def legend_columns(labels: Sequence[str], width: float, fontsize: float = 8, most: int = 3) -> int:
    """Columns of a legend of ``labels`` that fit ``width`` inches (a character 0.6 of the font size)."""
    column = max((len(t) for t in labels), default=1) * fontsize * 0.6 / 72 + 0.45
    return max(1, min(most, len(labels), int(0.95 * width // column)))


def legend_figure(
    width: float, height: float, labels: Sequence[str], fontsize: float = 8, most: int = 3
) -> Figure:
    """A figure ``height`` inches tall plus the rows a legend of ``labels`` under its axes takes."""
    rows = math.ceil(len(labels) / legend_columns(labels, width, fontsize, most))
    return Figure(figsize=(width, height + rows * fontsize * 1.9 / 72 + 0.1), layout="constrained")


def legend_below(fig: Figure, fontsize: float = 8, most: int = 3) -> None:
    """The figure's legend under its axes (inside them it covers lines), in as many columns as fit."""
    labels = [t for ax in fig.axes for t in ax.get_legend_handles_labels()[1]]
    fig.legend(loc="outside lower center", ncols=legend_columns(labels, fig.get_figwidth(), fontsize, most),
               fontsize=fontsize, frameon=False)  # fmt: skip


def label_per_step(ax, xlabel: str, ylabel: str, title: str, grid: str = "major") -> None:
    """Axes of a one-point-per-step figure: integer steps on x, a grid (``grid`` ticks), the legend below."""
    ax.set_xlabel(xlabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, which=grid)
    legend_below(ax.figure)


def step_times_figure(series: Sequence[tuple[str, Sequence[float]]]) -> Figure | None:
    steps = [(label, list(enumerate(secs, 1))) for label, secs in series]
    return _per_step_figure(
        steps, 3.2, "DiT step", "seconds", "seconds per DiT step (step 1 carries warm-up)"
    )


def latent_figure(series: Sequence[tuple[str, Sequence[tuple[int, float]]]]) -> Figure | None:
    title = "latent PSNR against the reference per step (identical at the top)"
    return _per_step_figure(series, 3.4, "step", "latent PSNR (dB)", title)


def _per_step_figure(series, height: float, xlabel: str, ylabel: str, title: str) -> Figure | None:
    """A line per (label, [(step, value)]), an infinite value (identical) drawn at the top."""
    series = [(label, list(p)) for label, p in series if p]
    if not series:
        return None
    finite = [v for _, pts in series for _, v in pts if math.isfinite(v)]
    top = (max(finite) if finite else 100.0) + 5.0
    fig = legend_figure(8, height, [label for label, _ in series])
    ax = fig.subplots()
    for i, (label, pts) in enumerate(series):
        ys = [v if math.isfinite(v) else top for _, v in pts]
        ax.plot([s for s, _ in pts], ys, marker="o", label=label, **line_style(i))
    label_per_step(ax, xlabel, ylabel, title)
    return fig


def seeds_figure(
    series: Sequence[tuple[str, Sequence[tuple[int, float]]]], band: tuple[float, float] | None
) -> Figure | None:
    """Video PSNR per seed for each candidate, the noise floor's range (perturbations x seeds) as a band."""
    series = [(label, [(s, v) for s, v in pts if math.isfinite(v)]) for label, pts in series]
    series = [(label, pts) for label, pts in series if pts]
    if not series and band is None:
        return None
    band_label = "noise floor (min..max over perturbations x seeds)"
    fig = legend_figure(7, 3.2, [band_label, *(t for t, _ in series)])
    ax = fig.subplots()
    seeds = sorted({s for _, pts in series for s, _ in pts})
    pos = {s: i for i, s in enumerate(seeds)}
    if band is not None and all(math.isfinite(b) for b in band):
        lo, hi = band
        ax.axhspan(lo, hi if hi > lo else lo + 1e-9, color="#999999", alpha=0.35, label=band_label)
        ax.axhline(lo, color="#666666", lw=0.8)
    for i, (label, pts) in enumerate(series):
        ax.plot([pos[s] for s, _ in pts], [v for _, v in pts], marker="o", label=label, **line_style(i))
    ax.set_xticks(range(len(seeds)), [str(s) for s in seeds])
    ax.set_xlabel("seed")
    ax.set_ylabel("video PSNR, pooled (dB)")
    ax.grid(alpha=0.3)
    legend_below(fig)
    return fig


def _ratio_ticks(ax, axis: str, lo: float, hi: float, most: int = 9, keep: float | None = None) -> None:
    """Log axis ticks at powers of two (every second or fourth one on a wide axis), read as '0.5x';
    ``keep`` is always a tick."""
    first, last = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    step = max(1, math.ceil((last - first + 1) / most))
    ticks = [2.0**k for k in range(first, last + 1) if k % step == 0]
    if keep is not None and lo <= keep <= hi and keep not in ticks:
        ticks = sorted([t for t in ticks if not 0.7 < t / keep < 1.4] + [keep])
    # '0.25x', '0.0156x', '4,096x': powers of two, never '1.5625e-02x'
    labels = [f"{t:,.0f}x" if t >= 1 else f"{t:.3g}x" if t >= 1e-3 else ratio_text(t) for t in ticks]
    (ax.set_xticks if axis == "x" else ax.set_yticks)(ticks, labels)
    (ax.set_xlim if axis == "x" else ax.set_ylim)(lo, hi)


def _span(
    values: Sequence[float], bounds: Sequence[float], pad: float = 1.6, reach: float = 8.0
) -> tuple[float, float]:
    """An axis range over ``values`` and the interval ends ``bounds``, the bounds at most ``reach``
    times beyond the values (a wide interval runs off the edge rather than squash the points)."""
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return 0.5, 2.0
    lo, hi = min(vals), max(vals)
    ends = [b for b in bounds if b is not None and b > 0 and math.isfinite(b)]
    lo, hi = max(min([lo, *ends]), lo / reach), min(max([hi, *ends]), hi * reach)
    return lo / pad, hi * pad


def _tolerance_axes(fig: Figure, ylo: float, tolerance: float, label: str):
    """Log-log axes, the band under the tolerance shaded and the tolerance dashed."""
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.axhspan(ylo, tolerance, color="#2e7d32", alpha=0.08, lw=0)
    ax.axhline(tolerance, color="#2e7d32", ls="--", lw=1.2, label=label)
    return ax


# Each candidate its own marker (its colour is its verdict word's, which several share); the star is
# the accepted baseline's alone. Floors: hollow grey, each its own marker.
CANDIDATE_MARKERS = ("o", "D", "^", "P", "X", "h", "v", "p", "<", ">", "d", "H", "8")
FLOOR_MARKERS = ("s", "D", "^", "v", "o", "p", "h", "<", ">")
YLABEL = "error energy / the noise floor's"


def speed_accuracy_figure(points, floors, tolerance: float, ylabel: str = YLABEL) -> Figure | None:
    """Speed-up (x) against the error ratio to the floor's (y), log axes, intervals, identical on the bottom
    edge; the legend, not a name beside a point (names collide), names every mark."""
    pts, fl = drawn_points(list(points), list(floors))
    if not pts:
        return None
    xlo, xhi = _span(
        [p[2][0] for p in pts] + [f[1][0] for f in fl] + [1.0],
        [v for p in pts for v in p[2][1:]] + [v for f in fl for v in f[1][1:]],
    )
    ylo, yhi = _span([p[3][0] for p in pts] + [f[2] for f in fl] + [tolerance, 1.0],
                     [v for p in pts for v in p[3][1:]], 2.0)  # fmt: skip
    tags = [
        f"{arm} ({word})"
        + (", accepted baseline" if baseline else "")
        + (", identical: bottom edge" if y[0] <= 0 and word != "identical" else "")
        for arm, word, _, y, baseline in pts
    ]
    lines = [f"tolerance {tolerance:g}x the floor's", "the reference (speed-up 1x)"]
    legend = lines + tags + [f"{f[0]} (noise floor)" for f in fl]
    fig = legend_figure(8, 4.0, legend, 7, 2)
    ax = _tolerance_axes(fig, ylo, tolerance, lines[0])
    ax.axhline(1.0, color="#888888", ls=":", lw=0.8)
    ax.axvline(1.0, color="#1f4e99", ls="-", lw=0.9, alpha=0.7, label=lines[1])

    def place(y: float) -> float:
        return ylo * 1.05 if y <= 0 else (yhi / 1.05 if math.isinf(y) else y)

    others = iter(CANDIDATE_MARKERS * (1 + len(pts) // len(CANDIDATE_MARKERS)))
    for (_, word, (x, x_lo, x_hi), (y, y_lo, y_hi), baseline), tag in zip(pts, tags, strict=True):
        colour = WORD_COLOURS.get(word, "#333333")
        yy = place(y)
        xerr = [[x - x_lo], [x_hi - x]] if x_lo is not None else None
        yerr = [[max(yy - y_lo, 0.0)], [max(y_hi - yy, 0.0)]] if y_lo is not None and y > 0 else None
        ax.errorbar([x], [yy], xerr=xerr, yerr=yerr, fmt="*" if baseline else next(others),
                    ms=13 if baseline else 8, color=colour, capsize=3, lw=1.2, label=tag)  # fmt: skip
    for i, (arm, (x, x_lo, x_hi), r) in enumerate(fl):
        xerr = [[x - x_lo], [x_hi - x]] if x_lo is not None else None
        ax.errorbar([x], [place(r)], xerr=xerr, fmt=FLOOR_MARKERS[i % len(FLOOR_MARKERS)], ms=6,
                    color="#8a8a8a", mfc="white", mew=1.4, capsize=3, lw=1, label=f"{arm} (noise floor)")  # fmt: skip
    _ratio_ticks(ax, "x", xlo, xhi)
    _ratio_ticks(ax, "y", ylo, yhi, keep=tolerance)
    ax.minorticks_off()
    ax.set_xlabel("DiT s/step speed-up against the reference (above 1x = faster)")
    ax.set_ylabel(ylabel)
    ax.set_title(
        "speed against accuracy: lower right is better; the shaded band is within tolerance", fontsize=10
    )
    ax.grid(alpha=0.25)
    legend_below(fig, 7, 2)
    return fig


def spectrogram_diff_figure(rows: Sequence[tuple[str, SpectrogramDiff, np.ndarray]]) -> Figure | None:
    """Run minus reference spectrogram (dB, diverging colours), one row per run."""
    if not rows:
        return None
    fig = Figure(figsize=(10, 1.7 * len(rows) + 0.6), layout="constrained")
    axes = fig.subplots(len(rows), 1, squeeze=False)
    for (label, view, diff), (ax,) in zip(rows, axes, strict=True):
        lo, hi = view.hz
        im = ax.imshow(diff, aspect="auto", extent=(0.0, view.seconds, lo, hi), cmap="RdBu_r",
                       vmin=-view.db_range, vmax=view.db_range, interpolation="nearest")  # fmt: skip
        ax.set_ylabel("Hz", fontsize=8)
        ax.set_title(
            f"{label} minus {view.reference}: mean |difference| {view.mean_abs_db:.2f} dB", fontsize=9
        )
    axes[-1][0].set_xlabel("s")
    bar = fig.colorbar(im, ax=[a for (a,) in axes], shrink=0.9)
    bar.set_label("dB (run - reference)", fontsize=8)
    return fig


def heatmap_figure(reading: InSituReading) -> Figure | None:
    """rel L1 per (step, block), log colour scale; each cell also printed as its ratio to the floor."""
    cells = [c for c in reading.cells if c.step is not None and c.block is not None and c.rel_l1]
    if not cells:
        return None
    steps = sorted({c.step for c in cells})
    blocks = sorted({c.block for c in cells})
    grid = np.full((len(blocks), len(steps)), np.nan)
    ratio = np.full_like(grid, np.nan)
    for c in cells:
        grid[blocks.index(c.block), steps.index(c.step)] = c.rel_l1
        if c.ratio is not None:
            ratio[blocks.index(c.block), steps.index(c.step)] = c.ratio
    finite = grid[np.isfinite(grid) & (grid > 0)]
    lo, hi = float(finite.min()), float(finite.max())
    size = (min(12.0, max(5.0, 2.5 + 0.45 * len(steps))), min(10.0, max(2.6, 1.6 + 0.28 * len(blocks))))
    fig = Figure(figsize=size, layout="constrained")
    ax = fig.subplots()
    hi = hi if hi > lo else lo * 1.0001
    # A log scale only when the errors span a decade (a narrow range reads better linearly).
    norm = LogNorm(vmin=lo, vmax=hi) if hi / lo >= 10 else Normalize(vmin=lo, vmax=hi)
    image = ax.imshow(grid, aspect="auto", origin="lower", cmap="viridis", norm=norm, interpolation="nearest")
    if len(steps) * len(blocks) <= 120:  # small grids: the ratio to the floor in each cell
        for (i, j), x in np.ndenumerate(ratio):
            if math.isfinite(x):
                ax.text(j, i, f"{x:.2g}x", ha="center", va="center", fontsize=6, color="white")
    for values, set_ticks in ((steps, ax.set_xticks), (blocks, ax.set_yticks)):
        every = max(1, math.ceil(len(values) / 25))  # at most 25 labels on an axis
        set_ticks(range(0, len(values), every), [str(v) for v in values[::every]], fontsize=7)
    ax.set_xlabel("DiT step")
    ax.set_ylabel("block")
    ax.set_title(f"{reading.candidate}: in-situ rel L1 (cells: x the exact floor)", fontsize=9)
    bar = fig.colorbar(image, ax=ax)
    bar.set_label("rel L1", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    return fig


def steps_figure(readings: Sequence[InSituReading]) -> Figure | None:
    """rel L1 per step of every candidate, the exact floor's as a dashed line (log scale)."""
    readings = [r for r in readings if any(s.rel_l1 for s in r.per_step)]
    if not readings:
        return None
    fig = legend_figure(8, 3.4, [r.candidate for r in readings] + ["exact floor"])
    ax = fig.subplots()
    floor_drawn = False
    for i, r in enumerate(readings):
        pts = [(s.step, s.rel_l1) for s in r.per_step if s.step is not None and s.rel_l1]
        ax.plot(*zip(*pts, strict=True), marker="o", label=r.candidate, **line_style(i))
        floor = [(s.step, s.floor_rel_l1) for s in r.per_step if s.step is not None and s.floor_rel_l1]
        if floor and not floor_drawn:
            ax.plot(*zip(*floor, strict=True), ls="--", marker=".", color="#555555", label="exact floor")
            floor_drawn = True
    ax.set_yscale("log")
    title = "in-situ error per step (pooled over blocks), exact floor dashed"
    label_per_step(ax, "DiT step", "rel L1 against exact attention", title, grid="both")
    return fig


def dose_response_figure(curves: Sequence[DoseCurve], predictions: Sequence[Prediction]) -> Figure | None:
    """One reading's curves: the ratio to the floor's against the dose, log-log, each with its interval
    as a band and its tolerated dose as a dotted line; a dose that left the reading equal sits on the
    bottom edge; the in-situ candidates at their per-call error, predicted (interval) and measured."""
    drawn = [(c, *c.usable()) for c in curves]
    drawn = [(c, xs, pts) for c, xs, pts in drawn if pts]
    if not drawn:
        return None
    tolerance = drawn[0][0].tolerance
    ys = [v for _, _, pts in drawn for p in pts for v in (p.ratio, *p.ratio_ci)]
    ys += [v for p in predictions for v in (p.predicted, p.measured) if v]
    ylo, yhi = _span(ys + [1.0, tolerance], [])
    tags = [f"tolerance {tolerance:g}x the floor's", "the floor (1x)"] + [c.name for c, _, _ in drawn]
    tags += [f"{p.candidate}: {what}" for p in predictions for what in ("predicted", "measured")]
    fig = legend_figure(8, 3.8, tags)
    ax = _tolerance_axes(fig, ylo, tolerance, tags[0])
    ax.axhline(1.0, color="#888888", ls=":", lw=0.9, label=tags[1])
    for i, (c, xs, pts) in enumerate(drawn):
        style = line_style(i)
        ax.plot(xs, [p.ratio for p in pts], marker="o", label=c.name, **style)
        ax.fill_between(xs, [p.ratio_ci[0] for p in pts], [p.ratio_ci[1] for p in pts],
                        color=style["color"], alpha=0.15, lw=0)  # fmt: skip
        equal = [p.dose for p in c.points if p.ratio == 0.0]
        if equal:
            ax.plot(equal, [ylo * 1.05] * len(equal), ls="", marker="o", mfc="white", color=style["color"])
        if c.tolerated is not None:
            ax.axvline(c.tolerated, color=style["color"], ls=":", lw=1.0)
    for p, marker in zip(predictions, CANDIDATE_MARKERS * len(predictions), strict=False):  # a marker each
        if p.predicted and p.predicted_ci:
            err = [[p.predicted - p.predicted_ci[0]], [p.predicted_ci[1] - p.predicted]]
            ax.errorbar([p.per_call], [p.predicted], yerr=err, fmt=marker, ms=7, color="#333333", capsize=3,
                        label=f"{p.candidate}: predicted")  # fmt: skip
        if p.measured:
            ax.plot([p.per_call], [p.measured], ls="", marker=marker, ms=8, mfc="white", mew=1.6,
                    color="#d62728", label=f"{p.candidate}: measured")  # fmt: skip
    _ratio_ticks(ax, "y", ylo, yhi, keep=tolerance)
    ax.set_xlabel("per-call rel L1 (the dose)")
    ax.set_ylabel(YLABEL)
    ax.set_title(f"{drawn[0][0].label}: error over the floor's per dose, interval shaded", fontsize=10)
    ax.grid(alpha=0.25, which="both")
    legend_below(fig)
    return fig

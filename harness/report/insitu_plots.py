"""The in-situ figures as small PNGs: per candidate a DiT step x block heatmap of its error, and the
per-step error of every candidate with the exact floor's beside it (numbers of results.json)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure

from harness.analysis.model import InSituReading
from harness.report.plots import label_per_step, legend_figure, line_style, save_png


def heatmap_plot(reading: InSituReading, path: Path) -> Path | None:
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
    return save_png(fig, path)


def steps_plot(readings: Sequence[InSituReading], path: Path) -> Path | None:
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
    return save_png(fig, path)

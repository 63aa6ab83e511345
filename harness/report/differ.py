"""What the page shows of where the runs differ: the frame grids with each run's amplified difference to
the reference, the colour scale and gain, the audio clips to play, the spectrogram difference and the
in-situ heatmaps, as paths the page in its folder links (assets that are missing are named so).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.analysis.model import FrameGrid, ReportResults
from harness.report.cells import ROLE_LABEL
from harness.report.figures import AssetReader, first_seed_runs


@dataclass(frozen=True)
class Clip:
    key: str
    role: str
    path: str | None  # from the page's folder; None: missing
    missing: str = ""


@dataclass
class DifferView:
    grids: list[FrameGrid] = field(default_factory=list)  # cells and diffs as the page links them
    diff_text: str = ""  # how the difference images were made (the gain)
    diff_gain: float | None = None
    diff_top: float | None = None  # levels at the top of the colour scale
    diff_scale: str | None = None  # colour bar image (grey; coloured like the difference images)
    diff_tables: tuple[str, str, str] | None = None  # the colour map as SVG transfer tables (R, G, B)
    clips: list[Clip] = field(default_factory=list)
    clips_text: str = ""
    specdiff: str | None = None  # the spectrogram-difference figure
    insitu: list[tuple[str, str]] = field(default_factory=list)  # (caption, image)
    # per grid: the run the compare control opens on
    shown_first: list[str | None] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.grids or self.clips or self.specdiff or self.insitu)


def transfer_tables(colours: list[str]) -> tuple[str, str, str] | None:
    """SVG feComponentTransfer tables (R, G, B) that map grey through ``colours`` ('#rrggbb' at evenly
    spaced grey levels): how the page colours the grey difference images."""
    try:
        rgb = [tuple(int(c[i : i + 2], 16) / 255 for i in (1, 3, 5)) for c in colours]
    except (ValueError, IndexError):
        return None
    if len(rgb) < 2:
        return None
    r, g, b = (" ".join(f"{c[k]:.4f}" for c in rgb) for k in range(3))
    return r, g, b


def insitu_images(
    res: ReportResults, assets: AssetReader, placed, images: dict[str, str]
) -> list[tuple[str, str]]:
    """The in-situ heatmaps where results.json has them (issue 22): assets and figures whose name starts
    with ``insitu`` and names a PNG."""
    out = [
        (name.replace(":", " ").replace("_", " "), path)
        for name, path in images.items()
        if name.startswith("insitu")
    ]
    return out + [
        (f"in-situ attention error: {name.split(':', 1)[-1]}", placed(p))
        for name, rel in sorted(res.assets.items())
        if name.startswith("insitu") and rel.lower().endswith(".png") and (p := assets.path(rel)) is not None
    ]


def differ_view(
    res: ReportResults, grids: list[FrameGrid], assets: AssetReader, placed, images: dict[str, str]
) -> DifferView:
    """The page's "where the runs differ" block. ``placed(path)`` is a file as the page links it;
    ``grids`` are already placed; ``images`` the figures by name."""
    view = DifferView(grids=grids)
    role = {r.key: r.role for r in res.runs}
    for g in grids:  # the first candidate with a difference image, else the first run with one
        with_diff = [k for k in g.columns if k in g.diffs]
        view.shown_first.append(
            next((k for k in with_diff if role.get(k) == "candidate"), None) or next(iter(with_diff), None)
        )
    if res.frame_diff is not None:
        fd = res.frame_diff
        view.diff_text, view.diff_gain, view.diff_top = fd.text, fd.gain, fd.full_scale
        p = assets.path(fd.scale, page=True) if fd.scale else None
        view.diff_scale = placed(p) if p is not None else None
        view.diff_tables = transfer_tables(fd.colours)
    for r in first_seed_runs(res):
        rel = res.assets.get(f"clip:{r.key}")
        if rel is not None:
            p = assets.path(rel, page=True)
            path, missing = (placed(p), "") if p is not None else (None, f"missing: {rel}")
            view.clips.append(Clip(r.key, ROLE_LABEL.get(r.role, r.role), path, missing))
    view.clips_text = res.audio_clips.text if res.audio_clips is not None else ""
    view.specdiff = images.get("spectrogram_diff")
    view.insitu = insitu_images(res, assets, placed, images)
    return view


def placed_grids(res: ReportResults, assets: AssetReader, placed) -> list[FrameGrid]:
    """The frame grids with thumbnail and difference paths as the page links them; a file that is not
    there is named missing."""
    grids = []
    for g in res.frame_grids:
        grid = g.model_copy(deep=True)
        grid.cells, grid.diffs = {}, {}
        for target, source, page in ((grid.cells, g.cells, False), (grid.diffs, g.diffs, True)):
            for key, cells in source.items():
                for i, rel in cells.items():
                    # the thumbnails are report.md's and named when missing; a missing difference
                    # (the page's) is not drawn
                    p = assets.path(rel, page=page)
                    if p is not None:
                        target.setdefault(key, {})[i] = placed(p)
                    elif not page:
                        grid.missing.setdefault(key, f"missing: {rel}")
        grids.append(grid)
    return grids

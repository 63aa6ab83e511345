"""Everything the page shows of the media, written under assets/ and named in ``ReportResults.assets``:
thumbnails, their differences, audio views and clips, and each comparison's per-frame PSNR and SSIM."""

from __future__ import annotations

import csv
from pathlib import Path

from harness.analysis.audio_view import audio_clips, audio_views
from harness.analysis.differences import frame_differences
from harness.analysis.frames import Progress, frame_grids, slug, write_under
from harness.analysis.model import FrameSeries, ReportResults
from harness.compare.cache import MetricsCache


def read_frames_csv(path: Path) -> dict[str, list[float]]:
    """Per-frame columns of a metrics CSV: 'frame', 'psnr', 'ssim' (matched by name)."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return {}
    cols = {name.strip().lower(): name for name in rows[0]}

    def pick(*needles: str) -> str | None:  # a column named so, else one whose name holds it
        exact = (orig for low, orig in cols.items() if low in needles)
        return next(exact, next((orig for low, orig in cols.items() if any(n in low for n in needles)), None))

    out: dict[str, list[float]] = {}
    for key, needles in (("frame", ("frame", "index")), ("psnr", ("psnr",)), ("ssim", ("ssim",))):
        col = pick(*needles)
        if col is not None:
            out[key] = [float(r[col]) for r in rows]
    if "frame" not in out and out:
        out["frame"] = [float(i) for i in range(len(rows))]
    return out


def frame_series(res: ReportResults, root: Path) -> None:
    """``series:<run>``: assets/series/<run>.json for every comparison of the first seed with a CSV."""
    for c in res.comparisons:
        if c.b.seed != res.primary_seed or not c.frames_csv or not Path(c.frames_csv).is_file():
            continue
        cols = read_frames_csv(Path(c.frames_csv))
        if "psnr" not in cols and "ssim" not in cols:
            continue
        frames, psnr, ssim = [int(x) for x in cols["frame"]], cols.get("psnr", []), cols.get("ssim", [])
        series = FrameSeries(key=c.b.key, reference=c.a.key, frame=frames, psnr=psnr, ssim=ssim)
        rel, what = f"assets/series/{slug(c.b.key)}.json", f"per-frame series of run {c.b.key!r}"
        try:
            write_under(root, rel, what, series.model_dump_json(by_alias=True) + "\n")
        except OSError:
            res.notes.append(f"per-frame series of {c.b.key}: not written (read-only campaign)")
            continue
        res.assets[f"series:{c.b.key}"] = rel


def media_assets(res: ReportResults, root: Path, cache: MetricsCache, say: Progress) -> None:
    """Frame grids, per-frame series and audio views of ``res``, written under ``root``/assets/."""
    res.frame_grids = frame_grids(res, root, cache, say)
    frame_differences(res, root, cache, say)
    frame_series(res, root)
    audio_views(res, root, cache, say)
    audio_clips(res, root, cache, say)

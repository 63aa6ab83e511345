"""Everything the page shows of the media, written under assets/ and named in ``ReportResults.assets``:
thumbnails, audio views and clips, each comparison's per-frame PSNR and SSIM, and where two runs differ,
frame by frame: |run - reference| at the grids' frames, mean over RGB, area-averaged to the thumbnails'
size and cached, drawn with one gain for the campaign (the largest power of two up to ``MAX_GAIN``
keeping the ``PERCENTILE``th percentile under full scale), so every image reads on one scale."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from harness.analysis import frames
from harness.analysis.audio_view import audio_clips, audio_views
from harness.analysis.frames import THUMB_WIDTH, Progress, encode_png, frame_grids, slug, write_under
from harness.analysis.model import DiffScale, FrameGrid, FrameSeries, ReportResults
from harness.compare.cache import MetricsCache, media, use_lossless
from harness.compare.summary import RunSummary
from harness.errors import HarnessError
from harness.records import Record
from harness.safe_write import atomic_write_bytes


def read_frames_csv(path: Path) -> dict[str, list[float]]:
    """Per-frame columns of the metrics CSV ``collect.ssim`` writes: 'frame', 'psnr', 'ssim'."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = {k: [float(r[k]) for r in rows] for k in ("frame", "psnr", "ssim") if rows and k in rows[0]}
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


DIFFS_VERSION = 1
MAX_GAIN = 64
PERCENTILE = 99.5
COLORMAP = "inferno"
COLOUR_STOPS = 17
RAW_SCALE = 256  # raw maps store mean |difference| in 8-bit levels x 256 (sub-level differences kept)


class RawDiffs(Record):
    """metrics/<pair>.diffs.json: the raw difference maps of one pair, and their upper percentile."""

    files: dict[int, str] = Field(default_factory=dict)  # frame index -> 16-bit PNG under metrics/
    percentile: float = 0.0  # PERCENTILE of every map, in 8-bit levels
    peak: float = 0.0  # the largest mean |difference| of any thumbnail pixel
    maps: dict[int, Any] = Field(default_factory=dict, exclude=True)  # just measured (not cached)


def difference_map(a: np.ndarray, b: np.ndarray, width: int = THUMB_WIDTH) -> np.ndarray:
    """Mean |a - b| over the channels (float32, 8-bit levels), area-averaged down to ``width``."""
    if a.shape != b.shape:
        raise HarnessError(f"frame sizes differ ({a.shape[1]}x{a.shape[0]} and {b.shape[1]}x{b.shape[0]})")
    return frames.thumbnail(
        np.abs(a.astype(np.int16) - b.astype(np.int16)).mean(axis=2, dtype=np.float32), width
    )


def decode_raw(path: Path) -> np.ndarray:
    import cv2

    raw = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if raw is None:
        raise HarnessError(f"{path}: cannot read the difference map")
    return raw.astype(np.float32) / RAW_SCALE


def pair_diffs(
    ref: RunSummary,
    run: RunSummary,
    indices: list[int],
    cache: MetricsCache,
    ref_frames: dict[str, dict[int, np.ndarray]],
    say: Progress,
) -> tuple[RawDiffs, bool]:
    """(the raw maps of ``run`` against ``ref``, whether both are lossless copies), cached."""
    lossless = use_lossless(ref, run)
    (file_a, sha_a), (file_b, sha_b) = media(ref, lossless), media(run, lossless)
    name = f"{ref.key}__vs__{run.key}.diffs"
    key = {"a": sha_a, "b": sha_b, "indices": sorted(indices), "width": THUMB_WIDTH, "scale": RAW_SCALE}
    entry = cache.path(name)
    base = entry.parent if entry is not None else None
    hit = cache.get(name, "frame_diffs", DIFFS_VERSION, key, RawDiffs)
    if hit is not None and base is not None and frames.cached_files_present(base, hit.files.values()):
        return hit, lossless
    say(f"differences of {run.key}")
    if file_a not in ref_frames:
        ref_frames[file_a] = frames.read_frames(Path(file_a), indices, shrink=lambda f: f)
    a_frames, b_frames = ref_frames[file_a], frames.read_frames(Path(file_b), indices, shrink=lambda f: f)
    both = [i for i in indices if i in a_frames and i in b_frames]
    out = RawDiffs(maps={i: difference_map(a_frames[i], b_frames[i]) for i in both})
    if out.maps:
        flat = np.concatenate([m.ravel() for m in out.maps.values()])
        out.percentile = float(np.percentile(flat, PERCENTILE))
        out.peak = float(flat.max())
    if base is not None:
        for i, d in out.maps.items():
            rel = f"diffs/{slug(run.key)}_f{i:04d}.png"
            raw = np.clip(np.rint(d * RAW_SCALE), 0, 65535).astype(np.uint16)
            try:
                write_under(base, rel, f"difference maps of run {run.key!r}", encode_png(raw))
            except OSError:
                break  # a read-only campaign: kept in memory, not cached
            out.files[i] = rel
        if len(out.files) == len(out.maps):
            cache.put(name, "frame_diffs", DIFFS_VERSION, key, out)
    return out, lossless


def campaign_gain(percentiles: list[float]) -> int:
    """The largest power of two up to MAX_GAIN with gain x (largest percentile) <= 255."""
    top = max(percentiles, default=0.0)
    if top <= 0:
        return MAX_GAIN
    return int(min(MAX_GAIN, max(1, 2 ** math.floor(math.log2(255.0 / top)))))


def colour_stops(count: int = COLOUR_STOPS) -> list[str]:
    """COLORMAP at ``count`` evenly spaced grey levels, as '#rrggbb' (the page maps grey through them)."""
    import cv2

    grey = np.rint(np.linspace(0, 255, count)).astype(np.uint8).reshape(-1, 1)
    rgb = cv2.cvtColor(cv2.applyColorMap(grey, cv2.COLORMAP_INFERNO), cv2.COLOR_BGR2RGB).reshape(-1, 3)
    return ["#" + "".join(f"{int(v):02x}" for v in c) for c in rgb]


def measurable(r: RunSummary | None) -> bool:
    return bool(r is not None and r.ok and r.output and r.output_sha256)


def frame_differences(res: ReportResults, root: Path, cache: MetricsCache, say: Progress) -> None:
    """``diff:<run>:<index>`` assets and ``FrameGrid.diffs`` for every grid; ``res.frame_diff``."""
    pairs: list[tuple[FrameGrid, RunSummary, RawDiffs, bool]] = []  # bool: both sides lossless copies
    for grid in res.frame_grids:
        runs = [res.run(k) for k in grid.columns]
        ref = next((r for r in runs if r is not None and r.arm == res.reference_arm), None)
        if not measurable(ref):
            continue
        grid.reference = ref.key
        ref_frames: dict[str, dict[int, np.ndarray]] = {}
        for r in runs:
            if r is ref or not measurable(r):
                continue
            try:
                pairs.append((grid, r, *pair_diffs(ref, r, grid.indices, cache, ref_frames, say)))
            except HarnessError as err:
                res.notes.append(f"difference images of {r.key}: {err}")
        ref_frames.clear()
    if not pairs:
        return
    cands = [d.percentile for _, r, d, _ in pairs if r.role == "candidate"]
    gain = campaign_gain(cands or [d.percentile for _, _, d, _ in pairs])
    entry = cache.path("diffs")
    base = entry.parent if entry is not None else None
    for grid, r, d, _ in pairs:
        try:
            maps = d.maps or (
                {i: decode_raw(base / rel) for i, rel in d.files.items()} if base is not None else {}
            )
        except HarnessError as err:
            res.notes.append(f"difference images of {r.key}: {err}")
            continue
        for i, m in maps.items():
            rel = f"assets/diff/{slug(r.key)}_f{i:04d}.png"
            grey = np.clip(np.rint(m * gain), 0, 255).astype(np.uint8)
            try:
                write_under(root, rel, f"difference images of run {r.key!r}", encode_png(grey))
            except OSError:
                res.notes.append(f"difference images of {r.key}: not written (read-only campaign)")
                break
            grid.diffs.setdefault(r.key, {})[i] = rel
            res.assets[f"diff:{r.key}:{i}"] = rel
    scale: str | None = "assets/diff/scale.png"
    try:
        bar = np.tile(np.rint(np.linspace(0, 255, 256)).astype(np.uint8), (12, 1))  # 0 left, full scale right
        atomic_write_bytes(root / str(scale), encode_png(bar))
        res.assets["diff_scale"] = str(scale)
    except OSError:
        scale = None
    source = "lossless copies" if all(both for *_, both in pairs) else "decoded frames (output.mp4)"
    res.frame_diff = DiffScale(
        gain=gain,
        full_scale=round(255.0 / gain, 4),
        colormap=COLORMAP,
        colours=colour_stops(),
        percentile=PERCENTILE,
        largest=round(max(d.percentile for _, _, d, _ in pairs), 4),
        scale=scale,
        text=(
            f"|run - reference| on the {source}, mean over R, G and B and over each thumbnail pixel's area, "
            f"x{gain}: {COLORMAP}, black = 0, the top of the scale = {255.0 / gain:.3g} of 255 levels or more; "
            f"one gain for the campaign, the largest power of two up to {MAX_GAIN} that keeps the "
            f"{PERCENTILE:g}th percentile of the candidates' maps under the top"
        ),
    )

"""Frame thumbnails for the side-by-side section: a few evenly spaced frames of every run and each candidate's
worst by PSNR and SSIM, lossy WebP under assets/, cached under the output's sha256 and the indices."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
from pydantic import Field

from harness.analysis.model import FrameGrid, ReportResults, worst_frames
from harness.compare.cache import MetricsCache
from harness.errors import HarnessError
from harness.records import Record
from harness.safe_write import UnsafePathError, atomic_write_bytes, file_name, resolve_under

THUMB_WIDTH = 320
THUMBNAILS_VERSION = 2  # 2: WebP, and the worst frames
THUMB_QUALITY = 85  # WebP quality: no artefact a person sees at the page's size
Progress = Callable[[str], None]


class Thumbnails(Record):
    files: dict[int, str] = Field(default_factory=dict)  # frame index -> PNG path relative to the campaign


def frame_indices(n_frames: int, count: int = 4) -> list[int]:
    """round(linspace(0, F-1, count)), deduplicated: 0/120/241/361 for the 362-frame pull request."""
    if n_frames <= 0:
        return []
    idx = np.rint(np.linspace(0, n_frames - 1, min(count, n_frames))).astype(int)
    return sorted({int(i) for i in idx})


def slug(key: str) -> str:
    """A run key as one plain file name ('arm@43' -> 'arm_s43'; '../x' -> '_._x')."""
    return file_name(key.replace("@", "_s"))


def cached_files_present(base: Path, files: Iterable[str | None]) -> bool:
    """Every file a cache entry names is there, under ``base`` (one elsewhere: damaged, never read)."""
    try:
        return all(resolve_under(base, rel, "metrics cache entry").is_file() for rel in files if rel)
    except UnsafePathError:
        return False


def write_under(root: Path, rel: str, what: str, data: bytes | str) -> None:
    """``data`` written atomically at ``rel`` under ``root`` (``safe_write.resolve_under``: never elsewhere)."""
    path = resolve_under(root, rel, what)
    atomic_write_bytes(path, data.encode() if isinstance(data, str) else data)


def thumbnail(frame: np.ndarray, width: int = THUMB_WIDTH) -> np.ndarray:
    import cv2

    h, w = frame.shape[:2]
    if w <= width:
        return frame
    height = max(2, int(round(h * width / w)))
    return cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA)


def encode_png(image: np.ndarray, fmt: str = "PNG", params: Sequence[int] = ()) -> bytes:
    """PNG (or ``fmt``: WebP) bytes of an RGB (H, W, 3) or grey (H, W) image."""
    import cv2

    pixels = np.ascontiguousarray(image)
    if pixels.ndim == 3:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(f".{fmt.lower()}", pixels, list(params))
    if not ok:
        raise ValueError(f"{fmt} encoding failed")
    return buf.tobytes()


def encode_thumbnail(image: np.ndarray, quality: int = THUMB_QUALITY) -> bytes:
    """Lossy WebP bytes of an RGB (H, W, 3) uint8 image."""
    import cv2

    return encode_png(image, "WebP", [cv2.IMWRITE_WEBP_QUALITY, int(quality)])


def pick_frames(
    frames: Iterable[np.ndarray], indices: list[int], shrink: Callable = thumbnail
) -> dict[int, np.ndarray]:
    """The frames at ``indices`` from a stream, each through ``shrink``; stops reading after the last one."""
    wanted, last = set(indices), max(indices, default=-1)
    got: dict[int, np.ndarray] = {}
    for i, frame in enumerate(frames):
        if i in wanted:
            got[i] = shrink(frame)
        if i >= last:
            break
    return got


def read_frames(video: Path, indices: list[int], shrink: Callable = thumbnail) -> dict[int, np.ndarray]:
    from harness.media import iter_frames

    frames = iter_frames(video)
    try:
        return pick_frames(frames, indices, shrink)
    finally:
        frames.close()


def run_thumbnails(
    key: str, video: Path, sha256: str, indices: list[int], root: Path, cache: MetricsCache
) -> dict[int, str]:
    """{frame index: PNG path relative to ``root``} of one run, decoded only when the cache misses."""
    name = f"{key}.frames"
    cache_key = {"sha256": sha256, "width": THUMB_WIDTH, "indices": sorted(indices), "format": "webp"}
    hit = cache.get(name, "thumbnails", THUMBNAILS_VERSION, cache_key, Thumbnails)
    if hit is not None and cached_files_present(root, hit.files.values()):
        return hit.files
    got = read_frames(video, indices)
    files: dict[int, str] = {}
    for i, rgb in got.items():
        rel = f"assets/frames/{slug(key)}_f{i:04d}.webp"
        try:
            write_under(root, rel, f"frames of run {key!r}", encode_thumbnail(rgb))
        except OSError:
            continue  # a read-only campaign: the frame is named missing on the page
        files[i] = rel
    if len(files) == len(got):
        cache.put(name, "thumbnails", THUMBNAILS_VERSION, cache_key, Thumbnails(files=files))
    return files


def frame_grids(res: ReportResults, root: Path, cache: MetricsCache, say: Progress) -> list[FrameGrid]:
    """One grid per seed (rows: spaced frames and the candidates' worst; columns: the seed's runs)."""
    ref = next((r for r in res.primary_runs if r.arm == res.reference_arm and r.stats), None)
    basis = ref or next((r for r in res.primary_runs if r.stats), None)
    if basis is None or basis.stats is None:
        return []
    res.frame_indices = frame_indices(basis.stats.frames)
    grids = []
    for seed in res.seeds or [None]:
        runs = [r for r in res.primary_runs if r.seed == seed]
        worst = worst_frames(res, seed)
        rows = sorted({*res.frame_indices, *(i for marks in worst.values() for i in marks)})
        title = f"seed {seed}" if seed is not None else "frames"
        grid = FrameGrid(title=title, indices=rows, columns=[r.key for r in runs])
        for r in runs:
            own = sorted({*res.frame_indices, *worst.get(r.key, {})})
            wanted = rows if r.arm == res.reference_arm else own
            if not r.ok or r.output is None or r.output_sha256 is None:
                grid.missing[r.key] = f"no output ({r.status})" if not r.ok else "no output.mp4"
                continue
            say(f"frames of {r.key}")
            try:
                files = run_thumbnails(r.key, Path(r.output), r.output_sha256, wanted, root, cache)
            except HarnessError as err:
                grid.missing[r.key] = f"cannot decode: {err}"
                continue
            grid.cells[r.key] = files
            for i, rel in files.items():
                res.assets[f"frame:{r.key}:{i}"] = rel
            if any(i not in files for i in wanted):
                grid.missing.setdefault(r.key, f"only {r.stats.frames if r.stats else '?'} frames")
        grids.append(grid)
    return grids

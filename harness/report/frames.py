"""Frame thumbnails for the side-by-side section: a few evenly spaced frames of every run.

Frames are decoded once per run (streamed, nothing held but the thumbnails) and cached under
assets/frames/ with a manifest keyed by the output's sha256.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import cv2
import numpy as np

from harness.store import atomic_write_bytes, atomic_write_json

THUMB_WIDTH = 320
MANIFEST = "manifest.json"


def frame_indices(n_frames: int, count: int = 4) -> list[int]:
    """round(linspace(0, F-1, count)), deduplicated: 0/120/241/361 for the 362-frame pull request."""
    if n_frames <= 0:
        return []
    idx = np.rint(np.linspace(0, n_frames - 1, min(count, n_frames))).astype(int)
    return sorted({int(i) for i in idx})


def slug(key: str) -> str:
    """A file-name-safe form of a run key ('arm@43' -> 'arm_s43')."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key.replace("@", "_s"))


def thumbnail(frame: np.ndarray, width: int = THUMB_WIDTH) -> np.ndarray:
    h, w = frame.shape[:2]
    if w <= width:
        return frame
    height = max(2, int(round(h * width / w)))
    return cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA)


def encode_png(rgb: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError("PNG encoding failed")
    return buf.tobytes()


def pick_frames(frames: Iterable[np.ndarray], indices: list[int]) -> dict[int, np.ndarray]:
    """The frames at ``indices`` from a stream; stops reading after the last one."""
    wanted = set(indices)
    last = max(indices) if indices else -1
    got: dict[int, np.ndarray] = {}
    for i, frame in enumerate(frames):
        if i in wanted:
            got[i] = thumbnail(frame)
        if i >= last:
            break
    return got


def run_thumbnails(key: str, video: Path, sha256: str, indices: list[int], out_dir: Path) -> dict[int, Path]:
    """{frame index: PNG path} for one run, decoded only when the cache does not match."""
    from harness.media import iter_frames

    out_dir = Path(out_dir)
    manifest_path = out_dir / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    name = slug(key)
    files = {i: out_dir / f"{name}_f{i:04d}.png" for i in indices}
    entry = manifest.get(key)
    if (
        entry
        and entry.get("sha256") == sha256
        and entry.get("width") == THUMB_WIDTH
        and set(entry.get("indices", [])) >= set(indices)
        and all(p.exists() for p in files.values())
    ):
        return files
    frames = iter_frames(video)
    try:
        got = pick_frames(frames, indices)
    finally:
        frames.close()
    for i, rgb in got.items():
        atomic_write_bytes(files[i], encode_png(rgb))
    manifest[key] = {"sha256": sha256, "indices": sorted(got), "width": THUMB_WIDTH}
    atomic_write_json(manifest_path, manifest)
    return {i: p for i, p in files.items() if i in got}

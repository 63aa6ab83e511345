"""The benchmark's test material: a video pair of the pull request's kind (H.264 yuv420p, 24 fps,
32 kHz stereo AAC; a panning texture with a moving disc, the second file a perturbed copy so that
no metric is trivial), generated once per size and cached in a work folder."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from harness.errors import HarnessError

RATE = 32000
FPS = 24


def _texture(h: int, w: int, seed: int) -> np.ndarray:
    """A large smooth-plus-detail RGB texture to pan over (video-like, compresses normally)."""
    import cv2

    rng = np.random.default_rng(seed)
    th, tw = h + h // 4 + 16, w + w // 4 + 16
    coarse = rng.integers(0, 256, (max(th // 32, 2), max(tw // 32, 2), 3), np.uint8)
    base = cv2.resize(coarse, (tw, th), interpolation=cv2.INTER_CUBIC).astype(np.float32)
    detail = cv2.GaussianBlur(rng.normal(0, 22, (th, tw, 3)).astype(np.float32), (0, 0), 1.3)
    return np.clip(0.8 * base + detail + 24, 0, 255).astype(np.uint8)


def synthetic_frames(n: int, h: int, w: int, *, perturbed: bool) -> Iterator[np.ndarray]:
    """Panning texture with a moving disc; ``perturbed`` shifts details the way a run-to-run
    difference would (texture blend, disc offset, slight exposure change)."""
    import cv2

    tex = _texture(h, w, 1)
    if perturbed:
        tex = np.clip(0.9 * tex.astype(np.float32) + 0.1 * _texture(h, w, 2) + 1.5, 0, 255).astype(np.uint8)
    my, mx = (tex.shape[0] - h) // 2, (tex.shape[1] - w) // 2
    r = max(min(h, w) // 10, 2)
    for t in range(n):
        y = int(my + my * np.cos(t / 55))
        x = int(mx + mx * np.sin(t / 40))
        f = tex[y : y + h, x : x + w].copy()
        cx = int((t * 5 + (2 if perturbed else 0)) % w)
        cv2.circle(f, (cx, h // 2), r, (230, 60, 40), -1)
        yield f


def synthetic_audio(n_frames: int, *, perturbed: bool) -> np.ndarray:
    n = int(n_frames / FPS * RATE)
    t = np.arange(n) / RATE
    rng = np.random.default_rng(5)
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 0.5 * t)
    x = np.stack([0.3 * env * np.sin(2 * np.pi * 220 * t), 0.2 * np.sin(2 * np.pi * (330 + 20 * t) * t)])
    x = x + 0.03 * rng.standard_normal(x.shape)
    if perturbed:
        x = x + 0.003 * np.random.default_rng(6).standard_normal(x.shape)
    return x.astype(np.float32)


def ensure_pair(workdir: str | os.PathLike, frames: int, height: int, width: int) -> tuple[Path, Path, float]:
    """The cached pair for these dimensions (generated on first use); returns (a, b, seconds spent)."""
    from harness.media import probe, write_av

    d = Path(workdir)
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    paths = []
    for tag, perturbed in (("a", False), ("b", True)):
        p = d / f"bench_{frames}x{height}x{width}_{tag}.mp4"
        try:
            ok = p.exists() and probe(p).frames == frames
        except HarnessError:  # a damaged cache file: made again
            ok = False
        if not ok:
            write_av(
                p,
                synthetic_frames(frames, height, width, perturbed=perturbed),
                synthetic_audio(frames, perturbed=perturbed),
                fps=FPS,
                sample_rate=RATE,
                crf=18,
                preset="ultrafast",
            )
        paths.append(p)
    return paths[0], paths[1], time.perf_counter() - t0

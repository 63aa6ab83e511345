"""``harness bench metrics``: the metric suite timed against a naive per-frame scikit-image loop on a
cached synthetic pair of the pull request's size, each side (``KINDS``) in a fresh process so that its
CPU time and peak RSS are its own (``python -m harness.bench.run KIND A B DEVICE LIMIT OUT`` writes its
``SideResult`` to OUT; a failing child's last stderr line becomes the error)."""

from __future__ import annotations

import csv
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import numpy as np

from harness.bench.result import (
    FPS,
    NAIVE,
    OPENCV,
    RATE,
    SUITE,
    BenchResult,
    BenchRow,
    SideResult,
    StageTimes,
    render_markdown,
)
from harness.errors import HarnessError

OPENCV_FRAMES = 24  # the OpenCV yardstick always runs on a subset (it is not what is compared)
KINDS = ("suite", "naive", "opencv", "profile")
FRAME_COLUMNS = ("ssim", "psnr")  # of the suite's per-frame CSV, measured by the naive side too
# Wang's SSIM, as the suite computes it
SKIMAGE_SSIM = dict(
    gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255, channel_axis=-1
)


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


def warm_up() -> tuple[float, bool]:
    """Compile (first use on a machine) or load (from the cache) the metric kernels for the types
    the suite uses. Returns (seconds, whether anything was compiled rather than loaded)."""
    from harness.collect import jit
    from harness.collect.ssim import ssim_sse
    from harness.collect.stats import frame_stats

    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (24, 32, 3), np.uint8)
    b = rng.integers(0, 256, (24, 32, 3), np.uint8)
    ssim_sse(a, b)
    frame_stats(a, b)
    misses = sum(sum(k.stats.cache_misses.values()) for k in (jit.ssim_sse, jit.frame_sums))
    return time.perf_counter() - t0, misses > 0


def _frame_pairs(a: str, b: str, limit: int):
    """The first ``limit`` decoded RGB frame pairs of ``a`` and ``b``, in lockstep."""
    from harness.media import iter_frames

    return islice(zip(iter_frames(a, strict=False), iter_frames(b, strict=False), strict=False), limit)


def _suite(a: str, b: str, device: str, limit: int) -> dict:
    from harness.collect.suite import measure_pair
    from harness.metrics.metric import in_order

    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "frames.csv"
        res = measure_pair(a, b, device=device, csv_path=csv_path)
        with open(csv_path, newline="") as fh:  # the per-frame values of its first ``limit`` frames
            rows = [row for row in csv.DictReader(fh) if int(row["frame"]) < limit]
    frame_values = {k: [float(row[k]) for row in rows] for k in FRAME_COLUMNS}
    metrics = {m.key: x for m in in_order() if (x := m.get(res)) is not None}
    n = res.video.frames
    return {
        "frames": n,
        "measured_frames": n,
        "metrics": metrics,
        "frame_values": frame_values,
        "device": res.device,
    }


def _naive(a: str, b: str, limit: int) -> dict:
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    from harness.media import probe

    values: dict[str, list[float]] = {k: [] for k in FRAME_COLUMNS}
    for fa, fb in _frame_pairs(a, b, limit):
        values["psnr"].append(float(peak_signal_noise_ratio(fa, fb, data_range=255)))
        values["ssim"].append(float(structural_similarity(fa, fb, **SKIMAGE_SSIM)))
    return {"frames": probe(a).frames, "measured_frames": len(values["ssim"]), "frame_values": values}


def _opencv(a: str, b: str, limit: int) -> dict:
    """The usual hand-written loop: OpenCV float64 Wang SSIM on RGB, PSNR and the statistics,
    one frame at a time on one thread (a yardstick of this machine's speed)."""
    import cv2

    from harness.media import probe

    cv2.setNumThreads(1)

    def blur(x: np.ndarray) -> np.ndarray:
        return cv2.GaussianBlur(x, (11, 11), 1.5)

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    total = probe(a).frames
    prev, n = None, 0
    for fa, fb in _frame_pairs(a, b, limit):
        cv2.PSNR(fa, fb)
        x, y = fa.astype(np.float64), fb.astype(np.float64)
        mx, my = blur(x), blur(y)
        vx, vy, vxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
        smap = ((2 * mx * my + c1) * (2 * vxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
        float(smap[5:-5, 5:-5].mean())
        for f in (fa, fb):
            g = cv2.cvtColor(f, cv2.COLOR_RGB2GRAY)
            cv2.meanStdDev(g)
            cv2.Laplacian(g, cv2.CV_64F).var()
        if prev is not None:
            float(np.mean(cv2.absdiff(fa, prev)))
        prev = fa
        n += 1
    return {"frames": total, "measured_frames": n}


def _profile(a: str, b: str, limit: int) -> dict:
    """Each stage of the CPU suite alone, in this one thread, timed with the thread's CPU clock."""
    import hashlib

    from harness.collect.ssim import Workspace, ssim_sse
    from harness.collect.stats import frame_stats
    from harness.collect.suite import audio_part
    from harness.media import iter_video_frames, probe

    clock = time.thread_time
    t = dict.fromkeys(StageTimes.model_fields, 0.0)
    gens = [iter_video_frames(p, threads=1, strict=False) for p in (a, b)]
    hashes = [hashlib.sha256(), hashlib.sha256()]
    prev: list[np.ndarray | None] = [None, None]
    ws = None
    n = 0
    while n < limit:
        frames = []
        for g in gens:
            c0 = clock()
            vf = next(g, None)
            c1 = clock()
            t["decode"] += c1 - c0
            if vf is None:
                break
            frames.append(vf.to_ndarray(format="rgb24"))
            t["convert"] += clock() - c1
        if len(frames) < 2:
            break
        for k, f in enumerate(frames):
            c0 = clock()
            hashes[k].update(f.data)
            c1 = clock()
            frame_stats(f, prev[k])
            t["stats"] += clock() - c1
            t["hash"] += c1 - c0
            prev[k] = f
        if ws is None:
            ws = Workspace(frames[0].shape[1], frames[0].shape[2])
        for mode, key in ((0, "ssim_kernel"), (1, "ssim_blur_only"), (2, "ssim_maps_only")):
            c0 = clock()
            ssim_sse(frames[0], frames[1], ws=ws, mode=mode)
            t[key] += clock() - c0
        n += 1
    for g in gens:
        g.close()
    c0 = clock()
    audio_part(Path(a), Path(b), probe(a), probe(b), False)
    t["audio"] = clock() - c0
    t["frames"] = n
    return {"frames": n, "measured_frames": n, "profile": StageTimes(**t)}


SIDES = {"naive": _naive, "opencv": _opencv, "profile": _profile}  # and the suite (it takes a device)


def _setup(kind: str, device: str) -> None:
    """What a side needs before its clock starts: imports, kernels, a CUDA context."""
    import cv2  # noqa: F401

    import harness.media  # noqa: F401

    if kind in ("suite", "profile"):
        import harness.collect.suite  # noqa: F401

        if device == "cpu" or kind == "profile":
            warm_up()
        else:  # torch import and CUDA context creation: once per process
            import torch

            if torch.cuda.is_available():
                torch.zeros(1, device="cuda")
                torch.cuda.reset_peak_memory_stats()
    elif kind == "naive":
        from skimage.metrics import peak_signal_noise_ratio, structural_similarity

        z = np.arange(768, dtype=np.uint8).reshape(16, 16, 3)  # first calls load scipy pieces:
        structural_similarity(z, z, **SKIMAGE_SSIM)  # keep them out of the timing
        peak_signal_noise_ratio(z, z[::-1], data_range=255)


def run_side(kind: str, a: str, b: str, device: str, limit: int) -> SideResult:
    """Set up, then measure one side on this process's clocks (``limit``: frames the naive,
    OpenCV and profile sides run, and how many per-frame suite values are kept)."""
    t_setup = time.perf_counter()
    _setup(kind, device)
    setup_s = time.perf_counter() - t_setup
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    out = _suite(a, b, device, limit) if kind == "suite" else SIDES[kind](a, b, limit)
    seconds = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    gpu_peak_mb = None
    if kind == "suite" and device != "cpu":
        import torch

        if torch.cuda.is_available():
            gpu_peak_mb = torch.cuda.max_memory_allocated() / 2**20
    return SideResult(
        kind=kind,
        seconds=seconds,
        cpu_seconds=ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime,
        peak_mb=ru.ru_maxrss / 1024.0,  # Linux reports KiB
        setup_s=setup_s,
        gpu_peak_mb=gpu_peak_mb,
        **out,
    )


def measure_side(kind: str, a: Path, b: Path, *, device: str = "cpu", limit: int = 0) -> SideResult:
    """Run one side (``KINDS``) in a child process and return what it measured."""
    from harness.store import read_record

    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
        out = Path(tmp) / "side.json"
        cmd = ["-m", "harness.bench.run", kind, str(a), str(b), device, str(limit), str(out)]
        proc = subprocess.run([sys.executable, *cmd], capture_output=True, text=True)
        if proc.returncode == 0 and out.exists():
            return read_record(out, SideResult)
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    raise HarnessError(f"benchmark side {kind!r} failed (exit {proc.returncode}): {tail[0]}")


def bench_metrics(
    workdir: str | os.PathLike,
    *,
    frames: int = 362,
    height: int = 768,
    width: int = 1344,
    naive: bool = True,
    double: bool = True,
    device: str = "cpu",
    naive_frames: int = 24,
    profile: bool | None = None,
) -> BenchResult:
    """The suite against the naive loop (and on a 2x longer video); ``profile`` (default: on for the CPU
    suite) adds the time split of the CPU stages."""
    from harness.envinfo import resolve_device

    load_before = list(os.getloadavg())
    device = resolve_device(device)  # "auto" decided here, so each side sets up what it uses
    a, b, gen_s = ensure_pair(workdir, frames, height, width)
    kernels_s = compiled = None
    if device == "cpu" or profile:
        kernels_s, compiled = warm_up()  # a cold cache is filled here, not in a timed child
    limit = max(1, min(naive_frames, frames))
    rows = []
    suite = measure_side("suite", a, b, device=device, limit=limit if naive else 0)
    rows.append(BenchRow.of(SUITE, suite, note=f"measure_pair on {suite.device}"))
    naive_r = None
    if naive:
        naive_r = measure_side("naive", a, b, limit=limit)
        rows.append(BenchRow.of(NAIVE, naive_r, note="skimage PSNR + SSIM (Wang mode) per frame"))
        ocv = measure_side("opencv", a, b, limit=min(OPENCV_FRAMES, frames))
        note = "one thread: cv2 float64 RGB SSIM, PSNR, luma/Laplacian/absdiff stats per frame"
        rows.append(BenchRow.of(OPENCV, ocv, note=note))
    if double:
        a2, b2, gen2 = ensure_pair(workdir, 2 * frames, height, width)
        gen_s += gen2
        rows.append(BenchRow.of("suite x2 length", measure_side("suite", a2, b2, device=device)))
    stage_times: StageTimes | None = None
    if profile if profile is not None else device == "cpu":
        stage_times = measure_side("profile", a, b, limit=frames).profile
    res = BenchResult(
        frames=frames,
        height=height,
        width=width,
        device=suite.device or device,
        cpu_count=os.cpu_count(),
        load_avg_before=load_before,
        load_avg_after=list(os.getloadavg()),
        generate_s=gen_s,
        kernels_s=kernels_s,
        kernels_compiled=compiled,
        rows=rows,
        profile=stage_times,
        suite_metrics=suite.metrics,
    )
    if naive_r is not None:
        res.naive_over_suite = rows[1].seconds / rows[0].seconds
        res.naive_over_suite_extrapolated = rows[1].extrapolated
        res.opencv_over_suite = rows[2].seconds / rows[0].seconds
        res.compared_frames = n = naive_r.measured_frames
        for k, theirs in naive_r.frame_values.items():  # per frame, the suite's values against scikit-image's
            ours = suite.frame_values[k][:n]
            res.max_diff[k] = max(0.0 if x == y else abs(x - y) for x, y in zip(ours, theirs, strict=True))
        res.compared_means = {
            side: {k: float(np.mean(v[:n])) for k, v in r.frame_values.items()}
            for side, r in (("suite", suite), ("naive", naive_r))
        }
    res.table_md = render_markdown(res)
    return res


def main(argv: list[str]) -> int:
    """The child's end: measure the side its arguments name, write the record."""
    from harness.store import write_record

    kind, a, b, device, limit, out = argv
    if kind not in KINDS:
        raise SystemExit(f"harness.bench.run: unknown side {kind!r} (one of: {', '.join(KINDS)})")
    write_record(Path(out), run_side(kind, a, b, device, int(limit)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

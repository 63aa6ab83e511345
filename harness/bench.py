"""Benchmark of the metric suite against a naive per-frame scikit-image loop.

Generates a pair of the pull request's size (362 frames, 768x1344, H.264 yuv420p + 32 kHz
stereo AAC; the second file a perturbed copy so no metric is trivial), caches it, and times
each side in a fresh subprocess so that its peak RSS is its own:

* ``suite``: ``measure_pair`` (PSNR, SSIM, both runs' statistics, audio), one decode of each file;
* ``naive``: decode in lockstep and call ``skimage.metrics`` PSNR + SSIM per frame. It is slow,
  so it runs on the first ``naive_frames`` frames and is extrapolated (the table says so);
* ``suite x2``: the suite on a video twice as long, to show time linear and memory flat.

Run standalone: ``python -m harness.bench --device cuda --frames 362`` (needs only PyAV,
numpy, OpenCV, pydantic, and torch for a GPU; scikit-image only for the naive side).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from harness.errors import HarnessError

RATE = 32000
FPS = 24
# The design's measurement of the OpenCV loop (RGB SSIM) on the 2-core machine, 362 frames:
# used to state how fast the machine was during a run, since a shared VM's speed drifts.
REFERENCE_OPENCV_LOOP_S = 42.6


class BenchRow(BaseModel):
    name: str
    frames: int  # frames the figures below stand for
    measured_frames: int  # frames actually processed (fewer when extrapolated)
    seconds: float
    frames_per_s: float
    cpu_seconds: float  # user + system of the subprocess (threads add up)
    peak_mb: float  # the subprocess's own peak RSS
    extrapolated: bool = False
    note: str = ""


class BenchResult(BaseModel):
    frames: int
    height: int
    width: int
    device: str
    cpu_count: int | None
    load_avg_before: list[float] = Field(default_factory=list)
    load_avg_after: list[float] = Field(default_factory=list)
    generate_s: float  # time spent generating the pair(s) in this call (0 when cached)
    rows: list[BenchRow]
    naive_over_suite: float | None = None
    opencv_over_suite: float | None = None
    suite_psnr_mean: float | None = None
    suite_ssim_mean: float | None = None
    naive_ssim_mean: float | None = None  # over its measured frames, to cross-check the suite
    suite_ssim_mean_same_frames: float | None = None
    table_md: str = ""  # the markdown table and notes, as printed

    def markdown(self) -> str:
        return self.table_md or _markdown(self)


# --- test material -------------------------------------------------------------------------


def _texture(h: int, w: int, seed: int) -> np.ndarray:
    """A large smooth-plus-detail RGB texture to pan over (video-like, compresses normally)."""
    import cv2

    rng = np.random.default_rng(seed)
    th, tw = h + h // 4 + 16, w + w // 4 + 16
    coarse = rng.integers(0, 256, (max(th // 32, 2), max(tw // 32, 2), 3), np.uint8)
    base = cv2.resize(coarse, (tw, th), interpolation=cv2.INTER_CUBIC).astype(np.float32)
    detail = cv2.GaussianBlur(rng.normal(0, 22, (th, tw, 3)).astype(np.float32), (0, 0), 1.3)
    return np.clip(0.8 * base + detail + 24, 0, 255).astype(np.uint8)


def synthetic_frames(n: int, h: int, w: int, *, perturbed: bool):
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
        ok = False
        if p.exists():
            try:
                ok = probe(p).frames == frames
            except HarnessError:
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


# --- the two sides, each run in a child process --------------------------------------------


def _child_suite(a: str, b: str, device: str) -> dict:
    from harness.collect.suite import measure_pair

    res = measure_pair(a, b, device=device)
    return {
        "frames": res.video.frames,
        "measured_frames": res.video.frames,
        "psnr_mean": res.video.psnr_mean,
        "ssim_mean": res.video.ssim_mean,
        "ssim_first": None,
        "device": res.device,
    }


def _child_naive(a: str, b: str, limit: int) -> dict:
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    from harness.media import iter_frames, probe

    total = probe(a).frames
    ssims = []
    for i, (fa, fb) in enumerate(
        zip(iter_frames(a, strict=False), iter_frames(b, strict=False), strict=False)
    ):
        if i >= limit:
            break
        peak_signal_noise_ratio(fa, fb, data_range=255)
        ssims.append(
            structural_similarity(
                fa,
                fb,
                gaussian_weights=True,
                sigma=1.5,
                use_sample_covariance=False,
                data_range=255,
                channel_axis=-1,
            )
        )
    return {"frames": total, "measured_frames": len(ssims), "ssim_first": float(np.mean(ssims))}


def _child_opencv(a: str, b: str, limit: int) -> dict:
    """The usual hand-written loop: OpenCV float64 Wang SSIM on RGB, PSNR and the statistics,
    one frame at a time on one thread (a calibration point for this machine's speed)."""
    import cv2

    from harness.media import iter_frames, probe

    def blur(x: np.ndarray) -> np.ndarray:
        return cv2.GaussianBlur(x, (11, 11), 1.5)

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    total = probe(a).frames
    ssims, prev, n = [], None, 0
    for fa, fb in zip(iter_frames(a, strict=False), iter_frames(b, strict=False), strict=False):
        if n >= limit:
            break
        cv2.PSNR(fa, fb)
        x, y = fa.astype(np.float64), fb.astype(np.float64)
        mx, my = blur(x), blur(y)
        vx, vy, vxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
        smap = ((2 * mx * my + c1) * (2 * vxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
        ssims.append(float(smap[5:-5, 5:-5].mean()))
        for f in (fa, fb):
            g = cv2.cvtColor(f, cv2.COLOR_RGB2GRAY)
            cv2.meanStdDev(g)
            cv2.Laplacian(g, cv2.CV_64F).var()
        if prev is not None:
            float(np.mean(cv2.absdiff(fa, prev)))
        prev = fa
        n += 1
    return {"frames": total, "measured_frames": n, "ssim_first": float(np.mean(ssims))}


def _child_main(kind: str, a: str, b: str, device: str, limit: int) -> None:
    # Imports are not part of the timing (scikit-image alone takes a second or two).
    if kind == "suite":
        import harness.collect.suite  # noqa: F401

        if device != "cpu":  # torch import and CUDA context creation: once per process, not timed
            import torch

            if torch.cuda.is_available():
                torch.zeros(1, device="cuda")
    elif kind == "naive":
        from skimage.metrics import peak_signal_noise_ratio, structural_similarity

        z = np.arange(768, dtype=np.uint8).reshape(16, 16, 3)  # first calls load scipy pieces:
        structural_similarity(z, z, gaussian_weights=True, data_range=255, channel_axis=-1)  # keep
        peak_signal_noise_ratio(z, z[::-1], data_range=255)  # them out of the timing
    import cv2  # noqa: F401

    import harness.media  # noqa: F401

    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if kind == "suite":
        out = _child_suite(a, b, device)
    elif kind == "naive":
        out = _child_naive(a, b, limit)
    else:
        out = _child_opencv(a, b, limit)
    out["seconds"] = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_seconds"] = ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime
    out["peak_mb"] = ru.ru_maxrss / 1024.0  # Linux reports KiB
    print("BENCH_JSON " + json.dumps(out))


def _spawn(kind: str, a: Path, b: Path, *, device: str = "cpu", limit: int = 0) -> dict:
    cmd = [sys.executable, "-m", "harness.bench", "--child", kind, "--a", str(a), "--b", str(b)]
    cmd += ["--device", device, "--naive-frames", str(limit)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            return json.loads(line.removeprefix("BENCH_JSON "))
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    raise HarnessError(f"benchmark side {kind!r} failed (exit {proc.returncode}): {tail[0]}")


def _row(name: str, r: dict, *, note: str = "") -> BenchRow:
    frames, measured = int(r["frames"]), int(r["measured_frames"])
    seconds = r["seconds"] * frames / max(measured, 1)  # extrapolated when measured < frames
    cpu = r["cpu_seconds"] * frames / max(measured, 1)
    return BenchRow(
        name=name,
        frames=frames,
        measured_frames=measured,
        seconds=seconds,
        frames_per_s=frames / seconds if seconds else 0.0,
        cpu_seconds=cpu,
        peak_mb=r["peak_mb"],
        extrapolated=measured < frames,
        note=note,
    )


def _markdown(res: BenchResult) -> str:
    lines = [
        f"Metric suite benchmark: {res.frames} frames {res.width}x{res.height} H.264 yuv420p + "
        f"{RATE // 1000} kHz stereo AAC, device {res.device}, {res.cpu_count} CPUs "
        f"(load average before {', '.join(f'{x:.2f}' for x in res.load_avg_before)}).",
        "",
        "| side | frames | seconds | frames/s | CPU s | peak MB | vs suite |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    suite = next((r for r in res.rows if r.name == "suite"), None)
    for r in res.rows:
        ratio = f"{r.seconds / suite.seconds:.1f}x" if suite and suite.seconds else "-"
        mark = "*" if r.extrapolated else ""
        lines.append(
            f"| {r.name} | {r.frames} | {r.seconds:.2f}{mark} | {r.frames_per_s:.1f} | "
            f"{r.cpu_seconds:.1f}{mark} | {r.peak_mb:.0f} | {ratio} |"
        )
    notes = [f"{r.name}: {r.note}" for r in res.rows if r.note]
    if any(r.extrapolated for r in res.rows):
        notes.append("* measured on the first frames only and scaled linearly to the full length")
    ocv = next((r for r in res.rows if r.name == "opencv loop"), None)
    if suite and ocv and res.frames == 362 and (res.height, res.width) == (768, 1344):
        scale = REFERENCE_OPENCV_LOOP_S / ocv.seconds
        notes.append(
            f"machine speed: the OpenCV loop took {ocv.seconds:.1f} s here against {REFERENCE_OPENCV_LOOP_S} s "
            f"in the design's reference measurement; at that speed the suite would take {suite.seconds * scale:.1f} s"
        )
    if res.suite_ssim_mean_same_frames is not None and res.naive_ssim_mean is not None:
        notes.append(
            f"cross-check on the naive side's frames: suite SSIM {res.suite_ssim_mean_same_frames:.8f}, "
            f"scikit-image {res.naive_ssim_mean:.8f}"
        )
    return "\n".join(lines + ([""] + notes if notes else []))


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
) -> BenchResult:
    """Time the metric suite against the naive loop (and on a 2x longer video); see module doc."""
    load_before = list(os.getloadavg())
    a, b, gen_s = ensure_pair(workdir, frames, height, width)
    rows = []
    suite = _spawn("suite", a, b, device=device)
    rows.append(_row("suite", suite, note=f"measure_pair on {suite['device']}"))
    naive_r = None
    if naive:
        limit = max(1, min(naive_frames, frames))
        naive_r = _spawn("naive", a, b, limit=limit)
        rows.append(_row("naive skimage loop", naive_r, note="skimage PSNR + SSIM (Wang mode) per frame"))
        ocv = _spawn("opencv", a, b, limit=limit)
        rows.append(
            _row(
                "opencv loop",
                ocv,
                note="one thread: cv2 float64 RGB SSIM, PSNR, luma/Laplacian/absdiff stats per frame",
            )
        )
    if double:
        a2, b2, gen2 = ensure_pair(workdir, 2 * frames, height, width)
        gen_s += gen2
        rows.append(_row("suite x2 length", _spawn("suite", a2, b2, device=device)))
    same_frames = None
    if naive_r is not None:
        from harness.collect.ssim import ssim
        from harness.media import iter_frames

        vals = []
        for i, (fa, fb) in enumerate(
            zip(iter_frames(a, strict=False), iter_frames(b, strict=False), strict=False)
        ):
            if i >= naive_r["measured_frames"]:
                break
            vals.append(ssim(fa, fb))
        same_frames = float(np.mean(vals))
    res = BenchResult(
        frames=frames,
        height=height,
        width=width,
        device=suite["device"],
        cpu_count=os.cpu_count(),
        load_avg_before=load_before,
        load_avg_after=list(os.getloadavg()),
        generate_s=gen_s,
        rows=rows,
        naive_over_suite=(rows[1].seconds / rows[0].seconds) if naive_r is not None else None,
        opencv_over_suite=(rows[2].seconds / rows[0].seconds) if naive_r is not None else None,
        suite_psnr_mean=suite["psnr_mean"],
        suite_ssim_mean=suite["ssim_mean"],
        naive_ssim_mean=naive_r["ssim_first"] if naive_r else None,
        suite_ssim_mean_same_frames=same_frames,
    )
    res.table_md = _markdown(res)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.bench", description=__doc__.splitlines()[0])
    p.add_argument("--workdir", default=None, help="where the generated pair is cached (default: a temp dir)")
    p.add_argument("--frames", type=int, default=362)
    p.add_argument("--height", type=int, default=768)
    p.add_argument("--width", type=int, default=1344)
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, auto")
    p.add_argument("--naive-frames", type=int, default=24, help="frames the naive loop runs (extrapolated)")
    p.add_argument("--no-naive", action="store_true")
    p.add_argument("--no-double", action="store_true")
    p.add_argument("--json", default=None, help="also write the result here")
    p.add_argument("--child", choices=["suite", "naive", "opencv"], help=argparse.SUPPRESS)
    p.add_argument("--a", help=argparse.SUPPRESS)
    p.add_argument("--b", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        if args.child:
            _child_main(args.child, args.a, args.b, args.device, args.naive_frames)
            return 0
        import tempfile

        workdir = args.workdir or os.path.join(tempfile.gettempdir(), "harness-bench")
        res = bench_metrics(
            workdir,
            frames=args.frames,
            height=args.height,
            width=args.width,
            naive=not args.no_naive,
            double=not args.no_double,
            device=args.device,
            naive_frames=args.naive_frames,
        )
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(res.markdown())
    if args.json:
        Path(args.json).write_text(res.model_dump_json(indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

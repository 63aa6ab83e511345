"""``bench_metrics``: the metric suite timed against a naive per-frame scikit-image loop on a pair of
the pull request's size, each side in its own process, into one ``BenchResult``."""

from __future__ import annotations

import os

import numpy as np

from harness.bench.child import measure_side
from harness.bench.material import ensure_pair
from harness.bench.result import NAIVE, OPENCV, SUITE, BenchResult, BenchRow, StageTimes, render_markdown
from harness.bench.sides import warm_up

OPENCV_FRAMES = 24  # the OpenCV yardstick always runs on a subset (it is not what is compared)


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
    """Time the metric suite against the naive loop (and on a 2x longer video); see ``harness.bench``.

    ``profile`` (default: on for the CPU suite) adds the time split of the CPU stages.
    """
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

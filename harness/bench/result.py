"""The metric benchmark's records (a side's measurement from its child process, the table's rows, the CPU
stages' time split, the whole result) and their markdown."""

from __future__ import annotations

from pydantic import Field

from harness.records import Record
from harness.text_table import md_rows

RATE, FPS = 32000, 24  # the material's audio rate and frame rate
# The design's measurement of the OpenCV loop (RGB SSIM) on the 2-core machine, 362 frames:
# quoted beside this run's own measurement, since a shared VM's speed drifts.
REFERENCE_OPENCV_LOOP_S = 42.6
MARK = "~"  # beside every figure scaled from a subset of frames
SUITE, NAIVE, OPENCV = "suite", "naive skimage loop", "opencv loop"  # the table's rows


class StageTimes(Record):
    """Thread CPU seconds of each stage run alone on one thread, over ``frames`` frame pairs."""

    frames: int
    decode: float  # H.264 -> YUV, both files, FFmpeg on one thread
    convert: float  # YUV -> RGB24 (libswscale), both files
    ssim_kernel: float  # the whole SSIM + SSE kernel
    ssim_blur_only: float  # the kernel with its SSIM formula skipped
    ssim_maps_only: float  # the kernel with its blurs and formula skipped
    stats: float  # luma, Laplacian, extreme-value and motion sums, both files
    hash: float  # sha256 of the decoded RGB frames, both files
    audio: float  # decode of both tracks, SNR, cosine, log-mel cosine, RMS/peak

    @property
    def blurs(self) -> float:
        return max(self.ssim_blur_only - self.ssim_maps_only, 0.0)

    @property
    def elementwise(self) -> float:
        return max(self.ssim_kernel - self.blurs, 0.0)

    @property
    def total(self) -> float:
        return self.decode + self.convert + self.ssim_kernel + self.stats + self.hash + self.audio


class SideResult(Record):
    """One side measured in its own process (the file a child writes for the parent)."""

    schema_version: str = Field("harness.bench_side/2", alias="schema")
    kind: str  # suite, naive, opencv or profile
    frames: int  # frames of the video (the figures are scaled to it)
    measured_frames: int  # frames actually processed
    seconds: float
    cpu_seconds: float  # user + system of the process (threads add up)
    peak_mb: float  # the process's own peak RSS
    setup_s: float  # imports, kernel loading, a CUDA context: before the clock started
    gpu_peak_mb: float | None = None  # torch's peak allocated GPU memory, GPU suite only
    device: str | None = None  # where the suite computed
    # The suite's metric key (harness.metrics) -> value; per-frame column -> the first frames' values
    metrics: dict[str, float] = Field(default_factory=dict)
    frame_values: dict[str, list[float]] = Field(default_factory=dict)
    profile: StageTimes | None = None  # the profile side's time split


class BenchRow(Record):
    name: str
    frames: int  # frames the figures below stand for
    measured_frames: int  # frames actually processed (fewer when extrapolated)
    seconds: float
    frames_per_s: float
    cpu_seconds: float  # user + system of the subprocess (threads add up)
    peak_mb: float  # the subprocess's own peak RSS
    extrapolated: bool = False
    note: str = ""
    setup_s: float | None = None  # imports and kernel loading before the clock started
    gpu_peak_mb: float | None = None  # torch's peak allocated GPU memory, GPU runs only

    @classmethod
    def of(cls, name: str, r: SideResult, *, note: str = "") -> BenchRow:
        """A side's figures scaled to the whole video (extrapolated when it measured fewer frames)."""
        scale = r.frames / max(r.measured_frames, 1)
        seconds = r.seconds * scale
        kept = r.model_dump(include={"frames", "measured_frames", "peak_mb", "setup_s", "gpu_peak_mb"})
        fps = r.frames / seconds if seconds else 0.0
        return cls(
            **kept,
            name=name,
            seconds=seconds,
            frames_per_s=fps,
            cpu_seconds=r.cpu_seconds * scale,
            extrapolated=r.measured_frames < r.frames,
            note=note,
        )


class BenchResult(Record):
    schema_version: str = Field("harness.bench/2", alias="schema")
    frames: int
    height: int
    width: int
    device: str
    cpu_count: int | None
    load_avg_before: list[float] = Field(default_factory=list)
    load_avg_after: list[float] = Field(default_factory=list)
    generate_s: float  # time spent generating the pair(s) in this call (0 when cached)
    kernels_s: float | None = None  # compiling (first use) or loading the CPU kernels, parent
    kernels_compiled: bool | None = None
    rows: list[BenchRow]
    profile: StageTimes | None = None
    naive_over_suite: float | None = None
    naive_over_suite_extrapolated: bool = False
    opencv_over_suite: float | None = None
    suite_metrics: dict[str, float] = Field(default_factory=dict)  # metric key -> the suite's value
    compared_frames: int = 0  # frames where the suite's and scikit-image's values are compared
    max_diff: dict[str, float] = Field(default_factory=dict)  # per-frame column -> max |suite - scikit-image|
    compared_means: dict[str, dict[str, float]] = Field(default_factory=dict)  # side -> column -> mean

    def row(self, name: str) -> BenchRow | None:
        return next((r for r in self.rows if r.name == name), None)

    table_md: str = ""  # the markdown table and notes, as printed

    def markdown(self) -> str:
        return self.table_md or render_markdown(self)


def _fmt(x: float, mark: bool, digits: int = 2) -> str:
    return f"{x:.{digits}f}{MARK if mark else ''}"


def _side_table(res: BenchResult) -> list[str]:
    naive = res.row(NAIVE)
    headers = ["side", "frames", "seconds", "frames/s", "CPU s", "peak MB"]
    headers += ["naive / side"] if naive else []
    rows = []
    for r in res.rows:
        m = r.extrapolated
        peak = f"{r.peak_mb:.0f}" + (f" (GPU {r.gpu_peak_mb:.0f})" if r.gpu_peak_mb is not None else "")
        rows.append([r.name, r.frames, _fmt(r.seconds, m), _fmt(r.frames_per_s, m, 1), _fmt(r.cpu_seconds, m, 1),
                     peak])  # fmt: skip
        if naive:
            ratio = naive.seconds / r.seconds if r.seconds and r is not naive else None
            rows[-1].append("-" if ratio is None else _fmt(ratio, naive.extrapolated or m, 1) + "x")
    return md_rows(headers, rows, "l" + "r" * (len(headers) - 1))


def _notes(res: BenchResult) -> list[str]:
    notes = [f"{r.name}: {r.note}" for r in res.rows if r.note]
    notes += [
        f"{MARK} {r.name}: measured on the first {r.measured_frames} of {r.frames} frames and "
        "scaled linearly to the full length (extrapolated, not measured)"
        for r in res.rows
        if r.extrapolated
    ]
    suite = res.row(SUITE)
    if suite and suite.setup_s is not None:
        what = "numba import and kernel load" if res.device == "cpu" else "torch import and CUDA context"
        notes.append(f"before each suite's clock started: {suite.setup_s:.2f} s ({what}, once per process)")
    if res.kernels_s is not None:
        how = (
            "compiled (first use on this machine; cached for later processes)"
            if res.kernels_compiled
            else "loaded from numba's cache"
        )
        notes.append(f"CPU kernels {how} in {res.kernels_s:.1f} s, before the sides ran")
    if suite and res.cpu_count and suite.seconds:
        busy = suite.cpu_seconds / (suite.seconds * res.cpu_count)
        notes.append(
            f"suite: {suite.cpu_seconds:.1f} CPU s in {suite.seconds:.2f} s wall on {res.cpu_count} CPUs, "
            f"{busy:.0%} of the machine busy"
        )
    ocv = res.row(OPENCV)
    if ocv and res.frames == 362 and (res.height, res.width) == (768, 1344):
        notes.append(
            f"machine speed: the OpenCV loop took {_fmt(ocv.seconds, ocv.extrapolated, 1)} s here; the design's "
            f"reference measurement on the 2-core machine is {REFERENCE_OPENCV_LOOP_S} s"
        )
    if res.max_diff:
        d, mean = res.max_diff, {side: m["ssim"] for side, m in res.compared_means.items()}
        notes.append(
            f"exactness on the {res.compared_frames} frames the naive side measured: max per-frame "
            f"|suite - scikit-image| SSIM {d['ssim']:.1e}, PSNR {d['psnr']:.1e} dB; "
            f"mean SSIM suite {mean['suite']:.8f}, scikit-image {mean['naive']:.8f}"
        )
    return notes


def _profile_lines(res: BenchResult, p: StageTimes) -> list[str]:
    stages = [
        ("decode H.264 to YUV (both files, FFmpeg on one thread)", p.decode),
        ("convert YUV to RGB24 (libswscale, both files)", p.convert),
        ("SSIM blurs: 4 maps x 2 separable 11-tap passes (a)", p.blurs),
        ("SSIM/PSNR element-wise: maps, SSIM formula, SSE (b)", p.elementwise),
        ("statistics: luma, Laplacian, extremes, motion (both files)", p.stats),
        ("sha256 of the decoded frames (both files)", p.hash),
        ("audio: decode both tracks, SNR, cosine, log-mel", p.audio),
    ]
    rows = [[name, f"{v:.2f}", f"{v / p.total:.0%}"] for name, v in stages]
    rows.append(["total", f"{p.total:.2f}", "100%"])
    out = [
        "",
        f"Time split: each stage of the CPU suite alone on one thread, {p.frames} frame pairs "
        "(thread CPU seconds):",
        "",
        *md_rows(["stage", "CPU s", "share"], rows, "lrr"),
        "",
        f"(a) kernel without its SSIM formula ({p.ssim_blur_only:.2f} s) minus the kernel without blurs "
        f"and formula ({p.ssim_maps_only:.2f} s); (b) the whole kernel ({p.ssim_kernel:.2f} s) minus (a).",
    ]
    suite = res.row(SUITE)
    if suite and not suite.extrapolated and suite.frames == p.frames and res.cpu_count:
        out.append(
            f"Alone, the stages add up to {p.total:.2f} CPU s; the suite overlapped them on "
            f"{res.cpu_count} CPUs: {suite.cpu_seconds:.1f} CPU s in {suite.seconds:.2f} s wall."
        )
    return out


def render_markdown(res: BenchResult) -> str:
    """The printed result: a line on the material and the machine, the sides' table, notes, and
    the time split of the CPU stages when it was measured."""
    load, load_after = (", ".join(f"{x:.2f}" for x in xs) for xs in (res.load_avg_before, res.load_avg_after))
    notes = _notes(res)
    out = [
        f"Metric suite benchmark: {res.frames} frames {res.width}x{res.height} H.264 yuv420p + "
        f"{RATE // 1000} kHz stereo AAC, device {res.device}, {res.cpu_count} CPUs "
        f"(load average before {load}; after {load_after}).",
        "",
        *_side_table(res),
        *([""] + notes if notes else []),
    ]
    if res.profile is not None:
        out += _profile_lines(res, res.profile)
    return "\n".join(out)

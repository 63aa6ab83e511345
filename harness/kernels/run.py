"""Run a kernel benchmark: every shape (synthetic, or captured q/k/v) x backend of a scenario of kind
``kernels`` against an exact reference and a matmul peak; ``run_kernels_scenario`` is ``harness kernels
SCENARIO`` (kernels.json, env.json, report.md and index.html)."""

from __future__ import annotations

import math
import platform
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from harness.attention.exact import exact_attention, full_fp32_matmul
from harness.attention.insitu.shadow import error_sums
from harness.attention.registry import AttentionBackend, UnsupportedCall, check_options, get_backend
from harness.attention.wrappers import KVReversed, bitwise_fields
from harness.envinfo import fingerprint, package_version, resolve_device
from harness.errors import BackendUnavailable, HarnessError, ScenarioError
from harness.kernels.report import write_kernels_report
from harness.kernels.results import (
    KERNELS_JSON,
    NOISE_FLOOR_LABEL,
    AccuracyMetrics,
    BitwiseCheck,
    KernelRow,
    KernelsResult,
    PeakResult,
    ShapeResult,
    SpeedMetrics,
    kernels_agreement,
    kernels_findings,
    unpaired_emulators,
)
from harness.kernels.schema import (
    GPU_MIN_REPEATS,
    BackendEntry,
    KernelsBlock,
    KernelShape,
    captured_shapes,
    load_captured,
)
from harness.safe_write import atomic_write_json
from harness.scenario.load import load_scenario
from harness.store import write_record

FP64_MAX_SCORES = 1 << 28  # reference "auto": fp64 up to this many scores B*H*Nq*Nk
ENV_JSON = "env.json"
Progress = Callable[[str], None]


def accuracy_metrics(out: torch.Tensor, ref: torch.Tensor, chunk_elems: int = 1 << 24) -> AccuracyMetrics:
    """Global and per-row errors of ``out`` against ``ref`` (same shape, last dim = row), in fp64 chunks."""
    if out.shape != ref.shape:
        raise HarnessError(f"accuracy_metrics: shapes differ {tuple(out.shape)} vs {tuple(ref.shape)}")
    d = out.shape[-1]
    o_rows, r_rows = out.reshape(-1, d), ref.reshape(-1, d)
    step = max(1, chunk_elems // d)
    sums, max_abs, nan_count, inf_count, zero_rows = [0.0] * 6, 0.0, 0, 0, 0
    row_cos: list[np.ndarray] = []
    for i in range(0, o_rows.shape[0], step):
        oc = o_rows[i : i + step]
        nan_count += int(torch.isnan(oc).sum())
        inf_count += int(torch.isinf(oc).sum())
        chunk, cos, zero = error_sums(oc.double(), r_rows[i : i + step].double())
        *added, chunk_max = chunk.tolist()
        sums = [a + b for a, b in zip(sums, added, strict=True)]
        max_abs = max(max_abs, chunk_max)
        zero_rows += int(zero)
        row_cos.append(cos.float().cpu().numpy())
    dot, oo, rr, abs_diff, abs_ref, sq_diff = sums
    rows = np.concatenate(row_cos) if row_cos else np.zeros(0, np.float32)
    n = out.numel()
    scale = dot / rr if rr > 0 else float("nan")  # least squares: out ~ scale x ref
    unscaled = float("nan")
    if abs_ref > 0 and math.isfinite(scale) and scale != 0:
        off = sum(
            float((o_rows[i : i + step].double() / scale - r_rows[i : i + step].double()).abs().sum())
            for i in range(0, o_rows.shape[0], step)
        )  # a second pass: the scale is known only once every chunk is summed
        unscaled = off / abs_ref
    return AccuracyMetrics(
        cosine=dot / math.sqrt(oo * rr) if oo > 0 and rr > 0 else float("nan"),
        rel_l1=abs_diff / abs_ref if abs_ref > 0 else float("nan"),
        rmse=math.sqrt(sq_diff / n) if n else float("nan"),
        max_abs_err=max_abs,
        row_cos_p10=float(np.percentile(rows, 10)) if rows.size else float("nan"),
        row_cos_min=float(rows.min()) if rows.size else float("nan"),
        row_cos_frac_gt_099=float((rows > 0.99).mean()) if rows.size else float("nan"),
        nan_count=nan_count,
        inf_count=inf_count,
        zero_rows=zero_rows,
        scale=scale,
        rel_l1_unscaled=unscaled,
    )


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12 if ms > 0 else float("nan")


def bitwise_compare(check: str, a: torch.Tensor, b: torch.Tensor) -> BitwiseCheck:
    fields = bitwise_fields(a, b)
    identical = {"max_abs_diff": 0.0} if fields["identical"] else {}  # kernels.json: 0.0, not null
    return BitwiseCheck(check=check, **identical, **fields)


def time_do_bench(fn: Callable[[], Any], expected_ms: float) -> float | None:
    """triton.testing.do_bench median in ms, or None when triton is not importable. Its sample is
    sized by time (``rep`` ms): for a call of tens of ms the budget grows to hold 20 calls."""
    try:
        from triton.testing import do_bench
    except Exception:
        return None
    warmup, rep = max(25, int(3 * expected_ms)), max(100, int(25 * expected_ms))
    try:
        return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    except TypeError:  # older triton: no return_mode
        return float(do_bench(fn, warmup=warmup, rep=rep, quantiles=[0.5]))


class Timer:
    """Milliseconds per call: on a GPU from CUDA events around each call (the flush buffer zeroed
    before each, at least GPU_MIN_REPEATS calls), on a CPU from the wall clock."""

    def __init__(self, device: torch.device, block: KernelsBlock):
        self.block = block  # warmup, repeats, do_bench: what each timed call follows
        self.cuda = device.type == "cuda"
        self.kind: Literal["cuda_events", "wall"] = "cuda_events" if self.cuda else "wall"
        self.flush = None
        if self.cuda and block.flush_l2:
            self.flush = torch.empty(block.flush_mb << 20, dtype=torch.int8, device=device)

    def repeats(self, n: int) -> int:
        return max(n, GPU_MIN_REPEATS) if self.cuda else n

    def run(self, fn: Callable[[], Any], warmup: int, repeats: int) -> list[float]:
        for _ in range(warmup):
            fn()
        if not self.cuda:
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            return times
        torch.cuda.synchronize()
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(repeats)
        ]
        for start, end in events:
            if self.flush is not None:
                self.flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in events]


def _env(device: torch.device) -> tuple[str, dict[str, str | None]]:
    env: dict[str, str | None] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        **{name: package_version(name) for name in ("triton", "sageattention", "amd-aiter")},
        "python": platform.python_version(),
        "cpu_threads": str(torch.get_num_threads()),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env["gpu_arch"] = getattr(props, "gcnArchName", None) or f"sm{props.major}{props.minor}"
        return torch.cuda.get_device_name(device), env
    return platform.processor() or platform.machine(), env


def _make_inputs(shape: KernelShape, device: torch.device, seed: int) -> tuple[torch.Tensor, ...]:
    dtype = getattr(torch, shape.dtype)
    g = torch.Generator(device=device).manual_seed(seed)
    b, h, d, n_k = shape.batch, shape.heads, shape.head_dim, shape.seq_k or shape.seq_q

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=g, device=device, dtype=dtype)

    q = randn(b, h, shape.seq_q, d).mul_(shape.q_scale)
    k, v = randn(b, h, n_k, d), randn(b, h, n_k, d)
    for x, bias in ((k, shape.k_bias), (v, shape.v_bias)):
        if bias:
            x.add_(bias * randn(b, h, 1, d))
    return q, k, v


def fresh(tensors) -> list[torch.Tensor]:
    """Copies of the inputs for one call that may write into them."""
    return [x.clone() for x in tensors]


def _bitwise_checks(
    backend: AttentionBackend, out: torch.Tensor, q, k, v, scale: float
) -> list[BitwiseCheck]:
    checks: list[BitwiseCheck] = []
    direct = backend.direct_call()
    if direct is None:
        checks.append(BitwiseCheck(check="registry_vs_direct", note="no direct call known for this backend"))
        reference = out
    else:
        reference = direct(*fresh((q, k, v)), scale)
        # The op against itself first: a difference there is the kernel's, not the wrapper's.
        checks.append(bitwise_compare("direct_vs_direct", direct(*fresh((q, k, v)), scale), reference))
        checks.append(bitwise_compare("registry_vs_direct", out, reference))
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    expected = reference.transpose(1, 2).reshape(b * n_q, h * d)

    def packed(check: str, *args: Any, **kwargs: Any) -> BitwiseCheck:
        try:
            return bitwise_compare(check, backend.apply(*args, softmax_scale=scale, **kwargs), expected)
        except UnsupportedCall as err:
            return BitwiseCheck(check=check, note=f"refused: {err}")

    if b == 1:
        shd = [x[0].transpose(0, 1).contiguous() for x in (q, k, v)]  # [N, H, D]
        cu_q = torch.tensor([0, n_q], dtype=torch.int32, device=q.device)
        cu_k = torch.tensor([0, n_k], dtype=torch.int32, device=q.device)
        checks.append(packed("packed_3d_vs_direct", *shd, cu_q, cu_k, n_q, n_k, causal=False))
        del shd
    else:
        checks.append(BitwiseCheck(check="packed_3d_vs_direct", note="n/a (B > 1)"))
    bshd = [x.transpose(1, 2).contiguous() for x in (q, k, v)]  # [B, N, H, D]
    checks.append(packed("packed_4d_vs_direct", *bshd))
    return checks


def _speed(
    backend: AttentionBackend, q, k, v, scale: float, flops: float, timer: Timer, peak: float | None
) -> SpeedMetrics:
    def call() -> Any:
        return backend(q, k, v, scale)

    block = timer.block
    emulated = backend.emulated
    warmup = 0 if emulated else block.warmup  # the accuracy call already warmed the emulator up
    repeats = block.emulation_repeats if emulated else timer.repeats(block.repeats)
    times = timer.run(call, warmup, repeats)
    median = statistics.median(times)
    speed = SpeedMetrics(
        timer=timer.kind,
        warmup=warmup,
        repeats=repeats,
        l2_flush_mb=block.flush_mb if timer.flush is not None else None,
        median_ms=median,
        min_ms=min(times),
        max_ms=max(times),
        tflops=tflops(flops, median),
        note="emulator (numerics model), not a kernel" if emulated else None,
    )
    if peak and timer.cuda:  # a CPU's matmul (bf16 may lack native support there) is no known peak
        speed.frac_of_peak = speed.tflops / peak
    if timer.cuda and block.do_bench and not emulated:
        db = time_do_bench(call, expected_ms=median)
        if db is not None:
            speed.do_bench_ms = db
            speed.do_bench_tflops = tflops(flops, db)
            speed.do_bench_diff_pct = (median - db) / db * 100.0
    quantize = getattr(backend, "quantize", None)
    if callable(quantize):
        speed.quant_ms = statistics.median(timer.run(lambda: quantize(q, k, v, scale), warmup, repeats))
    return speed


def _measure_peak(dtype_name: str, size: int, device: torch.device, timer: Timer) -> PeakResult:
    block = timer.block
    dtype = getattr(torch, dtype_name)
    g = torch.Generator(device=device).manual_seed(1)
    a = torch.randn(size, size, generator=g, device=device, dtype=dtype)
    b = torch.randn(size, size, generator=g, device=device, dtype=dtype)
    flops = 2.0 * size**3
    with full_fp32_matmul():
        median = statistics.median(timer.run(lambda: a @ b, block.warmup, timer.repeats(block.repeats)))
        db = time_do_bench(lambda: a @ b, expected_ms=median) if timer.cuda and block.do_bench else None
    return PeakResult(
        dtype=dtype_name,
        size=size,
        median_ms=median,
        tflops=tflops(flops, median),
        timer=timer.kind,
        do_bench_tflops=tflops(flops, db) if db else None,
    )


def _run_entry(
    entry: BackendEntry,
    shape: KernelShape,
    inputs: tuple[torch.Tensor, ...],
    ref: torch.Tensor,
    scale: float,
    timer: Timer,
    peaks: dict[str, PeakResult],
) -> KernelRow:
    q, k, v = inputs
    row = KernelRow(shape=shape.name, label=entry.key, backend=entry.backend, status="ok")
    try:
        backend = get_backend(entry.backend, **entry.options)
    except BackendUnavailable as err:
        row.status, row.reason = "skipped", str(err)
        return row
    row.backend, row.params = backend.name, backend.params
    row.exact, row.emulated = backend.exact, backend.emulated
    try:
        # Every call gets its own copy of the shape's inputs: an op may write into them
        # (SageAttention 1.x subtracts K's mean from K), and the next call, check or backend
        # must see the inputs the reference saw.
        out = backend(*fresh(inputs), scale)
        row.accuracy = accuracy_metrics(out, ref)
        if timer.block.bitwise:
            row.bitwise = _bitwise_checks(backend, out, q, k, v, scale)
        del out
        torch.cuda.empty_cache()  # a no-op where CUDA never started
        if timer.block.timing:
            peak = peaks.get(shape.dtype)
            row.speed = _speed(
                backend, *fresh(inputs), scale, shape.flops, timer, peak.tflops if peak else None
            )
    except UnsupportedCall as err:
        row.status, row.reason = "skipped", f"refused: {err}"
    except (RuntimeError, ValueError, HarnessError) as err:  # OOM, kernel errors: record, go on
        row.status, row.reason = "failed", f"{type(err).__name__}: {err}".splitlines()[0]
    torch.cuda.empty_cache()
    return row


def run_kernels(
    block: KernelsBlock, out_dir: Path, progress: Progress | None = None, *, name: str = "kernels"
) -> KernelsResult:
    """Measure every shape x backend of ``block``; write ``out_dir/kernels.json``; return the result."""
    say = progress or (lambda _msg: None)
    for entry in block.backends:  # unknown backends or options: fail before measuring anything
        if why := check_options(entry.backend, entry.options):
            raise HarnessError(f"kernels.backends[{entry.key}]: {why}")
    captured = [c for entry in block.captured for c in captured_shapes(entry)]  # every file checked first
    started = time.perf_counter()
    device = torch.device(resolve_device(block.device, context="kernels"))
    device_name, env = _env(device)
    result = KernelsResult(
        name=name,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        duration_s=0.0,
        device=device.type,
        device_name=device_name,
        env=env,
        block=block.model_dump(mode="json"),
    )
    if device.type == "cuda" and block.repeats < 20:
        result.notes.append(f"repeats raised from {block.repeats} to 20 on the GPU")
    timer = Timer(device, block)
    if block.timing and block.peak:
        size = block.peak_size or (8192 if device.type == "cuda" else 256)
        for dtype_name in sorted({s.dtype for s in block.shapes}):
            say(f"matmul peak {dtype_name} {size}^3")
            result.peaks[dtype_name] = _measure_peak(dtype_name, size, device, timer)
    jobs = [(s, s.head_dim**-0.5, None) for s in block.shapes] + [(c.shape, c.scale, c) for c in captured]
    for index, (shape, scale, cap) in enumerate(jobs):
        say(f"shape {shape.name}: {'captured ' if cap else ''}inputs and reference")
        inputs = load_captured(cap, device) if cap else _make_inputs(shape, device, block.seed + index)
        choice = block.reference
        if choice == "auto":
            scores = shape.batch * shape.heads * shape.seq_q * (shape.seq_k or shape.seq_q)
            choice = "fp64" if scores <= FP64_MAX_SCORES else "fp32"
        ref_dtype = torch.float64 if choice == "fp64" else torch.float32
        chunk = 1 << 23 if device.type != "cuda" else 1 << (28 if ref_dtype == torch.float32 else 27)
        t0 = time.perf_counter()
        ref = exact_attention(*inputs, scale, compute_dtype=ref_dtype, max_chunk_elems=chunk)
        if device.type == "cuda":
            torch.cuda.synchronize()
        result.shapes.append(
            ShapeResult(
                shape=shape,
                scale=scale,
                flops=shape.flops,
                reference_dtype=str(ref_dtype).removeprefix("torch."),
                reference_s=time.perf_counter() - t0,
                captured=str(cap.file) if cap else None,
            )
        )
        for entry in block.entries_for(shape):  # then every backend and the noise floor on these inputs
            say(f"shape {shape.name}: {entry.key}")
            result.rows.append(_run_entry(entry, shape, inputs, ref, scale, timer, result.peaks))
        if block.noise_floor:
            say(f"shape {shape.name}: noise floor")
            op = KVReversed(get_backend("torch_sdpa"))
            floor = KernelRow(shape=shape.name, label=NOISE_FLOOR_LABEL, backend="torch_sdpa", status="ok")
            floor.role, floor.exact, floor.params = "noise_floor", True, op.params
            floor.accuracy = accuracy_metrics(op(*inputs, scale), ref)
            result.rows.append(floor)
        del inputs, ref
        torch.cuda.empty_cache()
    result.findings = kernels_findings(result)
    result.agreement = kernels_agreement(result)
    result.unpaired_emulators = unpaired_emulators(result, result.agreement)
    result.duration_s = time.perf_counter() - started
    write_record(Path(out_dir) / KERNELS_JSON, result)
    return result


def run_kernels_scenario(
    ref: str | Path, *, out_root: Path = Path("reports"), console=None
) -> tuple[KernelsResult, dict[str, Path]]:
    """``harness kernels SCENARIO``: measure, then write reports/<scenario>/kernels/{kernels.json,
    env.json, report.md, index.html}; returns the result and the paths to print."""
    scenario = load_scenario(ref)
    if scenario.kind != "kernels" or scenario.kernels is None:
        raise ScenarioError(
            f"{ref}: scenario {scenario.name} is of kind {scenario.kind!r}; use `harness run`"
        )
    out_dir = Path(out_root) / scenario.name / "kernels"

    def progress(msg: str) -> None:
        if console is not None:
            console.print(f"[kernels] {msg}", markup=False, highlight=False)

    result = run_kernels(scenario.kernels, out_dir, progress, name=scenario.name)
    if console is not None:  # each emulator beside its kernel, in the words report.md gives it
        for line in [a.summary for a in result.agreement] + [u.text for u in result.unpaired_emulators]:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    atomic_write_json(out_dir / ENV_JSON, fingerprint())
    return result, {"kernels.json": out_dir / KERNELS_JSON, **write_kernels_report(result, out_dir)}

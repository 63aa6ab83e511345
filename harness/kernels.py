"""Kernel-level accuracy and speed of attention backends (scenario kind ``kernels``).

For every shape x backend: accuracy against an exact reference (fp64 or fp32, chunked over
queries), the noise floor (torch_sdpa with K/V reversed against the same reference), speed
(CUDA events with an L2 flush between calls, median, side by side with triton's do_bench when
triton imports; wall time on CPU), TFLOP/s as a fraction of a matmul peak measured in the same
run, and bitwise checks (registry vs direct op call; LightX2V-style packed calls).

Standalone: ``python -m harness.kernels SCENARIO_YAML --out DIR`` (needs torch, numpy, pyyaml,
pydantic; triton / sageattention / aiter are used when present).
"""

from __future__ import annotations

import argparse
import importlib
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field

from harness.attention import (
    AttentionBackend,
    KVReversed,
    UnsupportedCall,
    backend_class,
    exact_attention,
    get_backend,
    sage_attention_emulated,
)
from harness.attention.exact import _sdpa_context, full_fp32_matmul
from harness.envinfo import package_version, resolve_device
from harness.errors import BackendUnavailable, HarnessError
from harness.kernels_schema import BackendEntry, KernelsBlock, KernelShape, load_kernels_file
from harness.records import Record
from harness.store import atomic_write_text, write_record

KERNELS_JSON = "kernels.json"
KERNELS_MD = "kernels.md"
FP64_MAX_SCORES = 1 << 28  # reference "auto": fp64 up to this many scores B*H*Nq*Nk
NOISE_FLOOR_LABEL = "torch_sdpa[kv_reversed]"
Progress = Callable[[str], None]

CONVENTIONS = {
    "cosine": "sum(o*r)/sqrt(sum(o^2)*sum(r^2)) over all elements, fp64",
    "rel_l1": "sum|o-r| / sum|r| (r = reference)",
    "rmse": "sqrt(mean((o-r)^2))",
    "row_cosine": "cosine over D of each (b, h, query) row; p10 = 10th percentile (numpy linear)",
    "zero_rows": "output rows that are all zero while the reference row is not",
    "flops": "4*B*H*Nq*Nk*D (QK^T and PV, non-causal)",
    "time": "median of repeats; GPU: CUDA events around each call, L2 flushed before each; CPU: wall clock",
    "do_bench": "triton.testing.do_bench(fn, warmup=25, rep=100), median",
    "peak": "square matmul C=A@B of the shape's dtype, 2*n^3 flops, same timer",
    "reference": "exact softmax attention in fp64/fp32 with IEEE fp32 matmuls, chunked over queries",
    "noise_floor": "torch_sdpa with K and V reversed along the sequence vs the same reference",
}


class AccuracyMetrics(Record):
    cosine: float
    rel_l1: float
    rmse: float
    max_abs_err: float
    row_cos_p10: float
    row_cos_min: float
    row_cos_frac_gt_099: float
    nan_count: int
    inf_count: int
    zero_rows: int


class SpeedMetrics(Record):
    timer: Literal["cuda_events", "wall"]
    warmup: int
    repeats: int
    l2_flush_mb: int | None = None
    median_ms: float
    min_ms: float
    max_ms: float
    tflops: float
    frac_of_peak: float | None = None
    do_bench_ms: float | None = None
    do_bench_tflops: float | None = None
    do_bench_diff_pct: float | None = None  # (events - do_bench) / do_bench * 100
    quant_ms: float | None = None  # quantization step alone, where the backend exposes it
    note: str | None = None


class BitwiseCheck(Record):
    check: str  # registry_vs_direct | packed_3d_vs_direct | packed_4d_vs_direct
    identical: bool | None = None
    max_abs_diff: float | None = None
    note: str | None = None


class KernelRow(Record):
    shape: str
    label: str
    backend: str
    role: Literal["candidate", "noise_floor"] = "candidate"
    status: Literal["ok", "skipped", "failed"]
    reason: str | None = None
    exact: bool | None = None
    emulated: bool = False
    params: dict[str, Any] = Field(default_factory=dict)
    accuracy: AccuracyMetrics | None = None
    speed: SpeedMetrics | None = None
    bitwise: list[BitwiseCheck] = Field(default_factory=list)


class PeakResult(Record):
    dtype: str
    size: int
    median_ms: float
    tflops: float
    timer: str
    do_bench_tflops: float | None = None


class ShapeResult(Record):
    shape: KernelShape
    scale: float
    flops: float
    reference_dtype: str
    reference_s: float


class KernelsResult(Record):
    schema_version: str = Field("harness.kernels/1", alias="schema")
    name: str
    created_at: str
    duration_s: float
    device: str
    device_name: str
    env: dict[str, str | None] = Field(default_factory=dict)
    conventions: dict[str, str] = Field(default_factory=lambda: dict(CONVENTIONS))
    block: dict[str, Any] = Field(default_factory=dict)
    peaks: dict[str, PeakResult] = Field(default_factory=dict)
    shapes: list[ShapeResult] = Field(default_factory=list)
    rows: list[KernelRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


# --- metrics (pure: tensors in, numbers out) ----------------------------------------------------


def accuracy_metrics(out: torch.Tensor, ref: torch.Tensor, chunk_elems: int = 1 << 24) -> AccuracyMetrics:
    """Global and per-row errors of ``out`` against ``ref`` (same shape, last dim = row), in fp64 chunks."""
    if out.shape != ref.shape:
        raise HarnessError(f"accuracy_metrics: shapes differ {tuple(out.shape)} vs {tuple(ref.shape)}")
    d = out.shape[-1]
    o_rows, r_rows = out.reshape(-1, d), ref.reshape(-1, d)
    step = max(1, chunk_elems // d)
    dot = oo = rr = abs_diff = abs_ref = sq_diff = 0.0
    max_abs, nan_count, inf_count, zero_rows = 0.0, 0, 0, 0
    row_cos: list[np.ndarray] = []
    for i in range(0, o_rows.shape[0], step):
        oc, rc = o_rows[i : i + step], r_rows[i : i + step].double()
        nan_count += int(torch.isnan(oc).sum())
        inf_count += int(torch.isinf(oc).sum())
        o = oc.double()
        diff = o - rc
        dot += float((o * rc).sum())
        oo += float((o * o).sum())
        rr += float((rc * rc).sum())
        abs_diff += float(diff.abs().sum())
        abs_ref += float(rc.abs().sum())
        sq_diff += float((diff * diff).sum())
        max_abs = max(max_abs, float(diff.abs().max()) if diff.numel() else 0.0)
        o_norm, r_norm = o.norm(dim=-1), rc.norm(dim=-1)
        zero_rows += int(((o_norm == 0) & (r_norm > 0)).sum())
        cos = (o * rc).sum(-1) / (o_norm * r_norm).clamp_min(torch.finfo(torch.float64).tiny)
        cos = torch.where((o_norm == 0) & (r_norm == 0), torch.ones_like(cos), cos)
        row_cos.append(cos.float().cpu().numpy())
    rows = np.concatenate(row_cos) if row_cos else np.zeros(0, np.float32)
    n = out.numel()
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
    )


def attention_flops(b: int, h: int, n_q: int, n_k: int, d: int) -> float:
    return 4.0 * b * h * n_q * n_k * d


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12 if ms > 0 else float("nan")


def bitwise_compare(check: str, a: torch.Tensor, b: torch.Tensor) -> BitwiseCheck:
    if a.shape != b.shape:
        return BitwiseCheck(
            check=check, identical=False, note=f"shapes differ {tuple(a.shape)} vs {tuple(b.shape)}"
        )
    same = bool(torch.equal(a, b))
    return BitwiseCheck(
        check=check, identical=same, max_abs_diff=0.0 if same else float((a.float() - b.float()).abs().max())
    )


# --- timing -------------------------------------------------------------------------------------


def time_cuda(fn: Callable[[], Any], *, warmup: int, repeats: int, flush: torch.Tensor | None) -> list[float]:
    """Milliseconds per call from CUDA events around each call; ``flush`` is zeroed before each."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)
    ]
    for start, end in events:
        if flush is not None:
            flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def time_wall(fn: Callable[[], Any], *, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def time_do_bench(
    fn: Callable[[], Any], expected_ms: float | None = None, min_reps: int = 20
) -> float | None:
    """triton.testing.do_bench median in ms, or None when triton is not importable.

    do_bench sizes its sample by time (``rep`` ms); for a call of tens of ms its default 100 ms
    would give a median of only a few calls, so the budget grows to hold ``min_reps`` of them.
    """
    try:
        from triton.testing import do_bench
    except Exception:
        return None
    ms = expected_ms or 0.0
    warmup, rep = max(25, int(3 * ms)), max(100, int(1.25 * min_reps * ms))
    try:
        return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    except TypeError:  # older triton: no return_mode
        return float(do_bench(fn, warmup=warmup, rep=rep, quantiles=[0.5]))


class _Timer:
    def __init__(self, device: torch.device, block: KernelsBlock):
        self.cuda = device.type == "cuda"
        self.block = block
        self.flush = None
        if self.cuda and block.flush_l2:
            self.flush = torch.empty(block.flush_mb << 20, dtype=torch.int8, device=device)

    @property
    def kind(self) -> Literal["cuda_events", "wall"]:
        return "cuda_events" if self.cuda else "wall"

    def run(self, fn: Callable[[], Any], warmup: int, repeats: int) -> list[float]:
        if self.cuda:
            return time_cuda(fn, warmup=warmup, repeats=repeats, flush=self.flush)
        return time_wall(fn, warmup=warmup, repeats=repeats)


# --- running ------------------------------------------------------------------------------------


def _env(device: torch.device) -> tuple[str, dict[str, str | None]]:
    env: dict[str, str | None] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "triton": package_version("triton"),
        "sageattention": package_version("sageattention"),
        "amd-aiter": package_version("amd-aiter"),
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

    q = randn(b, h, shape.seq_q, d)
    if shape.q_scale != 1.0:
        q.mul_(shape.q_scale)
    k, v = randn(b, h, n_k, d), randn(b, h, n_k, d)
    if shape.k_bias:
        k.add_(shape.k_bias * randn(b, h, 1, d))
    if shape.v_bias:
        v.add_(shape.v_bias * randn(b, h, 1, d))
    return q, k, v


def _reference_dtype(choice: str, shape: KernelShape) -> torch.dtype:
    if choice == "fp64":
        return torch.float64
    if choice == "fp32":
        return torch.float32
    scores = shape.batch * shape.heads * shape.seq_q * (shape.seq_k or shape.seq_q)
    return torch.float64 if scores <= FP64_MAX_SCORES else torch.float32


def _direct_call(backend: AttentionBackend) -> Callable[..., torch.Tensor] | None:
    """The same op called without the registry (written independently of the backend classes)."""
    name, o = backend.name, backend.options
    if name == "torch_sdpa":

        def sdpa(q, k, v, s):
            with _sdpa_context(o["sdpa_backend"]):
                return F.scaled_dot_product_attention(q, k, v, scale=s)

        return sdpa
    if name in ("sage_emul_thuml", "sage_emul_aiter"):
        flavor = name.rsplit("_", 1)[-1]
        return lambda q, k, v, s: sage_attention_emulated(q, k, v, s, flavor=flavor, **o)
    if name == "sage_attn2":
        fn = getattr(importlib.import_module("sageattention"), backend.params["function"])
        return lambda q, k, v, s: fn(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=s, **o["kwargs"])
    if name == "aiter_sage_attn":
        from harness.attention.aiter_ops import _find_sage_op, _scale_parameter

        op, _ = _find_sage_op(importlib.import_module("aiter"))
        arg = _scale_parameter(op)

        def sage(q, k, v, s):
            bshd = [x.transpose(1, 2).contiguous() for x in (q, k, v)]
            return op(*bshd, **({arg: s} if arg else {})).transpose(1, 2)

        return sage
    if name == "aiter_attn":
        fa = importlib.import_module("aiter").flash_attn_func

        def flash(q, k, v, s):
            bshd = [x.transpose(1, 2).contiguous() for x in (q, k, v)]
            out = fa(*bshd, dropout_p=0.0, softmax_scale=s, causal=False)
            return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)

        return flash
    return None


def _bitwise_checks(
    backend: AttentionBackend, out: torch.Tensor, q, k, v, scale: float
) -> list[BitwiseCheck]:
    checks: list[BitwiseCheck] = []
    direct = _direct_call(backend)
    if direct is None:
        checks.append(BitwiseCheck(check="registry_vs_direct", note="no direct call known for this backend"))
        reference = out
    else:
        reference = direct(q, k, v, scale)
        checks.append(bitwise_compare("registry_vs_direct", out, reference))
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    expected = reference.transpose(1, 2).reshape(b * n_q, h * d)
    if b == 1:
        shd = [x[0].transpose(0, 1).contiguous() for x in (q, k, v)]  # [N, H, D]
        cu_q = torch.tensor([0, n_q], dtype=torch.int32, device=q.device)
        cu_k = torch.tensor([0, n_k], dtype=torch.int32, device=q.device)
        try:
            got = backend.apply(*shd, cu_q, cu_k, n_q, n_k, softmax_scale=scale, causal=False)
            checks.append(bitwise_compare("packed_3d_vs_direct", got, expected))
        except UnsupportedCall as err:
            checks.append(BitwiseCheck(check="packed_3d_vs_direct", note=f"refused: {err}"))
        del shd
    else:
        checks.append(BitwiseCheck(check="packed_3d_vs_direct", note="n/a (B > 1)"))
    bshd = [x.transpose(1, 2).contiguous() for x in (q, k, v)]  # [B, N, H, D]
    try:
        got = backend.apply(*bshd, softmax_scale=scale)
        checks.append(bitwise_compare("packed_4d_vs_direct", got, expected))
    except UnsupportedCall as err:
        checks.append(BitwiseCheck(check="packed_4d_vs_direct", note=f"refused: {err}"))
    return checks


def _speed(
    backend: AttentionBackend,
    q,
    k,
    v,
    scale: float,
    flops: float,
    timer: _Timer,
    block: KernelsBlock,
    peak: float | None,
) -> SpeedMetrics:
    def call() -> Any:
        return backend(q, k, v, scale)

    emulated = backend.emulated
    warmup = 0 if emulated else block.warmup  # the accuracy call already warmed the emulator up
    repeats = block.emulation_repeats if emulated else block.repeats
    if timer.cuda:
        repeats = repeats if emulated else max(repeats, 20)
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
    if peak:
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


def _measure_peak(
    dtype_name: str, size: int, device: torch.device, timer: _Timer, block: KernelsBlock
) -> PeakResult:
    dtype = getattr(torch, dtype_name)
    g = torch.Generator(device=device).manual_seed(1)
    a = torch.randn(size, size, generator=g, device=device, dtype=dtype)
    b = torch.randn(size, size, generator=g, device=device, dtype=dtype)
    flops = 2.0 * size**3
    with full_fp32_matmul():
        times = timer.run(
            lambda: a @ b, block.warmup, max(block.repeats, 20) if timer.cuda else block.repeats
        )
        db = (
            time_do_bench(lambda: a @ b, expected_ms=statistics.median(times))
            if timer.cuda and block.do_bench
            else None
        )
    median = statistics.median(times)
    return PeakResult(
        dtype=dtype_name,
        size=size,
        median_ms=median,
        tflops=tflops(flops, median),
        timer=timer.kind,
        do_bench_tflops=tflops(flops, db) if db else None,
    )


def _validate_entries(block: KernelsBlock) -> None:
    """Unknown backends or options are configuration errors: fail before measuring anything."""
    for entry in block.backends:
        cls = backend_class(entry.backend)
        unknown = sorted(set(entry.options) - set(cls.default_options))
        if unknown:
            raise HarnessError(
                f"kernels.backends[{entry.key}]: unknown option(s) {', '.join(unknown)} for {entry.backend}; "
                f"accepted: {', '.join(sorted(cls.default_options)) or 'none'}"
            )


def _free(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _run_entry(
    entry: BackendEntry,
    shape: KernelShape,
    inputs: tuple[torch.Tensor, ...],
    ref: torch.Tensor,
    scale: float,
    ctx: dict[str, Any],
) -> KernelRow:
    block: KernelsBlock = ctx["block"]
    q, k, v = inputs
    try:
        backend = get_backend(entry.backend, **entry.options)
    except BackendUnavailable as err:
        return KernelRow(
            shape=shape.name, label=entry.key, backend=entry.backend, status="skipped", reason=str(err)
        )
    row = KernelRow(
        shape=shape.name,
        label=entry.key,
        backend=backend.name,
        status="ok",
        exact=backend.exact,
        emulated=backend.emulated,
        params=backend.params,
    )
    try:
        out = backend(q, k, v, scale)
        row.accuracy = accuracy_metrics(out, ref)
        if block.bitwise:
            row.bitwise = _bitwise_checks(backend, out, q, k, v, scale)
        del out
        _free(q.device)
        if block.timing:
            peak = ctx["peaks"].get(shape.dtype)
            row.speed = _speed(
                backend, q, k, v, scale, shape.flops, ctx["timer"], block, peak.tflops if peak else None
            )
    except UnsupportedCall as err:
        row.status, row.reason = "skipped", f"refused: {err}"
    except (RuntimeError, ValueError, HarnessError) as err:  # OOM, kernel errors: record, go on
        row.status, row.reason = "failed", f"{type(err).__name__}: {err}".splitlines()[0]
    _free(q.device)
    return row


def _noise_floor_row(shape: KernelShape, inputs, ref, scale: float) -> KernelRow:
    q, k, v = inputs
    op = KVReversed(get_backend("torch_sdpa"))
    out = op(q, k, v, scale)
    row = KernelRow(
        shape=shape.name,
        label=NOISE_FLOOR_LABEL,
        backend="torch_sdpa",
        role="noise_floor",
        status="ok",
        exact=True,
        params=op.params,
        accuracy=accuracy_metrics(out, ref),
    )
    return row


def run_kernels(
    block: KernelsBlock, out_dir: Path, progress: Progress | None = None, *, name: str = "kernels"
) -> KernelsResult:
    """Measure every shape x backend of ``block``; write ``out_dir/kernels.json``; return the result."""
    say = progress or (lambda _msg: None)
    _validate_entries(block)
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
    timer = _Timer(device, block)
    if block.timing and block.peak:
        size = block.peak_size or (8192 if device.type == "cuda" else 256)
        for dtype_name in sorted({s.dtype for s in block.shapes}):
            say(f"matmul peak {dtype_name} {size}^3")
            result.peaks[dtype_name] = _measure_peak(dtype_name, size, device, timer, block)
        if device.type == "cpu":
            result.notes.append(
                "CPU: bf16/fp16 matmuls may lack native support here, so fractions of peak can exceed 1"
            )
    ctx = {"block": block, "timer": timer, "peaks": result.peaks}
    for index, shape in enumerate(block.shapes):
        say(f"shape {shape.name}: inputs and reference")
        inputs = _make_inputs(shape, device, block.seed + index)
        scale = shape.head_dim**-0.5
        ref_dtype = _reference_dtype(block.reference, shape)
        t0 = time.perf_counter()
        ref = exact_attention(
            *inputs, scale, compute_dtype=ref_dtype, max_chunk_elems=_ref_chunk(device, ref_dtype)
        )
        if device.type == "cuda":
            torch.cuda.synchronize()
        result.shapes.append(
            ShapeResult(
                shape=shape,
                scale=scale,
                flops=shape.flops,
                reference_dtype=str(ref_dtype).removeprefix("torch."),
                reference_s=time.perf_counter() - t0,
            )
        )
        for entry in block.entries_for(shape):
            say(f"shape {shape.name}: {entry.key}")
            result.rows.append(_run_entry(entry, shape, inputs, ref, scale, ctx))
        if block.noise_floor:
            say(f"shape {shape.name}: noise floor")
            result.rows.append(_noise_floor_row(shape, inputs, ref, scale))
        del inputs, ref
        _free(device)
    result.duration_s = time.perf_counter() - started
    out_dir = Path(out_dir)
    write_record(out_dir / KERNELS_JSON, result)
    return result


def _ref_chunk(device: torch.device, dtype: torch.dtype) -> int:
    if device.type == "cuda":
        return (1 << 28) if dtype == torch.float32 else (1 << 27)
    return 1 << 23


# --- markdown -----------------------------------------------------------------------------------


def _f(x: float | None, fmt: str) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return format(x, fmt)


def _bit(checks: list[BitwiseCheck], name: str) -> str:
    for c in checks:
        if c.check == name:
            if c.identical is None:
                return c.note or "-"
            return "identical" if c.identical else f"differs (max {c.max_abs_diff:.3g})"
    return "-"


def kernels_markdown(result: KernelsResult) -> str:
    """The tables for a pull request: accuracy, speed, bitwise checks, skipped rows."""
    lines = [f"## Attention kernels: {result.name}", ""]
    env = result.env
    versions = ", ".join(
        f"{k} {v}" for k, v in env.items() if v and k in ("torch", "triton", "sageattention", "amd-aiter")
    )
    lines.append(
        f"Device: {result.device_name} ({result.device}{', ' + env['gpu_arch'] if env.get('gpu_arch') else ''}); {versions}."
    )
    for p in result.peaks.values():
        db = f"; do_bench {p.do_bench_tflops:.1f}" if p.do_bench_tflops else ""
        lines.append(f"Matmul peak {p.dtype} {p.size}^3: {p.tflops:.3g} TFLOP/s ({p.timer}{db}).")
    for s in result.shapes:
        sh = s.shape
        note = f" - {sh.note}" if sh.note else ""
        lines.append(
            f"Shape `{sh.name}`: B={sh.batch} H={sh.heads} Nq={sh.seq_q} Nk={sh.seq_k} D={sh.head_dim} {sh.dtype}, "
            f"reference {s.reference_dtype}{note}."
        )
    lines += [f"- {n}" for n in result.notes]
    ok = [r for r in result.rows if r.accuracy is not None]
    lines += ["", "### Accuracy against the exact reference", ""]
    lines.append(
        "| shape | backend | cosine | rel L1 | RMSE | max abs | row cos p10 | rows cos>0.99 | NaN/Inf | zero rows |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in ok:
        a = r.accuracy
        assert a is not None
        lines.append(
            f"| {r.shape} | {r.label} | {a.cosine:.6f} | {a.rel_l1:.4f} | {a.rmse:.3e} | {a.max_abs_err:.3g} | "
            f"{a.row_cos_p10:.5f} | {a.row_cos_frac_gt_099:.4f} | {a.nan_count}/{a.inf_count} | {a.zero_rows} |"
        )
    timed = [r for r in result.rows if r.speed is not None]
    if timed:
        lines += ["", "### Speed", ""]
        lines.append(
            "| shape | backend | median ms | TFLOP/s | of peak | do_bench ms | do_bench TFLOP/s | diff | quant ms | timer |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for r in timed:
            s = r.speed
            assert s is not None
            label = f"{r.label} (emulator)" if r.emulated else r.label
            frac = f"{s.frac_of_peak:.1%}" if s.frac_of_peak is not None else "-"
            diff = f"{s.do_bench_diff_pct:+.1f}%" if s.do_bench_diff_pct is not None else "-"
            lines.append(
                f"| {r.shape} | {label} | {_f(s.median_ms, '.3f')} | {_f(s.tflops, '.4g')} | {frac} | "
                f"{_f(s.do_bench_ms, '.3f')} | {_f(s.do_bench_tflops, '.4g')} | {diff} | {_f(s.quant_ms, '.3f')} | "
                f"{s.timer} x{s.repeats} |"
            )
    checked = [r for r in result.rows if r.bitwise]
    if checked:
        lines += ["", "### Bitwise checks", ""]
        lines.append(
            "| shape | backend | registry vs direct op | packed [N,H,D] vs direct | packed [B,N,H,D] vs direct |"
        )
        lines.append("|---|---|---|---|---|")
        for r in checked:
            lines.append(
                f"| {r.shape} | {r.label} | {_bit(r.bitwise, 'registry_vs_direct')} | "
                f"{_bit(r.bitwise, 'packed_3d_vs_direct')} | {_bit(r.bitwise, 'packed_4d_vs_direct')} |"
            )
    other = [r for r in result.rows if r.status != "ok"]
    if other:
        lines += [
            "",
            "### Skipped or failed",
            "",
            "| shape | backend | status | reason |",
            "|---|---|---|---|",
        ]
        for r in other:
            lines.append(f"| {r.shape} | {r.label} | {r.status} | {(r.reason or '').replace('|', '/')} |")
    lines += [
        "",
        f"FLOPs: {CONVENTIONS['flops']}. Time: {CONVENTIONS['time']}. Run took {result.duration_s:.1f} s.",
        "",
    ]
    return "\n".join(lines)


# --- command line -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.kernels", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", help="YAML file with name, kind: kernels, kernels: {...}")
    parser.add_argument("--out", help="output folder (default: reports/<name>/kernels-<UTC time>)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="override kernels.device")
    args = parser.parse_args(argv)
    try:
        name, block = load_kernels_file(args.scenario)
        if args.device:
            block = KernelsBlock.model_validate({**block.model_dump(), "device": args.device})
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out_dir = Path(args.out) if args.out else Path("reports") / name / f"kernels-{stamp}"
        result = run_kernels(
            block, out_dir, lambda m: print(f"[kernels] {m}", file=sys.stderr, flush=True), name=name
        )
        text = kernels_markdown(result)
        atomic_write_text(out_dir / KERNELS_MD, text)
    except HarnessError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    print(text)
    print(f"[kernels] wrote {out_dir / KERNELS_JSON} and {out_dir / KERNELS_MD}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

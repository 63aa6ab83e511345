"""Measurements of one attention call: accuracy against a reference, bitwise comparison, TFLOP/s,
and the timers (CUDA events with an L2 flush, triton's do_bench, wall clock on a CPU)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import torch

from harness.errors import HarnessError
from harness.kernels.results import AccuracyMetrics, BitwiseCheck
from harness.kernels.schema import GPU_MIN_REPEATS, KernelsBlock


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
    if a.shape != b.shape:
        return BitwiseCheck(
            check=check, identical=False, note=f"shapes differ {tuple(a.shape)} vs {tuple(b.shape)}"
        )
    same = bool(torch.equal(a, b))
    return BitwiseCheck(
        check=check, identical=same, max_abs_diff=0.0 if same else float((a.float() - b.float()).abs().max())
    )


def time_do_bench(
    fn: Callable[[], Any], expected_ms: float | None = None, min_reps: int = 20
) -> float | None:
    """triton.testing.do_bench median in ms, or None when triton is not importable. Its sample is
    sized by time (``rep`` ms): for a call of tens of ms the budget grows to hold ``min_reps`` calls."""
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


class Timer:
    """Milliseconds per call: on a GPU from CUDA events around each call (the flush buffer zeroed
    before each, at least GPU_MIN_REPEATS calls), on a CPU from the wall clock."""

    def __init__(self, device: torch.device, block: KernelsBlock):
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

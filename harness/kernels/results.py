"""What a kernel benchmark writes to kernels.json: one row per shape x backend, the matmul peaks,
the environment, the conventions every figure was measured under, and each emulator's agreement
with the kernel it models where both ran (``kernels.agreement``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from harness.analysis.insitu_model import Finding
from harness.kernels.schema import KernelShape
from harness.records import Record

KERNELS_JSON = "kernels.json"
NOISE_FLOOR_LABEL = "torch_sdpa[kv_reversed]"
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


# The emulator models the rounding steps (INT8 QK, fp16 P and V, per-tile fp16 accumulation, padded
# keys), not the hardware's accumulation order, so a few % of rel L1 is its expected gap to the kernel
# (within 2 % on an H200 at every key length). A defect it misses (padded keys scored, or masked) moves
# rel L1 by 10-30x and the fitted scale by about 0.3: both bounds sit far from either.
RATIO_BOUND = 1.1  # rel L1 ratio (emulator / kernel) within [1 / RATIO_BOUND, RATIO_BOUND]
SCALE_BOUND = 0.01  # |emulator's fitted scale - kernel's| at most this
RULE = f"rel L1 ratio (emulator / kernel) within [1/{RATIO_BOUND:g}, {RATIO_BOUND:g}] and fitted scales within {SCALE_BOUND:g}"

AGREES = "agrees"
DOES_NOT_FOLLOW = "does not follow"
Word = Literal["agrees", "does not follow"]
MAX_NAMED_SHAPES = 6  # a summary names at most this many shapes that do not follow


class ShapeAgreement(Record):
    shape: str
    kernel_rel_l1: float
    emulator_rel_l1: float
    ratio: float  # emulator / kernel
    kernel_scale: float
    emulator_scale: float
    scale_diff: float  # emulator - kernel
    word: Word


class EmulatorAgreement(Record):
    """One emulator label beside one kernel label of the same run."""

    emulator: str  # the emulator's label
    emulator_backend: str
    kernel: str  # the kernel's label
    kernel_backend: str
    variant: str
    models: str  # the provenance's kernel: "thu-ml SageAttention 1.0.6 sageattn"
    models_short: str
    changed: list[str] = Field(default_factory=list)  # options away from the variant's: what is measured
    kernel_package: str = ""  # the kernel row's package choice ("sageattention1", "environment")
    kernel_function: str = ""
    kernel_version: str = ""
    kernel_commit: str = ""
    machine: str  # "NVIDIA H200 (cuda)"
    date: str  # ISO date of the run
    software: str  # "torch 2.11.0+cu130, triton 3.6.0, sageattention1 1.0.6 sageattn"
    rule: str = RULE
    shapes: list[ShapeAgreement]
    word: Word
    summary: str


class UnpairedEmulator(Record):
    """An emulator of the run whose kernel did not run beside it."""

    emulator: str
    kernel_backend: str
    package_choice: str = ""
    text: str


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
    # Least squares out ~ scale x ref, and the rel L1 of out / scale: an error that is mostly a
    # scale (padded keys in a softmax) keeps the direction, which cosine cannot see. None: older runs.
    scale: float | None = None
    rel_l1_unscaled: float | None = None


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
    check: str  # direct_vs_direct | registry_vs_direct | packed_3d_vs_direct | packed_4d_vs_direct
    identical: bool | None = None
    max_abs_diff: float | None = None
    note: str | None = None


def bitwise_reading(checks: list[BitwiseCheck]) -> str:
    """What the checks say together: a wrapper that changes the result, or a kernel that does not
    repeat itself (two direct calls on the same inputs differ)."""
    by = {c.check: c for c in checks}
    direct, registry = by.get("direct_vs_direct"), by.get("registry_vs_direct")
    wrapped = [c for c in checks if c.check != "direct_vs_direct" and c.identical is not None]
    if not wrapped:
        return "not checked"
    if all(c.identical for c in wrapped):
        return "identical: the backend adds nothing to the op"
    worst = max((c.max_abs_diff or 0.0) for c in wrapped if not c.identical)
    if direct is not None and direct.identical is False:
        return f"kernel nondeterministic (direct vs direct differs by max {direct.max_abs_diff:.3g})"
    if direct is not None and direct.identical:
        return f"wrapper changes the result (max {worst:.3g}; two direct calls are identical)"
    what = "the backend" if registry is None or registry.identical is None else "the wrapper or the kernel"
    return f"differs (max {worst:.3g}); {what}: no direct-vs-direct repeat to tell"


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
    captured: str | None = None  # the captured q/k/v file the inputs came from (None: synthetic)


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
    # Shapes far worse than the others, scaled outputs (kernels.findings; None: an older kernels.json)
    findings: list[Finding] | None = None
    # Each emulator beside the kernel it models, per shape (kernels.agreement; empty: none paired, or
    # an older kernels.json), and the emulators whose kernel did not run here
    agreement: list[EmulatorAgreement] = Field(default_factory=list)
    unpaired_emulators: list[UnpairedEmulator] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

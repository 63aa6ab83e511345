"""What a kernel benchmark writes to kernels.json (rows, peaks, environment, conventions), its findings
and each emulator beside the kernel it models, shape by shape, where both ran."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from harness.analysis.findings import Observation, find
from harness.analysis.insitu_model import Finding
from harness.emulator_provenance import Provenance, provenance_of
from harness.kernels.schema import KernelShape
from harness.number_format import percent_text, range_text, ratio_value
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
    # Shapes far worse than the others, scaled outputs (kernels_findings; None: an older kernels.json)
    findings: list[Finding] | None = None
    # Each emulator beside the kernel it models, per shape (kernels_agreement; empty: none paired, or
    # an older kernels.json), and the emulators whose kernel did not run here
    agreement: list[EmulatorAgreement] = Field(default_factory=list)
    unpaired_emulators: list[UnpairedEmulator] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def kernels_findings(result: KernelsResult) -> list[Finding]:
    shapes = {s.shape.name: s.shape for s in result.shapes}
    floors = {
        r.shape: r.accuracy.rel_l1
        for r in result.rows
        if r.role == "noise_floor" and r.accuracy is not None and math.isfinite(r.accuracy.rel_l1)
    }
    obs: dict[str, list[Observation]] = {}
    for r in result.rows:
        a, sh = r.accuracy, shapes.get(r.shape)
        if r.role != "candidate" or a is None or sh is None or not math.isfinite(a.rel_l1):
            continue
        attrs = {"k_len": sh.seq_k, "q_len": sh.seq_q, "shape": r.shape}
        obs.setdefault(r.label, []).append(
            Observation(attrs=attrs, l1=a.rel_l1, ref=1.0, floor_l1=floors.get(r.shape), scale=a.scale,
                        unscaled=a.rel_l1_unscaled)
        )  # fmt: skip
    return [f for label, rows in obs.items() for f in find(label, rows, what="shapes")]


def agreement_word(ratio: float, scale_diff: float) -> Word:
    """'agrees' when the rel L1 ratio lies within [1/RATIO_BOUND, RATIO_BOUND] and the scales within
    SCALE_BOUND; anything else (NaN and inf fail every comparison here) 'does not follow'."""
    ok = 1.0 / RATIO_BOUND <= ratio <= RATIO_BOUND and abs(scale_diff) <= SCALE_BOUND
    return AGREES if ok else DOES_NOT_FOLLOW


def rel_l1_ratio(emulator: float, kernel: float) -> float:
    """emulator / kernel; 1 where both are equal (both 0 included), inf over a kernel's 0."""
    if emulator == kernel:
        return 1.0
    if kernel == 0:
        return math.inf
    return emulator / kernel


def shape_agreement(shape: str, kernel: AccuracyMetrics, emulator: AccuracyMetrics) -> ShapeAgreement | None:
    """One shape's figures and word; None where either side has no fitted scale (an older record)."""
    if kernel.scale is None or emulator.scale is None:
        return None
    ratio = rel_l1_ratio(emulator.rel_l1, kernel.rel_l1)
    diff = emulator.scale - kernel.scale
    return ShapeAgreement(
        shape=shape,
        kernel_rel_l1=kernel.rel_l1,
        emulator_rel_l1=emulator.rel_l1,
        ratio=ratio,
        kernel_scale=kernel.scale,
        emulator_scale=emulator.scale,
        scale_diff=diff,
        word=agreement_word(ratio, diff),
    )


def pairs_with(provenance: Provenance, kernel_params: dict) -> bool:
    """Whether a kernel row (its params) is the kernel ``provenance`` models: the same harness backend
    and, where the provenance names a package choice, the same package; a kernel that ran the
    environment's package (or an older record without ``package``) pairs by version instead."""
    ref = provenance.kernel
    if not ref.backend or kernel_params.get("backend") != ref.backend:
        return False
    if not ref.package_choice:
        return True
    package = kernel_params.get("package")
    # its version (1.0.6) names the provenance's (1.0.6, or 2.2.0 at d1a57a5)
    if package in (None, "environment"):
        version = str(kernel_params.get("package_version") or "")
        return bool(version) and (ref.version == version or ref.version.startswith(version + " "))
    return package == ref.package_choice


def _by_label(result: KernelsResult) -> dict[str, dict[str, KernelRow]]:
    labels: dict[str, dict[str, KernelRow]] = {}
    for r in result.rows:
        if r.role == "candidate":
            labels.setdefault(r.label, {})[r.shape] = r
    return labels


def _emulators(labels: dict[str, dict[str, KernelRow]]) -> dict[str, Provenance]:
    """Emulator labels with a provenance that names a kernel backend (from their first ok row)."""
    found: dict[str, Provenance] = {}
    for label, rows in labels.items():
        named = (provenance_of(r.params) for r in rows.values() if r.emulated and r.status == "ok")
        if (p := next((p for p in named if p is not None and p.kernel.backend), None)) is not None:
            found[label] = p
    return found


def _ran(r: KernelRow | None) -> bool:
    return r is not None and r.status == "ok" and r.accuracy is not None


def _software(result: KernelsResult, kernel: KernelRow) -> str:
    p = kernel.params
    parts = [f"{k} {result.env[k]}" for k in ("torch", "triton") if result.env.get(k)]
    at = f"at {p['package_commit']}" if p.get("package_commit") else ""
    package = (p.get("package") or kernel.backend, p.get("package_version"), at, p.get("function"))
    return ", ".join([*parts, " ".join(str(x) for x in package if x)])


def summary_sentence(emulator: str, kernel: str, provenance: Provenance, shapes: list[ShapeAgreement]) -> str:
    """'sage_emul_thuml beside sage_attn2 (SageAttention 1.0.6 sageattn): agrees on 10 of 10 shapes,
    rel L1 within 1.7 % (ratio 0.98 to 1.02), scale within 0.003'."""
    what = provenance.kernel.short
    if provenance.changed:
        what += f", with {', '.join(provenance.changed)} changed"
    head = f"{emulator} beside {kernel} ({what})"
    ratios = [s.ratio for s in shapes]
    lo, hi = min(ratios), max(ratios)
    scale = ratio_value(max(abs(s.scale_diff) for s in shapes))
    off = [s.shape for s in shapes if s.word != AGREES]
    n = len(shapes)
    if not off:
        within = percent_text(max(hi - 1.0, 1.0 - lo))
        return (
            f"{head}: agrees on {n} of {n} shapes, rel L1 within {within} "
            f"(ratio {range_text(lo, hi)}), scale within {scale}"
        )
    named = ", ".join(off[:MAX_NAMED_SHAPES]) + (
        f" and {len(off) - MAX_NAMED_SHAPES} more" if len(off) > MAX_NAMED_SHAPES else ""
    )
    return (
        f"{head}: does not follow on {len(off)} of {n} shapes ({named}), agrees on {n - len(off)}; "
        f"rel L1 ratio {range_text(lo, hi)}, scale within {scale}"
    )


def kernels_agreement(result: KernelsResult) -> list[EmulatorAgreement]:
    """Every emulator label beside every kernel label it models, over the shapes both measured."""
    labels = _by_label(result)
    order = [s.shape.name for s in result.shapes]
    out: list[EmulatorAgreement] = []
    for e_label, provenance in _emulators(labels).items():
        e_rows = labels[e_label]
        for k_label, k_rows in labels.items():
            shapes: list[ShapeAgreement] = []
            kernel_row: KernelRow | None = None
            for name in order:
                e, k = e_rows.get(name), k_rows.get(name)
                if not (_ran(e) and _ran(k)) or k.emulated or not pairs_with(provenance, k.params):
                    continue
                s = shape_agreement(name, k.accuracy, e.accuracy)
                if s is not None:
                    shapes.append(s)
                    kernel_row = kernel_row or k
            if kernel_row is None:
                continue
            p = kernel_row.params
            out.append(
                EmulatorAgreement(
                    emulator=e_label,
                    emulator_backend=next(r.backend for r in e_rows.values() if r.status == "ok"),
                    kernel=k_label,
                    kernel_backend=kernel_row.backend,
                    variant=provenance.variant,
                    models=provenance.kernel.text(),
                    models_short=provenance.kernel.short,
                    changed=list(provenance.changed),
                    kernel_package=str(p.get("package") or ""),
                    kernel_function=str(p.get("function") or ""),
                    kernel_version=str(p.get("package_version") or ""),
                    kernel_commit=str(p.get("package_commit") or ""),
                    machine=f"{result.device_name} ({result.device})",
                    date=result.created_at[:10],
                    software=_software(result, kernel_row),
                    shapes=shapes,
                    word=AGREES if all(s.word == AGREES for s in shapes) else DOES_NOT_FOLLOW,
                    summary=summary_sentence(e_label, k_label, provenance, shapes),
                )
            )
    return out


def unpaired_emulators(result: KernelsResult, agreement: list[EmulatorAgreement]) -> list[UnpairedEmulator]:
    """The emulators of the run that name a kernel backend and found no kernel row to pair with."""
    paired = {a.emulator for a in agreement}
    out = []
    for label, provenance in _emulators(_by_label(result)).items():
        if label in paired:
            continue
        ref = provenance.kernel
        which = f" ({ref.package_choice})" if ref.package_choice else ""
        out.append(
            UnpairedEmulator(
                emulator=label,
                kernel_backend=ref.backend,
                package_choice=ref.package_choice,
                # What the emulator's record says instead: measured elsewhere (and where), or never.
                text=f"{label}: its kernel {ref.backend}{which} did not run here: no agreement measured; "
                f"on record: {provenance.badge()}",
            )
        )
    return out

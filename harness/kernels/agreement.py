"""An emulator beside the kernel it models (its provenance's backend and package), shape by shape,
within one kernel benchmark: both rel L1s, their ratio, both fitted scales and a word; an emulator
whose kernel did not run here is one line. The records and the rule live in ``kernels.results``."""

from __future__ import annotations

import math

from harness.emulator_provenance import Provenance, provenance_of
from harness.kernels.results import (
    AGREES,
    DOES_NOT_FOLLOW,
    MAX_NAMED_SHAPES,
    RATIO_BOUND,
    SCALE_BOUND,
    AccuracyMetrics,
    EmulatorAgreement,
    KernelRow,
    KernelsResult,
    ShapeAgreement,
    UnpairedEmulator,
    Word,
)
from harness.number_format import percent_text, range_text, ratio_value


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


def _version_matches(version: str, wanted: str) -> bool:
    """The kernel's package version (1.0.6) names the provenance's (1.0.6, or 2.2.0 at d1a57a5)."""
    return bool(version) and (wanted == version or wanted.startswith(version + " "))


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
    if package in (None, "environment"):
        return _version_matches(str(kernel_params.get("package_version") or ""), ref.version)
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

"""An emulator's fidelity to the kernel it reproduces, where both shadow the same run: a CPU verdict of the
emulator predicts the GPU kernel only as far as their errors agree call by call."""

from __future__ import annotations

import math
from statistics import median

from harness.analysis.insitu_model import Fidelity
from harness.insitu_records import InSituCall, InSituOp

AGREE = 0.2  # per-call rel L1 ratio within 1 +/- this, and scales within SCALE_AGREE: "agrees"
SCALE_AGREE = 0.02


def emulator_pairs(ops: list[InSituOp]) -> list[tuple[str, str]]:
    """(emulator, kernel) names among one run's ops."""
    kernels = [
        k
        for k in ops
        if not (k.kv_reversed or k.params.get("models") or k.params.get("sageattention") == "emulator")
    ]
    pairs = []
    for e in ops:  # an emulator is never among the kernels
        target, lightx2v = e.params.get("models"), e.params.get("sageattention") == "emulator"
        for k in kernels:
            by_package = k.attn_type == e.attn_type and k.params.get("sageattention") == "package"
            if (target and k.params.get("backend") == target) or (lightx2v and by_package):
                pairs.append((e.name, k.name))
    return pairs


def fidelity(emulator: str, kernel: str, items: list[tuple[str, InSituCall]]) -> Fidelity:
    """How closely ``emulator``'s error follows ``kernel``'s on the calls both measured."""
    both = []
    for key, c in items:
        e, k = c.errors.get(emulator), c.errors.get(kernel)
        if e is None or k is None or not (e.finite and k.finite) or k.rel_l1 <= 0:
            continue
        gap = abs(e.scale - k.scale) if e.scale is not None and k.scale is not None else None
        both.append((e.rel_l1 / k.rel_l1, gap, key, c))
    f = Fidelity(emulator=emulator, kernel=kernel, calls=len(both))
    if not both:
        f.text = f"emulator fidelity: {emulator} beside {kernel}: no call measured by both"
        return f
    ratios = [r for r, *_ in both]
    gaps = [g for _, g, *_ in both if g is not None]
    f.ratio_median, f.ratio_min, f.ratio_max = median(ratios), min(ratios), max(ratios)
    f.scale_diff_max = max(gaps) if gaps else None
    r, _, key, c = max(both, key=lambda t: abs(math.log(t[0])) if t[0] > 0 else math.inf)
    f.worst = f"run {key}, call {c.call}, {c.kind}, {c.k_len:,} keys: ratio {r:.3g}"
    agrees = all(abs(x - 1) <= AGREE for x in ratios) and all(g <= SCALE_AGREE for g in gaps)
    scales = f"; scales within {f.scale_diff_max:.3g}" if f.scale_diff_max is not None else ""
    word = (
        "agrees call by call"
        if agrees
        else f"does NOT follow the kernel on every call (worst: {f.worst}): its verdicts do not predict the kernel's"
    )
    f.text = (
        f"emulator fidelity: {emulator} beside {kernel} on {f.calls} call(s): its rel L1 over the kernel's, per call, "
        f"median {f.ratio_median:.3g} ({f.ratio_min:.3g} to {f.ratio_max:.3g}){scales}: {word} (agreement: within "
        f"{AGREE:.0%} and {SCALE_AGREE:g} in scale on every call)"
    )
    return f

"""Findings of a kernel benchmark (``analysis.findings`` on its rows, each weighing alike): per
backend, the shapes whose error is several times the others', and errors mostly a scale of the output."""

from __future__ import annotations

import math

from harness.analysis.findings import Observation, find
from harness.analysis.insitu_model import Finding
from harness.kernels.results import KernelsResult


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

"""The committed kernel benchmarks (reports/examples/**/kernels/): each report.md is what its
kernels.json renders to, and the key-length sweep run on an H200 shows what docs/examples.md says of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.kernels.report import kernels_report
from harness.kernels.results import KernelsResult
from harness.store import read_record

EXAMPLES = Path(__file__).resolve().parents[2] / "reports" / "examples"
KERNELS = sorted(EXAMPLES.rglob("kernels/kernels.json"))
LENGTHS = EXAMPLES / "h200" / "kernels_lengths" / "kernels" / "kernels.json"


def markdown(result) -> str:
    return "\n".join(kernels_report(result).lines)


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: str(p.parent.parent.relative_to(EXAMPLES)))
def test_each_committed_report_is_what_its_kernels_json_renders(path):
    result = read_record(path, KernelsResult)
    assert markdown(result) == (path.parent / "report.md").read_text()


def test_the_h200_length_sweep_puts_the_emulator_on_the_kernel():
    """thu-ml SageAttention 1.0.6 (sage_attn2) on the H200 beside sage_emul_thuml on the same inputs:
    within 3 % of each other at every key length (scales within 0.01), 0.2-0.4 where the last 64-key block is mostly
    padding, about 0.012 at multiples of 64; the corrected emulator stays near 0.012 throughout."""
    result = read_record(LENGTHS, KernelsResult)
    rel = {(r.shape, r.label): r.accuracy.rel_l1 for r in result.rows if r.accuracy is not None}
    scale = {(r.shape, r.label): r.accuracy.scale for r in result.rows if r.accuracy is not None}
    shapes = [s.shape.name for s in result.shapes]
    assert len(shapes) == 10 and all((s, "sage_attn2") in rel for s in shapes)  # the kernel ran
    for shape in shapes:
        kernel, emulator = rel[(shape, "sage_attn2")], rel[(shape, "sage_emul_thuml")]
        assert abs(emulator / kernel - 1) < 0.03, (shape, kernel, emulator)
        assert abs(scale[(shape, "sage_emul_thuml")] - scale[(shape, "sage_attn2")]) < 0.01, shape
        assert 0.010 < rel[(shape, "sage_emul_thuml_masked")] < 0.014, shape
    for shape in ("n65", "n74", "n129", "n130"):
        assert 0.2 < rel[(shape, "sage_attn2")] < 0.4, shape
    for shape in ("n64", "n128", "n192"):
        assert rel[(shape, "sage_attn2")] < 0.014, shape
        assert abs(scale[(shape, "sage_attn2")] - 1) < 0.005, shape
    # The finding names the lengths whose last 64-key block is mostly padding, kernel and emulator alike.
    named = {f.candidate: f for f in result.findings or []}
    for label in ("sage_attn2", "sage_emul_thuml"):
        assert named[label].dimension == "padded_share" and named[label].facts.startswith(
            "65, 74, 129, 130 keys"
        )
    assert "torch_sdpa" not in named and "sage_emul_thuml_masked" not in named

"""The findings of a kernel benchmark, on real runs of the CPU backends: the Triton kernels' padded-key
defect (as sage_emul_thuml reproduces it) named on the lengths that pad their last 64-key block, a
planted scale error named on every shape, exact attention and the corrected emulator with none."""

from __future__ import annotations

import pytest
from kernels_testutil import make_block

from harness.attention.registry import BACKENDS, AttentionBackend, get_backend, register_backend
from harness.kernels.report import kernels_report
from harness.kernels.results import KernelsResult
from harness.kernels.run import run_kernels
from harness.store import read_record

LENGTHS = (64, 74, 128, 130, 192)


class PlantedScale(AttentionBackend):
    def __call__(self, q, k, v, scale=None):
        return (0.9 * get_backend("torch_sdpa")(q, k, v, scale).float()).to(q.dtype)


def markdown(result) -> str:
    return "\n".join(kernels_report(result).lines)


@pytest.fixture(scope="module")
def lengths(tmp_path_factory) -> KernelsResult:
    # Registered for this run only: a backend left in the registry would be listed to other tests.
    register_backend("planted_scale_sdpa", exact=False, description="SDPA times 0.9 (planted)")(PlantedScale)
    try:
        return _measure(tmp_path_factory)
    finally:
        BACKENDS.unregister("planted_scale_sdpa")


def _measure(tmp_path_factory) -> KernelsResult:
    block = make_block(
        shapes=[{"name": f"n{n}", "heads": 2, "seq_q": n, "head_dim": 64, "dtype": "bf16"} for n in LENGTHS],
        backends=["torch_sdpa", "sage_emul_thuml", "planted_scale_sdpa",
                  {"backend": "sage_emul_thuml", "label": "masked", "options": {"padded_keys": "masked"}}],
        peak=False, bitwise=False,
    )  # fmt: skip
    out = tmp_path_factory.mktemp("lengths")
    run_kernels(block, out, name="lengths")
    return read_record(out / "kernels.json", KernelsResult)  # what kernels.json holds, not the object


def by(result: KernelsResult, label: str):
    return [f for f in result.findings or [] if f.candidate == label]


def test_the_padded_key_defect_is_named_on_the_padded_lengths(lengths):
    (f,) = by(lengths, "sage_emul_thuml")
    assert (f.dimension, f.what, f.count, f.rest_count) == ("padded_share", "shapes", 2, 3)
    assert f.facts == "74, 130 keys, 54-62 padded to a 64-key block"
    assert f.ratio_ci is not None and f.ratio_ci[0] >= 3 and f.floor_ratio > 3
    assert 0.6 < f.scale < 0.85 and "outputs scaled by 0." in f.text


def test_a_planted_scale_is_named_and_exact_attention_gets_nothing(lengths):
    (f,) = by(lengths, "planted_scale_sdpa")
    assert f.dimension == "all" and f.count == len(LENGTHS) and f.scale == pytest.approx(0.9, abs=0.005)
    assert by(lengths, "torch_sdpa") == [] and by(lengths, "masked") == []
    rows = {(r.shape, r.label): r.accuracy for r in lengths.rows if r.accuracy}
    assert rows[("n74", "torch_sdpa")].scale == pytest.approx(1.0, abs=1e-3)
    exact = rows[("n74", "torch_sdpa")]
    assert exact.rel_l1_unscaled == pytest.approx(exact.rel_l1, rel=0.05)  # nothing to divide out


def test_the_report_lists_the_findings_and_the_scale_columns(lengths):
    md = markdown(lengths)
    lines = [ln for ln in md.splitlines() if ln.startswith("- ")]
    assert lines == [f"- {f.text}" for f in lengths.findings]  # nothing in them needs escaping
    assert "| scale | rel L1 unscaled |" in md
    older = lengths.model_copy(update={"findings": None})  # a kernels.json from before findings
    assert "Findings" not in markdown(older)

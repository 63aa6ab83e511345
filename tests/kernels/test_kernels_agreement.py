"""harness.kernels.results (kernels_agreement): an emulator beside the kernel it models, per shape.

On a CPU no kernel runs, so the pairs are built from real emulator rows of a real ``run_kernels``:
the rows of the SageAttention 1.0.6 emulator (variant sageattn1_triton) stand in for the kernel
(``sage_attn2`` with package sageattention1; on an H200 that emulator is within 2 % of the kernel,
reports/examples/h200/kernels_lengths), the others are emulators paired with it.
"""

from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernels_testutil import SCENARIOS, make_block
from rich.console import Console

from harness.attention.sage_emul import VARIANT_PROVENANCE
from harness.kernels.report import kernels_report
from harness.kernels.results import (
    AGREES,
    DOES_NOT_FOLLOW,
    KERNELS_JSON,
    RATIO_BOUND,
    SCALE_BOUND,
    KernelsResult,
    agreement_word,
    kernels_agreement,
    pairs_with,
    rel_l1_ratio,
    shape_agreement,
    unpaired_emulators,
)
from harness.kernels.run import run_kernels, run_kernels_scenario
from harness.store import read_record

SA1 = VARIANT_PROVENANCE["sageattn1_triton"]
SA2 = VARIANT_PROVENANCE["sageattn2_triton"]
KERNEL_PARAMS = {  # what sage_attn2 records with package sageattention1 (harness.attention.gpu_backends)
    "backend": "sage_attn2",
    "exact": False,
    "models": None,
    "function": "sageattn",
    "package": "sageattention1",
    "package_version": "1.0.6",
}
SHAPES = [  # 74 keys: the last 64-key block holds 54 padded keys; 128 keys: none
    {"name": "k74", "heads": 4, "seq_q": 74, "head_dim": 128, "dtype": "bf16"},
    {"name": "k128", "heads": 4, "seq_q": 128, "head_dim": 128, "dtype": "bf16"},
]
BACKENDS = [
    {"backend": "sage_emul_thuml", "label": "stand_in"},  # sageattn1_triton: becomes the "kernel"
    {"backend": "sage_emul_thuml", "label": "masked", "options": {"padded_keys": "masked"}},
    {"backend": "sage_emul_thuml", "label": "sa2", "options": {"variant": "sageattn2_triton"}},
]


def markdown(result) -> str:
    return "\n".join(kernels_report(result).lines)


@pytest.fixture(scope="module")
def emulated(tmp_path_factory) -> KernelsResult:
    block = make_block(shapes=SHAPES, backends=BACKENDS, timing=False, bitwise=False, noise_floor=False)
    return run_kernels(block, tmp_path_factory.mktemp("agreement"), name="agreement")


@pytest.fixture(scope="module")
def paired(emulated) -> KernelsResult:
    """The run with the stand-in's rows dressed as the kernel's, and the analysis redone."""
    result = emulated.model_copy(deep=True)
    for r in result.rows:
        if r.label == "stand_in":
            r.label, r.backend, r.emulated, r.params = "sage_attn2", "sage_attn2", False, dict(KERNEL_PARAMS)
    result.agreement = kernels_agreement(result)
    result.unpaired_emulators = unpaired_emulators(result, result.agreement)
    return result


def _acc(result: KernelsResult, shape: str, label: str):
    return next(r.accuracy for r in result.rows if r.shape == shape and r.label == label)


def test_the_padded_key_defect_does_not_follow_and_full_blocks_agree(emulated):
    kernel74, sa2_74 = _acc(emulated, "k74", "stand_in"), _acc(emulated, "k74", "sa2")
    assert 0.2 < kernel74.rel_l1 < 0.4 and sa2_74.rel_l1 < 0.02  # 54 padded keys scored vs masked
    off = shape_agreement("k74", kernel74, sa2_74)
    assert off.word == DOES_NOT_FOLLOW and off.ratio < 0.1 and abs(off.scale_diff) > 0.2
    same = shape_agreement("k128", _acc(emulated, "k128", "stand_in"), _acc(emulated, "k128", "sa2"))
    assert same.word == AGREES and abs(same.ratio - 1) < 0.02 and abs(same.scale_diff) < 0.005


def test_an_emulator_pairs_with_the_kernel_it_models_and_changed_options_are_measured(paired):
    (pair,) = paired.agreement  # masked (sageattn1_triton, padded_keys changed); sa2 models sageattention2
    assert (pair.emulator, pair.kernel, pair.variant, pair.changed) == (
        "masked",
        "sage_attn2",
        "sageattn1_triton",
        ["padded_keys"],
    )
    assert pair.models == SA1.kernel.text() and pair.kernel_package == "sageattention1"
    assert pair.kernel_version == "1.0.6" and pair.software.endswith(", sageattention1 1.0.6 sageattn")
    assert pair.software.startswith("torch ") and pair.date == paired.created_at[:10]
    by = {s.shape: s for s in pair.shapes}
    assert [s.shape for s in pair.shapes] == ["k74", "k128"]
    assert by["k128"].word == AGREES and by["k128"].ratio == 1.0  # no padding: the same numerics
    assert by["k74"].word == DOES_NOT_FOLLOW and 0.2 < by["k74"].kernel_rel_l1 < 0.4
    assert by["k74"].emulator_rel_l1 == _acc(paired, "k74", "sa2").rel_l1  # masked = SageAttention2's rule
    assert pair.word == DOES_NOT_FOLLOW
    assert pair.summary.startswith(
        "masked beside sage_attn2 (SageAttention 1.0.6 sageattn, with padded_keys changed): "
        "does not follow on 1 of 2 shapes (k74), agrees on 1; rel L1 ratio 0.0"
    )
    (unpaired,) = paired.unpaired_emulators  # what its record claims instead, in its own words
    assert unpaired.text == (
        "sa2: its kernel sage_attn2 (sageattention2) did not run here: no agreement measured; "
        "on record: emulator of SageAttention2 d1a57a5 Triton, measured on H200"
    )


def test_every_shape_agreeing_reads_agrees(paired):
    full = paired.model_copy(deep=True)
    full.rows = [r for r in full.rows if r.shape == "k128"]
    (pair,) = kernels_agreement(full)
    assert pair.word == AGREES
    assert pair.summary == (
        "masked beside sage_attn2 (SageAttention 1.0.6 sageattn, with padded_keys changed): agrees on 1 of 1 "
        "shapes, rel L1 within 0 % (ratio 1.00 at both bounds), scale within 0"
    )


def test_pairing_respects_the_package_choice_and_versions():
    assert pairs_with(SA1, KERNEL_PARAMS) and not pairs_with(SA2, KERNEL_PARAMS)
    sa2_kernel = {**KERNEL_PARAMS, "package": "sageattention2", "package_version": "2.2.0"}
    assert pairs_with(SA2, sa2_kernel) and not pairs_with(SA1, sa2_kernel)
    assert not pairs_with(SA1, {**KERNEL_PARAMS, "backend": "aiter_sage_attn"})
    environment = {**KERNEL_PARAMS, "package": "environment"}  # pairs by version
    assert pairs_with(SA1, environment) and not pairs_with(SA2, environment)
    assert pairs_with(SA2, {**environment, "package_version": "2.2.0"})
    assert not pairs_with(SA1, {**environment, "package_version": "1.0"})  # a prefix is not the version
    assert not pairs_with(SA1, {**environment, "package_version": None})
    older = {k: v for k, v in KERNEL_PARAMS.items() if k != "package"}  # before the package option
    assert pairs_with(SA1, older) and not pairs_with(SA2, older)
    no_kernel = VARIANT_PROVENANCE["aiter_fav3_sage"]  # names no harness backend: pairs with nothing
    assert not pairs_with(no_kernel, {"backend": ""}) and not pairs_with(no_kernel, KERNEL_PARAMS)


@given(
    ratio=st.floats(1 / RATIO_BOUND, RATIO_BOUND),
    diff=st.floats(-SCALE_BOUND, SCALE_BOUND),
)
def test_within_both_bounds_agrees(ratio, diff):
    assert agreement_word(ratio, diff) == AGREES


@given(
    ratio=st.one_of(
        st.floats(0, 1 / RATIO_BOUND, exclude_max=True),
        st.floats(RATIO_BOUND, exclude_min=True),
        st.just(math.nan),
    ),
    diff=st.floats(-SCALE_BOUND, SCALE_BOUND, allow_nan=False),
)
def test_a_ratio_past_its_bounds_does_not_follow(ratio, diff):
    assert agreement_word(ratio, diff) == DOES_NOT_FOLLOW


@given(
    ratio=st.floats(1 / RATIO_BOUND, RATIO_BOUND),
    diff=st.one_of(
        st.floats(SCALE_BOUND, exclude_min=True), st.floats(max_value=-SCALE_BOUND, exclude_max=True)
    ),
)
def test_a_scale_past_its_bound_does_not_follow(ratio, diff):
    assert agreement_word(ratio, diff) == DOES_NOT_FOLLOW
    assert agreement_word(ratio, math.nan) == DOES_NOT_FOLLOW


def test_ratio_of_equal_and_zero_errors():
    assert rel_l1_ratio(0.0, 0.0) == 1.0 and rel_l1_ratio(0.01, 0.0) == math.inf
    assert rel_l1_ratio(0.3, 0.012) == pytest.approx(25.0)
    assert math.isnan(rel_l1_ratio(math.nan, 0.01))


def test_the_report_renders_the_section_from_the_records(paired, tmp_path):
    md = markdown(paired)
    assert "### Emulators beside their kernels" in md
    sec = kernels_report(paired).section
    (table,) = [t for t in sec.tables if t.title == "Emulators beside their kernels"]
    assert table.headers == [
        "shape", "emulator", "kernel", "kernel rel L1", "emulator rel L1", "ratio", "kernel scale",
        "emulator scale", "word",
    ]  # fmt: skip
    rows = {r[0]: r for r in table.rows}
    assert rows["k128"][1:3] == ["masked", "sage_attn2"] and rows["k128"][-1] == "agrees"
    assert rows["k74"][-1] == "does not follow"
    (pair,) = paired.agreement
    assert any(b.startswith(pair.summary) for b in sec.bullets)
    assert (
        "sa2: its kernel sage_attn2 (sageattention2) did not run here: no agreement measured; "
        "on record: emulator of SageAttention2 d1a57a5 Triton, measured on H200" in sec.paragraphs
    )
    # The report reads the record, never the rows: the same kernels.json renders the same text.
    path = tmp_path / KERNELS_JSON
    path.write_text(paired.model_dump_json(by_alias=True))
    loaded = read_record(path, KernelsResult)
    assert loaded.agreement == paired.agreement and markdown(loaded) == md


def test_no_pair_no_section_and_an_older_kernels_json_loads(emulated, tmp_path):
    md = markdown(emulated)  # emulators only: nothing to pair them with
    assert "Emulators beside their kernels" not in md and emulated.agreement == []
    assert {u.emulator for u in emulated.unpaired_emulators} == {"stand_in", "masked", "sa2"}
    line = (
        "stand_in: its kernel sage_attn2 (sageattention1) did not run here: no agreement measured; "
        "on record: emulator of SageAttention 1.0.6 sageattn, measured on H200"
    )
    assert f"\n\n{line}\n" in md
    masked = (
        "masked: its kernel sage_attn2 (sageattention1) did not run here: no agreement measured; on record: "
    )
    assert f"{masked}emulator of SageAttention 1.0.6 sageattn, not measured with padded_keys changed" in md
    older = json.loads(emulated.model_dump_json(by_alias=True))
    del older["agreement"], older["unpaired_emulators"]
    path = tmp_path / KERNELS_JSON
    path.write_text(json.dumps(older))
    loaded = read_record(path, KernelsResult)
    assert loaded.agreement == [] and loaded.unpaired_emulators == []


def test_the_command_prints_what_did_not_run(tmp_path):
    scenario = tmp_path / "k.yaml"
    scenario.write_text(
        "name: k_agree\nkind: kernels\nkernels:\n"
        "  shapes: [{name: t, heads: 2, seq_q: 74, head_dim: 64}]\n"
        "  backends: [sage_attn2, sage_emul_thuml]\n  timing: false\n  bitwise: false\n  device: cpu\n"
    )
    buf = io.StringIO()
    run_kernels_scenario(scenario, out_root=tmp_path / "out", console=Console(file=buf, width=40))
    line = (
        "sage_emul_thuml: its kernel sage_attn2 (sageattention1) did not run here: no agreement measured; "
        "on record: emulator of SageAttention 1.0.6 sageattn, measured on H200"
    )
    assert line in buf.getvalue().splitlines()  # one line, not wrapped
    assert line in (tmp_path / "out" / "k_agree" / "kernels" / "report.md").read_text()


def test_the_h200_example_predates_provenance():
    """The committed H200 sweep was written before emulators carried provenance: no pair is claimed."""
    result = read_record(
        SCENARIOS.parent / "reports/examples/h200/kernels_lengths/kernels/kernels.json", KernelsResult
    )
    assert result.agreement == [] and kernels_agreement(result) == []

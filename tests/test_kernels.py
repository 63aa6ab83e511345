from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.errors import HarnessError, ScenarioError
from harness.kernels import (
    KERNELS_JSON,
    NOISE_FLOOR_LABEL,
    KernelsResult,
    accuracy_metrics,
    attention_flops,
    bitwise_compare,
    kernels_markdown,
    main,
    run_kernels,
    tflops,
)
from harness.kernels_schema import KernelsBlock, load_kernels_file

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
GPU_PRESENT = torch.cuda.is_available()


def _block(**overrides) -> KernelsBlock:
    data = {
        "shapes": [{"name": "tiny", "heads": 2, "seq_q": 64, "seq_k": 80, "head_dim": 32, "dtype": "bf16"}],
        "backends": ["torch_sdpa", "sage_emul_aiter"],
        "warmup": 0,
        "repeats": 1,
        "emulation_repeats": 1,
        "peak_size": 64,
        "device": "cpu",
    }
    data.update(overrides)
    return KernelsBlock.model_validate(data)


def test_accuracy_metrics_match_numpy():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((2, 3, 50, 16))
    out = ref + 0.01 * rng.standard_normal(ref.shape)
    out[0, 0, 0] = 0.0  # a zero row where the reference is not
    m = accuracy_metrics(torch.from_numpy(out).float(), torch.from_numpy(ref), chunk_elems=16 * 7)
    o = torch.from_numpy(out).float().double().numpy()
    assert m.cosine == pytest.approx((o * ref).sum() / np.sqrt((o**2).sum() * (ref**2).sum()), rel=1e-12)
    assert m.rel_l1 == pytest.approx(np.abs(o - ref).sum() / np.abs(ref).sum(), rel=1e-12)
    assert m.rmse == pytest.approx(np.sqrt(((o - ref) ** 2).mean()), rel=1e-12)
    assert m.max_abs_err == pytest.approx(np.abs(o - ref).max(), rel=1e-12)
    a, b = o.reshape(-1, 16), ref.reshape(-1, 16)
    rows = (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-300)
    assert m.row_cos_p10 == pytest.approx(np.percentile(rows, 10), abs=1e-6)
    assert m.row_cos_min == pytest.approx(0.0, abs=1e-7)
    assert m.row_cos_frac_gt_099 == pytest.approx((rows > 0.99).mean())
    assert m.zero_rows == 1 and m.nan_count == 0 and m.inf_count == 0


def test_accuracy_metrics_count_nan_and_inf():
    ref = torch.ones(4, 8)
    out = ref.clone()
    out[0, 0], out[1, 1], out[2, 2] = float("nan"), float("inf"), float("-inf")
    m = accuracy_metrics(out, ref)
    assert (m.nan_count, m.inf_count) == (1, 2)


def test_flops_and_bitwise_helpers():
    assert attention_flops(1, 24, 32768, 32768, 128) == 4 * 24 * 32768**2 * 128
    assert tflops(2e12, 1000.0) == pytest.approx(2.0)
    a = torch.arange(6.0)
    assert bitwise_compare("x", a, a.clone()).identical
    b = a.clone()
    b[3] += 0.5
    diff = bitwise_compare("x", a, b)
    assert not diff.identical and diff.max_abs_diff == 0.5


def test_schema_rejects_bad_blocks():
    with pytest.raises(ValueError, match="Extra inputs"):
        _block(repeat=3)
    with pytest.raises(ValueError, match="labels must be unique"):
        _block(backends=["torch_sdpa", "torch_sdpa"])
    with pytest.raises(ValueError, match=">= 20 on a GPU"):
        _block(device="cuda", repeats=5)
    with pytest.raises(ValueError, match="dtype"):
        _block(shapes=[{"name": "x", "heads": 1, "seq_q": 8, "head_dim": 8, "dtype": "int8"}])
    assert _block().shapes[0].dtype == "bfloat16"


def test_load_kernels_file_errors_name_the_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nkind: kernels\nkernels: {shapes: [], backends: [torch_sdpa]}\n")
    with pytest.raises(ScenarioError, match=r"bad.yaml: field kernels.shapes"):
        load_kernels_file(bad)
    bad.write_text("name: x\nkind: e2e\n")
    with pytest.raises(ScenarioError, match="kind must be 'kernels'"):
        load_kernels_file(bad)
    bad.write_text("name: x\nkind: kernels\nkernel: {}\n")
    with pytest.raises(ScenarioError, match="unknown top-level key"):
        load_kernels_file(bad)


def test_unknown_backend_or_option_fails_before_measuring(tmp_path):
    with pytest.raises(HarnessError, match="unknown attention backend 'sdpa'"):
        run_kernels(_block(backends=["sdpa"]), tmp_path)
    bad = _block(backends=[{"backend": "sage_emul_thuml", "options": {"granularty": "per_block"}}])
    with pytest.raises(HarnessError, match="unknown option.*granularty"):
        run_kernels(bad, tmp_path)
    assert not (tmp_path / KERNELS_JSON).exists()


def test_tiny_run_writes_json_and_keeps_refusals_as_rows(tmp_path):
    block = _block(
        backends=["torch_sdpa", {"backend": "sage_emul_thuml", "label": "emul", "options": {}}],
        shapes=[
            {"name": "tiny", "heads": 2, "seq_q": 64, "seq_k": 80, "head_dim": 32},
            {"name": "wide", "heads": 1, "seq_q": 4, "head_dim": 2048},  # beyond exact INT8 emulation
        ],
    )
    messages: list[str] = []
    result = run_kernels(block, tmp_path, messages.append, name="tiny")
    loaded = KernelsResult.model_validate(json.loads((tmp_path / KERNELS_JSON).read_text()))
    assert loaded.name == "tiny" and len(loaded.rows) == len(result.rows) == 6
    assert any("noise floor" in m for m in messages)
    by = {(r.shape, r.label): r for r in result.rows}
    refused = by[("wide", "emul")]
    assert refused.status == "skipped" and "refused" in (refused.reason or "") and "2048" in refused.reason
    tiny = by[("tiny", "torch_sdpa")]
    assert tiny.speed is not None and tiny.speed.timer == "wall" and tiny.speed.tflops > 0
    assert tiny.speed.frac_of_peak is not None
    assert by[("tiny", "emul")].speed.quant_ms is not None
    assert [c.check for c in tiny.bitwise] == [
        "registry_vs_direct",
        "packed_3d_vs_direct",
        "packed_4d_vs_direct",
    ]
    assert result.shapes[0].reference_dtype == "float64"
    assert set(result.peaks) == {"bfloat16"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> KernelsResult:
    name, block = load_kernels_file(SCENARIOS / "kernels_smoke.yaml")
    block = KernelsBlock.model_validate({**block.model_dump(), "device": "cpu"})
    return run_kernels(block, tmp_path_factory.mktemp("smoke"), name=name)


@pytest.mark.slow
def test_smoke_scenario_accuracy(smoke):
    rows = {(r.shape, r.label): r for r in smoke.rows}
    for shape in ("self_1k", "cross_256x384", "vmean_2k"):
        sdpa = rows[(shape, "torch_sdpa")].accuracy
        assert sdpa.cosine > 0.99999 and sdpa.rel_l1 < 0.005
        floor = rows[(shape, NOISE_FLOOR_LABEL)]
        assert floor.role == "noise_floor" and floor.accuracy.cosine > 0.99999
        for label in ("sage_emul_thuml", "sage_emul_aiter"):
            a = rows[(shape, label)].accuracy
            assert 0.998 < a.cosine < 0.999999
            assert a.nan_count == a.inf_count == a.zero_rows == 0
    for shape in ("self_1k", "cross_256x384"):  # random V: relL1 ~0.037-0.039 in the notes
        for label in ("sage_emul_thuml", "sage_emul_aiter", "sage_emul_thuml_per_thread"):
            assert 0.02 < rows[(shape, label)].accuracy.rel_l1 < 0.06
    thuml, aiter = (
        rows[("vmean_2k", "sage_emul_thuml")].accuracy,
        rows[("vmean_2k", "sage_emul_aiter")].accuracy,
    )
    assert aiter.rel_l1 > 2 * thuml.rel_l1  # the P x448 offset matters when V has a channel mean
    for r in smoke.rows:
        if r.status == "ok" and r.role == "candidate":
            assert all(c.identical for c in r.bitwise if c.identical is not None), (r.label, r.bitwise)


@pytest.mark.slow
@pytest.mark.skipif(GPU_PRESENT, reason="checks the skipped rows of a machine without a GPU")
def test_smoke_scenario_lists_gpu_backends_as_skipped(smoke):
    skipped = {r.label: r.reason for r in smoke.rows if r.status == "skipped" and r.shape == "self_1k"}
    assert set(skipped) == {"sage_attn2", "aiter_sage_attn", "aiter_attn"}
    assert "GPU" in skipped["sage_attn2"] and "ROCm" in skipped["aiter_attn"]


@pytest.mark.slow
def test_smoke_markdown_has_every_row(smoke):
    md = kernels_markdown(smoke)
    for header in ("### Accuracy", "### Speed", "### Bitwise checks", "Matmul peak bfloat16"):
        assert header in md
    for r in smoke.rows:
        assert f"| {r.shape} | {r.label} |" in md
    assert "sage_emul_thuml (emulator)" in md
    assert "| self_1k | torch_sdpa | identical | identical | identical |" in md


def test_h3_scenario_is_valid():
    name, block = load_kernels_file(SCENARIOS / "kernels_h3.yaml")
    assert name == "kernels_h3"
    heads = {s.heads for s in block.shapes}
    assert heads == {56, 28} and {s.head_dim for s in block.shapes} == {128}
    assert any(s.seq_q == 32768 for s in block.shapes)
    assert block.repeats >= 20


def test_command_line_writes_json_and_markdown(tmp_path, capsys):
    scenario = tmp_path / "k.yaml"
    scenario.write_text(
        "name: k_cli\nkind: kernels\nkernels:\n"
        "  shapes: [{name: t, heads: 1, seq_q: 32, head_dim: 16}]\n"
        "  backends: [torch_sdpa, sage_attn2]\n  timing: false\n  device: cpu\n"
    )
    assert main([str(scenario), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / KERNELS_JSON).exists() and (tmp_path / "out" / "kernels.md").exists()
    assert "| t | torch_sdpa |" in capsys.readouterr().out
    scenario.write_text("name: k_cli\nkind: kernels\nkernels: {shapes: [], backends: []}\n")
    assert main([str(scenario), "--out", str(tmp_path / "out2")]) == 2
    assert "field kernels.shapes" in capsys.readouterr().err


@pytest.mark.skipif(not GPU_PRESENT, reason="needs a GPU (CUDA events, L2 flush, do_bench)")
def test_gpu_run_times_with_cuda_events(tmp_path):
    block = _block(device="cuda", repeats=20, warmup=2, peak_size=2048)
    result = run_kernels(block, tmp_path)
    sdpa = next(r for r in result.rows if r.label == "torch_sdpa")
    assert sdpa.speed.timer == "cuda_events" and sdpa.speed.repeats >= 20
    assert sdpa.speed.l2_flush_mb == 256 and sdpa.speed.tflops > 0
    if result.env.get("triton"):
        assert sdpa.speed.do_bench_ms is not None
    assert result.peaks["bfloat16"].tflops > 0
    assert sdpa.accuracy.cosine > 0.99999

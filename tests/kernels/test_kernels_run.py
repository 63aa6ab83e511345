"""harness.kernels.run: every shape x backend measured, refusals kept as rows, the smoke scenario."""

from __future__ import annotations

import json

import pytest
from kernels_testutil import GPU_PRESENT, make_block

from harness.errors import HarnessError
from harness.kernels.results import KERNELS_JSON, NOISE_FLOOR_LABEL, KernelsResult
from harness.kernels.run import run_kernels


def test_unknown_backend_or_option_fails_before_measuring(tmp_path):
    with pytest.raises(HarnessError, match="unknown attention backend 'sdpa'"):
        run_kernels(make_block(backends=["sdpa"]), tmp_path)
    bad = make_block(backends=[{"backend": "sage_emul_thuml", "options": {"granularty": "per_block"}}])
    with pytest.raises(HarnessError, match="unknown option.*granularty"):
        run_kernels(bad, tmp_path)
    assert not (tmp_path / KERNELS_JSON).exists()


def test_tiny_run_writes_json_and_keeps_refusals_as_rows(tmp_path):
    block = make_block(
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
    assert tiny.speed.frac_of_peak is None  # a CPU's matmul is no known peak (measured, not divided by)
    assert by[("tiny", "emul")].speed.quant_ms is not None
    assert [c.check for c in tiny.bitwise] == [
        "direct_vs_direct",
        "registry_vs_direct",
        "packed_3d_vs_direct",
        "packed_4d_vs_direct",
    ]
    assert result.shapes[0].reference_dtype == "float64"
    assert set(result.peaks) == {"bfloat16"}


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
    for shape in ("self_1k", "cross_256x384"):  # random V, FP8 PV: relL1 ~0.037-0.039 in the notes
        for label in ("sage_emul_aiter", "sage_emul_thuml_sage2", "sage_emul_thuml_sage2_per_thread"):
            assert 0.02 < rows[(shape, label)].accuracy.rel_l1 < 0.06
        # FP16 PV (SageAttention 1.0.6, the default): about a third of it, as the H200 kernel measured
        assert 0.006 < rows[(shape, "sage_emul_thuml")].accuracy.rel_l1 < 0.02
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


@pytest.mark.skipif(not GPU_PRESENT, reason="needs a GPU (CUDA events, L2 flush, do_bench)")
def test_gpu_run_times_with_cuda_events(tmp_path):
    block = make_block(device="cuda", repeats=20, warmup=2, peak_size=2048)
    result = run_kernels(block, tmp_path)
    sdpa = next(r for r in result.rows if r.label == "torch_sdpa")
    assert sdpa.speed.timer == "cuda_events" and sdpa.speed.repeats >= 20
    assert sdpa.speed.l2_flush_mb == 256 and sdpa.speed.tflops > 0
    if result.env.get("triton"):
        assert sdpa.speed.do_bench_ms is not None
    assert result.peaks["bfloat16"].tflops > 0
    assert sdpa.accuracy.cosine > 0.99999

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from attn_testutil import errors, make_qkv
from cli_testutil import harness

from harness.attention import registry as reg
from harness.attention.exact import exact_attention
from harness.attention.registry import (
    BACKENDS,
    AttentionBackend,
    UnsupportedCall,
    get_backend,
    register_backend,
)
from harness.attention.sage_emul import VARIANTS
from harness.errors import BackendUnavailable, HarnessError

CPU_BACKENDS = ["torch_sdpa", "sage_emul_thuml", "sage_emul_aiter"]
GPU_PRESENT = torch.cuda.is_available()


def numpy_attention(q, k, v, scale):
    """Independent fp64 reference: numpy softmax(q k^T * scale) v."""
    q, k, v = (x.double().numpy() for x in (q, k, v))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return torch.from_numpy(np.einsum("bhqk,bhkd->bhqd", p, v))


def test_list_contains_every_named_backend():
    assert {
        "torch_sdpa",
        "sage_emul_thuml",
        "sage_emul_aiter",
        "sage_attn2",
        "aiter_sage_attn",
        "aiter_attn",
    } <= set(BACKENDS.names())


def test_exact_attention_matches_numpy_and_chunking_is_invisible():
    q, k, v = make_qkv(37, 53, h=3, d=16, dtype=torch.float32)
    ref = numpy_attention(q, k, v, 0.3)
    full = exact_attention(q, k, v, 0.3)
    chunked = exact_attention(q, k, v, 0.3, max_chunk_elems=3 * 53 * 4)  # 4 query rows per chunk
    assert full.dtype == torch.float64
    assert torch.allclose(full, ref, rtol=0, atol=1e-12)
    assert torch.allclose(chunked, ref, rtol=0, atol=1e-12)


def test_torch_sdpa_matches_fp64_reference():
    sdpa = get_backend("torch_sdpa")
    q, k, v = make_qkv(256, 320, h=2, d=64, dtype=torch.float32)
    out = sdpa(q, k, v, scale=0.1)
    assert out.dtype == torch.float32
    assert (out.double() - numpy_attention(q, k, v, 0.1)).abs().max() < 1e-5
    qb, kb, vb = make_qkv(512, h=2, d=64)
    e = errors(sdpa(qb, kb, vb), exact_attention(qb, kb, vb))
    assert e["cos"] > 0.99999 and e["rel_l1"] < 0.005  # bf16 floor: ~0.999997 / 0.002


@pytest.mark.parametrize("name", CPU_BACKENDS)
def test_output_dtype_and_shape_follow_q(name):
    backend = get_backend(name)
    q, k, v = make_qkv(70, 130, h=3, d=32)
    out = backend(q, k, v, scale=0.2)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert torch.isfinite(out).all()
    assert backend.name == name and backend.exact == (name == "torch_sdpa")
    assert backend.params["backend"] == name


def test_unknown_backend_lists_known_names():
    with pytest.raises(HarnessError, match="unknown attention backend 'nope'.*torch_sdpa"):
        get_backend("nope")
    with pytest.raises(HarnessError, match="unknown attention backend"):
        BACKENDS.get("nope").availability()


def test_unknown_option_is_an_error_naming_accepted_options():
    with pytest.raises(HarnessError, match="unknown option.*granularty.*accepted:.*granularity"):
        get_backend("sage_emul_thuml", granularty="per_block")
    with pytest.raises(HarnessError, match="granularity"):
        get_backend("sage_emul_thuml", granularity="per_head")


@pytest.mark.parametrize(
    ("name", "options", "field"),
    [
        ("sage_emul_thuml", {"variant": "sageattn3_triton"}, "variant"),
        ("sage_emul_thuml", {"padded_keys": "maskd"}, "padded_keys"),
        ("sage_emul_aiter", {"pv_dtype": "fp4"}, "pv_dtype"),
        ("sage_emul_thuml", {"variant": "sageattn2_triton", "blkq": 100}, "blkq"),
        ("sage_attn2", {"package": "sageattention3"}, "package"),  # told without a GPU or an import
    ],
)
def test_option_values_are_refused_before_any_run(name, options, field):
    why = reg.check_options(name, options)
    assert why and f"option {field}=" in why and name in why
    assert (
        reg.check_options(name, {k: v for k, v in options.items() if k == "variant" and v in VARIANTS})
        is None
    )


def test_a_scenario_with_a_bad_option_value_names_its_file_line_and_field(tmp_path):
    path = tmp_path / "k.yaml"
    path.write_text(
        "name: k\nkind: kernels\nkernels:\n  shapes: [{name: t, heads: 2, seq_q: 74, head_dim: 64}]\n"
        "  backends:\n    - {backend: sage_emul_thuml, options: {variant: sageattn3_triton}}\n"
    )
    run = harness("scenarios", "validate", str(path))
    assert run.returncode == 2, run
    (line,) = (run.stdout + run.stderr).strip().splitlines()
    assert line.endswith(
        "k.yaml:6: kernels.backends[0].options: sage_emul_thuml: option variant='sageattn3_triton'; "
        "expected one of sageattn1_triton, sageattn2_triton, sageattn2_fp8, aiter_fav3_sage"
    )


def test_shape_mismatch_is_a_harness_error():
    q, k, v = make_qkv(8, d=16)
    with pytest.raises(HarnessError, match="incompatible shapes"):
        get_backend("torch_sdpa")(q, k[..., :8], v)


@pytest.mark.skipif(GPU_PRESENT, reason="checks the reasons given on a machine without a GPU")
@pytest.mark.parametrize("name", ["sage_attn2", "aiter_sage_attn", "aiter_attn"])
def test_gpu_backends_are_unavailable_here_with_a_reason(name):
    ok, reason = BACKENDS.get(name).availability()
    assert not ok
    expected = "GPU" if name == "sage_attn2" else "ROCm"
    assert expected in reason
    with pytest.raises(BackendUnavailable, match=f"'{name}' is unavailable here: .*{expected}"):
        get_backend(name)


def test_register_backend_decorator_and_duplicates():
    @register_backend("test_double_sdpa", exact=True, description="test only")
    class Doubled(AttentionBackend):
        default_options = {"factor": 2.0}

        def __call__(self, q, k, v, scale=None):
            return get_backend("torch_sdpa")(q, k, v, scale) * self.options["factor"]

    try:
        assert "test_double_sdpa" in BACKENDS.names()
        b = get_backend("test_double_sdpa", factor=3.0)
        assert b.params == {"backend": "test_double_sdpa", "exact": True, "factor": 3.0}
        assert BACKENDS.get("test_double_sdpa").availability() == (True, "available")
        with pytest.raises(ValueError, match="already registered"):

            @register_backend("test_double_sdpa", exact=True, description="clash")
            class Clash(AttentionBackend):
                pass

    finally:
        reg.BACKENDS.unregister("test_double_sdpa")


def test_lightx2v_style_apply_matches_the_direct_call():
    sdpa = get_backend("torch_sdpa")
    q, k, v = make_qkv(96, h=4, d=32, dtype=torch.float32)
    direct = sdpa(q, k, v, scale=0.25)  # [1, H, N, D]
    nhd = [x[0].transpose(0, 1).contiguous() for x in (q, k, v)]  # [N, H, D]
    cu = torch.tensor([0, 96], dtype=torch.int32)
    out3 = sdpa.apply(*nhd, cu, cu, 96, 96, softmax_scale=0.25, causal=False, scheduler=None, block_idx=3)
    assert out3.shape == (96, 4 * 32)
    expected = direct[0].transpose(0, 1).reshape(96, 128)
    assert torch.allclose(out3, expected, rtol=0, atol=1e-6)
    bnhd = [x.transpose(1, 2).contiguous() for x in (q, k, v)]  # [B, N, H, D]
    out4 = sdpa.apply(*bnhd, softmax_scale=0.25)
    assert torch.allclose(out4, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"causal": True}, "causal"),
        ({"attn_mask": torch.ones(8, 8, dtype=torch.bool)}, "mask"),
        ({"drop_rate": 0.1}, "dropout"),
        (
            {"cu_seqlens_q": torch.tensor([0, 3, 8]), "cu_seqlens_kv": torch.tensor([0, 3, 8])},
            "several sequences",
        ),
        ({"max_seqlen_q": 4}, "max_seqlen_q"),
    ],
)
def test_lightx2v_style_apply_refuses_what_it_cannot_serve(kwargs, match):
    q, k, v = make_qkv(8, h=2, d=16)
    nhd = [x[0].transpose(0, 1) for x in (q, k, v)]
    with pytest.raises(UnsupportedCall, match=match):
        get_backend("sage_emul_aiter").apply(*nhd, **kwargs)


@pytest.mark.parametrize("name", CPU_BACKENDS)
def test_each_backend_owns_a_direct_call_equal_to_its_registered_call(name):
    backend = get_backend(name)
    direct = backend.direct_call()
    assert direct is not None
    q, k, v = make_qkv(64, 80, h=2, d=32, dtype=torch.bfloat16)
    assert torch.equal(direct(q, k, v, 0.2), backend(q, k, v, 0.2))


def test_every_harness_backend_owns_its_direct_call():
    for name in [*CPU_BACKENDS, "sage_attn2", "aiter_sage_attn", "aiter_attn"]:
        own = reg.BACKENDS.get(name).direct_call
        assert own is not AttentionBackend.direct_call, f"{name} does not own a direct call"


def test_harness_backends_says_what_each_backend_runs():
    res = subprocess.run(
        [sys.executable, "-m", "harness.cli", "backends"],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "runs" in res.stdout and "SageAttention2" in res.stdout
    # each emulator says what it models by default, and whether that was measured
    from harness.cli.program import default_badge

    assert "emulator of" in res.stdout  # beside each emulator's description (wrapped by the table)
    assert default_badge(reg.BACKENDS.get("sage_emul_thuml")).endswith("1.0.6 sageattn, measured on H200")
    assert default_badge(reg.BACKENDS.get("sage_emul_aiter")) == "emulator of aiter fav3_sage, not measured"
    assert default_badge(reg.BACKENDS.get("torch_sdpa")) == ""
    for name in BACKENDS.names():
        assert reg.BACKENDS.get(name).description, name
        assert name in res.stdout

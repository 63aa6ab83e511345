"""GPU-only checks: the emulation against the real kernels (skipped where they are unavailable)."""

from __future__ import annotations

import pytest
import torch
from attn_testutil import errors, make_qkv

from harness.attention.exact import exact_attention
from harness.attention.registry import BACKENDS, get_backend
from harness.attention.wrappers import make_attention

sage_ok, sage_reason = BACKENDS.get("sage_attn2").availability()
aiter_ok, aiter_reason = BACKENDS.get("aiter_sage_attn").availability()


@pytest.mark.skipif(not sage_ok, reason=f"sage_attn2 unavailable: {sage_reason}")
@pytest.mark.parametrize("n", [1024, 4096])
def test_emulation_tracks_the_real_sage_attn2_kernel(n):
    q, k, v = (x.cuda() for x in make_qkv(n, b=2, h=8, d=128, k_bias=2.0, seed=4))
    real = get_backend("sage_attn2")
    # The default models the Triton fp16-PV kernel: per_block Q (128) / K (64) INT8, P in [0, 1] and
    # V in fp16, fp16 tile accumulation (SageAttention 1.0.6 sageattn, 2.x sageattn_qk_int8_pv_fp16_triton).
    emul = get_backend("sage_emul_thuml")
    ref = exact_attention(q, k, v, compute_dtype=torch.float32)
    out_real, out_emul = real(q, k, v), emul(q, k, v)
    assert out_real.shape == q.shape and out_real.dtype == q.dtype
    between = errors(out_emul, out_real)
    e_real, e_emul = errors(out_real, ref), errors(out_emul, ref)
    assert between["cos"] > 0.9999, between
    assert abs(e_real["rel_l1"] - e_emul["rel_l1"]) < 0.5 * e_real["rel_l1"] + 1e-3, (e_real, e_emul)


@pytest.mark.skipif(not sage_ok, reason=f"sage_attn2 unavailable: {sage_reason}")
def test_sage_attn2_backend_passes_the_kernel_result_through_bitwise():
    """The run's first-call check on the real Triton kernel: registry backend vs sageattn called directly."""
    attn = make_attention("sage_attn2")
    q, k, v = (x.cuda() for x in make_qkv(4096, h=8, d=128, k_bias=2.0, seed=5))
    attn(q, k, v)
    check = attn.rank_calls().direct_check
    assert check is not None and check.identical, check


@pytest.mark.skipif(not aiter_ok, reason=f"aiter_sage_attn unavailable: {aiter_reason}")
def test_aiter_sage_attn_is_close_to_exact():
    try:
        backend = get_backend("aiter_sage_attn")
    except Exception as err:  # e.g. not a gfx1201 GPU
        pytest.skip(str(err))
    q, k, v = (x.cuda() for x in make_qkv(2048, h=4, d=128, seed=6))
    e = errors(backend(q, k, v), exact_attention(q, k, v, compute_dtype=torch.float32))
    assert e["cos"] > 0.998, e


def _pinned(choice: str) -> bool:
    from harness.sage_packages import installed

    return sage_ok and installed(choice)


@pytest.mark.skipif(
    not (_pinned("sageattention2") and _pinned("sageattention1")),
    reason="make sageattention has not installed both pinned SageAttentions here (or no GPU)",
)
@pytest.mark.parametrize("n", [74, 128, 1025])
def test_both_pinned_sageattentions_run_side_by_side_each_as_its_emulator_variant(n):
    """SageAttention2 d1a57a5 runs sageattn_qk_int8_pv_fp16_triton and masks the padded keys;
    1.0.6 runs sageattn and scores them; each emulator variant follows its own kernel."""
    g = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(1, 8, n, 128, generator=g, dtype=torch.float64) for _ in range(3))
    ref = torch.softmax(q @ k.transpose(-1, -2) / 128**0.5, dim=-1) @ v
    ref, (q, k, v) = ref.cuda(), (x.bfloat16().cuda() for x in (q, k, v))

    def rel_l1(out):
        return ((out.double() - ref).abs().sum() / ref.abs().sum()).item()

    sa2 = get_backend("sage_attn2", package="sageattention2")
    sa1 = get_backend("sage_attn2", package="sageattention1")
    assert sa2.params["function"] == "sageattn_qk_int8_pv_fp16_triton"
    assert sa2.params["package_commit"].startswith("d1a57a5") and sa2.params["package_version"] == "2.2.0"
    assert sa1.params["function"] == "sageattn" and sa1.params["package_version"] == "1.0.6"
    for kernel, variant in ((sa2, "sageattn2_triton"), (sa1, "sageattn1_triton")):
        mine, its = rel_l1(kernel(q, k, v)), rel_l1(get_backend("sage_emul_thuml", variant=variant)(q, k, v))
        assert abs(its / mine - 1) < 0.1, (variant, mine, its)
    assert rel_l1(sa2(q, k, v)) < 0.03
    if n % 64 > 8:  # keys padded in the last 64-key block: 1.0.6's defect
        assert rel_l1(sa1(q, k, v)) > 0.03

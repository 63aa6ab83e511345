"""The first-call check of a LightX2V backend against its op called directly (real torch SDPA)."""

from __future__ import annotations

import torch

from harness.runners.lightx2v.serve import check_call, q_shape, sdpa_direct


def packed(n=40, h=2, d=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(n, h, d, generator=gen).to(torch.bfloat16) for _ in range(3)]


def lightx2v_sdpa(q, k, v):
    """LightX2V's torch_sdpa class, as the pinned checkout writes it: [N, H, D] -> [N, H*D]."""
    q, k, v = (t.unsqueeze(0).transpose(1, 2) for t in (q, k, v))
    x = torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2)
    return x.reshape(x.shape[0], x.shape[1], -1).squeeze(0)


def test_the_same_op_is_bitwise_identical_and_the_shape_is_bhnd():
    q, k, v = packed()
    out, check = check_call("torch_sdpa", lightx2v_sdpa, q, k, v)
    assert torch.equal(out, sdpa_direct(q, k, v))
    assert check == {"q_shape": [1, 2, 40, 16], "inputs_modified": [], "identical": True}
    assert q_shape(torch.empty(3, 5, 7, 16)) == [3, 7, 5, 16]


def test_a_backend_that_changes_the_result_or_its_inputs_is_told_apart():
    q, k, v = packed()

    def shifted(q, k, v):  # writes K in place (as SageAttention 1.x does) and changes the output
        k -= k.mean(dim=0, keepdim=True)
        return lightx2v_sdpa(q, k, v) * 1.01

    out, check = check_call("torch_sdpa", shifted, q, k, v)
    assert check["identical"] is False and check["op_repeatable"] is True  # the backend, not the op
    assert check["max_abs_diff"] > 0 and check["inputs_modified"] == ["k"]
    # The direct op saw the inputs as they were before the call.
    q2, k2, v2 = packed()
    assert torch.equal(out, (lightx2v_sdpa(q2, k2 - k2.mean(dim=0, keepdim=True), v2) * 1.01))


def test_a_backend_without_a_known_op_is_not_checked():
    q, k, v = packed()
    out, check = check_call("radial_attn", lightx2v_sdpa, q, k, v)
    assert check is None and out.shape == (40, 32)

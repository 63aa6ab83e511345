"""The launcher's call path pieces: a LightX2V call's arguments moved between classes, shadows as
ops on [B, H, N, D], and a schedule's steps checked against the counts."""

from __future__ import annotations

import inspect

import torch

from harness.attention.exact import exact_attention
from harness.records import StepSchedule
from harness.runners.lightx2v.runner import LightX2VRankCalls, check_schedule
from harness.runners.lightx2v.serve import call_tensors, other_arguments, with_tensors
from harness.runners.lightx2v.shadows import lightx2v_shadow, make_ops, output_heads_first, to_heads_first


class SageLike:
    """Positional parameters as LightX2V's sage_attn2 has them (torch_sdpa's differ)."""

    def apply(
        self, q, k, v, cu_seqlens_q=None, cu_seqlens_kv=None, max_seqlen_q=None, max_seqlen_kv=None, **kwargs
    ):
        raise NotImplementedError


class SdpaLike:
    def apply(self, q, k, v, drop_rate=0, attn_mask=None, causal=False, cu_seqlens_q=None, **kwargs):
        q, k, v = (t.unsqueeze(0).transpose(1, 2) for t in (q, k, v))
        x = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2)
        return x.reshape(x.shape[0], x.shape[1], -1).squeeze(0)


def test_a_bound_call_gives_its_tensors_and_other_arguments_by_name():
    q, k, v = (torch.full((4, 2, 8), float(i)) for i in range(3))
    obj = SageLike()
    bound = inspect.signature(SageLike.apply).bind(
        obj, q=q, k=k, v=v, cu_seqlens_q="cu", max_seqlen_q=4, causal=False, block_idx=3
    )
    assert [t is x for t, x in zip(call_tensors(bound).values(), (q, k, v), strict=True)] == [
        True,
        True,
        True,
    ]
    assert other_arguments(bound) == {
        "cu_seqlens_q": "cu",
        "max_seqlen_q": 4,
        "causal": False,
        "block_idx": 3,
    }
    new = torch.zeros(1)
    args, kwargs = with_tensors(bound, {"k": new})
    # Positional arguments stay positional up to the first one not given; the rest go by name.
    assert (
        args[1] is new and args[3] == "cu" and kwargs == {"max_seqlen_q": 4, "causal": False, "block_idx": 3}
    )


def test_a_lightx2v_class_as_a_shadow_op_and_reversed_kv_for_the_floor():
    context = {"kwargs": {"causal": False, "cu_seqlens_q": torch.tensor([0, 64])}}
    _, op_class = make_ops(context)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(64, 2, 32, generator=gen) for _ in range(3))  # LightX2V's [N, H, D]
    q4, k4, v4 = (to_heads_first(t) for t in (q, k, v))
    assert q4.shape == (1, 2, 64, 32) and q4.data_ptr() == q.data_ptr()  # views, no copy
    exact = exact_attention(q4, k4, v4, 32**-0.5, compute_dtype=torch.float64)
    for reversed_kv in (False, True):
        out = op_class("torch_sdpa", SdpaLike(), reversed_kv)(q4, k4, v4)
        assert out.shape == (1, 2, 64, 32) and (out - exact).abs().max() < 1e-5
    assert op_class("torch_sdpa", SdpaLike(), True).params["kv_reversed"] is True
    flat = SdpaLike().apply(q, k, v)
    assert torch.equal(output_heads_first(flat, 2, 32), op_class("torch_sdpa", SdpaLike(), False)(q4, k4, v4))


def test_a_lightx2v_shadow_takes_its_arms_choice_and_refuses_what_only_the_harness_serves():
    _, op_class = make_ops({"kwargs": {}})
    floor = {"name": "nf", "attn_type": "torch_sdpa", "kv_reversed": True}
    op = lightx2v_shadow(floor, SdpaLike, op_class)
    assert op.kv_reversed and op.params["kv_reversed"] is True and op.name == "torch_sdpa"
    for extra, field in (({"kv_chunks": 2}, "kv_chunks"), ({"attn_options": {"x": 1}}, "attn_options")):
        why = lightx2v_shadow({**floor, **extra}, SdpaLike, op_class)
        assert isinstance(why, str) and why.startswith(f"{field} needs a harness backend")
        assert why.endswith("LightX2V's torch_sdpa takes none (it applies kv_reversed alone)")


def test_a_step_served_where_the_schedule_does_not_send_it_is_an_error():
    schedule = StepSchedule(exact_first=1, exact_last=1)
    good = {"1": {"torch_sdpa": 3}, "2": {"sage_attn2": 3}, "3": {"torch_sdpa": 3}}
    rc = LightX2VRankCalls(per_step=good)
    check_schedule(rc, schedule, "sage_attn2", 3)
    assert rc.errors == []
    rc = LightX2VRankCalls(per_step={**good, "2": {"sage_attn2": 2, "torch_sdpa": 1}, "3": {"sage_attn2": 3}})
    check_schedule(rc, schedule, "sage_attn2", None)  # the steps counted give the run's length
    assert rc.errors == [
        "schedule: step 2 has 1 call(s) served by torch_sdpa (the schedule sends it to sage_attn2)",
        "schedule: step 3 has 3 call(s) served by sage_attn2 (the schedule sends it to torch_sdpa)",
    ]

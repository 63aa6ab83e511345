"""Step schedules: which steps run the exact backend, and the counts per step that prove it."""

from __future__ import annotations

import pytest
import torch
from attn_testutil import make_qkv

from harness.attention.insitu.recorder import CallSites
from harness.attention.registry import get_backend
from harness.attention.wrappers import exact_on, exact_steps, make_attention, schedule_text
from harness.records import StepSchedule


def test_exact_steps_from_first_last_and_named():
    s = StepSchedule(exact="torch_sdpa", exact_first=2, exact_last=1, exact_steps=[5])
    assert exact_steps(s, 8) == [1, 2, 5, 8]
    assert not exact_on(s, None, 8)  # a call outside any step runs the arm's backend
    assert not exact_on(s, 8, None)  # the last steps need the total
    assert schedule_text(s) == "torch_sdpa on the first 2 and last 1 and steps 5 step(s)"


def test_a_schedule_routes_by_the_step_and_counts_prove_it():
    sites = CallSites()
    schedule = StepSchedule(exact_first=1, exact_last=1)
    op = make_attention("sage_emul_thuml", schedule=schedule, sites=sites)
    q, k, v = make_qkv(64, h=1, d=32, dtype=torch.bfloat16)
    outs = {}
    for step in (1, 2, 3, 4):
        with sites.site(step=step, steps=4):
            for block in (0, 1):
                with sites.site(block=block):
                    outs[step] = op(q, k, v)
    calls = op.rank_calls()
    assert calls.per_step == {
        "1": {"torch_sdpa": 2},
        "2": {"sage_emul_thuml": 2},
        "3": {"sage_emul_thuml": 2},
        "4": {"torch_sdpa": 2},
    }
    assert calls.calls == {"torch_sdpa": 4, "sage_emul_thuml": 4} and not calls.fallbacks
    assert torch.equal(outs[1], get_backend("torch_sdpa")(q, k, v))
    assert torch.equal(outs[2], get_backend("sage_emul_thuml")(q, k, v))
    # the candidate's first call (its direct check) was made on step 1's inputs, as a warm-up
    assert calls.direct_check is not None and calls.direct_check.identical


def test_counts_per_step_without_a_schedule_and_outside_steps():
    sites = CallSites()
    op = make_attention("torch_sdpa", sites=sites)
    q, k, v = make_qkv(16, h=1, d=16, dtype=torch.float32)
    op(q, k, v)
    with sites.site(step=1):
        op(q, k, v)
    assert op.rank_calls().per_step == {"-": {"torch_sdpa": 1}, "1": {"torch_sdpa": 1}}
    assert make_attention("torch_sdpa").rank_calls().per_step == {}  # no sites: no per-step counts


def test_a_schedule_needs_the_call_sites():
    with pytest.raises(ValueError, match="sites"):
        make_attention("sage_emul_thuml", schedule=StepSchedule(exact_first=1))


def test_the_candidate_warms_up_on_every_call_shape_of_the_exact_first_step():
    """A Triton kernel compiles again for another sequence length (a refiner's 74 tokens, the DiT's
    rows): each shape's first candidate call falls in step 1, none in the first measured step."""
    from harness.attention.registry import AttentionOp
    from harness.attention.wrappers import ScheduledAttention

    class Recording(AttentionOp):
        name, exact = "rec", False

        def __init__(self, sites):
            self.inner, self.sites, self.seen = get_backend("sage_emul_thuml"), sites, []

        def __call__(self, q, k, v, scale=None):
            self.seen.append((self.sites.current.step, q.shape[2]))
            return self.inner(q, k, v, scale)

    sites = CallSites()
    cand = Recording(sites)
    op = ScheduledAttention(cand, get_backend("torch_sdpa"), StepSchedule(exact_first=1), sites)
    short, long = (
        make_qkv(74, h=1, d=32, dtype=torch.bfloat16),
        make_qkv(256, h=1, d=32, dtype=torch.bfloat16),
    )
    for step in (1, 2):
        with sites.site(step=step, steps=2):
            for qkv in (short, long, long):
                op(*qkv)
    # step 1: one warm-up per shape (the exact op served); step 2: the candidate serves all three
    assert cand.seen == [(1, 74), (1, 256), (2, 74), (2, 256), (2, 256)]

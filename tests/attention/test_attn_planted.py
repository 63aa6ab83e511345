"""harness.attention.planted: an error of known size on every call, reproducible, and the size the
in-situ measurement reads on a real tiny run's calls."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.attention.insitu.recorder import read_insitu
from harness.attention.registry import check_options, get_backend
from harness.campaign import execute, lock_campaign, plan_campaign


def _qkv(seed: int, n: int = 70):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 2, n, 16, generator=g, dtype=torch.float64) for _ in range(3)]


def _rel_l1(out, exact) -> float:
    return float((out - exact).abs().sum() / exact.abs().sum())


@settings(max_examples=25, deadline=None)
@given(dose=st.floats(1e-5, 0.5), shape=st.sampled_from(["noise", "scale"]), seed=st.integers(0, 2**31))
def test_the_planted_rel_l1_is_the_dose(dose, shape, seed):
    q, k, v = _qkv(seed % 1000)
    exact = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    out = get_backend("planted_error", dose=dose, shape=shape, seed=seed)(q, k, v)
    assert _rel_l1(out, exact) == pytest.approx(dose, rel=1e-9)


def test_planted_noise_is_reproducible_call_by_call_and_seeded():
    calls = [_qkv(i) for i in range(3)]
    first, again, other = (get_backend("planted_error", dose=0.01, seed=s) for s in (7, 7, 8))
    a, b, c = ([op(*qkv) for qkv in calls] for op in (first, again, other))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[1], c[1])  # another seed, other signs


@pytest.mark.parametrize(
    ("options", "msg"),
    [
        ({"dose": 1.0}, "dose=1.0; expected a number in [0, 1)"),
        ({"dose": "0.1"}, "dose='0.1'"),
        ({"shape": "tilt"}, "shape='tilt'; expected one of noise, scale"),
        ({"seed": -1}, "seed=-1"),
        ({"site": {"kinds": ["decoder"]}}, "option site.kinds.0: Input should be 'dit_self'"),
        ({"site": {"steps": [0]}}, "option site.steps.0: Input should be greater than or equal to 1"),
        ({"site": {"step": [1]}}, "option site.step: Extra inputs are not permitted"),
    ],
)
def test_a_bad_option_is_one_line_before_any_run(options, msg):
    assert msg in check_options("planted_error", options)


SCENARIO = """\
name: planted
runner: builtin
seed: 42
builtin: {preset: tiny, save_latents: false}
profiles:
  t: {infer_steps: 4}
arms:
  - {name: ref, attn_type: torch_sdpa, role: reference}
  - {name: noise_1e-3, attn_type: planted_error, attn_options: {dose: 0.001}}
  - {name: noise_1e-1, attn_type: planted_error, attn_options: {dose: 0.1, seed: 3}}
  - {name: scale_1e-2, attn_type: planted_error, attn_options: {dose: 0.01, shape: scale}}
  - {name: ref_insitu, attn_type: torch_sdpa, shadows: [noise_1e-3, noise_1e-1, scale_1e-2, step2_block1]}
  - {name: step2_block1, attn_type: planted_error, attn_options: {dose: 0.05, site: {steps: [2], blocks: [1]}}}
"""


@pytest.mark.slow
def test_in_situ_reads_the_planted_dose_on_every_call_of_a_real_run(tmp_path):
    scenario = tmp_path / "planted.yaml"
    scenario.write_text(SCENARIO)
    plan = plan_campaign(scenario, arms=["ref", "ref_insitu"], out_root=tmp_path / "out")
    outcome = execute(plan, lock=lock_campaign(plan.campaign), report=False)
    run = read_insitu(outcome.campaign.path / "runs" / "ref_insitu" / "insitu")
    assert len(run.calls) == 6  # 3 DiT steps x 2 blocks
    for name, dose in {"noise_1e-3": 1e-3, "noise_1e-1": 0.1, "scale_1e-2": 0.01}.items():
        # against exact FP32 attention on the sampled rows: the dose, give or take FP32 rounding
        measured = [c.errors[name].rel_l1 for c in run.calls]
        assert all(m == pytest.approx(dose, rel=1e-3) for m in measured), (name, measured)
    # planted on one site (step 2, block 1): the dose there, exact SDPA (FP32 rounding) everywhere else
    site = {(c.step, c.block): c.errors["step2_block1"].rel_l1 for c in run.calls}
    assert site.pop((2, 1)) == pytest.approx(0.05, rel=1e-3)
    assert len(site) == 5 and all(e < 1e-5 for e in site.values()), site


def test_a_site_needs_the_runs_call_sites():
    from harness.attention.insitu.recorder import CallSites
    from harness.errors import HarnessError

    op = get_backend("planted_error", dose=0.1, site={"kinds": ["refiner"]})
    q, k, v = _qkv(0)
    with pytest.raises(HarnessError, match="option site needs the run's call sites"):
        op(q, k, v)
    sites = CallSites()
    op.bind_sites(sites)
    exact = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    with sites.site(kind="dit_self"):
        assert torch.equal(op(q, k, v), exact)
    with sites.site(kind="refiner"):
        assert _rel_l1(op(q, k, v), exact) == pytest.approx(0.1, rel=1e-9)

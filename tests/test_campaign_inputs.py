"""Inputs as a design axis, end to end on the builtin runner: two inputs of different lengths, every
arm run once per (input, seed), each candidate judged per (input, seed) against that sample's own
reference and floor, and the verdict naming the input that decides it."""

from __future__ import annotations

import json

import pytest

from harness.campaign import execute, lock_campaign, plan_campaign
from harness.records import RunStatus

# A kernel with SageAttention 1.0.6's Triton defect and nothing else: the last 64-key block's padded
# keys scored (zero keys, zero values), so its error depends on the input's length modulo 64.
PADDED_KEYS_KERNEL = """
import torch
from harness.attention.registry import AttentionBackend, register_backend


@register_backend("padded_keys_sdpa", exact=False, description="SDPA scoring the padded keys of the last 64")
class PaddedKeysSDPA(AttentionBackend):
    def __call__(self, q, k, v, scale=None):
        pad = -k.shape[-2] % 64
        k = torch.nn.functional.pad(k, (0, 0, 0, pad))
        v = torch.nn.functional.pad(v, (0, 0, 0, pad))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)
"""

# tiny: 37 audio + 4x4x7 video tokens; 43 text tokens make 192 (3 x 64), 16 make 165 (27 padded)
SCENARIO = """\
name: two_inputs
runner: builtin
seed: 42
plugins: [kernel.py]
builtin: {preset: tiny, save_latents: false, prompt: "a woman dances in the street, drums and a crowd"}
inputs:
  aligned: {params: {text_tokens: 43}}
  padded:
    prompt: rain on a tin roof
    params: {text_tokens: 16}
profiles:
  t: {infer_steps: 4}
arms:
  - {name: ref, attn_type: torch_sdpa, role: reference}
  - {name: rev, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor}
  - {name: chunks, attn_type: torch_sdpa, kv_chunks: 2, role: noise_floor}
  - {name: cand, attn_type: padded_keys_sdpa}
"""


@pytest.mark.slow
def test_a_defect_of_one_input_is_judged_on_its_own_floor_and_the_input_is_named(tmp_path):
    (tmp_path / "kernel.py").write_text(PADDED_KEYS_KERNEL)
    scenario = tmp_path / "two_inputs.yaml"
    scenario.write_text(SCENARIO)
    plan = plan_campaign(scenario, out_root=tmp_path / "out")
    outcome = execute(plan, lock=lock_campaign(plan.campaign))
    runs = {r.spec.key: r for r in outcome.records}
    arms, inputs = ("ref", "rev", "chunks", "cand"), ("aligned", "padded")
    assert sorted(runs) == sorted(f"{a}@{i}@42" for a in arms for i in inputs)
    assert all(r.status == RunStatus.ok for r in runs.values()), {k: r.reason for k, r in runs.items()}
    # each input's own prompt and length reached its runs
    assert runs["ref@padded@42"].spec.params["prompt"] == "rain on a tin roof"
    assert runs["ref@aligned@42"].spec.params["pipeline"]["text_tokens"] == 43
    assert runs["ref@padded@42"].spec.params["pipeline"]["text_tokens"] == 16
    assert runs["ref@aligned@42"].spec.input == "aligned"

    res = json.loads((outcome.campaign.path / "results.json").read_text())
    assert res["seeds"] == ["42 (aligned)", "42 (padded)"]
    (v,) = res["verdicts"]
    # at 192 keys nothing is padded: the kernel is SDPA itself; at 165 it is far outside its floor
    assert v["identical_seeds"] == ["42 (aligned)"]
    assert v["word"] == "outside"
    words = {sv["seed"]: sv["word"] for sv in v["per_seed"]}
    assert words == {"42 (aligned)": "identical", "42 (padded)": "outside"}
    # the headline names the sample that decides, and the summary carries it
    assert "identical on seed(s) 42 (aligned)" in v["text"]
    assert "seed 42 (padded)'s audio error energy" in v["text"] or "seed 42 (padded)'s video" in v["text"]
    assert "42 (padded): pixel/waveform" in (outcome.campaign.path / "report.md").read_text()
    # the floor is measured per input: each input's reference against its own floor runs
    floor = res["floor"]
    assert set(floor["regimes"]) == {"42 (aligned)", "42 (padded)"}

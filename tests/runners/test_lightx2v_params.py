"""The LightX2V runner's parameters: profile and arm overrides, the typed model, the spec hash."""

from __future__ import annotations

import json

import pytest
from lightx2v_site import ARMS, BASE, small, specs_for

from harness.errors import HarnessError, ScenarioError
from harness.plan import build_plan
from harness.records import canonical_hash
from harness.runners.lightx2v.params import LightX2VParams, params_of
from harness.scenario.load import parse_scenario


def test_the_shipped_scenario_plans_its_arms_with_the_dit_step_count(site):
    specs = specs_for(site)
    assert list(specs) == ARMS
    for spec in specs.values():
        p = spec.params
        assert p["infer_steps"] == 4 and p["dit_steps"] == 3  # H3: N sigma points, N-1 DiT steps
        assert p["nproc_per_node"] == 2 and p["config_overrides"]["parallel"] == {"tensor_p_size": 2}
        assert p["config_overrides"]["attn_type"] == spec.attn_type
        assert p["config_overrides"]["refiner_attn_type"] == spec.attn_type
        assert p["image_path"] == [
            str(site["root"] / "assets/inputs/street_dance" / n) for n in ("girl.png", "img_0.jpg")
        ]
        assert spec.env == {"PLATFORM": "amd_rocm", "ROCM_DETERMINISTIC_FP32_BLAS": "1"}
        assert spec.seed == 42
    assert specs["torch_sdpa_kv_reversed"].kv_reversed is True
    flavours = [specs[a].params["sageattention"] for a in ARMS]
    assert flavours == [None, None, None, "sageattention2", "aiter_shim", None, None]
    full = specs_for(site, profile="full")["torch_sdpa"].params
    assert (full["infer_steps"], full["dit_steps"]) == (30, 29)


def test_the_params_hash_follows_the_base_config(site):
    before = specs_for(site)["torch_sdpa"].spec_hash()
    site["config"].write_text(json.dumps({**BASE, "video_flow_shift": 6.0}))
    assert specs_for(site)["torch_sdpa"].spec_hash() != before


def test_profile_and_arm_parameters_land_in_block_fields_or_config_overrides(site):
    text = small(site)
    specs = {s.arm: s for s in build_plan(parse_scenario(text, "s.yaml", {}), profile="quick")}
    ref, cand = specs["ref"].params, specs["cand"].params
    assert ref["nproc_per_node"] == 1  # a block field, replaced by the profile
    assert ref["config_overrides"]["parallel"] == {"tensor_p_size": 2, "seq_p_size": 1}  # dicts merge
    assert ref["infer_steps"] == 3 and ref["dit_steps"] == 2
    assert "target_width" not in ref["config_overrides"]
    assert (
        cand["config_overrides"]["target_width"] == 1344 and cand["config_overrides"]["target_height"] == 768
    )
    # An explicit refiner_attn_type is kept; otherwise the refiner follows the arm.
    assert cand["attention"]["refiner_attn_type"] == "torch_sdpa"
    assert ref["attention"] == {
        "attn_type": "torch_sdpa",
        "refiner_attn_type": "torch_sdpa",
        "qwen3vl_attn_type": "torch_sdpa",
        "vae_attn_type": "torch_sdpa",
    }


@pytest.mark.parametrize(
    ("arm", "message"),
    [
        (
            "{name: cand, attn_type: sage_attn2, overrides: {attn_type: torch_sdpa}}",
            "set attn_type on the arm",
        ),
        ("{name: cand, attn_type: torch_sdpa, sageattention: aiter_shim}", "aiter_shim only applies to"),
        ("{name: cand, attn_type: x, overrides: {nproc_per_node: 0}}", "lightx2v.nproc_per_node"),
    ],
)
def test_bad_arm_parameters_are_scenario_errors(site, arm, message):
    text = small(site).replace(
        "  - {name: cand, attn_type: sage_attn2, overrides: {target_width: 1344, refiner_attn_type: torch_sdpa}}",
        f"  - {arm}",
    )
    with pytest.raises(ScenarioError, match=message) as info:
        build_plan(parse_scenario(text, "s.yaml", {}))
    assert "\n" not in str(info.value)


def test_a_scenario_wide_count_ops_is_refused_with_the_way_out(site):
    text = small(site).replace("  prompt: hi\n", "  prompt: hi\n  count_ops: {op: aiter.ops.x:y}\n")
    with pytest.raises(ScenarioError, match=r"count_ops is per arm: set it on the arms that must hit the op"):
        parse_scenario(text, "s.yaml", {})


# Planned with paths that exist nowhere, so the parameters are the same on every machine.
FIXED = """\
name: fixed
runner: lightx2v
seed: 3
profiles:
  quick: {infer_steps: 3, nproc_per_node: 1, config_overrides: {parallel: {seq_p_size: 1}}}
lightx2v:
  root: /nonexistent-harness-test/LightX2V
  model_path: /nonexistent-harness-test/MiniMax-H3
  config_json: configs/minimax_h3/minimax_h3_ref2av.json
  prompt: hi
  image_path: [assets/a.png]
  synthetic_checkpoint: {preset: tiny, seed: 1}
  reference_short_edge: 64
arms:
  - {name: ref, attn_type: torch_sdpa, role: reference}
  - {name: rev, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor}
  - {name: shim, attn_type: sage_attn2, sageattention: aiter_shim, count_ops: {op: "m.n:f"}, overrides: {use_adaln_cache: true}}
  - {name: other, attn_type: torch_sdpa, overrides: {model_cls: wan2.1, task: t2v}}
"""


def test_the_typed_parameters_hash_as_the_untyped_dict_did():
    """Hashes of the parameters and of one spec as the harness wrote them before the typed model:
    campaigns planned then resume (their runs keep their spec hash)."""
    specs = {s.arm: s for s in build_plan(parse_scenario(FIXED, "fixed.yaml", {}), profile="quick")}
    assert {arm: canonical_hash(s.params) for arm, s in specs.items()} == {
        "ref": "50b58e3a16c9cfdcc28c0c9ebd981414990d6ee035c7d5e74cd5419fd1e6adc2",
        "rev": "50b58e3a16c9cfdcc28c0c9ebd981414990d6ee035c7d5e74cd5419fd1e6adc2",
        "shim": "0f318240f6e2156dc614a4a238e6d081ff84d34440af9760f8f8afda9b9cce78",
        "other": "da0c669c15b558992d1d6e88c8adfba2e30170028302e1ff8c0d0e3d50486226",
    }
    assert specs["ref"].spec_hash() == "bd24c39e07e2b467d6cd6f83d750574f2c3752330ec4b00e50582cec0e4bd864"
    # Sites a model does not have are absent (not null), and `bare` is absent unless set.
    assert specs["other"].params["attention"] == {
        "attn_type": "torch_sdpa",
        "refiner_attn_type": "torch_sdpa",
    }
    assert "bare" not in specs["ref"].params
    bare = LightX2VParams.model_validate(specs["ref"].params).model_copy(update={"bare": True})
    assert bare.model_dump(mode="json")["bare"] is True


def test_the_parameters_read_back_as_they_were_written(site):
    for spec in specs_for(site).values():
        params = LightX2VParams.model_validate(spec.params)
        assert params.model_dump(mode="json") == spec.params
        assert params.synthetic_checkpoint is None and params.attention.attn_type == spec.attn_type


def test_parameters_that_are_not_the_runners_are_one_line(site):
    spec = specs_for(site)["torch_sdpa"]
    with pytest.raises(HarnessError, match=r"^lightx2v: the run spec carries no lightx2v parameters"):
        params_of(spec.model_copy(update={"params": {"pipeline": {}}}))
    with pytest.raises(HarnessError) as info:
        params_of(spec.model_copy(update={"params": {**spec.params, "nproc_per_node": "two"}}))
    assert str(info.value).startswith(
        "lightx2v: run spec params.nproc_per_node: Input should be a valid integer"
    )
    with pytest.raises(HarnessError, match=r"params\.infer_step: Extra inputs are not permitted"):
        params_of(spec.model_copy(update={"params": {**spec.params, "infer_step": 4}}))

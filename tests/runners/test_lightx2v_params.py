"""The LightX2V runner's parameters: profile and arm overrides, the typed model, the spec hash."""

from __future__ import annotations

import json

import pytest
from lightx2v_site import ARMS, BASE, small, specs_for

from harness.errors import ScenarioError
from harness.plan import build_plan
from harness.scenario import parse_scenario


def test_the_shipped_scenario_plans_five_arms_with_the_dit_step_count(site):
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
    assert [specs[a].params["sageattention"] for a in ARMS] == [None, None, None, "package", "aiter_shim"]
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

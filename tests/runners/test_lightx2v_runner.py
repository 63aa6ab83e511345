"""The LightX2V runner without GPUs: params, exact commands, environment, configs, pre-flight, finalize."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import harness.runners.lightx2v.preflight as preflight
from harness.errors import HarnessError, ScenarioError
from harness.plan import build_plan
from harness.records import AttnCallsRecord, TimingRecord
from harness.runners import get_runner
from harness.runners.lightx2v.command import HARNESS_IMPORT_ROOT, SHIM_DIR, build_env
from harness.runners.lightx2v.finalize import merge_rank_calls
from harness.runners.lightx2v.params import LightX2VParams, deep_merge
from harness.runners.lightx2v.preflight import ProbeResult, run_probe, synthetic_problem
from harness.runners.lightx2v.runner import LightX2VRunner
from harness.scenario import load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "minimax_h3_ref2av_r9700.yaml"
LOGS = REPO / "tests" / "fixtures" / "lightx2v_logs"
STUB = REPO / "tests" / "fixtures" / "lightx2v_stub"

# The upstream MiniMax-H3 Ref2AV base config (configs/minimax_h3/minimax_h3_ref2av.json).
BASE = {
    "infer_steps": 30, "target_video_length": 124, "target_height": 544, "target_width": 960, "fps": 24,
    "enable_cfg": False, "cpu_offload": True, "offload_granularity": "model", "text_encoder_cpu_offload": True,
    "vae_cpu_offload": True, "lazy_load": False, "unload_modules": False, "attn_type": "sage_attn2",
    "rms_type": "sgl-kernel", "rope_type": "minimax_h3_triton_rope", "feature_caching": "NoCaching",
    "use_compile": False, "video_flow_shift": 12.0, "audio_flow_shift": 3.0,
}  # fmt: skip
ARMS = [
    "torch_sdpa",
    "torch_sdpa_kv_reversed",
    "aiter_sage_attn",
    "sage_attn2_triton",
    "sage_attn2_aiter_shim",
]


@pytest.fixture
def site(tmp_path):
    """A fake LightX2V checkout and model folder, laid out as the shipped scenario expects."""
    root, model = tmp_path / "LightX2V", tmp_path / "MiniMax-H3"
    (root / "lightx2v").mkdir(parents=True)
    (root / "lightx2v" / "infer.py").write_text("def main(): ...\n")
    attn = root / "lightx2v" / "common" / "ops" / "attn"
    attn.mkdir(parents=True)
    (attn / "torch_sdpa.py").write_text('@ATTN_WEIGHT_REGISTER("torch_sdpa")\nclass A: ...\n')
    (attn / "sage_attn.py").write_text('@ATTN_WEIGHT_REGISTER("sage_attn2")\nclass B: ...\n')
    plat = root / "lightx2v_platform" / "ops" / "attn" / "amd_rocm"
    plat.mkdir(parents=True)
    (plat / "sage.py").write_text("@PLATFORM_ATTN_WEIGHT_REGISTER('aiter_sage_attn')\nclass C: ...\n")
    cfg = root / "configs" / "minimax_h3" / "minimax_h3_ref2av.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(json.dumps(BASE, indent=2))
    inputs = root / "assets" / "inputs" / "street_dance"
    inputs.mkdir(parents=True)
    for name in ("girl.png", "img_0.jpg"):
        (inputs / name).write_bytes(b"\x89 not really an image")
    for d in ("transformer", "transformer_ref", "text_encoder", "tokenizer", "processor", "vae", "audio_vae"):
        (model / d).mkdir(parents=True)
    (model / "transformer_ref" / "config.json").write_text("{}")
    environ = {"LIGHTX2V_ROOT": str(root), "MINIMAX_H3_MODEL": str(model)}
    return {"root": root, "model": model, "config": cfg, "environ": environ, "tmp": tmp_path}


@pytest.fixture
def probe_ok(monkeypatch):
    seen = []

    def fake(params, spec, env):
        seen.append((spec.arm, env["PYTHONPATH"]))
        return ProbeResult(ok=True, facts={"arch": "gfx1201", "gpus": 2})

    monkeypatch.setattr(preflight, "run_probe", fake)
    return seen


def specs_for(site, profile="3step", **over):
    scenario = load_scenario(SCENARIO, environ=site["environ"])
    return {s.arm: s for s in build_plan(scenario, profile=profile, **over)}


# --- params -----------------------------------------------------------------------------------------


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


SMALL = """\
name: small
runner: lightx2v
seed: 1
profiles:
  quick: {infer_steps: 3, nproc_per_node: 1, config_overrides: {parallel: {seq_p_size: 1}}}
lightx2v:
  root: @ROOT@
  model_path: @MODEL@
  config_json: configs/minimax_h3/minimax_h3_ref2av.json
  nproc_per_node: 2
  prompt: hi
  config_overrides: {parallel: {tensor_p_size: 2}, target_height: 768}
arms:
  - {name: ref, attn_type: torch_sdpa, role: reference}
  - {name: cand, attn_type: sage_attn2, overrides: {target_width: 1344, refiner_attn_type: torch_sdpa}}
"""


def small(site) -> str:
    return SMALL.replace("@ROOT@", str(site["root"])).replace("@MODEL@", str(site["model"]))


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


# --- command, environment and config -------------------------------------------------------------------


def test_dry_run_writes_nothing_and_returns_the_exact_command(site):
    spec = specs_for(site)["torch_sdpa_kv_reversed"]
    run_dir = site["tmp"] / "reports" / "runs" / "torch_sdpa_kv_reversed"
    launch = get_runner("lightx2v").prepare(spec, run_dir, dry_run=True)
    assert not run_dir.exists()
    root, model = site["root"], site["model"]
    prompt = spec.params["prompt"]
    assert prompt.startswith("A young woman dances hip-hop")
    assert launch.command == [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        "-m", "harness.runners.lightx2v.launch",
        "--run-dir", str(run_dir), "--attn-type", "torch_sdpa", "--kv-reversed",
        "--scope", "lightx2v.models.networks",
        "--wrapper", "ulysses", "--wrapper", "ulysses-4090", "--wrapper", "ring",
        "--",
        "--model_cls", "minimax_h3", "--task", "ref2av", "--model_path", str(model),
        "--config_json", str(run_dir / "config.json"),
        "--prompt", prompt,
        "--image_path", f"{root}/assets/inputs/street_dance/girl.png,{root}/assets/inputs/street_dance/img_0.jpg",
        "--save_result_path", str(run_dir / "output.mp4"),
        "--seed", "42",
    ]  # fmt: skip
    assert launch.gpus == 2 and launch.cwd == str(run_dir)


OP_FLAG = "gfx1201_sage_attention=aiter.ops.gfx1201.sage_attention:gfx1201_sage_attention"


def test_only_the_arms_that_name_the_op_count_it(site):
    """The aiter op is counted on the arms that must reach it, never on the exact arms."""
    commands = {
        arm: get_runner("lightx2v").prepare(spec, site["tmp"] / arm, dry_run=True).command
        for arm, spec in specs_for(site).items()
    }
    counted = {arm for arm, cmd in commands.items() if OP_FLAG in cmd}
    assert counted == {"aiter_sage_attn", "sage_attn2_aiter_shim"}
    assert all("--count-op" not in cmd for arm, cmd in commands.items() if arm not in counted)


def test_a_scenario_wide_count_ops_is_refused_with_the_way_out(site):
    text = small(site).replace("  prompt: hi\n", "  prompt: hi\n  count_ops: {op: aiter.ops.x:y}\n")
    with pytest.raises(ScenarioError, match=r"count_ops is per arm: set it on the arms that must hit the op"):
        parse_scenario(text, "s.yaml", {})


def test_the_attention_type_of_the_pull_requests_backend_is_set_per_arm(site):
    environ = {**site["environ"], "AITER_SAGE_ATTN_TYPE": "gfx1201_sage_attn"}
    scenario = load_scenario(SCENARIO, environ=environ)
    spec = {s.arm: s for s in build_plan(scenario, profile="3step")}["aiter_sage_attn"]
    assert spec.attn_type == "gfx1201_sage_attn"
    assert spec.params["config_overrides"]["attn_type"] == "gfx1201_sage_attn"
    assert spec.params["count_ops"] == {
        "gfx1201_sage_attention": "aiter.ops.gfx1201.sage_attention:gfx1201_sage_attention"
    }


def test_a_torchrun_executable_replaces_the_module_launch(site):
    spec = specs_for(site)["torch_sdpa"]
    spec.params["torchrun"] = "/opt/venv/bin/torchrun"
    cmd = get_runner("lightx2v").prepare(spec, site["tmp"] / "r", dry_run=True).command
    assert cmd[:3] == ["/opt/venv/bin/torchrun", "--standalone", "--nproc_per_node=2"]
    assert "--kv-reversed" not in cmd


def test_environment_per_arm(site, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/site/extra")
    specs = specs_for(site)
    envs = {a: get_runner("lightx2v").prepare(specs[a], site["tmp"] / a, dry_run=True).env for a in ARMS}
    for arm, env in envs.items():
        assert env["PLATFORM"] == "amd_rocm" and env["ROCM_DETERMINISTIC_FP32_BLAS"] == "1"
        assert env["PROFILING_DEBUG_LEVEL"] == "2"
        assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
        assert env["CUDA_VISIBLE_DEVICES"] == env["HIP_VISIBLE_DEVICES"] == "0,1"
        path = env["PYTHONPATH"].split(os.pathsep)
        expected = [str(site["root"]), str(HARNESS_IMPORT_ROOT), "/site/extra"]
        if arm == "sage_attn2_aiter_shim":
            assert path == [str(SHIM_DIR), *expected]  # the shim first, for this arm only
        else:
            assert path == expected
    assert (SHIM_DIR / "sageattention" / "__init__.py").is_file()


def test_scenario_env_overrides_the_defaults(site):
    spec = specs_for(site)["torch_sdpa"]
    spec.env["PYTORCH_CUDA_ALLOC_CONF"] = "garbage_collection_threshold:0.8"
    env = get_runner("lightx2v").prepare(spec, site["tmp"] / "r", dry_run=True).env
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "garbage_collection_threshold:0.8"


def test_prepare_writes_one_resolved_config_and_never_touches_lightx2v(site, probe_ok):
    spec = specs_for(site)["aiter_sage_attn"]
    base_bytes = site["config"].read_bytes()
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    (run_dir / "rank1.log").write_text("stale")
    (run_dir / "attn_calls.rank1.json").write_text("{}")
    runner = get_runner("lightx2v")
    assert runner.preflight(spec) is None
    runner.prepare(spec, run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    assert config == {
        **BASE,
        "attn_type": "aiter_sage_attn",
        "refiner_attn_type": "aiter_sage_attn",
        "infer_steps": 4,
        "parallel": {"tensor_p_size": 2},
        "target_height": 768,
        "target_width": 1344,
        "target_video_length": 362,
        "cpu_offload": True,
        "offload_granularity": "block",
        "text_encoder_offload_granularity": "block",
        "use_adaln_cache": True,
    }
    assert site["config"].read_bytes() == base_bytes
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.json", "lightx2v_env.json"]
    facts = json.loads((run_dir / "lightx2v_env.json").read_text())
    assert facts["probe"] == {"arch": "gfx1201", "gpus": 2} and facts["lightx2v_root"] == str(site["root"])


def test_prepare_without_the_base_config_is_a_clear_error(site):
    spec = specs_for(site)["torch_sdpa"]
    site["config"].unlink()
    with pytest.raises(HarnessError, match=r"lightx2v.config_json .*minimax_h3_ref2av.json: not found"):
        get_runner("lightx2v").prepare(spec, site["tmp"] / "run")


# --- pre-flight --------------------------------------------------------------------------------------


def _remove(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() else path.unlink()


BREAKS = {
    "infer.py": (
        lambda s: _remove(s["root"] / "lightx2v" / "infer.py"),
        "lightx2v.root {root}: lightx2v/infer.py not found (point it, e.g. LIGHTX2V_ROOT, at a LightX2V checkout)",
    ),
    "config": (
        lambda s: s["config"].write_text("{not json"),
        "lightx2v.config_json {root}/configs/minimax_h3/minimax_h3_ref2av.json: not valid JSON",
    ),
    "model folders": (
        lambda s: [_remove(s["model"] / d) for d in ("processor", "audio_vae")],
        "lightx2v.model_path {model}: missing folder(s) processor, audio_vae (needs transformer_ref, "
        "text_encoder, tokenizer, processor, vae, audio_vae)",
    ),
    "transformer_ref config": (
        lambda s: _remove(s["model"] / "transformer_ref" / "config.json"),
        "lightx2v.model_path {model}: transformer_ref/config.json not found (ref2av loads transformer_ref)",
    ),
    "input": (
        lambda s: _remove(s["root"] / "assets/inputs/street_dance/img_0.jpg"),
        "lightx2v.image_path {root}/assets/inputs/street_dance/img_0.jpg: not found",
    ),
}


@pytest.mark.parametrize("what", list(BREAKS))
def test_preflight_refuses_with_one_line(site, probe_ok, what):
    specs = specs_for(site)
    runner = get_runner("lightx2v")
    assert runner.preflight(specs["aiter_sage_attn"]) is None
    breaker, expected = BREAKS[what]
    breaker(site)
    reason = runner.preflight(specs["aiter_sage_attn"])
    expected = expected.format(root=site["root"], model=site["model"])
    assert reason == expected or (what == "config" and reason.startswith(expected)), reason
    assert "\n" not in reason
    assert len(probe_ok) == 1  # the GPU-side probe only ran when the cheap checks passed


def test_ref2av_needs_transformer_ref_not_transformer(site, probe_ok):
    """ref2av never loads transformer/: a model folder without it is complete."""
    shutil.rmtree(site["model"] / "transformer")
    assert get_runner("lightx2v").preflight(specs_for(site)["torch_sdpa"]) is None


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"target_video_length": 360},
            "target_video_length 360: MiniMax-H3 needs 17n+5 frames (nearest: 345 or 362)",
        ),
        (
            {"target_video_length": 379},
            "target_video_length 379: MiniMax-H3 takes 124..362 frames (5-15 s at 24 fps)",
        ),
        ({"target_height": 770}, "target_height x target_width 770x1344: MiniMax-H3 needs multiples of 32"),
        ({"target_width": 1350}, "target_height x target_width 768x1350: MiniMax-H3 needs multiples of 32"),
        ({"infer_steps": 1}, "infer_steps 1: MiniMax-H3 runs infer_steps-1 DiT steps, so at least 2"),
        ({"parallel": {"tensor_p_size": 4}}, "config parallel sizes multiply to 4 but nproc_per_node is 2"),
        ({"lazy_load": True}, "config lazy_load: MiniMax-H3 does not implement it"),
    ],
)
def test_preflight_geometry_and_layout(site, probe_ok, overrides, expected):
    spec = specs_for(site)["torch_sdpa"]
    spec.params["config_overrides"] = deep_merge(spec.params["config_overrides"], overrides)
    assert get_runner("lightx2v").preflight(spec) == expected
    assert probe_ok == []


def test_preflight_needs_a_parallel_block_for_several_ranks(site, probe_ok):
    spec = specs_for(site)["torch_sdpa"]
    del spec.params["config_overrides"]["parallel"]
    reason = get_runner("lightx2v").preflight(spec)
    assert reason == "nproc_per_node 2 needs a 'parallel' block in the config (e.g. tensor_p_size: 2)"


def test_preflight_refuses_profiling_off_and_missing_launchers(site, probe_ok):
    runner = get_runner("lightx2v")
    spec = specs_for(site)["torch_sdpa"]
    spec.env["PROFILING_DEBUG_LEVEL"] = "0"
    assert runner.preflight(spec).startswith("PROFILING_DEBUG_LEVEL=0: LightX2V logs no step times below 1")
    spec = specs_for(site)["torch_sdpa"]
    spec.params["torchrun"] = str(site["tmp"] / "no-torchrun")
    assert runner.preflight(spec) == f"lightx2v.torchrun {site['tmp'] / 'no-torchrun'}: not found"


def test_preflight_refuses_ref2av_without_references(site, probe_ok):
    spec = specs_for(site)["torch_sdpa"]
    spec.params["image_path"] = []
    reason = get_runner("lightx2v").preflight(spec)
    assert reason == "lightx2v.image_path: ref2av needs at least one reference image or video"


def test_preflight_passes_on_the_probe_verdict(site, monkeypatch):
    def refuse(params, spec, env):
        return ProbeResult(
            ok=False, reason="nproc_per_node 2 exceeds the 1 visible GPU(s) (visible devices: 0)"
        )

    monkeypatch.setattr(preflight, "run_probe", refuse)
    reason = get_runner("lightx2v").preflight(specs_for(site)["sage_attn2_aiter_shim"])
    assert reason == "nproc_per_node 2 exceeds the 1 visible GPU(s) (visible devices: 0)"


@pytest.mark.slow
def test_the_real_probe_runs_in_the_ranks_environment(site):
    """Here (CPU torch, no GPU) the probe refuses on the GPU count, from a subprocess."""
    spec = specs_for(site)["sage_attn2_aiter_shim"]
    params = LightX2VParams.model_validate(spec.params)
    env = build_env(params, spec, os.environ.get("PYTHONPATH"))
    env.pop("CUDA_VISIBLE_DEVICES"), env.pop("HIP_VISIBLE_DEVICES")
    result = run_probe(params, spec, env)
    assert result.ok is False
    assert result.reason == "nproc_per_node 2 exceeds the 0 visible GPU(s)"
    assert result.facts["gpus"] == 0 and result.facts["torch"]


@pytest.mark.slow
def test_probe_sees_which_sageattention_an_arm_gets(monkeypatch):
    from harness.runners.lightx2v import probe

    if probe.importlib.util.find_spec("sageattention") is not None:
        pytest.skip("a sageattention package is installed here")
    monkeypatch.delitem(sys.modules, "sageattention", raising=False)
    assert probe.sageattention_reason("aiter_shim") == (
        "the sageattention package is not importable (the aiter shim is not on PYTHONPATH)"
    )
    monkeypatch.syspath_prepend(str(SHIM_DIR))
    reason = probe.sageattention_reason("package")
    assert reason.startswith("sageattention resolves to the aiter shim")
    # The shim is found; what stops it here is the op's platform (no ROCm torch).
    assert probe.sageattention_reason("aiter_shim").startswith("needs a ROCm build of torch")
    sys.modules.pop("sageattention", None)


# --- finalize -----------------------------------------------------------------------------------------


def _rank_file(rank: int, calls: dict, **extra) -> dict:
    return {"schema": "harness.attn_calls.rank/1", "rank": str(rank), "requested": "aiter_sage_attn",
            "calls": calls, "fallbacks": {}, "errors": [], "outside_scope": {"torch_sdpa": 12},
            "sites": {}, "instances": {}, "kv_reversed_calls": 0, "op_calls": {"gfx1201_sage_attention": 147},
            "modules": {}, "finished": True, **extra}  # fmt: skip


def test_finalize_writes_timing_and_attention_calls(site):
    spec = specs_for(site)["aiter_sage_attn"]
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    shutil.copy(LOGS / "h3_tp2_rank0.log", run_dir / "rank0.log")
    shutil.copy(LOGS / "h3_tp2_rank1.log", run_dir / "rank1.log")
    for r in (0, 1):
        (run_dir / f"attn_calls.rank{r}.json").write_text(json.dumps(_rank_file(r, {"aiter_sage_attn": 147})))
    get_runner("lightx2v").finalize(spec, run_dir)
    timing = TimingRecord.model_validate_json((run_dir / "timing.json").read_text())
    assert timing.source == "lightx2v-log" and timing.dit_steps == 3 == spec.params["dit_steps"]
    assert timing.seq_len == 89619 and timing.missing == []
    calls = AttnCallsRecord.model_validate_json((run_dir / "attn_calls.json").read_text())
    assert calls.requested == "aiter_sage_attn" and calls.total() == 294
    assert calls.validity() == (True, [])
    raw = json.loads((run_dir / "attn_calls.json").read_text())
    assert raw["ranks"]["1"]["outside_scope"] == {"torch_sdpa": 12}
    assert raw["ranks"]["0"]["op_calls"] == {"gfx1201_sage_attention": 147}


def test_finalize_after_a_crash_records_what_is_missing(site):
    spec = specs_for(site)["aiter_sage_attn"]
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    shutil.copy(LOGS / "h3_tp2_crash_rank0.log", run_dir / "rank0.log")
    shutil.copy(LOGS / "h3_tp2_crash_rank1.log", run_dir / "rank1.log")
    (run_dir / "attn_calls.rank0.json").write_text(
        json.dumps(_rank_file(0, {"aiter_sage_attn": 98}, finished=False, errors=["terminated by SIGTERM"]))
    )
    get_runner("lightx2v").finalize(spec, run_dir)
    timing = TimingRecord.model_validate_json((run_dir / "timing.json").read_text())
    assert timing.dit_steps == 2
    assert "expected 3 DiT steps (infer_steps 4), the logs time 2" in timing.missing
    valid, reasons = AttnCallsRecord.model_validate_json((run_dir / "attn_calls.json").read_text()).validity()
    assert not valid
    assert "rank 1: requested backend 'aiter_sage_attn' served no call" in reasons
    assert any(r.startswith("rank 0: ") for r in reasons), "the crashed rank's error makes the run invalid"
    raw = json.loads((run_dir / "attn_calls.json").read_text())
    assert raw["ranks"]["1"]["errors"][0].startswith("no attn_calls.rank1.json")


@pytest.mark.parametrize(
    ("arm", "is_shim", "valid"),
    [
        ("sage_attn2_aiter_shim", True, True),
        ("sage_attn2_aiter_shim", False, False),
        ("sage_attn2_triton", False, True),
        ("sage_attn2_triton", True, False),
    ],
)
def test_finalize_checks_which_sageattention_served_the_calls(site, arm, is_shim, valid):
    spec = specs_for(site)[arm]
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    where = (
        "/x/shims/aiter_sageattention/sageattention/__init__.py" if is_shim else "/venv/sageattention/core.py"
    )
    modules = {"sageattention": where, "sageattention_is_aiter_shim": is_shim}
    for r in (0, 1):
        rank = _rank_file(r, {"sage_attn2": 147}, requested="sage_attn2", modules=modules)
        (run_dir / f"attn_calls.rank{r}.json").write_text(json.dumps(rank))
    get_runner("lightx2v").finalize(spec, run_dir)
    ok, reasons = AttnCallsRecord.model_validate_json((run_dir / "attn_calls.json").read_text()).validity()
    assert ok is valid
    if not valid:
        assert len(reasons) == 2 and all("fell back to" in r and where in r for r in reasons)


def test_finalize_falls_back_to_the_torchrun_logs(site):
    spec = specs_for(site)["torch_sdpa"]
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    shutil.copy(LOGS / "h3_tp2_interleaved.log", run_dir / "stderr.log")
    get_runner("lightx2v").finalize(spec, run_dir)
    timing = TimingRecord.model_validate_json((run_dir / "timing.json").read_text())
    assert timing.dit_steps == 3 and timing.ranks == ["0", "1"]
    assert timing.missing == ["no rank<N>.log from the launcher: parsed the torchrun process's own logs"]


def test_runner_is_registered():
    assert isinstance(get_runner("lightx2v"), LightX2VRunner)


# --- a rank crash, two ranks, against the stand-in LightX2V (the real one cannot crash on demand) ------


def _stub_launch(tmp_path: Path):
    """Plan and prepare the runner's exact command against the stand-in LightX2V, 2 ranks."""
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"infer_steps": 30, "vae_attn_type": "stub_other"}))
    text = f"""\
name: stub
runner: lightx2v
seed: 7
profiles: {{3step: {{infer_steps: 4}}}}
lightx2v:
  root: {STUB}
  model_path: {tmp_path}
  model_cls: stub_model
  config_json: {base}
  nproc_per_node: 2
  prompt: hello
  config_overrides: {{parallel: {{tensor_p_size: 2}}}}
arms:
  - {{name: ref, attn_type: stub_exact, role: reference}}
"""
    spec = build_plan(parse_scenario(text, "s.yaml", {}), profile="3step")[0]
    run_dir = tmp_path / "run"
    launch = get_runner("lightx2v").prepare(spec, run_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return spec, run_dir, launch, env


def _stub_run(tmp_path: Path, extra_env: dict | None = None):
    """Run the runner's exact command against the stand-in LightX2V, 2 ranks, then finalize."""
    spec, run_dir, launch, env = _stub_launch(tmp_path)
    runner = get_runner("lightx2v")
    proc = subprocess.run(
        launch.command,
        env={**env, **launch.env, **(extra_env or {})},
        cwd=launch.cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    runner.finalize(spec, run_dir)
    return spec, run_dir, proc


@pytest.mark.slow
def test_a_rank_crash_leaves_counts_from_every_rank(tmp_path):
    """Rank 1 crashes at step 2 while rank 0 waits; torchrun stops rank 0 with SIGTERM."""
    env = {"STUB_CRASH_AT_STEP": "2", "STUB_CRASH_RANK": "1", "STUB_HANG_OTHERS": "1",
           "STUB_SYNC_DIR": str(tmp_path / "sync")}  # fmt: skip
    _, run_dir, proc = _stub_run(tmp_path, env)
    assert proc.returncode != 0
    raw = json.loads((run_dir / "attn_calls.json").read_text())
    assert raw["ranks"]["1"]["errors"] == ["RuntimeError: stub crash at step 2"]
    assert raw["ranks"]["0"]["errors"] == ["terminated by SIGTERM"]
    assert [raw["ranks"][r]["calls"] for r in "01"] == [{"stub_exact": 3}, {"stub_exact": 3}]
    timing = TimingRecord.model_validate_json((run_dir / "timing.json").read_text())
    assert timing.step_seconds() == pytest.approx([1.11])
    assert "rank 0: DiT steps 2..3 of 3 not logged, step 2 started (run ended early?)" in timing.missing


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_ranks_do_not_outlive_a_killed_torchrun(tmp_path):
    """torchrun puts each rank in a session of its own; SIGKILL it and the ranks still end, counted."""
    import signal
    import time

    spec, run_dir, launch, env = _stub_launch(tmp_path)
    hang = {"STUB_CRASH_AT_STEP": "2", "STUB_CRASH_RANK": "99", "STUB_HANG_OTHERS": "1",
            "STUB_SYNC_DIR": str(tmp_path / "sync")}  # fmt: skip
    proc = subprocess.Popen(
        launch.command, env={**env, **launch.env, **hang}, cwd=launch.cwd,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while len(list((tmp_path / "sync").glob("*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)  # both ranks are waiting at step 2
    ranks = [p for p in _processes_mentioning(str(run_dir)) if p != proc.pid]
    assert ranks, "no rank process found"
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 20
    while _processes_mentioning(str(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _processes_mentioning(str(run_dir))
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "ranks outlived torchrun"
    for rank in (0, 1):
        calls = json.loads((run_dir / f"attn_calls.rank{rank}.json").read_text())
        assert calls["errors"] == ["terminated by SIGTERM"] and calls["calls"] == {"stub_exact": 3}


# --- synthetic checkpoints and the overhead summary (no LightX2V needed) ------------------------------


def test_required_ops_with_zero_calls_make_the_arm_invalid(site):
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    for r in (0, 1):
        rank = _rank_file(r, {"aiter_sage_attn": 147}, op_calls={"gfx1201_sage_attention": 147 if r else 0})
        (run_dir / f"attn_calls.rank{r}.json").write_text(json.dumps(rank))
    calls = merge_rank_calls(run_dir, "aiter_sage_attn", False, 2, required_ops=["gfx1201_sage_attention"])
    valid, reasons = calls.validity()
    assert not valid
    assert reasons == [
        "rank 0: count-op gfx1201_sage_attention: 0 calls (the arm names this op, so it must be hit)"
    ]
    # The same files, for an arm that does not name the op: nothing to object to.
    assert merge_rank_calls(run_dir, "aiter_sage_attn", False, 2).validity() == (True, [])


def test_relaxed_checks_are_refused_without_the_synthetic_marker(tmp_path):
    from harness.runners.lightx2v.rank_env import SyntheticCheckpointError, relax_synthetic_checks

    (tmp_path / "text_encoder").mkdir()
    with pytest.raises(SyntheticCheckpointError, match="no synthetic-checkpoint marker; refusing"):
        relax_synthetic_checks(tmp_path)


def test_a_synthetic_scenario_never_writes_over_other_weights(site):
    spec = specs_for(site)["torch_sdpa"]
    spec.params["synthetic_checkpoint"] = {"preset": "tiny", "seed": 0}
    reason = get_runner("lightx2v").preflight(spec)
    assert reason.startswith(f"lightx2v.model_path {site['model']}: not empty and not a synthetic checkpoint")
    with pytest.raises(HarnessError, match="not empty and not a synthetic checkpoint"):
        get_runner("lightx2v").prepare(spec, site["tmp"] / "run")
    assert sorted(p.name for p in site["model"].iterdir())[0] == "audio_vae"  # untouched
    marker = {"schema": "harness.synthetic_checkpoint/1", "preset": "small", "seed": 0}
    (site["model"] / "harness_synthetic_checkpoint.json").write_text(json.dumps(marker))
    assert "holds the synthetic checkpoint {'preset': 'small', 'seed': 0}" in synthetic_problem(
        LightX2VParams.model_validate(spec.params)
    )


def test_the_overhead_verdict_needs_significance():
    from harness.runners.lightx2v.overhead import OverheadResult, OverheadRun, summarize

    def result(launcher, bare):
        runs = [
            OverheadRun(mode="launcher", repeat=i, s_per_step=v, exit_code=0, run_dir="")
            for i, v in enumerate(launcher)
        ]
        runs += [
            OverheadRun(mode="bare", repeat=i, s_per_step=v, exit_code=0, run_dir="")
            for i, v in enumerate(bare)
        ]
        r = OverheadResult(
            scenario="s", profile="p", arm="a", attn_type="torch_sdpa", nproc=1, repeats=len(bare)
        )
        r.runs = runs
        return summarize(r)

    same = result([0.0510, 0.0512, 0.0509, 0.0511], [0.0511, 0.0509, 0.0512, 0.0510])
    assert same.speed.outcome == "no_difference" and same.p_value == same.speed.p_value > 0.05
    assert same.verdict.startswith(
        "DiT s/step, bare -> launcher: 0.051 ± 0.000 s (n=4) -> 0.051 ± 0.000 s (n=4)"
    )
    assert same.verdict.endswith(
        ": no significant difference (n=4/4 runs, p=1.00, alpha 0.05); launcher / bare = 1.0000 (+0.00%)"
    )
    slower = result([0.0600, 0.0601, 0.0602, 0.0600], [0.0500, 0.0501, 0.0499, 0.0500])
    assert slower.speed.outcome == "slower" and slower.p_value < 0.05
    assert slower.verdict.endswith(
        ": 1.20x slower (n=4/4 runs, p=6.9e-12, alpha 0.05); launcher / bare = 1.2015 (+20.15%)"
    )
    assert slower.verdict == f"{slower.speed.line()}; launcher / bare = 1.2015 (+20.15%)"
    one = result([0.06], [0.05])
    assert one.p_value is None
    assert "too few samples for a test (n=1/1 runs; 2 a side needed)" in one.verdict
    assert "| launcher | 0.06000 ± 0.00000 | 1 | 0.06000 |" in one.markdown()
    lone = result([0.06, 0.07], [])
    assert lone.verdict == "not measured: a mode has no timed run (see the runs' logs)"
    assert "| launcher | 0.06500 ± 0.00707 | 2 | 0.06000, 0.07000 |" in lone.markdown()
    assert "| bare | n/a | 0 |  |" in lone.markdown()

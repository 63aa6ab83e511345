"""The exact commands and environments of LightX2V arms (dry runs: nothing is written or run)."""

from __future__ import annotations

import json
import os
import sys

from lightx2v_site import ARMS, SCENARIO, SHIM_DIR, specs_for

from harness.plan import build_plan
from harness.runners.base import get_runner
from harness.runners.lightx2v.command import HARNESS_IMPORT_ROOT, probe_command, probe_question
from harness.runners.lightx2v.params import LightX2VParams
from harness.sage_packages import PACKAGES
from harness.scenario.load import load_scenario


def asked(spec) -> dict:
    """The question a spec's pre-flight probe is asked, as its command line carries it."""
    params = LightX2VParams.model_validate(spec.params)
    cmd = probe_command(params, spec, [probe_question(params, spec)])
    return json.loads(cmd[cmd.index("--questions") + 1])[0]


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
        "--latent-steps", "auto",
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
    assert counted == {"aiter_sage_attn", "sage_attn2_aiter_shim", "aiter_sage_attn_hybrid"}
    assert all("--count-op" not in cmd for arm, cmd in commands.items() if arm not in counted)


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
        elif arm == "sage_attn2_triton":  # the pinned SageAttention2 first (make sageattention)
            assert path == [str(PACKAGES["sageattention2"].path()), *expected]
        else:
            assert path == expected
    assert (SHIM_DIR / "sageattention" / "__init__.py").is_file()


def test_scenario_env_overrides_the_defaults(site):
    spec = specs_for(site)["torch_sdpa"]
    spec.env["PYTORCH_CUDA_ALLOC_CONF"] = "garbage_collection_threshold:0.8"
    env = get_runner("lightx2v").prepare(spec, site["tmp"] / "r", dry_run=True).env
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "garbage_collection_threshold:0.8"


def test_a_bare_run_is_the_same_launch_without_the_instrumentation(site):
    """The overhead tool's baseline: same interpreter, environment, config and LightX2V arguments."""
    spec = specs_for(site)["sage_attn2_aiter_shim"]
    params = LightX2VParams.model_validate(spec.params)
    bare = spec.model_copy(
        update={"params": params.model_copy(update={"bare": True}).model_dump(mode="json")}
    )
    run_dir = site["tmp"] / "run"
    runner = get_runner("lightx2v")
    full, base = runner.prepare(spec, run_dir, dry_run=True), runner.prepare(bare, run_dir, dry_run=True)
    cut = full.command.index("--")
    assert base.command == [
        *full.command[: full.command.index("-m", 3) + 2],
        "--bare", "--run-dir", str(run_dir), "--attn-type", "sage_attn2",
        *full.command[cut:],
    ]  # fmt: skip
    assert "--count-op" in full.command[:cut] and "--scope" in full.command[:cut]
    assert base.env == full.env and base.gpus == full.gpus
    assert bare.spec_hash() != spec.spec_hash()


def test_the_shadowed_copy_of_the_reference_alone_carries_the_shadows(site):
    """The shipped scenario: every candidate and the floor shadow one exact arm; the launcher gets
    them with the sageattention each stands for, and the probe checks their names."""
    specs = specs_for(site)
    runner = get_runner("lightx2v")
    commands = {
        arm: runner.prepare(spec, site["tmp"] / arm, dry_run=True).command for arm, spec in specs.items()
    }
    assert [arm for arm, cmd in commands.items() if "--insitu" in cmd] == ["torch_sdpa_insitu"]
    cmd = commands["torch_sdpa_insitu"]
    payload = json.loads(cmd[cmd.index("--insitu") + 1])
    assert payload["primary"] == "torch_sdpa_insitu"
    assert [
        (s["name"], s["attn_type"], s["kv_reversed"], s.get("sageattention")) for s in payload["shadows"]
    ] == [
        ("torch_sdpa_kv_reversed", "torch_sdpa", True, None),
        ("aiter_sage_attn", "aiter_sage_attn", False, None),
        ("sage_attn2_triton", "sage_attn2", False, "sageattention2"),
        ("sage_attn2_aiter_shim", "sage_attn2", False, "aiter_shim"),
    ]
    assert payload["settings"]["sample_rows"] == 256 and payload["settings"]["capture"]["heads"] == 2
    assert asked(specs["torch_sdpa_insitu"])["shadow_types"] == [
        "torch_sdpa",
        "aiter_sage_attn",
        "sage_attn2",
    ]
    # The schedule goes to its arm's launcher, and its exact backend to the probe.
    hybrid = commands["aiter_sage_attn_hybrid"]
    assert json.loads(hybrid[hybrid.index("--schedule") + 1]) == {
        "exact": "torch_sdpa", "exact_first": 5, "exact_last": 5, "exact_options": {}, "exact_steps": [],
    }  # fmt: skip
    assert asked(specs["aiter_sage_attn_hybrid"])["attn_types"] == ["aiter_sage_attn", "torch_sdpa"]
    assert all("--schedule" not in c for a, c in commands.items() if a != "aiter_sage_attn_hybrid")
    assert all(c[c.index("--latent-steps") + 1] == "auto" for c in commands.values())

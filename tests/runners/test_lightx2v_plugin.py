"""A plugin's attention backend served by the real LightX2V: registered in LightX2V's own registry
in the probe and in every rank, its calls counted under its name, its file recorded in the spec;
and which harness backends a LightX2V run calls (its code identity), without LightX2V."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lightx2v_site import PLUGIN_KERNEL as KERNEL
from lightx2v_site import TINY, tiny_with_plugin

from harness.plan import build_plan
from harness.records import RunStatus
from harness.runners.base import get_runner
from harness.runners.common import plugin_backends
from harness.runners.lightx2v.command import build_command, probe_command
from harness.runners.lightx2v.params import params_of
from harness.runners.lightx2v.rank_env import lightx2v_types
from harness.scenario.load import load_scenario
from harness.scenario.plugins import unload_all

REPO = Path(__file__).resolve().parents[2]
STUB = REPO / "tests" / "fixtures" / "lightx2v_stub"  # the stand-in LightX2V: never reached here


def test_the_lightx2v_runner_names_only_the_harness_backends_a_run_calls(tmp_path, site):
    scenario_path, kernel = tiny_with_plugin(
        tmp_path,
        "  - name: plugin_shadowed\n    attn_type: torch_sdpa\n    repeats: 1\n"
        "    shadows: [fp16_sdpa, sage_emul, sage_emul_aiter, aiter_sage_attn, flash_attn3]\n"
        "  - name: emul_to_plugin\n    attn_type: sage_attn2\n    sageattention: emulator\n    repeats: 1\n"
        "    schedule: {exact: fp16_sdpa, exact_first: 1}\n",
    )
    environ = {
        "LIGHTX2V_ROOT": str(site["root"]),
        "H3_TINY_MODEL": str(tmp_path / "model"),
        "SCENARIO_DIR": str(TINY.parent),
    }
    specs = {s.arm: s for s in build_plan(load_scenario(scenario_path, environ=environ), profile="cpu")}
    runner = get_runner("lightx2v")
    got = {arm: runner.harness_backends(spec) for arm, spec in specs.items()}
    # LightX2V's own classes (torch_sdpa, sage_attn2 with the package, flash_attn3) are no harness code;
    # the fake checkout registers aiter_sage_attn itself, so that shadow is LightX2V's too.
    assert got == {
        "torch_sdpa": [],
        "torch_sdpa_kv_reversed": [],
        "flash_attn3": [],
        "sage_attn2": [],
        "sage_attn2_1_0_6": [],
        "aiter_sage_attn": [],
        "sage_emul": ["sage_emul_thuml"],
        "torch_sdpa_insitu": ["sage_emul_thuml"],  # its sage_emul shadow
        "sage_emul_hybrid": ["sage_emul_thuml"],
        "sage_attn2_hybrid": [],
        "fp16_sdpa": ["fp16_sdpa"],
        "plugin_shadowed": ["sage_emul_thuml", "fp16_sdpa", "sage_emul_aiter"],
        "emul_to_plugin": ["fp16_sdpa", "sage_emul_thuml"],
    }
    digest = hashlib.sha256(kernel.read_bytes()).hexdigest()
    assert specs["fp16_sdpa"].code == {"fp16_sdpa": digest}  # what plan.with_code records
    # The probe and the ranks get the plugins as planned (path, digest, what they register).
    params = params_of(specs["fp16_sdpa"])
    for cmd in (
        probe_command(params, specs["fp16_sdpa"], []),
        build_command(params, specs["fp16_sdpa"], tmp_path),
    ):
        planned = json.loads(cmd[cmd.index("--plugins") + 1])
        assert [(p["path"], p["sha256"]) for p in planned] == [(str(kernel), digest)]
    assert specs["torch_sdpa"].code == {}  # an arm of LightX2V's own classes keeps its earlier hash
    assert plugin_backends(specs["fp16_sdpa"].plugins) == ["fp16_sdpa"]
    assert {"torch_sdpa", "sage_attn2", "aiter_sage_attn"} <= lightx2v_types(str(site["root"]))
    # Where no checkout is (planned away from it), the types every LightX2V has are still its own.
    assert {"torch_sdpa", "sage_attn2", "ulysses"} <= lightx2v_types(str(tmp_path / "absent"))


def test_a_plugin_backend_as_a_lightx2v_class_and_as_a_shadow(tmp_path):
    """The class registered in LightX2V's registry (a dict stands for its mapping) is the harness
    backend's packed call; a shadow of that type runs the harness backend itself, not the class."""
    from harness.attention.insitu.recorder import CallSites
    from harness.attention.registry import get_backend
    from harness.runners.lightx2v.rank_env import serve_backends, shadowed_by_lightx2v
    from harness.runners.lightx2v.shadows import build_shadowed
    from harness.scenario.plugins import import_plugin

    kernel = tmp_path / "fp16_kernel.py"
    kernel.write_text(KERNEL)
    assert import_plugin(str(kernel), tmp_path).registers == ["attention backend fp16_sdpa"]

    class LightX2VOwn:  # a type LightX2V registers itself keeps its class
        def apply(self, q, k, v, **kwargs): ...

    registry = {"flash_attn2": LightX2VOwn}
    assert serve_backends(registry, ["fp16_sdpa", "flash_attn2"]) == (["fp16_sdpa"], ["flash_attn2"])
    assert registry["flash_attn2"] is LightX2VOwn
    assert "LightX2V has its own class of that name" in shadowed_by_lightx2v(["flash_attn2"], ["flash_attn2"])
    served = registry["fp16_sdpa"]
    assert served.harness_backend == "fp16_sdpa" and served.harness_exact is False
    q, k, v = (torch.randn(64, 2, 16, generator=torch.Generator().manual_seed(i)) for i in range(3))
    cu = torch.tensor([0, 64], dtype=torch.int32)
    out = served().apply(
        q, k, v, cu_seqlens_q=cu, cu_seqlens_kv=cu, max_seqlen_q=64, max_seqlen_kv=64, block_idx=0
    )
    assert out.shape == (64, 32)  # LightX2V's packed output, [N, H*D]
    assert torch.equal(out, get_backend("fp16_sdpa").apply(q, k, v))

    payload = {"primary": "ref", "shadows": [{"name": "mine", "attn_type": "fp16_sdpa"}], "settings": {}}
    shadowed, primary, _ = build_shadowed(
        payload,
        registry.get,
        tmp_path / "insitu",
        "0",
        CallSites(),
        {"name": "fp16_sdpa", "kv_reversed": False},
    )
    assert type(shadowed.shadows["mine"]).__module__.startswith("harness.attention")  # not LightX2VOp
    assert primary.name == "fp16_sdpa" and primary.exact is False
    shadowed.recorder.close()


@pytest.mark.slow
def test_a_plugin_edited_since_planning_is_refused_in_one_line(tmp_path):
    from harness.errors import ScenarioError
    from harness.runners.common import load_plugins
    from harness.scenario.plugins import import_plugin

    kernel = tmp_path / "fp16_kernel.py"
    kernel.write_text(KERNEL)
    planned = import_plugin(str(kernel), tmp_path).model_dump(mode="json")
    unload_all()
    assert load_plugins([planned]) == ["fp16_sdpa"]  # as a rank loads it: its backends by name
    unload_all()
    kernel.write_text(KERNEL + "# edited\n")
    with pytest.raises(ScenarioError, match=r"changed since the campaign was planned") as err:
        load_plugins([planned])
    assert "\n" not in str(err.value)

    # A rank refuses it the same way: one line in its counts and on stderr, no traceback, exit 2.
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "harness.runners.lightx2v.launch", "--run-dir", str(run_dir),
        "--attn-type", "fp16_sdpa", "--plugins", json.dumps([planned]), "--",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join([str(STUB), str(REPO)])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    rank = json.loads((run_dir / "attn_calls.rank0.json").read_text())
    assert len(rank["errors"]) == 1 and "changed since the campaign was planned" in rank["errors"][0]
    assert rank["calls"] == {} and not rank["finished"]


@pytest.mark.lightx2v
@pytest.mark.slow
def test_a_plugin_backend_runs_in_the_real_lightx2v_counted_under_its_name(cpu_campaign):
    """The shared CPU campaign's plugin arm (tests/runners/conftest.py) against its reference."""
    outcome = cpu_campaign
    kernel = (
        outcome.campaign.path.parents[1] / "fp16_kernel.py"
    )  # beside the campaigns (OUT/scenario/profile)
    assert kernel.is_file()
    runs = {r.spec.arm: r for r in outcome.records}
    for arm in ("torch_sdpa", "fp16_sdpa"):
        assert runs[arm].status == RunStatus.ok and runs[arm].valid, (arm, runs[arm].reason)
    path = outcome.campaign.path / "runs"
    ref = json.loads((path / "torch_sdpa" / "attn_calls.json").read_text())["ranks"]["0"]
    mine = json.loads((path / "fp16_sdpa" / "attn_calls.json").read_text())["ranks"]["0"]
    assert ref["calls"]["torch_sdpa"] > 0
    assert mine["calls"] == {"fp16_sdpa": ref["calls"]["torch_sdpa"]}
    assert mine["fallbacks"] == {} and mine["errors"] == [] and mine["finished"]
    # Only the arm calling the plugin's backend loads the plugin: the reference never imports it.
    assert (
        mine["harness_served"] == ["fp16_sdpa"]
        and ref["harness_served"] == []
        and "fp16_sdpa" not in ref["sites"]
    )
    # The text encoder and VAE keep LightX2V's torch_sdpa: outside the model under test.
    assert mine["outside_scope"] == ref["outside_scope"] and "fp16_sdpa" not in mine["outside_scope"]

    digest = hashlib.sha256(kernel.read_bytes()).hexdigest()
    spec = json.loads((path / "fp16_sdpa" / "run.json").read_text())["spec"]
    assert [(p["path"], p["sha256"], p["registers"]) for p in spec["plugins"]] == [
        (str(kernel), digest, ["attention backend fp16_sdpa"])
    ]
    assert spec["code"] == {"fp16_sdpa": digest}
    probe = json.loads((path / "fp16_sdpa" / "lightx2v_env.json").read_text())["probe"]
    assert probe["harness_served"] == ["fp16_sdpa"] and probe["smoke_cosine"]["fp16_sdpa"] > 0.999
    assert "--plugins" in json.loads((path / "fp16_sdpa" / "run.json").read_text())["command"]


pytestmark = pytest.mark.usefixtures("no_plugin_left")

"""What the LightX2V runner's tests share: a fake LightX2V checkout and model folder, the shipped
scenario planned over it, a small scenario, per-rank count files, the stand-in LightX2V, and the
tiny scenario with a plugin backend's arm."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_testutil import fp16_kernel

from harness.plan import build_plan
from harness.runners.base import get_runner
from harness.runners.lightx2v.rank_env import flavour_folder
from harness.scenario.load import load_scenario, parse_scenario

SHIM_DIR = flavour_folder("aiter_shim")  # the aiter shim's folder, first on an aiter_shim arm's path

REPO = Path(__file__).resolve().parents[2]

SCENARIO = REPO / "scenarios" / "minimax_h3_ref2av_r9700.yaml"

TINY = REPO / "scenarios" / "minimax_h3_tiny.yaml"

PLUGIN_KERNEL = fp16_kernel("fp16_sdpa", ", cast back")

PLUGIN_ARM = "  - name: fp16_sdpa\n    attn_type: fp16_sdpa\n    description: SDPA in fp16 (a plugin)\n"


@contextlib.contextmanager
def tiny_environ(lightx2v_root: Path, checkpoint: Path) -> Iterator[None]:
    """The environment the tiny scenario reads: the LightX2V checkout, its checkpoint, its inputs."""
    env = {
        "LIGHTX2V_ROOT": str(lightx2v_root),
        "H3_TINY_MODEL": str(checkpoint),
        "SCENARIO_DIR": str(TINY.parent),
    }
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        yield


def first_input(text: str) -> str:
    """A shipped H3 scenario's text with its first input alone (runs keyed by arm, as one seed's):
    tests of what every input shares run one (each real LightX2V arm costs a CPU minute)."""
    head, sep, rest = text.partition("\ninputs:\n")
    assert sep, "the shipped scenario lists its inputs"
    first, _, more = rest.partition("\n")
    return f"{head}{sep}{first}\n" + re.sub(r"^(  \S.*\n|    .*\n)+", "", more, count=1)


def tiny_with_plugin(folder: Path, extra_arms: str = "") -> tuple[Path, Path]:
    """The tiny scenario (its name, its first input and every arm) with the fp16 kernel as a plugin
    and an arm running it; its inputs are found through SCENARIO_DIR (the shipped scenario's folder)."""
    kernel = folder / "fp16_kernel.py"
    kernel.write_text(PLUGIN_KERNEL)
    scenario = folder / "minimax_h3_tiny_plugin.yaml"
    scenario.write_text(f"{first_input(TINY.read_text())}{PLUGIN_ARM}{extra_arms}plugins: [fp16_kernel.py]\n")
    return scenario, kernel


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
    "torch_sdpa_insitu",
    "aiter_sage_attn_hybrid",
]


def make_site(tmp_path: Path) -> dict:
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


def specs_for(site, profile="3step", **over):
    """The shipped scenario's specs by arm, of its first input unless ``inputs`` names others."""
    scenario = load_scenario(SCENARIO, environ=site["environ"])
    over.setdefault("inputs", scenario.input_list[:1])
    return {s.arm: s for s in build_plan(scenario, profile=profile, **over)}


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


def rank_file(rank: int, calls: dict, **extra) -> dict:
    return {"schema": "harness.attn_calls.rank/1", "rank": str(rank), "requested": "aiter_sage_attn",
            "calls": calls, "fallbacks": {}, "errors": [], "outside_scope": {"torch_sdpa": 12},
            "sites": {}, "instances": {}, "kv_reversed_calls": 0, "op_calls": {"gfx1201_sage_attention": 147},
            "modules": {}, "finished": True, **extra}  # fmt: skip


def stub_scenario(tmp_path: Path, nproc: int = 2) -> str:
    """A scenario of one arm on the stand-in LightX2V (tests/fixtures/lightx2v_stub), 3 DiT steps."""
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"infer_steps": 30, "vae_attn_type": "stub_other"}))
    parallel = f"\n  config_overrides: {{parallel: {{tensor_p_size: {nproc}}}}}" if nproc > 1 else ""
    return f"""\
name: stub
runner: lightx2v
seed: 7
profiles: {{3step: {{infer_steps: 4}}}}
lightx2v:
  root: {STUB}
  model_path: {tmp_path}
  model_cls: stub_model
  config_json: {base}
  nproc_per_node: {nproc}
  prompt: hello{parallel}
arms:
  - {{name: ref, attn_type: stub_exact, role: reference}}
"""


def stub_launch(tmp_path: Path):
    """Plan and prepare the runner's exact command against the stand-in LightX2V, 2 ranks."""
    spec = build_plan(parse_scenario(stub_scenario(tmp_path), "s.yaml", {}), profile="3step")[0]
    run_dir = tmp_path / "run"
    launch = get_runner("lightx2v").prepare(spec, run_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return spec, run_dir, launch, env

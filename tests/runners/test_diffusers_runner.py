"""The diffusers runner without a generation: the scenario block and arm rules, parameters after profile
and arm, the pre-flight's checks of the model folder and of backends, the command it launches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from diffusers_support import needs_diffusers, synthetic

from harness.errors import ScenarioError
from harness.plan import build_plan
from harness.runners.base import get_runner
from harness.runners.common import HARNESS_IMPORT_ROOT, ProbeBatch
from harness.runners.diffusers import runner as dr
from harness.scenario.load import load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]
LTX2 = REPO / "scenarios" / "diffusers_ltx2_tiny.yaml"
WAN = REPO / "scenarios" / "diffusers_wan_tiny.yaml"

BASE = """\
name: d
runner: diffusers
seed: 1
profiles:
  cpu: {{device: cpu, height: 48, stg_scale: 0.0, call_kwargs: {{modality_scale: 1.0}}}}
diffusers:
  pipeline: {pipeline}
  model_path: {model}
  prompt: a cat
  height: 64
  width: 64
  num_frames: 9
  num_inference_steps: 3
{extra}arms:
  - {{name: ref, attn_type: native, role: reference}}
{arms}"""


def scenario_text(
    arms: str = "", pipeline: str = "ltx2_t2v", model: str = "/nowhere", extra: str = ""
) -> str:
    return BASE.format(arms=arms, pipeline=pipeline, model=model, extra=extra)


def error_of(text: str) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml", {})
    return str(info.value)


def test_both_tiny_scenarios_parse_with_their_profiles():
    for path in (LTX2, WAN):
        s = load_scenario(path, environ={})
        assert s.runner == "diffusers" and set(s.profiles) == {"cpu", "gpu"}
        assert [a.name for a in s.arms][:2] == ["native", "native_kv_reversed"]


@needs_diffusers
def test_an_unknown_backend_is_one_line_with_its_line_and_a_suggestion():
    msg = error_of(scenario_text("  - {name: c, attn_type: nativ}\n"))
    assert msg.startswith(
        "s.yaml:16: arms[1].attn_type: unknown attention backend 'nativ'; did you mean 'native'?"
    )
    assert "diffusers 0.42.1's dispatcher has:" in msg and "harness backends:" in msg and "\n" not in msg


def test_arm_rules_of_the_diffusers_runner():
    assert "kv_chunks needs a harness backend" in error_of(
        scenario_text("  - {name: c, attn_type: native, kv_chunks: 2}\n")
    )
    assert "takes none" in error_of(scenario_text("  - {name: c, attn_type: native, attn_options: {x: 1}}\n"))
    assert "has no option(s) x" in error_of(
        scenario_text("  - {name: c, attn_type: sage_emul_thuml, attn_options: {x: 1}}\n")
    )
    assert "count_ops: unknown key" in error_of(  # a lightx2v arm field: not a diffusers arm's
        scenario_text("  - {name: c, attn_type: native, count_ops: {a: 'm:f'}}\n")
    )
    ok = parse_scenario(
        scenario_text("  - {name: c, attn_type: sage_emul_thuml, kv_chunks: 2}\n"), "s.yaml", {}
    )
    assert ok.arms[1].kv_chunks == 2


def test_block_rules():
    assert "needs image_path" in error_of(scenario_text(pipeline="ltx2_i2v"))
    assert "takes no image_path" in error_of(scenario_text(extra="  image_path: x.png\n"))
    assert "set by the harness" in error_of(scenario_text(extra="  call_kwargs: {num_frames: 3}\n"))
    bad = error_of(scenario_text(pipeline="wan_t2v", extra="  synthetic_checkpoint: {model: ltx2}\n"))
    assert "serves ltx2_t2v, ltx2_i2v, not wan_t2v" in bad
    assert "runner 'diffusers' needs a 'diffusers' block" in error_of(
        "name: d\nrunner: diffusers\narms: [{name: r, attn_type: native, role: reference}]\n"
    )


def test_params_follow_profile_then_arm_and_route_unknown_keys_to_the_call():
    arms = "  - {name: c, attn_type: sage_emul_thuml, overrides: {num_inference_steps: 5, audio_stg_scale: 0.0}}\n"
    s = parse_scenario(scenario_text(arms, extra="  synthetic_checkpoint: {preset: tiny}\n"), "s.yaml", {})
    specs = {sp.arm: sp for sp in build_plan(s, profile="cpu")}
    ref, cand = specs["ref"].params, specs["c"].params
    assert ref["pipeline"]["height"] == 48 and ref["pipeline"]["num_inference_steps"] == 3
    assert ref["pipeline"]["call_kwargs"] == {"stg_scale": 0.0, "modality_scale": 1.0}
    assert cand["pipeline"]["num_inference_steps"] == 5
    assert cand["pipeline"]["call_kwargs"] == {
        "stg_scale": 0.0,
        "modality_scale": 1.0,
        "audio_stg_scale": 0.0,
    }
    assert (
        ref["device"] == "cpu" and ref["backend_kind"] == "dispatcher" and cand["backend_kind"] == "harness"
    )
    assert ref["synthetic_checkpoint"] == {"model": "ltx2", "preset": "tiny", "seed": 0}
    assert (
        ref["pipeline"]["crf"] == 18 and ref["pipeline"]["x264_preset"] == "ultrafast"
    )  # the codec floor reads them
    assert ref["lossless"] is True  # the twin by default; lossless: false leaves the key out, as before it
    off = parse_scenario(scenario_text(extra="  lossless: false\n"), "s.yaml", {})
    assert "lossless" not in build_plan(off, profile="cpu")[0].params
    with pytest.raises(ScenarioError, match=r"arm c: diffusers.num_inference_steps"):
        bad = "  - {name: c, attn_type: native, overrides: {num_inference_steps: 0}}\n"
        build_plan(parse_scenario(scenario_text(bad), "s.yaml", {}))


def test_preflight_refuses_a_folder_it_cannot_use(tmp_path):
    runner = get_runner("diffusers")
    s = parse_scenario(scenario_text(model=str(tmp_path / "m")), "s.yaml", {})
    spec = build_plan(s)[0]
    assert "no readable model_index.json" in runner.preflight(spec)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model_index.json").write_text(json.dumps({"_class_name": "WanPipeline"}))
    assert "holds a WanPipeline, not an ltx2 pipeline" in runner.preflight(spec)
    s = parse_scenario(
        scenario_text(model=str(tmp_path / "m"), extra="  synthetic_checkpoint: {preset: tiny}\n"),
        "s.yaml",
        {},
    )
    assert "not empty and not a synthetic pipeline" in runner.preflight(build_plan(s)[0])
    spec.params.clear()
    assert "re-plan" in runner.preflight(spec)


@needs_diffusers
def test_preflight_probes_every_planned_backend_once_before_any_pipeline(tmp_path_factory, monkeypatch):
    folder = synthetic(tmp_path_factory, "ltx2")
    arms = "  - {name: f, attn_type: _native_flash}\n  - {name: e, attn_type: sage_emul_thuml}\n  - {name: s, attn_type: sage}\n"
    s = parse_scenario(
        scenario_text(arms, model=str(folder), extra="  device: cpu\n  dtype: float32\n"), "s.yaml", {}
    )
    calls = []
    real = dr.probe_in_subprocess
    # Probe results are remembered per process (a probe costs seconds): start from none, whatever ran before.
    monkeypatch.setattr(dr, "PROBES", ProbeBatch())
    monkeypatch.setattr(
        dr, "probe_in_subprocess", lambda backends, **kw: calls.append(backends) or real(backends, **kw)
    )
    runner = get_runner("diffusers")
    reasons = {sp.arm: runner.preflight(sp) for sp in build_plan(s)}
    assert len(calls) == 1 and sorted(b for b, _ in calls[0]) == [
        "_native_flash",
        "native",
        "sage",
        "sage_emul_thuml",
    ]
    assert reasons["ref"] is None and reasons["e"] is None
    assert reasons["f"] == (
        "backend _native_flash: diffusers' checks refuse float32 on cpu: Query, key, and value must be either "
        "bfloat16 or float16."
    )
    assert reasons["s"].startswith("backend sage: Sage Attention backend 'sage' is not usable")
    assert dr.head_dims(build_plan(s)[0].params) == [16, 8]  # from the transformer's config


def test_prepare_launches_the_child_in_the_runs_interpreter(tmp_path):
    s = parse_scenario(
        scenario_text(model=str(tmp_path / "m"), extra="  python: /usr/bin/python3\n"), "s.yaml", {}
    )
    spec = build_plan(s)[0]
    launch = get_runner("diffusers").prepare(spec, tmp_path / "run", dry_run=True)
    assert launch.command == [
        "/usr/bin/python3",
        "-m",
        "harness.runners.diffusers.launch",
        str(tmp_path / "run"),
    ]
    assert launch.env["PYTHONPATH"].split(":")[0] == str(HARNESS_IMPORT_ROOT) and launch.gpus == 0
    assert not (tmp_path / "run").exists()  # a dry run writes nothing
    gpu = parse_scenario(scenario_text(model=str(tmp_path / "m"), extra="  device: cuda\n"), "s.yaml", {})
    assert get_runner("diffusers").prepare(build_plan(gpu)[0], tmp_path / "r", dry_run=True).gpus == 1


@needs_diffusers
def test_dispatcher_names_are_read_without_importing_diffusers():
    import subprocess

    code = (
        "import sys; from harness.runners.diffusers.schema import dispatcher_names; n = dispatcher_names(); "
        "print(len(n), 'native' in n, '_sage_qk_int8_pv_fp16_triton' in n, 'diffusers' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    from diffusers.models.attention_dispatch import AttentionBackendName

    assert out == [str(len(AttentionBackendName)), "True", "True", "False"]


@needs_diffusers
def test_probe_command_says_per_backend_whether_it_runs_here():
    from cli_testutil import harness

    res = harness("diffusers", "probe", "--device", "cpu", "--dtype", "float32", "--head-dim", "16",
                  "--backend", "native", "--backend", "nativ")  # fmt: skip
    assert res.returncode == 3, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("native: ok (cosine d16 1.0000") and len(lines) == 2
    assert lines[1] == "nativ: unavailable: unknown attention backend 'nativ'; did you mean 'native'?"

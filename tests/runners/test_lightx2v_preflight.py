"""The LightX2V pre-flight: one line saying why an arm cannot run here, cheap checks before the probe."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from lightx2v_site import SHIM_DIR, specs_for

import harness.runners.lightx2v.preflight as preflight
from harness.runners.base import get_runner
from harness.runners.common import ProbeBatch
from harness.runners.lightx2v.command import build_env, probe_question
from harness.runners.lightx2v.params import LightX2VParams
from harness.runners.lightx2v.preflight import ProbeResult, run_probe
from harness.scenario.parts import deep_merge


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
    env = build_env(params, spec)
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


@pytest.mark.slow
def test_one_probe_process_answers_every_planned_arm_that_shares_its_environment(site, monkeypatch):
    """Planning announces every arm's probe; the first pre-flight of an interpreter and environment
    asks all of theirs in one real probe process, and each arm gets its own answer (here, with no
    GPU, each is refused on the GPU count before LightX2V is imported)."""
    monkeypatch.setattr(preflight, "PROBES", ProbeBatch())  # answers are kept per process: none from before
    asked = []
    real = preflight.probe_answers
    monkeypatch.setattr(preflight, "probe_answers", lambda cmd, env, n: asked.append(n) or real(cmd, env, n))
    specs = specs_for(site)
    runner = get_runner("lightx2v")
    reasons = {arm: runner.preflight(spec) for arm, spec in specs.items()}
    # One process per sageattention flavour (each puts its own package on PYTHONPATH); in it, one
    # question per distinct arm (a K/V-reversed floor asks what its reference asks).
    # The pinned SageAttention2 (make sageattention, never on a CPU machine) is refused before any
    # probe, with the command that installs it.
    params = {arm: LightX2VParams.model_validate(s.params) for arm, s in specs.items()}
    pinned = {arm for arm, p in params.items() if p.sageattention == "sageattention2"}
    assert pinned == {"sage_attn2_triton"}
    assert reasons["sage_attn2_triton"].startswith(
        "sage_attn2: SageAttention2 2.2.0 (d1a57a5) is not installed"
    )
    assert "make sageattention" in reasons["sage_attn2_triton"]
    probed = {arm: p for arm, p in params.items() if arm not in pinned}
    flavours = {p.sageattention or "package" for p in probed.values()}
    questions = {(p.sageattention, str(probe_question(p, specs[arm]))) for arm, p in probed.items()}
    assert len(flavours) == 2 and len(asked) == 2 and sum(asked) == len(questions) < len(probed), asked
    assert {reasons[arm] for arm in probed} == {
        "nproc_per_node 2 exceeds the 0 visible GPU(s) (visible devices: 0,1)"
    }
    # Asked again (another seed or repeat of the same arms): answered from memory, no process.
    assert [runner.preflight(s) for s in specs.values()] == list(reasons.values()) and len(asked) == len(
        flavours
    )


def test_a_probe_process_that_dies_fails_every_question_it_was_asked(site, monkeypatch):
    """A probe interpreter that exits without an answer (here /bin/false) is one line for each arm
    it answers for, never a missing answer or another arm's."""
    monkeypatch.setattr(preflight, "PROBES", ProbeBatch())
    specs = specs_for(site)
    asked = []
    real = preflight.probe_answers
    monkeypatch.setattr(
        preflight, "probe_answers", lambda cmd, env, n: asked.append(cmd[0]) or real(cmd, env, n)
    )
    dead = {
        arm: LightX2VParams.model_validate({**s.params, "python": "/bin/false"}) for arm, s in specs.items()
    }
    preflight.expect_probes([(dead[arm], s) for arm, s in specs.items()])
    ref, other = (specs[a] for a in ("torch_sdpa", "aiter_sage_attn"))  # two questions, one process
    results = [run_probe(dead[s.arm], s, build_env(dead[s.arm], s)) for s in (ref, other)]
    assert asked == ["/bin/false"] and results[0] == results[1]
    assert results[0].ok is False and results[0].reason == "pre-flight probe failed (exit 1): no output"

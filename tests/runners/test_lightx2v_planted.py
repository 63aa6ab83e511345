"""A harness backend with options on the LightX2V runner: ``planted_error`` (an error of known per-call
size) served by the launcher in LightX2V's registry with the arm's options, planted on the calls of
one kind (its instances bound to the rank's call sites); options on LightX2V's own classes refused in
one line before any run. The real test runs the tiny MiniMax-H3 on the CPU (three LightX2V runs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from lightx2v_site import TINY, first_input, tiny_environ

from harness.errors import ScenarioError
from harness.plan import build_plan
from harness.runners.lightx2v.command import build_command, probe_question
from harness.runners.lightx2v.params import params_of
from harness.runners.lightx2v.rank_env import harness_backends, serve_backends
from harness.scenario.load import load_scenario, parse_scenario

DOSE = 0.05
DIT_STEPS = 3  # profile cpu: infer_steps 4
PLANTED = f"""\
  - name: planted_refiner
    attn_type: planted_error
    attn_options: {{dose: {DOSE}, shape: scale, site: {{kinds: [refiner]}}}}
    repeats: 1
  - name: planted_dit
    attn_type: planted_error
    attn_options: {{dose: {DOSE}, shape: scale, site: {{kinds: [dit_self]}}}}
    repeats: 1
  - name: planted_insitu
    attn_type: torch_sdpa
    repeats: 1
    shadows: [planted_refiner, planted_dit]
"""


def planted_scenario(folder: Path) -> Path:
    """The tiny scenario (its first input, every arm) with the planted arms and their shadowed copy."""
    path = folder / "minimax_h3_tiny_planted.yaml"
    path.write_text(first_input(TINY.read_text()) + PLANTED)
    return path


def problem(site: dict, arm: str) -> str:
    """The one line the scenario loader gives for the tiny scenario with ``arm`` added."""
    text = first_input(TINY.read_text()) + arm
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, "s.yaml", {**site["environ"], "SCENARIO_DIR": str(TINY.parent)})
    return str(err.value)


def test_the_schema_takes_a_harness_backends_options_and_refuses_lightx2vs_in_one_line(site, tmp_path):
    environ = {"LIGHTX2V_ROOT": str(site["root"]), "H3_TINY_MODEL": str(tmp_path / "m")}
    scenario = load_scenario(
        planted_scenario(tmp_path), environ={**environ, "SCENARIO_DIR": str(TINY.parent)}
    )
    assert scenario.arm("planted_refiner").attn_options["site"] == {"kinds": ["refiner"]}
    line = problem(site, "  - {name: bad, attn_type: planted_error, attn_options: {dose: 1.5}}\n")
    assert (
        "\n" not in line
        and "arms[" in line
        and "].attn_options: arm bad: attn_options: planted_error: " in line
    )
    assert line.endswith("option dose=1.5; expected a number in [0, 1) (the rel L1 per call)")
    line = problem(site, "  - {name: b, attn_type: planted_error, attn_options: {site: {kinds: [vae]}}}\n")
    assert "\n" not in line and "option site.kinds.0: Input should be 'dit_self'" in line
    line = problem(site, "  - {name: b, attn_type: planted_error, attn_options: {dos: 0.1}}\n")
    assert "unknown option(s) dos for backend 'planted_error'" in line
    for arm in ("torch_sdpa", "sage_attn2"):  # LightX2V's own classes take none
        line = problem(site, f"  - {{name: o, attn_type: {arm}, attn_options: {{x: 1}}}}\n")
        assert "\n" not in line and "].attn_options: arm o: attn_options: " in line
        assert f"LightX2V's own {arm} class serves this arm and takes no options" in line
    line = problem(site, "  - {name: c, attn_type: planted_error, kv_chunks: 2}\n")
    assert "].kv_chunks: arm c: kv_chunks needs a harness backend run by the harness" in line


def test_the_launcher_serves_the_arm_backend_with_its_options_bound_to_the_call_sites(site, tmp_path):
    import torch
    import torch.nn.functional as F

    from harness.attention.insitu.recorder import CallSites

    environ = {**site["environ"], "H3_TINY_MODEL": str(tmp_path / "m"), "SCENARIO_DIR": str(TINY.parent)}
    specs = {s.arm: s for s in build_plan(load_scenario(planted_scenario(tmp_path), environ=environ))}
    spec = specs["planted_refiner"]
    params = params_of(spec)
    assert harness_backends(spec, params) == ["planted_error"] and spec.code.keys() == {"planted_error"}
    assert harness_backends(specs["planted_insitu"], params_of(specs["planted_insitu"])) == ["planted_error"]
    cmd = build_command(params, spec, tmp_path / "run")
    launcher = cmd[: cmd.index("--")]
    assert launcher[launcher.index("--serve") + 1] == "planted_error"
    options = json.loads(launcher[launcher.index("--attn-options") + 1])
    assert options == {"dose": DOSE, "shape": "scale", "site": {"kinds": ["refiner"]}} == spec.attn_options
    assert probe_question(params, spec)["serve"] == ["planted_error"]
    ref = specs["torch_sdpa"]  # an arm of LightX2V's own classes: its command and question as before
    ref_cmd = build_command(params_of(ref), ref, tmp_path / "ref")
    assert "--serve" not in ref_cmd and "--attn-options" not in ref_cmd
    assert "serve" not in probe_question(params_of(ref), ref)

    sites = CallSites()
    registry: dict = {}
    assert serve_backends(registry, ["planted_error"], {"planted_error": options}, lambda: sites) == (
        ["planted_error"],
        [],
    )
    weight = registry["planted_error"]()  # as LightX2V builds it: REGISTER[name]()
    q, k, v = (torch.randn(64, 2, 16, generator=torch.Generator().manual_seed(i)) for i in range(3))
    exact = F.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in (q, k, v)))[0].transpose(0, 1)
    exact = exact.reshape(64, 32)
    with sites.site(kind="dit_self"):
        assert torch.allclose(weight.apply(q, k, v), exact, atol=1e-6)
    with sites.site(kind="refiner"):
        assert torch.allclose(weight.apply(q, k, v), exact * (1 - DOSE), atol=1e-6)


@pytest.mark.lightx2v
@pytest.mark.slow
def test_a_planted_dose_on_the_refiner_calls_of_the_real_lightx2v(lightx2v_root, tiny_checkpoint, tmp_path):
    """Three runs: the reference, the error planted on the refiner's calls, and the reference shadowed by
    both planted arms: the dose read in situ on the calls of the planted kind only."""
    from harness.attention.insitu.recorder import read_insitu
    from harness.campaign import execute, lock_campaign, plan_campaign
    from harness.records import RunStatus

    scenario = planted_scenario(tmp_path)
    with tiny_environ(lightx2v_root, tiny_checkpoint):
        plan = plan_campaign(
            scenario,
            profile="cpu",
            arms=["torch_sdpa", "planted_refiner", "planted_insitu"],
            out_root=tmp_path,
        )
        outcome = execute(plan, lock=lock_campaign(plan.campaign), report=False)
    runs = outcome.campaign.path / "runs"
    records = {r.spec.arm: r for r in outcome.records}
    assert list(records) == ["torch_sdpa", "planted_refiner", "planted_insitu"]
    for record in records.values():
        assert record.status == RunStatus.ok and record.valid, (record.spec.arm, record.reason)
    rank0 = json.loads((runs / "planted_refiner" / "attn_calls.json").read_text())["ranks"]["0"]
    assert set(rank0["calls"]) == {"planted_error"} and rank0["calls"]["planted_error"] > 0
    assert rank0["harness_served"] == ["planted_error"] and not rank0["errors"] and not rank0["fallbacks"]
    # The refiner's calls scaled (the reference is bitwise repeatable): the trajectory leaves the
    # reference's, a little on random tiny weights (the text tokens' share of the DiT's keys is small).
    last = f"step_{DIT_STEPS:03d}.npz"
    a, b = (np.load(runs / arm / "latents" / last) for arm in ("torch_sdpa", "planted_refiner"))
    assert all(not np.array_equal(a[n], b[n]) for n in ("video", "audio"))
    assert (runs / "torch_sdpa" / "output.mp4").read_bytes() != (
        runs / "planted_refiner" / "output.mp4"
    ).read_bytes()
    # Served on the refiner's instances (pre_weights) and the DiT's alike, planted on the first only.
    assert rank0["sites"]["planted_error <- lightx2v.models.networks.minimax_h3.weights.pre_weights"] > 0
    # In situ, against exact FP32 attention: the dose on the planted kind's calls, BF16 round-off on the others.
    run = read_insitu(runs / "planted_insitu" / "insitu")
    assert {c.kind for c in run.calls} == {"refiner", "dit_self"} and not run.metas[0].notes
    assert {c.step for c in run.calls} == set(range(1, DIT_STEPS + 1))
    for call in run.calls:
        planted = "planted_refiner" if call.kind == "refiner" else "planted_dit"
        exact = "planted_dit" if call.kind == "refiner" else "planted_refiner"
        assert call.errors[planted].rel_l1 == pytest.approx(DOSE, rel=0.02), (call.kind, call.errors)
        assert call.errors[exact].rel_l1 < 4e-3, (call.kind, call.errors)  # BF16 round-off (2^-8)

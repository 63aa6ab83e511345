"""Both tiny diffusers scenarios on the CPU, end to end through the real pipelines: every arm that can run
here runs valid, the others are skipped with the pre-flight's reason, and the campaign is reported."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from diffusers_support import needs_diffusers, synthetic
from plugin_testutil import fp16_kernel

from harness.campaign import execute, lock_campaign, plan_campaign
from harness.media import probe
from harness.records import RunStatus

# Two real campaigns (minutes of CPU): slow, so that tests/conftest.py starts this module early.
pytestmark = [needs_diffusers, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
RAN_HERE = {"native", "native_kv_reversed", "sage_emul_thuml"}
SKIP_REASONS = {
    "native_flash": "diffusers' checks refuse float32 on cpu",
    "flash": "Please install `flash-attn>=2.6.3`",
    "sage": "Please install `sageattention>=2.1.1`",
    "sage_triton": "Please install `sageattention>=2.1.1`",
    "sage_attn2": "no GPU visible to torch",
}


def run_tiny(scenario: Path, out: Path, plugin_arms: frozenset[str] = frozenset()):
    """Run every arm of ``scenario`` on the CPU; those of RAN_HERE and ``plugin_arms`` run valid."""
    plan = plan_campaign(scenario, profile="cpu", out_root=out)
    outcome = execute(plan, lock=lock_campaign(plan.campaign))
    records = {r.spec.arm: r for r in outcome.records}
    assert outcome.failed == [] and outcome.report_error is None
    assert {a for a, r in records.items() if r.status == RunStatus.ok} == RAN_HERE | plugin_arms
    for arm in RAN_HERE | plugin_arms:
        assert records[arm].valid is True, (arm, records[arm].invalid_reasons)
    for arm, why in SKIP_REASONS.items():
        assert records[arm].status == RunStatus.skipped and why in records[arm].reason, records[arm].reason
    camp = outcome.campaign.path
    assert all((camp / name).is_file() for name in ("report.md", "pr.md", "index.html", "results.json"))
    env = json.loads((camp / "campaign.json").read_text())["env"]
    assert env["packages"]["diffusers"] == "0.42.1"
    return camp, records


def calls(camp: Path, arm: str) -> dict:
    return json.loads((camp / "runs" / arm / "attn_calls.json").read_text())["ranks"]["0"]


# A plugin's backend: registered with diffusers' attention dispatcher for the run as the harness's own
# backends are, serving every DiT attention call of the real pipeline.
KERNEL = fp16_kernel("fp16_sdpa_diffusers")


@dataclass
class Ltx2Campaign:
    camp: Path
    records: dict
    kernel: Path


@pytest.fixture(scope="module")
def ltx2_campaign(tmp_path_factory):
    """The shipped LTX-2 scenario plus a plugin backend's arm ``mine`` (everything else as shipped), run once:
    the scenario's test and the plugin's share its reference, floor, probe and report (a CPU minute each)."""
    from harness.attention.registry import BACKENDS
    from harness.scenario.plugins import unload_all

    # Planning imports kernel.py in this process: start and end with the harness's own registry entries,
    # as the no_plugin_left fixture does for a single test.
    unload_all()
    before = set(BACKENDS.names())
    root = tmp_path_factory.mktemp("ltx2_campaign")
    (root / "kernel.py").write_text(KERNEL)
    text = (REPO / "scenarios" / "diffusers_ltx2_tiny.yaml").read_text()
    text = text.replace("runner: diffusers\n", "runner: diffusers\nplugins: [kernel.py]\n", 1)
    text += "  - {name: mine, attn_type: fp16_sdpa_diffusers}\n"
    scenario = root / "diffusers_ltx2_tiny.yaml"
    scenario.write_text(text)
    try:
        with pytest.MonkeyPatch.context() as env:
            # Its arms run torch on two threads, on any machine (the suite sets one): on one thread the
            # tiny LTX-2's K/V-reversed floor encodes to a bitwise copy of the reference's mp4, and
            # the floor is then left out (verdicts: incomplete); on two its video differs. An idle
            # thread sleeps instead of spinning (the same work, split the same way: the same bytes):
            # spinning, it waits for a core the other test worker holds (0.37 s a step, not 0.01).
            env.setenv("OMP_NUM_THREADS", "2")
            env.setenv("OMP_WAIT_POLICY", "PASSIVE")
            # The session's synthetic LTX-2 is the one the scenario asks for (tiny, seed 0): reused, not rewritten.
            env.setenv("LTX2_TINY_MODEL", str(synthetic(tmp_path_factory, "ltx2")))
            camp, records = run_tiny(scenario, root / "out", plugin_arms=frozenset({"mine"}))
        yield Ltx2Campaign(camp, records, root / "kernel.py")
    finally:
        unload_all()
    assert set(BACKENDS.names()) == before


def test_ltx2_tiny_scenario_on_the_cpu(ltx2_campaign):
    camp = ltx2_campaign.camp
    native = camp / "runs" / "native"
    info = probe(native / "output.mp4")
    assert (info.frames, info.width, info.height, info.has_audio, info.audio_rate) == (9, 64, 64, True, 16000)
    # Scored before compression by default: every run wrote its lossless twin, and the pairs read it.
    assert all((camp / "runs" / arm / "output_lossless.mkv").is_file() for arm in RAN_HERE)
    assert json.loads((camp / "results.json").read_text())["pixel_source"].startswith("lossless copies")
    timing = json.loads((native / "timing.json").read_text())
    assert [s["index"] for s in timing["steps"]] == [1, 2, 3] and timing["stages"]["audio_decode"] > 0
    assert sorted(p.name for p in (native / "latents").iterdir())[-1] == "step_003.npz"
    # 2 layers x 6 attentions x 3 steps, all served by the requested backend; the floor reversed every one.
    assert calls(camp, "native")["calls"] == {"native": 36}
    assert calls(camp, "native_kv_reversed")["kv_reversed_calls"] == 36
    emul = calls(camp, "sage_emul_thuml")
    assert emul["calls"] == {"sage_emul_thuml": 36} and emul["direct_check"]["identical"]
    run_env = json.loads((native / "diffusers_env.json").read_text())
    assert (
        run_env["pipeline_class"] == "LTX2Pipeline"
        and "sage_emul_thuml" not in run_env["dispatcher_backends"]
    )
    assert (
        "sage_emul_thuml"
        in json.loads((camp / "runs" / "sage_emul_thuml" / "diffusers_env.json").read_text())[
            "dispatcher_backends"
        ]
    )


def test_wan_tiny_scenario_on_the_cpu_writes_its_pipeline_first(tmp_path, monkeypatch):
    model = tmp_path / "models" / "wan"
    monkeypatch.setenv("WAN_TINY_MODEL", str(model))  # missing: prepare writes it, in the run's interpreter
    camp, _ = run_tiny(REPO / "scenarios" / "diffusers_wan_tiny.yaml", tmp_path / "reports")
    assert json.loads((model / "harness_synthetic_pipeline.json").read_text())["model"] == "wan2.1_t2v"
    info = probe(camp / "runs" / "native" / "output.mp4")
    assert (info.frames, info.width, info.height, info.has_audio) == (9, 64, 64, False)
    # 2 layers x (self, text) x 3 steps.
    assert calls(camp, "native")["calls"] == {"native": 12}
    assert calls(camp, "native")["outside_scope"]["torch sdpa (direct)"] > 0  # the Wan VAE's own attention


def test_a_plugin_backend_serves_the_ltx2_pipeline_through_the_dispatcher(ltx2_campaign):
    runs = ltx2_campaign.records
    assert all(runs[a].status == RunStatus.ok for a in ("native", "native_kv_reversed", "mine")), {
        a: r.reason for a, r in runs.items()
    }
    assert runs["mine"].valid is True, runs["mine"].invalid_reasons
    mine = ltx2_campaign.camp / "runs" / "mine"
    calls = json.loads((mine / "attn_calls.json").read_text())["ranks"]["0"]
    assert calls["calls"] == {"fp16_sdpa_diffusers": 36}  # 2 layers x 6 attentions x 3 steps, as native's
    assert (
        "fp16_sdpa_diffusers" in json.loads((mine / "diffusers_env.json").read_text())["dispatcher_backends"]
    )
    spec = json.loads((mine / "run.json").read_text())["spec"]
    assert spec["plugins"][0]["path"] == str(ltx2_campaign.kernel)
    assert list(spec["code"]) == ["fp16_sdpa_diffusers"]
    results = json.loads((ltx2_campaign.camp / "results.json").read_text())
    (verdict,) = [v for v in results["verdicts"] if v["arm"] == "mine"]
    # Judged against the floor: the video parts have a ratio to it. The tiny pipeline's audio floor can
    # encode to the reference's track bit for bit (its K/V-reversed differences are below the codec's
    # step); that part is then incomplete and says why, never judged against a zero floor.
    parts = {e["metric"]: e for e in verdict["energy"]}
    assert all(
        parts[m]["ratio"] > 0 and parts[m]["word"] != "incomplete" for m in ("video_mse", "video_1_ssim")
    )
    audio = parts["audio_error"]
    if audio["word"] == "incomplete":
        assert verdict["word"] in {"outside", "incomplete"}
        assert any("identical to the reference" in m for m in verdict["missing"])
    else:
        assert verdict["word"] in {"within", "outside", "inconclusive"} and verdict["ratio"] > 0

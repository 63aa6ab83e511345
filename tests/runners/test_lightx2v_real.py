"""The harness against the real LightX2V (the pinned source at LIGHTX2V_ROOT), on the CPU.

Contract tests run LightX2V's own registry, torch_sdpa, argument parser, config loader, profiler
and sage_attn2 module in a subprocess (tests/runners/lightx2v_contract.py): all in one process
(`contracts`) but sage_attn2's, which needs the shim first on the path; end-to-end tests run
scenarios/minimax_h3_tiny.yaml through `harness run` machinery on a synthetic checkpoint, one
rank and two ranks (gloo); the campaign's in-situ, latent, first-call and schedule facts are
test_lightx2v_insitu.py's (the fixtures are tests/runners/conftest.py's). Marked `lightx2v`:
skipped with the reason when LIGHTX2V_ROOT is unset, a failure when it is set (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lightx2v_site import SHIM_DIR, first_input, tiny_environ

from harness.analysis.model import read_results
from harness.attention.insitu.recorder import read_insitu
from harness.bench.overhead import measure_overhead
from harness.campaign import execute, lock_campaign, plan_campaign
from harness.collect.lightx2v_log import parse_lightx2v_logs
from harness.media import probe as probe_media
from harness.plan import build_plan
from harness.records import RunStatus
from harness.runners.common import file_hashes
from harness.runners.lightx2v.checkpoint import create_checkpoint
from harness.runners.lightx2v.command import infer_args
from harness.runners.lightx2v.params import LightX2VParams
from harness.runners.lightx2v.rank_env import SYNTHETIC_MARKER
from harness.scenario.load import load_scenario

# Marked `slow` (tests/conftest.py starts the modules with slow tests first): each test that starts
# LightX2V processes of its own (ranks, probes: about 15 s of CPU each); this module's own work
# (the TP2 campaign, the overhead pair, the probes) is among the suite's longest units.
pytestmark = pytest.mark.lightx2v

REPO = Path(__file__).resolve().parents[2]
CONTRACT = Path(__file__).resolve().parent / "lightx2v_contract.py"
TINY = REPO / "scenarios" / "minimax_h3_tiny.yaml"
R9700 = REPO / "scenarios" / "minimax_h3_ref2av_r9700.yaml"
SCOPE_SITES = ("lightx2v.models.networks",)
# (scenario, profile) whose every arm LightX2V parses and loads, by test id
PARSED = {
    "r9700-3step": (R9700, "3step"),
    "r9700-full": (R9700, "full"),
    "tiny-cpu": (TINY, "cpu"),
    "tiny-gpu_tp2": (TINY, "gpu_tp2"),
}


def contract(check: str, lightx2v_root: Path, data=None, tmp_path: Path | None = None, shim=False) -> dict:
    """Run one check of lightx2v_contract.py in a fresh process; its last stdout line is the result."""
    args = [sys.executable, str(CONTRACT), check]
    if data is not None:
        path = tmp_path / f"{check}.json"
        path.write_text(json.dumps(data))
        args.append(str(path))
    path = [str(lightx2v_root), str(REPO)]
    if shim:
        path.insert(0, str(SHIM_DIR))
    env = {**os.environ, "PLATFORM": "cpu", "PROFILING_DEBUG_LEVEL": "2", "PYTHONPATH": os.pathsep.join(path)}
    env.pop("SAGEATTENTION", None)
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"result": json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}


# --- contracts on the real source -----------------------------------------------------------------


@pytest.fixture(scope="module")  # one module is one xdist unit (tests/conftest.py): built once
def contracts(lightx2v_root, tiny_checkpoint, tmp_path_factory) -> dict:
    """Every contract check of one environment (no shim), in one process: importing LightX2V
    costs about 15 s of CPU a process. Each test reads its own item (see `shared`)."""
    root = tmp_path_factory.mktemp("contracts")
    environ = {
        **os.environ,
        "LIGHTX2V_ROOT": str(lightx2v_root),
        "MINIMAX_H3_MODEL": str(tiny_checkpoint),
        "H3_TINY_MODEL": str(tiny_checkpoint),
        "H3_SMALL_MODEL": str(tiny_checkpoint),
        "H3_REF_DIR": str(REPO / "scenarios" / "inputs" / "h3_tiny"),
    }
    cases: dict = {}
    for key, (scenario_path, profile) in PARSED.items():
        try:
            cases[key] = _cases(scenario_path, environ, profile, root / key / "runs")
        except Exception as err:  # that parametrized test raises it; the others still run
            cases[key] = err
    items = [{"name": name, "check": name} for name in ("registry", "shadows", "profiler")]
    items += [
        {"name": f"infer[{k}]", "check": "infer", "data": c} for k, c in cases.items() if isinstance(c, list)
    ]
    done = contract("many", lightx2v_root, items, root)["result"]
    return {"environ": environ, "cases": cases, "items": done}


def shared(contracts: dict, name: str) -> dict:
    """One check's part of the shared process, as contract() gives it; its traceback if it failed."""
    got = contracts["items"][name]
    if "error" in got:
        pytest.fail(f"check {name} failed in the shared process:\n{got['error']}\n{got['stderr'][-3000:]}")
    return got


def test_the_launcher_counts_and_reverses_through_the_real_registry(contracts):
    out = shared(contracts, "registry")["result"]
    assert {"torch_sdpa", "sage_attn2", "flash_attn3", "ulysses", "ring"} <= set(out["registered"])
    plain, rev = out["plain"], out["reversed"]
    # Counting alone changes nothing, bit for bit; reversing K/V changes only the FP32 summation order.
    assert plain["max_abs_vs_unwrapped"] == 0.0 and plain["max_abs_positional"] == 0.0
    assert 0.0 < rev["max_abs_vs_unwrapped"] < 1e-5 and rev["max_abs_positional"] < 1e-5
    for run in (plain, rev):
        assert run["counting_subclass"] and run["is_subclass_of_real"]
        assert run["outside_equal_unwrapped"]  # a VAE's instance is never reversed
        book = run["book"]
        assert book["calls"] == {"torch_sdpa": 2} and book["outside_scope"] == {"torch_sdpa": 1}
        assert book["fallbacks"] == {} and book["errors"] == []
    assert plain["book"]["kv_reversed_calls"] == 0 and rev["book"]["kv_reversed_calls"] == 2


def test_a_registered_shadow_whose_kernel_is_missing_is_left_out_before_the_run(contracts):
    out = shared(contracts, "shadows")["result"]
    # LightX2V registers flash_attn3 whether or not flash_attn_interface imports; its call then
    # raises TypeError on None (as on the H200 image): the shadow is left out with that reason.
    assert out["flash_attn3"].startswith("LightX2V's flash_attn3: a 256-token test call failed (TypeError"), (
        out
    )
    assert out["torch_sdpa"] == {"exact": True, "kv_reversed": True}


def _cases(scenario_path: Path, environ: dict, profile: str, run_root: Path) -> list[dict]:
    scenario = load_scenario(scenario_path, environ=environ)
    cases = []
    for spec in build_plan(scenario, profile=profile):
        run_dir = run_root / spec.key
        run_dir.mkdir(parents=True)
        params = LightX2VParams.model_validate(spec.params)
        base = json.loads(Path(params.config_json).read_text())
        (run_dir / "config.json").write_text(json.dumps(params.resolved_config(base)))
        cases.append(
            {
                "arm": spec.key,  # an arm runs once per input
                "input": spec.input,
                "argv": infer_args(params, spec, run_dir),
                "expect_args": ["model_cls", "task", "model_path", "image_path", "seed", "save_result_path"],
                "expect_config": [
                    "attn_type",
                    "refiner_attn_type",
                    "infer_steps",
                    "target_height",
                    "target_width",
                    "target_video_length",
                    "parallel",
                    "use_adaln_cache",
                    "num_attention_heads",
                ],  # fmt: skip
                "want": spec.params,
                "seed": spec.seed,
            }
        )
    return cases


@pytest.mark.parametrize("parsed", list(PARSED))
def test_lightx2v_parses_and_loads_what_the_harness_builds_for_every_arm(contracts, tiny_checkpoint, parsed):
    """LightX2V's own parser and config loader, on every arm's exact argv and resolved config.json."""
    cases = contracts["cases"][parsed]
    if isinstance(cases, Exception):
        raise cases
    scenario = load_scenario(PARSED[parsed][0], environ=contracts["environ"])
    assert len(cases) == len(scenario.arms) * len(scenario.inputs) > len(scenario.arms)  # every arm and input
    results = shared(contracts, f"infer[{parsed}]")["result"]
    dit = json.loads((tiny_checkpoint / "transformer_ref" / "config.json").read_text())
    for case in cases:
        got, want = results[case["arm"]], case["want"]
        assert "parser_exit" not in got, f"{case['arm']}: LightX2V's parser refused the argv"
        assert want["prompt"] == scenario.for_input(case["input"]).lightx2v.prompt  # the input's own
        assert got["args"] == {
            "model_cls": "minimax_h3",
            "task": "ref2av",
            "model_path": want["model_path"],
            "image_path": ",".join(want["image_path"]),
            "seed": case["seed"],
            "save_result_path": case["argv"][case["argv"].index("--save_result_path") + 1],
        }
        config = got["config"]
        overrides = want["config_overrides"]
        assert config["attn_type"] == want["attention"]["attn_type"] == overrides["attn_type"]
        assert config["refiner_attn_type"] == want["attention"]["refiner_attn_type"]
        assert config["infer_steps"] == want["infer_steps"]
        assert want["dit_steps"] == want["infer_steps"] - 1
        for key in ("target_height", "target_width", "target_video_length", "use_adaln_cache"):
            assert config[key] == overrides[key], key
        assert config["parallel"] == overrides.get("parallel", False)
        if want["nproc_per_node"] > 1:
            assert config["parallel"] == {"tensor_p_size": want["nproc_per_node"]}
        # The DiT's config is read from transformer_ref/ (ref2av), over the JSON config.
        assert config["num_attention_heads"] == dit["num_attention_heads"]


def test_the_log_collector_parses_lines_of_the_real_profiler(contracts):
    done = shared(contracts, "profiler")  # its stderr: what the check alone wrote
    slept, stderr = done["result"], done["stderr"]
    assert "[Profile] Single GPU - Level1_Log Run Dit every step cost" in stderr
    timing = parse_lightx2v_logs({"rank0": stderr})
    assert timing.dit_steps == 3
    for got, want in zip(timing.step_seconds(), slept["steps"], strict=True):
        assert want <= got < want + 0.05
    assert slept["load"] <= timing.stages["load"] < slept["load"] + 0.05
    assert timing.pipeline_total_s >= sum(slept["steps"])


@pytest.mark.slow
def test_the_real_sage_attn2_module_binds_the_harness_shim(lightx2v_root, tmp_path):
    # Its own process: the shim first on the path changes what LightX2V imports.
    out = contract("shim", lightx2v_root, tmp_path=tmp_path, shim=True)["result"]
    # No GPU here: LightX2V imports plain `sageattn` (the Triton entry only on capability 8.9 / 12.0).
    assert out["bound"] == "sageattention.sageattn"
    assert out["is_aiter_shim"] and Path(out["package_file"]).parent.parent == SHIM_DIR


@pytest.mark.slow
def test_the_synthetic_checkpoint_is_a_function_of_its_seed(lightx2v_root, tiny_checkpoint, tmp_path):
    again = create_checkpoint(tmp_path / "again", lightx2v_root, preset="tiny", seed=0)
    assert again["files"] == file_hashes(tiny_checkpoint, SYNTHETIC_MARKER)
    assert sorted(p.name for p in tiny_checkpoint.iterdir()) == [
        "audio_vae", "harness_synthetic_checkpoint.json", "processor", "text_encoder", "tokenizer",
        "transformer_ref", "vae",
    ]  # fmt: skip


# --- the tiny H3 scenario, end to end -------------------------------------------------------------


def _dit_calls_per_rank(checkpoint: Path, dit_steps: int) -> int:
    dit = json.loads((checkpoint / "transformer_ref" / "config.json").read_text())
    return dit_steps * (dit["num_layers"] + dit["num_refiner_layers"])


def test_the_tiny_scenario_runs_the_real_lightx2v_on_cpu(cpu_campaign, tiny_checkpoint):
    runs = {r.spec.arm: r for r in cpu_campaign.records}
    assert list(runs) == [
        "torch_sdpa",
        "torch_sdpa_kv_reversed",
        "flash_attn3",
        "sage_attn2",
        "sage_attn2_1_0_6",
        "aiter_sage_attn",
        "sage_emul",
        "torch_sdpa_insitu",
        "sage_emul_hybrid",
        "sage_attn2_hybrid",
        "fp16_sdpa",  # a plugin's arm (tests/runners/conftest.py), the one arm added to the shipped ones
    ]
    for arm in ("torch_sdpa", "torch_sdpa_kv_reversed", "sage_emul", "torch_sdpa_insitu", "sage_emul_hybrid"):
        assert runs[arm].status == RunStatus.ok and runs[arm].valid, runs[arm].reason
    skipped = {
        arm: runs[arm].reason
        for arm in ("flash_attn3", "sage_attn2", "sage_attn2_1_0_6", "aiter_sage_attn", "sage_attn2_hybrid")
    }
    assert all(runs[a].status == RunStatus.skipped for a in skipped)
    assert "test call failed" in skipped["flash_attn3"]
    assert "needs a ROCm build of torch" in skipped["aiter_sage_attn"]
    assert skipped["sage_attn2"] == skipped["sage_attn2_hybrid"]  # no pinned SageAttention2 here
    assert "SageAttention2 2.2.0 (d1a57a5) is not installed here (make sageattention" in skipped["sage_attn2"]
    assert "SageAttention 1.0.6 is not installed here" in skipped["sage_attn2_1_0_6"]
    assert cpu_campaign.report_error is None


def test_every_rank_reports_its_calls_and_reversals(cpu_campaign, tiny_checkpoint):
    path = cpu_campaign.campaign.path / "runs"
    expected = _dit_calls_per_rank(tiny_checkpoint, 3)
    for arm in ("torch_sdpa", "torch_sdpa_kv_reversed"):
        calls = json.loads((path / arm / "attn_calls.json").read_text())
        assert list(calls["ranks"]) == ["0"]
        rank = calls["ranks"]["0"]
        assert rank["calls"] == {"torch_sdpa": expected} and rank["fallbacks"] == {} and rank["errors"] == []
        assert rank["outside_scope"].get("torch_sdpa", 0) > 0  # the video VAE's attention
        assert rank["kv_reversed_calls"] == (expected if calls["kv_reversed"] else 0)
        assert rank["finished"] and rank["op_calls"] == {}
        assert "qwen3vl.MINIMAX_H3_TEXT_HIDDEN_SIZE" in rank["relaxed"]
        assert rank["relaxed"]["packing_ref2av.REFERENCE_IMAGE_SHORT_EDGE"] == [2048, 64]


def test_timing_and_report_come_from_the_real_logs_and_mp4(cpu_campaign):
    path = cpu_campaign.campaign.path
    timing = json.loads((path / "runs" / "torch_sdpa" / "timing.json").read_text())
    log = (path / "runs" / "torch_sdpa" / "rank0.log").read_text()
    assert len(timing["steps"]) == 3 and timing["missing"] == []
    packed = [ln for ln in log.splitlines() if "MiniMax-H3 packed layout" in ln]
    assert len(packed) == 1 and packed[0].endswith(f"total={timing['seq_len']}")
    for stage in ("load", "text_encoder", "vae_encoder", "vae_decode", "save"):
        assert timing["stages"][stage] > 0, stage
    info = probe_media(path / "runs" / "torch_sdpa" / "output.mp4")
    assert (info.frames, info.width, info.height, info.fps) == (124, 64, 64, 24.0)
    assert (info.audio_rate, info.audio_channels) == (32000, 2)
    results = json.loads((path / "results.json").read_text())
    ref = next(r for r in results["runs"] if r["arm"] == "torch_sdpa")
    assert ref["s_per_step"] == pytest.approx(sum(s["seconds"] for s in timing["steps"][1:]) / 2)
    report = (path / "report.md").read_text()
    rows = [ln for ln in report.splitlines() if ln.startswith("| torch_sdpa | reference |")]
    assert any(f"| 3 | {ref['s_per_step']:.3f}" in row for row in rows), (
        rows
    )  # DiT steps, s/step from the logs
    floor = next(
        c for c in read_results(path / "results.json").comparisons if c.b.arm == "torch_sdpa_kv_reversed"
    )
    assert floor.video is not None and floor.audio is not None
    env = json.loads((path / "runs" / "torch_sdpa" / "lightx2v_env.json").read_text())
    probe = env["probe"]
    assert probe["lightx2v_version"] == "0.1.0" and probe["features"]["adaln_cache"] is True
    assert probe["platform"] == "cpu" and probe["smoke_cosine"]["torch_sdpa"] > 0.999


@pytest.mark.slow
def test_an_arm_counts_only_the_ops_it_names_and_must_hit_them(lightx2v_root, tiny_checkpoint, tmp_path):
    """Two ranks over gloo (the TP2 layout). The reference names two ops: SDPA's, counted on every
    rank, and one its backend never reaches, which makes it invalid; the shadowed copy names none and
    counts none (and shows that its ranks measure their own heads). Every rank saves the latents (the
    same, bit for bit). Two arms, each two ranks that import LightX2V (a CPU minute): every claim is
    one of theirs, so the K/V-reversed floor (a third arm) is not run."""
    text = first_input(TINY.read_text())
    text = text.replace(
        "    role: reference\n",
        "    role: reference\n"
        "    count_ops: {sdpa: torch.nn.functional:scaled_dot_product_attention, unused: colorsys:rgb_to_yiq}\n",
        1,
    )
    assert "unused: colorsys" in text
    scenario = tmp_path / "minimax_h3_tiny_ops.yaml"
    scenario.write_text(text)
    with tiny_environ(lightx2v_root, tiny_checkpoint):
        plan = plan_campaign(
            scenario, profile="cpu_tp2", arms=["torch_sdpa", "torch_sdpa_insitu"], out_root=tmp_path / "out"
        )
        outcome = execute(plan, lock=lock_campaign(plan.campaign), report=False)
    runs = {r.spec.arm: r for r in outcome.records}
    assert runs["torch_sdpa_insitu"].status == RunStatus.ok and runs["torch_sdpa_insitu"].valid, runs[
        "torch_sdpa_insitu"
    ].reason
    bad = runs["torch_sdpa"]
    assert bad.status == RunStatus.ok and bad.valid is False
    assert "count-op unused: 0 calls" in bad.reason and "count-op sdpa" not in bad.reason
    expected = _dit_calls_per_rank(tiny_checkpoint, 3)
    for arm in ("torch_sdpa", "torch_sdpa_insitu"):
        calls = json.loads((outcome.campaign.path / "runs" / arm / "attn_calls.json").read_text())
        assert list(calls["ranks"]) == ["0", "1"]
        for rank in calls["ranks"].values():
            assert rank["calls"] == {"torch_sdpa": expected}
            if arm == "torch_sdpa":
                assert rank["op_calls"]["sdpa"] >= expected and rank["op_calls"].get("unused", 0) == 0
            else:
                assert rank["op_calls"] == {}  # it names none
    timing = json.loads((outcome.campaign.path / "runs" / "torch_sdpa" / "timing.json").read_text())
    assert len(timing["steps"]) == 3 and timing["ranks"] == ["0", "1"]
    assert all(sorted(step["per_rank"]) == ["0", "1"] for step in timing["steps"])
    runs = outcome.campaign.path / "runs"
    for step in (1, 2, 3):
        first, second = (
            np.load(runs / "torch_sdpa" / "latents" / p / f"step_{step:03d}.npz") for p in ("", "rank1")
        )
        assert all(np.array_equal(first[n], second[n]) for n in ("video", "audio"))  # TP ranks agree
    assert (runs / "torch_sdpa_insitu" / "output.mp4").read_bytes() == (
        runs / "torch_sdpa" / "output.mp4"
    ).read_bytes()
    heads = json.loads((tiny_checkpoint / "transformer_ref" / "config.json").read_text())[
        "num_attention_heads"
    ]
    insitu = read_insitu(runs / "torch_sdpa_insitu" / "insitu")
    assert [m.rank for m in insitu.metas] == ["0", "1"] and all(m.complete for m in insitu.metas)
    for rank in ("0", "1"):
        calls = [c for c in insitu.calls if c.rank == rank]
        assert len(calls) == expected and all(c.heads == heads // 2 for c in calls)  # its own heads
        assert all(c.errors["torch_sdpa_kv_reversed"].rel_l1 < 4e-3 for c in calls)


@pytest.mark.slow
def test_the_second_input_reaches_the_real_lightx2v_and_packs_fewer_rows(
    cpu_campaign, lightx2v_root, tiny_checkpoint, tmp_path
):
    """The shipped tiny scenario's second input (another prompt, one reference image) through the
    real LightX2V: its own prompt and image in the argv, fewer packed rows than the first input's
    (cpu_campaign ran the first alone), the same frames. One arm: a CPU minute."""
    with tiny_environ(lightx2v_root, tiny_checkpoint):
        plan = plan_campaign(TINY, profile="cpu", inputs=["singer"], arms=["torch_sdpa"], out_root=tmp_path)
        outcome = execute(plan, lock=lock_campaign(plan.campaign), report=False)
    (rec,) = outcome.records
    assert rec.status == RunStatus.ok and rec.valid, rec.reason
    assert rec.spec.key == "torch_sdpa@singer@42" and rec.spec.params["prompt"].startswith("A woman sings")
    assert [Path(p).name for p in rec.spec.params["image_path"]] == ["dancer.png"]
    run = outcome.campaign.path / "runs" / rec.spec.key
    first = json.loads((cpu_campaign.campaign.path / "runs" / "torch_sdpa" / "timing.json").read_text())
    second = json.loads((run / "timing.json").read_text())
    assert 0 < second["seq_len"] < first["seq_len"]
    assert probe_media(run / "output.mp4").frames == 124


@pytest.mark.slow
def test_the_overhead_tool_times_the_real_lightx2v_with_and_without_the_launcher(
    lightx2v_root, tiny_checkpoint, tmp_path
):
    """One pair on the CPU: both runs are executor runs (run.json); one pair is too few for a test."""
    env = {"LIGHTX2V_ROOT": str(lightx2v_root), "H3_TINY_MODEL": str(tiny_checkpoint)}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        result = measure_overhead(TINY, profile="cpu", arm="torch_sdpa", repeats=1, out_root=tmp_path)
    assert [r.mode for r in result.runs] == ["launcher", "bare"]
    for run in result.runs:
        rec = json.loads((Path(run.run_dir) / "run.json").read_text())
        assert rec["status"] == "ok" and rec["exit_code"] == 0, rec["reason"]
        assert rec["valid"] is (run.mode == "launcher"), rec["reason"]
        assert run.s_per_step is not None and len(run.step_seconds) == 3
        assert probe_media(Path(run.run_dir) / "output.mp4").frames == 124
    bare = json.loads((Path(result.runs[1].run_dir) / "run.json").read_text())
    assert "--bare" in bare["command"] and "--scope" not in bare["command"]
    assert not list(Path(result.runs[1].run_dir).glob("rank*.log"))  # LightX2V ran uninstrumented
    assert result.speed.word == "too few runs" and result.p_value is None
    assert "too few runs for an interval (n=1/1 runs; 2 a side needed)" in result.verdict
    assert result.calls_per_step == _dit_calls_per_rank(tiny_checkpoint, 3) // 3
    assert (tmp_path / "minimax_h3_tiny" / "overhead" / "cpu" / "torch_sdpa" / "overhead.md").is_file()


def _probe(root: Path, *args: str) -> dict:
    env = {**os.environ, "PLATFORM": "cpu", "PYTHONPATH": os.pathsep.join([str(root), str(REPO)])}
    cmd = [sys.executable, "-m", "harness.runners.lightx2v.probe", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_probe_refuses_a_checkout_older_than_the_scenario_needs(lightx2v_root, tmp_path):
    """A copy of the checkout without use_adaln_cache (as before f8aee98) is refused by name."""
    import shutil

    old = tmp_path / "LightX2V-old"
    shutil.copytree(lightx2v_root, old)  # with its byte code: only the edited file compiles again
    infer = old / "lightx2v/models/networks/minimax_h3/infer/transformer_infer.py"
    infer.write_text(infer.read_text().replace("use_adaln_cache", "adaln_cache_switch"))
    question = {"attn_types": ["torch_sdpa"], "nproc": 1, "count_ops": {}, "require": ["adaln_cache"],
                "shadow_types": []}  # fmt: skip
    (result,) = _probe(old, "--questions", json.dumps([question]))["answers"]
    assert result["ok"] is False
    assert result["reason"] == (
        f"the LightX2V checkout at {old.resolve()} is older than this scenario needs: no adaln_cache "
        "(from f8aee98 (#1413): use_adaln_cache; older checkouts ignore the key silently)"
    )
    assert (
        result["facts"]["lightx2v_version"] == "0.1.0" and result["facts"]["features"]["adaln_cache"] is False
    )


@pytest.mark.slow
def test_the_probe_names_an_unregistered_backend_from_the_real_registry(lightx2v_root):
    """Several arms' questions in one probe process (the pre-flight's form), each answered alone:
    a typo, a type registered whose kernel is absent here, one that runs, a counted op that is not."""
    question = {"nproc": 1, "count_ops": {}, "require": [], "shadow_types": []}
    questions = [
        {**question, "attn_types": ["torch_sdpaa"]},
        {**question, "attn_types": ["flash_attn3"]},
        {**question, "attn_types": ["torch_sdpa"], "require": ["adaln_cache"]},
        {**question, "attn_types": ["torch_sdpa"], "count_ops": {"x": "colorsys:no_such_function"}},
    ]
    typo, absent, runs, bad_op = _probe(lightx2v_root, "--questions", json.dumps(questions))["answers"]
    assert typo["ok"] is False
    assert typo["reason"] == (
        f"attn_type 'torch_sdpaa' is not registered in LightX2V at {lightx2v_root.resolve()} with PLATFORM=cpu; "
        "did you mean 'torch_sdpa'?"
    )
    # Registered by name, but its kernel module is absent here: refused after a real test call.
    assert absent["ok"] is False and absent["reason"].startswith("flash_attn3: a 256-token test call failed")
    assert runs["ok"] is True and runs["facts"]["smoke_cosine"]["torch_sdpa"] > 0.999
    assert bad_op == {
        **bad_op,
        "ok": False,
        "reason": "count_ops x: colorsys:no_such_function: colorsys has no no_such_function",
    }
    assert {a["facts"]["questions"] for a in (typo, absent, runs, bad_op)} == {4}  # one process answered all

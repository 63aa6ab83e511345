"""Campaigns end to end with the real builtin pipeline at a tiny size: dry run, crash, interrupt, resume."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from campaign_run_in_process import problems, run_campaign
from cli_testutil import ROOT, harness, statuses, tiny_scenario, wait_for


def scenario(tmp_path: Path, extra_arms: str = "") -> Path:
    return tiny_scenario(tmp_path, extra_arms)


def test_dry_run_shows_every_command_and_runs_nothing(tmp_path):
    path = scenario(tmp_path, "  - {name: sage_attn2, attn_type: sage_attn2}\n")
    res = harness("run", path, "--profile", "3step", "--out", tmp_path / "out", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("-m harness.runners.builtin") == 3
    assert "# sage_attn2: run (new)  [would be skipped: backend sage_attn2 unavailable here" in res.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="the crash arm asks for CUDA, which exists here")
def test_crash_does_not_stop_others_then_resume_skips_ok(tmp_path):
    path = scenario(tmp_path, "  - {name: crash, attn_type: torch_sdpa, overrides: {device: cuda}}\n"
                              "  - {name: after, attn_type: sage_emul_aiter}\n")  # fmt: skip
    out = tmp_path / "out"
    # The claim needs an ok arm before the crash (kept on resume) and one after it; the floor
    # would add one more arm process and nothing to check.
    arms = ("--arms", "torch_sdpa,crash,after")
    res = harness("run", path, "--profile", "3step", "--out", out, "--no-report", *arms)
    assert res.returncode == 3  # a run failed
    camp = out / "tiny" / "3step"
    assert statuses(camp) == {"after": "ok", "crash": "failed", "torch_sdpa": "ok"}
    crash = json.loads((camp / "runs" / "crash" / "run.json").read_text())
    assert crash["exit_code"] != 0 and crash["log_tail"]
    campaign = json.loads((camp / "campaign.json").read_text())
    assert {a["key"]: a["status"] for a in campaign["arms"]}["crash"] == "failed"
    assert campaign["env"]["python"] and campaign["scenario"]["name"] == "tiny"

    before = (camp / "runs" / "torch_sdpa" / "run.json").stat().st_mtime_ns
    # The resume's plan and runs, in this process (its exit code is not the claim; the first and
    # last commands' are).
    run_campaign(path, out, arms=["torch_sdpa", "crash"], report=False)
    assert (camp / "runs" / "torch_sdpa" / "run.json").stat().st_mtime_ns == before, "ok arm was re-run"
    assert statuses(camp)["crash"] == "failed"

    res = harness(
        "run", path, "--profile", "3step", "--out", out, "--no-report", "--arms", "torch_sdpa", "--force"
    )
    assert res.returncode == 0, res.stderr
    assert (camp / "runs" / "torch_sdpa" / "run.json").stat().st_mtime_ns != before


@pytest.mark.slow
def test_interrupted_campaign_resumes(tmp_path):
    path = scenario(tmp_path, "  - {name: cand, attn_type: sage_emul_thuml}\n")
    out = tmp_path / "out"
    camp = out / "tiny" / "3step"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(path), "--profile", "3step",
                             "--out", str(out), "--no-report"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    ref = camp / "runs" / "torch_sdpa" / "run.json"
    wait_for(  # interrupt once the first arm is done and the second started
        lambda: ref.exists() and '"ok"' in ref.read_text() and (camp / "runs" / "floor" / "run.json").exists(),
        "the first arm to end ok and the second to start", proc=proc,
    )  # fmt: skip
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    first = statuses(camp)
    assert first["torch_sdpa"] == "ok"
    assert first.get("floor") in ("interrupted", "ok")  # the second arm may finish before the signal lands
    assert "cand" not in first or first["cand"] == "interrupted"

    ok_mtime = ref.stat().st_mtime_ns
    resumed = run_campaign(path, out, report=False)  # the same command's plan and runs, in this process
    assert problems(resumed) == []  # `harness run` exits 0
    assert statuses(camp) == {"cand": "ok", "floor": "ok", "torch_sdpa": "ok"}
    assert ref.stat().st_mtime_ns == ok_mtime, "the arm that was ok is not run again"


def test_each_run_checks_its_backend_against_the_direct_op_call(shadowed_campaign):
    """The real pipeline: the first attention call of every run is compared bitwise with the op called
    directly; pr.md and report.md state it for the candidate. Read from the session's shadowed
    campaign (tests/insitu_testutil.py, made by `harness run`, which exited 0): its reference, floor,
    candidate, shadowed copies and schedule are every kind of run there is."""
    runs = sorted(p.parent.name for p in shadowed_campaign.glob("runs/*/attn_calls.json"))
    assert runs == sorted(p.name for p in (shadowed_campaign / "runs").iterdir())  # every run has one
    assert {"torch_sdpa", "floor", "sage_emul_thuml"} <= set(runs), runs
    checks = {
        arm: json.loads((shadowed_campaign / "runs" / arm / "attn_calls.json").read_text())["ranks"]["0"][
            "direct_check"
        ]
        for arm in runs
    }
    assert all(c["identical"] and len(c["q_shape"]) == 4 for c in checks.values()), checks
    shape = "x".join(map(str, checks["sage_emul_thuml"]["q_shape"]))
    line = f"sage_emul_thuml: backend output vs a direct op call: bitwise identical (first call, q {shape})"
    assert f"- {line}" in (shadowed_campaign / "pr.md").read_text()
    assert f"bitwise identical (first call, q {shape})" in (shadowed_campaign / "report.md").read_text()


# --- the library API: plan_campaign -> dry_run | lock_campaign + execute -----------------------


def test_plan_campaign_checks_every_input_and_writes_nothing(tmp_path):
    from harness.campaign import plan_campaign
    from harness.errors import Exit, HarnessError
    from harness.scenario.load import load_scenario

    path = scenario(tmp_path)
    out = tmp_path / "out"
    plan = plan_campaign(path, profile="3step", out_root=out, seeds=[5, 5, 6], repeats=2)
    assert plan.keys == ["torch_sdpa@5", "floor@5", "torch_sdpa@6", "floor@6"] + [
        "floor@5~r2",
        "torch_sdpa@5~r2",
        "floor@6~r2",
        "torch_sdpa@6~r2",
    ]  # round 2 in reverse order
    assert plan.campaign.path == out / "tiny" / "3step" and plan.path == path and plan.executor == "local"
    assert plan.notes == ["note: --seeds: 5 given more than once; each seed runs once"]
    from_object = plan_campaign(load_scenario(path), out_root=out, campaign_id="obj")
    assert from_object.path is None and from_object.campaign.path == out / "tiny" / "obj"
    for kwargs, match in (
        ({"executor": "locall"}, "--executor: unknown executor 'locall'; did you mean 'local'?"),
        ({"seeds": [-1]}, "--seeds"),
        ({"resubmit_failed": -1}, "--resubmit-failed"),
        ({"slurm_overrides": {"time_min": 0}}, "--slurm-time-min"),
        ({"campaign_id": "../x"}, "--campaign"),
    ):
        with pytest.raises(HarnessError, match=match) as info:
            plan_campaign(path, out_root=out, **kwargs)
        assert info.value.exit_code == Exit.BAD_INPUT
    with pytest.raises(HarnessError, match="unknown profile 'nope'"):
        plan_campaign(path, profile="nope", out_root=out)
    assert not out.exists()


def test_dry_run_says_what_would_be_launched(tmp_path):
    from harness.campaign import dry_run, plan_campaign

    path = scenario(tmp_path, "  - {name: sage_attn2, attn_type: sage_attn2}\n")
    shown = dry_run(plan_campaign(path, profile="3step", out_root=tmp_path / "out", check_executor=False))
    assert [(e.key, e.action, e.why) for e in shown.entries] == [
        ("torch_sdpa", "run", "new"), ("floor", "run", "new"), ("sage_attn2", "run", "new")
    ]  # fmt: skip
    assert "-m harness.runners.builtin" in shown.entries[0].shell()
    assert "PYTHONUNBUFFERED=1" in shown.entries[0].shell()
    assert shown.entries[2].preflight.startswith("backend sage_attn2 unavailable here")
    assert shown.held_by is None and shown.notes == []
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_execute_runs_the_plan_then_a_rerun_keeps_what_is_ok(tmp_path):
    from harness.campaign import execute, lock_campaign, plan_campaign
    from harness.store import CampaignDir

    path = scenario(tmp_path)
    plan = plan_campaign(path, profile="3step", out_root=tmp_path / "out")
    with pytest.raises(ValueError, match="not held on"):
        execute(plan, lock=lock_campaign(CampaignDir(tmp_path / "elsewhere")))
    outcome = execute(plan, lock=lock_campaign(plan.campaign), report=False)
    rows = outcome.summary_rows()
    assert [(r.key, r.role, r.status, r.valid, r.provenance) for r in rows] == [
        ("torch_sdpa", "reference", "ok", True, "now"), ("floor", "noise_floor", "ok", True, "now")
    ]  # fmt: skip
    assert all(r.s_per_step > 0 and r.pipeline_total_s > 0 for r in rows)
    assert not outcome.mixed_provenance and not outcome.failed and outcome.report_paths is None
    campaign = json.loads((plan.campaign.campaign_json).read_text())
    assert campaign["scenario_file"] == str(path) and campaign["executor"] == "local"
    assert [a["status"] for a in campaign["arms"]] == ["ok", "ok"]

    again = plan_campaign(path, profile="3step", out_root=tmp_path / "out")
    assert [p.action for p in again.actions()] == ["skip-ok", "skip-ok"]
    outcome = execute(again, lock=lock_campaign(again.campaign), report=False)
    assert [r.provenance for r in outcome.summary_rows()] == ["kept", "kept"] and outcome.mixed_provenance


def test_repeats_auto_on_the_command_line_is_the_scenarios_repeats_auto(tmp_path):
    """`--repeats auto` plans as `repeats: auto` in the scenario would, and the campaign records it."""
    from harness.plan import plan_campaign

    path = scenario(tmp_path, "  - {name: cand, attn_type: sage_emul_aiter}\n")
    path.write_text(path.read_text().replace("seed: 3\n", "seed: 3\nrepeats_auto: {min: 2, max: 3}\n"))
    plan = plan_campaign(path, profile="3step", out_root=tmp_path / "out", repeats="auto")
    assert plan.auto is not None and plan.auto.max == 3 and plan.scenario.repeats == "auto"
    written = tmp_path / "auto.yaml"
    written.write_text(path.read_text().replace("seed: 3\n", "seed: 3\nrepeats: auto\n"))
    same = plan_campaign(written, profile="3step", out_root=tmp_path / "out")
    assert [s.key for s in plan.specs] == [s.key for s in same.specs] and plan.auto == same.auto
    assert plan_campaign(path, profile="3step", out_root=tmp_path / "out").auto is None
    res = harness("run", path, "--out", tmp_path / "out", "--repeats", "auto", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "# cand~r3: run" in res.stdout and "~r4" not in res.stdout
    res = harness("run", path, "--out", tmp_path / "out", "--repeats", "many", "--dry-run")
    assert (
        res.returncode == 2
        and "'--repeats': expected a number of runs (1 or more) or auto (got 'many')" in res.stderr
    )


def test_repeats_auto_plans_the_maximum_and_stops_when_the_intervals_are_narrow(tmp_path):
    """``repeats: auto``: rounds up to the maximum are planned; after each round from the minimum on,
    the candidates' speed-up intervals decide whether another round runs, and the stop says why."""
    sys.path.insert(0, str(ROOT / "tests" / "report"))
    from campaign_factory import ArmSpec, write_run

    from harness.campaign import auto_stop
    from harness.plan import plan_campaign

    path = scenario(tmp_path, "  - {name: cand, attn_type: sage_emul_aiter}\n")
    path.write_text(path.read_text().replace("seed: 3\n", "seed: 3\nrepeats: auto\n"
                                             "repeats_auto: {target: 0.05, min: 2, max: 4}\n"))  # fmt: skip
    plan = plan_campaign(path, profile="3step", out_root=tmp_path / "out")
    assert plan.auto is not None and plan.auto.max == 4
    assert sorted({s.repeat for s in plan.specs}) == [1, 2, 3, 4] and len(plan.specs) == 12

    def rounds(n: int, cand_steps) -> None:
        for spec in plan.specs:
            if spec.repeat <= n and not plan.campaign.run(spec.key).run_json.exists():
                steps = [2.0, 1.0, 1.0] if spec.arm != "cand" else cand_steps(spec.repeat)
                arm = ArmSpec(spec.arm, role=spec.role.value, attn_type=spec.attn_type)
                write_run(
                    plan.campaign.run(spec.key).path, arm, seed=spec.seed, repeat=spec.repeat, steps=steps
                )

    rounds(2, lambda r: [2.0, 0.5 + 0.001 * r, 0.5 + 0.001 * r])  # steady: narrow after two rounds
    assert auto_stop(plan, 2, last=False) == (
        "stopped after 2 round(s): every speed-up interval is narrower than 5%"
    )
    noisy = plan_campaign(path, profile="3step", out_root=tmp_path / "noisy")
    plan = noisy
    rounds(2, lambda r: [2.0, 0.5 * r, 0.5 * r])  # the candidate halves its speed each round
    assert auto_stop(plan, 2, last=False) is None
    rounds(4, lambda r: [2.0, 0.5 * r, 0.5 * r])
    why = auto_stop(plan, 4, last=True)
    assert why.startswith("stopped at the maximum of 4 round(s): cand ") and "(target 5%)" in why

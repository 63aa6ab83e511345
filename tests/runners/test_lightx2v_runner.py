"""The LightX2V runner's stages together: registered, prepare after pre-flight, and runs of the
stand-in LightX2V (a rank crash, a killed torchrun: the real one cannot crash on demand)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lightx2v_site import BASE, specs_for, stub_launch

from harness.errors import HarnessError
from harness.records import TimingRecord
from harness.runners.base import get_runner
from harness.runners.lightx2v.params import LightX2VParams
from harness.runners.lightx2v.preflight import synthetic_problem
from harness.runners.lightx2v.runner import LightX2VRunner


def test_runner_is_registered():
    assert isinstance(get_runner("lightx2v"), LightX2VRunner)


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


def test_the_probe_facts_reach_prepare_on_the_runner_that_asked(site, probe_ok):
    """What a runner's pre-flight learnt is that runner's: another one records no probe."""
    specs = specs_for(site)
    runner = get_runner("lightx2v")
    assert runner.preflight(specs["torch_sdpa"]) is None
    runner.prepare(specs["torch_sdpa"], site["tmp"] / "a")
    get_runner("lightx2v").prepare(specs["torch_sdpa"], site["tmp"] / "b")
    runner.prepare(specs["aiter_sage_attn"], site["tmp"] / "c")  # an arm this runner did not probe
    probes = {d: json.loads((site["tmp"] / d / "lightx2v_env.json").read_text())["probe"] for d in "abc"}
    assert probes == {"a": {"arch": "gfx1201", "gpus": 2}, "b": None, "c": None}
    env = json.loads((site["tmp"] / "a" / "lightx2v_env.json").read_text())
    assert list(env) == ["lightx2v_root", "lightx2v_git", "ranks_python", "probe"]
    assert env["ranks_python"] == sys.executable


def test_prepare_without_the_base_config_is_a_clear_error(site):
    spec = specs_for(site)["torch_sdpa"]
    site["config"].unlink()
    with pytest.raises(HarnessError, match=r"lightx2v.config_json .*minimax_h3_ref2av.json: not found"):
        get_runner("lightx2v").prepare(spec, site["tmp"] / "run")


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


def _stub_run(tmp_path: Path, extra_env: dict | None = None):
    """Run the runner's exact command against the stand-in LightX2V, 2 ranks, then finalize."""
    spec, run_dir, launch, env = stub_launch(tmp_path)
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


def _where(pid: int) -> str:
    """A process's state, parent and kernel wait channel, from /proc ('gone' once it is)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return "gone"
    return f"state {stat[0]}, parent {stat[1]}, waiting in {wchan or '-'}"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_ranks_do_not_outlive_a_killed_torchrun(tmp_path):
    """torchrun puts each rank in a session of its own; SIGKILL it and the ranks still end, counted."""
    import signal
    import time

    spec, run_dir, launch, env = stub_launch(tmp_path)
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
    # 60 s: seen once past 20 s on the 2-core machine with two other suites beside it (cause not
    # found; the message below says where each rank that stayed was, for the next time)
    deadline = time.monotonic() + 60
    while _processes_mentioning(str(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _processes_mentioning(str(run_dir))
    where = {pid: _where(pid) for pid in left}
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    logs = {p.name: p.read_text(errors="replace")[-600:] for p in sorted(run_dir.glob("rank*.log"))}
    assert left == [], f"ranks outlived torchrun: {where}; logs: {logs}"
    for rank in (0, 1):
        calls = json.loads((run_dir / f"attn_calls.rank{rank}.json").read_text())
        assert calls["errors"] == ["terminated by SIGTERM"] and calls["calls"] == {"stub_exact": 3}

"""The Slurm executor against a real single-node Slurm (.ci/install-slurm.sh sets one up).

No mock stands in for Slurm: without sinfo or an idle node every test here skips with the reason.
The `script` runner of test_process.py runs inside the jobs; its module is put on the jobs'
PYTHONPATH (a job inherits the submitting environment) so the job can import it.
"""

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_process import WRITE_OK, ScriptRunner, spec

from harness.executors.base import Reporter
from harness.executors.process import LocalExecutor
from harness.executors.slurm import SlurmExecutor, describe_gpus, query_jobs, slurm_unavailable
from harness.media import iter_frames, read_audio
from harness.plan import plan_actions
from harness.records import RunStatus
from harness.scenario.model import SlurmBlock
from harness.store import CampaignDir

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
GOOD = WRITE_OK.replace("{FALLBACKS}", "{}")
FAST = SlurmBlock(poll_s=0.5, time_min=5)


@pytest.fixture(scope="module")
def cluster():
    why = slurm_unavailable()
    if why:
        pytest.skip(f"no usable Slurm here: {why} (run .ci/install-slurm.sh as root)")


@pytest.fixture
def job_env(cluster, monkeypatch):
    """Make the module that registers the `script` runner importable inside the jobs."""
    mod = sys.modules[ScriptRunner.__module__]
    root = Path(mod.__file__).resolve().parents[mod.__name__.count(".")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))


class Recorder(Reporter):
    def __init__(self, on_start=None, on_progress=None):
        self.started, self.finished, self.messages = [], [], []
        self.on_start, self.on_progress = on_start, on_progress

    def run_started(self, spec, index, total):
        self.started.append(spec.key)
        if self.on_start:
            self.on_start(spec)

    def run_progress(self, step, steps):
        if self.on_progress:
            self.on_progress(step, steps)

    def run_finished(self, record):
        self.finished.append((record.spec.key, record.status))

    def message(self, text):
        self.messages.append(text)


def plan(camp: CampaignDir, specs, **kw):
    return plan_actions(camp, specs, **kw)


def active_jobs(ids: list[str]) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(ids)], capture_output=True, text=True)
    return out.stdout.split()


def wait_ended(ids: list[str], limit_s: float = 60.0) -> dict:
    """Job states once none is queued or running (run.json is final a moment before the job exits)."""
    deadline = time.monotonic() + limit_s
    while True:
        states = query_jobs(ids)
        if not any(st.active for st in states.values()) or time.monotonic() > deadline:
            return states
        time.sleep(0.5)


def test_jobs_run_and_a_crash_does_not_stop_the_others(job_env, tmp_path):
    camp = CampaignDir(tmp_path / "camp")
    specs = [
        spec(GOOD, "first"),
        spec("import sys; sys.stderr.write('boom\\n'); sys.exit(3)", "crash"),
        spec(GOOD, "last"),
    ]
    rep, seen = Recorder(), []
    SlurmExecutor(FAST).run(camp, plan(camp, specs), rep, seen.append)

    by_key = {r.spec.key: r for r in seen}
    assert {k: r.status for k, r in by_key.items()} == {
        "first": RunStatus.ok, "crash": RunStatus.failed, "last": RunStatus.ok,
    }  # fmt: skip
    assert by_key["crash"].reason == "exit code 3: boom"
    assert sorted(rep.started) == sorted(k for k, _ in rep.finished) == sorted(by_key)
    ids = set()
    for key in by_key:
        on_disk = json.loads(camp.run(key).run_json.read_text())
        assert on_disk["executor"] == "slurm"
        assert on_disk["job_id"] and on_disk["job_id"].isdigit()
        assert on_disk["host"] == socket.gethostname()
        # The arm's command is built inside the job: the job ran this very interpreter.
        assert on_disk["command"][0] == sys.executable
        assert (
            tmp_path / "camp" / "slurm" / on_disk["job_id"]
        ).is_dir()  # submitit's folder, <campaign>/slurm/%j
        ids.add(on_disk["job_id"])
    assert len(ids) == 3
    # A crashed arm is still a clean job: execute_run recorded the crash and the job exited 0.
    assert {st.state for st in wait_ended(sorted(ids)).values()} == {"COMPLETED"}


def test_a_job_that_dies_is_recorded_and_resubmitted(job_env, tmp_path):
    flag = tmp_path / "second-attempt"
    # First attempt: SIGKILL the job's own Python (the one that would write run.json), like a node
    # failure. The runner's parent is its guard; the guard's parent is the job's Python.
    code = (
        f"""
import os, pathlib, signal, sys
flag = pathlib.Path({str(flag)!r})
if not flag.exists():
    flag.write_text("1")
    stat = pathlib.Path(f"/proc/{{os.getppid()}}/stat").read_text()
    os.kill(int(stat.rsplit(")", 1)[1].split()[1]), signal.SIGKILL)
    sys.exit(0)
"""
        + GOOD
    )
    camp = CampaignDir(tmp_path / "camp")
    seen = []
    rep = Recorder()
    SlurmExecutor(FAST, resubmit_failed=1).run(camp, plan(camp, [spec(code, "dies")]), rep, seen.append)

    assert [r.status for r in seen] == [RunStatus.ok]
    first = json.loads((camp.run("dies").path / "attempt-1.run.json").read_text())
    assert first["status"] == "failed"
    assert f"Slurm job {first['job_id']} ended" in first["reason"]
    assert "without a final run.json" in first["reason"]
    assert first["log_tail"]  # the tail of submitit's log for that job
    assert seen[0].job_id != first["job_id"]
    assert any("resubmitting (attempt 2 of 2)" in m for m in rep.messages)


def test_ctrl_c_cancels_every_job_and_records_interrupted(job_env, tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    code = f"""
import os, pathlib, time
(pathlib.Path({str(pids)!r}) / str(os.getpid())).write_text("")
print("HARNESS_STEP 1/3", flush=True)
time.sleep(120)
"""
    camp = CampaignDir(tmp_path / "camp")

    def interrupt(step, steps):  # Ctrl-C once the first arm's own process is computing
        raise KeyboardInterrupt

    seen = []
    with pytest.raises(KeyboardInterrupt):
        SlurmExecutor(FAST, cancel_wait_s=60).run(
            camp, plan(camp, [spec(code, "a"), spec(code, "b")]), Recorder(on_progress=interrupt), seen.append
        )
    recs = {k: camp.run(k).record() for k in ("a", "b")}
    assert {r.status for r in recs.values()} == {RunStatus.interrupted}
    assert all(r.job_id and "cancelled" in r.reason for r in recs.values())
    assert sorted(r.spec.key for r in seen) == ["a", "b"]
    assert active_jobs([r.job_id for r in recs.values()]) == []
    assert "before it started" in recs["b"].reason  # exclusive: b waited for a's node
    assert recs["a"].exit_code is not None  # a's job stopped its arm and recorded how it ended
    started = [int(p.name) for p in pids.iterdir()]
    assert len(started) == 1
    for pid in started:  # the arm's own process is gone too
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_resume_works_across_executors(job_env, tmp_path):
    flag = tmp_path / "fixed"
    flaky = f"import pathlib, sys\nif not pathlib.Path({str(flag)!r}).exists(): sys.exit(1)\n" + GOOD
    specs = [spec(GOOD, "a"), spec(flaky, "b"), spec(GOOD, "c")]
    camp = CampaignDir(tmp_path / "camp")

    LocalExecutor().run(camp, plan(camp, specs[2:]), Reporter(), lambda r: None)  # c: local, ok
    planned = plan(camp, specs)
    assert [p.action for p in planned] == ["run", "run", "skip-ok"]
    SlurmExecutor(FAST).run(camp, planned, Reporter(), lambda r: None)  # a ok, b fails; c untouched
    assert camp.run("c").record().executor == "local"
    assert camp.run("a").record().executor == "slurm"

    flag.write_text("")
    planned = plan(camp, specs)
    assert [p.action for p in planned] == ["skip-ok", "rerun", "skip-ok"]
    LocalExecutor().run(camp, planned, Reporter(), lambda r: None)  # only b, locally
    recs = {k: camp.run(k).record() for k in ("a", "b", "c")}
    assert {k: (r.status, r.executor) for k, r in recs.items()} == {
        "a": (RunStatus.ok, "slurm"), "b": (RunStatus.ok, "local"), "c": (RunStatus.ok, "local"),
    }  # fmt: skip
    assert recs["a"].job_id and recs["b"].job_id is None
    assert [p.action for p in plan(camp, specs)] == ["skip-ok"] * 3


def test_a_crashed_harness_leaves_jobs_that_a_rerun_reattaches_to(job_env, tmp_path):
    code = "import time; time.sleep(3)\n" + GOOD
    specs = [spec(code, "a")]
    camp = CampaignDir(tmp_path / "camp")

    def crash(spec):
        raise RuntimeError("harness crashed")

    with pytest.raises(RuntimeError):
        SlurmExecutor(FAST).run(camp, plan(camp, specs), Recorder(on_start=crash), lambda r: None)
    left = camp.run("a").record()
    assert left.status in (RunStatus.pending, RunStatus.running) and left.executor == "slurm"
    assert query_jobs([left.job_id])[left.job_id].active  # still queued or running: traceable

    rep, seen = Recorder(), []
    SlurmExecutor(FAST).run(camp, plan(camp, specs), rep, seen.append)
    assert [(r.status, r.job_id) for r in seen] == [(RunStatus.ok, left.job_id)]  # no second job
    assert any("re-attached" in m for m in rep.messages)


def test_sbatch_refusal_is_recorded_and_the_rest_runs(job_env, tmp_path):
    camp = CampaignDir(tmp_path / "camp")
    bad = spec(GOOD, "bad")
    good = spec(GOOD, "good")
    ex = SlurmExecutor(SlurmBlock(poll_s=0.5, time_min=5, partition="no_such_partition"))
    seen = []
    ex.run(camp, plan(camp, [bad]), Reporter(), seen.append)
    SlurmExecutor(FAST).run(camp, plan(camp, [good]), Reporter(), seen.append)
    assert [r.status for r in seen] == [RunStatus.failed, RunStatus.ok]
    assert seen[0].reason.startswith("sbatch refused the job:") and "partition" in seen[0].reason.lower()


def test_job_parameters_follow_the_slurm_block(tmp_path):
    block = SlurmBlock(partition="gpu", account="acct", qos="high", constraint="h200", time_min=90,
                       cpus_per_task=16, mem_gb=200, extra={"slurm_comment": "ab", "exclude": "n1"})  # fmt: skip
    params = SlurmExecutor(block).job_parameters(spec(GOOD, "a"), tmp_path / "a")
    assert params == {
        "job_name": "harness-t-a", "time": 90, "partition": "gpu", "account": "acct", "qos": "high",
        "constraint": "h200", "cpus_per_task": 16, "mem": "200GB", "exclusive": True,
        "comment": "ab", "exclude": "n1",
    }  # fmt: skip
    # GPUs: the block's count, else what the runner says the run needs (the script runner: none).
    assert (
        SlurmExecutor(SlurmBlock(gpus_per_node=2)).job_parameters(spec(GOOD, "a"), tmp_path)["gpus_per_node"]
        == 2
    )
    assert "gpus_per_node" not in SlurmExecutor().job_parameters(spec(GOOD, "a"), tmp_path)
    assert "exclusive" not in SlurmExecutor(SlurmBlock(exclusive=False)).job_parameters(
        spec(GOOD, "a"), tmp_path
    )


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_builtin_campaign_on_slurm_equals_the_local_one(cluster, tmp_path):
    pytest.importorskip("harness.tiny_ref2av", reason="the builtin pipeline is not there yet")
    from harness.tiny_ref2av import run

    if not hasattr(run, "run_pipeline"):
        pytest.skip("the builtin pipeline (harness.tiny_ref2av.run_pipeline) is not there yet")
    # The scenario as it is, plus its Slurm block: this test cluster has no GPU to give (the cpu
    # preset's device "auto" would otherwise ask for one) and polls often.
    scenario = yaml.safe_load((REPO / "scenarios/e2e_3step.yaml").read_text())
    scenario["executor"] = {"slurm": {"gpus_per_node": 0, "poll_s": 1, "time_min": 10}}
    # its dose-response lies beside the shipped scenario, not beside this copy
    scenario["dose_response_from"]["results"] = str(REPO / "reports/examples/cpu/dose_response/results.json")
    scenario_file = tmp_path / "e2e_3step.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario))
    harness = Path(sys.executable).with_name("harness")
    arms = "torch_sdpa,torch_sdpa_kv_reversed"
    outs = {}
    for kind in ("local", "slurm"):
        out = tmp_path / kind
        cmd = [str(harness), "run", str(scenario_file), "--profile", "3step",
               "--arms", arms, "--executor", kind, "--out", str(out), "--no-report"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs[kind] = CampaignDir(out / "e2e_3step" / "3step")
    local, slurm = ({r.key: r.record() for r in outs[k].runs()} for k in ("local", "slurm"))
    assert sorted(local) == sorted(slurm) == sorted(arms.split(","))
    mp4_differs = []
    for key in local:
        a, b = local[key], slurm[key]
        assert (a.status, a.valid, a.spec_hash) == (RunStatus.ok, True, b.spec_hash)
        assert (b.status, b.valid) == (RunStatus.ok, True)
        assert (a.executor, a.job_id) == ("local", None) and b.executor == "slurm" and b.job_id
        run_a, run_b = outs["local"].run(key), outs["slurm"].run(key)
        # What the pipeline computed: every step's latents and the attention call counts, bitwise.
        steps = sorted(p.name for p in (run_a.path / "latents").glob("*.npz"))
        assert steps and steps == sorted(p.name for p in (run_b.path / "latents").glob("*.npz"))
        for name in steps:
            la, lb = np.load(run_a.path / "latents" / name), np.load(run_b.path / "latents" / name)
            assert la.files == lb.files and all(np.array_equal(la[f], lb[f]) for f in la.files), name
        assert a.outputs["attn_calls.json"] == b.outputs["attn_calls.json"]
        # What was written: the decoded audio bitwise, the video frames and the file itself.
        aud_a, rate_a = read_audio(run_a.output)
        aud_b, rate_b = read_audio(run_b.output)
        assert rate_a == rate_b and np.array_equal(aud_a, aud_b)
        if _sha(run_a.output) != _sha(run_b.output):
            mp4_differs.append(key)
            continue
        for fa, fb in zip(iter_frames(run_a.output), iter_frames(run_b.output), strict=True):
            assert np.array_equal(fa, fb)
    assert outs["slurm"].record().executor == "slurm"
    assert {a.status for a in outs["slurm"].record().arms} == {RunStatus.ok}
    if mp4_differs:
        # Identical latents and audio, different files: only the H.264 encoder differs. libx264's
        # macroblock-tree pass gives different bytes for the same frames from one call to the next
        # on some CPUs; when media.write_av is made deterministic this branch is never taken.
        pytest.xfail(
            f"output.mp4 of {mp4_differs} differs although every latent and the audio are bitwise "
            "identical: the libx264 encode is not deterministic on this machine"
        )


@pytest.mark.slow
def test_gpu_label_names_the_slurm_allocation():
    assert describe_gpus({}) is None  # no GPU given: nothing is looked up
    label = describe_gpus(
        {"SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1", "PATH": os.environ["PATH"]}
    )
    # This machine's torch sees no GPU, so the names are unknown; the allocation is still recorded.
    assert label.endswith("(Slurm GPUs 2,3; CUDA_VISIBLE_DEVICES=0,1)")

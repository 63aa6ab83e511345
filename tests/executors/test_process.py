"""The shared run step: real child processes that succeed, crash, hang, fall back or get interrupted."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.executors.base import PlannedRun, Reporter
from harness.executors.process import LocalExecutor, execute_run
from harness.records import RunRecord, RunSpec, RunStatus
from harness.registry import RUNNERS
from harness.runners.base import Launch, Runner
from harness.store import CampaignDir, RunDir

pytestmark = pytest.mark.concurrency  # real child processes, their signals and ends; .ci/flake-hunt


@RUNNERS.register("script")
class ScriptRunner(Runner):
    """Runs the Python code in spec.params['code'] with the run directory as argv[1]."""

    def resolve_params(self, scenario, arm, profile):
        return {}

    def preflight(self, spec):
        return spec.params.get("skip")

    def prepare(self, spec, run_dir: Path, *, dry_run=False):
        return Launch([sys.executable, "-c", textwrap.dedent(spec.params["code"]), str(run_dir)])


WRITE_OK = """
import json, sys, pathlib
d = pathlib.Path(sys.argv[1])
(d / "output.mp4").write_bytes(b"video")
fallbacks = {FALLBACKS}
(d / "attn_calls.json").write_text(json.dumps({"requested": "torch_sdpa",
    "ranks": {"0": {"calls": {"torch_sdpa": 12}, "fallbacks": fallbacks}}}))
print("HARNESS_STEP 1/1")
"""


def spec(code: str, name="arm", **kw) -> RunSpec:
    return RunSpec(scenario="t", runner="script", arm=name, seed=1, attn_type="torch_sdpa",
                   params={"code": code, **kw.pop("params", {})}, **kw)  # fmt: skip


def run(tmp_path, s: RunSpec, **kw):
    return execute_run(s, RunDir(tmp_path / s.key), **kw)


def test_ok_run_is_valid_and_hashed(tmp_path):
    rec = run(tmp_path, spec(WRITE_OK.replace("{FALLBACKS}", "{}")))
    assert rec.status == RunStatus.ok, rec.reason
    assert rec.valid is True and rec.exit_code == 0
    assert set(rec.outputs) == {"output.mp4", "attn_calls.json"}
    assert rec.command[0] == sys.executable
    on_disk = json.loads((tmp_path / "arm" / "run.json").read_text())
    assert on_disk["status"] == "ok" and on_disk["spec_hash"] == rec.spec_hash


def test_fallback_marks_run_invalid(tmp_path):
    rec = run(tmp_path, spec(WRITE_OK.replace("{FALLBACKS}", "{'torch_sdpa_math': 2}")))
    assert rec.status == RunStatus.ok
    assert rec.valid is False
    assert rec.reason == "invalid: rank 0: 2 call(s) fell back to 'torch_sdpa_math'"


def test_missing_attn_calls_is_invalid(tmp_path):
    rec = run(
        tmp_path, spec("import sys,pathlib; (pathlib.Path(sys.argv[1])/'output.mp4').write_bytes(b'v')")
    )
    assert rec.status == RunStatus.ok and rec.valid is False
    assert "no attn_calls.json" in rec.reason


def test_crash_is_recorded_with_log_tail(tmp_path):
    rec = run(
        tmp_path, spec("import sys; print('loading'); sys.stderr.write('RuntimeError: boom\\n'); sys.exit(3)")
    )
    assert rec.status == RunStatus.failed
    assert rec.exit_code == 3
    assert rec.reason == "exit code 3: RuntimeError: boom"
    assert "boom" in rec.log_tail


def test_a_signal_death_names_the_signal_beside_the_last_real_log_line(tmp_path):
    code = (
        "import os, signal; print('loading weights', flush=True); print('HARNESS_STEP 1/3', flush=True);"
        " os.kill(os.getpid(), signal.SIGSEGV)"
    )
    rec = run(tmp_path, spec(code, env={"PYTHONFAULTHANDLER": ""}))
    assert rec.status == RunStatus.failed and rec.exit_code == -signal.SIGSEGV
    assert rec.reason == "killed by SIGSEGV (signal 11): loading weights"


def test_a_log_is_capped_keeping_its_head_and_its_newest_output_and_says_what_was_cut(tmp_path):
    """An arm printing megabytes a call filled the disk (a 48 MiB stdout.log): each log now keeps its
    first quarter of the cap and the newest output, with a line saying how many bytes were cut."""
    cap, lines = 1 << 20, 40_000  # 40,000 lines of 100 bytes: 4,000,000 bytes through a 1 MiB cap
    code = WRITE_OK.replace("{FALLBACKS}", "{}") + (
        f"for i in range({lines}):\n    print(f'line {{i:07d}} ' + 'x' * 86, flush=i % 1000 == 0)\n"
        "print('HARNESS_STEP 1/1 the newest line', flush=True)\n"
    )
    rec = run(tmp_path, spec(code, env={"HARNESS_LOG_CAP_BYTES": str(cap)}))
    assert rec.status == RunStatus.ok, rec.reason
    log = (tmp_path / "arm" / "stdout.log").read_bytes()
    printed = 17 + lines * 100 + len("HARNESS_STEP 1/1 the newest line\n")  # WRITE_OK's step line first
    marks = [ln for ln in log.splitlines() if ln.startswith(b"[harness: ")]
    assert len(log) <= cap + 200 and len(marks) == 1, (len(log), marks)
    cut = int(marks[0].split()[1])
    head = cap // 4
    assert (
        marks[0]
        == f"[harness: {cut} bytes of this log cut here: a log keeps its first {head} bytes and its newest]".encode()
    )
    assert len(log) - len(marks[0]) - 2 + cut == printed  # every byte printed is kept or counted as cut
    assert log.startswith(b"HARNESS_STEP 1/1\nline 0000000 ") and log.endswith(b"the newest line\n")
    assert "the newest line" in rec.log_tail and rec.logs_cut == {"stdout.log": cut}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")
def test_a_child_in_its_own_session_ends_with_its_arm(tmp_path):
    """A kernel's helper started in a session of its own is out of the runner's process group: it
    must not outlive the arm (it was left under PID 1, sleeping)."""
    code = WRITE_OK.replace("{FALLBACKS}", "{}") + (
        "import subprocess\n"
        "p = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "(d / 'helper.pid').write_text(str(p.pid))\n"
    )
    rec = run(tmp_path, spec(code))
    assert rec.status == RunStatus.ok, rec.reason
    pid = int((tmp_path / "arm" / "helper.pid").read_text())
    with pytest.raises(ProcessLookupError):  # gone, and reaped: not even a zombie is left
        os.kill(pid, 0)


def test_exit_zero_without_output_fails(tmp_path):
    rec = run(tmp_path, spec("pass"))
    assert rec.status == RunStatus.failed
    assert "wrote no output.mp4" in rec.reason


def test_timeout_kills_and_records(tmp_path):
    rec = run(tmp_path, spec("import time; time.sleep(60)", timeout_s=1.0))
    assert rec.status == RunStatus.timeout
    assert rec.duration_s < 30
    assert "time limit of 1 s" in rec.reason


def test_preflight_refusal_is_skipped(tmp_path):
    rec = run(tmp_path, spec("pass", params={"skip": "backend x unavailable here: no GPU"}))
    assert rec.status == RunStatus.skipped
    assert rec.reason == "backend x unavailable here: no GPU"
    assert rec.command == []


def test_interrupt_stops_child_and_records(tmp_path):
    code = "import time; print('HARNESS_STEP 1/3', flush=True); time.sleep(60)"

    def interrupt(step, steps):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, spec(code), on_progress=interrupt)
    rec = RunDir(tmp_path / "arm").record()
    assert rec.status == RunStatus.interrupted
    assert rec.ended_at is not None and rec.exit_code is not None


def test_a_crashing_arm_does_not_stop_the_others(tmp_path):
    camp = CampaignDir(tmp_path / "camp")
    good = WRITE_OK.replace("{FALLBACKS}", "{}")
    specs = [spec(good, "first"), spec("import sys; sys.exit(1)", "crash"), spec(good, "last")]
    seen = []
    LocalExecutor().run(camp, [PlannedRun(s, "run", "new") for s in specs], Reporter(), seen.append)
    assert [r.status for r in seen] == [RunStatus.ok, RunStatus.failed, RunStatus.ok]
    assert all(camp.run(k).exists() for k in ("first", "crash", "last"))


SLEEPER = """
import subprocess, sys, time
from pathlib import Path
from harness.executors.process import execute_run
from harness.records import RunSpec
from harness.registry import RUNNERS
from harness.runners.base import Launch, Runner
from harness.store import RunDir

RUNNER = '''
import os, pathlib, subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # like a torchrun rank
pathlib.Path(sys.argv[1]).write_text(f"{os.getpid()} {rank.pid}")
time.sleep(120)
'''

@RUNNERS.register("sleeper")
class Sleeper(Runner):
    def resolve_params(self, *args):
        return {}

    def prepare(self, spec, run_dir, *, dry_run=False):
        return Launch([sys.executable, "-c", RUNNER, PIDS])

PIDS = sys.argv[1]
execute_run(RunSpec(scenario="t", runner="sleeper", arm="a", seed=1, attn_type="x"), RunDir(Path(sys.argv[2])))
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _record_pid(run: Path) -> int | None:
    rec = RunDir(run).record_or_none()
    return rec.pid if rec is not None else None


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_runner_and_its_children_die_with_the_process_that_started_them(tmp_path, sig):
    """The harness side of a run dies (SIGKILL: nothing of it runs any more); the runner, started
    in a session of its own, and the runner's own child go with it within seconds."""
    from cli_testutil import wait_for  # here: Slurm jobs import this module without tests/ on their path

    pids = tmp_path / "pids"
    parent = subprocess.Popen([sys.executable, "-c", SLEEPER, str(pids), str(tmp_path / "run")])
    try:
        wait_for(lambda: pids.exists() and pids.read_text(), "the runner to write its pids", timeout=60,
                 proc=parent)  # fmt: skip
        # The runner can be faster than its parent, which records the pid in run.json once the
        # runner's guard has started: wait for that record too (a loaded machine reorders them).
        wait_for(lambda: _record_pid(tmp_path / "run"), "run.json to record the runner's pid", timeout=60,
                 proc=parent)  # fmt: skip
    except BaseException:
        parent.kill()
        raise
    runner, rank = map(int, pids.read_text().split())
    assert _alive(runner) and _alive(rank)
    rec = RunDir(tmp_path / "run").record()
    assert rec.status == RunStatus.running and rec.pid and rec.pid_start
    parent.send_signal(sig)
    parent.wait(timeout=30)
    deadline = time.monotonic() + 15
    while (_alive(runner) or _alive(rank)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(runner) and not _alive(rank), "orphaned runner or rank still running"


def test_stale_running_record_is_recognised_only_when_its_process_is_gone(tmp_path):
    from harness.executors.process import process_start, runner_alive
    from harness.records import stale_reason

    me = RunRecord(spec=spec("pass"), spec_hash="h", status=RunStatus.running, host=socket.gethostname())
    me.pid, me.pid_start = os.getpid(), process_start(os.getpid())
    assert runner_alive(me)
    assert stale_reason(me).startswith("interrupted (stale): left running by a harness run that is gone")
    me.pid_start += 1  # the same pid, another process: a reused pid is not our runner
    assert not runner_alive(me)
    me.executor = "slurm"  # Slurm jobs outlive the harness on purpose
    assert stale_reason(me) is None
    done = RunRecord(spec=spec("pass"), spec_hash="h", status=RunStatus.ok)
    assert stale_reason(done) is None


BURN = """
import subprocess, sys, time
burn = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.0: pass"
subprocess.run([sys.executable, "-c", burn])  # a grandchild: the run's tree, not only its process
""" + WRITE_OK.replace("{FALLBACKS}", "{}")


def test_a_run_records_the_machine_load_leaving_its_own_process_tree_out(tmp_path):
    from harness.executors.process import cpu_jiffies

    before = cpu_jiffies()
    rec = run(tmp_path, spec(BURN))
    after = cpu_jiffies()
    assert rec.status == RunStatus.ok, rec.reason
    load = RunRecord.model_validate_json((tmp_path / "arm" / "run.json").read_text()).load
    assert load is not None and load.cpu_count == os.cpu_count() and len(load.loadavg_1m) == 2
    assert before and after and load.other_cpu_percent is not None
    # the run burnt one core for a second: all of it is the run's, none is another process's
    all_busy = 100 * (after[0] - before[0]) / (after[1] - before[1])
    burnt = 100 * 1.0 * os.sysconf("SC_CLK_TCK") / (after[1] - before[1])
    assert 0 <= load.other_cpu_percent <= all_busy - 0.8 * burnt

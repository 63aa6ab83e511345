"""Run one arm as a child process and record how it ended: the step every executor shares (the local
executor, here, calls ``execute_run`` in the harness, the Slurm one inside the job). run.json gets the
command, environment, exit code, times, log tail, output hashes and attention validity; a crash, a
time-out or Ctrl-C is recorded, not lost."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from harness.errors import HarnessError
from harness.executors.base import Executor, OnRecord, PlannedRun, Reporter
from harness.executors.guard import cut_bytes, log_cap, stat_fields
from harness.insitu_records import INSITU_DIR
from harness.records import MachineLoad, RunRecord, RunSpec, RunStatus
from harness.runners.base import Launch, get_runner
from harness.store import (
    ATTN_CALLS_JSON,
    OUTPUT_LOSSLESS,
    OUTPUT_MP4,
    STDERR_LOG,
    STDOUT_LOG,
    TIMING_JSON,
    CampaignDir,
    RunDir,
    sha256_file,
    tail_text,
    utcnow,
)

# Step markers: the builtin pipeline's, and LightX2V's MiniMax-H3 / Wan loggers'.
_STEP = re.compile(r"(?:HARNESS_STEP|MiniMax-H3 step:|step_index:)\s*(\d+)\s*/\s*(\d+)")
HASHED_OUTPUTS = (OUTPUT_MP4, OUTPUT_LOSSLESS, TIMING_JSON, ATTN_CALLS_JSON, "config.json")
# The in-situ records a verdict reads (not the captured tensors, which only the kernels bench replays).
HASHED_INSITU = ("rank*.jsonl", "rank*.meta.json")
KILL_GRACE_S = 10.0
GUARD = Path(__file__).with_name("guard.py")

ProgressFn = Callable[[int, int], None]
# torchrun's summary of a rank that failed ("exitcode  : -11 (pid: 1234)"); negative: a signal.
_RANK_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-\d+)", re.MULTILINE)
_RULE = re.compile(r"^[\W_]*$")  # a line of '=' or '-' only: nothing to read


def signal_text(number: int) -> str:
    """``SIGSEGV (signal 11)``; an unknown number as ``signal N``."""
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


def failure_reason(returncode: int, log_tail: str) -> str:
    """Why a runner's process failed, in one line: the signal that killed it (or, under torchrun, a
    rank), beside the last line of its log that says something (no step marker, no rule)."""
    lines = (ln.strip() for ln in reversed(log_tail.splitlines()))
    last = next((ln for ln in lines if ln and not _STEP.search(ln) and not _RULE.match(ln)), "")
    if returncode < 0:
        head = f"killed by {signal_text(-returncode)}"
    else:
        head = f"exit code {returncode}"
        rank = _RANK_EXIT.search(log_tail)
        if rank:
            head += f" (a rank killed by {signal_text(-int(rank.group(1)))})"
    return head + (f": {last[:300]}" if last else "")


def last_step(path: Path) -> tuple[int, int] | None:
    """The last (step, steps) a runner's log announced, from its tail; None before the first."""
    found = _STEP.findall(tail_text(path, lines=20, max_bytes=8000))
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the child's process group (torchrun passes it on to its ranks), SIGKILL after a grace."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
            return


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), or None when unknown."""
    try:
        return int(stat_fields(pid)[19])
    except (IndexError, ValueError):
        return None


def runner_alive(rec: RunRecord) -> bool:
    """Whether the process group recorded in run.json still runs on this host (same process, not a
    reused pid)."""
    if rec.pid is None or rec.host != socket.gethostname():
        return False
    try:
        os.kill(rec.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    start = process_start(rec.pid)
    return rec.pid_start is None or start is None or start == rec.pid_start


def stop_orphan(rec: RunRecord, grace_s: float = KILL_GRACE_S) -> bool:
    """Stop a runner that outlived its harness (its guard normally does that within seconds); returns
    whether one was still running. Call only while holding the campaign lock."""
    if not runner_alive(rec):
        return False
    assert rec.pid is not None
    # First a grace: its guard may be stopping it now; then SIGTERM, then SIGKILL.
    for sig, wait_s in ((None, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if not runner_alive(rec):
            break
        try:
            if sig is not None:
                os.killpg(rec.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        end = time.monotonic() + wait_s
        while time.monotonic() < end and runner_alive(rec):
            time.sleep(0.1)
    return True


def cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) clock ticks of all cores since boot, from /proc/stat; None without one."""
    try:
        with open("/proc/stat", "rb") as f:  # user nice system idle iowait irq softirq steal
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def gpu_util(visible: str | None) -> float | None:
    """The busiest visible GPU's utilisation (%, nvidia-smi), or None where there is none to ask."""
    ids = ["-i", visible] if visible else []  # indices or UUIDs, as CUDA_VISIBLE_DEVICES holds them
    cmd = ["nvidia-smi", *ids, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=True).stdout
        return max(float(x) for x in out.split())
    except (OSError, subprocess.SubprocessError, ValueError):  # no nvidia-smi, no GPU, an odd answer
        return None


class LoadProbe:
    """The machine's load over one run: started before it, ``done`` after its process tree was waited for
    (the guard reaps the runner's, so this process's children times hold the run's whole CPU)."""

    def __init__(self, visible: str | None) -> None:
        self.gpu = gpu_util(visible)
        # os.times()[:4]: this process's CPU seconds and its waited-for children's (the run's tree)
        self.load, self.cpu, self.own = os.getloadavg()[0], cpu_jiffies(), sum(os.times()[:4])

    def done(self) -> MachineLoad:
        cores, now = os.cpu_count() or 1, cpu_jiffies()
        other = None
        if self.cpu is not None and now is not None and now[1] > self.cpu[1]:
            own = (sum(os.times()[:4]) - self.own) * os.sysconf("SC_CLK_TCK")
            other = round(max(0.0, 100 * (now[0] - self.cpu[0] - own) / (now[1] - self.cpu[1])), 1)
        load = [round(x, 2) for x in (self.load, os.getloadavg()[0])]
        return MachineLoad(
            cpu_count=cores, loadavg_1m=load, other_cpu_percent=other, gpu_util_percent=self.gpu
        )


def _finish(rec: RunRecord, run_dir: RunDir, spec: RunSpec) -> None:
    """Finalize through the runner, hash outputs, decide status and attention validity."""
    try:
        get_runner(spec.runner).finalize(spec, run_dir.path)
    except Exception as err:  # a broken log must not lose the run record
        rec.invalid_reasons.append(f"finalize failed: {err}")
    rec.outputs = {n: sha256_file(run_dir.file(n)) for n in HASHED_OUTPUTS if run_dir.file(n).exists()}
    for pattern in HASHED_INSITU:
        for path in sorted((run_dir.path / INSITU_DIR).glob(pattern)):
            rec.outputs[f"{INSITU_DIR}/{path.name}"] = sha256_file(path)
    try:
        calls = run_dir.attn_calls()
    except HarnessError as err:
        calls = None
        rec.invalid_reasons.append(str(err))
    if rec.status == RunStatus.ok:
        if OUTPUT_MP4 not in rec.outputs:
            rec.status, rec.reason = RunStatus.failed, "the process exited 0 but wrote no output.mp4"
        if calls is None:
            rec.valid = False
            rec.invalid_reasons.append("no attn_calls.json: attention calls were not counted")
        else:
            valid, reasons = calls.validity()
            rec.valid = valid and not rec.invalid_reasons
            rec.invalid_reasons.extend(reasons)
    if rec.valid is False and rec.status == RunStatus.ok:
        rec.reason = "invalid: " + "; ".join(rec.invalid_reasons)


def emulated_backend(attn_type: str) -> bool:
    """Whether the harness's registry names ``attn_type`` a numerics model (its timings are no
    kernel's); a name it does not know (a framework's own backend) is not one. Recorded in run.json
    so that a report need not import the backends (torch) to say so."""
    from harness.attention.registry import BACKENDS

    try:
        return bool(BACKENDS.get(attn_type).emulated)
    except HarnessError:
        return False


def execute_run(
    spec: RunSpec,
    run_dir: RunDir,
    *,
    on_progress: ProgressFn | None = None,
    executor: str = "local",
    job_id: str | None = None,
) -> RunRecord:
    """Run one spec to completion and write run.json; re-raises KeyboardInterrupt after recording it."""
    runner = get_runner(spec.runner)
    rec = RunRecord(spec=spec, spec_hash=spec.spec_hash(), executor=executor, job_id=job_id)
    rec.emulated = emulated_backend(spec.attn_type)
    rec.host = socket.gethostname()
    # Pre-flight first: one that raises (a framework that cannot be imported) stops the campaign
    # before this run's previous outputs are removed.
    reason = runner.preflight(spec)
    run_dir.path.mkdir(parents=True, exist_ok=True)
    for stale in (*HASHED_OUTPUTS, STDOUT_LOG, STDERR_LOG):
        if stale != "config.json":
            run_dir.file(stale).unlink(missing_ok=True)
    status = RunStatus.skipped
    if not reason:
        try:
            launch: Launch = runner.prepare(spec, run_dir.path)
        except HarnessError as err:
            status, reason = RunStatus.failed, f"prepare failed: {err}"
    if reason:
        rec.status, rec.reason = status, reason
        rec.started_at = rec.ended_at = utcnow()
        run_dir.write(rec)
        return rec
    rec.command, rec.env = launch.command, {**spec.env, **launch.env}
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")
    rec.gpu = f"visible devices {visible}" if visible else None
    rec.status, rec.started_at = RunStatus.running, utcnow()
    run_dir.write(rec)
    try:
        return supervise(rec, launch, run_dir, spec, on_progress)
    except KeyboardInterrupt:
        if rec.status == RunStatus.running:  # the signal landed while starting or finishing, not in the wait
            rec.status, rec.reason = RunStatus.interrupted, "interrupted (Ctrl-C or SIGTERM)"
            rec.ended_at = rec.ended_at or utcnow()
            run_dir.write(rec)
        raise


def supervise(
    rec: RunRecord, launch: Launch, run_dir: RunDir, spec: RunSpec, on_progress: ProgressFn | None
) -> RunRecord:
    """Start the launch under its guard, wait (time limit, progress), and record how it ended."""

    env = {**os.environ, **rec.env}
    probe = LoadProbe(env.get("CUDA_VISIBLE_DEVICES"))
    t0 = time.monotonic()
    interrupted = False
    # The guard holds the read end of this pipe; its write end dies with this process, and with
    # it the runner's whole process group (see guard.py). -E -S: the guard needs only the stdlib.
    watch_r, watch_w = os.pipe()
    guarded = [sys.executable, "-E", "-S", str(GUARD), str(watch_r), "--", *launch.command]
    with open(run_dir.file(STDOUT_LOG), "wb") as out, open(run_dir.file(STDERR_LOG), "wb") as err:
        try:
            proc = subprocess.Popen(
                guarded, stdout=out, stderr=err, env=env, cwd=launch.cwd, start_new_session=True,
                pass_fds=(watch_r,),
            )  # fmt: skip
        except OSError as exc:
            os.close(watch_w)
            rec.status, rec.reason = RunStatus.failed, f"cannot start {launch.command[0]}: {exc.strerror}"
            rec.ended_at = utcnow()
            run_dir.write(rec)
            return rec
        finally:
            os.close(watch_r)
        try:
            rec.pid, rec.pid_start = proc.pid, process_start(proc.pid)
            run_dir.write(rec)
            last = None
            while True:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.25)
                    break
                if spec.timeout_s and time.monotonic() - t0 > spec.timeout_s:
                    _stop(proc)
                    rec.status, rec.reason = RunStatus.timeout, f"time limit of {spec.timeout_s:g} s reached"
                    break
                if on_progress:
                    step = last_step(run_dir.file(STDOUT_LOG)) or last_step(run_dir.file(STDERR_LOG))
                    if step and step != last:
                        on_progress(*step)
                        last = step
        except KeyboardInterrupt:
            _stop(proc)
            interrupted = True
            rec.status, rec.reason = RunStatus.interrupted, "interrupted (Ctrl-C or SIGTERM)"

    os.close(watch_w)
    with contextlib.suppress(ProcessLookupError, PermissionError):  # what the runner left in its group
        os.killpg(proc.pid, signal.SIGKILL)  # (a rank that outlived torchrun)
    rec.exit_code = proc.returncode
    rec.ended_at = utcnow()
    rec.duration_s = round(time.monotonic() - t0, 3)
    rec.load = probe.done()
    rec.log_tail = tail_text(run_dir.file(STDERR_LOG)) or tail_text(run_dir.file(STDOUT_LOG))
    cap = log_cap(env)
    rec.logs_cut = {n: c for n in (STDOUT_LOG, STDERR_LOG) if (c := cut_bytes(run_dir.file(n), cap))}
    if rec.status == RunStatus.running and proc.returncode == 0:
        rec.status = RunStatus.ok
    elif rec.status == RunStatus.running:
        rec.status, rec.reason = RunStatus.failed, failure_reason(proc.returncode, rec.log_tail)
    _finish(rec, run_dir, spec)
    run_dir.write(rec)
    if interrupted:
        raise KeyboardInterrupt
    return rec


class LocalExecutor(Executor):
    """The arms one after another on this machine, each in its own process."""

    name = "local"

    def run(
        self, campaign: CampaignDir, planned: list[PlannedRun], reporter: Reporter, on_record: OnRecord
    ) -> None:
        todo = [p for p in planned if p.action != "skip-ok"]
        for i, p in enumerate(todo):
            reporter.run_started(p.spec, i, len(todo))
            record = execute_run(p.spec, campaign.run(p.spec.key), on_progress=reporter.run_progress)
            on_record(record)
            reporter.run_finished(record)

"""Slurm executor: one submitit job per arm run, running ``execute_run`` on the compute node
(``run_job``) so that run.json looks the same whichever executor ran it. Job ids go into run.json at
once (a later run re-attaches); jobs that died without a final run.json are recorded with Slurm's
state (squeue, then sacct) and submitit's log; Ctrl-C cancels every job the campaign submitted."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from shutil import which
from typing import Any

from harness.errors import HarnessError
from harness.executors.base import Executor, OnRecord, PlannedRun, Reporter
from harness.executors.process import execute_run, last_step
from harness.records import RunRecord, RunSpec, RunStatus
from harness.runners.base import get_runner
from harness.scenario.model import SlurmBlock
from harness.store import RUN_JSON, STDERR_LOG, STDOUT_LOG, CampaignDir, RunDir, tail_text, utcnow

FINAL = {RunStatus.ok, RunStatus.failed, RunStatus.timeout, RunStatus.interrupted, RunStatus.skipped}
# What --resubmit-failed retries: crashes, time limits, and jobs Slurm cancelled or preempted.
RESUBMITTABLE = {RunStatus.failed, RunStatus.timeout, RunStatus.interrupted}
CANCEL_WAIT_S = 30.0  # after Ctrl-C: how long to wait for cancelled jobs to record themselves


ACTIVE_STATES = {
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
    "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED",
}  # fmt: skip
RUNNING_STATES = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "STOPPED"}
TIMEOUT_STATES = {"TIMEOUT", "DEADLINE"}
SLURM_CMD_TIMEOUT_S = 60.0


@dataclass
class JobState:
    state: str  # Slurm's job state (RUNNING, COMPLETED, CANCELLED, ...), or UNKNOWN
    node: str | None = None
    reason: str | None = None  # why a pending job waits

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES


def slurm_command(cmd: list[str], timeout: float = SLURM_CMD_TIMEOUT_S) -> subprocess.CompletedProcess | None:
    """Run a Slurm tool (or a short child); None when it cannot be started or does not answer in time."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def query_jobs(job_ids: list[str]) -> dict[str, JobState]:
    """Current state of each job: squeue (the controller keeps ended jobs for MinJobAge), then sacct."""
    states: dict[str, JobState] = {}
    if not job_ids:
        return states
    out = slurm_command(["squeue", "-h", "--states=all", "-o", "%i|%T|%N|%r", "-j", ",".join(job_ids)])
    if out is not None and out.returncode == 0:
        for line in out.stdout.splitlines():
            jid, st, node, reason = (line.split("|") + ["", "", ""])[:4]
            if jid.strip() in job_ids:
                states[jid.strip()] = JobState(st.strip(), node.strip() or None, reason.strip() or None)
    missing = [j for j in job_ids if j not in states]
    if missing:
        out = slurm_command(
            ["sacct", "-n", "-P", "-X", "-o", "JobID,State,NodeList", "-j", ",".join(missing)]
        )
        if out is not None and out.returncode == 0:
            for line in out.stdout.splitlines():
                jid, st, node = (line.split("|") + ["", ""])[:3]
                if jid in missing and st:
                    node = node.strip()
                    states[jid] = JobState(st.split()[0], None if node in ("", "None assigned") else node)
    return states


def slurm_unavailable() -> str | None:
    """Why Slurm jobs cannot be submitted from here (one line), or None when a node is up."""
    for tool in ("sbatch", "squeue", "sinfo", "srun", "scancel"):
        if which(tool) is None:
            return f"no {tool} on PATH (Slurm client tools are not installed)"
    out = slurm_command(["sinfo", "-h", "-o", "%t"])
    if out is None or out.returncode != 0:
        why = (out.stderr.strip().splitlines() or ["no answer"])[-1] if out else "no answer"
        return f"sinfo failed: {why}"
    up = [s for s in out.stdout.split() if s.rstrip("*~#!%$@^-") in ("idle", "mix", "alloc", "comp")]
    return None if up else f"no Slurm node is up (sinfo states: {' '.join(out.stdout.split()) or 'none'})"


_GPU_ENV = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


def describe_gpus(environ: dict[str, str] | None = None) -> str | None:
    """The GPUs Slurm gave this job, with their names: e.g. 'NVIDIA H200 x2 (Slurm GPUs 0,1;
    CUDA_VISIBLE_DEVICES=0,1)'; None when the job has none (no child process started)."""
    env = os.environ if environ is None else environ
    slurm_ids = env.get("SLURM_JOB_GPUS") or env.get("SLURM_STEP_GPUS")
    visible = [(k, env[k]) for k in _GPU_ENV if env.get(k)]
    if not slurm_ids and not visible:
        return None
    # The names from a short-lived child (its GPU context goes with it).
    code = "import torch\nfor i in range(torch.cuda.device_count()): print(torch.cuda.get_device_name(i))"
    out = slurm_command([sys.executable, "-c", code], timeout=120)
    names = out.stdout.splitlines() if out is not None and out.returncode == 0 else []
    counts = Counter(ln.strip() for ln in names if ln.strip())
    label = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in counts.items()) or "GPU names unknown"
    where = ([f"Slurm GPUs {slurm_ids}"] if slurm_ids else []) + [f"{k}={v}" for k, v in visible[:1]]
    return f"{label} ({'; '.join(where)})"


def run_job(spec: RunSpec, run_path: str, imports: tuple[str, ...] = ()) -> str:
    """execute_run for one spec, then the job's own details; returns the final status. SIGTERM
    (scancel, preemption) and submitit's time-limit warning (SIGUSR2, 90 s before the limit) stop
    the arm through execute_run's interrupt path, and run.json says which of the two it was."""
    for module in imports:  # runners registered outside the harness package (plug-ins, tests)
        importlib.import_module(module)
    job_id = os.environ.get("SLURM_JOB_ID")
    node = socket.gethostname()
    run_dir = RunDir(Path(run_path))
    gpu = describe_gpus()
    stop: dict[str, str] = {}

    def on_signal(signum: int, frame: Any) -> None:
        if stop:  # a second signal must not break the recording of the first
            return
        stop["why"] = "timeout" if signum == signal.SIGUSR2 else "cancelled"
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGUSR2, on_signal)
    try:
        rec = execute_run(spec, run_dir, executor="slurm", job_id=job_id)
    except KeyboardInterrupt:
        rec = run_dir.record()
        if stop.get("why") == "timeout":
            rec.status = RunStatus.timeout
            rec.reason = f"Slurm time limit about to be reached: stopped by job {job_id} on {node}"
        else:
            rec.status = RunStatus.interrupted
            rec.reason = f"Slurm job {job_id} on {node} was sent SIGTERM (scancel or preemption)"
        rec.ended_at = rec.ended_at or utcnow()
    rec.host = rec.host or node
    rec.gpu = gpu or rec.gpu
    run_dir.write(rec)
    return rec.status.value


@dataclass
class _Tracked:
    planned: PlannedRun
    run_dir: RunDir
    params: dict[str, Any]
    submitter: Any = None  # submitit.SlurmExecutor with this run's parameters
    job: Any = None  # submitit SlurmJob
    attempt: int = 1
    started: bool = False
    done: bool = False  # its final record was reported
    dead_since: float | None = None  # Slurm says ended, run.json not final yet (shared-filesystem lag)
    pending_reason: str | None = None

    @property
    def key(self) -> str:
        return self.planned.spec.key

    @property
    def job_id(self) -> str:
        return str(self.job.job_id)


class SlurmExecutor(Executor):
    """One Slurm job per planned run (arm x seed), submitted with submitit; ``resubmit_failed``: how
    many times an arm whose job failed, timed out or was cancelled is submitted again (default 0)."""

    name = "slurm"

    def __init__(
        self,
        slurm: SlurmBlock | None = None,
        *,
        resubmit_failed: int = 0,
        cancel_wait_s: float = CANCEL_WAIT_S,
        settle_s: float | None = None,
    ):
        if resubmit_failed < 0:
            raise HarnessError(f"resubmit_failed must be 0 or more (got {resubmit_failed})")
        self.slurm = slurm or SlurmBlock()
        self.resubmit_failed = resubmit_failed
        self.cancel_wait_s = cancel_wait_s
        # A job that ended without a final run.json is declared dead after this long (NFS caches).
        self.settle_s = settle_s if settle_s is not None else min(30.0, 2 * self.slurm.poll_s)

    def folder(self, campaign: CampaignDir) -> Path:
        base = Path(self.slurm.folder) if self.slurm.folder else campaign.path / "slurm" / "%j"
        if "%j" not in str(base):
            base = base / "%j"
        return base.absolute()

    def job_parameters(self, spec: RunSpec, run_path: Path) -> dict[str, Any]:
        """submitit's slurm parameters for one run (names as submitit.SlurmExecutor takes them)."""
        b = self.slurm
        gpus = b.gpus_per_node
        if gpus is None:
            gpus = get_runner(spec.runner).prepare(spec, run_path, dry_run=True).gpus
        params: dict[str, Any] = {"job_name": f"harness-{spec.scenario}-{spec.key}", "time": b.time_min}
        optional = {
            **{name: getattr(b, name) for name in ("partition", "account", "qos", "constraint")},
            "gpus_per_node": gpus,
            "cpus_per_task": b.cpus_per_task,
            "mem": f"{b.mem_gb}GB" if b.mem_gb else None,
            "exclusive": b.exclusive,
        }
        params |= {key: value for key, value in optional.items() if value}  # unset ones stay submitit's
        return params | {key.removeprefix("slurm_"): value for key, value in b.extra.items()}

    def _new_submitit(self, campaign: CampaignDir, params: dict[str, Any]):
        import submitit

        try:
            ex = submitit.SlurmExecutor(folder=self.folder(campaign))
        except RuntimeError as err:
            raise HarnessError(f"slurm executor: {err}") from None
        try:
            ex.update_parameters(**params)
        except ValueError as err:
            first = str(err).splitlines()[0]
            raise HarnessError(f"executor.slurm: invalid submitit parameter: {first}") from None
        return ex

    def run(
        self, campaign: CampaignDir, planned: list[PlannedRun], reporter: Reporter, on_record: OnRecord
    ) -> None:
        todo = [p for p in planned if p.action != "skip-ok"]
        if not todo:
            return
        if why := slurm_unavailable():
            raise HarnessError(f"slurm executor: {why}")
        for p in todo:
            if p.spec.timeout_s and p.spec.timeout_s > self.slurm.time_min * 60:
                reporter.message(
                    f"note: {p.spec.key}: timeout_s {p.spec.timeout_s:g} s exceeds the Slurm time limit "
                    f"of {self.slurm.time_min} min (executor.slurm.time_min); Slurm stops the job first"
                )
        tracked = [_Tracked(p, campaign.run(p.spec.key), {}) for p in todo]
        for t in tracked:  # every parameter set is checked before anything is submitted
            t.params = self.job_parameters(t.planned.spec, t.run_dir.path)
            t.submitter = self._new_submitit(campaign, t.params)
        active: list[_Tracked] = []
        counter = {"started": 0}
        try:
            self._adopt_or_cancel_stale(campaign, tracked, reporter)
            for t in tracked:
                if t.job is None:
                    self._submit(t, reporter, on_record, counter, len(todo))
                if t.job is not None:
                    active.append(t)
            if active:
                ids = ", ".join(f"{t.key}={t.job_id}" for t in active)
                reporter.message(
                    f"slurm: {len(active)} job(s) queued ({ids}); logs in {self.folder(campaign).parent}"
                )
            self._poll(active, reporter, on_record, counter, len(todo))
        except KeyboardInterrupt:
            self._cancel_all([t for t in tracked if t.job is not None and not t.done], reporter, on_record)
            raise

    def _adopt_or_cancel_stale(
        self, campaign: CampaignDir, tracked: list[_Tracked], reporter: Reporter
    ) -> None:
        """Re-attach to jobs a previous (crashed) harness left queued or running; --force cancels them."""
        from submitit.slurm.slurm import SlurmJob

        old: dict[str, _Tracked] = {}
        for t in tracked:
            rec = t.run_dir.record_or_none()
            if (
                rec is not None
                and rec.executor == "slurm"
                and rec.job_id
                and rec.status in (RunStatus.pending, RunStatus.running)
                and rec.spec_hash == t.planned.spec.spec_hash()
            ):
                old[rec.job_id] = t
        if not old:
            return
        states = query_jobs(list(old))
        for jid, t in old.items():
            st = states.get(jid)
            if st is None or not st.active:
                continue
            if t.planned.why == "--force":
                slurm_command(["scancel", jid])
                reporter.message(f"slurm: {t.key}: cancelled job {jid} left by an earlier run (--force)")
                continue
            t.job = SlurmJob(folder=self.folder(campaign), job_id=jid)
            reporter.message(f"slurm: {t.key}: re-attached to job {jid} ({st.state}) left by an earlier run")

    def _submit(
        self, t: _Tracked, reporter: Reporter, on_record: OnRecord, counter: dict, total: int
    ) -> None:
        spec = t.planned.spec
        runner_module = type(get_runner(spec.runner)).__module__
        imports = () if runner_module.startswith("harness.") else (runner_module,)
        pending = RunRecord(spec=spec, spec_hash=spec.spec_hash(), executor="slurm", status=RunStatus.pending)
        pending.reason = f"queued for Slurm (attempt {t.attempt})"
        t.run_dir.path.mkdir(parents=True, exist_ok=True)
        t.run_dir.write(pending)  # before sbatch: a fast job's own "running" must never be overwritten
        try:
            job = t.submitter.submit(run_job, spec, str(t.run_dir.path), imports)
        except Exception as err:  # sbatch refused (bad partition, GPUs the cluster lacks, ...)
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            why = next(
                (ln for ln in reversed(lines) if "error" in ln.lower()), lines[-1] if lines else repr(err)
            )
            pending.status, pending.reason = RunStatus.failed, f"sbatch refused the job: {why[:300]}"
            pending.started_at = pending.ended_at = utcnow()
            pending.log_tail = "\n".join(lines[-40:])
            t.run_dir.write(pending)
            t.done = True
            counter["started"] += 1
            reporter.run_started(spec, counter["started"] - 1, total)
            on_record(pending)
            reporter.run_finished(pending)
            return
        t.job = job
        rec = t.run_dir.record_or_none() or pending
        if rec.status == RunStatus.pending and rec.job_id is None:
            pending.job_id = t.job_id
            pending.reason = f"Slurm job {t.job_id} submitted (attempt {t.attempt})"
            t.run_dir.write(pending)

    def _poll(
        self, active: list[_Tracked], reporter: Reporter, on_record: OnRecord, counter: dict, total: int
    ) -> None:
        last_progress: tuple[str, tuple[int, int]] | None = None
        while active:
            states = query_jobs([t.job_id for t in active])
            for t in list(active):
                st = states.get(t.job_id, JobState("UNKNOWN"))
                rec = t.run_dir.record_or_none()
                mine = rec is not None and rec.job_id == t.job_id
                final = mine and rec.status in FINAL
                if st.state == "PENDING" and st.reason != t.pending_reason:
                    t.pending_reason = st.reason
                    if st.reason and st.reason not in ("None", "Priority"):
                        reporter.message(f"slurm: {t.key}: job {t.job_id} pending ({st.reason})")
                if not t.started and (
                    st.running or not st.active or (mine and rec.status != RunStatus.pending)
                ):
                    t.started = True
                    counter["started"] += 1
                    reporter.run_started(t.planned.spec, counter["started"] - 1, total)
                if st.active and not final:
                    continue
                if not final:
                    # Ended (or unknown to Slurm) without a final run.json: give the file a moment to appear.
                    t.dead_since = t.dead_since or time.monotonic()
                    if time.monotonic() - t.dead_since < self.settle_s:
                        continue
                    rec = self._record_dead(t, rec, st)
                active.remove(t)
                if rec.status in RESUBMITTABLE and t.attempt <= self.resubmit_failed:
                    if t.run_dir.run_json.exists():  # the failed attempt's run.json stays beside the new one
                        os.replace(t.run_dir.run_json, t.run_dir.path / f"attempt-{t.attempt}.{RUN_JSON}")
                    t.attempt += 1
                    t.job, t.dead_since, t.pending_reason = None, None, None
                    reporter.message(
                        f"slurm: {t.key}: {rec.status.value} ({rec.reason}); resubmitting "
                        f"(attempt {t.attempt} of {self.resubmit_failed + 1})"
                    )
                    self._submit(t, reporter, on_record, counter, total)
                    if t.job is not None:
                        active.append(t)
                    continue
                t.done = True
                on_record(rec)
                reporter.run_finished(rec)
            running = [t for t in active if t.started]
            if running:
                t = running[-1]
                step = last_step(t.run_dir.file(STDOUT_LOG)) or last_step(t.run_dir.file(STDERR_LOG))
                if step and (t.key, step) != last_progress:
                    reporter.run_progress(*step)
                    last_progress = (t.key, step)
            if active:
                time.sleep(self.slurm.poll_s)

    def _record_dead(self, t: _Tracked, rec: RunRecord | None, st: JobState) -> RunRecord:
        """A job that ended without writing a final run.json: say what Slurm and submitit's log know."""
        spec = t.planned.spec
        if rec is None or rec.job_id not in (None, t.job_id) or rec.spec_hash != spec.spec_hash():
            rec = RunRecord(spec=spec, spec_hash=spec.spec_hash(), executor="slurm")
        rec.executor, rec.job_id = "slurm", t.job_id
        state = (
            st.state if st.state != "UNKNOWN" else "in an unknown state (no longer known to squeue or sacct)"
        )
        node = st.node or rec.host
        rec.host = rec.host or node
        log = tail_text(t.job.paths.stderr) or tail_text(t.job.paths.stdout)
        last = next((ln.strip() for ln in reversed(log.splitlines()) if ln.strip()), "")
        where = f" on {node}" if node else ""
        rec.status = RunStatus.timeout if st.state in TIMEOUT_STATES else RunStatus.failed
        rec.reason = f"Slurm job {t.job_id} ended {state}{where} without a final run.json" + (
            f": {last[:300]}" if last else ""
        )
        rec.log_tail = log or rec.log_tail
        rec.ended_at = utcnow()
        t.run_dir.write(rec)
        return rec

    def _cancel_all(self, live: list[_Tracked], reporter: Reporter, on_record: OnRecord) -> None:
        """Ctrl-C: scancel every job this campaign submitted that has not ended, record them interrupted."""
        if not live:
            return
        reporter.message(f"slurm: cancelling {len(live)} job(s): {', '.join(t.job_id for t in live)}")
        for t in live:
            with contextlib.suppress(OSError):
                t.job.cancel(check=False)
        # Let the jobs stop their arms and write run.json themselves; a second Ctrl-C stops waiting.
        deadline = time.monotonic() + self.cancel_wait_s
        with contextlib.suppress(KeyboardInterrupt):
            while time.monotonic() < deadline:
                states = query_jobs([t.job_id for t in live])
                if not any(states.get(t.job_id, JobState("UNKNOWN")).active for t in live):
                    break
                time.sleep(0.5)
        for t in live:
            rec = t.run_dir.record_or_none()
            spec = t.planned.spec
            if rec is not None and rec.job_id == t.job_id and rec.status in FINAL - {RunStatus.interrupted}:
                on_record(rec)  # it ended on its own before the cancel reached it
                continue
            if rec is None or rec.job_id not in (None, t.job_id):
                rec = RunRecord(spec=spec, spec_hash=spec.spec_hash(), executor="slurm")
            before = " before it started" if rec.status == RunStatus.pending else ""
            rec.executor, rec.job_id = "slurm", t.job_id
            rec.status = RunStatus.interrupted
            rec.reason = f"interrupted (Ctrl-C): Slurm job {t.job_id} cancelled{before}"
            rec.ended_at = rec.ended_at or utcnow()
            if not rec.log_tail:
                rec.log_tail = tail_text(t.job.paths.stderr) or tail_text(t.job.paths.stdout)
            t.run_dir.write(rec)
            on_record(rec)

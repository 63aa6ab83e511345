"""Slurm's view of jobs, from its command-line tools: job states (squeue, then sacct; not submitit's
watcher, which needs accounting) and whether jobs can be submitted from here at all."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from shutil import which

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


def slurm_command(cmd: list[str]) -> subprocess.CompletedProcess | None:
    """Run a Slurm tool; None when it cannot be started or does not answer in time."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=SLURM_CMD_TIMEOUT_S)
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

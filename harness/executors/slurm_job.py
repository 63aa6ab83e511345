"""The function a Slurm job runs on the compute node: ``execute_run`` for one spec, with the
job's signals turned into a recorded interrupt or time-out, and the GPUs Slurm gave it named.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from harness.executors.process import execute_run
from harness.records import RunSpec, RunStatus
from harness.store import RunDir, utcnow

_GPU_ENV = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


def _gpu_names() -> list[str]:
    """Names of the GPUs this process sees, from a short-lived child (its GPU context goes with it)."""
    code = "import torch\nfor i in range(torch.cuda.device_count()): print(torch.cuda.get_device_name(i))"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln.strip() for ln in out.stdout.splitlines() if ln.strip()] if out.returncode == 0 else []


def describe_gpus(environ: dict[str, str] | None = None) -> str | None:
    """The GPUs Slurm gave this job, with their names: e.g. 'NVIDIA H200 x2 (Slurm GPUs 0,1;
    CUDA_VISIBLE_DEVICES=0,1)'; None when the job has none (no child process started)."""
    env = os.environ if environ is None else environ
    slurm_ids = env.get("SLURM_JOB_GPUS") or env.get("SLURM_STEP_GPUS")
    visible = [(k, env[k]) for k in _GPU_ENV if env.get(k)]
    if not slurm_ids and not visible:
        return None
    counts = Counter(_gpu_names())
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

"""The rank log's tee (harness.runners.lightx2v.launch.Tee): every byte written before stop() reaches the
process's own stdout/stderr and the log, however late the pump runs. Each case runs in a child
process, since the tee replaces file descriptors 1 and 2."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.concurrency  # threads and descriptors at a process's end; .ci/flake-hunt

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from harness.runners.lightx2v.launch import Tee

    class LateTee(Tee):
        late = float(sys.argv[2])

        def _forward(self, out_fd, data):  # the pump held back, as on a loaded machine
            time.sleep(self.late)
            self.late = 0.0
            super()._forward(out_fd, data)

    tee = LateTee(sys.argv[1])
    # A child that inherits the descriptors and outlives stop(): its pipe end stays open.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    for i in range(200):
        print(f"err {i}", file=sys.stderr)
    print("out last")
    os.write(2, b"raw tail without a newline")
    tee.stop()
    child.kill()
    """
)


def run_child(tmp_path: Path, late_s: float) -> tuple[subprocess.CompletedProcess, str]:
    log = tmp_path / "rank0.log"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(log), str(late_s)],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return proc, log.read_text()


def test_a_late_pump_still_delivers_every_line(tmp_path):
    """Before: stop() closed the pump's destination before the pump had caught up, so the last
    lines (a traceback's error line) were lost on a loaded machine."""
    proc, log = run_child(tmp_path, late_s=1.0)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [f"err {i}" for i in range(200)]
    assert proc.stderr == "\n".join(lines) + "\nraw tail without a newline"
    assert proc.stdout == "out last\n"
    assert sorted(log.splitlines()) == sorted([*lines, "out last", "raw tail without a newline"])


def test_an_inherited_descriptor_does_not_hold_stop_back(tmp_path):
    proc, log = run_child(tmp_path, late_s=0.0)
    assert proc.returncode == 0 and proc.stderr.endswith("err 199\nraw tail without a newline")
    assert "out last" in log.splitlines()

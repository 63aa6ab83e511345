"""tests/cpu_time.py: `make test CPU_TIME=1` lists the tests that cost the most CPU, processes included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BUSY_TEST = """
import subprocess, sys

def test_spends_cpu_in_a_child():
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)

def test_spends_nothing():
    pass
"""


def test_a_child_process_cpu_is_the_test_that_started_it(tmp_path):
    (tmp_path / "test_busy.py").write_text(BUSY_TEST)
    record = tmp_path / "cpu.jsonl"
    # A pytest of its own: not an xdist worker's (its summary is the controller's to print).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TEST_CPU_TIME"))}
    env["TEST_CPU_TIME"] = str(record)
    plugin = ["-p", "cpu_time", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:benchmark"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugin, str(tmp_path / "test_busy.py")],
        env={**env, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), env.get("PYTHONPATH", "")])},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["test"].split("::")[1]: r for r in map(json.loads, record.read_text().splitlines())}
    assert rows["test_spends_cpu_in_a_child"]["cpu"] > 0.1 > rows["test_spends_nothing"]["cpu"]
    assert "CPU time: " in done.stdout and "test_busy.py::test_spends_cpu_in_a_child" in done.stdout
    assert "workers: main 2 tests, ended at " in done.stdout

"""The CLI imports what a command uses and no more: `harness compare` of two files loads neither
torch (about 0.9 GB of RSS on its own) on a machine without a GPU, nor pandas, matplotlib, jinja2,
scikit-image or the campaign machinery; `harness --help` loads no numerical library at all.

Read from ``python -X importtime``, which lists every module the process imported, in any thread.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_testutil import ROOT

from harness.bench.run import ensure_pair
from harness.envinfo import gpu_device_nodes

NEVER_FOR_FILES = ("pandas", "matplotlib", "jinja2", "skimage", "harness.campaign", "harness.executors",
                   "harness.runners", "harness.attention", "harness.report.html", "harness.report.plots")  # fmt: skip


def imported(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run the CLI under ``-X importtime``; (the process, every module name it imported)."""
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "harness.cli", *map(str, args)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in res.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return res, names


def loaded(names: set[str], package: str) -> bool:
    return any(n == package or n.startswith(package + ".") for n in names)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    a, b, _ = ensure_pair(tmp_path_factory.mktemp("lean"), 4, 32, 48)
    return a, b


def test_importtime_is_read_correctly(pair):
    res, names = imported("compare", *pair)
    assert res.returncode == 0, res.stderr[-2000:]
    assert {"harness.cli.compare", "harness.collect.suite", "av", "numpy"} <= names


def test_compare_of_two_files_imports_only_what_it_uses(pair):
    res, names = imported("compare", *pair, "--format", "json")
    assert res.returncode == 0, res.stderr[-2000:]
    assert '"metrics_device": "cpu"' in res.stdout or gpu_device_nodes()
    assert [p for p in NEVER_FOR_FILES if loaded(names, p)] == []
    if not gpu_device_nodes():  # with a GPU here, "auto" rightly asks torch about it
        assert not loaded(names, "torch")


def test_help_imports_no_numerical_library():
    res, names = imported("--help")
    assert res.returncode == 0 and "Usage: harness" in res.stdout
    assert [p for p in ("numpy", "torch", "pydantic", "av", "cv2") if loaded(names, p)] == []

"""harness.registry.EXECUTORS: executors by name, each module imported on demand."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.executors.process import LocalExecutor
from harness.registry import EXECUTORS, UnknownName


def test_names_and_the_local_executor() -> None:
    assert EXECUTORS.names() == ["local", "slurm"]
    assert isinstance(EXECUTORS.get("local")(), LocalExecutor)


def test_unknown_executor_names_the_known_ones() -> None:
    with pytest.raises(
        UnknownName, match=r"unknown executor 'locl'; did you mean 'local'\? \(known: local, slurm\)"
    ):
        EXECUTORS.get("locl")
    with pytest.raises(UnknownName, match=r"unknown executor 'ssh' \(known: local, slurm\)"):
        EXECUTORS.get("ssh")


def test_an_executor_module_is_imported_only_when_asked_for() -> None:
    code = (
        "import sys\n"
        "from harness.registry import EXECUTORS\n"
        "assert EXECUTORS.names() == ['local', 'slurm']\n"
        "assert 'harness.executors.slurm' not in sys.modules\n"
        "EXECUTORS.get('local')()\n"
        "assert 'harness.executors.process' in sys.modules and 'harness.executors.slurm' not in sys.modules\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr

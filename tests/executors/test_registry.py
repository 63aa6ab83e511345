"""harness.executors.registry: executors by name, each module imported on demand."""

from __future__ import annotations

import pytest

from harness.executors.local import LocalExecutor
from harness.executors.registry import executor_names, get_executor


def test_names_and_the_local_executor() -> None:
    assert executor_names() == ["local", "slurm"]
    assert isinstance(get_executor("local"), LocalExecutor)


def test_unknown_executor_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown executor 'ssh' \(local or slurm\)"):
        get_executor("ssh")

"""The smoke scenario measured once per session (its rows are checked by several test files)."""

from __future__ import annotations

import pytest
from kernels_testutil import SCENARIOS

from harness.kernels.results import KernelsResult
from harness.kernels.run import run_kernels
from harness.kernels.schema import KernelsBlock
from harness.scenario.load import load_scenario


@pytest.fixture(scope="session")
def smoke(tmp_path_factory) -> KernelsResult:
    scenario = load_scenario(SCENARIOS / "kernels_smoke.yaml")
    block = KernelsBlock.model_validate({**scenario.kernels.model_dump(), "device": "cpu"})
    return run_kernels(block, tmp_path_factory.mktemp("smoke"), name=scenario.name)

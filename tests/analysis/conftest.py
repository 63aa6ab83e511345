"""Fixtures for the analysis tests: runs written by the report tests' campaign factory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # cli_testutil
from campaign_factory import ArmSpec, write_run  # noqa: E402


@pytest.fixture
def ref_run(tmp_path: Path):
    return write_run(
        tmp_path / "a" / "torch_sdpa", ArmSpec("torch_sdpa", role="reference", steps=[2.0, 1.0, 1.2])
    )

"""Shared runs of the tiny pipeline preset (a fraction of a second each on a CPU)."""

from __future__ import annotations

import pytest
from tiny_ref2av_testutil import Run, do_run, kv_reversed_attention, quantized_attention

from harness.tiny_ref2av.config import PRESETS, PipelineConfig


@pytest.fixture(scope="session")
def tiny_cfg() -> PipelineConfig:
    return PRESETS["tiny"]


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory, tiny_cfg) -> dict[str, Run]:
    """Five runs: exact twice, exact with another seed, kv-reversed exact, quantised attention."""
    root = tmp_path_factory.mktemp("pipeline_runs")
    plan = {
        "exact": dict(seed=42),
        "exact_again": dict(seed=42),
        "seed43": dict(seed=43),
        "kv_reversed": dict(seed=42, attention=kv_reversed_attention),
        "quantized": dict(seed=42, attention=quantized_attention),
    }
    runs = {}
    for name, kw in plan.items():
        d = root / name
        d.mkdir()
        runs[name] = do_run(tiny_cfg, d, **kw)
    return runs

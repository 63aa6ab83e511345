"""harness.kernels.schema: the kernels block, and kernels scenarios read by harness.scenario."""

from __future__ import annotations

import pytest
from kernels_testutil import SCENARIOS, make_block

from harness.errors import ScenarioError
from harness.scenario.load import load_scenario


def test_schema_rejects_bad_blocks():
    with pytest.raises(ValueError, match="Extra inputs"):
        make_block(repeat=3)
    with pytest.raises(ValueError, match="labels must be unique"):
        make_block(backends=["torch_sdpa", "torch_sdpa"])
    with pytest.raises(ValueError, match=">= 20 on a GPU"):
        make_block(device="cuda", repeats=5)
    with pytest.raises(ValueError, match="dtype"):
        make_block(shapes=[{"name": "x", "heads": 1, "seq_q": 8, "head_dim": 8, "dtype": "int8"}])
    assert make_block().shapes[0].dtype == "bfloat16"


def test_kernels_scenario_errors_name_the_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nkind: kernels\nkernels: {shapes: [], backends: [torch_sdpa]}\n")
    with pytest.raises(ScenarioError, match=r"bad.yaml:3: kernels.shapes"):
        load_scenario(bad)
    bad.write_text("name: x\nkind: kernels\n")
    with pytest.raises(ScenarioError, match="kind 'kernels' needs a 'kernels' block"):
        load_scenario(bad)
    bad.write_text("name: x\nkind: kernels\nkernel: {}\n")
    with pytest.raises(ScenarioError, match="kernel: unknown key; did you mean 'kernels'"):
        load_scenario(bad)


def test_h3_scenario_is_valid():
    scenario = load_scenario(SCENARIOS / "kernels_h3.yaml")
    name, block = scenario.name, scenario.kernels
    assert name == "kernels_h3"
    heads = {s.heads for s in block.shapes}
    assert heads == {56, 28} and {s.head_dim for s in block.shapes} == {128}
    assert any(s.seq_q == 32768 for s in block.shapes)
    assert block.repeats >= 20

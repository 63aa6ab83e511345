"""harness.registry's runners, scenario parts and executors: the harness's own entries load, pass their base-class checks, and agree."""

from __future__ import annotations

import subprocess
import sys

from harness.executors.base import Executor
from harness.registry import EXECUTORS, RUNNER_SCENARIO, RUNNERS, SCENARIO_KINDS
from harness.runners.base import Runner
from harness.scenario.parts import ScenarioPart


def test_every_builtin_entry_loads_and_is_what_its_registry_holds():
    for name in ("builtin", "lightx2v"):
        assert issubclass(RUNNERS.get(name), Runner)
        assert isinstance(RUNNER_SCENARIO.get(name), ScenarioPart)
    assert set(RUNNER_SCENARIO.names()) <= set(RUNNERS.names()), (
        "a scenario part for a runner nobody registered"
    )
    assert [n for n in EXECUTORS.names() if issubclass(EXECUTORS.get(n), Executor)] == ["local", "slurm"]
    assert SCENARIO_KINDS.names() == ["kernels"] and SCENARIO_KINDS.get("kernels").block == "kernels"


def test_the_runner_parts_hold_the_blocks_each_runner_owns():
    assert RUNNER_SCENARIO.get("lightx2v").required and RUNNER_SCENARIO.get("lightx2v").block == "lightx2v"
    assert set(RUNNER_SCENARIO.get("lightx2v").arm_fields.model_fields) == {"sageattention", "count_ops"}
    assert not RUNNER_SCENARIO.get("builtin").required and RUNNER_SCENARIO.get("builtin").arm_fields is None


def test_listing_names_imports_no_runner():
    code = (
        "import sys\n"
        "from harness.registry import RUNNERS\n"
        "assert RUNNERS.names() == ['builtin', 'diffusers', 'lightx2v']\n"
        "assert not [m for m in sys.modules if m.startswith('harness.runners')], sorted(sys.modules)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr

"""A plugin reaches only the arms that call what it registers, and may not change what exact attention
computes: one that patches torch's SDPA, flips TF32, sets an environment variable or draws from the
random generator when imported is refused in one line naming it (at planning and in an arm's process);
a clean one is imported by its own arms only, so the reference and the floor never carry it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_testutil import harness, the_error_line
from test_campaign_plugins import KERNEL, SCENARIO

from harness.campaign import plan_campaign

pytestmark = pytest.mark.usefixtures("no_plugin_left")  # the clean plugin is imported here

SIDE_EFFECTS = {
    "torch.nn.functional.scaled_dot_product_attention": "import torch.nn.functional as F\n"
    "_sdpa = F.scaled_dot_product_attention\n"
    "F.scaled_dot_product_attention = lambda q, k, v, **kw: _sdpa(q.half(), k.half(), v.half(), **kw).to(q.dtype)\n",
    "torch.backends.cuda.matmul.allow_tf32": "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n",
    "os.environ['HARNESS_TEST_SET_BY_A_PLUGIN']": "import os\nos.environ['HARNESS_TEST_SET_BY_A_PLUGIN'] = '1'\n",
    "torch's random state": "import torch\ntorch.randn(4)\n",
}


def _campaign(tmp_path: Path, side_effect: str = "") -> Path:
    (tmp_path / "kernel.py").write_text(side_effect + KERNEL)
    scenario = tmp_path / "my_kernel.yaml"
    scenario.write_text(SCENARIO)
    return scenario


@pytest.mark.parametrize("changed", list(SIDE_EFFECTS))
def test_a_plugin_that_changes_what_exact_attention_computes_is_refused_in_one_line(tmp_path, changed):
    scenario = _campaign(tmp_path, SIDE_EFFECTS[changed])
    res = harness("run", scenario, "--out", tmp_path / "out")
    line = the_error_line(res)
    assert res.returncode == 2 and "plugin kernel.py" in line and f"changed {changed}" in line
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_an_arms_process_refuses_a_plugin_that_changed_torch_since_planning(tmp_path):
    """The arm's own import is checked too (a plugin may act differently in another process)."""
    scenario = _campaign(tmp_path)
    plan = plan_campaign(scenario, out_root=tmp_path / "out")
    (mine,) = [s for s in plan.specs if s.arm == "mine"]
    plugin = mine.plugins[0]
    (tmp_path / "kernel.py").write_text(SIDE_EFFECTS["torch.backends.cuda.matmul.allow_tf32"] + KERNEL)
    plugin = plugin.model_copy(
        update={"sha256": __import__("hashlib").sha256((tmp_path / "kernel.py").read_bytes()).hexdigest()}
    )
    code = (
        "import json, sys\nfrom harness.errors import HarnessError\nfrom harness.records import PluginRef\n"
        "from harness.scenario.plugins import load_recorded\n"
        "try:\n    load_recorded([PluginRef.model_validate(json.loads(sys.argv[1]))])\n"
        "except HarnessError as err:\n    print(err)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(plugin.model_dump())], capture_output=True, text=True
    )
    assert out.stdout.startswith(
        f"plugin kernel.py ({tmp_path / 'kernel.py'}) changed torch.backends.cuda.matmul.allow_tf32"
    ), out


def test_a_clean_plugin_reaches_only_the_arms_that_call_its_backend(tmp_path):
    scenario = _campaign(tmp_path)
    plan = plan_campaign(scenario, out_root=tmp_path / "out")
    imports = {s.arm: [p.ref for p in s.plugins] for s in plan.specs}
    assert imports == {
        "torch_sdpa": [], "torch_sdpa_kv_reversed": [], "torch_sdpa_kv_chunks": [], "torch_sdpa_math": [],
        "mine": ["kernel.py"], "sdpa_insitu": ["kernel.py"],  # a shadow runs it in that process too
    }  # fmt: skip

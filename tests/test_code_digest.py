"""The code digest covers what a plugin's kernel runs: its own modules beside it (not an unrelated
file there) and the scenario's ``sources:`` (files, folders, installed packages); a changed digest
re-runs the arms that call the kernel, as the dry run says."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys

import pytest
from cli_testutil import harness, the_error_line

from harness.campaign import plan_campaign
from harness.cli import main
from harness.errors import ScenarioError
from harness.plan import plan_actions
from harness.records import RunStatus

pytestmark = pytest.mark.usefixtures("no_plugin_left")

KERNEL = """import torch

import mathmod
from harness.attention import AttentionBackend, register_backend


@register_backend("fp16_sdpa_digest", exact=False, description="SDPA computed in fp16")
class FP16SDPA(AttentionBackend):
    def __call__(self, q, k, v, scale=None):
        return mathmod.attend(q, k, v, scale).to(q.dtype)
"""
MATHMOD = """import torch


def attend(q, k, v, scale):
    return torch.nn.functional.scaled_dot_product_attention(q.half(), k.half(), v.half(), scale=scale)
"""
SCENARIO = """name: digest
runner: builtin
plugins: [kernel.py]
builtin: {preset: tiny}
arms:
  - {name: torch_sdpa, attn_type: torch_sdpa, role: reference}
  - {name: mine, attn_type: fp16_sdpa_digest}
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "kernel.py").write_text(KERNEL)
    (tmp_path / "mathmod.py").write_text(MATHMOD)
    (tmp_path / "notes.py").write_text("X = 1\n")  # beside the plugin, imported by nothing
    (tmp_path / "s.yaml").write_text(SCENARIO)
    path = list(sys.path)
    yield tmp_path
    sys.path[:] = path  # the next test's mathmod is its own folder's
    for name in ("mathmod", "vendored_dep"):
        sys.modules.pop(name, None)


def codes(folder, text=SCENARIO) -> dict[str, dict[str, str]]:
    (folder / "s.yaml").write_text(text)
    return {s.arm: s.code for s in plan_campaign(folder / "s.yaml", out_root=folder / "out").specs}


def mark_ok(folder) -> None:
    """Write each planned run as done and ok, as a finished campaign leaves it."""
    plan = plan_campaign(folder / "s.yaml", out_root=folder / "out")
    for spec in plan.specs:
        run = plan.campaign.path / "runs" / spec.key
        run.mkdir(parents=True, exist_ok=True)
        record = {"spec": spec.model_dump(mode="json"), "spec_hash": spec.spec_hash(), "status": "ok"}
        (run / "run.json").write_text(json.dumps(record))
    assert all(r.status == RunStatus.ok for r in (plan.campaign.run(s.key).record() for s in plan.specs))


def test_an_edit_of_an_imported_module_reruns_the_arm_and_an_unrelated_file_does_not(folder, capsys):
    first = codes(folder)
    plugin_file = hashlib.sha256((folder / "kernel.py").read_bytes()).hexdigest()
    assert first["mine"]["fp16_sdpa_digest"] != plugin_file  # mathmod.py joins it
    (folder / "notes.py").write_text("X = 2\n")
    assert codes(folder) == first
    mark_ok(folder)
    assert main(["run", str(folder / "s.yaml"), "--out", str(folder / "out"), "--dry-run"]) in (0, None)
    assert "# mine: skip-ok (already ok, same spec)" in capsys.readouterr().out

    (folder / "mathmod.py").write_text(MATHMOD + "# tuned\n")
    edited = codes(folder)
    assert edited["mine"] != first["mine"] and edited["torch_sdpa"] == first["torch_sdpa"]
    plan = plan_campaign(folder / "s.yaml", out_root=folder / "out")
    actions = {p.spec.arm: (p.action, p.why) for p in plan_actions(plan.campaign, plan.specs)}
    assert actions == {"torch_sdpa": ("skip-ok", "already ok, same spec"), "mine": ("rerun", "spec changed")}
    assert main(["run", str(folder / "s.yaml"), "--out", str(folder / "out"), "--dry-run"]) in (0, None)
    out = capsys.readouterr().out
    assert "# mine: rerun (spec changed)" in out and "# torch_sdpa: skip-ok (already ok, same spec)" in out


def test_sources_join_the_plugin_backends_digest(folder):
    (folder / "lib" / "__pycache__").mkdir(parents=True)
    (folder / "lib" / "kern.triton.py").write_text("BLOCK = 64\n")
    (folder / "lib" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    listed = SCENARIO + "sources: [lib, 'pkg:pydantic']\n"
    before = codes(folder, listed)
    assert before["mine"] != codes(folder)["mine"] and before["torch_sdpa"] == codes(folder)["torch_sdpa"]
    (folder / "lib" / "__pycache__" / "x.pyc").write_bytes(b"\1")  # skipped, as dot folders are
    assert codes(folder, listed) == before
    (folder / "lib" / "kern.triton.py").write_text("BLOCK = 128\n")
    assert codes(folder, listed)["mine"] != before["mine"]
    assert importlib.metadata.version("pydantic")  # the package listed is the installed one


@pytest.mark.parametrize(
    ("entry", "said"),
    [("missing_dir", "no such file or folder"), ("pkg:no-such-dist-xyz", "no installed package")],
)
def test_a_missing_source_is_one_line_naming_the_field(folder, entry, said):
    (folder / "s.yaml").write_text(SCENARIO + f"sources: [{entry!r}]\n")
    with pytest.raises(ScenarioError, match=r"sources\[0\]") as err:
        plan_campaign(folder / "s.yaml", out_root=folder / "out")
    assert said in str(err.value) and "\n" not in str(err.value)
    res = harness("run", "s.yaml", "--out", "out", "--dry-run", cwd=folder)
    assert res.returncode == 2 and res.stdout == ""
    assert the_error_line(res).startswith("error: s.yaml:8: sources[0]: ") and said in res.stderr


def test_installed_code_in_a_dot_folder_beside_the_plugin_is_not_the_plugins(folder):
    (folder / ".venv").mkdir()
    (folder / ".venv" / "vendored_dep.py").write_text("Y = 1\n")
    (folder / "kernel.py").write_text(
        f"import sys\nsys.path.append({str(folder / '.venv')!r})\nimport vendored_dep\n" + KERNEL
    )
    first = codes(folder)
    (folder / ".venv" / "vendored_dep.py").write_text("Y = 2\n")  # loaded, but installed code
    assert codes(folder) == first
    (folder / "mathmod.py").write_text(MATHMOD + "# tuned\n")
    assert codes(folder)["mine"] != first["mine"]

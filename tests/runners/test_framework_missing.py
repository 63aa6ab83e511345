"""A framework that cannot be imported in the ranks' interpreter fails the run: `harness run`
exits 3 with one line naming the interpreter and the import, said once, not once per arm (main:
every arm, the reference included, skipped as "backend unavailable", and exit 0)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_testutil import harness
from lightx2v_site import STUB

import harness.runners.lightx2v.preflight as preflight
from harness.runners.common import FRAMEWORK_FACT, FrameworkUnavailable
from harness.runners.lightx2v.preflight import ProbeResult

MISSING = "harness_test_missing_dependency"


def broken_checkout(tmp_path: Path) -> Path:
    """The stand-in LightX2V whose package imports a dependency this interpreter lacks."""
    root = tmp_path / "lightx2v_broken"
    shutil.copytree(STUB, root)
    init = root / "lightx2v" / "__init__.py"
    init.write_text(f"import {MISSING}  # a dependency of the framework, not installed\n" + init.read_text())
    return root


def scenario(tmp_path: Path, root: Path) -> Path:
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"infer_steps": 30, "vae_attn_type": "stub_other"}))
    path = tmp_path / "stub.yaml"
    path.write_text(f"""\
name: stub
runner: lightx2v
seed: 7
profiles: {{3step: {{infer_steps: 4}}}}
lightx2v:
  root: {root}
  model_path: {tmp_path}
  model_cls: stub_model
  config_json: {base}
  platform: cpu
  nproc_per_node: 1
  prompt: hello
arms:
  - {{name: ref, attn_type: stub_exact, role: reference}}
  - {{name: floor, attn_type: stub_exact, kv_reversed: true, role: noise_floor}}
  - {{name: cand, attn_type: stub_other}}
""")
    return path


@pytest.mark.slow
def test_a_framework_that_cannot_be_imported_fails_the_run_once(tmp_path):
    path = scenario(tmp_path, broken_checkout(tmp_path))
    out = tmp_path / "out"
    res = harness("run", path, "--profile", "3step", "--out", out, "--no-report")
    assert res.returncode == 3, res.stdout + res.stderr  # main: 0, three arms "skipped"
    assert "Traceback" not in res.stderr
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if "import lightx2v failed" in ln]
    assert len(lines) == 1, res.stdout + res.stderr  # once, not once per arm
    assert lines[0].startswith("error: LightX2V cannot be imported by ") and "no arm can run" in lines[0]
    assert "ModuleNotFoundError" in lines[0]
    runs = out / "stub" / "3step" / "runs"
    statuses = [json.loads(p.read_text())["status"] for p in runs.glob("*/run.json")] if runs.is_dir() else []
    assert "skipped" not in statuses and "ok" not in statuses, statuses


def test_the_preflight_raises_on_a_framework_answer_and_skips_on_a_backend_answer(site, monkeypatch):
    from lightx2v_site import specs_for

    from harness.runners.base import get_runner

    spec = specs_for(site)["torch_sdpa"]
    answer = {"reason": f"import lightx2v failed with PLATFORM=cuda: ModuleNotFoundError: {MISSING}"}
    monkeypatch.setattr(preflight, "run_probe", lambda p, s, e: ProbeResult(
        ok=False, reason=answer["reason"], facts={FRAMEWORK_FACT: True, "python": "/opt/py/bin/python"}))  # fmt: skip
    with pytest.raises(FrameworkUnavailable) as err:
        get_runner("lightx2v").preflight(spec)
    assert err.value.exit_code == 3 and "/opt/py/bin/python" in str(err.value) and MISSING in str(err.value)
    monkeypatch.setattr(
        preflight, "run_probe", lambda p, s, e: ProbeResult(ok=False, reason="no such backend")
    )
    assert get_runner("lightx2v").preflight(spec) == "no such backend"  # one backend: a skip, as before


@pytest.mark.slow
def test_a_diffusers_that_cannot_be_imported_fails_the_run(tmp_path):
    """The diffusers probe in an interpreter whose diffusers package does not import: the same one
    line (exit 3) for every backend asked, not a skip per backend."""
    from harness.runners.diffusers.probe import probe_in_subprocess

    shadow = tmp_path / "site"
    (shadow / "diffusers").mkdir(parents=True)
    (shadow / "diffusers" / "__init__.py").write_text(f"import {MISSING}\n")
    with pytest.raises(FrameworkUnavailable) as err:
        probe_in_subprocess([("native", {}), ("sdpa_fp16", {})], device="cpu", dtype="float32",
                            env={"PYTHONPATH": str(shadow)})  # fmt: skip
    line = str(err.value)
    assert line.startswith("diffusers cannot be imported by ") and MISSING in line and "\n" not in line

"""Fixtures of the LightX2V runner's tests (helpers in lightx2v_site.py); the real LightX2V's
checkout, tiny checkpoint and CPU campaign are made once per session and shared by its test modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lightx2v_site import make_site

import harness.runners.lightx2v.preflight as preflight
from harness.runners.lightx2v.preflight import ProbeResult

TINY = Path(__file__).resolve().parents[2] / "scenarios" / "minimax_h3_tiny.yaml"


@pytest.fixture
def site(tmp_path):
    """A fake LightX2V checkout and model folder, laid out as the shipped scenario expects."""
    return make_site(tmp_path)


@pytest.fixture
def probe_ok(monkeypatch):
    """The GPU-side probe answers yes (no GPU here); lists the (arm, PYTHONPATH) it was asked for."""
    seen = []

    def fake(params, spec, env):
        seen.append((spec.arm, env["PYTHONPATH"]))
        return ProbeResult(ok=True, facts={"arch": "gfx1201", "gpus": 2})

    monkeypatch.setattr(preflight, "run_probe", fake)
    return seen


@pytest.fixture(scope="session")
def lightx2v_root() -> Path:
    root = os.environ.get("LIGHTX2V_ROOT")
    if not root:
        pytest.skip("LIGHTX2V_ROOT is not set (make lightx2v extracts the pinned LightX2V and sets it)")
    path = Path(root)
    assert (path / "lightx2v" / "infer.py").is_file(), f"LIGHTX2V_ROOT={root}: no lightx2v/infer.py"
    return path


@pytest.fixture(scope="session")
def tiny_checkpoint(lightx2v_root, tmp_path_factory) -> Path:
    from harness.runners.lightx2v.checkpoint import create_checkpoint

    out = tmp_path_factory.mktemp("h3") / "minimax_h3_tiny"
    create_checkpoint(out, lightx2v_root, preset="tiny", seed=0)
    return out


@pytest.fixture(scope="session")
def cpu_campaign(lightx2v_root, tiny_checkpoint, tmp_path_factory):
    """scenarios/minimax_h3_tiny.yaml, profile cpu, as shipped (every arm), run and reported once."""
    from harness.campaign import execute, lock_campaign, plan_campaign

    out = tmp_path_factory.mktemp("campaign")
    env = {"LIGHTX2V_ROOT": str(lightx2v_root), "H3_TINY_MODEL": str(tiny_checkpoint)}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        plan = plan_campaign(TINY, profile="cpu", out_root=out)
        outcome = execute(plan, lock=lock_campaign(plan.campaign))
    return outcome

"""Fixtures of the LightX2V runner's tests (helpers in lightx2v_site.py); the real LightX2V's
checkout, tiny checkpoint and CPU campaign are made once per session and shared by its test modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lightx2v_site import TINY, make_site, tiny_with_plugin

import harness.runners.lightx2v.preflight as preflight
from harness.runners.lightx2v.preflight import ProbeResult


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
    """Written once per test session, whatever the xdist workers: its writer imports LightX2V (a
    quarter of a CPU minute), so the second worker to ask waits on the lock and reads it."""
    from filelock import FileLock

    from harness.runners.lightx2v.checkpoint import create_checkpoint
    from harness.runners.lightx2v.rank_env import read_marker

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's folder, above each worker's own
    out = shared / "h3_shared" / "minimax_h3_tiny"
    out.parent.mkdir(exist_ok=True)
    with FileLock(str(out.parent / "write.lock")):
        if read_marker(out) is None:
            create_checkpoint(out, lightx2v_root, preset="tiny", seed=0)
    return out


@pytest.fixture(scope="session")
def cpu_campaign(lightx2v_root, tiny_checkpoint, tmp_path_factory):
    """scenarios/minimax_h3_tiny.yaml, profile cpu, every arm as shipped plus ``fp16_sdpa``, a
    plugin backend's arm (lightx2v_site.tiny_with_plugin), run and reported once: each real
    LightX2V arm costs a CPU minute, so the plugin's test shares the reference and the probe."""
    from harness.attention.registry import BACKENDS
    from harness.campaign import execute, lock_campaign, plan_campaign
    from harness.scenario.plugins import unload_all

    out = tmp_path_factory.mktemp("campaign")
    scenario, _ = tiny_with_plugin(out)
    env = {
        "LIGHTX2V_ROOT": str(lightx2v_root),
        "H3_TINY_MODEL": str(tiny_checkpoint),
        "SCENARIO_DIR": str(TINY.parent),
    }
    unload_all()  # planning imports the plugin here: the worker's registries are left as found
    before = set(BACKENDS.names())
    try:
        with pytest.MonkeyPatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            plan = plan_campaign(scenario, profile="cpu", out_root=out)
            outcome = execute(plan, lock=lock_campaign(plan.campaign))
    finally:
        unload_all()
    assert set(BACKENDS.names()) == before
    return outcome

"""Fixtures of the LightX2V runner's tests (helpers in lightx2v_site.py)."""

from __future__ import annotations

import pytest
from lightx2v_site import make_site

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

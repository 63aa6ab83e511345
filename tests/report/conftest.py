"""Fixtures for the report tests: small real campaigns (built once per session) and the browser."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from browser import find_chromium
from campaign_factory import ArmSpec, make_campaign, standard_arms

from harness.report import ReportPaths, build_report
from harness.store import CampaignDir

XSS = "<script>alert(1)</script>"


@dataclass
class Built:
    campaign: CampaignDir
    paths: ReportPaths
    progress: list[str] = field(default_factory=list)


@pytest.fixture
def campaign_factory(tmp_path: Path) -> Callable[..., CampaignDir]:
    def make(arms: list[ArmSpec] | None = None, **kw) -> CampaignDir:
        return make_campaign(tmp_path, arms if arms is not None else standard_arms(), **kw)

    return make


@pytest.fixture(scope="session")
def single_report(tmp_path_factory) -> Built:
    """Reference, noise floor, close and far candidates, a failed arm whose reason and log carry
    a script tag, a skipped arm; one seed. Built once and shared (tests only read it)."""
    camp = make_campaign(tmp_path_factory.mktemp("single"), standard_arms(XSS))
    msgs: list[str] = []
    return Built(camp, build_report(camp, progress=msgs.append), msgs)


@pytest.fixture(scope="session")
def multi_report(tmp_path_factory) -> Built:
    """Two seeds, per-step latents (npy and pt) in every run."""
    arms = [
        ArmSpec("torch_sdpa", role="reference", latents="npz"),
        ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=1.0, latents="npz"),
        ArmSpec("cand", noise=6.0, steps=[1.0, 0.6, 0.4], latents="npz"),
    ]
    camp = make_campaign(tmp_path_factory.mktemp("multi"), arms, seeds=(42, 43))
    return Built(camp, build_report(camp))


@pytest.fixture(scope="session")
def repeats_report(tmp_path_factory) -> Built:
    """Two seeds x three interleaved repeats, two noise-floor perturbations run once per seed, a
    candidate 25 % faster and one as fast as the reference; tolerance 2.5x in the scenario."""
    arms = [
        ArmSpec("torch_sdpa", role="reference", jitter=0.01),
        ArmSpec("nf_reversed", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=1.0, repeats=1),
        ArmSpec("nf_chunks", role="noise_floor", attn_type="torch_sdpa", kv_chunks=2, noise=1.2, repeats=1),
        ArmSpec("fast", noise=1.0, steps=[1.6, 0.75, 0.75], jitter=0.01),
        ArmSpec("same", noise=1.1, jitter=0.01),
    ]  # fmt: skip
    camp = make_campaign(
        tmp_path_factory.mktemp("repeats"), arms, seeds=(42, 43), repeats=3, verdict={"tolerance": 2.5}
    )
    return Built(camp, build_report(camp))


@pytest.fixture(scope="session")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("chromium is not installed (run .ci/install-browser.sh, or set HARNESS_CHROMIUM)")
    return path

"""The builtin runner scores the kernel, not the codec, by default: every run writes the lossless
twin and the pair metrics read it; `lossless: false` gives the mp4-only reading, named as such;
a campaign planned before the default changed runs again under it."""

from __future__ import annotations

import json

import pytest

from harness.campaign import execute, lock_campaign, plan_campaign
from harness.media import iter_frames, probe
from harness.plan import plan_actions
from harness.records import RunStatus

pytestmark = pytest.mark.slow

SCENARIO = """\
name: lossless
runner: builtin
builtin: {{preset: tiny, save_latents: false{block}}}
profiles: {{2step: {{infer_steps: 3}}}}
default_profile: 2step
arms:
  - {{name: torch_sdpa, attn_type: torch_sdpa, role: reference}}
  - {{name: floor, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor}}
"""


def run_campaign(root, block: str = ""):
    scenario = root / "lossless.yaml"
    scenario.write_text(SCENARIO.format(block=block))
    plan = plan_campaign(scenario, out_root=root / "out")
    outcome = execute(plan, lock=lock_campaign(plan.campaign))
    assert all(r.status == RunStatus.ok for r in outcome.records), [r.reason for r in outcome.records]
    camp = outcome.campaign.path
    return camp, json.loads((camp / "results.json").read_text())


def test_the_default_run_writes_the_lossless_twin_and_its_metrics_read_it(tmp_path):
    camp, results = run_campaign(tmp_path)
    for arm in ("torch_sdpa", "floor"):
        run = camp / "runs" / arm
        spec = json.loads((run / "run.json").read_text())["spec"]
        assert spec["params"]["lossless"] is True
        mp4 = probe(run / "output.mp4")
        twin = list(iter_frames(run / "output_lossless.mkv"))
        assert len(twin) == mp4.frames > 0 and twin[0].shape == (mp4.height, mp4.width, 3)
    assert results["pixel_source"].startswith("lossless copies (output_lossless.mkv")
    assert results["comparisons"] and all(c["options"]["lossless"] is True for c in results["comparisons"])
    assert results["codec_floor"]["method"] == "lossless"  # the mp4's own error against the twin

    # The mp4 reading stays one word away; the runs measured losslessly are not reused for it.
    (tmp_path / "lossless.yaml").write_text(SCENARIO.format(block=", lossless: false"))
    plan = plan_campaign(tmp_path / "lossless.yaml", out_root=tmp_path / "out")
    assert {(p.action, p.why) for p in plan_actions(plan.campaign, plan.specs)} == {("rerun", "spec changed")}


def test_lossless_false_writes_and_measures_the_mp4_only(tmp_path):
    camp, results = run_campaign(tmp_path, ", lossless: false")
    for arm in ("torch_sdpa", "floor"):
        run = camp / "runs" / arm
        assert "lossless" not in json.loads((run / "run.json").read_text())["spec"]["params"]
        assert (run / "output.mp4").is_file() and not (run / "output_lossless.mkv").exists()
    assert results["pixel_source"].startswith("output.mp4 as decoded")
    assert results["comparisons"] and all(c["options"]["lossless"] is False for c in results["comparisons"])
    assert results["codec_floor"]["method"] == "re-encode"

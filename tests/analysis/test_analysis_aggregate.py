"""harness.analysis.speed: spreads over seeds and runs."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis.speed import spread


def test_spread():
    s = spread([1.0, 3.0, None])
    assert (s.n, s.mean, s.min, s.max) == (2, 2.0, 1.0, 3.0)
    assert s.std == pytest.approx(np.std([1.0, 3.0], ddof=1))
    inf = spread([float("inf"), 40.0])
    assert inf.mean == float("inf") and inf.std is None and inf.min == 40.0
    assert spread([None]).n == 0


def test_layer_timing_is_aggregated_over_runs_and_rendered_extrapolated():
    from harness.analysis.model import ReportResults
    from harness.analysis.speed import arm_aggregates
    from harness.compare.summary import RunSummary
    from harness.report.tables import speed_section
    from harness.scenario.verdict import VerdictRules
    from harness.store import LayerTiming

    def run(key, arm, repeat, layer_s, role="candidate"):
        timing = None
        if layer_s is not None:
            timing = LayerTiming(layers=2, seq_len=120_016, steps=[2, 3], step_s=2 * layer_s + 0.1,
                                 layer_s=layer_s, outside_layers_s=0.1, released_layers=50,
                                 released_step_s=0.1 + 50 * layer_s)  # fmt: skip
        return RunSummary(key=key, path=key, arm=arm, seed=42, repeat=repeat, role=role, status="ok",
                          s_per_step=2 * (layer_s or 1.0) + 0.1, layers=timing)  # fmt: skip

    runs = [run("ref", "ref", 1, 0.9, "reference"), run("ref~r2", "ref", 2, 1.1, "reference"),
            run("cand", "cand", 1, None), run("cand~r2", "cand", 2, None)]  # fmt: skip
    arms = arm_aggregates(runs, [], "ref", VerdictRules())
    ref, cand = arms
    assert ref.layers_timed == 2 and ref.layer_seq_len == 120_016 and ref.released_layers == 50
    assert ref.metrics["layer_s"].n == 2 and ref.metrics["layer_s"].mean == pytest.approx(1.0)
    assert ref.metrics["released_step_s"].mean == pytest.approx(50.1)
    assert cand.layers_timed is None and "layer_s" not in cand.metrics
    res = ReportResults(campaign_id="c", campaign_path=".", scenario_name="s", runner="lightx2v",
                        reference_arm="ref", runs=runs, arms=arms)  # fmt: skip
    table = speed_section(res).tables[-1]
    assert "Per DiT layer" in table.title and len(table.rows) == 1
    row = table.rows[0].cells if hasattr(table.rows[0], "cells") else table.rows[0]
    text = " | ".join(str(c) for c in row)
    assert "120,016" in text and "50.100" in text and text.rstrip().endswith("~"), text


REPORT_AND_SAY_IF_TORCH = (
    "import sys\nfrom harness.cli import main\ntry:\n    main(sys.argv[1:])\n"
    "finally:\n    print('torch imported:', 'torch' in sys.modules, file=sys.stderr)\n"
)


@pytest.mark.parametrize("recorded", [True, False], ids=["run.json says", "older run.json"])
def test_an_emulator_is_named_from_run_json_and_a_report_then_needs_no_torch(tmp_path, recorded):
    """run.json records that a backend is a numerics model (the executor asks the registry): the
    report labels its timing from there without importing the backends (torch, about 0.6 GB of
    memory); a run.json from before that field asks the registry, as the report always did."""
    import json
    import subprocess
    import sys

    from campaign_factory import ArmSpec, make_campaign

    camp = make_campaign(tmp_path, [
        ArmSpec("torch_sdpa", role="reference"),
        ArmSpec("torch_sdpa_kv_reversed", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=3.0),
        ArmSpec("sage_emul_thuml", noise=2.0),
    ])  # fmt: skip
    for run_json in camp.path.glob("runs/*/run.json"):
        rec = json.loads(run_json.read_text())
        assert rec["emulated"] is (rec["spec"]["attn_type"] == "sage_emul_thuml")
        if not recorded:
            del rec["emulated"]
            run_json.write_text(json.dumps(rec))
    res = subprocess.run([sys.executable, "-c", REPORT_AND_SAY_IF_TORCH, "report", str(camp.path)],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert f"torch imported: {not recorded}" in res.stderr
    results = json.loads((camp.path / "results.json").read_text())
    labels = {a["arm"]: a["timing_label"] for a in results["arms"]}
    assert labels["sage_emul_thuml"] == "an emulator's timing"
    assert labels["torch_sdpa"] == ""

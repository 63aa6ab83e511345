"""harness.compare.gates: loading a gate file and the violations of a comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from campaign_factory import ArmSpec, write_run

from harness.compare.gates import Gate, check_gate, load_gate
from harness.compare.metrics import ACCURACY_METRICS
from harness.compare.pairwise import compare_runs
from harness.errors import HarnessError


def test_load_gate_yaml_json_and_errors(tmp_path: Path):
    y = tmp_path / "g.yaml"
    y.write_text("min_psnr: 30\nbitwise_video: true\nmax_step_ratio: 1.1\n")
    g = load_gate(y)
    assert g.min_psnr == 30 and g.bitwise_video and g.max_step_ratio == 1.1
    j = tmp_path / "g.json"
    j.write_text(json.dumps({"min_audio_cosine": 0.99}))
    assert load_gate(j).min_audio_cosine == 0.99
    bad = tmp_path / "bad.yaml"
    bad.write_text("min_psnr: 30\nmin_psnrr: 31\n")
    with pytest.raises(HarnessError, match=r"bad\.yaml.*unknown gate key 'min_psnrr'"):
        load_gate(bad)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("min_psnr: high\n")
    with pytest.raises(HarnessError, match=r"wrong\.yaml.*'min_psnr'"):
        load_gate(wrong)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(HarnessError, match="no thresholds"):
        load_gate(empty)
    with pytest.raises(HarnessError, match="not found"):
        load_gate(tmp_path / "missing.yaml")
    notmap = tmp_path / "list.yaml"
    notmap.write_text("- 1\n- 2\n")
    with pytest.raises(HarnessError, match="mapping"):
        load_gate(notmap)


def test_check_gate_violations(tmp_path: Path, ref_run):
    other = write_run(
        tmp_path / "a" / "sage", ArmSpec("sage", noise=3.0, steps=[1.0, 1.5, 1.5], fallbacks=2), salt=3
    )
    cmp = compare_runs(ref_run, other)
    psnr = cmp.video.psnr_pooled
    assert check_gate(cmp, Gate(min_psnr=psnr - 1, min_ssim=0.5)) == []
    v = check_gate(
        cmp,
        Gate(
            min_psnr=psnr + 1,
            bitwise_video=True,
            max_step_ratio=1.1,
            require_valid_attention=True,
            max_fallbacks=0,
        ),
    )
    joined = "\n".join(v)
    assert len(v) == 5, v
    assert "min_psnr" in joined and f"{psnr:.2f} dB" in joined
    assert "bitwise: decoded video frames differ" in joined
    assert "max_step_ratio: s/step ratio B/A 1.364 > 1.100" in joined
    assert "attention in run B (sage) not valid" in joined and "fell back" in joined
    assert "max_fallbacks" in joined


def test_check_gate_on_failed_run_names_the_reason(tmp_path: Path, ref_run):
    bad = write_run(tmp_path / "a" / "broken", ArmSpec("broken", status="failed", reason="exit code 3"))
    v = check_gate(compare_runs(ref_run, bad), Gate(min_psnr=30))
    assert any("status is failed: exit code 3" in x for x in v)
    assert any(x.startswith("min_psnr: video PSNR (pooled) unavailable") for x in v)


def test_identical_runs_pass_a_bitwise_gate(tmp_path: Path, ref_run):
    again = write_run(
        tmp_path / "b" / "torch_sdpa", ArmSpec("torch_sdpa", role="reference"), copy_output_from=ref_run
    )
    g = Gate(bitwise_video=True, bitwise_audio=True, require_valid_attention=True, min_psnr=100)
    assert check_gate(compare_runs(ref_run, again), g) == []


def test_every_accuracy_metric_has_a_gate_key():
    lower_bounds = {name for name in Gate.model_fields if name.startswith("min_")}
    assert {m.gate for m in ACCURACY_METRICS} == lower_bounds

"""harness.compare.gates: loading a gate file and the violations of a comparison."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from campaign_factory import ArmSpec, write_run

from harness.compare.gates import Gate, check_gate, gate_schema, load_gate
from harness.compare.pairwise import compare_runs
from harness.errors import HarnessError
from harness.metrics.metric import accuracy_metrics
from harness.store import sha256_file


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
    assert "max_step_ratio: s/step ratio B/A 1.364 > 1.1" in joined
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
    assert {m.gate for m in accuracy_metrics()} == lower_bounds


@pytest.mark.parametrize(
    "text, msg",
    [
        ("min_psnr: .nan\n", "g.yaml:1: gate key 'min_psnr': Input should be a finite number"),
        ("min_psnr: .inf\n", "finite number"),
        ("min_psnr: -.inf\n", "finite number"),
        ("min_psnr: true\n", "g.yaml:1: gate key 'min_psnr': Input should be a valid number (got True)"),
        ("min_psnr: '30'\n", "valid number (got '30')"),
        ("max_fallbacks: 1.5\n", "gate key 'max_fallbacks': Input should be a valid integer"),
        ("max_fallbacks: -1\n", "greater than or equal to 0"),
        ("max_step_ratio: 0\n", "greater than 0"),
        ("min_ssim: 1.5\n", "less than or equal to 1"),
        ("bitwise_video: 'true'\n", "valid boolean"),
        ("min_psnr: 30\nmin_psnr: 40\n", "g.yaml:2: duplicate key 'min_psnr' (first given on line 1)"),
        (
            "require_ok: true\nmin_psnrr: 3\n",
            "g.yaml:2: unknown gate key 'min_psnrr'; did you mean 'min_psnr'?",
        ),
    ],
)
def test_gate_values_that_are_not_finite_numbers_are_refused(tmp_path: Path, text, msg):
    p = tmp_path / "g.yaml"
    p.write_text(text)
    with pytest.raises(HarnessError) as info:
        load_gate(p)
    assert info.value.exit_code == 2
    assert msg in str(info.value) and str(info.value).startswith(str(p))


def test_json_gate_nan_and_duplicates_are_refused(tmp_path: Path):
    p = tmp_path / "g.json"
    p.write_text('{"min_psnr": NaN}')
    with pytest.raises(HarnessError, match="finite number"):
        load_gate(p)
    p.write_text('{"min_psnr": 30, "min_psnr": 40}')
    with pytest.raises(HarnessError, match="duplicate key 'min_psnr'"):
        load_gate(p)


def test_example_gate_and_schema_agree():
    root = Path(__file__).resolve().parents[2]
    example = load_gate(root / "scenarios" / "gates" / "candidate.yaml")
    assert example.min_psnr is not None and example.require_valid_attention
    schema = gate_schema()
    assert set(schema["properties"]) == set(Gate.model_fields)
    assert schema["additionalProperties"] is False
    assert all(p.get("description") for p in schema["properties"].values())
    res = subprocess.run([sys.executable, "-m", "harness.cli", "scenarios", "schema", "--gate"],
                         capture_output=True, text=True, cwd=root)  # fmt: skip
    assert res.returncode == 0 and json.loads(res.stdout) == json.loads(json.dumps(schema))


def _compare(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", "compare", *map(str, args)],
                          capture_output=True, text=True)  # fmt: skip


def test_compare_exit_codes_and_gate_in_json(tmp_path: Path, ref_run):
    close = write_run(tmp_path / "b" / "close", ArmSpec("close", noise=1.0), salt=1)
    cmp = compare_runs(ref_run, close)
    ok_gate, bad_gate = tmp_path / "ok.yaml", tmp_path / "bad.yaml"
    ok_gate.write_text(f"min_psnr: {cmp.video.psnr_pooled - 1:.2f}\n")
    bad_gate.write_text(f"min_psnr: {cmp.video.psnr_pooled + 1:.2f}\n")

    res = _compare(ref_run.path, close.path, "--gate", ok_gate, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["gate"] == {"file": str(ok_gate), "passed": True, "violations": []}

    res = _compare(ref_run.path, close.path, "--gate", bad_gate, "--format", "json")
    assert res.returncode == 1, res.stderr
    gate = json.loads(res.stdout)["gate"]
    assert gate["passed"] is False and gate["violations"][0].startswith("min_psnr: video PSNR (pooled)")
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("gate: ")] == [
        f"gate: {v}" for v in gate["violations"]
    ]
    assert json.loads(_compare(ref_run.path, close.path, "--format", "json").stdout)["gate"] is None

    nan_gate = tmp_path / "nan.yaml"
    nan_gate.write_text("min_psnr: .nan\n")
    res = _compare(ref_run.path, close.path, "--gate", nan_gate)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        f"error: {nan_gate}:1: gate key 'min_psnr': Input should be a finite number (got nan)"
    ]


@pytest.mark.parametrize(
    "arm, damage",
    [
        (ArmSpec("skipped", status="skipped", reason="backend x unavailable here"), None),
        (ArmSpec("failed", status="failed", reason="exit code 3"), None),
        (ArmSpec("no_output", write_output=False), None),
        (ArmSpec("zero_bytes"), "zero"),
    ],
    ids=lambda v: getattr(v, "name", None),
)
def test_compare_exits_3_when_b_cannot_be_measured(tmp_path: Path, ref_run, arm, damage):
    b = write_run(tmp_path / "b" / arm.name, arm)
    if damage == "zero":
        b.output.write_bytes(b"")
    gate = tmp_path / "g.yaml"
    gate.write_text("min_psnr: 10\n")
    for extra in ((), ("--gate", gate)):
        res = _compare(ref_run.path, b.path, *extra)
        assert res.returncode == 3, res.stderr
        assert "error: not measured: run B" in res.stderr and "Traceback" not in res.stderr


def test_compare_exits_2_for_corrupt_media(tmp_path: Path, ref_run):
    b = write_run(tmp_path / "b" / "corrupt", ArmSpec("corrupt", noise=1.0), salt=2)
    b.output.write_bytes(b.output.read_bytes()[:2000])
    rec = b.record()  # the run wrote a corrupt file (recorded so): bad media, not a changed record
    rec.outputs["output.mp4"] = sha256_file(b.output)
    b.write(rec)
    res = _compare(ref_run.path, b.path)
    assert res.returncode == 2
    assert str(b.output) in res.stderr and "Traceback" not in res.stderr

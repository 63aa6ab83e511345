"""harness.compare.summary: a run's account is built once, from run.json's spec or (no readable
run.json) the campaign's arm line, with the attention choice whole."""

from __future__ import annotations

from harness.compare.summary import summarize_run
from harness.records import Role, RunRecord, RunSpec, RunStatus
from harness.store import ArmStatus, RunDir, write_record


def _spec() -> RunSpec:
    return RunSpec(
        scenario="s", runner="builtin", arm="nf", seed=3, attn_type="torch_sdpa", kv_reversed=True,
        kv_chunks=2, attn_options={"sdpa_backend": "math"}, role=Role.noise_floor, repeat=2,
    )  # fmt: skip


def test_a_run_json_gives_its_spec_and_choice(tmp_path):
    run = RunDir(tmp_path / "nf~r2")
    run.path.mkdir()
    spec = _spec()
    rec = RunRecord(
        spec=spec, spec_hash=spec.spec_hash(), status=RunStatus.failed, reason="boom", valid=False
    )
    write_record(run.run_json, rec)
    s = summarize_run(run)
    assert (s.key, s.arm, s.seed, s.repeat, s.role) == ("nf~r2", "nf", 3, 2, "noise_floor")
    assert (
        s.choice() == spec.choice() and s.perturbation == "K/V reversed, K/V in 2 chunks, sdpa_backend=math"
    )
    assert (s.status, s.reason, s.valid) == ("failed", "boom", False)


def test_a_run_without_run_json_is_told_by_its_arm_line(tmp_path):
    run = RunDir(tmp_path / "nf")
    status = ArmStatus.of(RunRecord(spec=_spec(), spec_hash="h", status=RunStatus.interrupted, valid=True))
    s = summarize_run(run, status)
    assert (s.key, s.arm, s.seed, s.repeat, s.role) == (status.key, "nf", 3, 2, "noise_floor")
    assert (s.attn_type, s.kv_reversed, s.kv_chunks, s.attn_options) == ("torch_sdpa", True, 1, {})
    assert (s.status, s.reason, s.valid) == ("interrupted", "no run.json was written", True)

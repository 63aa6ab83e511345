"""The overhead tool: launcher against bare runs through the executor, stated with the significance
module's words."""

from __future__ import annotations

import json

import pytest
from lightx2v_site import stub_scenario

from harness.bench.overhead import OverheadResult, OverheadRun, measure_overhead, summarize
from harness.records import RunRecord, RunStatus


@pytest.mark.slow
def test_every_overhead_run_is_a_run_of_the_executor(tmp_path, probe_ok):
    """Two ABBA pairs on the stand-in LightX2V: each run has its folder, run.json and logs."""
    scenario = tmp_path / "stub.yaml"
    scenario.write_text(stub_scenario(tmp_path, nproc=1))
    result = measure_overhead(scenario, profile="3step", arm="ref", repeats=2, out_root=tmp_path / "out")
    root = tmp_path / "out" / "stub" / "overhead" / "3step" / "ref"
    assert [(r.repeat, r.mode) for r in result.runs] == [
        (0, "launcher"),
        (0, "bare"),
        (1, "bare"),
        (1, "launcher"),
    ]
    for run in result.runs:
        folder = root / f"{run.repeat:02d}-{run.mode}"
        assert run.run_dir == str(folder)
        rec = RunRecord.model_validate_json((folder / "run.json").read_text())
        assert rec.status == RunStatus.ok and rec.exit_code == 0 and rec.pid is not None
        assert (folder / "stderr.log").is_file() and (folder / "config.json").is_file()
        assert ("--bare" in rec.command) is (run.mode == "bare")
        if run.mode == "bare":  # nothing was counted, and the record says so
            assert rec.valid is False and not (folder / "attn_calls.json").exists()
            assert rec.reason == "invalid: no attn_calls.json: attention calls were not counted"
        else:
            assert rec.valid is True and (folder / "rank0.log").is_file()
        # The stand-in logs DiT steps of 1.1, 1.2 and 1.3 s: s/step over steps 2..3.
        assert run.s_per_step == pytest.approx(1.25) and run.step_seconds == pytest.approx([1.1, 1.2, 1.3])
    # identical timings on every run: no interval, no claim (never "no meaningful difference (CI 1-1)")
    assert result.speed.word == "zero spread" and result.ratio == pytest.approx(1.0)
    assert "speed-up 1.00x: zero spread" in result.verdict and "no claim" in result.verdict
    # 9 in-scope calls on rank 0 (3 steps x two blocks and the refiner) over the 4 DiT steps the
    # plan counts for a model that is not MiniMax-H3 (the stand-in runs infer_steps - 1).
    assert result.calls_per_step == 9 // 4
    saved = json.loads((root / "overhead.json").read_text())
    assert saved["schema"] == "harness.lightx2v_overhead/1" and saved["verdict"] == result.verdict
    assert (root / "overhead.md").read_text() == result.markdown()
    assert "| launcher | 1.25000 ± 0.00000 | 2 | 1.25000, 1.25000 |" in result.markdown()


def test_the_overhead_verdict_needs_significance():

    def result(launcher, bare):
        runs = [
            OverheadRun(mode="launcher", repeat=i, s_per_step=v, exit_code=0, run_dir="")
            for i, v in enumerate(launcher)
        ]
        runs += [
            OverheadRun(mode="bare", repeat=i, s_per_step=v, exit_code=0, run_dir="")
            for i, v in enumerate(bare)
        ]
        r = OverheadResult(
            scenario="s", profile="p", arm="a", attn_type="torch_sdpa", nproc=1, repeats=len(bare)
        )
        r.runs = runs
        return summarize(r)

    same = result([0.0510, 0.0512, 0.0509, 0.0511], [0.0511, 0.0509, 0.0512, 0.0510])
    assert same.speed.word == "no meaningful difference" and same.p_value == same.speed.p > 0.05
    assert same.verdict.startswith(
        "DiT s/step, bare -> launcher: 0.051 ± 0.000 s (n=4) -> 0.051 ± 0.000 s (n=4)"
    )
    assert same.verdict.endswith(
        "n=4/4 runs): no meaningful difference (p=1.00, minimum effect 1%); launcher / bare = 1.0000 (+0.00%)"
    )
    slower = result([0.0600, 0.0601, 0.0602, 0.0600], [0.0500, 0.0501, 0.0499, 0.0500])
    assert slower.speed.word == "slower" and slower.p_value < 0.05
    assert ": speed-up 0.832x (95 % CI 0.830 to 0.835; n=4/4 runs): slower (p=3.9e-12" in slower.verdict
    assert slower.verdict.endswith("; launcher / bare = 1.2015 (+20.15%)")
    assert slower.verdict == f"{slower.speed.line}; launcher / bare = 1.2015 (+20.15%)"
    one = result([0.06], [0.05])
    assert one.p_value is None
    assert "too few runs for an interval (n=1/1 runs; 2 a side needed)" in one.verdict
    assert "| launcher | 0.06000 ± 0.00000 | 1 | 0.06000 |" in one.markdown()
    lone = result([0.06, 0.07], [])
    assert lone.verdict == "not measured: a mode has no timed run (see the runs' logs)"
    assert "| launcher | 0.06500 ± 0.00707 | 2 | 0.06000, 0.07000 |" in lone.markdown()
    assert "| bare | n/a | 0 |  |" in lone.markdown()

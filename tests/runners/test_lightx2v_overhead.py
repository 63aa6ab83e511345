"""The overhead tool: launcher against bare runs, stated with the significance module's words."""

from __future__ import annotations

from harness.runners.lightx2v.overhead import OverheadResult, OverheadRun, summarize


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
    assert same.speed.outcome == "no_difference" and same.p_value == same.speed.p_value > 0.05
    assert same.verdict.startswith(
        "DiT s/step, bare -> launcher: 0.051 ± 0.000 s (n=4) -> 0.051 ± 0.000 s (n=4)"
    )
    assert same.verdict.endswith(
        ": no significant difference (n=4/4 runs, p=1.00, alpha 0.05); launcher / bare = 1.0000 (+0.00%)"
    )
    slower = result([0.0600, 0.0601, 0.0602, 0.0600], [0.0500, 0.0501, 0.0499, 0.0500])
    assert slower.speed.outcome == "slower" and slower.p_value < 0.05
    assert slower.verdict.endswith(
        ": 1.20x slower (n=4/4 runs, p=6.9e-12, alpha 0.05); launcher / bare = 1.2015 (+20.15%)"
    )
    assert slower.verdict == f"{slower.speed.line()}; launcher / bare = 1.2015 (+20.15%)"
    one = result([0.06], [0.05])
    assert one.p_value is None
    assert "too few samples for a test (n=1/1 runs; 2 a side needed)" in one.verdict
    assert "| launcher | 0.06000 ± 0.00000 | 1 | 0.06000 |" in one.markdown()
    lone = result([0.06, 0.07], [])
    assert lone.verdict == "not measured: a mode has no timed run (see the runs' logs)"
    assert "| launcher | 0.06500 ± 0.00707 | 2 | 0.06000, 0.07000 |" in lone.markdown()
    assert "| bare | n/a | 0 |  |" in lone.markdown()

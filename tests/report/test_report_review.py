"""The review at the top of the page (report.cells), the speed figures for github-action-benchmark
(report.pr) and the CI job summary (report.github_summary, `harness report --github-summary`)."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from cli_testutil import harness
from records_testutil import CPU, ONE_SEED, edited, example, verdict, voiced

from harness.analysis.model import SpeedTest
from harness.analysis.sentences import floor_points, readings, speed_terms, verdict_terms
from harness.compare.significance import compare_samples
from harness.report.github_summary import SUMMARY_LIMIT, github_summary, run_url, summary_target
from harness.report.pr import BenchmarkEntry, benchmark_entries, render_pr, write_benchmark
from harness.store import write_record

CUSTOM_FORMAT_KEYS = {"name", "unit", "value", "range", "extra"}  # github-action-benchmark's custom tools
NOT_ALL = "NOT all attention calls were served by the requested op: 3 fell back to torch_sdpa"


@pytest.fixture(scope="module")
def res():
    """One seed, one run, one floor run (a committed H200 campaign): two candidates, inconclusive."""
    return example(ONE_SEED)


def invalid(res):
    """``res`` with sage_attn2_1_0_6's attention invalid (calls fell back), whatever its error, worded
    again as the analysis words it."""
    return voiced(edited(res, "sage_attn2_1_0_6", word="invalid", attention_ok=False, attention=NOT_ALL)[0])


def test_every_candidate_has_its_word(res):
    words = {r.arm: r.word for r in readings(invalid(res))}
    # one seed and one floor run cannot show the statistics within 5 %: inconclusive
    assert words == {"sage_attn2": "inconclusive", "sage_attn2_1_0_6": "invalid"}
    bad = next(r for r in readings(invalid(res)) if r.arm == "sage_attn2_1_0_6")
    assert bad.attention == NOT_ALL  # an invalid attention is said; a valid one is not
    v = verdict(res, "sage_attn2")
    [r] = [r for r in readings(res) if r.arm == "sage_attn2"]
    judged = next(c for c in v.energy if c.metric == v.ratio_metric)  # the ratio the verdict rests on
    assert r.ratio.value == v.ratio == judged.ratio and r.ratio.ci is None and v.ratio_ci is None
    assert r.ratio_what == f"{judged.label} / the floor's" == "audio mel spectral error / the floor's"
    step = res.arm("sage_attn2").speed["s_per_step"]
    assert r.step.value == step.speedup and r.step.word == "too few runs"  # one run a side
    assert r.attention == "" and r.baseline  # the scenario's accepted baseline
    # an arm that did not run reads "not run", with its run's status and reason; a shadowed copy of
    # the reference is no candidate
    cpu = {r.arm: r for r in readings(example(CPU))}
    assert {a: r.word for a, r in cpu.items()} == {
        "sage_emul_aiter": "outside",
        "sage_emul_thuml": "outside",
        "sage_attn2": "not run",
        "aiter_sage_attn": "not run",
        "sage_emul_thuml_hybrid": "outside",
    }
    assert cpu["sage_attn2"].text.startswith("skipped: backend sage_attn2 unavailable here")
    assert cpu["sage_attn2"].step.word == "no timing" and cpu["sage_attn2"].insitu is None


def test_the_headline_is_the_reading_that_decides(res):
    """Where the in-situ reading decides (``decided_by``), in any regime, the badge and the figure give
    its ratio; else the error energy the verdict names, even where an in-situ reading exists."""
    from harness.analysis.verdict import InsituReading

    v = verdict(res, "sage_attn2_1_0_6").model_copy(deep=True)
    v.insitu = InsituReading(word="outside", ratio=3.0, ratio_ci=[2.5, 3.6], text="in situ outside")
    v.decided_by, v.ratio, v.ratio_ci, v.ratio_metric = "insitu", 3.0, [2.5, 3.6], "insitu"
    _, ratio, what = verdict_terms(v)
    assert (ratio.value, ratio.ci, what) == (3.0, (2.5, 3.6), "in-situ error / the exact floor's")
    e2e = verdict(res, "sage_attn2_1_0_6")
    v = v.model_copy(update={k: getattr(e2e, k) for k in ("decided_by", "ratio", "ratio_ci", "ratio_metric")})
    assert verdict_terms(v)[1].value == e2e.ratio  # the end-to-end reading decides: its ratio


def test_the_speed_up_interval_covers_the_ratio_of_means():
    rng = [1.00, 1.02, 0.98, 1.01, 0.99, 1.00]
    t = compare_samples(rng, [x / 1.25 for x in rng], what="DiT s/step")
    terms = speed_terms(t)
    assert terms.value == pytest.approx(1.25) and terms.word == "faster"
    lo, hi = terms.ci
    assert lo < 1.25 < hi and hi / lo < 1.05  # six runs a side, 1 % spread: a narrow interval
    # the delta method on the log ratio: half-width t(0.975, df) * sqrt(cv_a^2/n_a + cv_b^2/n_b)
    cv = statistics.stdev(rng) / statistics.fmean(rng)
    assert math.log(hi / lo) / 2 == pytest.approx(2.2281 * math.sqrt(2 * cv * cv / 6), rel=1e-3)  # df = 10
    assert speed_terms(SpeedTest()).word == "no timing"
    same = speed_terms(compare_samples([1.0, 1.0], [1.0, 1.0]))
    assert same.ci is None and same.word == "zero spread"  # identical timings claim nothing


def test_the_floor_runs_sit_at_their_own_ratio(res):
    [pt] = floor_points(res)
    assert pt.arm == "torch_sdpa_kv_reversed" and pt.metric == "video_mse"
    assert pt.ratio == pytest.approx(1.0)  # the only floor run is the floor


def test_benchmark_export_is_github_action_benchmarks_custom_format(res, tmp_path):
    write_benchmark(res, tmp_path / "benchmark.json")
    data = json.loads((tmp_path / "benchmark.json").read_text())
    assert isinstance(data, list) and data
    for entry in data:
        assert set(entry) <= CUSTOM_FORMAT_KEYS and {"name", "unit", "value"} <= set(entry)
        assert isinstance(entry["value"], float) and isinstance(entry["name"], str)
    names = [e["name"] for e in data]
    assert len(names) == len(set(names))
    step = {e["name"]: e for e in data}["sage_attn2: DiT s/step"]
    assert (
        step["value"] == pytest.approx(res.arm("sage_attn2").metrics["s_per_step"].mean)
        and step["unit"] == "s"
    )
    assert "range" not in step  # one run: no spread to give
    skipped = {e.name for e in benchmark_entries(example(CPU))}  # sage_attn2 skipped there: no timing
    assert "sage_attn2: DiT s/step" not in skipped and "sage_emul_thuml: DiT s/step" in skipped


def test_benchmark_range_is_the_runs_spread():
    res = example(CPU)  # two seeds x two repeats
    entries = {e.name: e for e in benchmark_entries(res)}
    arm = res.arm("sage_emul_thuml").metrics["s_per_step"]
    e = entries["sage_emul_thuml: DiT s/step"]
    assert arm.n == 4 and e.value == pytest.approx(arm.mean) and e.range == f"± {arm.std:.6g}"
    assert "not a timing baseline" in entries["torch_sdpa_kv_reversed: DiT s/step"].extra
    assert "not a timing baseline" not in entries["torch_sdpa: DiT s/step"].extra
    assert BenchmarkEntry.model_validate(e.model_dump()) == e


def test_the_summary_opens_with_the_verdicts_and_inlines_no_image(res):
    res = invalid(res)
    text = github_summary(res, pr_text=render_pr(res), files=["index.html"])
    lines = text.splitlines()
    assert lines[0] == "## minimax_h3_tiny / gpu_prod: attention A/B"
    table = lines.index(next(ln for ln in lines if ln.startswith("| candidate | verdict |")))
    ratio = verdict(res, "sage_attn2").ratio
    assert table <= 4 and lines[table + 2].startswith(
        f"| sage_attn2 (accepted baseline) | 🟡 **inconclusive** | {ratio:.2f}x the floor's"
    ), lines[table + 2]
    assert "| sage_attn2_1_0_6 | ⛔ **invalid** |" in text
    assert "| sage_attn2 | ⚪ **not run** |" in github_summary(example(CPU))
    assert "data:" not in text and "![" not in text and "`index.html`" in text and "in the artifact" in text
    assert "<details><summary>pr.md" in text and len(text.encode()) < SUMMARY_LIMIT


def test_the_summary_of_a_big_campaign_stays_under_githubs_limit(res):
    many = res.model_copy(deep=True)
    v = verdict(invalid(res), "sage_attn2_1_0_6")
    many.verdicts = [v.model_copy(update={"arm": f"cand_{i:05d}_" + "x" * 200}) for i in range(6000)]
    many = voiced(many)
    text = github_summary(many, pr_text="| a | b |\n" * 200_000, files=["index.html"] * 10)
    size = len(text.encode())
    assert 0.9 * SUMMARY_LIMIT < size <= SUMMARY_LIMIT
    assert text.startswith("## minimax_h3_tiny / gpu_prod") and "more candidate(s) left out" in text
    assert "Left out to stay under" in text and "pr.md tables" in text
    small = github_summary(many, budget=20_000)
    assert len(small.encode()) <= 20_000 and "| cand_00000_" in small


def test_where_the_summary_goes(tmp_path):
    step = str(tmp_path / "step.md")
    assert summary_target(None, {}, tmp_path) == (None, False)
    assert summary_target(None, {"GITHUB_STEP_SUMMARY": step}, tmp_path) == (tmp_path / "step.md", True)
    assert summary_target(True, {}, tmp_path) == (tmp_path / "github-summary.md", False)
    assert summary_target(False, {"GITHUB_STEP_SUMMARY": step}, tmp_path) == (None, False)
    env = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "7"}
    assert run_url(env) == "https://github.com/o/r/actions/runs/7" and run_url({}) is None


def test_harness_report_appends_the_summary_to_the_steps_file(res, tmp_path):
    """`harness report --from-results` of a committed results.json, one of its runs edited to have
    failed (exit 3): the job summary is written regardless, where the flag and the variable say."""
    camp = tmp_path / "campaign"
    camp.mkdir()
    failed = res.model_copy(deep=True)
    run = next(r for r in failed.runs if r.arm == "sage_attn2_1_0_6")
    run.status, run.reason = "failed", "exit code 1"
    write_record(camp / "results.json", voiced(failed))  # as the analysis writes such a campaign
    step = tmp_path / "step_summary.md"
    step.write_text("earlier step output\n")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("GITHUB_")}
    env |= {"GITHUB_STEP_SUMMARY": str(step), "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "7"}  # fmt: skip
    out = harness("report", "--from-results", camp / "results.json", "--github-summary", env=env)
    assert out.returncode == 3, out.stderr  # the failed run; the summary is written regardless
    assert f"job summary: {step} (appended)" in out.stdout
    text = step.read_text()
    assert text.startswith("earlier step output\n\n## minimax_h3_tiny / gpu_prod: attention A/B")
    assert "sage_attn2_1_0_6: ended failed, not ok: not measured" in text
    assert "[the run's page](https://github.com/o/r/actions/runs/7)" in text
    env.pop("GITHUB_STEP_SUMMARY")
    out = harness("report", "--from-results", camp / "results.json", "--github-summary", env=env)
    written = camp / "github-summary.md"
    assert f"job summary: {written}" in out.stdout and written.read_text().startswith("## minimax_h3_tiny")
    written.unlink()
    out = harness("report", "--from-results", camp / "results.json", env=env)  # no flag, no variable: none
    assert "job summary" not in out.stdout and not written.exists()

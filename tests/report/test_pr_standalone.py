"""pr.md stands alone in a pull request: where and with what it was made (device, torch, harness and
commit, each plugin's sha256, the design), a word per modality and per reading, the codec caveat, no
file a reviewer lacks, no empty table, a speed line without a finding where no interval was had, and
the statistics only where they differ. Built from the committed results.json, edited in memory."""

from __future__ import annotations

import re

from records_testutil import CPU, H200, ONE_SEED, example, verdict, voiced

from harness.analysis.model import ReportResults, read_results
from harness.analysis.pr_facts import pr_lines
from harness.envinfo import harness_git, with_analysis_commit
from harness.number_format import fmt_speedup
from harness.records import PluginRef
from harness.report.pr import STATS_COLUMNS, render_pr

EXAMPLES = CPU.parents[2]
LOSSLESS = "lossless copies (output_lossless.mkv: FFV1): before compression"


def pr_of(res: ReportResults) -> tuple[ReportResults, str]:
    """``res`` worded again as the analysis words it (its pr.md lines stored), and its pr.md."""
    res = voiced(res)
    res.pr = pr_lines(res)
    return res, render_pr(res)


def bullets(pr: str, arm: str) -> list[str]:
    """The sub-bullets under ``arm``'s verdict line."""
    lines = pr.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("- ") and f"**{arm}" in ln)
    out = []
    for ln in lines[start + 1 :]:
        if not ln.startswith("  - "):
            break
        out.append(ln[4:])
    return out


def test_provenance_names_device_torch_harness_commit_plugins_and_design():
    res = example(H200)
    res.runs[0].plugins = [PluginRef(ref="k.py", path="/x/my_kernel.py", sha256="ab12" * 16)]
    res, pr = pr_of(res)
    env = dict(res.env_summary)
    incomplete, provenance = pr.split("\n\n")[1:3]
    assert incomplete.startswith("**INCOMPLETE: ")  # said first, the provenance next
    head = provenance.splitlines()
    assert head[0] == f"- device: {env['gpu']}; torch {env['torch']}"
    git = res.env["harness_git"]
    assert head[1] == f"- harness {res.harness_version}, commit {git['sha'][:12]} (dirty)" and git["dirty"]
    assert head[2] == f"- plugins: my_kernel.py sha256 {'ab12' * 3}"
    floors = len(res.noise_floor_arms)
    assert head[3] == (
        f"- design: {len(res.seeds)} seed(s) ({', '.join(map(str, res.seeds))}) x {floors} floor run(s) "
        f"x {res.repeats} repeat(s), scored on lossless"
    )
    assert res.pixel_source.startswith("lossless") and not res.pr.codec and "codec" not in pr
    # a CPU campaign says so; one whose run recorded no commit says whose commit it shows, or none
    res, pr = pr_of(example(CPU))
    assert f"- device: CPU {dict(res.env_summary)['cpu']}; torch " in pr and "- plugins: none" in pr
    res.env.pop("cpu")  # a partial fingerprint (an ingest's has none): no device is made up
    assert "- device: not recorded; torch " in render_pr(res)
    res.env["harness_git"] = "not a record"  # read from the world: no commit rather than a traceback
    assert "commit not recorded (not run from a git checkout)" in render_pr(res)
    res.env.pop("harness_git")
    assert "commit not recorded (not run from a git checkout)" in render_pr(res)
    res.env["analysis_harness_git"] = {"sha": "f" * 40, "dirty": False}
    assert f"commit {'f' * 12} (recorded at analysis, not by the run)" in render_pr(res)


def test_the_analysis_records_its_commit_where_the_run_recorded_none():
    assert with_analysis_commit({"harness_git": {"sha": "a", "dirty": False}}) == {
        "harness_git": {"sha": "a", "dirty": False}
    }
    assert with_analysis_commit({}) == {"analysis_harness_git": harness_git()}


def test_a_word_per_modality_and_reading_the_audio_not_hidden_by_the_video():
    res, pr = pr_of(example(CPU))
    v = verdict(res, "sage_emul_aiter")
    audio = next(e for e in v.energy if e.metric == "audio_error")
    video = next(e for e in v.energy if e.metric == "video_mse")
    assert v.word == "outside" and video.word == audio.word == "outside"
    lines = bullets(pr, "sage_emul_aiter")
    # one line per modality, each with its own word and reading: the video's never stands for both
    assert lines[0].startswith("video: outside: ") and lines[1].startswith("audio: outside: ")
    assert "video MSE" in lines[0] and "audio error energy), tolerance 2x" in lines[1]
    assert lines[2].startswith(f"in situ: {v.insitu.word}: ")
    base = res.rules.accepted_baseline
    assert lines[3].startswith(
        f"against the accepted baseline {base}, end to end (video MSE): {v.baseline.word}: "
    )
    assert lines[4].startswith(f"against the accepted baseline {base}, in situ: outside: ")
    assert res.pr.readings["sage_emul_aiter"] == lines  # stored by the analysis, printed as they are
    # an arm that did not run, or whose output is the reference's, has no readings to word
    assert bullets(pr, "sage_attn2") == [] and res.pr.readings["sage_attn2"] == []


def test_the_codec_caveat_is_one_line_where_the_mp4_was_scored():
    res, pr = pr_of(example(ONE_SEED))
    assert not res.pixel_source.startswith("lossless")
    assert res.pr.codec.startswith("scored on output.mp4 (H.264/AAC)") and pr.count(res.pr.codec) == 1
    assert "scored on H.264/AAC (output.mp4)" in pr  # the design says which file too
    res.pixel_source = LOSSLESS
    res, pr = pr_of(res)
    assert res.pr.codec == "" and "H.264" not in pr and "scored on lossless" in pr


def test_no_file_a_reviewer_lacks_and_no_empty_table():
    for path in (CPU, H200, ONE_SEED):
        _, pr = pr_of(example(path))
        assert "section 5" not in pr and "of report.md" not in pr
        assert "side by side in the CI artifacts' report.md and index.html" in pr
    # ingested files without timing: no speed table, no lead-in to it, one line instead
    res = example(ONE_SEED)
    for a in res.arms:
        a.metrics.pop("s_per_step", None)
    _, pr = pr_of(res)
    assert "No speed table: no run measured here recorded its timing." in pr
    assert "| attention |" not in pr and "| attn_type |" not in pr and "speed tests" not in pr
    # nothing measured: no accuracy table either
    _, pr = pr_of(example(EXAMPLES / "h200" / "minimax_h3_tiny" / "gpu_prod_sa2_insitu" / "results.json"))
    assert "No accuracy table: no output was compared with torch_sdpa's." in pr
    assert not re.search(r"^\|[^\n]*\|\n\|---[^\n]*\n(?!\|)", pr, re.M)  # no header without rows


def test_one_run_a_side_is_a_speed_line_not_a_finding():
    res, pr = pr_of(example(ONE_SEED))
    for arm in ("sage_attn2", "sage_attn2_1_0_6"):
        step, total = (res.arm(arm).speed[k] for k in ("s_per_step", "pipeline_total_s"))
        assert step.n_ref == step.n_arm == 1 and step.speedup_ci is None
        line = (
            f"- {arm}: DiT s/step {fmt_speedup(step.speedup)}, pipeline total {fmt_speedup(total.speedup)} "
            "on one run a side: no interval"
        )
        assert line in pr and res.pr.speed[arm] == line.split(": ", 1)[1]
    assert "too few runs for an interval" not in pr
    # two runs against one: no interval either, and what it needs
    res, pr = pr_of(example(H200))
    step = res.arm("sage_attn2_hybrid").speed["s_per_step"]
    assert f"DiT s/step {fmt_speedup(step.speedup)}" in res.pr.speed["sage_attn2_hybrid"]
    assert res.pr.speed["sage_attn2_hybrid"].endswith("on 2 and 1 runs: no interval (2 a side needed)")
    assert "sage_attn2" not in res.pr.speed  # a test with an interval keeps its words


def test_the_statistics_table_keeps_what_differs_from_the_seeds_reference():
    for path in (ONE_SEED, H200):
        res, pr = pr_of(example(path))
        lines = pr.splitlines()
        start = next(i for i, ln in enumerate(lines) if ln.startswith("| run |"))
        shown = [c.strip() for c in lines[start].strip("|").split("|")][1:]
        every = [h for h, _, _ in STATS_COLUMNS]
        agree = [h for h in every if h not in shown]
        assert shown and agree and f"{', '.join(agree)}: every run's equals its seed's reference run's" in pr
        end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
        cells = {ln.split(" | ")[0][2:]: ln for ln in lines[start + 2 : end]}
        ref = {r.seed: cells[r.key] for r in res.primary_runs if r.arm == res.reference_arm}
        assert set(ref) == set(res.seeds)  # each seed's reference run is the row the others differ from
        for key, row in cells.items():
            seed = res.run(key).seed
            assert row == ref[seed] or row.split(" | ")[1:] != ref[seed].split(" | ")[1:], row
        runs = [r for r in res.primary_runs if r.stats is not None]
        assert len(cells) < len(runs) if path == H200 else len(cells) == len(runs)  # runs alike left out


def test_the_analysis_stores_the_pr_lines(single_report):
    res = read_results(single_report.paths.results_json)
    assert set(res.pr.readings) == {r.arm for r in res.review}
    assert any(res.pr.readings.values()) and res.pr == pr_lines(res)
    # the campaign's fingerprint has no harness commit: the analysing harness's (this checkout's), said so
    assert "harness_git" not in res.env and res.env["analysis_harness_git"]["sha"] == harness_git()["sha"]
    sha = res.env["analysis_harness_git"]["sha"][:12]
    assert f"commit {sha}" in single_report.paths.pr_md.read_text()
    assert "(recorded at analysis, not by the run)" in single_report.paths.pr_md.read_text()
    assert dict(res.env_summary)["analysis_harness_git"].startswith(sha)

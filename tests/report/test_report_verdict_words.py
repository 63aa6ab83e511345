"""The verdict's words as every output gives them: "identical" first and alone (its colour, mark and
CSS class, no ratio), the in-situ reading beside the end-to-end one in every regime (the badge, the
summary lines, pr.md and the job summary carry both, each with its word; the headline is the one
that decides) and the warnings. Each case is a verdict of a committed results.json (one seed, one floor
run) edited in memory."""

from __future__ import annotations

import pytest
from markupsafe import escape
from records_testutil import ONE_SEED, badge_of, example, line_of, rendered, verdict, voiced

from harness.analysis.sentences import readings
from harness.analysis.verdict import InsituReading, SeedVerdict
from harness.report.figures import speed_accuracy_inputs
from harness.report.plots import WORD_COLOURS

HOSTILE = "<script>alert(2)</script> | a pipe"
ARM = "sage_attn2_1_0_6"  # one seed, one floor run, video in the pixel regime: inconclusive


@pytest.fixture(scope="module")
def base():
    return example(ONE_SEED)


def edited(base, **fields):
    """``base`` with sage_attn2_1_0_6's verdict changed by ``fields``."""
    res = base.model_copy(deep=True)
    v = verdict(res, ARM)
    for k, x in fields.items():
        setattr(v, k, x)
    return res, v


def test_an_identical_verdict_is_its_own_word_everywhere_without_a_ratio(base):
    text = "identical (1 of 1 seed(s)): output bitwise equal to the reference's"
    res, v = edited(base, word="identical", text=text, summary=f"{text}; attention valid", decided_by="identical",
                    end_to_end_word="identical", identical_seeds=[42], ratio=None, ratio_ci=None, ratio_metric="",
                    energy=[], stats=[], per_seed=[SeedVerdict(seed=42, identical=True, word="identical")])  # fmt: skip
    out = rendered(res)
    said = "identical on 1 of 1 seed(s): output bitwise equal to the reference's"
    # report.md: the summary line leads with the word, no ratio; the verdicts table and its legend
    line = line_of(out["md"], "- sage_attn2_1_0_6: ")
    assert line.startswith(f"- sage_attn2_1_0_6: {said}; DiT s/step"), line
    assert "the floor's" not in line and "no error ratio" not in line
    assert (
        "| sage_attn2_1_0_6 | identical | no error: output bitwise the reference's on 1 of 1 seed(s)"
        in out["md"]
    )
    assert "Identical: the output is bitwise equal to the reference's on every seed" in out["md"]
    # pr.md: its mark and its word
    assert f"- 🔵 **sage_attn2_1_0_6**: {said}" in out["pr"]
    # the page: its own CSS class and colour, the seeds instead of a ratio, the legend
    badge = badge_of(out["html"], "sage_attn2_1_0_6")
    assert 'class="badge identical"' in badge and 'data-word="identical"' in badge
    assert said in badge and "the floor's" not in badge and "no error ratio" not in badge
    assert ".badge.identical .word { background: #1565c0; }" in out["html"]
    assert '<span class="badge-word identical">identical</span> bitwise equal' in out["html"]
    # the job summary: mark, word, no ratio; the marks explained
    row = line_of(out["job"], "| sage_attn2_1_0_6 |")
    assert row.startswith(f"| sage_attn2_1_0_6 | 🔵 **identical** | {said} |"), row
    assert (
        "🔵 identical: bitwise equal to the reference's output on every seed; an approximate kernel"
        in out["job"]
    )
    # the figure: its colour, drawn on the bottom edge (no error), not left out
    assert WORD_COLOURS["identical"] == "#1565c0"
    points = speed_accuracy_inputs(voiced(res))[0]
    assert next(p for p in points if p[0] == "sage_attn2_1_0_6")[1:4:2] == ("identical", (0.0, None, None))


def test_an_in_situ_reading_outside_beside_a_pixel_verdict_shows_both_readings(base):
    """A pixel-regime candidate whose in-situ reading is outside: the verdict is outside, decided in situ;
    the badge and the summary give both readings, each with its word, the one that decides first."""
    close = verdict(base, ARM)
    assert {sv.regime["video"] for sv in close.per_seed} == {"pixel"}
    insitu = InsituReading(word="outside", ratio=3.2, ratio_ci=[2.5, 4.1], text="in-situ error 3.2x: outside")
    res, v = edited(base, word="outside", insitu=insitu, end_to_end_word=close.word, decided_by="insitu", ratio=3.2,
                    ratio_ci=[2.5, 4.1], ratio_metric="insitu")  # fmt: skip
    [r] = [r for r in readings(res) if r.arm == "sage_attn2_1_0_6"]
    assert (r.word, r.ratio.value, r.ratio.ci) == (
        "outside",
        3.2,
        (2.5, 4.1),
    )  # the headline: in situ decides
    assert (
        r.end_to_end.word == close.word and r.end_to_end.value == close.ratio and r.insitu.word == "outside"
    )
    out = rendered(res)
    in_situ = "in situ: outside 3.20x the exact floor's (95 % CI 2.50 to 4.10)"
    end_to_end = f"end to end: {close.word} {close.ratio:.2f}x the floor's"
    badge = badge_of(out["html"], "sage_attn2_1_0_6")
    assert 'data-word="outside"' in badge and 'class="badge outside"' in badge
    assert badge.index(in_situ) < badge.index(end_to_end)
    line = line_of(out["md"], "- sage_attn2_1_0_6: ")
    assert line.startswith("- sage_attn2_1_0_6: outside in situ: 3.20x the exact floor's (2.50 to 4.10); "
                           f"end to end {close.word} {close.ratio:.2f}x; DiT s/step"), line  # fmt: skip
    assert len(line) <= 202, len(line)
    assert "- 🔴 **sage_attn2_1_0_6**: outside in situ: 3.20x the exact floor's (2.50 to 4.10)" in out["pr"]
    row = line_of(out["job"], "| sage_attn2_1_0_6 |")
    assert row.startswith(f"| sage_attn2_1_0_6 | 🔴 **outside** | {in_situ}; {end_to_end}"), row
    # the end to end decides where the in-situ reading is within: it comes first, and both are shown
    res, v = edited(
        base, insitu=InsituReading(word="within", ratio=0.9, ratio_ci=[0.7, 1.2]), end_to_end_word=close.word
    )
    badge = badge_of(rendered(res)["html"], "sage_attn2_1_0_6")
    assert f'data-word="{close.word}"' in badge
    assert badge.index(end_to_end) < badge.index(
        "in situ: within 0.90x the exact floor's (95 % CI 0.70 to 1.20)"
    )


def test_a_warning_reaches_the_summary_the_badge_and_pr_md(base):
    warning = (
        f"sage_attn2_1_0_6: its output is bitwise the reference's: its kernel may not have run {HOSTILE}"
    )
    close = verdict(base, ARM)
    res, v = edited(base, warnings=[warning], text=f"{close.text}; WARNING: {warning}")
    out = rendered(res)
    line = line_of(out["md"], "- sage_attn2_1_0_6: ")
    assert line.endswith("; 1 WARNING(s) below"), line
    assert line_of(out["md"], "- WARNING: sage_attn2_1_0_6: ").endswith(
        "WARNING: sage_attn2_1_0_6: its output is bitwise the reference's: its kernel may not have run "
        "&lt;script>alert(2)&lt;/script> | a pipe"
    )
    assert "its kernel may not have run &lt;script>alert(2)&lt;/script> | a pipe" in line_of(
        out["pr"], "- **WARNING**: sage_attn2_1_0_6: "
    )
    assert "**WARNING**: sage_attn2_1_0_6: its output" in out["pr"]
    badge = badge_of(out["html"], "sage_attn2_1_0_6")
    assert '<div class="line warn">WARNING: sage_attn2_1_0_6: its output is bitwise' in badge
    assert str(escape(HOSTILE)) in out["html"] and "<script>alert(2)" not in out["html"]
    row = line_of(out["job"], "| sage_attn2_1_0_6 |")
    assert "**WARNING**: sage_attn2_1_0_6: its output is bitwise the reference's" in row
    assert "a pipe" in row and " | a pipe" not in row  # the cell stays one cell
    job_line = line_of(out["job"], "- WARNING: sage_attn2_1_0_6: ")
    assert "WARNING: sage_attn2_1_0_6: its output is bitwise" in job_line
    assert line_of("\n".join(voiced(res).summary.lines), "WARNING: sage_attn2_1_0_6: ").endswith(warning)

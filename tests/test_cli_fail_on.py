"""`harness report --fail-on WORD[,WORD]`: the report is written as always, then exit 1 with one
line per candidate whose verdict is a word named (its word and the summary's line of it, as
results.json stores it), 0 when none is; an unknown word is one line, exit 2, before anything is
read; a report that is not whole still exits 3, its failing arms named too."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_testutil import harness, the_error_line

from harness.analysis.model import read_results
from harness.errors import Exit
from harness.rule import INCOMPLETE, INCONCLUSIVE, INVALID, OUTSIDE, WORDS

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))
from campaign_factory import ArmSpec, make_campaign, near_and_far_arms  # noqa: E402


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    """Reference, its floor, a candidate near it (inconclusive) and one far off (outside)."""
    return make_campaign(tmp_path_factory.mktemp("fail_on"), near_and_far_arms()).path


def fail_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("fail-on ")]


def expected(results: Path, words: set[str]) -> list[str]:
    """The line each candidate with one of ``words`` gets, from the results.json the report wrote."""
    return [f"fail-on {r.word}: {r.line}" for r in read_results(results).review if r.word in words]


def test_an_outside_arm_fails_the_report_with_its_line(campaign):
    res = harness("report", campaign, "--fail-on", OUTSIDE)
    assert res.returncode == Exit.GATE_FAILED, res.stderr
    assert (campaign / "report.md").is_file() and (campaign / "pr.md").is_file()  # written first
    review = {r.arm: r for r in read_results(campaign / "results.json").review}
    assert review["far"].word == OUTSIDE and review["near"].word != OUTSIDE
    lines = fail_lines(res.stderr)
    assert lines == expected(campaign / "results.json", {OUTSIDE}) and len(lines) == 1
    assert lines[0].startswith("fail-on outside: far: outside") and review["far"].line in lines[0]
    assert res.stderr.strip() == lines[0]  # nothing else on stderr


def test_words_comma_separated_or_repeated_and_from_results(campaign, tmp_path):
    res = harness("report", campaign, "--fail-on", f"{OUTSIDE}, {INCONCLUSIVE}")
    assert res.returncode == Exit.GATE_FAILED, res.stderr
    both = expected(campaign / "results.json", {OUTSIDE, INCONCLUSIVE})
    assert fail_lines(res.stderr) == both and len(both) == 2
    res = harness("report", "--from-results", campaign / "results.json", "--out", tmp_path / "pages",
                  "--fail-on", OUTSIDE, "--fail-on", INCONCLUSIVE)  # fmt: skip
    assert res.returncode == Exit.GATE_FAILED, res.stderr
    assert fail_lines(res.stderr) == both and (tmp_path / "pages" / "report.md").is_file()


def test_a_word_no_arm_has_passes(campaign):
    words = {INCOMPLETE, INVALID}
    res = harness("report", campaign, "--fail-on", ",".join(sorted(words)))
    assert res.returncode == Exit.OK, res.stderr
    assert not words & {r.word for r in read_results(campaign / "results.json").review}  # none has them
    assert fail_lines(res.stderr) == [] and res.stderr == ""


@pytest.mark.parametrize("given, named", [("outside,bogus", "'bogus'"), ("", "''"), ("Outside", "'Outside'")])
def test_an_unknown_word_is_one_line_and_nothing_is_written(tmp_path, given, named):
    camp = make_campaign(tmp_path, [ArmSpec("torch_sdpa", role="reference")], env={}).path
    res = harness("report", camp, "--fail-on", given)
    assert res.returncode == Exit.BAD_INPUT
    line = the_error_line(res)
    assert line.startswith(f"error: --fail-on: {named} is not a verdict word (known: ")
    assert all(w in line for w in WORDS)
    assert not (camp / "report.md").exists() and not (camp / "results.json").exists()


def test_a_report_that_is_not_whole_exits_3_and_still_names_its_failing_arms(tmp_path):
    arms = [*near_and_far_arms(), ArmSpec("broken", status="failed", reason="exit code 1")]
    camp = make_campaign(tmp_path, arms).path
    res = harness("report", camp, "--fail-on", OUTSIDE)
    assert res.returncode == Exit.RUN_FAILED, res.stderr  # 3 before 1
    assert fail_lines(res.stderr) == expected(camp / "results.json", {OUTSIDE}) != []
    assert "error: broken: ended failed, not ok" in res.stderr

"""The summary a reviewer reads at a glance (``report.summary``): one line per candidate of at most
200 characters, emulators marked, no exponent in a ratio, ranges written "a to b", the intervals'
confidence said once; on a campaign with identical, emulator and multi-seed arms, on the committed
CPU example and on hostile names."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from campaign_factory import ArmSpec, make_campaign, write_run
from hypothesis import given
from hypothesis import strategies as st

from harness.analysis.model import read_results
from harness.records import run_key
from harness.report import build_report
from harness.report.summary import LINE, fit, summary_lines

EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "examples" / "cpu" / "e2e_3step" / "results.json"
EXPONENT = re.compile(r"\d[eE][+-]?\d")
BRACKET_RANGE = re.compile(r"\[\s*[\d.]+x?,\s*[\d.]+x?\s*\]|\d-\d")  # '[4.76x, 28.7x]' or '3.69-6.33'


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Two seeds: the reference, its K/V-reversed floor, an arm whose output is the reference's byte for
    byte, an emulator far off, a candidate close to the floor."""
    arms = [
        ArmSpec("torch_sdpa", role="reference"),
        ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=1.0),
        ArmSpec("same", attn_type="torch_sdpa"),
        ArmSpec("emul", attn_type="sage_emul_aiter", noise=9.0, steps=[2.0, 1.5, 1.5]),
        ArmSpec("close", attn_type="torch_sdpa", noise=1.1, steps=[1.6, 0.8, 0.8]),
    ]
    camp = make_campaign(tmp_path_factory.mktemp("mixed"), arms, seeds=(42, 43))
    for seed in (42, 43):  # a deterministic pipeline's output, for the arm that changed nothing
        ref = camp.run(run_key("torch_sdpa", seed, 1))
        write_run(
            camp.run(run_key("same", seed, 1)).path, arms[2], seed=seed, multi_seed=True, copy_output_from=ref
        )
    build_report(camp)
    return camp


def readable(lines: list[str]) -> None:
    for line in lines:
        assert len(line) <= LINE, f"{len(line)} characters: {line}"
        assert not EXPONENT.search(line), line
        assert not BRACKET_RANGE.search(line), line
        assert "97.5 % CI" not in line and "95 % CI" not in line, line  # said once, in the last line


def test_each_kind_of_arm_reads_at_a_glance(mixed):
    mixed = summary_lines(read_results(mixed.path / "results.json"))
    readable(mixed)
    by_arm = {line.split(":")[0].split(" (")[0]: line for line in mixed[1:]}
    assert by_arm["same"].startswith("same: identical on 2 of 2 seed(s)")
    assert "x the floor's" not in by_arm["same"]  # identical has no ratio
    assert by_arm["emul"].startswith("emul (emulator): outside: ")
    assert "no speed-up: an emulator's timing is no kernel's" in by_arm["emul"]
    assert "speed-up" in by_arm["close"] and "(emulator)" not in by_arm["close"]
    assert re.search(r"the floor's \([\d.]+ to [\d.]+; video ", by_arm["emul"]), by_arm["emul"]
    assert mixed[-1].startswith("intervals: ") and "%" in mixed[-1]
    assert sum(line.startswith(("same", "emul", "close")) for line in mixed) == 3  # one line per candidate


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="the CPU example's results.json is not committed")
def test_the_cpu_example_reads_at_a_glance():
    lines = summary_lines(read_results(EXAMPLE))
    readable(lines)
    emulators = [line for line in lines if line.startswith("sage_emul_")]
    assert emulators and all(" (emulator): " in line for line in emulators)


@given(st.text(min_size=0, max_size=600))
def test_fit_keeps_a_line_within_its_width(text):
    got = fit(text)
    assert len(got) <= LINE
    assert got == text or got.endswith(" ...")


def test_an_emulator_is_marked_and_shows_no_speed_up_on_the_page_and_in_pr_md(mixed):
    page = (mixed.path / "index.html").read_text()
    badge = re.search(r'<div class="badge [^"]*" data-arm="emul".*?\n</div>', page, re.S).group(0)
    assert '<span class="tag">emulator</span>' in badge and "speed-up" not in badge.replace("no speed-up", "")
    close = re.search(r'<div class="badge [^"]*" data-arm="close".*?\n</div>', page, re.S).group(0)
    assert "emulator" not in close and "DiT s/step speed-up" in close
    # the figure draws it where its time puts it, and says that time is no kernel's
    assert "an [emulator]'s x is its PyTorch model's time, not a kernel's" in html.unescape(page)
    pr = (mixed.path / "pr.md").read_text()
    assert "**emul (emulator)**: outside: " in pr
    assert re.search(r"\| emul \| .* \(an emulator's timing\) \|", pr), pr

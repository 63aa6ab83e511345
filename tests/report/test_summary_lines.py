"""The summary a reviewer reads at a glance (``report.summary``): one line per candidate of at most
200 characters, emulators marked, no exponent in a ratio, ranges written "a to b", the intervals'
confidence said once; on a campaign with identical, emulator and multi-seed arms, on the committed
CPU example and on hostile names."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from campaign_factory import ArmSpec, make_campaign, write_run
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from harness.analysis.model import read_results
from harness.emulator_provenance import Fidelity, KernelRef, Provenance
from harness.records import run_key
from harness.report import build_report
from harness.report.github_summary import github_summary
from harness.report.html import render_html
from harness.report.pr import render_pr
from harness.report.review import NO_SPEED, emulator_badge, review_view
from harness.report.summary import LINE, fit, summary_lines, summary_section

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


# An emulator's provenance, as its backend's params carry it into attn_calls.json and results.json.
MEASURED = Provenance(
    variant="sageattn2_triton",
    kernel=KernelRef(package="thu-ml SageAttention2", function="sageattn_qk_int8_pv_fp16_triton",
                     version="2.2.0 at d1a57a5", short="SageAttention2 d1a57a5 Triton", backend="sage_attn2"),
    fidelity=Fidelity(measured=True, machine="one NVIDIA H200", machine_short="H200", date="2026-12-03",
                      software="torch 2.11, triton 3.6", agreement="rel L1 within 2 % of the kernel's"),
)  # fmt: skip
UNMEASURED = Provenance(
    variant="aiter_fav3_sage",
    kernel=KernelRef(package="ROCm aiter", function="fav3_sage_wrapper_func", version="e404860",
                     short="aiter fav3_sage"),
    fidelity=Fidelity(measured=False, unmeasured="never run beside it"),
)  # fmt: skip
HOSTILE = "\x1b[2J<script>alert(1)</script> [c](javascript:alert(1))\u202e\n# Injected"


def with_provenance(tmp_path: Path, provenance: dict[str, Provenance | dict]):
    """The committed CPU example read back with ``provenance`` in its arms' attention records (no
    campaign is run: the renderers read results.json alone)."""
    data = json.loads(EXAMPLE.read_text())
    for run in data["runs"]:
        if run["arm"] in provenance and run.get("attn"):
            p = provenance[run["arm"]]
            raw = p.model_dump(mode="json", by_alias=True) if isinstance(p, Provenance) else p
            run["attn"]["backend"] = {"name": run["arm"], "provenance": raw}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return read_results(path)


def arm_lines(lines: list[str]) -> dict[str, str]:
    return {line.split(" (")[0].split(":")[0]: line for line in lines[1:]}


def page_badge(res, arm: str) -> str:
    page = render_html(res, [summary_section(res)], review=review_view(res, None))
    return re.search(rf'<div class="badge [^"]*" data-arm="{arm}".*?\n</div>', page, re.S).group(0)


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="the CPU example's results.json is not committed")
def test_an_emulator_says_what_it_models_and_whether_that_was_measured(tmp_path):
    res = with_provenance(tmp_path, {"sage_emul_thuml": MEASURED, "sage_emul_aiter": UNMEASURED})
    assert (
        emulator_badge(res, "sage_emul_thuml")
        == "emulator of SageAttention2 d1a57a5 Triton, measured on H200"
    )
    assert emulator_badge(res, "sage_emul_aiter") == "emulator of aiter fav3_sage, not measured"
    assert emulator_badge(res, "sage_emul_thuml_hybrid") == "emulator"  # no provenance recorded
    assert emulator_badge(res, "sage_attn2") == ""  # a kernel
    lines = summary_lines(res)
    readable(lines)
    by_arm = arm_lines(lines)
    assert by_arm["sage_emul_thuml"].startswith(
        "sage_emul_thuml (emulator of SageAttention2 d1a57a5 Triton, measured on H200): outside: "
    )
    assert by_arm["sage_emul_aiter"].startswith(
        "sage_emul_aiter (emulator of aiter fav3_sage, not measured): "
    )
    assert by_arm["sage_emul_thuml_hybrid"].startswith("sage_emul_thuml_hybrid (emulator): outside: ")
    assert all(NO_SPEED in by_arm[a] for a in ("sage_emul_thuml", "sage_emul_aiter"))

    pr = render_pr(res)
    assert (
        "**sage_emul_thuml (emulator of SageAttention2 d1a57a5 Triton, measured on H200)**: outside: " in pr
    )
    assert "**sage_emul_aiter (emulator of aiter fav3_sage, not measured)**: outside: " in pr
    assert "**sage_emul_thuml_hybrid (emulator)**: outside: " in pr
    details = [
        line for line in pr.splitlines() if line.startswith("- sage_emul_") and ": emulator of " in line
    ]
    assert details == [  # one line per emulator with a provenance, under the accuracy table
        "- sage_emul_aiter: emulator of ROCm aiter e404860 fav3_sage_wrapper_func, not measured: never run "
        "beside it",
        "- sage_emul_thuml: emulator of thu-ml SageAttention2 2.2.0 at d1a57a5 sageattn_qk_int8_pv_fp16_triton, "
        "measured on one NVIDIA H200, 2026-12-03, torch 2.11, triton 3.6; rel L1 within 2 % of the kernel's",
    ]
    assert pr.index("| decoded output vs torch_sdpa |") < pr.index(details[0]) < pr.index("| run |")

    job = github_summary(res)
    assert (
        "| sage_emul_thuml (emulator of SageAttention2 d1a57a5 Triton, measured on H200) (accepted baseline) | "
        in job
    )
    assert "| sage_emul_aiter (emulator of aiter fav3_sage, not measured) | " in job
    assert "| sage_emul_thuml_hybrid (emulator) | " in job
    assert '<span class="tag">emulator of aiter fav3_sage, not measured</span>' in page_badge(
        res, "sage_emul_aiter"
    )
    assert '<span class="tag">emulator</span>' in page_badge(res, "sage_emul_thuml_hybrid")


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="the CPU example's results.json is not committed")
def test_an_emulator_with_its_settings_changed_is_not_measured(tmp_path):
    res = with_provenance(tmp_path, {"sage_emul_thuml": MEASURED.with_changes(["blkk"])})
    assert emulator_badge(res, "sage_emul_thuml") == (
        "emulator of SageAttention2 d1a57a5 Triton, not measured with blkk changed"
    )
    detail = next(line for line in render_pr(res).splitlines() if line.startswith("- sage_emul_thuml: "))
    assert detail.startswith(
        "- sage_emul_thuml: emulator of thu-ml SageAttention2 2.2.0 at d1a57a5 sageattn_qk_int8_pv_fp16_triton, "
        "not measured with blkk changed (the variant: measured on one NVIDIA H200"
    ), detail


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="the CPU example's results.json is not committed")
def test_a_provenance_that_does_not_validate_reads_as_a_bare_emulator(tmp_path):
    res = with_provenance(tmp_path, {"sage_emul_thuml": {"kernel": {"short": "x"}, "fidelity": "measured"}})
    assert emulator_badge(res, "sage_emul_thuml") == "emulator"
    assert "**sage_emul_thuml (emulator)**: " in render_pr(res)


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="the CPU example's results.json is not committed")
def test_a_hostile_provenance_reaches_no_output_raw(tmp_path):
    kernel = MEASURED.kernel.model_copy(update={"short": HOSTILE, "package": HOSTILE})
    fidelity = UNMEASURED.fidelity.model_copy(update={"unmeasured": HOSTILE})
    res = with_provenance(tmp_path, {"sage_emul_thuml": Provenance(kernel=kernel, fidelity=fidelity)})
    assert "\x1b" not in emulator_badge(res, "sage_emul_thuml") and "\n" not in emulator_badge(
        res, "sage_emul_thuml"
    )
    lines = summary_lines(res)
    readable(lines)
    pr, job = render_pr(res), github_summary(res)
    page = render_html(res, [summary_section(res)], review=review_view(res, None))
    for where, text in (("summary", "\n".join(lines)), ("pr.md", pr), ("job summary", job), ("page", page)):
        assert "\x1b" not in text and "\u202e" not in text, where
        assert "\n# Injected" not in text, where
    for where, text in (("pr.md", pr), ("job summary", job)):  # markdown: no HTML, no link
        assert "<script" not in text and "[c](javascript" not in text, where
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page_badge(res, "sage_emul_thuml")
    details = [line for line in pr.splitlines() if line.startswith("- sage_emul_thuml: emulator of ")]
    assert len(details) == 1 and "&lt;script" in details[0], details
    md = MarkdownIt("commonmark").enable("table")
    md.validateLink = lambda url: True
    for where, text in (("pr.md", pr), ("job summary", job)):  # read as markdown: text, nothing else
        todo, found = list(md.parse(text)), []
        while todo:
            t = todo.pop()
            found.append(t)
            todo += t.children or []
        assert not [t for t in found if t.type in ("link_open", "image", "html_inline", "html_block")], where
        assert not [t for t in found if t.type == "heading_open"][1:], where  # pr.md's own heading alone
    assert "[2J" in details[0]  # the text is kept, its escape character is not

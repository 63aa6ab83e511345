"""The summary a reviewer reads at a glance (``report.render.summary_section``): one line per candidate of at most
200 characters, emulators marked, no exponent in a ratio, ranges written "a to b", the intervals'
confidence said once; on the committed examples (an H200 campaign with a kernel, an emulator and an
arm edited to be identical; the CPU one with emulators) and on hostile names."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from records_testutil import CPU, H200, ONE_SEED, badge_of, edited, example, rendered, voiced

from harness.analysis.model import read_results
from harness.analysis.sentences import LINE, NO_SPEED, emulator_badge, fit
from harness.analysis.verdict_model import SeedVerdict
from harness.emulator_provenance import Fidelity, KernelRef, Provenance
from harness.report.cells import review_view
from harness.report.github_summary import github_summary
from harness.report.html import render_html
from harness.report.pr import render_pr
from harness.report.render import summary_section

EXAMPLE = CPU
EXPONENT = re.compile(r"\d[eE][+-]?\d")
BRACKET_RANGE = re.compile(r"\[\s*[\d.]+x?,\s*[\d.]+x?\s*\]|\d-\d")  # '[4.76x, 28.7x]' or '3.69-6.33'
IDENTICAL = "identical (2 of 2 seed(s)): output bitwise equal to the reference's"


@pytest.fixture(scope="module")
def mixed():
    """The committed H200 campaign (two seeds, repeats): a kernel slower than the reference (sage_attn2),
    an emulator (sage_emul_thuml), a skipped arm, and sage_attn2_hybrid edited to an output that is the
    reference's byte for byte on both seeds."""
    res, _ = edited(example(H200), "sage_attn2_hybrid", word="identical", text=IDENTICAL, decided_by="identical",
                    end_to_end_word="identical", identical_seeds=[42, 43], ratio=None, ratio_ci=None,
                    ratio_metric="", energy=[], stats=[], insitu=None,
                    per_seed=[SeedVerdict(seed=s, identical=True, word="identical") for s in (42, 43)])  # fmt: skip
    return res


def readable(lines: list[str]) -> None:
    for line in lines:
        assert len(line) <= LINE, f"{len(line)} characters: {line}"
        assert not EXPONENT.search(line), line
        assert not BRACKET_RANGE.search(line), line
        assert "97.5 % CI" not in line and "95 % CI" not in line, line  # said once, in the last line


def test_each_kind_of_arm_reads_at_a_glance(mixed):
    lines = summary_lines(mixed)
    readable(lines)
    by_arm = arm_lines(lines)
    assert by_arm["sage_attn2_hybrid"].startswith("sage_attn2_hybrid: identical on 2 of 2 seed(s)")
    assert "x the floor's" not in by_arm["sage_attn2_hybrid"]  # identical has no ratio
    assert by_arm["sage_emul_thuml"].startswith("sage_emul_thuml (emulator): outside in situ: ")
    assert "no speed-up: an emulator's timing is no kernel's" in by_arm["sage_emul_thuml"]
    kernel = by_arm["sage_attn2"]
    assert "DiT s/step speed-up 0.85x (0.823 to 0.880): slower" in kernel and "(emulator)" not in kernel
    assert re.search(r"the exact floor's \([\d.]+ to [\d.]+\); end to end ", by_arm["sage_emul_thuml"])
    assert by_arm["aiter_sage_attn"].startswith("aiter_sage_attn: not run (skipped: backend aiter_sage_attn")
    assert lines[-1].startswith("intervals: ") and "%" in lines[-1]
    for v in mixed.verdicts:  # one line per candidate
        assert sum(ln.startswith((f"{v.arm}: ", f"{v.arm} (")) for ln in lines) == 1, v.arm
    # the end-to-end interval of an emulator far outside (the CPU example), written "a to b" too
    cpu = arm_lines(summary_lines(example(CPU)))
    assert re.search(r"the floor's \([\d,.]+ to over ", cpu["sage_emul_thuml_hybrid"]), cpu[
        "sage_emul_thuml_hybrid"
    ]


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="the CPU example's results.json is not committed")
def test_the_cpu_example_reads_at_a_glance():
    lines = summary_lines(read_results(EXAMPLE))
    readable(lines)
    emulators = [line for name, line in arm_lines(lines).items() if name.startswith("sage_emul_")]
    assert emulators and all(" (emulator of " in line.split(": ")[0] for line in emulators)


@given(st.text(min_size=0, max_size=600))
def test_fit_keeps_a_line_within_its_width(text):
    got = fit(text)
    assert len(got) <= LINE
    assert got == text or got.endswith(" ...")


def test_an_emulator_is_marked_and_shows_no_speed_up_on_the_page_and_in_pr_md(mixed):
    out = rendered(mixed, figure="assets/speed_accuracy.png")
    badge = badge_of(out["html"], "sage_emul_thuml")
    assert '<span class="tag">emulator</span>' in badge and "speed-up" not in badge.replace("no speed-up", "")
    kernel = badge_of(out["html"], "sage_attn2")
    assert "emulator" not in kernel and "DiT s/step speed-up" in kernel
    # the figure draws it where its time puts it, and says that time is no kernel's
    assert "an [emulator]'s x is its PyTorch model's time, not a kernel's" in html.unescape(out["html"])
    assert "**sage_emul_thuml (emulator)**: outside in situ: " in out["pr"]
    assert re.search(r"\| sage_emul_thuml \| .* \(an emulator's timing\) \|", out["pr"]), out["pr"]
    # the same arm with its runs read as a kernel's: no mark, its speed-up given
    kernel_runs = mixed.model_copy(deep=True)
    for r in kernel_runs.runs:
        r.emulated = r.emulated and r.arm != "sage_emul_thuml"
    kernel_runs.arm("sage_emul_thuml").timing_label = ""
    out = rendered(kernel_runs, figure="assets/speed_accuracy.png")
    badge = badge_of(out["html"], "sage_emul_thuml")
    assert "emulator" not in badge and "DiT s/step speed-up 0.02x" in badge
    assert "an [emulator]'s x" not in html.unescape(out["html"])


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


def with_provenance(tmp_path: Path, provenance: dict[str, Provenance | dict | None]):
    """The committed CPU example read back with ``provenance`` in its arms' attention records (None:
    none recorded; no campaign is run: the renderers read results.json alone)."""
    data = json.loads(EXAMPLE.read_text())
    for run in data["runs"]:
        if run["arm"] in provenance and run.get("attn"):
            p = provenance[run["arm"]]
            raw = p.model_dump(mode="json", by_alias=True) if isinstance(p, Provenance) else p
            run["attn"]["backend"] = {"name": run["arm"], **({"provenance": raw} if raw is not None else {})}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return voiced(read_results(path))  # worded again, as the analysis of such runs would


def summary_lines(res) -> list[str]:
    """The summary's lines of ``res`` as the analysis words them (after the test's edits)."""
    return voiced(res).summary.lines


def arm_lines(lines: list[str]) -> dict[str, str]:
    """Each arm's verdict line: the first naming it (a note on its floor may follow)."""
    out: dict[str, str] = {}
    for line in lines[1:]:
        out.setdefault(line.split(" (")[0].split(":")[0], line)
    return out


def page_badge(res, arm: str) -> str:
    res = voiced(res)
    page = render_html(res, [summary_section(res)], review=review_view(res, None))
    return re.search(rf'<div class="badge [^"]*" data-arm="{arm}".*?\n</div>', page, re.S).group(0)


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="the CPU example's results.json is not committed")
def test_an_emulator_says_what_it_models_and_whether_that_was_measured(tmp_path):
    provenance = {"sage_emul_thuml": MEASURED, "sage_emul_aiter": UNMEASURED, "sage_emul_thuml_hybrid": None}
    res = with_provenance(tmp_path, provenance)
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
    res = voiced(res)
    lines = res.summary.lines
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


def test_the_summary_says_which_file_was_scored_lossless_or_h264_aac():
    cpu, h200 = example(ONE_SEED), example(H200)  # the H3 example measured its mp4s, the H200 one lossless
    assert cpu.pixel_source.startswith("output.mp4") and h200.pixel_source.startswith("lossless")
    mp4, lossless = (next(ln for ln in summary_lines(r) if ln.startswith("scored on ")) for r in (cpu, h200))
    assert mp4.startswith("scored on output.mp4 (H.264/AAC): the codec's error is in every reading")
    assert lossless.startswith("scored on lossless copies (output_lossless.mkv)") and "H.264" not in lossless
    assert all(
        not line.startswith("scored on")
        for line in summary_lines(cpu.model_copy(update={"pixel_source": ""}))
    )
